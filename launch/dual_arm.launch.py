"""Launch dynamics_node on the dual-arm closed-loop example (urdf/dual_arm_object.urdf with
config/dual_arm.yaml): two arms holding one object whose halves are joined by a spherical joint.

    ros2 launch dynamics_node dual_arm.launch.py

The same launch description as dynamics.launch.py (loaded from beside this file), other defaults.
On the pip-only machines of this project use `make run-dual-arm`.
"""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "dynamics_node_base_launch", os.path.join(os.path.dirname(os.path.abspath(__file__)), "dynamics.launch.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)


def generate_launch_description():
    return _base.generate_launch_description(params="dual_arm.yaml", urdf="dual_arm_object.urdf")
