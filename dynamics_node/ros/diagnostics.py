"""What the node tells about itself: /diagnostics (1 Hz) and ~/markers (rviz), and the timings.

`Reporter(node)` owns the two publishers and their timers; `diagnostics(node, rep)` builds a
DiagnosticArray from the node's state: the model, the joint-state stream (rate, age, missing or
stale joints, closure residual, saturated commands, joints outside their limits; ERROR when the
stream's callback fails) and the computation (requests, percentiles).
"""
from __future__ import annotations

import collections
import math
import time

import numpy as np

import dynamics_node as dn
from ..errors import DynamicsError

LIMIT_TOLERANCE = 0.01  # rad or m beyond a URDF <limit> before a position is reported


class Timings:
    """Durations [s]: a rolling window of the last n with percentiles, and a histogram of every
    duration since start (1 us bins up to 10 ms, then one overflow bin; fixed memory) so that the
    percentiles of a long run cover every message, not only the last n. Written by one thread."""

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
        """(count, [percentile upper bounds, us], max us) over every duration since start."""
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


class Stats:
    def __init__(self):
        self.requests = collections.Counter()
        self.failures = collections.Counter()
        self.timing = Timings()


def _kv(key, value):
    from diagnostic_msgs.msg import KeyValue
    return KeyValue(key=key, value=str(value))


def _cut(items, limit=200):
    s = ", ".join(items)
    return s if len(s) <= limit else s[:limit] + f" ... ({len(items)} in all)"


def outside_limits(st, q) -> list:
    """'joint: value (limits)' for each joint whose position is beyond its URDF limits."""
    out = []
    m = st.model
    for j in m.joint_names:
        lim = m.joint_limits.get(j)
        if not lim or m.joint_kinds.get(j) == "continuous":
            continue
        lo, hi = lim[0], lim[1]
        x = float(q[m.q_slice(j).start])
        if (math.isfinite(lo) and x < lo - LIMIT_TOLERANCE) or (math.isfinite(hi) and x > hi + LIMIT_TOLERANCE):
            out.append(f"{j}: {x:.4g} (limits {lo:g} .. {hi:g})")
    return out


class Reporter:
    """/diagnostics at 1 Hz and ~/markers at the node's markers_rate, from what the node holds (its
    state, cfg, stream, latest joint states); also the services' request statistics (`stats`)."""

    def __init__(self, node):
        from diagnostic_msgs.msg import DiagnosticArray
        from visualization_msgs.msg import MarkerArray

        self.node, self.stats, self.js_rate = node, Stats(), 0.0
        self._rate_mark, self._fail_mark, self._markers_timer = (time.monotonic(), 0), (0, 0, False), None
        self._pub_diag = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._pub_markers = node.create_publisher(MarkerArray, "~/markers", 5)
        node.create_timer(1.0, self.publish_diagnostics)
        self.reset_markers_timer()

    def reset_markers_timer(self):
        node = self.node
        if self._markers_timer is not None:
            node.destroy_timer(self._markers_timer)
            self._markers_timer = None
        if node.cfg.markers_rate > 0:
            self._markers_timer = node.create_timer(1.0 / node.cfg.markers_rate, self.publish_markers)

    def stream_failing(self):
        """The stream's callback failed since the last report and published nothing."""
        return self._fail_mark[2]

    def publish_diagnostics(self):
        node = self.node
        now, r = time.monotonic(), node.stream.last
        node.stream.check()  # restart a stream process that died
        # joint-state rate from the stream's counter, over the times its reports arrived
        t_mark, n_mark = self._rate_mark
        received, at = r.get("received", 0), node.stream.last_at or now
        if at > t_mark:
            self.js_rate = max(received - n_mark, 0) / max(at - t_mark, 1e-9) if t_mark else 0.0
            self._rate_mark = (at, received)
        errors, published, _ = self._fail_mark
        e, pub = r.get("errors", 0), r.get("published", 0)
        self._fail_mark = (e, pub, e > errors and pub == published)
        try:
            self._pub_diag.publish(diagnostics(node, self))
        except Exception as e:  # noqa: BLE001 - diagnostics must never stop the node
            node.get_logger().error(f"diagnostics: {type(e).__name__}: {e}", throttle_duration_sec=10.0)

    def publish_markers(self, force=False):
        node = self.node
        st = node.state
        if st is None or (not force and self._pub_markers.get_subscription_count() == 0):
            return
        q = node.latest_or_none()
        q = np.asarray(st.model.neutral(), float) if q is None else q
        self._pub_markers.publish(markers(st, q, node.get_clock().now().to_msg()))


def diagnostics(node, rep):
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR
    name = node.get_name()
    st, cfg, stream = node.state, node.cfg, node.stream
    arr = DiagnosticArray()
    arr.header.stamp = node.get_clock().now().to_msg()
    hw = st.model.name if st else ""

    s_model = DiagnosticStatus(name=f"{name}: model", hardware_id=hw)
    if st is None:
        s_model.level, s_model.message = WARN, node.waiting_message()
    else:
        m = st.model
        s_model.level = WARN if st.warnings else OK
        s_model.message = (f"model loaded with {len(st.warnings)} warning(s)" if st.warnings else "model loaded")
        s_model.values = [
            _kv("robot", m.name), _kv("source", st.source), _kv("joints", len(m.joint_names)),
            _kv("nq", m.nq), _kv("nv", m.nv), _kv("floating_base", bool(m.floating_base)),
            _kv("total_mass_kg", f"{m.total_mass():.6g}"),
            _kv("gravity", " ".join(f"{x:g}" for x in np.asarray(m.gravity))),
            _kv("loop_joints", ", ".join(m.loop_joints) or "none"),
            _kv("payloads", "; ".join(f"{k}: {v[0]:g} kg" for k, v in st.payloads.items()) or "none"),
            _kv("warnings", _cut(list(st.warnings), 400) or "none")]

    timeout = cfg.joint_state_timeout
    s_js = DiagnosticStatus(name=f"{name}: joint states", hardware_id=hw)
    r = stream.last  # the stream process's latest report (empty until its first)
    age = r.get("age")
    at = getattr(stream, "last_at", None)  # a report is up to REPORT_PERIOD old: its age, as of now
    age = float("inf") if age is None else age + (max(0.0, time.monotonic() - at) if at is not None else 0.0)
    stale = r.get("stale", [])
    problems = []
    level = OK
    if not r:
        level, msg = WARN, "the joint-state process is starting"
    elif r.get("age") is None:
        level, msg = WARN, f"no usable joint state received on {cfg.joint_states_topic}"
    elif age > timeout:
        level, msg = WARN, f"stale: last usable joint state {age:.2f} s ago (timeout {timeout:g} s)"
    else:
        msg = "receiving joint states"
    if stale:
        level = WARN
        problems.append(f"missing or stale: {_cut(stale)}")
    sat = r.get("saturated", {})
    if sat:
        level = WARN
        problems.append("effort command saturated: " + _cut(
            [f"{j} computed {c:.4g} sent {s_:.4g}" for j, (c, s_) in sat.items()]))
    q = node.latest_or_none()
    if q is not None and st is not None:
        out = outside_limits(st, q)
        if out:
            level = WARN
            problems.append("outside joint limits: " + _cut(out))
    if not stream.alive() or (r.get("errors") and rep.stream_failing()):
        level = ERROR
        problems.append(stream.error or f"the joint-state callback fails: {r.get('last_error', '')}")
    s_js.level = level
    s_js.message = "; ".join([msg] + problems)
    s_js.values = [
        _kv("topic", cfg.joint_states_topic), _kv("rate_hz", f"{rep.js_rate:.1f}"), _kv("age_s", f"{age:.3f}"),
        _kv("received", r.get("received", 0)), _kv("dropped", r.get("dropped", 0)),
        _kv("dropped_without_model_joints", r.get("without_model_joints", 0)),
        _kv("gravity_torques_published", r.get("published", 0)), _kv("callback_errors", r.get("errors", 0)),
        _kv("missing_or_stale", _cut(stale) or "none"),
        _kv("effort_length_errors", r.get("effort_length_errors", 0)),
        _kv("last_problem", r.get("last_problem") or "none"),
        _kv("stream_process_restarts", stream.restarts)]
    if st is not None and st.loops:
        s_js.values.append(_kv("loop_closure_residual", f"{r.get('closure_residual', float('nan')):.3g}"))
    s_js.values.append(_kv("saturated_commands", r.get("saturation_count", 0)))
    mt = r.get("model_terms")  # the model_terms topic (model_terms.py), when on
    if mt:
        s_js.values += [_kv("model_terms_published", mt["published"]),
                        _kv("model_terms_skipped", mt["skipped"]), _kv("model_terms_errors", mt["errors"]),
                        _kv("model_terms_last_problem", mt["last_problem"] or "none")]
        if mt.get("percentiles_us") is not None:  # time after the torques, per joint state
            s_js.values += [_kv(f"model_terms_time_us.{k}", f"{x:.1f}")
                            for k, x in zip(("p50", "p95", "p99", "max"), mt["percentiles_us"])]

    if "simulation" in r:  # the stream process runs the simulated robot (simulation.py): no joint-state input
        s_js = simulation_status(name, hw, r, stream, DiagnosticStatus)

    stats = rep.stats
    s_srv = DiagnosticStatus(name=f"{name}: computation", hardware_id=hw, level=OK, message="ok")
    vals = [_kv("requests_served", sum(stats.requests.values())),
            _kv("requests_failed", sum(stats.failures.values()))]
    vals += [_kv(f"requests.{k}", f"{v} ({stats.failures[k]} failed)") for k, v in sorted(stats.requests.items())]
    for label, p, t in (("service", stats.timing.percentiles_us(), stats.timing.totals_us()),
                        ("joint_state", r.get("percentiles_us"), r.get("totals_us"))):
        if p is not None:
            vals += [_kv(f"{label}_time_us.{k}", f"{x:.1f}") for k, x in zip(("p50", "p95", "p99", "max"), p)]
        if t is not None:  # every one since start (the keys above: the last 2000)
            n, (a50, a99, a999), amax = t
            vals += [_kv(f"{label}_time_us.all.count", n), _kv(f"{label}_time_us.all.p50", f"{a50:.1f}"),
                     _kv(f"{label}_time_us.all.p99", f"{a99:.1f}"), _kv(f"{label}_time_us.all.p99.9", f"{a999:.1f}"),
                     _kv(f"{label}_time_us.all.max", f"{amax:.1f}")]
    s_srv.values = vals
    arr.status = [s_model, s_js, s_srv]
    from .stream_observer import diagnostic_status
    s_obs = diagnostic_status(name, hw, r.get("observer"))
    if s_obs is not None:
        arr.status.append(s_obs)
    return arr


def _sphere(frame, stamp, ns, mid, xyz, size, rgba):
    from visualization_msgs.msg import Marker
    mk = Marker()
    mk.header.frame_id = frame
    mk.header.stamp = stamp
    mk.ns, mk.id, mk.type, mk.action = ns, mid, Marker.SPHERE, Marker.ADD
    mk.pose.position.x, mk.pose.position.y, mk.pose.position.z = (float(v) for v in xyz)
    mk.pose.orientation.w = 1.0
    mk.scale.x = mk.scale.y = mk.scale.z = float(size)
    mk.color.r, mk.color.g, mk.color.b, mk.color.a = (float(v) for v in rgba)
    return mk


def markers(st, q, stamp):
    """The robot's centre of mass (frame: root link, at q) and each payload (frame: its link)."""
    from visualization_msgs.msg import Marker, MarkerArray
    m = st.model
    out = MarkerArray()
    clear = Marker(action=Marker.DELETEALL)
    clear.header.stamp = stamp
    out.markers.append(clear)
    try:
        com = np.asarray(dn.center_of_mass(m, q), dtype=float)
    except DynamicsError:
        com = None
    if com is not None and np.isfinite(com).all():
        out.markers.append(_sphere(m.root_link, stamp, "center_of_mass", 0, com, 0.06, (1.0, 0.5, 0.0, 0.9)))
        txt = _sphere(m.root_link, stamp, "center_of_mass", 1, com + [0, 0, 0.08], 0.04, (1.0, 1.0, 1.0, 1.0))
        txt.type = Marker.TEXT_VIEW_FACING
        txt.text = f"CoM {m.total_mass():.2f} kg"
        out.markers.append(txt)
    for k, (link, (mass, c, _)) in enumerate(sorted(st.payloads.items())):
        size = max(0.02, 0.05 * float(mass) ** (1.0 / 3.0))
        mk = _sphere(link, stamp, "payload", k, np.asarray(c, dtype=float), size, (0.2, 0.6, 1.0, 0.9))
        mk.frame_locked = True
        out.markers.append(mk)
    return out


def simulation_status(name, hw, r, stream, DiagnosticStatus):
    """`<name>: simulation`: the simulated robot's time, rate, late steps, step time, commands, contacts."""
    sim = r["simulation"]
    s = DiagnosticStatus(name=f"{name}: simulation", hardware_id=hw, level=DiagnosticStatus.OK)
    if not stream.alive() or sim.get("halted"):
        s.level = DiagnosticStatus.ERROR
        s.message = stream.error if not stream.alive() else sim["halted"]
    elif r.get("errors"):
        s.level = DiagnosticStatus.WARN
        s.message = f"{r['errors']} error(s), the last: {r.get('last_error', '')}"
    elif not sim.get("running"):
        s.level = DiagnosticStatus.WARN
        s.message = "waiting for the first effort command" if sim.get("waiting") else "no model yet"
    elif sim.get("over_velocity_limit"):  # the simulated joint is not clipped, but said
        s.level = DiagnosticStatus.WARN
        s.message = f"over the URDF <limit velocity>: {sim['over_velocity_limit']}"
    else:
        s.message = f"simulating: t = {sim['time']:.3f} s"
    vals = [(k, sim.get(k)) for k in ("time", "wall", "steps", "target_rate_hz", "rate_hz", "real_time_factor",
                                       "publish_rate_hz", "published", "late", "contacts", "touching",
                                       "command_topic", "command_type", "commands",
                                       "refused", "last_refusal", "collision_points", "obstacles",
                                       "over_velocity_limit", "at_limit", "command_interface", "clipped",
                                       "last_clip")]
    for label in ("step_us", "lateness_us"):
        t = sim.get(label)
        if t is not None:
            n, (a50, a99, a999), amax = t
            vals += [(f"{label}.p50", f"{a50:.1f}"), (f"{label}.p99", f"{a99:.1f}"),
                     (f"{label}.p99.9", f"{a999:.1f}"), (f"{label}.max", f"{amax:.1f}")]
    if sim.get("step_recent_us") is not None:  # the last 2000 steps
        vals += [(f"step_recent_us.{k}", f"{x:.1f}")
                 for k, x in zip(("p50", "p95", "p99", "max"), sim["step_recent_us"])]
    vals += [("errors", r.get("errors", 0)), ("last_error", r.get("last_error") or "none"),
             ("stream_process_restarts", stream.restarts)]
    def text(k, v):
        if isinstance(v, float):
            return f"{v:.6f}" if k in ("time", "wall") else f"{v:.6g}"
        return "none" if v in (None, "") else v
    s.values = [_kv(k, text(k, v)) for k, v in vals]
    return s
