"""Tools that run beside the node: `dynamics_cli` (dynamics_cli.py: calls a running node's services, its
parameters and topics from a shell), the payload recorder it uses (record.py) and their ROS client
calls (calls.py); `dynamics_summary` (summary.py: a model's summary and check,
no ROS). They import the node's modules (dynamics_node/ros: the service table, message
formats) and never the reverse. The offline identification tool `dynamics_identify` is
dynamics_node/identify (no ROS at all)."""
