"""What `dynamics_cli identify_payload --record SECONDS` does before calling the node's
identify_payload service (ros/payload_services.py): record joint states with efforts, resample them,
differentiate them, build the request; and how its answer is printed.

The differentiator: every joint's positions and efforts, as the header stamps date them, are
resampled by linear interpolation onto one uniform grid (the median message period; a driver's
jitter or dropped messages make the stamps irregular) over the time all joints were published, then
smoothed and differentiated by a Savitzky-Golay filter (scipy.signal.savgol_filter: a cubic fitted
by least squares in a sliding window of ``window`` seconds, whose value, first and second
derivative at the window's centre are position, velocity and acceleration). The efforts go through
the same filter (derivative 0), so torques and accelerations see the same smoothing; the filter is
symmetric, so neither lags. Positions are unwrapped first (a continuous joint reported within
(-pi, pi] would otherwise jump by 2 pi; no joint moves by pi between two messages). Half a window
at each end (where the fit is one-sided) is dropped, and the rest thinned to at most
``max_points`` points.
"""
from __future__ import annotations

import array

import numpy as np

from ..errors import InputError
from .calls import call_service


# ------------------------------------------------------------------------------------ the CLI side
def differentiate(stamps, values, window=0.15, max_points=2000, polyorder=3):
    """(t, X, XD, XDD, indices) from per-joint samples. ``stamps``: per joint, (n_j,) seconds;
    ``values``: per joint, (n_j, 2) positions and efforts. Returns the uniform grid t, positions X,
    their first and second derivatives XD, XDD and the filtered efforts E, each (n, joints)."""
    from scipy.signal import savgol_filter

    starts = [float(s[0]) for s in stamps]
    ends = [float(s[-1]) for s in stamps]
    t0, t1 = max(starts), min(ends)
    periods = np.concatenate([np.diff(s) for s in stamps if len(s) > 1])
    periods = periods[periods > 0]
    if periods.size == 0 or not t1 > t0:
        raise InputError("the recorded joint states span no time (no two stamps differ, or the joints "
                         "were never published over a common interval)")
    dt = float(np.median(periods))
    t = t0 + dt * np.arange(int(np.floor((t1 - t0) / dt)) + 1)
    half = int(round(window / dt / 2))
    win = 2 * max(half, (polyorder + 2) // 2) + 1
    if t.size < 2 * win:
        raise InputError(f"too short a recording: {t.size} samples at {1 / dt:.4g} Hz, the differentiator "
                         f"needs at least {2 * win} (window {window:g} s)")
    X = np.column_stack([np.interp(t, s, v[:, 0]) for s, v in zip(stamps, values)])
    E = np.column_stack([np.interp(t, s, v[:, 1]) for s, v in zip(stamps, values)])
    Xs = savgol_filter(X, win, polyorder, deriv=0, axis=0)
    XD = savgol_filter(X, win, polyorder, deriv=1, delta=dt, axis=0)
    XDD = savgol_filter(X, win, polyorder, deriv=2, delta=dt, axis=0)
    Es = savgol_filter(E, win, polyorder, deriv=0, axis=0)
    keep = np.arange(win // 2, t.size - win // 2)
    step = max(1, int(np.ceil(keep.size / max_points)))
    keep = keep[::step]
    return t[keep], Xs[keep], XD[keep], XDD[keep], Es[keep]


def trajectory_from_recording(messages, window=0.15, max_points=2000):
    """JointTrajectory of the identify_payload request from recorded sensor_msgs/JointState messages
    (header stamps; joints with a position and an effort; several publishers of different joints are
    merged by name)."""
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    series = {}
    for msg in messages:
        t = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        if len(msg.effort) != len(msg.name) or len(msg.position) != len(msg.name):
            continue
        for name, q, e in zip(msg.name, msg.position, msg.effort):
            if np.isfinite(q) and np.isfinite(e):
                series.setdefault(name, []).append((t, q, e))
    if not series:
        raise InputError("no joint state with positions and efforts for every joint was received: "
                         "identification needs the measured joint torques (effort)")
    names = sorted(series)
    stamps, values = [], []
    for n in names:
        a = np.array(sorted(series[n]))
        _, first = np.unique(a[:, 0], return_index=True)  # one value per stamp
        a = a[first]
        a[:, 1] = np.unwrap(a[:, 1])  # a continuous joint reported within one turn: no jump of 2 pi
        stamps.append(a[:, 0])
        values.append(a[:, 1:])
    t, X, XD, XDD, E = differentiate(stamps, values, window, max_points)
    t_start = max(float(s[0]) for s in stamps)
    traj = JointTrajectory()
    traj.joint_names = names
    for k in range(t.size):
        pt = JointTrajectoryPoint()
        pt.positions = array.array("d", X[k])
        pt.velocities = array.array("d", XD[k])
        pt.accelerations = array.array("d", XDD[k])
        pt.effort = array.array("d", E[k])
        dt = t[k] - t_start  # from the first stamp common to every joint
        pt.time_from_start.sec = int(dt)
        pt.time_from_start.nanosec = int(round((dt - int(dt)) * 1e9)) % 1000000000
        traj.points.append(pt)
    return traj


def record(node, topic, seconds, timeout):
    """The JointState messages on ``topic`` over ``seconds`` from the first one (best effort, which
    matches reliable publishers too). Waits at most ``timeout`` s for the first."""
    import time

    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    got = []
    qos = QoSProfile(depth=10000, reliability=ReliabilityPolicy.BEST_EFFORT)
    sub = node.create_subscription(JointState, topic, got.append, qos)
    deadline = time.monotonic() + timeout
    while not got and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    if not got:
        node.destroy_subscription(sub)
        raise TimeoutError(f"no joint state on {topic} within {timeout:g} s")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.01)
    node.destroy_subscription(sub)
    return got


def joint_states_topic(node, base, timeout):
    """The node's joint_states_topic parameter (resolved against its namespace if relative)."""
    from rcl_interfaces.srv import GetParameters

    vals = call_service(node, f"{base}/get_parameters", GetParameters,
                        GetParameters.Request(names=["joint_states_topic"]), timeout).values
    topic = vals[0].string_value if vals and vals[0].string_value else "/joint_states"
    if not topic.startswith("/"):
        ns = base.rsplit("/", 1)[0]
        topic = f"{ns}/{topic}"
    return topic


def build_request(node, args, srv_type):
    """The IdentifyPayload request of `dynamics_cli identify_payload`: recorded (--record) or from a
    YAML file of samples (--file)."""
    req = srv_type.Request()
    req.link = args.link
    req.apply = bool(args.apply)
    if args.file:
        import yaml
        from trajectory_msgs.msg import JointTrajectoryPoint
        with open(args.file) as f:
            data = yaml.safe_load(f) or {}
        req.samples.joint_names = [str(n) for n in data.get("joint_names", [])]
        for p in data.get("points", []):
            pt = JointTrajectoryPoint()
            for attr in ("positions", "velocities", "accelerations", "effort"):
                setattr(pt, attr, [float(x) for x in p.get(attr) or []])
            req.samples.points.append(pt)
        return req
    base = args.node.rstrip("/")
    topic = args.topic or joint_states_topic(node, base, args.timeout)
    print(f"recording {topic} for {args.record:g} s: move the arm (see docs/identify.md, payload identification)",
          file=__import__("sys").stderr, flush=True)
    msgs = record(node, topic, args.record, args.timeout)
    req.samples = trajectory_from_recording(msgs, args.window, args.max_points)
    return req


def add_arguments(sp):
    sp.add_argument("--link", required=True, help="the link the payload is attached to")
    src = sp.add_mutually_exclusive_group(required=True)
    src.add_argument("--record", type=float, metavar="SECONDS",
                     help="record the node's joint states (with efforts) for this long, then identify")
    src.add_argument("--file", help="YAML samples: {joint_names: [...], points: [{positions, velocities, "
                                    "accelerations, effort}]}")
    sp.add_argument("--topic", default="", help="joint-state topic (default: the node's joint_states_topic)")
    sp.add_argument("--window", type=float, default=0.15,
                    help="Savitzky-Golay window in seconds (default 0.15)")
    sp.add_argument("--max-points", type=int, default=2000, help="points sent to the node (default 2000)")
    sp.add_argument("--apply", action="store_true", help="set the identified payload (as set_payload)")


def format_response(res) -> list:
    c = res.center_of_mass
    return [f"mass: {res.mass:.12g}", f"center_of_mass: [{c.x:.12g}, {c.y:.12g}, {c.z:.12g}]",
            f"inertia: [{', '.join(f'{x:.12g}' for x in res.inertia)}]",
            f"residual_rms: {res.residual_rms:.12g}", f"condition_number: {res.condition_number:.12g}"]
