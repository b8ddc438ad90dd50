"""The node's parameter values checked: a pure `validate(values) -> Config`.

`validate` checks values without a node, model or ROS context against the table (node_params.py); what
needs the model (a payload's link, command_joints, simulation_pd_gains...) is checked when the model
state is built, before a change is accepted.

Plausibility bounds (values no robot has are refused with the reason; the previous value stays):
gravity at most 100 m/s^2 in magnitude; a payload of at most 10,000 kg, its centre of mass within
10 m of its link's origin, its inertia entries at most 10,000 kg m^2.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import ConfigError, clip
from .friction_params import validate_friction
from .node_params import (MAX_GRAVITY, MAX_OBSERVER_GAIN, MAX_PAYLOAD_COM, MAX_PAYLOAD_INERTIA, MAX_PAYLOAD_MASS,
                          MAX_TERMS_POINT, MIN_MARKERS_RATE, NODE_NAME, PARAMETERS, defaults)


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
    simulation_publish_rate: float = 100.0
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
    for key in ("simulation_rate", "real_time_factor", "simulation_publish_rate", "simulation_command_timeout",
                "simulation_friction", "simulation_stiffness", "simulation_damping"):
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
    out.update(_simulation_world(v))
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


def _simulation_world(v) -> dict:
    """The simulated robot's limit restitution, default damping, box obstacles, command interface and PD
    gains (joints are checked against the model later)."""
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
