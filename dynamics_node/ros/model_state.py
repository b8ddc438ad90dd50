"""The node's model state: which robot description, loading it, payloads, and what the stream needs.

No rclpy here: everything is a function of a validated `params.Config`, the text received on the
robot_description topic (if any) and the payloads set by service, so it is testable in-process.

How the description is chosen (first that applies):
1. the `robot_description` parameter (URDF text);
2. the `urdf_path` parameter (a URDF file, or a .xacro file run through xacro with `xacro_args`);
3. the latest message on the `robot_description` topic (as robot_state_publisher publishes it);
   until one arrives the node serves "no model yet".

A `ModelState` is immutable and swapped as a whole (one attribute assignment): a request or a joint
state works on the state it started with.
"""
from __future__ import annotations

import math
import pathlib
import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

import dynamics_node as dn
from ..errors import ConfigError, clip, clip_names
from ..urdf import read_urdf
from .conversions import Conversions
from .params.friction_params import joint_friction_option
from .params.node_params import MODEL_KEYS, NODE_NAME
from .params.param_checks import Config, check_model_terms

WAITING = "waiting for the robot description on the robot_description topic"


def resolve_urdf_path(path: str) -> pathlib.Path:
    """Find a URDF/xacro file: absolute, ~, package://pkg/rel, relative to cwd / share / source tree."""
    if path.startswith("package://"):
        pkg, _, rel = path[len("package://"):].partition("/")
        try:
            from ament_index_python.packages import get_package_share_directory
            p = pathlib.Path(get_package_share_directory(pkg)) / rel
        except Exception as e:  # noqa: BLE001 - PackageNotFoundError, ImportError
            raise ConfigError(f"urdf_path: cannot resolve '{clip(path)}': {clip(str(e))}") from None
        if not _is_file(p):
            raise ConfigError(f"urdf_path: file '{clip(str(p))}' (from '{clip(path)}') does not exist")
        return p
    p = pathlib.Path(path).expanduser()
    candidates = [p]
    if not p.is_absolute():
        candidates.append(pathlib.Path(__file__).resolve().parents[2] / p)  # source tree
        try:
            from ament_index_python.packages import get_package_share_directory
            candidates.append(pathlib.Path(get_package_share_directory(NODE_NAME)) / p)
        except Exception:  # noqa: BLE001 - not installed through ament
            pass
    for c in candidates:
        if _is_file(c):
            return c.resolve()
    raise ConfigError(f"urdf_path: file '{clip(path)}' does not exist (looked in: "
                      f"{clip_names([str(c) for c in candidates], 600, quote=False)}); give an absolute path")


def _is_file(p) -> bool:
    try:
        return p.is_file()
    except OSError:  # a name too long for the file system, and the like: no such file
        return False


@dataclass(frozen=True)
class Loaded:
    """A model as loaded (no gravity or payloads applied yet) and what the loader warned about."""
    model: object
    source: str            # "urdf_path: /abs/file.urdf", "robot_description parameter", "topic ..."
    warnings: tuple = ()


def load(cfg: Config, topic_text: Optional[str] = None, topic_name: str = "robot_description") -> Optional[Loaded]:
    """Load the robot of cfg; None when it is to come from the topic and none has arrived yet.
    Raises ConfigError or dn.DynamicsError naming the problem."""
    kw = {"floating_base": cfg.floating_base, "friction": cfg.friction}
    if cfg.strict:
        kw["strict"] = True
    if cfg.robot_description.strip():
        source, label = cfg.robot_description, "robot_description parameter"
    elif cfg.urdf_path:
        path = resolve_urdf_path(cfg.urdf_path)
        source, label = str(path), f"urdf_path {path}"
        if cfg.xacro_args:
            kw["xacro_args"] = dict(cfg.xacro_args)
    elif topic_text is not None:
        source, label = topic_text, f"topic {topic_name}"
    else:
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parsed = read_urdf(source, kw.pop("xacro_args", None))   # read and parsed once, loaded once or twice
        model = dn.load_model(parsed, **kw)
        arm = cfg.armature
        names = list(model.joint_names)
        extra = {}
        if len(arm) == 1:
            extra["armature"] = arm[0]
        elif len(arm) > 1:
            if len(arm) != len(names):
                raise ConfigError(f"armature: expected 0, 1 or {len(names)} values (one per joint in "
                                  f"the model's order {', '.join(names)}), got {len(arm)}")
            extra["armature"] = dict(zip(names, arm))
        law = joint_friction_option(cfg.friction_model, names, ConfigError) if cfg.friction else None
        if law is not None:  # the joint law of friction_model.* (OUT.yaml)
            extra["friction"] = law
        if extra:
            model = dn.load_model(parsed, **{**kw, **extra})
    notes = []
    for w in caught:
        text = str(w.message)
        if text not in notes:
            notes.append(text)
    return Loaded(model, label, tuple(notes))


def plan(cfg, changed, loaded, service_payloads, topic_text, topic_name, reload=False):
    """What a change leads to: (cfg, loaded, state, service payloads, payloads, topic text).
    The model is loaded again when a model parameter changed (or reload); raises ConfigError or
    dn.DynamicsError naming the problem, so that the caller keeps what it has."""
    if reload or changed & MODEL_KEYS or loaded is None:
        try:
            loaded = load(cfg, topic_text, topic_name)
        except (ConfigError, dn.DynamicsError):
            raise
        except Exception as e:  # noqa: BLE001 - anything else the loader raises, named
            raise ConfigError(f"cannot load the robot: {type(e).__name__}: {e}") from None
    payloads, service = payload_table(cfg, service_payloads, changed)
    state = build_state(loaded, cfg, payloads) if loaded is not None else None
    return cfg, loaded, state, service, payloads, topic_text


PREWARM_URDF = """<robot name="prewarm">
  <link name="a"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>
  <link name="b"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>
  <joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>"""


def warm_loader() -> "ModelState":
    """A two-link robot through load() and build_state(), and its gravity once: afterwards the modules
    that loading a description needs (the URDF loader, the model, the checks of build_state) and the
    ahead-of-time library of the torque kernels are in this process, so that the first robot that
    arrives costs only its own loading. Numba is not imported (gravity of a tree needs none of it).
    Returns the two-link model state (its compiled code serves any model: kernels do not depend on
    the model)."""
    from .params.param_checks import validate
    cfg = validate({"robot_description": PREWARM_URDF})
    st = build_state(load(cfg), cfg, {})
    dn.gravity(st.model, np.zeros(st.model.nq))
    return st


def warm_up(st, rest=True):
    """Run the core functions once so that no request pays the load of their kernels: those of the
    stream (rest=False: before serving), or the others (in a thread started at 'serving')."""
    if st is None:
        return
    m = st.model
    q, z = np.asarray(m.neutral(), dtype=float), np.zeros(m.nv)
    calls = ((dn.forward_dynamics, (q, z, z)), (dn.mass_matrix, (q,)), (dn.jacobian, (q, m.link_names[-1])),
             (dn.inverse_dynamics_batch, (q[None, :], z[None, :], z[None, :])), (dn.center_of_mass, (q,)),
             (dn.coriolis_matrix, (q, z)), (dn.jacobian_derivative, (q, z, m.link_names[-1])),
             (dn.operational_space_inertia, (q, m.link_names[-1])))  # model_terms'
    if not rest:
        calls = ((dn.gravity, (q,)), (dn.inverse_dynamics, (q, z, z)))
        if st.loops:
            calls += ((dn.closed_loop_inverse_dynamics, (q, z, z)),)
    for fn, args in calls:
        try:
            fn(m, *args)
        except Exception:  # noqa: BLE001 - warm-up must never stop the node (a neutral pose
            pass           # need not close the loops)


def payload_table(cfg: Config, service_payloads: dict, changed=frozenset()) -> tuple[dict, dict]:
    """(payloads to apply {link: (mass, com, inertia6)}, the service payloads to keep).

    The parameter payload first, then those of set_payload (which override it on the same link; a
    set_payload of mass 0 removes it). Changing a payload.* parameter makes the parameter payload
    apply again on its link. A parameter payload of mass 0 is inert: its link is not looked at."""
    service = dict(service_payloads)
    plink = cfg.payload_link
    if cfg.payload_mass > 0 and not plink:
        raise ConfigError("payload.mass: no payload.link is set (set the link that carries the "
                          "payload first, or both at once)")
    if changed & {"payload.link", "payload.mass", "payload.center_of_mass", "payload.inertia"} and plink:
        service.pop(plink, None)
    payloads = {}
    if plink and cfg.payload_mass > 0:
        payloads[plink] = (cfg.payload_mass, cfg.payload_center_of_mass, cfg.payload_inertia)
    payloads.update(service)
    return {k: v for k, v in payloads.items() if v[0] > 0}, service


@dataclass(frozen=True)
class ModelState:
    """Everything derived from one immutable model."""
    model: object
    conv: Conversions
    source: str
    warnings: tuple
    torque_names: tuple           # joints of ~/gravity_torques (model order, or the actuated joints)
    torque_q_index: np.ndarray    # their q indices
    torque_v_index: np.ndarray    # their v indices in a full nv torque vector
    command_names: tuple          # joints of the effort command (empty when there is none)
    command_index: np.ndarray     # indices into torque_names
    command_limit: np.ndarray     # saturation per command joint [N m or N] (inf: no URDF limit)
    loops: bool
    payloads: dict = field(default_factory=dict)


def build_state(loaded: Loaded, cfg: Config, payloads: dict) -> ModelState:
    """Apply gravity and payloads to the loaded model, and work out the stream's joint lists."""
    model = loaded.model.with_gravity(np.asarray(cfg.gravity, dtype=float))
    for link, (m, c, i6) in payloads.items():
        if link not in model.link_names:
            what = "payload.link" if link == cfg.payload_link else f"payload on link '{link}'"
            raise ConfigError(f"{what}: the model '{model.name}' has no link '{clip(link)}' (its links: "
                              f"{_cut(model.link_names)}); set payload.mass to 0 or name one of them")
        model = model.with_payload(link, float(m), tuple(c), tuple(i6))
    check_model_terms(cfg, model.link_names)
    loops = bool(model.loop_joints)
    torque = tuple(model.actuated_joints if loops else model.joint_names)
    tq = np.asarray([model.q_slice(j).start for j in torque], dtype=np.intp)
    tv = np.asarray([model.v_slice(j).start for j in torque], dtype=np.intp)
    if cfg.effort_command_topic:
        cmd = tuple(cfg.command_joints) or torque
        pos = {n: i for i, n in enumerate(torque)}
        for k, j in enumerate(cmd):
            if j not in pos:
                raise ConfigError(f"command_joints[{k}]: '{j}' is not one of the joints with a gravity "
                                  f"torque ({_cut(torque)}); leave command_joints empty for all of "
                                  "them in the model's order")
        cidx = np.asarray([pos[j] for j in cmd], dtype=np.intp)
        lim = np.array([_effort_limit(model, j) for j in cmd], dtype=float) * cfg.effort_limit_scale
    else:
        cmd, cidx, lim = (), np.zeros(0, np.intp), np.zeros(0)
    from .stream_observer import check_config
    check_config(model, cfg)  # wrench_link and collision_threshold against this model
    from ..sim.world import check_simulation
    check_simulation(cfg, model)  # the simulated robot's joints and links, with simulation on
    return ModelState(model, Conversions(model), loaded.source, loaded.warnings, torque, tq, tv,
                      cmd, cidx, lim, loops, dict(payloads))


class StateLoader:
    """The stream process's model states, built from the node's messages (no rclpy).

    `state(cfg, topic_text, payloads, changed)` is the model state for a ("state", ...) message: the
    one the stream has when nothing it is built from differs (the same object: the stream keeps its
    merge and observer), else a new one, from a loaded model kept by description (the two latest: a
    description forwarded first, then the node's state of it, or a refusal's return to the previous
    one, load nothing twice). A file named by urdf_path is read again when a model parameter changed
    (the file may have changed under the same name), but not for the node's state that follows a
    `preview` of the same inputs: that preview read it. `preview(...)` is the same for a model the
    node forwards before loading it itself (StreamProcess.preview). Both raise as load and
    build_state do, and keep the current state then."""

    KEEP = 2

    def __init__(self):
        self.loaded: dict = {}    # description key -> Loaded (insertion order: oldest first)
        self.current = None       # (key, cfg, topic text, payloads, state) of the latest state
        self.previewed = False    # the current state comes from a preview, read for its change

    @staticmethod
    def key(cfg, topic_text):
        return (cfg.robot_description, cfg.urdf_path, tuple(sorted(cfg.xacro_args.items())), cfg.strict,
                cfg.floating_base, cfg.armature, cfg.friction, cfg.friction_model,
                None if (cfg.robot_description.strip() or cfg.urdf_path) else topic_text)

    def state(self, cfg, topic_text, payloads, changed=frozenset(), previewing=False):
        key = self.key(cfg, topic_text)
        reread = bool(cfg.urdf_path and not cfg.robot_description.strip() and set(changed) & MODEL_KEYS)
        cur = self.current
        if (cur is not None and cur[0] == key and cur[1] == cfg and cur[3] == payloads
                and (not reread or (self.previewed and not previewing))):
            self.previewed = self.previewed and previewing
            return cur[4]
        loaded = None if reread else self.loaded.get(key)
        if loaded is None:
            loaded = load(cfg, topic_text)
        self.loaded.pop(key, None)
        self.loaded[key] = loaded
        while len(self.loaded) > self.KEEP:
            self.loaded.pop(next(iter(self.loaded)))
        st = build_state(loaded, cfg, payloads) if loaded is not None else None
        self.current = (key, cfg, topic_text, dict(payloads), st)
        self.previewed = previewing
        return st

    def preview(self, cfg, topic_text, payloads, changed=frozenset()):
        return self.state(cfg, topic_text, payloads, changed, previewing=True)

    def current_state(self):
        """(state, cfg) of the latest state, (None, None) before the first."""
        cur = self.current
        return (cur[4], cur[1]) if cur is not None else (None, None)


def _effort_limit(model, joint) -> float:
    lim = model.joint_limits.get(joint)
    e = lim[2] if lim else float("nan")
    return e if (math.isfinite(e) and e > 0) else math.inf


def _cut(names, limit=200) -> str:
    """A name list of at most about `limit` characters, with a count of what was left out."""
    out, n = [], 0
    for k, s in enumerate(names):
        if n + len(s) > limit and out:
            return ", ".join(out) + f" ... ({len(names) - k} more)"
        out.append(s)
        n += len(s) + 2
    return ", ".join(out)


def summary_lines(st: ModelState, cfg: Config) -> list:
    """What the node loaded, in a few lines, so a user sees at a glance that it is their robot."""
    m = st.model
    lines = [f"robot '{m.name}' from {st.source}",
             f"{len(m.joint_names)} joints, {m.total_mass():.3f} kg, root link '{m.root_link}', "
             f"{'floating' if m.floating_base else 'fixed'} base, gravity {list(cfg.gravity)}",
             f"joint order (model order, depth-first from the root): {', '.join(m.joint_names)}"]
    if st.loops:
        lines.append(f"closed loops: {', '.join(m.loop_joints)}; torques for the actuated joints "
                     f"{', '.join(st.torque_names)}")
    lines.append("payloads: " + ("; ".join(f"{k} {v[0]:g} kg" for k, v in st.payloads.items()) or "none"))
    if st.command_names:
        lim = ", ".join(f"{j} {x:g}" for j, x in zip(st.command_names, st.command_limit) if math.isfinite(x))
        lines.append(f"effort command on {cfg.effort_command_topic}, joints in this order: "
                     f"{', '.join(st.command_names)}; saturated at {lim or 'no URDF limits'}")
    if cfg.simulation:
        from ..sim.shapes import shapes_of
        sh = shapes_of(m, cfg)
        n = len(sh.points) + len(sh.spheres)
        floor = f"floor through {list(cfg.simulation_floor[:3])} normal {list(cfg.simulation_floor[3:])}"
        lines.append(f"simulated robot: {cfg.simulation_rate:g} Hz x real time {cfg.real_time_factor:g}, "
                     f"{n} collision points, {floor if cfg.simulation_floor else 'no floor'}, "
                     f"{len(cfg.simulation_obstacles) // 6} box obstacles; {cfg.simulation_command_interface} "
                     "commands from "
                     f"{cfg.effort_command_topic or '(no effort_command_topic: none)'}; publishes "
                     f"{cfg.joint_states_topic} and /clock at {cfg.simulation_publish_rate:g} Hz of simulated "
                     "time (simulation_publish_rate)")
    lines.append(f"warnings: {len(st.warnings)}" + ("".join(f"\n  - {w}" for w in st.warnings[:20])))
    if len(st.warnings) > 20:
        lines.append(f"  ... ({len(st.warnings) - 20} more: dynamics_summary --check FILE lists them)")
    return lines
