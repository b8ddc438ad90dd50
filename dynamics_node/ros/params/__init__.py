"""The node's parameters, by idea:

    node_params.py        the table (defaults, types, ranges, descriptions) and its rclpy side: declare,
                          descriptors, --help, unknown names
    param_checks.py       a pure validate(values) -> Config, the plausibility bounds
    friction_params.py    the joint law's parameters (friction_model.*), as OUT.yaml writes them
"""
