"""The ROS 2 edge of dynamics_node: only what talks to ROS (the library, `dynamics_node`, knows nothing
of ROS; the simulated robot's physics is dynamics_node/sim/).

    params/               the parameter table (defaults, types, ranges), a pure validate() -> Config, the
                          joint law's parameters (friction_model.*)
    model_state.py        which robot description, loading, payloads; the immutable ModelState
    conversions.py        messages <-> numpy, with the request checks that name the field at fault
    services.py           one table of services (shared with the CLI); a small handler per service
    contact_services.py, payload_services.py, linearized.py, model_terms.py: handlers with conversions
                          of their own
    stream.py             joint states in (merged by name), gravity torques and effort commands out
    stream_process.py, stream_executor.py, stream_observer.py, latest.py, scheduling.py: the stream's
                          process, its executor, the momentum observer on it, the shared latest joint
                          state, thread priorities
    simulation.py         the simulated robot's loop in the stream process (publishing)
    diagnostics.py        /diagnostics, ~/markers, timings
    node.py               DynamicsNode: wiring only
    process.py            executors, threads, priority, signals, main()
"""
