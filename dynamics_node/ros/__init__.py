"""The ROS 2 edge of dynamics_node (the core, `dynamics_node`, knows nothing of ROS).

    node_params.py        the parameter table (defaults, types, ranges) and a pure validate() -> Config
    model_state.py   which robot description, loading, payloads; the immutable ModelState (no rclpy)
    conversions.py   messages <-> numpy, with the request checks that name the field at fault
    services.py      one table of services (shared with the CLI); a small handler per service
    stream.py        joint states in (merged by name), gravity torques and effort commands out
    diagnostics.py   /diagnostics, ~/markers, timings
    node.py          DynamicsNode: wiring only
    process.py       executors, threads, priority, signals, main()
    cli.py           dynamics_cli
"""
