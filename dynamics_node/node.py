"""The ROS 2 node `dynamics_node`: a thin adapter between ROS messages and the dynamics core.

It converts messages (ros_conversions), validates, calls `dynamics_node` core functions and
publishes; it never changes the core's numbers. This is the only module of the package that
imports rclpy at import time (the CLI imports it inside main()).

Services (private namespace, types from dynamics_interfaces/srv):
    ~/inverse_dynamics, ~/forward_dynamics, ~/hybrid_dynamics, ~/gravity_compensation,
    ~/mass_matrix, ~/jacobian, ~/set_payload, ~/closed_loop_forward_dynamics,
    ~/closed_loop_inverse_dynamics, ~/trajectory_inverse_dynamics
Topics:
    in : <joint_states_topic> (sensor_msgs/JointState, default /joint_states)
    out: ~/gravity_torques (sensor_msgs/JointState: name, position, effort; the input's header),
         <effort_command_topic> (std_msgs/Float64MultiArray in command_joints order; empty = off),
         /diagnostics (diagnostic_msgs/DiagnosticArray, 1 Hz), ~/markers (visualization_msgs/MarkerArray)

Wrench convention (external_wrenches, loop_wrenches): header.frame_id names the link (or loop
joint); geometry_msgs/Wrench is linear-first (force, torque); both are expressed in the link frame
and the torque is about the link frame's origin, which is the core's f_ext convention.

Process layout: three rclpy nodes, each spun by its own executor thread, because rclpy's executor
walks every entity of its node at each wake-up: `dynamics_node` (parameters, /diagnostics,
markers; main thread), `dynamics_node_stream` (joint states in, torques out) and
`dynamics_node_services` (the ten services). Names are resolved by `dynamics_node`, so the
services and topics are /dynamics_node/... and command-line remaps apply to all of them.

Closed-loop models (model.loop_joints non-empty): the gravity stream and gravity_compensation use
dn.closed_loop_inverse_dynamics(model, q, 0, 0) and report the actuated joints only; the plain
services compute the spanning tree's dynamics and say so in `message`.
"""
from __future__ import annotations

import collections
import gc
import math
import os
import pathlib
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy, HistoryPolicy, DurabilityPolicy
from rclpy.exceptions import ParameterException, ParameterUninitializedException
from rclpy.utilities import remove_ros_args
from rcl_interfaces.msg import (ParameterDescriptor, ParameterType, SetParametersResult,
                                FloatingPointRange)

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from visualization_msgs.msg import Marker, MarkerArray

from dynamics_interfaces.srv import (
    ClosedLoopForwardDynamics, ClosedLoopInverseDynamics, ForwardDynamics, GravityCompensation,
    HybridDynamics, InverseDynamics, Jacobian, MassMatrix, SetPayload, TrajectoryInverseDynamics)

import dynamics_node as dn
from .errors import DynamicsError, InputError
from .ros_conversions import (Conversions, JointStateReader, all_finite, check_payload,
                              finite_or_raise, to_float64_array, wrench_to_tuple)

NODE_NAME = "dynamics_node"

# name -> (default, parameter type, description). The single source of the node's parameters: the
# node declares exactly these, and the tests check config/*.yaml against this table.
_T = ParameterType
PARAMETERS = {
    "robot_description": ("", _T.PARAMETER_STRING,
                          "URDF XML text of the robot (takes precedence over urdf_path)."),
    "urdf_path": ("", _T.PARAMETER_STRING,
                  "URDF file, used when robot_description is empty: absolute, relative to the working "
                  "directory or to this package's share folder, or package://<pkg>/<path>."),
    "floating_base": (False, _T.PARAMETER_BOOL,
                      "True: the root link is a free-floating body (q starts with x y z qx qy qz qw)."),
    "gravity": ([0.0, 0.0, -9.81], _T.PARAMETER_DOUBLE_ARRAY,
                "Gravity vector in the world (root) frame [m/s^2], 3 finite values; "
                "applies without restart."),
    "armature": ([], _T.PARAMETER_DOUBLE_ARRAY,
                 "Reflected rotor inertia added to the diagonal of H [kg m^2]: empty = none, one "
                 "value = every joint, or one value per joint in the model's joint order."),
    "friction": (False, _T.PARAMETER_BOOL,
                 "True: the URDF <dynamics> damping (viscous) and friction (Coulomb) act in "
                 "inverse/forward dynamics."),
    "joint_states_topic": ("/joint_states", _T.PARAMETER_STRING,
                           "sensor_msgs/JointState input; every message covering the model's joints "
                           "yields one ~/gravity_torques message."),
    "joint_state_timeout": (0.5, _T.PARAMETER_DOUBLE,
                            "Joint states older than this [s] are stale: /diagnostics warns, and "
                            "gravity_compensation with an empty position refuses them."),
    "effort_command_topic": ("", _T.PARAMETER_STRING,
                             "If not empty, gravity torques are also published here as "
                             "std_msgs/Float64MultiArray in command_joints order (for a ros2_control "
                             "forward command controller)."),
    "command_joints": ([], _T.PARAMETER_STRING_ARRAY,
                       "Joint order of the effort command; empty = the model's joint order "
                       "(actuated joints for closed-loop models)."),
    "payload.link": ("", _T.PARAMETER_STRING,
                     "Link carrying a payload given by parameters (empty = none); set_payload can "
                     "add more. Applies without restart."),
    "payload.mass": (0.0, _T.PARAMETER_DOUBLE, "Payload mass [kg], >= 0 (0 = no payload)."),
    "payload.center_of_mass": ([0.0, 0.0, 0.0], _T.PARAMETER_DOUBLE_ARRAY,
                               "Payload centre of mass in the link frame [m], 3 values."),
    "payload.inertia": ([0.0] * 6, _T.PARAMETER_DOUBLE_ARRAY,
                        "Payload inertia about its centre of mass, link axes: ixx ixy ixz iyy iyz "
                        "izz [kg m^2]."),
    "markers_rate": (2.0, _T.PARAMETER_DOUBLE,
                     "Rate [Hz] of ~/markers (centre of mass, payloads) while someone subscribes; "
                     "0 = off."),
    "stream_thread_priority": (50, _T.PARAMETER_INTEGER,
                               "Real-time priority (SCHED_FIFO, 1-99) of the thread that turns joint "
                               "states into torques, as ros2_control's controller manager does for "
                               "its loop; 0 = ordinary scheduling. Needs CAP_SYS_NICE or an rtprio "
                               "limit (/etc/security/limits.conf); without, the node says so once "
                               "and keeps ordinary scheduling. Applies without restart."),
}
MODEL_KEYS = ("robot_description", "urdf_path", "floating_base", "armature", "friction")
PAYLOAD_KEYS = ("payload.link", "payload.mass", "payload.center_of_mass", "payload.inertia")


class ConfigError(Exception):
    """A parameter value is invalid (the message names the parameter)."""


class StartupError(Exception):
    """The node cannot start (missing or invalid URDF, bad parameters)."""


# ------------------------------------------------------------------------------------------ helpers
def resolve_urdf_path(path: str) -> pathlib.Path:
    """Find a URDF file: absolute, ~, package://pkg/rel, relative to cwd / share / source tree."""
    if path.startswith("package://"):
        pkg, _, rel = path[len("package://"):].partition("/")
        try:
            from ament_index_python.packages import get_package_share_directory
            p = pathlib.Path(get_package_share_directory(pkg)) / rel
        except Exception as e:  # PackageNotFoundError, ImportError
            raise ConfigError(f"urdf_path: cannot resolve '{path}': {e}") from None
        if not p.is_file():
            raise ConfigError(f"urdf_path: file '{p}' (from '{path}') does not exist")
        return p
    p = pathlib.Path(path).expanduser()
    candidates = [p]
    if not p.is_absolute():
        here = pathlib.Path(__file__).resolve().parent.parent  # source tree (editable install)
        candidates.append(here / p)
        try:
            from ament_index_python.packages import get_package_share_directory
            candidates.append(pathlib.Path(get_package_share_directory(NODE_NAME)) / p)
        except Exception:
            pass
    for c in candidates:
        if c.is_file():
            return c
    raise ConfigError(f"urdf_path: file '{path}' does not exist (looked in: "
                      f"{', '.join(str(c) for c in candidates)})")


def _finite_list(value, n, name, what) -> list:
    v = [float(x) for x in value]
    if n is not None and len(v) != n:
        raise ConfigError(f"{name}: expected {n} values ({what}), got {len(v)}")
    bad = [x for x in v if not math.isfinite(x)]
    if bad:
        raise ConfigError(f"{name}: {bad[0]} is not finite")
    return v


def _validate_topic(name: str, param: str, node_name: str, namespace: str, allow_empty: bool):
    from rclpy.expand_topic_name import expand_topic_name
    from rclpy.validate_full_topic_name import validate_full_topic_name
    if not name:
        if allow_empty:
            return
        raise ConfigError(f"{param}: empty topic name")
    try:
        validate_full_topic_name(expand_topic_name(name, node_name, namespace))
    except Exception as e:
        raise ConfigError(f"{param}: invalid topic name '{name}': {e}") from None


class Timings:
    """Durations [s]: a rolling window of the last n with percentiles, and a histogram of every
    duration since start (1 us bins up to 10 ms, then one overflow bin; fixed memory) so that the
    percentiles of a long run cover every message, not only the last n (for /diagnostics and the
    bench's soak). Each Timings is written by one thread only."""

    BIN_US = 1.0
    BINS = 10000

    def __init__(self, n=2000):
        self.d = collections.deque(maxlen=n)
        self.hist = [0] * (self.BINS + 1)
        self.count = 0
        self.max = 0.0

    def add(self, dt):
        self.d.append(dt)
        k = int(dt * (1e6 / self.BIN_US))
        self.hist[k if k < self.BINS else self.BINS] += 1
        self.count += 1
        if dt > self.max:
            self.max = dt

    def totals_us(self, ps=(50.0, 99.0, 99.9)):
        """(count, [percentile upper bounds, us, one per ps], max us) over every duration since
        start; a percentile is the upper edge of its 1 us bin (the max if it falls in overflow)."""
        h = np.asarray(self.hist, dtype=np.int64)  # a copy: the writer thread may go on
        n = int(h.sum())
        if n == 0:
            return None
        cum = np.cumsum(h)
        mx = self.max * 1e6
        out = []
        for p in ps:
            k = int(np.searchsorted(cum, math.ceil(n * p / 100.0)))
            out.append(mx if k >= self.BINS else min((k + 1) * self.BIN_US, mx))
        return n, out, mx

    def percentiles_us(self):
        snapshot = tuple(self.d)  # one C-level copy: other threads append concurrently
        if not snapshot:
            return None
        a = np.asarray(snapshot, dtype=float) * 1e6
        p50, p95, p99 = np.percentile(a, [50, 95, 99])
        return p50, p95, p99, float(a.max())


@dataclass
class ModelState:
    """Everything derived from one immutable model; swapped as a whole (one attribute assignment)."""
    model: object
    conv: Conversions
    reader: JointStateReader
    torque_names: list            # joints of ~/gravity_torques (model order, or actuated joints)
    torque_q_index: np.ndarray    # their q indices
    torque_v_index: Optional[np.ndarray]  # their v indices in a full nv torque vector
    command_index: Optional[np.ndarray]  # indices into torque_names for the effort command
    loops: bool
    payloads: dict = field(default_factory=dict)


def _closed_loop_fn(name):
    """The core's closed-loop function, or None while it is not available in this build."""
    fn = getattr(dn, name, None)
    if fn is None:
        try:
            from .algorithms import loops as _loops  # noqa: F401
            fn = getattr(_loops, name, None)
        except Exception:
            fn = None
    return fn


def _loop_joint_names(model):
    return list(getattr(model, "loop_joints", ()) or ())


def actuated_effort(model, tau, actuated):
    """The core's closed-loop ID result as efforts of `actuated` (accepts nv- or len(actuated)-long)."""
    tau = np.asarray(tau, dtype=float).ravel()
    if tau.size == len(actuated):
        return tau
    if tau.size == model.nv:
        idx = [model.v_slice(j).start for j in actuated]
        return tau[idx]
    raise DynamicsError(f"closed_loop_inverse_dynamics returned {tau.size} values for "
                        f"{len(actuated)} actuated joints")


# ------------------------------------------------------------------------------------------ node
class DynamicsNode(Node):
    def __init__(self, urdf_path_default: str = "", **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self._t_start = time.monotonic()
        self._config_lock = threading.RLock()
        self._declare(urdf_path_default)
        self._cfg = {name: self._param_value(name) for name in PARAMETERS}
        self._service_payloads: dict = {}
        self._loaded = None
        self._state: Optional[ModelState] = None
        self._latest_js = None          # (msg, monotonic receive time)
        self._js_received = 0
        self._js_dropped = 0
        self._js_published = 0
        self._js_rate_mark = (time.monotonic(), 0)
        self._js_rate = 0.0
        self._requests = collections.Counter()
        self._failures = collections.Counter()
        self._srv_timing = Timings()
        self._stream_timing = Timings()
        self._sub_js = None
        self._pub_cmd = None
        self._markers_timer = None
        try:
            plan = self._plan(self._cfg, set(PARAMETERS), first=True)
        except (ConfigError, DynamicsError) as e:
            raise StartupError(str(e)) from None
        self._apply(plan, first=True)
        t_warm = time.perf_counter()
        self._warm_up()  # the stream's kernels; the others after 'serving' (see _warm_up)
        # A slow warm-up means numba compiled (a cold cache): then the rest is compiled here too,
        # since compiling in a thread while joint states arrive would starve the stream of the GIL
        self._warm_later = time.perf_counter() - t_warm < 0.3
        if not self._warm_later:
            self._warm_up(rest=True)

        # The joint-state stream lives on a second, minimal node of the same process (one
        # subscription, two publishers), spun by its own executor thread (see main()): rclpy's
        # executor rebuilds its wait set over every entity of a node at each wake-up, and this
        # node has some twenty (services, parameter services, timers), which would add about
        # 0.1 ms per joint state and delay torques behind service calls. Topic names are resolved
        # here, so command-line remaps of this node apply to the stream.
        self.stream_node = Node(f"{self.get_name()}_stream", namespace=self.get_namespace(),
                                context=self.context, use_global_arguments=False,
                                start_parameter_services=False,
                                parameter_overrides=[Parameter("start_type_description_service",
                                                               value=False)])
        qos_out = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                             history=HistoryPolicy.KEEP_LAST)
        self._pub_gravity = self.stream_node.create_publisher(
            JointState, self.resolve_topic_name("~/gravity_torques"), qos_out)
        self._pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._pub_markers = self.create_publisher(MarkerArray, "~/markers", 5)
        self._connect_topics(set(PARAMETERS))

        # The dynamics services live on a third minimal node with its own executor thread, for
        # the same reason as the stream: its wait set holds only these ten services, not the
        # parameter services and timers of this node. Names are resolved here (remaps apply).
        self.service_node = Node(f"{self.get_name()}_services", namespace=self.get_namespace(),
                                 context=self.context, use_global_arguments=False,
                                 start_parameter_services=False,
                                 parameter_overrides=[Parameter("start_type_description_service",
                                                                value=False)])
        S = self._serve
        for srv_type, leaf, handler in (
                (InverseDynamics, "inverse_dynamics", self._inverse_dynamics),
                (ForwardDynamics, "forward_dynamics", self._forward_dynamics),
                (HybridDynamics, "hybrid_dynamics", self._hybrid_dynamics),
                (GravityCompensation, "gravity_compensation", self._gravity_compensation),
                (MassMatrix, "mass_matrix", self._mass_matrix),
                (Jacobian, "jacobian", self._jacobian),
                (SetPayload, "set_payload", self._set_payload),
                (ClosedLoopForwardDynamics, "closed_loop_forward_dynamics", self._cl_forward_dynamics),
                (ClosedLoopInverseDynamics, "closed_loop_inverse_dynamics", self._cl_inverse_dynamics),
                (TrajectoryInverseDynamics, "trajectory_inverse_dynamics",
                 self._trajectory_inverse_dynamics)):
            self.service_node.create_service(srv_type, self.resolve_service_name(f"~/{leaf}"),
                                             S(leaf, handler))

        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.create_timer(1.0, self._publish_diagnostics)
        self._reset_markers_timer()
        m = self._state.model
        self.get_logger().info(
            f"serving '{m.name}' ({len(m.joint_names)} joints, {m.total_mass():.3f} kg, root "
            f"'{m.root_link}', {'floating' if m.floating_base else 'fixed'} base) from {m.source}; "
            f"joint states on {self._cfg['joint_states_topic']}; ROS_DOMAIN_ID="
            f"{os.environ.get('ROS_DOMAIN_ID', '0')}, discovery "
            f"{os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE', 'default')}")
        if self._warm_later:
            self._warm_thread = threading.Thread(target=self._warm_up, kwargs={"rest": True},
                                                 name="warm_up", daemon=True)
            self._warm_thread.start()

    def destroy_node(self):
        warm = getattr(self, "_warm_thread", None)
        if warm is not None:  # not inside numba's loader when the process ends, if time allows
            deadline = getattr(self, "join_deadline", None)
            warm.join(timeout=5.0 if deadline is None else max(0.0, deadline - time.monotonic()))
        for helper in (getattr(self, "stream_node", None), getattr(self, "service_node", None)):
            try:
                if helper is not None:
                    helper.destroy_node()
            except Exception:  # noqa: BLE001 - shutting down anyway
                pass
        return super().destroy_node()

    # ------------------------------------------------------------------ parameters
    def _declare(self, urdf_path_default):
        for name, (default, ptype, desc) in PARAMETERS.items():
            if name == "urdf_path" and urdf_path_default:
                default = urdf_path_default
            d = ParameterDescriptor(name=name, type=ptype, description=desc)
            if name == "joint_state_timeout":
                d.floating_point_range = [FloatingPointRange(from_value=1e-3, to_value=3600.0)]
            if isinstance(default, list) and not default:
                # An empty list has no type for rclpy: declare the type, then give it the empty
                # value (an uninitialised parameter would make get_parameters answer nothing).
                self.declare_parameter(name, Parameter.Type(ptype), d)
                if not self._initialised(name):
                    self.set_parameters([Parameter(name, Parameter.Type(ptype), [])])
            else:
                self.declare_parameter(name, default, d)

    def _initialised(self, name):
        try:
            self.get_parameter(name)
            return True
        except ParameterUninitializedException:
            return False

    def _param_value(self, name):
        try:
            v = self.get_parameter(name).value
        except ParameterUninitializedException:
            v = None
        if v is None:
            v = PARAMETERS[name][0]
        if isinstance(v, (tuple, np.ndarray)) or type(v).__name__ == "array":
            v = list(v)
        return v

    def _on_set_parameters(self, params):
        # parameters change in the main thread, payloads in the services thread: one at a time
        with self._config_lock:
            return self._set_parameters_locked(params)

    def _set_parameters_locked(self, params):
        cfg = dict(self._cfg)
        changed = set()
        for p in params:
            if p.name not in PARAMETERS:
                continue
            v = p.value
            if v is None:
                v = PARAMETERS[p.name][0]
            if not isinstance(v, (str, bool, int, float)):
                v = list(v)
            cfg[p.name] = v
            changed.add(p.name)
        if not changed:
            return SetParametersResult(successful=True)
        try:
            plan = self._plan(cfg, changed)
        except (ConfigError, DynamicsError) as e:
            self.get_logger().warning(f"rejected parameter update {sorted(changed)}: {e}")
            return SetParametersResult(successful=False, reason=str(e))
        except Exception as e:  # noqa: BLE001 - report anything the model loader raises
            reason = f"{type(e).__name__}: {e}"
            self.get_logger().warning(f"rejected parameter update {sorted(changed)}: {reason}")
            return SetParametersResult(successful=False, reason=reason)
        self._apply(plan)
        self._connect_topics(changed)
        if "markers_rate" in changed:
            self._reset_markers_timer()
        if "stream_thread_priority" in changed:
            self.apply_stream_priority()
        self.get_logger().info(f"parameters updated: {', '.join(sorted(changed))}")
        return SetParametersResult(successful=True)

    def _load(self, cfg):
        """Load the model of cfg (source, floating_base, armature, friction); gravity comes later."""
        desc = cfg["robot_description"]
        if isinstance(desc, str) and desc.strip():
            if not desc.lstrip().startswith("<"):
                raise ConfigError("robot_description: not URDF XML (the text must start with '<')")
            source = desc
        else:
            if not cfg["urdf_path"]:
                raise ConfigError("no robot: set the parameter robot_description (URDF text) or "
                                  "urdf_path (a URDF file)")
            source = str(resolve_urdf_path(cfg["urdf_path"]))
        arm = _finite_list(cfg["armature"], None, "armature", "")
        if any(a < 0 for a in arm):
            raise ConfigError(f"armature: values must be >= 0, got {arm}")
        kw = dict(floating_base=bool(cfg["floating_base"]), friction=bool(cfg["friction"]))
        model = dn.load_model(source, armature=(arm[0] if len(arm) == 1 else None), **kw)
        if len(arm) > 1:
            names = list(model.joint_names)
            if len(arm) != len(names):
                raise ConfigError(f"armature: expected 0, 1 or {len(names)} values (one per joint "
                                  f"in the model's order {', '.join(names)}), got {len(arm)}")
            model = dn.load_model(source, armature=dict(zip(names, arm)), **kw)
        return model

    def _plan(self, cfg, changed, first=False, service_payloads=None):
        """Validate cfg and build the resulting model state; raise ConfigError/DynamicsError."""
        g = _finite_list(cfg["gravity"], 3, "gravity", "x y z in m/s^2")
        t = float(cfg["joint_state_timeout"])
        if not (math.isfinite(t) and t > 0):
            raise ConfigError(f"joint_state_timeout: must be a finite value > 0 s, got {t}")
        r = float(cfg["markers_rate"])
        if not (math.isfinite(r) and 0 <= r <= 100):
            raise ConfigError(f"markers_rate: must be in [0, 100] Hz, got {r}")
        prio = cfg["stream_thread_priority"]
        if not (isinstance(prio, int) and 0 <= prio <= 99):
            raise ConfigError(f"stream_thread_priority: must be an integer in [0, 99] (0 = ordinary "
                              f"scheduling), got {prio!r}")
        _validate_topic(cfg["joint_states_topic"], "joint_states_topic", self.get_name(),
                        self.get_namespace(), allow_empty=False)
        _validate_topic(cfg["effort_command_topic"], "effort_command_topic", self.get_name(),
                        self.get_namespace(), allow_empty=True)
        # payload parameters
        plink = cfg["payload.link"]
        pmass = float(cfg["payload.mass"])
        pcom = _finite_list(cfg["payload.center_of_mass"], 3, "payload.center_of_mass", "x y z")
        pin = _finite_list(cfg["payload.inertia"], 6, "payload.inertia", "ixx ixy ixz iyy iyz izz")
        try:
            check_payload(plink, pmass, pcom, pin)
        except InputError as e:
            raise ConfigError(f"payload.{e}") from None

        if first or changed & set(MODEL_KEYS) or self._loaded is None:
            try:
                loaded = self._load(cfg)
            except (ConfigError, DynamicsError):
                raise
            except Exception as e:  # noqa: BLE001 - e.g. OSError, XML parse errors from the loader
                raise ConfigError(f"cannot load the robot: {type(e).__name__}: {e}") from None
        else:
            loaded = self._loaded
        if plink and plink not in loaded.link_names:
            raise ConfigError(f"payload.link: unknown link '{plink}'")
        if pmass > 0 and not plink:
            raise ConfigError("payload.mass: no payload.link is set (set the link that carries the "
                              "payload first, or both atomically)")
        # Payloads: the parameter payload first, then those of set_payload (which override it on
        # the same link; a set_payload of mass 0 removes it). Changing a payload.* parameter
        # makes the parameter payload apply again on its link.
        service = dict(self._service_payloads if service_payloads is None else service_payloads)
        if changed & set(PAYLOAD_KEYS) and plink:
            service.pop(plink, None)
        payloads = {}
        if plink and pmass > 0:
            payloads[plink] = (pmass, tuple(pcom), tuple(pin))
        payloads.update(service)
        payloads = {k: v for k, v in payloads.items() if v[0] > 0}
        state = self._make_state(loaded, g, payloads, cfg["command_joints"])
        return cfg, loaded, state, service

    def _make_state(self, loaded, gravity, payloads, command_joints) -> ModelState:
        model = loaded.with_gravity(np.asarray(gravity, dtype=float))
        for link, (m, c, i6) in payloads.items():
            if link not in model.link_names:
                raise ConfigError(f"payload on link '{link}': the model has no such link")
            model = model.with_payload(link, float(m), tuple(c), tuple(i6))
        conv = Conversions(model)
        loops = bool(_loop_joint_names(model))
        if loops:
            torque_names = list(model.actuated_joints)
            tq = np.asarray([model.q_slice(j).start for j in torque_names], dtype=np.intp)
            tv = np.asarray([model.v_slice(j).start for j in torque_names], dtype=np.intp)
        else:
            torque_names = list(model.joint_names)
            tq = np.asarray([model.q_slice(j).start for j in torque_names], dtype=np.intp)
            tv = np.asarray([model.v_slice(j).start for j in torque_names], dtype=np.intp)
        cmd_index = None
        if command_joints:
            pos = {n: i for i, n in enumerate(torque_names)}
            seen = set()
            for k, j in enumerate(command_joints):
                if j not in pos:
                    raise ConfigError(f"command_joints[{k}]: '{j}' is not one of the joints with a "
                                      f"gravity torque ({', '.join(torque_names)})")
                if j in seen:
                    raise ConfigError(f"command_joints[{k}]: '{j}' is listed twice")
                seen.add(j)
            cmd_index = np.asarray([pos[j] for j in command_joints], dtype=np.intp)
        return ModelState(model, conv, JointStateReader(conv), torque_names, tq, tv, cmd_index,
                          loops, dict(payloads))

    def _apply(self, plan, first=False):
        cfg, loaded, state, service_payloads = plan
        self._cfg = cfg
        self._loaded = loaded
        self._service_payloads = service_payloads
        self._state = state

    def _connect_topics(self, changed):
        if "joint_states_topic" in changed:
            if self._sub_js is not None:
                self.stream_node.destroy_subscription(self._sub_js)
            qos_in = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                                history=HistoryPolicy.KEEP_LAST,
                                durability=DurabilityPolicy.VOLATILE)
            self._sub_js = self.stream_node.create_subscription(
                JointState, self.resolve_topic_name(self._cfg["joint_states_topic"]),
                self._on_joint_state, qos_in)
        if "effort_command_topic" in changed:
            if self._pub_cmd is not None:
                self.stream_node.destroy_publisher(self._pub_cmd)
                self._pub_cmd = None
            if self._cfg["effort_command_topic"]:
                self._pub_cmd = self.stream_node.create_publisher(
                    Float64MultiArray, self.resolve_topic_name(self._cfg["effort_command_topic"]), 100)

    def apply_stream_priority(self):
        """Give the joint-state thread the scheduling of stream_thread_priority (once it runs)."""
        tid = getattr(self, "stream_tid", None)
        if tid is None:
            return
        prio = int(self._cfg["stream_thread_priority"])
        why = set_thread_priority(tid, prio)
        log = self.get_logger()
        if why is None:
            log.info(f"joint-state thread: {'SCHED_FIFO priority %d' % prio if prio else 'ordinary scheduling'}")
        else:
            log.warning(f"joint-state thread: cannot set SCHED_FIFO priority {prio} ({why}); it keeps "
                        "ordinary scheduling, and other load on the machine shows in its latency")

    def _reset_markers_timer(self):
        if self._markers_timer is not None:
            self.destroy_timer(self._markers_timer)
            self._markers_timer = None
        rate = float(self._cfg["markers_rate"])
        if rate > 0:
            self._markers_timer = self.create_timer(1.0 / rate, self._publish_markers)

    def _warm_up(self, rest=False):
        """Run the core functions once so that no request pays numba's load of their kernels.

        rest=False (before 'serving'): those of the joint-state stream (gravity, closed-loop
        inverse dynamics on loop models) and inverse dynamics (same module). rest=True: the
        others (forward dynamics, mass matrix, Jacobian, centre of mass, batch; about 50 ms on
        arm7 with a warm cache), run by a thread started at 'serving' when the cache is warm so
        that they do not delay the start: a client needs discovery (0.25 s typically) before its
        first request reaches the node, by which time they are loaded; a request that comes
        sooner waits for its module's import (Python's import lock), nothing worse."""
        st = self._state
        m = st.model
        q = np.asarray(m.neutral(), dtype=float)
        z = np.zeros(m.nv)
        try:
            if rest:
                dn.forward_dynamics(m, q, z, z)
                dn.mass_matrix(m, q)
                dn.jacobian(m, q, m.link_names[-1])
                dn.inverse_dynamics_batch(m, q[None, :], z[None, :], z[None, :])
                dn.center_of_mass(m, q)
            else:
                dn.inverse_dynamics(m, q, z, z)
                dn.gravity(m, q)
        except Exception as e:  # noqa: BLE001 - warm-up must never stop the node
            self.get_logger().warning(f"warm-up: {type(e).__name__}: {e}")
        if rest:
            # Everything loaded by now (rclpy, numba, the model: some 130 000 objects) lives as
            # long as the process. Out of the collector's reach, a full collection no longer walks
            # it (about 50 ms, stalling the joint-state callback it lands in). bench_node's soak:
            # p99.9 of the added latency 0.18-0.46 ms with this, 0.4-2.3 ms without.
            gc.freeze()
            return
        if st.loops:
            fn = _closed_loop_fn("closed_loop_inverse_dynamics")
            try:
                if fn is not None:
                    fn(m, q, z, z)
            except Exception:  # noqa: BLE001 - the neutral pose need not close the loops
                pass

    # ------------------------------------------------------------------ joint states
    def _gravity_effort(self, st: ModelState, q):
        """(positions, efforts) of st.torque_names at q, from the core."""
        m = st.model
        if st.loops:
            fn = _closed_loop_fn("closed_loop_inverse_dynamics")
            if fn is None:
                raise DynamicsError("closed_loop_inverse_dynamics is not available in this build")
            z = np.zeros(m.nv)
            tau = actuated_effort(m, fn(m, q, z, z), st.torque_names)
        else:
            tau = np.asarray(dn.gravity(m, q))[st.torque_v_index]
        return q[st.torque_q_index], tau

    def _on_joint_state(self, msg):
        t0 = time.perf_counter()
        self._js_received += 1
        st = self._state
        try:
            q, _ = st.reader.read(msg)
        except InputError as e:
            self._js_dropped += 1
            self.get_logger().warning(f"joint state dropped: {e}", throttle_duration_sec=2.0)
            return
        self._latest_js = (msg, time.monotonic())
        try:
            pos, tau = self._gravity_effort(st, q)
        except DynamicsError as e:
            self._js_dropped += 1
            self.get_logger().warning(f"no gravity torque for a joint state: {e}",
                                      throttle_duration_sec=2.0)
            return
        if not all_finite(tau):
            self._js_dropped += 1
            self.get_logger().warning("gravity torque not finite: not published",
                                      throttle_duration_sec=2.0)
            return
        out = JointState()
        out.header = msg.header
        out.name = st.torque_names
        out.position = to_float64_array(pos)
        out.effort = to_float64_array(tau)
        self._pub_gravity.publish(out)
        if self._pub_cmd is not None:
            cmd = Float64MultiArray()
            cmd.data = to_float64_array(tau if st.command_index is None else tau[st.command_index])
            self._pub_cmd.publish(cmd)
        self._js_published += 1
        self._stream_timing.add(time.perf_counter() - t0)

    # ------------------------------------------------------------------ services
    def _serve(self, name, fn):
        def callback(request, response):
            t0 = time.perf_counter()
            self._requests[name] += 1
            try:
                fn(self._state, request, response)
                response.success = True
            except InputError as e:
                response.success = False
                response.message = str(e)
            except DynamicsError as e:
                response.success = False
                response.message = f"{type(e).__name__}: {e}"
            except Exception as e:  # noqa: BLE001 - a request must never stop the node
                response.success = False
                response.message = f"internal error: {type(e).__name__}: {e}"
                self.get_logger().error(f"{name}: {response.message}")
            if not response.success:
                self._failures[name] += 1
                _clear_response(response)
            self._srv_timing.add(time.perf_counter() - t0)
            return response
        return callback

    @staticmethod
    def _tree_note(st, response):
        if st.loops:
            response.message = ("note: the model has closed loops; this is the spanning tree's "
                                "result (use the closed_loop_* services)")

    def _inverse_dynamics(self, st, req, res):
        c = st.conv
        order = c.order(req.name)
        q = c.q(req.position, order)
        qd = c.v(req.velocity, order, "velocity")
        qdd = c.v(req.acceleration, order, "acceleration")
        f_ext = c.wrenches(req.external_wrenches, "external_wrenches")
        tau = _finite_result(dn.inverse_dynamics(st.model, q, qd, qdd, f_ext), "effort")
        res.name = order.names
        res.effort = c.out_v(tau, order)
        self._tree_note(st, res)

    def _forward_dynamics(self, st, req, res):
        c = st.conv
        order = c.order(req.name)
        q = c.q(req.position, order)
        qd = c.v(req.velocity, order, "velocity")
        tau = c.v(req.effort, order, "effort")
        f_ext = c.wrenches(req.external_wrenches, "external_wrenches")
        qdd = _finite_result(dn.forward_dynamics(st.model, q, qd, tau, f_ext), "acceleration")
        res.name = order.names
        res.acceleration = c.out_v(qdd, order)
        self._tree_note(st, res)

    def _hybrid_dynamics(self, st, req, res):
        c = st.conv
        order = c.order(req.name)
        q = c.q(req.position, order)
        qd = c.v(req.velocity, order, "velocity")
        qdd_in = c.v(req.acceleration, order, "acceleration")
        tau_in = c.v(req.effort, order, "effort")
        fwd = list(req.forward_joints)
        if not st.model.floating_base:
            c.joint_subset(fwd, "forward_joints")
        qdd, tau = dn.hybrid_dynamics(st.model, q, qd, qdd_in, tau_in, fwd)
        res.name = order.names
        res.acceleration = c.out_v(_finite_result(qdd, "acceleration"), order)
        res.effort = c.out_v(_finite_result(tau, "effort"), order)
        self._tree_note(st, res)

    def _gravity_compensation(self, st, req, res):
        c = st.conv
        order = c.order(req.name)
        if len(req.position) == 0:
            q = self._latest_q(st)
        else:
            q = c.q(req.position, order)
        if st.loops:
            pos, tau = self._gravity_effort(st, q)
            res.name = st.torque_names
            res.position = to_float64_array(pos)
            res.effort = to_float64_array(_finite_result(tau, "effort"))
            return
        tau = _finite_result(dn.gravity(st.model, q), "effort")
        res.name = order.names
        res.position = c.out_q(q, order)
        res.effort = c.out_v(tau, order)

    def _latest_q(self, st):
        topic = self._cfg["joint_states_topic"]
        if self._latest_js is None:
            raise InputError(f"position: empty, and no usable joint state was received on {topic}")
        msg, t = self._latest_js
        age = time.monotonic() - t
        timeout = float(self._cfg["joint_state_timeout"])
        if age > timeout:
            raise InputError(f"position: empty, and the latest joint state on {topic} is {age:.3f} s "
                             f"old (joint_state_timeout {timeout:g} s)")
        return st.reader.read(msg)[0]

    def _mass_matrix(self, st, req, res):
        c = st.conv
        order = c.order(req.name)
        q = c.q(req.position, order)
        H = _finite_result(dn.mass_matrix(st.model, q), "mass_matrix")
        res.name = order.names
        res.mass_matrix = c.out_matrix(H, order, rows=True)
        self._tree_note(st, res)

    def _jacobian(self, st, req, res):
        c = st.conv
        order = c.order(req.name)
        q = c.q(req.position, order)
        link = c.link(req.link, "link")
        J = _finite_result(dn.jacobian(st.model, q, link), "jacobian")
        res.name = order.names
        res.jacobian = c.out_matrix(J, order, rows=False)

    def _set_payload(self, st, req, res):
        link = st.conv.link(req.link, "link")
        com = (req.center_of_mass.x, req.center_of_mass.y, req.center_of_mass.z)
        inertia = tuple(float(x) for x in req.inertia)
        check_payload(link, float(req.mass), com, inertia)
        with self._config_lock:
            service = dict(self._service_payloads)
            service[link] = (float(req.mass), com, inertia)
            try:
                plan = self._plan(self._cfg, set(), service_payloads=service)
            except ConfigError as e:
                raise InputError(str(e)) from None
            self._apply(plan)
        state = plan[2]
        total = state.model.total_mass()
        res.message = (f"payload on '{link}' removed" if req.mass == 0.0 else
                       f"payload of {req.mass:g} kg attached to '{link}'") + \
            f"; robot mass now {total:.6g} kg"
        self.get_logger().info(res.message)
        self._publish_markers(force=True)

    def _cl_forward_dynamics(self, st, req, res):
        fn = _closed_loop_fn("closed_loop_forward_dynamics")
        if fn is None:
            raise DynamicsError("closed_loop_forward_dynamics is not available in this build of the core")
        c = st.conv
        order = c.order(req.name)
        q = c.q(req.position, order)
        qd = c.v(req.velocity, order, "velocity")
        tau = c.v(req.effort, order, "effort")
        stab = float(req.stabilization_time)
        if not math.isfinite(stab) or stab < 0:
            raise InputError(f"stabilization_time: {stab} must be finite and >= 0 (0 = default)")
        if stab > 0:
            qdd, wrenches = fn(st.model, q, qd, tau, stabilization_time=stab)
        else:
            qdd, wrenches = fn(st.model, q, qd, tau)
        res.name = order.names
        res.acceleration = c.out_v(_finite_result(qdd, "acceleration"), order)
        res.loop_wrenches = _loop_wrenches_to_msgs(st.model, wrenches)

    def _cl_inverse_dynamics(self, st, req, res):
        fn = _closed_loop_fn("closed_loop_inverse_dynamics")
        if fn is None:
            raise DynamicsError("closed_loop_inverse_dynamics is not available in this build of the core")
        c = st.conv
        order = c.order(req.name)
        q = c.q(req.position, order)
        qd = c.v(req.velocity, order, "velocity")
        qdd = c.v(req.acceleration, order, "acceleration")
        actuated = c.joint_subset(req.actuated, "actuated") if len(req.actuated) else None
        lw = None
        if len(req.loop_wrenches):
            loops = set(_loop_joint_names(st.model))
            lw = {}
            for i, ws in enumerate(req.loop_wrenches):
                j = ws.header.frame_id
                if j not in loops:
                    raise InputError(f"loop_wrenches[{i}].header.frame_id: unknown loop joint '{j}' "
                                     f"(the model's loop joints: {', '.join(sorted(loops)) or 'none'})")
                w = np.array(wrench_to_tuple(ws.wrench))
                finite_or_raise(w, f"loop_wrenches[{i}].wrench",
                                ("force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z"),
                                kind=None)
                lw[j] = lw[j] + w if j in lw else w
            lw = {k: tuple(float(x) for x in v) for k, v in lw.items()}
        tau = fn(st.model, q, qd, qdd, actuated=actuated, loop_wrenches=lw)
        names = list(actuated) if actuated is not None else list(st.model.actuated_joints)
        res.name = names
        res.effort = to_float64_array(_finite_result(actuated_effort(st.model, tau, names), "effort"))

    def _trajectory_inverse_dynamics(self, st, req, res):
        t0 = time.perf_counter()
        c = st.conv
        order, Q, QD, QDD = c.trajectory(req.trajectory)
        TAU = _finite_result(dn.inverse_dynamics_batch(st.model, Q, QD, QDD), "effort")
        traj = req.trajectory
        c.fill_efforts(traj.points, TAU, order)
        res.trajectory = traj
        res.compute_time = time.perf_counter() - t0
        self._tree_note(st, res)

    # ------------------------------------------------------------------ diagnostics, markers
    def _publish_diagnostics(self):
        st = self._state
        m = st.model
        now = time.monotonic()
        t_mark, n_mark = self._js_rate_mark
        if now - t_mark > 0:
            self._js_rate = (self._js_received - n_mark) / (now - t_mark)
        self._js_rate_mark = (now, self._js_received)
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        hw = f"{m.name}"

        s_model = DiagnosticStatus(name=f"{self.get_name()}: model", hardware_id=hw,
                                   level=DiagnosticStatus.OK, message="model loaded")
        s_model.values = [
            KeyValue(key="robot", value=str(m.name)),
            KeyValue(key="source", value=str(m.source)),
            KeyValue(key="joints", value=str(len(m.joint_names))),
            KeyValue(key="nq", value=str(m.nq)), KeyValue(key="nv", value=str(m.nv)),
            KeyValue(key="floating_base", value=str(bool(m.floating_base))),
            KeyValue(key="total_mass_kg", value=f"{m.total_mass():.6g}"),
            KeyValue(key="gravity", value=" ".join(f"{x:g}" for x in np.asarray(m.gravity))),
            KeyValue(key="loop_joints", value=", ".join(_loop_joint_names(m)) or "none"),
            KeyValue(key="payloads", value="; ".join(f"{k}: {v[0]:g} kg" for k, v in st.payloads.items())
                     or "none"),
        ]

        timeout = float(self._cfg["joint_state_timeout"])
        topic = self._cfg["joint_states_topic"]
        s_js = DiagnosticStatus(name=f"{self.get_name()}: joint states", hardware_id=hw)
        if self._latest_js is None:
            age = float("inf")
            s_js.level = DiagnosticStatus.WARN
            s_js.message = f"no usable joint state received on {topic}"
        else:
            age = now - self._latest_js[1]
            stale = age > timeout
            s_js.level = DiagnosticStatus.WARN if stale else DiagnosticStatus.OK
            s_js.message = (f"stale: last joint state {age:.2f} s ago (timeout {timeout:g} s)"
                            if stale else "receiving joint states")
        s_js.values = [
            KeyValue(key="topic", value=topic),
            KeyValue(key="rate_hz", value=f"{self._js_rate:.1f}"),
            KeyValue(key="age_s", value=f"{age:.3f}"),
            KeyValue(key="received", value=str(self._js_received)),
            KeyValue(key="dropped", value=str(self._js_dropped)),
            KeyValue(key="gravity_torques_published", value=str(self._js_published)),
        ]

        s_srv = DiagnosticStatus(name=f"{self.get_name()}: computation", hardware_id=hw,
                                 level=DiagnosticStatus.OK, message="ok")
        vals = [KeyValue(key="requests_served", value=str(sum(self._requests.values()))),
                KeyValue(key="requests_failed", value=str(sum(self._failures.values())))]
        vals += [KeyValue(key=f"requests.{k}", value=f"{v} ({self._failures[k]} failed)")
                 for k, v in sorted(self._requests.items())]
        for label, tm in (("service", self._srv_timing), ("joint_state", self._stream_timing)):
            p = tm.percentiles_us()
            if p is not None:
                vals += [KeyValue(key=f"{label}_time_us.p50", value=f"{p[0]:.1f}"),
                         KeyValue(key=f"{label}_time_us.p95", value=f"{p[1]:.1f}"),
                         KeyValue(key=f"{label}_time_us.p99", value=f"{p[2]:.1f}"),
                         KeyValue(key=f"{label}_time_us.max", value=f"{p[3]:.1f}")]
            t = tm.totals_us()
            if t is not None:  # every one since start (the keys above: the last 2000)
                n, (a50, a99, a999), amax = t
                vals += [KeyValue(key=f"{label}_time_us.all.count", value=str(n)),
                         KeyValue(key=f"{label}_time_us.all.p50", value=f"{a50:.1f}"),
                         KeyValue(key=f"{label}_time_us.all.p99", value=f"{a99:.1f}"),
                         KeyValue(key=f"{label}_time_us.all.p99.9", value=f"{a999:.1f}"),
                         KeyValue(key=f"{label}_time_us.all.max", value=f"{amax:.1f}")]
        s_srv.values = vals
        arr.status = [s_model, s_js, s_srv]
        self._pub_diag.publish(arr)

    def _publish_markers(self, force=False):
        if not force and self._pub_markers.get_subscription_count() == 0:
            return
        st = self._state
        m = st.model
        q = None
        if self._latest_js is not None:
            try:
                q = st.reader.read(self._latest_js[0])[0]
            except InputError:
                q = None
        if q is None:
            q = np.asarray(m.neutral(), dtype=float)
        stamp = self.get_clock().now().to_msg()
        out = MarkerArray()
        clear = Marker(action=Marker.DELETEALL)
        clear.header.stamp = stamp
        out.markers.append(clear)
        try:
            com = np.asarray(dn.center_of_mass(m, q), dtype=float)
        except DynamicsError:
            com = None
        if com is not None and np.isfinite(com).all():
            mk = _sphere(m.root_link, stamp, "center_of_mass", 0, com, 0.06, (1.0, 0.5, 0.0, 0.9))
            out.markers.append(mk)
            txt = _sphere(m.root_link, stamp, "center_of_mass", 1, com + [0, 0, 0.08], 0.04,
                          (1.0, 1.0, 1.0, 1.0))
            txt.type = Marker.TEXT_VIEW_FACING
            txt.text = f"CoM {m.total_mass():.2f} kg"
            out.markers.append(txt)
        for k, (link, (mass, c, _)) in enumerate(sorted(st.payloads.items())):
            size = max(0.02, 0.05 * float(mass) ** (1.0 / 3.0))
            mk = _sphere(link, stamp, "payload", k, np.asarray(c, dtype=float), size,
                         (0.2, 0.6, 1.0, 0.9))
            mk.frame_locked = True
            out.markers.append(mk)
        self._pub_markers.publish(out)


def _sphere(frame, stamp, ns, mid, xyz, size, rgba):
    mk = Marker()
    mk.header.frame_id = frame
    mk.header.stamp = stamp
    mk.ns = ns
    mk.id = mid
    mk.type = Marker.SPHERE
    mk.action = Marker.ADD
    mk.pose.position.x, mk.pose.position.y, mk.pose.position.z = (float(v) for v in xyz)
    mk.pose.orientation.w = 1.0
    mk.scale.x = mk.scale.y = mk.scale.z = float(size)
    mk.color.r, mk.color.g, mk.color.b, mk.color.a = (float(v) for v in rgba)
    return mk


def _finite_result(values, field):
    a = np.asarray(values, dtype=float)
    if not all_finite(a.ravel()):
        raise DynamicsError(f"{field}: the result is not finite (singular configuration or model?)")
    return a


def _clear_response(res):
    """Leave only success/message in a failed response (no partial results)."""
    for name in res.get_fields_and_field_types():
        if name in ("success", "message"):
            continue
        value = getattr(res, name)
        if isinstance(value, (list, tuple)) or type(value).__name__ == "array":
            setattr(res, name, type(value)() if type(value).__name__ != "array" else
                    type(value)(value.typecode))


def _loop_wrenches_to_msgs(model, wrenches):
    """The core's loop wrenches ({loop joint: 6-vector} or one row per model.loop_joints) as msgs."""
    if wrenches is None:
        return []
    if isinstance(wrenches, dict):
        items = list(wrenches.items())
    else:
        rows = np.asarray(wrenches, dtype=float).reshape(-1, 6)
        items = list(zip(_loop_joint_names(model), rows))
    out = []
    for name, w in items:
        w = np.asarray(w, dtype=float).ravel()
        if w.size != 6 or not np.isfinite(w).all():
            raise DynamicsError(f"loop wrench of '{name}' is not a finite 6-vector")
        ws = WrenchStamped()
        ws.header.frame_id = str(name)
        (ws.wrench.force.x, ws.wrench.force.y, ws.wrench.force.z,
         ws.wrench.torque.x, ws.wrench.torque.y, ws.wrench.torque.z) = (float(x) for x in w)
        out.append(ws)
    return out


# ------------------------------------------------------------------------------------------ main
def _spin_until_shutdown(executor, context):
    """executor.spin(), ending quietly at shutdown: when SIGINT/SIGTERM shut the context down
    while an executor is between two waits, rclpy raises RCLError ("context is not valid")
    instead of ExternalShutdownException."""
    while context.ok():
        try:
            executor.spin_once()
        except (ExternalShutdownException, KeyboardInterrupt):
            return
        except Exception:  # noqa: BLE001 - only at shutdown; otherwise re-raised
            if context.ok():
                raise
            return


def set_thread_priority(tid: int, priority: int):
    """SCHED_FIFO at priority (1-99) for the thread tid (a native thread id), or ordinary
    scheduling for 0. Returns None when done, else why not (Linux only; needs CAP_SYS_NICE or an
    RLIMIT_RTPRIO of at least priority)."""
    try:
        if priority > 0:
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
        else:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
    except AttributeError:
        return "this platform has no SCHED_FIFO"
    except OSError as e:
        return e.strerror or str(e)
    return None


def _spin_stream(executor, node):
    """The joint-state thread: its real-time priority first (stream_thread_priority), then spin."""
    node.stream_tid = threading.get_native_id()
    node.apply_stream_priority()
    _spin_until_shutdown(executor, node.context)


def spin_helpers(node: DynamicsNode):
    """Spin the node's stream and services nodes, each in a daemon thread with its own executor.
    Returns [(executor, thread)]; the caller spins `node` itself (parameters, timers)."""
    out = []
    for helper, label in ((node.stream_node, "joint_states"), (node.service_node, "services")):
        executor = SingleThreadedExecutor(context=node.context)
        executor.add_node(helper)
        target, args = ((_spin_stream, (executor, node)) if helper is node.stream_node
                        else (_spin_until_shutdown, (executor, node.context)))
        thread = threading.Thread(target=target, args=args, name=label, daemon=True)
        thread.start()
        out.append((executor, thread))
    return out


def main(argv=None, fast_exit=True) -> int:
    """Console script `dynamics_node`: dynamics_node [URDF] [--ros-args ...].

    Returns the exit code (2: cannot start). After a normal run it ends the process itself
    (os._exit(0) once every ROS entity is closed) unless fast_exit is False."""
    argv = list(sys.argv if argv is None else argv)
    # Safe default on shared machines: no discovery traffic beyond this host unless asked for.
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    plain = remove_ros_args(args=argv)[1:]
    if any(a in ("-h", "--help") for a in plain):
        print(__doc__)
        print("Parameters:")
        for name, (default, _, desc) in PARAMETERS.items():
            print(f"  {name} (default {default!r}): {desc}")
        return 0
    rclpy.init(args=argv)
    node = None
    helpers = []
    try:
        try:
            node = DynamicsNode(urdf_path_default=plain[0] if plain else "")
        except StartupError as e:
            print(f"dynamics_node: cannot start: {e}", file=sys.stderr, flush=True)
            return 2
        except ParameterException as e:  # e.g. a parameter override of the wrong type
            print(f"dynamics_node: cannot start: bad parameter: {e}", file=sys.stderr, flush=True)
            return 2
        # the main executor exists before the helpers start answering: a client's SIGTERM right
        # after its first answer must not find it half-built
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        helpers = spin_helpers(node)
        _spin_until_shutdown(executor, node.context)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:  # noqa: BLE001
        # SIGINT/SIGTERM may shut the context down while entities or executors are still being
        # created (rclpy then raises RCLError 'context is not valid'): that is a clean stop
        if rclpy.ok():
            raise
    finally:
        # SIGINT/SIGTERM shut the context down, which wakes every executor; let the helper
        # threads leave rclpy before the nodes go (a thread still inside rcl at interpreter exit
        # aborts the process).
        rclpy.try_shutdown()
        # One short budget for every join: a helper executor sometimes misses the shutdown wake-up
        # and would hold the stop past 1 s; with fast_exit the process leaves by os._exit, which
        # ends daemon threads without the interpreter teardown that makes a thread inside rcl abort.
        deadline = time.monotonic() + (0.3 if fast_exit else 2.0)
        for _, thread in helpers:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if node is not None:
            node.join_deadline = deadline
            try:
                node.destroy_node()
            except Exception:  # noqa: BLE001 - shutting down anyway
                pass
    if fast_exit and node is not None:
        # Everything ROS is closed; the interpreter's own teardown (numba/LLVM finalisation)
        # would take another ~0.5 s, so leave now: SIGINT/SIGTERM stop the node well within 1 s.
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            rclpy.get_default_context().destroy()  # the DDS participant leaves the graph now
        except Exception:  # noqa: BLE001
            pass
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
