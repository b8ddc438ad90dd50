"""Joint states in, gravity torques out.

`Stream` (rclpy) owns the subscription and the publishers of the stream node (in the stream's own
process, stream_process.py) and merges the joint states it hears (joint_states.JointStateMerger). The
subscription is best effort: it hears every publisher from its first message (Stream.__init__ says why).
Topic changes are handed to the stream's own executor thread (a guard condition), so an entity is never
destroyed under the thread using it; an exception in the callback is logged and counted, never the end
of the thread. Effort commands are saturated at the URDF effort limits (times effort_limit_scale), and
each saturation is reported; ~/gravity_torques keeps the unsaturated values.
"""
from __future__ import annotations

import math
import time

import numpy as np

import dynamics_node as dn
from ..errors import DynamicsError, clip_names
from .conversions import to_float64_array
from .joint_states import JointStateMerger
from .params.friction_params import command_friction


SUBSCRIBERS_CHECK = 0.05   # s: how often the observer's outputs count their subscribers (2 us each)


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
        """A shared-memory file for the new merge (latest.py), its path handed to on_latest. A merge of
        the same joints (a new payload, parameters) keeps writing the file the node reads already: a
        new one would leave the node reading the last positions of the old one until it takes the new
        path, which a busy machine delays (its markers drew the robot where it was before the change)."""
        if self.latest_writer is not None and self.merger is not None and \
                self.latest_writer.names == tuple(self.merger.names):
            return
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
