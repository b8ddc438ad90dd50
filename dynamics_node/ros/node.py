"""The ROS 2 node `dynamics_node`: wiring only.

Three rclpy nodes in one process, each spun by its own executor thread (process.py), because
rclpy's executor walks every entity of its node at each wake-up: `dynamics_node` (parameters,
the robot_description topic, /diagnostics, markers), `dynamics_node_stream` (joint states in,
torques out: stream.py) and `dynamics_node_services` (services.py). Names are resolved by
`dynamics_node`, so the topics and services are /dynamics_node/... and remaps apply to all.
What the pieces do is in their modules: params/ (the parameter table, `validate`),
model_state.py (which description, loading, payloads), diagnostics.py.
"""
from __future__ import annotations

import gc
import threading
import time

from rclpy.node import Node
from rclpy.parameter import Parameter
from rcl_interfaces.msg import SetParametersResult

from ..errors import ConfigError, DynamicsError, InputError, clip
from . import diagnostics as diag
from .conversions import check_payload
from .model_state import WAITING, payload_table, plan, summary_lines, warm_loader, warm_up
from .params.node_params import MODEL_KEYS, NODE_NAME, PARAMETERS, declare, plain, unknown_overrides
from .params.param_checks import check_payload_numbers, validate
from .services import SERVICES, serve
from .joint_states import LatestJointStates
from .stream_process import StreamProcess


STREAM_READY_TIMEOUT = 30.0  # s


class StartupError(Exception):
    """The node cannot start (missing or invalid robot, bad parameters); one line, says what to do."""


def _helper_node(node, suffix):
    return Node(f"{node.get_name()}{suffix}", namespace=node.get_namespace(), context=node.context,
                use_global_arguments=False, start_parameter_services=False,
                parameter_overrides=[Parameter("start_type_description_service", value=False)])


class DynamicsNode(Node):
    def __init__(self, urdf_path_default: str = "", **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self._lock = threading.RLock()   # parameters (main thread) and set_payload (services thread)
        self.values = declare(self, urdf_path_default)
        self.state = self.loaded = self.topic_text = self.desc_sub = None
        self.service_payloads: dict = {}
        try:
            self.cfg = validate(self.values, self.get_name(), self.get_namespace())
        except ConfigError as e:
            raise StartupError(f"{e}") from None
        for text in unknown_overrides(self):  # a misspelled key of a parameter file: said, or refused (strict)
            if self.cfg.strict:
                raise StartupError(f"{text} (strict: true refuses unknown parameters)")
            self.get_logger().warning(text)

        # the stream runs in a process of its own (stream_process.py) and shares its merge of the
        # joint states (latest.py) for gravity_compensation's "latest", the markers and diagnostics
        self.latest = LatestJointStates()
        self.stream = StreamProcess(self.get_name(), self.get_namespace(), self.get_logger())
        self.stream.priority = self.cfg.stream_thread_priority
        self.stream.on_latest = self.latest.set_reader
        self.stream.start()  # its interpreter starts (and loads its compiled code) while this one loads the model
        try:
            self._apply(self._plan(self.cfg, set(PARAMETERS)), set(PARAMETERS))
        except (ConfigError, DynamicsError) as e:
            raise StartupError(_one_line(self.cfg, e)) from None

        self.report = diag.Reporter(self)  # /diagnostics, ~/markers and the services' statistics
        import dynamics_interfaces.srv as srv
        self.service_node = _helper_node(self, "_services")
        for leaf, s in SERVICES.items():
            self.service_node.create_service(getattr(srv, s.type_name), self.resolve_service_name(f"~/{leaf}"),
                                             serve(self, leaf, s.handler, self.report.stats))
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._warm_up(rest=False)  # the stream's kernels, before anything is served
        if self.state is None:  # no robot yet: the loader's modules, so that the first one loads at once
            try:
                warm_loader()
            except Exception:  # noqa: BLE001 - the robot's own loading will say what fails
                pass
        # services_nice from here on: the start above is no service work, and at nice 10 on a busy
        # machine it held the stream's first state (and so its first torque) back for seconds. The
        # stream process, started before, keeps nice 0 (a restart inherits it; its real-time threads
        # ignore nice values)
        self._set_nice()
        # "serving" once the stream process answers with every kernel it runs loaded (its gravity
        # torques begin before, as soon as it has the robot): from the first joint state after that
        # line, torques and observer estimates. The line comes from the thread that hears the stream
        # (StreamProcess.when_applied), so that this process runs meanwhile: a description latched on
        # robot_description, or a parameter change, reaches the stream without waiting for it. The
        # services answer from that line on (a client calling at once got its first answer dropped by
        # Fast DDS more often when they answered before), their other kernels load after it (at
        # services_nice), and a stream not ready after STREAM_READY_TIMEOUT (a cold numba cache can
        # take a minute) is said, and the services answer meanwhile.
        self.serving = threading.Event()  # the services answer from here on (process.spin_helpers)
        self._log_state("serving", then=self._on_serving)
        self._late = self.create_timer(STREAM_READY_TIMEOUT, self._stream_late)

    def _on_serving(self):
        self.serving.set()
        self._warm_thread = threading.Thread(target=self._warm_up, name="warm_up", daemon=True)
        self._warm_thread.start()

    def _stream_late(self):
        self._late.cancel()
        self.serving.set()  # the services answer anyway
        if not self.stream.ready:
            self.get_logger().warning(f"the joint-state stream is not ready after {STREAM_READY_TIMEOUT:g} s "
                                      "(loading its kernels); 'serving' follows once it is")

    # ------------------------------------------------------------------ model and parameters
    def _plan(self, cfg, changed, service_payloads=None, topic_text=None, reload=False):
        service = self.service_payloads if service_payloads is None else service_payloads
        text = self.topic_text if topic_text is None else topic_text
        forwarded = self._forward(cfg, changed, service, text, reload)
        try:
            return plan(cfg, changed, self.loaded, service, text, self.resolve_topic_name("robot_description"), reload)
        except Exception:
            if forwarded:
                self.stream.resend()  # the stream keeps (or returns to) the model it had
            raise

    def _forward(self, cfg, changed, service_payloads, topic_text, reload) -> bool:
        """A new model (a description from the topic, or model parameters and nothing else) goes to
        the stream process before this process loads it: the stream loads it at once and switches to
        it if it passes the same checks, beside this process's own loading and checks, which run at
        services_nice (on a busy machine a tenth of a core: they delayed the stream by up to seconds).
        True when it was sent."""
        if self.stream.seq == 0 or not (reload or changed & MODEL_KEYS) or not changed <= MODEL_KEYS:
            return False
        try:
            payloads, _ = payload_table(cfg, service_payloads, changed)
        except ConfigError:
            return False
        self.stream.preview(cfg, topic_text, payloads, changed)
        return True

    def _apply(self, plan, changed, wait=2.0):
        cfg, self.loaded, state, self.service_payloads, payloads, self.topic_text = plan
        self.cfg, self.state = cfg, state
        resolved = {"~/gravity_torques": self.resolve_topic_name("~/gravity_torques"),
                    cfg.joint_states_topic: self.resolve_topic_name(cfg.joint_states_topic)}
        resolved["~/model_terms"] = self.resolve_topic_name("~/model_terms")
        for leaf in ("external_torques", "external_wrench", "collision"):  # the observer (ros/stream_observer.py)
            resolved[f"~/{leaf}"] = self.resolve_topic_name(f"~/{leaf}")
        resolved["~/reset_observer"] = self.resolve_service_name("~/reset_observer")
        for leaf in ("/clock", "~/contact_markers", "~/base_pose", "~/base_twist"):  # simulation.py
            resolved[leaf] = self.resolve_topic_name(leaf)
        resolved["~/reset_simulation"] = self.resolve_service_name("~/reset_simulation")
        if cfg.effort_command_topic:
            resolved[cfg.effort_command_topic] = self.resolve_topic_name(cfg.effort_command_topic)
        self.stream.configure(cfg, self.topic_text, payloads, resolved, changed, wait=wait)
        self.latest.reset(state)
        wants_topic = not (self.cfg.robot_description.strip() or self.cfg.urdf_path)
        if wants_topic and self.desc_sub is None:
            from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
            from std_msgs.msg import String
            qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self.desc_sub = self.create_subscription(String, "robot_description", self._on_description, qos)
        elif not wants_topic and self.desc_sub is not None:
            self.destroy_subscription(self.desc_sub)
            self.desc_sub = None

    def _on_description(self, msg):
        with self._lock:
            try:  # (the stream process has it first: _forward)
                plan = self._plan(self.cfg, set(), topic_text=msg.data, reload=True)
            except Exception as e:  # noqa: BLE001 - a bad description never replaces a good model
                self.get_logger().error(f"robot_description topic: refused ({type(e).__name__}: "
                                        f"{str(e)[:400]}); {'the previous model stays' if self.state else WAITING}")
                return
            self._apply(plan, {"robot_description"}, wait=0)  # nobody waits for an answer: logged once taken
        self._log_state("model from the robot_description topic")

    def _on_set_parameters(self, params):
        with self._lock:
            values = dict(self.values)
            changed = set()
            for p in params:
                if p.name in PARAMETERS:
                    values[p.name] = plain(p.name, p.value)
                    changed.add(p.name)
            if not changed:
                return SetParametersResult(successful=True)
            try:
                cfg = validate(values, self.get_name(), self.get_namespace())
                plan = self._plan(cfg, changed)
            except Exception as e:  # noqa: BLE001 - ConfigError, DynamicsError or any loader error
                reason = str(e) if isinstance(e, (ConfigError, DynamicsError)) else f"{type(e).__name__}: {e}"
                reason = clip(reason, 2000)
                self.get_logger().warning(f"rejected parameter update {sorted(changed)}: {reason}")
                return SetParametersResult(successful=False, reason=reason)
            self.values = values
            self._apply(plan, changed)
        if "markers_rate" in changed:
            self.report.reset_markers_timer()
        if "stream_thread_priority" in changed:
            self.stream.set_priority(self.cfg.stream_thread_priority)
        if "services_nice" in changed:
            self._set_nice()
        if "simulation" in changed:  # the stream process runs the stream or the simulated robot: a new one
            self.stream.restart()
        self.get_logger().info(f"parameters updated: {', '.join(sorted(changed))}")
        if changed & (MODEL_KEYS | {"effort_command_topic", "command_joints"}):
            self._log_state("model reloaded")
        return SetParametersResult(successful=True)

    def set_payload(self, link, mass, com, inertia):
        """The set_payload service's change (services thread); returns the response message."""
        try:
            check_payload_numbers(mass, com, inertia)
        except ConfigError as e:
            raise InputError(str(e)) from None
        check_payload(link, mass, com, inertia)
        with self._lock:
            service = dict(self.service_payloads)
            service[link] = (mass, tuple(com), tuple(inertia))
            try:
                plan = self._plan(self.cfg, set(), service_payloads=service)
            except ConfigError as e:
                raise InputError(str(e)) from None
            self._apply(plan, set())
        msg = (f"payload on '{link}' removed" if mass == 0.0 else f"payload of {mass:g} kg attached to "
               f"'{link}'") + f"; robot mass now {plan[2].model.total_mass():.6g} kg"
        self.get_logger().info(msg)
        self.report.publish_markers(force=True)
        return msg

    def latest_q(self, st):
        """q of the latest joint states, for gravity_compensation with an empty position."""
        return self.latest.q(st, self.cfg)

    def latest_or_none(self):
        return self.latest.q_or_none(self.state, self.cfg)

    @property
    def log(self):
        return self.get_logger()

    def waiting_message(self):
        return f"{WAITING} ({self.resolve_topic_name('robot_description')})"

    def _set_nice(self):
        """services_nice for this process (scheduling.set_process_nice says why)."""
        from .scheduling import set_process_nice
        why = set_process_nice(self.cfg.services_nice)
        if why:
            self.get_logger().warning(f"services_nice: cannot set {self.cfg.services_nice}: {why} (lowering it "
                                      "needs CAP_SYS_NICE); the services keep their priority")

    def _log_state(self, what, then=None):
        """What the node serves, logged once the stream process has taken it too (at once when it
        has): a joint state published after these lines is answered with this model. then(), if
        given, runs after the lines."""
        st, cfg, log, waiting = self.state, self.cfg, self.get_logger(), self.waiting_message()

        def say(error):
            lines(error)
            if then is not None:
                then()

        def lines(error):
            if error is not None:
                log.error(f"{what}: the joint-state stream cannot build this model state ({error}); "
                          "it keeps the previous one")
            if st is None:
                log.info(f"{what}: no robot yet, {waiting}")
                return
            for line in summary_lines(st, cfg):
                log.info(f"{what}: {line}" if line.startswith("robot '") else f"  {line}")
        self.stream.when_applied(say)

    def _warm_up(self, rest=True):
        warm_up(self.state, rest)
        if rest:  # what is loaded by now lives as long as the process: out of the collector's reach
            gc.freeze()  # (a full collection walking it, about 50 ms, would stall a callback)

    def destroy_node(self):
        if getattr(self, "_destroyed", False):  # rclpy's shutdown and main() both call it
            return True
        self._destroyed = True
        deadline = getattr(self, "join_deadline", None) or time.monotonic() + 5.0
        warm = getattr(self, "_warm_thread", None)
        if warm is not None:  # not inside numba's loader when the process ends, if time allows
            warm.join(timeout=max(0.0, deadline - time.monotonic()))
        stream = getattr(self, "stream", None)
        if stream is not None:
            stream.stop(timeout=max(0.05, deadline - time.monotonic()))
        for helper in (getattr(self, "service_node", None),):
            try:
                if helper is not None:
                    helper.destroy_node()
            except Exception:  # noqa: BLE001 - shutting down anyway
                pass
        return super().destroy_node()


def _one_line(cfg, e) -> str:
    text = " ".join(str(e).split())
    if isinstance(e, ConfigError):
        return text
    where = ("robot_description (parameter)" if cfg.robot_description.strip() else f"urdf_path '{cfg.urdf_path}'")
    return f"{where}: {text}; fix the description or point urdf_path at another robot"
