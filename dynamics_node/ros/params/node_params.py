"""The node's parameters: one table (defaults, types, ranges, descriptions) and its rclpy side.

`PARAMETERS` is the single source: the node declares exactly these (`declare`, ranges in their
descriptors), `dynamics_node --help` lists them (`help_text`), the tests check the shipped config files
against it, and a name given at start that is none of them is warned of (`unknown_overrides`). The
values are checked by param_checks.validate.
"""
from __future__ import annotations

import difflib
from typing import NamedTuple, Optional

from ...errors import clip
from .friction_params import FRICTION_KEYS, FRICTION_PARAMETERS

NODE_NAME = "dynamics_node"

MAX_GRAVITY = 100.0          # m/s^2
MAX_PAYLOAD_MASS = 1.0e4     # kg
MAX_PAYLOAD_COM = 10.0       # m from the link origin
MAX_PAYLOAD_INERTIA = 1.0e4  # kg m^2
MIN_MARKERS_RATE = 0.01      # Hz; below it (and above 0) a timer period would be meaningless
MAX_OBSERVER_GAIN = 1.0e4    # 1/s


class Param(NamedTuple):
    default: object
    type: str                       # bool, integer, double, string, double_array, string_array
    description: str
    range: Optional[tuple] = None   # (from, to) for integer and double parameters


PARAMETERS = {
    "robot_description": Param("", "string", "URDF XML text of the robot (takes precedence over "
                               "urdf_path). With both empty, the node takes the robot from the "
                               "robot_description topic (std_msgs/String, transient local)."),
    "urdf_path": Param("", "string", "URDF or xacro file, used when robot_description is empty: "
                       "absolute, relative to the working directory or to this package's share "
                       "folder, or package://<pkg>/<path>."),
    "xacro_args": Param([], "string_array", "Arguments of a .xacro urdf_path, each 'name:=value'."),
    "strict": Param(False, "bool", "True: a physically doubtful description (inertias breaking "
                    "the triangle inequality, unknown joints in transmissions) is refused "
                    "instead of loaded with warnings, and so is an unknown parameter name at start."),
    "floating_base": Param(False, "bool", "True: the root link is a free-floating body (q starts "
                           "with x y z qx qy qz qw)."),
    "gravity": Param([0.0, 0.0, -9.81], "double_array", "Gravity vector in the world (root) frame "
                     "[m/s^2], 3 finite values of magnitude at most 100; applies without restart."),
    "armature": Param([], "double_array", "Reflected rotor inertia added to the diagonal of H "
                      "[kg m^2]: empty = none, one value = every joint, or one value per joint in "
                      "the model's joint order."),
    "friction": Param(False, "bool", "True: the joint law acts in inverse/forward dynamics: the URDF "
                      "<dynamics> damping (viscous) and friction (Coulomb), or friction_model.*."),
    "joint_states_topic": Param("/joint_states", "string", "sensor_msgs/JointState input "
                                "(reliable and best-effort publishers; messages of several "
                                "drivers are merged by joint name)."),
    "joint_state_timeout": Param(0.5, "double", "A joint's value older than this [s] is stale: no "
                                 "torque is computed without a fresh value of every joint it needs, "
                                 "and /diagnostics names the stale joints.", (1e-3, 3600.0)),
    "effort_command_topic": Param("", "string", "If not empty, gravity torques are also published "
                                  "here as std_msgs/Float64MultiArray in command_joints order (for "
                                  "a ros2_control forward command controller), saturated at the "
                                  "URDF effort limits."),
    "command_joints": Param([], "string_array", "Joint order of the effort command; empty = every "
                            "joint with a gravity torque in the model's joint order (logged at "
                            "start). Checked only when effort_command_topic is set."),
    "effort_limit_scale": Param(1.0, "double", "Scale in (0, 1] of the URDF <limit effort> at "
                                "which effort commands are saturated.", (0.0, 1.0)),
    "payload.link": Param("", "string", "Link carrying a payload given by parameters (empty = "
                          "none); set_payload can add more. Applies without restart."),
    "payload.mass": Param(0.0, "double", "Payload mass [kg], 0 to 10000 (0 = no payload; then "
                          "payload.link is not checked).", (0.0, MAX_PAYLOAD_MASS)),
    "payload.center_of_mass": Param([0.0, 0.0, 0.0], "double_array", "Payload centre of mass in "
                                    "the link frame [m], 3 values, within 10 m of the link origin."),
    "payload.inertia": Param([0.0] * 6, "double_array", "Payload inertia about its centre of mass, "
                             "link axes: ixx ixy ixz iyy iyz izz [kg m^2]."),
    "markers_rate": Param(2.0, "double", "Rate [Hz] of ~/markers (centre of mass, payloads) while "
                          "someone subscribes: 0 = off, else 0.01 to 100.", (0.0, 100.0)),
    "stream_thread_priority": Param(50, "integer", "Real-time priority (SCHED_FIFO, 1-99) of the "
                                    "stream process that turns joint states into torques (every "
                                    "thread of it but the model loader's), as ros2_control's "
                                    "controller manager does for its loop; 0 = ordinary scheduling. "
                                    "Needs CAP_SYS_NICE or an rtprio limit (/etc/security/limits.conf); "
                                    "without, the node says so once and keeps ordinary scheduling.",
                                    (0, 99)),
    "services_nice": Param(10, "integer", "Nice value (0-19) of the node's main process, which "
                           "answers the services (the stream has a process of its own): under CPU "
                           "contention service work yields to the controller beside the node. "
                           "Raising it is always allowed; lowering it needs CAP_SYS_NICE.", (0, 19)),
    # the momentum observer (ros/stream_observer.py)
    "observer_gain": Param(50.0, "double", "Gain K [1/s] of the momentum observer of external joint "
                           "torques, run on joint states that carry effort (measured joint torque); "
                           "0 = off, else up to 10000.", (0.0, MAX_OBSERVER_GAIN)),
    "wrench_link": Param("", "string", "Link whose external wrench (at its origin, its axes) is "
                         "estimated from the external torques; empty = the tip of the longest chain."),
    "collision_threshold": Param([], "double_array", "Per joint [N m or N]: /dynamics_node/collision "
                                 "is true while some |external torque| exceeds it; empty = off, one "
                                 "value = every joint, or one per joint in the model's order."),
}
PARAMETERS.update({  # the model_terms topic (model_terms.py)
    "model_terms_links": Param([], "string_array", "Links whose Jacobian, dJ/dt and operational-space "
                               "inertia are published with H, C, g and C qd + g on ~/model_terms "
                               "(dynamics_interfaces/msg/ModelTerms) for every usable joint state, "
                               "after its torques; empty = no topic. Checked against the model when set."),
    "model_terms_points": Param([], "double_array", "Points of the model_terms_links in their link "
                                "frames [m], x y z per link; empty = the link origins."),
})
PARAMETERS.update({  # the simulated robot (simulation.py, sim/world.py)
    "simulation": Param(False, "bool", "True: the node is a simulated robot: it owns the state, integrates "
                        "forward dynamics with the contacts of its environment at simulation_rate, applies the "
                        "efforts commanded on effort_command_topic and publishes joint_states_topic and /clock "
                        "(instead of computing gravity torques from joint states)."),
    "simulation_rate": Param(1000.0, "double", "Steps per second of simulated time [Hz], 1 to 10000.",
                             (1.0, 10000.0)),
    "real_time_factor": Param(1.0, "double", "Simulated seconds per wall-clock second, 0.01 to 100.",
                              (0.01, 100.0)),
    "simulation_publish_rate": Param(100.0, "double", "Rate [Hz of simulated time] of joint_states_topic and "
                                     "/clock (and a floating base's pose and twist), published together at the "
                                     "first step at or after each multiple of 1/rate s, while every step is "
                                     "simulated at simulation_rate; at or above simulation_rate: every step. "
                                     "1 to 10000; the default is ros2_control's controller_manager update_rate.",
                                     (1.0, 10000.0)),
    "simulation_command_timeout": Param(0.5, "double", "A joint's effort command older than this [s of "
                                        "simulated time] counts as zero.", (1e-3, 3600.0)),
    "simulation_initial_positions": Param([], "string_array", "Initial joint positions, each 'joint:=value' "
                                          "or 'joint=value' (rad or m; floating base: root.x .. root.qw too); "
                                          "unnamed joints start at 0, at rest."),
    "simulation_wait_for_command": Param(False, "bool", "True: the simulation and /clock wait at the initial "
                                         "state until the first effort command arrives (a robot whose brakes "
                                         "release when its controller starts)."),
    "simulation_floor": Param([0.0, 0.0, 0.0, 0.0, 0.0, 1.0], "double_array", "The floor plane: a point and "
                              "its normal (toward the robot) in the root link's frame, 6 values; empty = "
                              "no floor, no contacts."),
    "simulation_contact_links": Param([], "string_array", "Links with a contact point against the floor; "
                                      "empty = every moving link."),
    "simulation_contact_points": Param([], "double_array", "The contact point of each of "
                                       "simulation_contact_links in its frame [m], x y z per link; empty = "
                                       "the link origins."),
    "simulation_friction": Param(0.5, "double", "Coulomb friction coefficient of the floor, 0 to 100.",
                                 (0.0, 100.0)),
    "simulation_stiffness": Param(1.0e7, "double", "Stiffness of the floor and obstacles per contact [N/m] "
                                  "(Featherstone §11.8), 1 to 1e9; the default keeps an arm's collision points "
                                  "within 1 mm of the surface, landing included.", (1.0, 1.0e9)),
    "simulation_damping": Param(100.0, "double", "Damping of the floor per contact [N s/m], 0.01 to 1e7.",
                                (0.01, 1.0e7)),
})
PARAMETERS.update({  # the simulated robot as a controller test bench (sim/world.py, env.py, shapes.py)
    "simulation_limit_restitution": Param(0.0, "double", "Restitution e of the joint limits (URDF <limit lower "
                                          "upper> of revolute and prismatic joints, hard constraints in joint "
                                          "space): a joint hitting its stop leaves it at e times its speed; 0 to 1.",
                                          (0.0, 1.0)),
    "simulation_obstacles": Param([], "double_array", "Box obstacles (a table, a wall) besides the floor: x y z "
                                  "sx sy sz per box (centre and size [m], axis-aligned in the root link's frame); "
                                  "the links' collision shapes touch them like the floor."),
    "simulation_default_damping": Param(0.0, "double", "Viscous damping [N m s/rad or N s/m] of every joint whose "
                                        "model has none (no URDF <dynamics damping>, or friction false), so that a "
                                        "released arm comes to rest; 0 to 10000 (a value of 0.5-2 suits an arm of "
                                        "a few kg per link).", (0.0, 1.0e4)),
    "simulation_command_interface": Param("effort", "string", "What the commands on effort_command_topic are: "
                                          "effort (N m or N), position (rad or m) or velocity (rad/s or m/s); "
                                          "position and velocity commands drive a joint-space PD loop at every "
                                          "step (simulation_pd_gains), as gz_ros2_control does."),
    "simulation_pd_gains": Param([], "double_array", "Gains of the PD loop of position and velocity commands: "
                                 "kp kd for every joint, or kp kd per joint in the model's joint order [N m/rad, "
                                 "N m s/rad]; empty = from the model: kp = I w^2, kd = 2 I w with I the joint's "
                                 "diagonal inertia at the initial pose and w = 2 pi 10 rad/s."),
})


SIMULATION_KEYS = frozenset(k for k in PARAMETERS if k.startswith("simulation") or k == "real_time_factor")
MAX_TERMS_POINT = 10.0  # m from the link origin, as a payload's centre of mass
MODEL_KEYS = frozenset(("robot_description", "urdf_path", "xacro_args", "strict", "floating_base",
                        "armature", "friction"))
PAYLOAD_KEYS = frozenset(("payload.link", "payload.mass", "payload.center_of_mass", "payload.inertia"))
# the joint law's parameters (friction_params.py); a change of them loads the model again
PARAMETERS.update({k: Param(*p) for k, p in FRICTION_PARAMETERS.items()})
MODEL_KEYS = MODEL_KEYS | FRICTION_KEYS


def defaults() -> dict:
    return {k: (list(p.default) if isinstance(p.default, list) else p.default) for k, p in PARAMETERS.items()}


def unknown_overrides(node) -> list:
    """A line per name given at start (parameter file, -p) that is no parameter: rclpy ignores it in silence."""
    names = [n for n in sorted(getattr(node, "_parameter_overrides", None) or {})
             if not (node.has_parameter(n) or n.startswith("qos_overrides."))]
    return [f"unknown parameter '{clip(n)}' (a parameter file or -p) is ignored: " + next(
        (f"did you mean '{m}'?" for m in difflib.get_close_matches(n, list(PARAMETERS), n=1, cutoff=0.6)),
        "see dynamics_node --help") for n in names]


def descriptor(name: str):
    """The rcl_interfaces ParameterDescriptor of a parameter, with its range."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType

    p = PARAMETERS[name]
    ptype = getattr(ParameterType, "PARAMETER_" + p.type.upper())
    d = ParameterDescriptor(name=name, type=ptype, description=p.description)
    if p.range is not None and p.type == "double":
        d.floating_point_range = [FloatingPointRange(from_value=float(p.range[0]), to_value=float(p.range[1]))]
    elif p.range is not None and p.type == "integer":
        d.integer_range = [IntegerRange(from_value=int(p.range[0]), to_value=int(p.range[1]), step=1)]
    return d


def declare(node, urdf_path_default: str = "") -> dict:
    """Declare every parameter of the table on an rclpy node (with its descriptor) and return the
    values it starts with (overrides from the command line or a parameter file applied)."""
    from rclpy.exceptions import ParameterUninitializedException
    from rclpy.parameter import Parameter

    for name, p in PARAMETERS.items():
        default = urdf_path_default if (name == "urdf_path" and urdf_path_default) else p.default
        d = descriptor(name)
        ptype = Parameter.Type(d.type)
        node.declare_parameter(name, ptype if isinstance(default, list) and not default else default, d)
        try:  # an empty list has no type for rclpy: declared by type, uninitialised unless overridden
            node.get_parameter(name)
        except ParameterUninitializedException:  # that, or `-p name:=[]` on an array with a default: empty
            node.set_parameters([Parameter(name, ptype, [])])
    return {name: plain(name, node.get_parameter(name).value) for name in PARAMETERS}


def plain(name: str, v):
    """A parameter value as validate() takes it: the default for None, a list for an array."""
    v = PARAMETERS[name].default if v is None else v
    return v if isinstance(v, (str, bool, int, float)) else list(v)


def help_text() -> str:
    lines = ["Parameters:"]
    for name, p in PARAMETERS.items():
        lines.append(f"  {name} ({p.type}, default {p.default!r}): {p.description}")
    return "\n".join(lines)
