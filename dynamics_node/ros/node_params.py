"""The node's parameters: one table (defaults, types, ranges, descriptions) and a pure `validate`.

`PARAMETERS` is the single source: the node declares exactly these (ranges in their descriptors),
`dynamics_node --help` lists them, the tests check the shipped config files against it, and a name given
at start that is none of them is warned of (`unknown_overrides`). `validate(values) -> Config` checks
values without a node, model or ROS context; what needs the model (a payload's link, command_joints,
simulation_pd_gains...) is checked when the model state is built, before a change is accepted.

Plausibility bounds (values no robot has are refused with the reason; the previous value stays):
gravity at most 100 m/s^2 in magnitude; a payload of at most 10,000 kg, its centre of mass within
10 m of its link's origin, its inertia entries at most 10,000 kg m^2.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import NamedTuple, Optional

from ..errors import ConfigError, clip  # noqa: F401 (ConfigError: the node's modules import it from here)

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


def _test_bench(v) -> dict:
    """The issue-30 parameters of the simulated robot (joints are checked against the model later)."""
    out = {}
    for key in ("simulation_limit_restitution", "simulation_default_damping"):
        lo, hi = PARAMETERS[key].range
        out[key] = _number(v[key], key, lo, hi, f"[{lo:g}, {hi:g}]")
    ob = _floats(v["simulation_obstacles"], "simulation_obstacles")
    if len(ob) % 6:
        raise ConfigError(f"simulation_obstacles: expected 6 values per box (x y z sx sy sz), got {len(ob)}")
    for k in range(len(ob) // 6):
        if min(ob[6 * k + 3:6 * k + 6]) <= 0.0:
            raise ConfigError(f"simulation_obstacles[{6 * k + 3}:{6 * k + 6}]: box {k}'s size "
                              f"{list(ob[6 * k + 3:6 * k + 6])} must be > 0 in x, y and z")
    out["simulation_obstacles"] = ob
    mode = str(v["simulation_command_interface"])
    if mode not in ("effort", "position", "velocity"):
        raise ConfigError(f"simulation_command_interface: '{clip(mode)}' is not effort, position or velocity")
    out["simulation_command_interface"] = mode
    gains = _floats(v["simulation_pd_gains"], "simulation_pd_gains")
    if len(gains) % 2 or any(g < 0 for g in gains):
        raise ConfigError(f"simulation_pd_gains: expected kp kd pairs of values >= 0, got {list(gains)}")
    out["simulation_pd_gains"] = gains
    return out


SIMULATION_KEYS = frozenset(k for k in PARAMETERS if k.startswith("simulation") or k == "real_time_factor")
MAX_TERMS_POINT = 10.0  # m from the link origin, as a payload's centre of mass
MODEL_KEYS = frozenset(("robot_description", "urdf_path", "xacro_args", "strict", "floating_base",
                        "armature", "friction"))
PAYLOAD_KEYS = frozenset(("payload.link", "payload.mass", "payload.center_of_mass", "payload.inertia"))
# the joint law's parameters (friction_params.py); a change of them loads the model again
from .friction_params import FRICTION_KEYS, FRICTION_PARAMETERS, validate_friction  # noqa: E402
PARAMETERS.update({k: Param(*p) for k, p in FRICTION_PARAMETERS.items()})
MODEL_KEYS = MODEL_KEYS | FRICTION_KEYS


@dataclass(frozen=True)
class Config:
    """A validated set of parameter values (attribute names: the parameter names with '.' -> '_')."""
    robot_description: str
    urdf_path: str
    xacro_args: dict
    strict: bool
    floating_base: bool
    gravity: tuple
    armature: tuple
    friction: bool
    joint_states_topic: str
    joint_state_timeout: float
    effort_command_topic: str
    command_joints: tuple
    effort_limit_scale: float
    payload_link: str
    payload_mass: float
    payload_center_of_mass: tuple
    payload_inertia: tuple
    markers_rate: float
    stream_thread_priority: int
    services_nice: int = 10
    model_terms_links: tuple = ()
    model_terms_points: tuple = ()
    observer_gain: float = 50.0
    wrench_link: str = ""
    collision_threshold: tuple = ()
    simulation: bool = False
    simulation_rate: float = 1000.0
    real_time_factor: float = 1.0
    simulation_command_timeout: float = 0.5
    simulation_initial_positions: tuple = ()     # ((name, value), ...)
    simulation_wait_for_command: bool = False
    simulation_floor: tuple = (0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    simulation_contact_links: tuple = ()
    simulation_contact_points: tuple = ()
    simulation_friction: float = 0.5
    simulation_stiffness: float = 1.0e7
    simulation_damping: float = 100.0
    simulation_limit_restitution: float = 0.0
    simulation_obstacles: tuple = ()
    simulation_default_damping: float = 0.0
    simulation_command_interface: str = "effort"
    simulation_pd_gains: tuple = ()
    friction_model: tuple = ()                   # ((joint, ((field, value), ...)), ...)
    effort_command_friction: float = 0.0


def defaults() -> dict:
    return {k: (list(p.default) if isinstance(p.default, list) else p.default) for k, p in PARAMETERS.items()}


def _floats(value, name, n=None, what=""):
    try:
        v = [float(x) for x in value]
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: expected a list of numbers, got {value!r}") from None
    if n is not None and len(v) != n:
        raise ConfigError(f"{name}: expected {n} values ({what}), got {len(v)}")
    for k, x in enumerate(v):
        if not math.isfinite(x):
            raise ConfigError(f"{name}[{k}]: {x} is not finite")
    return tuple(v)


def _number(value, name, lo, hi, what):
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    if not (math.isfinite(x) and lo <= x <= hi):
        raise ConfigError(f"{name}: {x!r} is outside {what}")
    return x


def _topic(name, param, node_name, namespace, allow_empty):
    if not name:
        if allow_empty:
            return ""
        raise ConfigError(f"{param}: empty topic name (give a topic such as /joint_states)")
    from rclpy.expand_topic_name import expand_topic_name
    from rclpy.validate_full_topic_name import validate_full_topic_name
    try:
        validate_full_topic_name(expand_topic_name(name, node_name, namespace))
    except Exception as e:  # noqa: BLE001 - rclpy's InvalidTopicNameException and friends
        raise ConfigError(f"{param}: invalid topic name '{clip(name)}': {clip(str(e), 300)}") from None
    return name


def _xacro_args(value):
    out = {}
    for k, item in enumerate(value):
        name, sep, val = str(item).partition(":=")
        if not sep or not name.strip():
            raise ConfigError(f"xacro_args[{k}]: '{clip(str(item))}' is not of the form name:=value")
        out[name.strip()] = val
    return out


def check_payload_numbers(mass, com, inertia, prefix=""):
    """Finite and plausible payload numbers (the link is checked against the model elsewhere)."""
    m = _number(mass, f"{prefix}mass", 0.0, MAX_PAYLOAD_MASS, f"[0, {MAX_PAYLOAD_MASS:g}] kg")
    c = _floats(com, f"{prefix}center_of_mass", 3, "x y z")
    if math.sqrt(sum(x * x for x in c)) > MAX_PAYLOAD_COM:
        raise ConfigError(f"{prefix}center_of_mass: {list(c)} is more than {MAX_PAYLOAD_COM:g} m from "
                          "the link origin: no payload is that far out (check the units: metres)")
    i6 = _floats(inertia, f"{prefix}inertia", 6, "ixx ixy ixz iyy iyz izz")
    if max(abs(x) for x in i6) > MAX_PAYLOAD_INERTIA:
        raise ConfigError(f"{prefix}inertia: entries above {MAX_PAYLOAD_INERTIA:g} kg m^2 are not a "
                          "payload's (check the units: kg m^2)")
    return m, c, i6


def validate(values: dict, node_name: str = NODE_NAME, namespace: str = "/") -> Config:
    """Check every value; raise ConfigError naming the first bad parameter. Pure: no node needed."""
    v = defaults()
    v.update(values)
    for key in v:
        if key not in PARAMETERS:
            raise ConfigError(f"{key}: not a parameter of this node (see dynamics_node --help)")
    g = _floats(v["gravity"], "gravity", 3, "x y z in m/s^2")
    if math.sqrt(sum(x * x for x in g)) > MAX_GRAVITY:
        raise ConfigError(f"gravity: {list(g)} has a magnitude above {MAX_GRAVITY:g} m/s^2 "
                          "(no robot lives there; check the units: m/s^2)")
    arm = _floats(v["armature"], "armature")
    if any(a < 0 for a in arm):
        raise ConfigError(f"armature: values must be >= 0 kg m^2, got {list(arm)}")
    rate = _number(v["markers_rate"], "markers_rate", 0.0, 100.0, "[0, 100] Hz")
    if 0.0 < rate < MIN_MARKERS_RATE:
        raise ConfigError(f"markers_rate: {rate!r} Hz is below {MIN_MARKERS_RATE} Hz (0 turns the "
                          "markers off)")
    scale = _number(v["effort_limit_scale"], "effort_limit_scale", 0.0, 1.0, "(0, 1]")
    if scale <= 0.0:
        raise ConfigError("effort_limit_scale: must be > 0 (1.0 = the URDF effort limits)")
    prio = v["stream_thread_priority"]
    if isinstance(prio, bool) or not isinstance(prio, int) or not 0 <= prio <= 99:
        raise ConfigError(f"stream_thread_priority: must be an integer in [0, 99] (0 = ordinary "
                          f"scheduling), got {prio!r}")
    nice = v["services_nice"]
    if isinstance(nice, bool) or not isinstance(nice, int) or not 0 <= nice <= 19:
        raise ConfigError(f"services_nice: must be an integer in [0, 19], got {nice!r}")
    cmd = tuple(str(j) for j in v["command_joints"])
    for k, j in enumerate(cmd):
        if j in cmd[:k]:
            raise ConfigError(f"command_joints[{k}]: '{j}' is listed twice")
    pm, pc, pi = check_payload_numbers(v["payload.mass"], v["payload.center_of_mass"],
                                       v["payload.inertia"], prefix="payload.")
    desc = v["robot_description"] or ""
    if desc.strip() and not desc.lstrip().startswith("<"):
        raise ConfigError("robot_description: not URDF XML (the text must start with '<'); for a "
                          "file use urdf_path")
    gain = _number(v["observer_gain"], "observer_gain", 0.0, MAX_OBSERVER_GAIN, f"[0, {MAX_OBSERVER_GAIN:g}] 1/s")
    coll = _floats(v["collision_threshold"], "collision_threshold")
    if any(x <= 0 for x in coll):
        raise ConfigError(f"collision_threshold: values must be > 0 (N m), got {list(coll)}; empty turns "
                          "collision detection off")
    return Config(
        robot_description=desc, urdf_path=str(v["urdf_path"] or ""), xacro_args=_xacro_args(v["xacro_args"]),
        strict=bool(v["strict"]), floating_base=bool(v["floating_base"]), gravity=g, armature=arm,
        friction=bool(v["friction"]),
        joint_states_topic=_topic(v["joint_states_topic"], "joint_states_topic", node_name, namespace, False),
        joint_state_timeout=_number(v["joint_state_timeout"], "joint_state_timeout", 1e-3, 3600.0,
                                    "[0.001, 3600] s"),
        effort_command_topic=_topic(v["effort_command_topic"], "effort_command_topic", node_name,
                                    namespace, True),
        command_joints=cmd, effort_limit_scale=scale, payload_link=str(v["payload.link"] or ""),
        payload_mass=pm, payload_center_of_mass=pc, payload_inertia=pi, markers_rate=rate,
        stream_thread_priority=prio, services_nice=nice, observer_gain=gain, wrench_link=str(v["wrench_link"] or ""),
        collision_threshold=coll, **_model_terms(v), **_simulation(v), **validate_friction(v, ConfigError))


def _simulation(v) -> dict:
    """The simulated robot's parameters (the joints and links are checked against the model when the
    state is built, and only with simulation on: check_simulation)."""
    out = {"simulation": bool(v["simulation"])}
    for key in ("simulation_rate", "real_time_factor", "simulation_command_timeout", "simulation_friction",
                "simulation_stiffness", "simulation_damping"):
        lo, hi = PARAMETERS[key].range
        out[key] = _number(v[key], key, lo, hi, f"[{lo:g}, {hi:g}]")
    init = []
    for k, item in enumerate(v["simulation_initial_positions"]):
        name, sep, val = str(item).partition(":=")
        if not sep:  # joint=value too: easier to write on a command line, where := needs quotes in a list
            name, sep, val = str(item).partition("=")
        try:
            x = float(val) if sep and name.strip() else None
        except ValueError:
            x = None
        if x is None or not math.isfinite(x):
            raise ConfigError(f"simulation_initial_positions[{k}]: '{clip(str(item))}' is not of the form "
                              "joint:=value (or joint=value) with a finite value")
        if name.strip() in dict(init):
            raise ConfigError(f"simulation_initial_positions[{k}]: '{clip(name.strip())}' is given twice")
        init.append((name.strip(), x))
    out["simulation_initial_positions"] = tuple(init)
    out["simulation_wait_for_command"] = bool(v["simulation_wait_for_command"])
    floor = _floats(v["simulation_floor"], "simulation_floor")
    if floor and (len(floor) != 6 or not any(floor[3:])):
        raise ConfigError(f"simulation_floor: expected 6 values (a point x y z and a non-zero normal nx ny nz) "
                          f"or none (no floor), got {list(floor)}")
    out["simulation_floor"] = floor
    links = tuple(str(x) for x in v["simulation_contact_links"])
    pts = _floats(v["simulation_contact_points"], "simulation_contact_points")
    if pts and len(pts) != 3 * len(links):
        raise ConfigError(f"simulation_contact_points: expected 0 or {3 * len(links)} values (x y z for each of "
                          f"the {len(links)} simulation_contact_links), got {len(pts)}")
    out["simulation_contact_links"], out["simulation_contact_points"] = links, pts
    out.update(_test_bench(v))
    return out


def _model_terms(v) -> dict:
    """model_terms_links and model_terms_points: names, and 0 or 3 finite values per link within
    10 m of its origin (the links themselves are checked against the model: check_model_terms)."""
    links = tuple(str(x) for x in v["model_terms_links"])
    for k, name in enumerate(links):
        if not name:
            raise ConfigError(f"model_terms_links[{k}]: empty link name")
    pts = _floats(v["model_terms_points"], "model_terms_points")
    if pts and len(pts) != 3 * len(links):
        raise ConfigError(f"model_terms_points: expected 0 or {3 * len(links)} values (x y z for each of "
                          f"the {len(links)} model_terms_links), got {len(pts)}")
    for k in range(len(pts) // 3):
        if math.sqrt(sum(x * x for x in pts[3 * k:3 * k + 3])) > MAX_TERMS_POINT:
            raise ConfigError(f"model_terms_points[{3 * k}:{3 * k + 3}]: {list(pts[3 * k:3 * k + 3])} is more "
                              f"than {MAX_TERMS_POINT:g} m from the link origin (check the units: metres)")
    return {"model_terms_links": links, "model_terms_points": pts}


def check_model_terms(cfg: Config, link_names) -> None:
    """model_terms_links against a model's links, only when set (called when the state is built)."""
    known = set(link_names)
    for k, name in enumerate(cfg.model_terms_links):
        if name not in known:
            shown = ", ".join(list(link_names)[:12]) + (", ..." if len(link_names) > 12 else "")
            raise ConfigError(f"model_terms_links[{k}]: the model has no link '{clip(name)}' (its links: "
                              f"{shown}); leave model_terms_links empty for no model_terms topic")


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
