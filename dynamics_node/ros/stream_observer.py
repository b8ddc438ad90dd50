"""The momentum observer on the joint-state stream: external joint torques, the wrench at a link,
collisions (in the stream process; the core is dynamics_node/algorithms/estimation/observer.py).

For every joint state that carries effort, after its gravity torques are published (the torque
output is never held back), the stream's `StreamObserver` runs the observer on that sample: the
merged positions and velocities of every joint and their efforts, which must all be fresh
(`joint_state_timeout`, arrival time) and all be finite. Effort is taken to be the measured joint
torque [N m] (N for prismatic joints); a driver that reports motor current must be scaled first.
The observer integrates over the messages' header stamps (nanoseconds, relative to the first
sample, so that no precision is lost to the epoch), and restarts on a gap between stamps longer
than `joint_state_timeout`, on a stamp that goes back, on a model or parameter change, and on the
service `~/reset_observer` (std_srvs/Trigger, served by the stream's own thread, so a reset never
races a joint state).

Outputs: `~/external_torques` (sensor_msgs/JointState: the input's header, the model's joints,
effort = r), `~/external_wrench` (geometry_msgs/WrenchStamped, frame_id = wrench_link, the input's
stamp: the wrench at that link's origin in its axes, least squares from r = Jᵀ F),
`~/collision` (std_msgs/Bool, transient local: true when some |r_i| exceeds collision_threshold,
false when none does any more; each episode is logged once). Nothing non-finite is published.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..errors import ConfigError, DynamicsError, clip
from ..algorithms.estimation.observer import MomentumObserver, external_wrench, link_jacobian
from .conversions import to_float64_array


def default_wrench_link(model) -> str:
    """The tip of the longest chain: the last link (URDF order) on the deepest body (first deepest)."""
    parent = np.asarray(model.parent)
    depth = np.zeros(len(parent), dtype=int)
    for i, p in enumerate(parent):
        depth[i] = depth[p] + 1 if 0 <= p < i else 1
    if not len(depth):
        return model.root_link
    body = int(np.argmax(depth))
    links = [n for n, b in zip(model.link_names, model.link_body) if int(b) == body]
    return links[-1] if links else model.root_link


def check_config(model, cfg):
    """What the observer parameters need of the model (ConfigError naming the parameter)."""
    if cfg.observer_gain <= 0:
        return
    if cfg.wrench_link and cfg.wrench_link not in model.link_names:
        raise ConfigError(f"wrench_link: the model '{model.name}' has no link '{clip(cfg.wrench_link)}' (its "
                          f"links: {', '.join(model.link_names[:30])}); leave it empty for "
                          f"'{default_wrench_link(model)}'")
    n = len(cfg.collision_threshold)
    if n not in (0, 1, model.nv):
        raise ConfigError(f"collision_threshold: expected 0, 1 or {model.nv} values (one per joint in "
                          f"the model's order {', '.join(model.joint_names)}), got {n}")


class StreamObserver:
    """The observer of one model state and config, run by the stream thread."""

    def __init__(self, st, cfg, merger):
        self.st, self.cfg, self.merger = st, cfg, merger
        m = st.model
        self.off_reason = ""
        self.obs = None
        if cfg.observer_gain <= 0:
            self.off_reason = "off (observer_gain 0)"
        elif st.loops or m.floating_base or not merger.single_dof:
            self.off_reason = "off: the observer needs a fixed-base tree of one-coordinate joints"
        else:
            self.obs = MomentumObserver(m, cfg.observer_gain, timeout=cfg.joint_state_timeout)
        self.link = cfg.wrench_link or default_wrench_link(m)
        th = np.asarray(cfg.collision_threshold, dtype=float)
        self.threshold = np.full(m.nv, th[0]) if th.size == 1 else (th if th.size == m.nv else None)
        conv = st.conv
        self.jv = np.asarray([conv._v_of[j][0] for j in merger.names], dtype=np.intp)
        self.qd = np.zeros(m.nv)
        self.tau = np.zeros(m.nv)
        self.g = np.zeros(m.nv)
        self.g_index = np.asarray(st.torque_v_index, dtype=np.intp)  # the gravity torques' v indices
        self.t0_ns = None
        self.names = list(m.joint_names)
        self.samples = self.resets = self.skipped = self.not_finite = self.failed = 0
        self.last_problem = ""
        self.rank, self.condition = None, float("nan")
        self.collision = False
        self.collisions = 0
        self.time_us = 0.0
        self._fresh = True

    def reset(self, why):
        if self.obs is not None:
            self.obs.reset(why)
            self.t0_ns = None
            self.resets += 1
            self._fresh = True

    def _sample(self, now, timeout):
        """(q̇, τ) of every joint when all are fresh and finite, else None."""
        mg = self.merger
        limit = now - timeout
        if mg.t_vel.min() < limit or mg.t_eff.min() < limit:
            return None
        self.qd[self.jv] = mg.vel
        self.tau[self.jv] = mg.eff
        return self.qd, self.tau

    def step(self, msg, q, now, g, pubs, log):
        """Run the observer on a joint state whose gravity torques went out; publish what it gives."""
        if self.obs is None or not len(msg.effort):
            return
        if len(msg.effort) != len(msg.name):   # reported by the merge; the efforts are not used
            self.skipped += 1
            return
        t_start = time.perf_counter()
        sample = self._sample(now, self.cfg.joint_state_timeout)
        if sample is None:
            self.skipped += 1
            return
        stamp = msg.header.stamp
        ns = stamp.sec * 1_000_000_000 + stamp.nanosec
        if self.t0_ns is None or self.obs._t is None:
            self.t0_ns = ns
        self.g[self.g_index] = g
        try:
            r = self.obs.update((ns - self.t0_ns) * 1e-9, q, sample[0], sample[1], g=self.g)
            if r is None:
                self.skipped += 1
                return
            if self.obs.samples == 1 and self.samples and not self._fresh:
                self.resets += 1  # the core restarted on a gap or a stamp going back
            self._fresh = False
            est = external_wrench(self.st.model, q, self.link, r,
                                  J=link_jacobian(self.st.model, q, self.link)) if pubs.want_wrench else None
        except DynamicsError as e:
            self.failed += 1
            self.last_problem = str(e)
            log.warning(f"observer: {e}", throttle_duration_sec=2.0)
            self.reset(f"failed: {e}")
            return
        if not np.isfinite(r).all() or (est is not None and not np.isfinite(est.wrench).all()):
            self.not_finite += 1
            self.reset("non-finite result")
            return
        self.samples += 1
        pubs.publish(msg, self.names, r, self.link, est)
        if est is not None:
            self.rank, self.condition = est.rank, est.condition_number
        else:
            self.rank, self.condition = None, float("nan")
        if self.threshold is not None:
            self._collision(r, pubs, log)
        self.time_us = (time.perf_counter() - t_start) * 1e6

    def _collision(self, r, pubs, log):
        over = np.abs(r) > self.threshold
        hit = bool(over.any())
        if hit == self.collision:
            return
        self.collision = hit
        pubs.collision(hit)
        if hit:
            self.collisions += 1
            what = ", ".join(f"{self.names[k]} {r[k]:.4g} (threshold {self.threshold[k]:g})"
                             for k in np.flatnonzero(over))
            log.warning(f"collision: external torque above collision_threshold at {what}")
        else:
            log.info("collision over: every external torque below collision_threshold")

    def report(self) -> dict:
        o = self.obs
        return {"state": self.off_reason or "on", "gain": self.cfg.observer_gain, "link": self.link,
                "samples": self.samples, "resets": self.resets, "skipped": self.skipped,
                "not_finite": self.not_finite, "failed": self.failed, "last_problem": self.last_problem,
                "last_reset": o.last_reset if o is not None else "", "rank": self.rank,
                "condition_number": self.condition, "collision": self.collision,
                "collisions": self.collisions, "time_us": self.time_us}


def warm(st, cfg):
    """Load the observer's kernels for st's model (numba's cache: about a second the first time in
    a process, microseconds after) in the calling thread: the stream process calls it where it loads
    a model, before the new state reaches the stream and, at start, before it subscribes to the
    joint states, so that the observer runs from the first joint state (a warm-up in a thread of its
    own left the first seconds without estimates, and longer on a busy machine)."""
    m = st.model
    if cfg.observer_gain <= 0 or st.loops or m.floating_base:
        return
    q, z = np.asarray(m.neutral(), dtype=float), np.zeros(m.nv)
    link = cfg.wrench_link or default_wrench_link(m)
    try:
        MomentumObserver(m, 1.0).update(0.0, q, z, z)
        external_wrench(m, q, link, z, J=link_jacobian(m, q, link))
    except Exception:  # noqa: BLE001 - the first real sample will say what fails
        pass


class ObserverPublishers:
    """The observer's topics on the stream node (names resolved by the main node)."""

    def __init__(self, node, resolve):
        from geometry_msgs.msg import WrenchStamped
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Bool
        self.JointState, self.WrenchStamped, self.Bool = JointState, WrenchStamped, Bool
        from .stream_executor import output_events
        from .stream_executor import OUT_DEPTH
        qos = QoSProfile(depth=OUT_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
        self.torques = node.create_publisher(JointState, resolve("~/external_torques"), qos,
                                             event_callbacks=output_events())
        self.wrench = node.create_publisher(WrenchStamped, resolve("~/external_wrench"), qos,
                                            event_callbacks=output_events())
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self._collision = node.create_publisher(Bool, resolve("~/collision"), latched, event_callbacks=output_events())
        self._out = (None, None)  # (joint names, the external torques message with them: reused)
        # the wrench (a Jacobian and a 6 x 6 least squares, most of the observer's cost) is computed,
        # and the external torques are published (about 60 us a joint state), while someone
        # subscribes; the stream calls check_subscribers at most every 50 ms, from the first joint
        # state with effort on (a new subscriber misses at most 50 ms of estimates)
        self.want_wrench = self.want_torques = False

    def check_subscribers(self):
        try:
            self.want_wrench = self.wrench.get_subscription_count() > 0
            self.want_torques = self.torques.get_subscription_count() > 0
        except Exception:  # noqa: BLE001 - shutting down: keep the last answer
            pass

    def publish(self, msg, names, r, link, est):
        if self.want_torques:
            onames, out = self._out
            if onames is not names:  # rclpy checks a name list when it is set: once per model state
                out = self.JointState()
                out.name = names
                self._out = (names, out)
            out.header = msg.header
            out.effort = to_float64_array(r)
            self.torques.publish(out)
        if est is not None:
            w = self.WrenchStamped()
            w.header.stamp = msg.header.stamp
            w.header.frame_id = link
            F = [float(x) for x in est.wrench]
            w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = F[:3]
            w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = F[3:]
            self.wrench.publish(w)

    def collision(self, hit):
        self._collision.publish(self.Bool(data=bool(hit)))


def reset_service(node, resolve, stream):
    """~/reset_observer (std_srvs/Trigger) on the stream node: runs in the stream's thread."""
    from std_srvs.srv import Trigger

    def handle(_req, res):
        ob = stream.observer
        if ob is None or ob.obs is None:
            res.success = False
            res.message = ("no model yet" if ob is None else f"the observer is {ob.off_reason}")
            return res
        ob.reset("reset_observer service")
        res.success = True
        res.message = "observer reset: the next joint state with effort starts it again (r = 0)"
        return res
    return node.create_service(Trigger, resolve("~/reset_observer"), handle)


def diagnostic_status(name, hw, rep):
    """The `<name>: observer` DiagnosticStatus from the stream's report (None: nothing reported)."""
    from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
    if not rep:
        return None
    s = DiagnosticStatus(name=f"{name}: observer", hardware_id=hw, level=DiagnosticStatus.OK)
    msgs = [rep["state"]]
    if rep["rank"] is not None and rep["rank"] < 6:
        s.level = DiagnosticStatus.WARN
        msgs.append(f"the Jacobian of wrench_link '{rep['link']}' has rank {rep['rank']} < 6: the wrench "
                    "is a minimum-norm estimate, some of its components are not observable there")
    if rep["collision"]:
        s.level = DiagnosticStatus.WARN
        msgs.append("collision: an external torque is above collision_threshold")
    s.message = "; ".join(msgs)
    cond = rep["condition_number"]
    s.values = [KeyValue(key=k, value=str(v)) for k, v in (
        ("observer_gain", rep["gain"]), ("wrench_link", rep["link"]), ("samples", rep["samples"]),
        ("resets", rep["resets"]), ("last_reset", rep["last_reset"] or "none"),
        ("skipped_without_fresh_effort", rep["skipped"]), ("not_finite", rep["not_finite"]),
        ("failed", rep["failed"]), ("last_problem", rep["last_problem"] or "none"),
        ("wrench_jacobian_rank", rep["rank"] if rep["rank"] is not None else "not computed (no subscriber)"),
        ("wrench_condition_number", f"{cond:.4g}" if math.isfinite(cond) else str(cond)),
        ("collisions", rep["collisions"]), ("observer_time_us.last", f"{rep['time_us']:.1f}"))]
    return s
