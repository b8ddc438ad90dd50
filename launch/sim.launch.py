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

    ros2 launch dynamics_node sim.launch.py rviz:=true

also starts robot_state_publisher (the URDF, or the xacro's output, as `robot_description`; TF from
the simulated joint states) and rviz2 with config/sim.rviz: the robot, TF, the gravity torques as
efforts, `/dynamics_node/markers` (centre of mass, payloads), `/robot_sim/contact_markers` (floor
contacts and their forces) and `/dynamics_node/external_wrench`, in the robot's root link (the
fixed frame is set to it). Where robot_state_publisher or rviz2 is not installed, one line says
which, and the rest runs without them.
"""
import os
import tempfile
import xml.etree.ElementTree as ET

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

PACKAGE = "dynamics_node"
EXECUTABLE = "dynamics_node"
VIEWERS = ("robot_state_publisher", "rviz2")


def installed(package):
    try:
        get_package_share_directory(package)
        return True
    except PackageNotFoundError:
        return False


def description(urdf_path):
    """The robot's URDF text: the file, or a .xacro's output (as dynamics_node reads it)."""
    if urdf_path.endswith(".xacro"):
        import xacro
        return xacro.process_file(urdf_path).toxml()
    with open(urdf_path, encoding="utf-8") as f:
        return f.read()


def root_link(urdf_text):
    """The link that is no joint's child (rviz's fixed frame: the markers are drawn in it)."""
    robot = ET.fromstring(urdf_text)
    children = {j.find("child").get("link") for j in robot.iter("joint") if j.find("child") is not None}
    return next((link.get("name") for link in robot.iter("link") if link.get("name") not in children), "world")


def viewers(context):
    """robot_state_publisher and rviz2 when rviz:=true, those of them that are installed; one line
    naming those that are not."""
    if LaunchConfiguration("rviz").perform(context).lower() not in ("true", "1", "yes"):
        return []
    missing = [p for p in VIEWERS if not installed(p)]
    actions = []
    if missing:
        distro = os.environ.get("ROS_DISTRO", "$ROS_DISTRO")
        apt = " ".join(f"ros-{distro}-{p.replace('_', '-')}" for p in missing)
        actions.append(LogInfo(msg=f"rviz:=true: {' and '.join(missing)} not installed (apt install {apt}): "
                                   "going on without"))
    if len(missing) == len(VIEWERS):
        return actions
    urdf = description(LaunchConfiguration("urdf_path").perform(context))
    if "robot_state_publisher" not in missing:
        actions.append(Node(package="robot_state_publisher", executable="robot_state_publisher",
                            name="robot_state_publisher", output="screen",
                            parameters=[{"robot_description": urdf}]))
    if "rviz2" not in missing:
        config = LaunchConfiguration("rviz_config").perform(context)
        with open(config, encoding="utf-8") as f:
            text = f.read().replace("Fixed Frame: base_link", f"Fixed Frame: {root_link(urdf)}")
        fd, path = tempfile.mkstemp(prefix="dynamics_node_sim_", suffix=".rviz")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        actions.append(Node(package="rviz2", executable="rviz2", name="rviz2", output="screen",
                            arguments=["-d", path]))
    return actions


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
        DeclareLaunchArgument("rviz", default_value="false",
                              description="true: also robot_state_publisher and rviz2, where installed"),
        DeclareLaunchArgument("rviz_config", default_value=os.path.join(share, "config", "sim.rviz"),
                              description="rviz2 configuration (its fixed frame is set to the root link)"),
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
        OpaqueFunction(function=viewers),
    ])
