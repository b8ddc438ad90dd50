"""A simulated robot and the dynamics node beside it on the same effort command topic.

    ros2 launch dynamics_node sim.launch.py                                # arm7 held by its gravity torques
    ros2 launch dynamics_node sim.launch.py gravity_compensation:=false    # no command: it falls to the floor
    ros2 launch dynamics_node sim.launch.py urdf_path:=/abs/robot.urdf real_time_factor:=0.5

`robot_sim` is dynamics_node with `simulation: true`: it integrates the robot's forward dynamics with
soft contacts on the floor z = 0 at 1 kHz, publishes /joint_states and /clock and applies the efforts
it hears on `effort_command_topic`. `dynamics_node` (with `params_file`) computes the gravity torques
of those joint states and sends them on that topic, so the arm holds its pose; the simulated robot
waits at its initial pose until that first command arrives (simulation_wait_for_command), as a robot
whose brakes release when its controller starts. With gravity_compensation:=false only the
simulated robot runs: it starts at once, falls, lands on the floor and comes to rest there.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

PACKAGE = "dynamics_node"
EXECUTABLE = "dynamics_node"


def generate_launch_description():
    share = get_package_share_directory(PACKAGE)
    urdf = LaunchConfiguration("urdf_path")
    topic = LaunchConfiguration("effort_command_topic")
    gc = LaunchConfiguration("gravity_compensation")
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=os.path.join(share, "config", "default.yaml"),
                              description="YAML parameter file of the dynamics node"),
        DeclareLaunchArgument("urdf_path", default_value=os.path.join(share, "urdf", "arm7.urdf"),
                              description="URDF file of the robot (simulated and modelled)"),
        DeclareLaunchArgument("effort_command_topic", default_value="/effort_controller/commands",
                              description="std_msgs/Float64MultiArray effort command, model joint order"),
        DeclareLaunchArgument("gravity_compensation", default_value="true",
                              description="true: the dynamics node holds the robot; false: no command"),
        DeclareLaunchArgument("real_time_factor", default_value="1.0",
                              description="simulated seconds per wall-clock second"),
        Node(
            package=PACKAGE, executable=EXECUTABLE, name="robot_sim", output="screen", emulate_tty=True,
            parameters=[{"urdf_path": urdf, "simulation": True, "effort_command_topic": topic,
                         "joint_states_topic": "/joint_states", "simulation_wait_for_command": gc,
                         "real_time_factor": LaunchConfiguration("real_time_factor")}],
        ),
        Node(
            package=PACKAGE, executable=EXECUTABLE, name="dynamics_node", output="screen", emulate_tty=True,
            condition=IfCondition(gc),
            parameters=[LaunchConfiguration("params_file"),
                        {"urdf_path": urdf, "joint_states_topic": "/joint_states", "effort_command_topic": topic}],
        ),
    ])
