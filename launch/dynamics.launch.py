"""Launch dynamics_node on the default robot (or another URDF / parameter file).

    ros2 launch dynamics_node dynamics.launch.py
    ros2 launch dynamics_node dynamics.launch.py urdf_path:=/path/robot.urdf
    ros2 launch dynamics_node dynamics.launch.py params_file:=/path/params.yaml

Needs launch and launch_ros (a ROS 2 distribution); on the pip-only machines of this project
use `make run`, which starts the same executable with the same parameter file.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

PACKAGE = "dynamics_node"
EXECUTABLE = "dynamics_node"


def generate_launch_description(params="default.yaml", urdf="arm7.urdf"):
    """The node with config/<params> and urdf/<urdf> of this package as defaults (dual_arm.launch.py
    reuses this with the dual-arm example's files)."""
    share = get_package_share_directory(PACKAGE)
    default_params = os.path.join(share, "config", params)
    default_urdf = os.path.join(share, "urdf", urdf)
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=default_params,
                              description="YAML parameter file of dynamics_node"),
        DeclareLaunchArgument("urdf_path", default_value=default_urdf,
                              description="URDF file of the robot"),
        DeclareLaunchArgument("joint_states_topic", default_value="/joint_states",
                              description="sensor_msgs/JointState input topic"),
        Node(
            package=PACKAGE,
            executable=EXECUTABLE,
            name="dynamics_node",
            output="screen",
            emulate_tty=True,
            parameters=[
                LaunchConfiguration("params_file"),
                {"urdf_path": LaunchConfiguration("urdf_path"),
                 "joint_states_topic": LaunchConfiguration("joint_states_topic")},
            ],
        ),
    ])
