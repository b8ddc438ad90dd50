"""Joint states in, gravity torques out.

`JointStateMerger` (no rclpy) keeps, per model joint, its latest position and velocity with the
time it arrived, from any number of publishers: an arm driver and a gripper (or each leg) may
publish separate `sensor_msgs/JointState` messages on one topic. A message updates the joints it
names (joints the model does not have are ignored); a torque is computed whenever every joint it
needs has a value no older than `joint_state_timeout` (arrival time, monotonic: publishers' clocks
need not agree; the output carries the header of the message that completed it). A message listing
a joint twice, or with a position array whose length differs from the names, is refused whole; a
NaN or inf value drops only that value (a NaN velocity does not block gravity torques, which need
positions only); an effort array of the wrong length is reported and ignored.

Closed-loop models need only the actuated joints: the passive ones are solved from the loop
closure (`dn.close_loops`, starting from the last solution) unless the message brings them fresh.

`Stream` (rclpy) owns the subscription and the publishers of the stream node (in the stream's own
process, stream_process.py). The subscription is best effort: it hears every publisher from its first
message (Stream.__init__ says why). Topic changes are
handed to the stream's own executor thread (a guard condition), so an entity is never destroyed
under the thread using it; an exception in the callback is logged and counted, never the end of the
thread. Effort commands are saturated at the URDF effort limits (times effort_limit_scale), and
each saturation is reported; ~/gravity_torques keeps the unsaturated values.
"""
from __future__ import annotations

import math
import threading
import time

import numpy as np

import dynamics_node as dn
from ..errors import DynamicsError, InputError, clip, clip_names
from .conversions import _as_float_vector, to_float64_array
from .friction_params import command_friction


SUBSCRIBERS_CHECK = 0.05   # s: how often the observer's outputs count their subscribers (2 us each)


class JointStateMerger:
    def __init__(self, st):
        self.st = st
        m = st.model
        conv = st.conv
        self.names = list(conv.joint_names)
        self.index = {j: k for k, j in enumerate(self.names)}
        needed = st.torque_names if st.loops else self.names
        self.single_dof = all(len(conv._q_of[j]) == 1 and len(conv._v_of[j]) == 1 for j in self.names)
        self.jq = np.asarray([conv._q_of[j][0] for j in self.names], dtype=np.intp)
        self.jv = np.asarray([conv._v_of[j][0] for j in self.names], dtype=np.intp)
        self.q = np.asarray(m.neutral(), dtype=float).copy()
        self.pos = self.q[self.jq].copy()
        self.t_pos = np.full(len(self.names), -math.inf)
        self.vel = np.zeros(len(self.names))
        self.t_vel = np.full(len(self.names), -math.inf)
        self.need = np.asarray([self.index[j] for j in needed], dtype=np.intp)
        self.all_joints = np.arange(len(self.names), dtype=np.intp)
        self._plans: dict = {}
        self.last_closed = None        # closed-loop models: the last closed configuration
        self.continuous_q = np.asarray([conv._q_of[j][0] for j in self.names if j not in needed
                                        and m.joint_kinds.get(j) == "continuous"], dtype=np.intp)
        self.closure_residual = float("nan")
        self.effort_length_errors = 0
        self.matched = 0                               # model joints named by the latest message
        self.eff = np.zeros(len(self.names))           # efforts, for the momentum observer
        self.t_eff = np.full(len(self.names), -math.inf)

    def _plan(self, names: tuple):
        plan = self._plans.get(names)
        if plan is None:
            first = {}
            for k, n in enumerate(names):
                if n in first:
                    raise InputError(f"joint_states: joint '{clip(n)}' is listed twice (name[{first[n]}] and "
                                     f"name[{k}]): the message is refused")
                first[n] = k
            pairs = [(k, self.index[n]) for k, n in enumerate(names) if n in self.index]
            plan = (np.asarray([p[0] for p in pairs], dtype=np.intp),
                    np.asarray([p[1] for p in pairs], dtype=np.intp), len(names))
            if len(self._plans) > 64:
                self._plans.clear()
            self._plans[names] = plan
        return plan

    def update(self, msg, now: float) -> list:
        """Take a message's values; returns a list of problems (dropped values) for a warning.
        Raises InputError when the whole message is refused."""
        if not self.single_dof:
            raise InputError("joint_states: the model has multi-coordinate joints, which "
                             "sensor_msgs/JointState cannot describe")
        src, dst, n = self._plan(tuple(msg.name))
        pos = _as_float_vector(msg.position)
        if pos.size != n:
            raise InputError(f"joint_states: {n} names but {pos.size} positions: the message is refused")
        vel = _as_float_vector(msg.velocity)
        if vel.size not in (0, n):
            raise InputError(f"joint_states: {n} names but {vel.size} velocities: the message is refused")
        problems = []
        self.matched = int(src.size)
        if len(msg.effort) not in (0, n):
            self.effort_length_errors += 1
            problems.append(f"{n} names but {len(msg.effort)} efforts (efforts ignored)")
        if not src.size:
            return problems
        p = pos[src]
        ok = np.isfinite(p)
        if ok.all():
            self.pos[dst] = p
            self.t_pos[dst] = now
        else:
            self.pos[dst[ok]] = p[ok]
            self.t_pos[dst[ok]] = now
            bad = [self.names[j] for j in dst[~ok]]
            problems.append(f"non-finite position of {', '.join(bad)} (dropped)")
        if vel.size:
            v = vel[src]
            okv = np.isfinite(v)
            self.vel[dst[okv]] = v[okv]
            self.t_vel[dst[okv]] = now
            if not okv.all():
                problems.append(f"non-finite velocity of {', '.join(self.names[j] for j in dst[~okv])} (dropped)")
        if len(msg.effort) == n:  # the observer's input; a non-finite effort is dropped like a velocity
            e = _as_float_vector(msg.effort)[src]
            oke = np.isfinite(e)
            self.eff[dst[oke]] = e[oke]
            self.t_eff[dst[oke]] = now
        return problems

    def stale(self, now: float, timeout: float, which=None) -> list:
        """Names of the needed joints (or `which` indices) without a value newer than timeout."""
        idx = self.need if which is None else which
        old = self.t_pos[idx] < now - timeout
        return [self.names[j] for j in idx[old]]

    def configuration(self, now: float, timeout: float):
        """q of the model when every needed joint is fresh, else None. Closed loops: completed."""
        limit = now - timeout
        if self.t_pos[self.need].min() < limit:
            return None
        q = self.q
        q[self.jq] = self.pos
        if not self.st.loops:
            return q
        if self.t_pos.min() >= limit:   # every tree joint measured: no closure to solve
            return q.copy()
        m = self.st.model
        start = q.copy()
        if self.last_closed is not None:
            passive = np.ones(len(self.names), dtype=bool)
            passive[self.need] = False
            start[self.jq[passive]] = self.last_closed[self.jq[passive]]
        closed = dn.close_loops(m, start, list(self.st.torque_names))
        # a continuous joint's angle is taken within half a turn of where it was (Newton may land
        # a whole number of turns away: the same pose, but a jump in the reported position)
        wrap = self.continuous_q
        closed[wrap] = start[wrap] + np.remainder(closed[wrap] - start[wrap] + math.pi, 2 * math.pi) - math.pi
        from ..algorithms.loops import loop_position_errors
        errs = np.asarray(loop_position_errors(m, closed), dtype=float)
        self.closure_residual = float(np.abs(errs).max()) if errs.size else 0.0
        self.last_closed = closed
        return closed.copy()


class LatestJointStates:
    """The node's view of the stream's merge (latest.py: shared memory written by the stream
    process after every joint state), for gravity_compensation's "latest joint state", the markers
    and the limit check of diagnostics. The node does not subscribe to the joint states itself."""

    def __init__(self):
        self.merger = None
        self.reader = None
        self._lock = threading.Lock()

    def reset(self, st):
        with self._lock:
            self.merger = JointStateMerger(st) if st is not None else None

    def set_reader(self, reader):
        self.reader = reader

    def _fill(self, merger):
        """Copy the stream's latest merge into merger; False when there is none for its joints."""
        reader = self.reader
        got = reader.read(merger.names) if reader is not None else None
        if got is None:
            return False
        merger.pos[:], merger.t_pos[:] = got
        return True

    def q(self, st, cfg):
        """q at the latest joint states of st's model; InputError saying why there is none."""
        topic, timeout, merger = cfg.joint_states_topic, cfg.joint_state_timeout, self.merger
        if merger is None or merger.st is not st:
            raise InputError(f"position: empty, and no usable joint state was received on {topic}")
        now = time.monotonic()
        with self._lock:
            if not self._fill(merger):
                raise InputError(f"position: empty, and no usable joint state was received on {topic}")
            q = merger.configuration(now, timeout)
            stale = merger.stale(now, timeout) if q is None else []
            never = bool(np.isinf(merger.t_pos).all())
        if q is None:
            raise InputError(f"position: empty, and no usable joint state was received on {topic}" if never else
                             f"position: empty, and the latest joint states on {topic} are older than "
                             f"joint_state_timeout {timeout:g} s for {', '.join(stale[:10])}")
        return q.copy()

    def q_or_none(self, st, cfg):
        try:
            return self.q(st, cfg) if st is not None else None
        except Exception:  # noqa: BLE001 - none yet, stale, or a loop that does not close there
            return None


def gravity_effort(st, q):
    """(positions, efforts) of st.torque_names at q."""
    m = st.model
    if st.loops:
        z = np.zeros(m.nv)
        tau = np.asarray(dn.closed_loop_inverse_dynamics(m, q, z, z), dtype=float)[st.torque_v_index]
    else:
        tau = np.asarray(dn.gravity(m, q))[st.torque_v_index]
    return q[st.torque_q_index], tau


class Saturation:
    """Effort commands held within the joints' limits, with a record of each episode."""

    def __init__(self, st):
        self.names = st.command_names
        self.limit = st.command_limit
        self.active = set()          # joints saturated in the latest command
        self.last = {}               # joint -> (computed, sent) at the latest saturation
        self.count = 0

    def apply(self, tau, log):
        lim = self.limit
        sent = np.clip(tau, -lim, lim)
        if not (sent != tau).any():
            if self.active:
                self.active = set()
            return sent
        now = set()
        for k in np.flatnonzero(sent != tau):
            j = self.names[k]
            now.add(j)
            self.last[j] = (float(tau[k]), float(sent[k]))
            if j not in self.active:  # a new episode: say it once
                log.warning(f"effort command of '{j}' saturated: computed {tau[k]:.6g}, sent "
                            f"{sent[k]:.6g} (URDF effort limit x effort_limit_scale)")
        self.count += 1
        self.active = now
        return sent


class Stream:
    """The stream node's entities and the joint-state callback (see the module docstring)."""

    def __init__(self, node, resolve, logger):
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        self.node = node
        self.resolve = resolve
        self.log = logger
        self.JointState = JointState
        self.state = None
        self.merger = None
        self.saturation = None
        self.cfg = None
        self.sub = None
        self.pub_cmd = None
        self.on_applied = None
        self.on_latest = None         # called with the path of each new shared merge (latest.py)
        self.latest_writer = None
        self.latest = None            # (header, monotonic time) of the latest usable joint state
        self.received = self.dropped = self.published = self.errors = 0
        self.without_model_joints = 0   # joint states naming no joint of the model: dropped
        self.last_error = ""
        self.last_problem = ""
        self.timing = None
        # Best effort, which hears reliable and best-effort publishers alike, from their first
        # message: a reliable subscription never hears a best-effort publisher, and one that
        # switches when it sees such a publisher (by polling the graph, or on the incompatible-QoS
        # event) loses that publisher's first messages while the new subscription is matched
        # (seen: 0 of 200 merged states in 2 s on a busy machine). What best effort gives up,
        # retransmission, is no loss on one host (shared memory, no packets to lose) unless this
        # process falls behind by more than the history: depth 1000, a second of joint states at
        # 1 kHz, waits for it rather than being dropped. No QoS-event handlers: nothing can be
        # incompatible with a volatile best-effort reader, and each handler costs every wait.
        self.qos_in = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT,
                                 history=HistoryPolicy.KEEP_LAST, durability=DurabilityPolicy.VOLATILE)
        from .stream_executor import OUT_DEPTH, ConfigHandOff, output_events
        self._handoff = ConfigHandOff()   # configure() (any thread) -> _apply_pending (the stream's thread)
        # outputs: reliable, a second of history at 1 kHz, so that a subscriber that is briefly starved
        # of CPU (a busy controller on a loaded machine) still gets every message once it reads again
        qos_out = QoSProfile(depth=OUT_DEPTH, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
        self.pub_gravity = node.create_publisher(JointState, resolve("~/gravity_torques"), qos_out,
                                                 event_callbacks=output_events())
        self._out = (None, None)  # (model state, its torques message: names set once, reused)
        from .model_terms import TermsStream
        self.terms = TermsStream(node, resolve, logger)  # ~/model_terms, after the torques
        self._gc = node.create_guard_condition(self._apply_pending)
        from .stream_observer import ObserverPublishers, reset_service
        self.observer = None          # the momentum observer of the current model (ros/stream_observer.py)
        # The observer and ~/model_terms (numba kernels, loaded by a fresh stream process after its first
        # torques) run only while `extras` is set: a kernel loading in the callback would stall the stream
        self.extras, self.extras_running = True, False   # asked for, and in the configuration applied last
        self.observer_pubs = ObserverPublishers(node, resolve)
        self._reset_srv = reset_service(node, resolve, self)
        self._subscribers_checked = -math.inf   # when the observer's outputs last counted their subscribers

    # -------------------------------------------------------------- configuration (any thread)
    def configure(self, st, cfg, changed, now=False, token=None):
        """Take a new model state and config. Entity changes run in the stream's thread (now=True
        before that thread runs); on_applied(token) is called once they are done."""
        self._handoff.put(st, cfg, changed, token)
        if now:
            self._apply_pending()
        else:
            self._gc.trigger()

    def _apply_pending(self):
        pending = self._handoff.take()
        if pending is None:
            return
        st, cfg, changed, token = pending
        extras = self.extras
        from std_msgs.msg import Float64MultiArray
        try:
            if "joint_states_topic" in changed or self.sub is None:
                self._subscribe(cfg)
            moved = self.cfg is not None and cfg.effort_command_topic != self.cfg.effort_command_topic
            if "effort_command_topic" in changed or moved:
                from .stream_executor import output_events
                old, self.pub_cmd = self.pub_cmd, None
                if old is not None:
                    self.node.destroy_publisher(old)
                if cfg.effort_command_topic:
                    self.pub_cmd = self.node.create_publisher(
                        Float64MultiArray, self.resolve(cfg.effort_command_topic), 100, event_callbacks=output_events())
                    self._cmd_msg = Float64MultiArray()  # reused: only its data changes
        except Exception as e:  # noqa: BLE001 - a bad topic must not end the stream thread
            self.errors += 1
            self.last_error = f"{type(e).__name__}: {e}"
            self.log.error(f"joint-state stream: topic change failed: {self.last_error}")
        if st is not self.state:
            self.merger = JointStateMerger(st) if st is not None else None
            self.saturation = Saturation(st) if st is not None else None
            self._share_merge()
        self._configure_observer(st, cfg, extras)
        self.state, self.cfg = st, cfg
        try:
            self.terms.configure(st, cfg if extras else None)
        except Exception as e:  # noqa: BLE001 - a topic change must not end the stream thread
            self.errors += 1
            self.last_error = f"model_terms: {type(e).__name__}: {e}"
            self.log.error(f"joint-state stream: {self.last_error}")
        self.extras_running = extras
        if self.on_applied is not None:
            self.on_applied(token)

    def _share_merge(self):
        """A shared-memory file for the new merge (latest.py), its path handed to on_latest."""
        old, self.latest_writer = self.latest_writer, None
        if old is not None:
            old.close()
        if self.merger is None or self.on_latest is None:
            return
        from .latest import LatestWriter
        try:
            self.latest_writer = LatestWriter(self.merger.names)
        except OSError as e:  # no shared memory: the node then answers "no usable joint state"
            self.log.error(f"joint states: cannot share the merge with the node: {e}")
            return
        self.on_latest(self.latest_writer.path)

    def _configure_observer(self, st, cfg, extras=True):
        """A fresh observer on a model change or a change of its parameters (a reset)."""
        keys = ("observer_gain", "wrench_link", "collision_threshold", "joint_state_timeout")
        old = self.cfg
        same = st is self.state and old is not None and all(getattr(old, k) == getattr(cfg, k) for k in keys)
        if not extras or st is None:
            self.observer = None
        elif not same or self.observer is None:
            from .stream_observer import StreamObserver  # its kernels were loaded with the state (stream_process.py)
            self.observer = StreamObserver(st, cfg, self.merger)

    def _subscribe(self, cfg):
        from rclpy.event_handler import SubscriptionEventCallbacks
        old = self.sub
        self.sub = self.node.create_subscription(
            self.JointState, self.resolve(cfg.joint_states_topic), self.on_joint_state, self.qos_in,
            event_callbacks=SubscriptionEventCallbacks(use_default_callbacks=False))
        if old is not None:
            self.node.destroy_subscription(old)

    # -------------------------------------------------------------- the callback (stream thread)
    def on_joint_state(self, msg):
        t0 = time.perf_counter()
        self.received += 1
        try:
            self._on_joint_state(msg, t0)
        except Exception as e:  # noqa: BLE001 - logged and counted, never the end of the thread
            self.errors += 1
            self.dropped += 1
            self.last_error = f"{type(e).__name__}: {e}"
            self.log.error(f"joint state: {self.last_error}", throttle_duration_sec=2.0)

    def report(self) -> dict:
        """What diagnostics show of the stream: plain values (sent to the node by the stream process)."""
        now = time.monotonic()
        m, sat, latest = self.merger, self.saturation, self.latest
        timeout = self.cfg.joint_state_timeout if self.cfg else 0.5
        return {
            "received": self.received, "dropped": self.dropped, "published": self.published,
            "without_model_joints": self.without_model_joints,
            "errors": self.errors, "last_error": self.last_error, "last_problem": self.last_problem,
            "age": (now - latest[1]) if latest else None,
            "stale": m.stale(now, timeout) if m else [],
            "effort_length_errors": m.effort_length_errors if m else 0,
            "closure_residual": m.closure_residual if m else float("nan"),
            "saturated": {j: sat.last[j] for j in sorted(sat.active)} if sat else {},
            "saturation_count": sat.count if sat else 0,
            "percentiles_us": self.timing.percentiles_us() if self.timing else None,
            "totals_us": self.timing.totals_us() if self.timing else None,
            "model_terms": self.terms.report() if self.terms.active else None,
            "observer": self.observer.report() if self.observer is not None else {},
        }

    def _on_joint_state(self, msg, t0):
        st, merger, cfg = self.state, self.merger, self.cfg
        if st is None or merger is None:
            self.dropped += 1
            return
        now = time.monotonic()
        try:
            problems = merger.update(msg, now)
            if not merger.matched:  # empty, or other joints only: nothing of this robot to answer
                self.dropped += 1
                self.without_model_joints += 1
                self.last_problem = (f"a joint state naming no joint of the model was dropped ({len(msg.name)} "
                                     f"names: {clip_names(msg.name, 120) or 'none'})")
                self.log.warning(f"joint state: {self.last_problem}", throttle_duration_sec=2.0)
                return
            if self.latest_writer is not None:
                self.latest_writer.write(merger.pos, merger.t_pos)
            if problems:
                self.last_problem = "; ".join(problems)
                self.log.warning(f"joint state: {self.last_problem}", throttle_duration_sec=2.0)
            q = merger.configuration(now, cfg.joint_state_timeout)
            if q is None:
                self.dropped += 1
                return
            self.latest = (msg.header, now, q)
            pos, tau = gravity_effort(st, q)
        except DynamicsError as e:
            self.dropped += 1
            self.last_problem = str(e)
            self.log.warning(f"joint state dropped: {e}", throttle_duration_sec=2.0)
            return
        if not np.isfinite(tau).all():
            self.dropped += 1
            self.log.warning("gravity torque not finite: not published", throttle_duration_sec=2.0)
            return
        ost, out = self._out
        if ost is not st:  # a message per model state: its name list is checked by rclpy once
            out = self.JointState()
            out.name = list(st.torque_names)
            self._out = (st, out)
        out.header = msg.header
        out.position = to_float64_array(pos)
        out.effort = to_float64_array(tau)
        self.pub_gravity.publish(out)
        pub = self.pub_cmd  # read once: a topic change may replace it meanwhile
        if pub is not None and st.command_names:
            cmd = self._cmd_msg
            ctau = tau[st.command_index]
            if cfg.effort_command_friction > 0.0:  # friction compensation, saturated with the rest
                ctau = ctau + cfg.effort_command_friction * command_friction(st, merger, now, cfg, self.log)
            cmd.data = to_float64_array(self.saturation.apply(ctau, self.log))
            pub.publish(cmd)
        self.published += 1
        if self.timing is not None:
            self.timing.add(time.perf_counter() - t0)
        ob = self.observer  # after the torques went out: the observer never holds them back
        if ob is not None and ob.obs is not None and len(msg.effort):
            if now - self._subscribers_checked > SUBSCRIBERS_CHECK:
                self._subscribers_checked = now
                self.observer_pubs.check_subscribers()
            try:
                ob.step(msg, q, now, tau, self.observer_pubs, self.log)
            except Exception as e:  # noqa: BLE001 - the observer must never stop the stream
                ob.failed += 1
                ob.last_problem = f"{type(e).__name__}: {e}"
                self.log.error(f"observer: {ob.last_problem}", throttle_duration_sec=2.0)
        if self.terms.active:  # after the torques of this joint state are out (model_terms.py)
            self.terms.publish(st, merger, msg.header, q, now, cfg.joint_state_timeout)
