"""Speed of the ROS 2 node (issue 3, "Speed"): run by `make bench` through bench/bench.py, or alone:

    .venv/bin/python bench/bench_node.py [--calls 2000] [--messages 5000] [--points 1000]

1. Service round trip of inverse_dynamics on the default arm, client in this process and the node
   in another: median <= 0.5 ms, p99 <= 1.5 ms.
2. Joint states at 1 kHz: a gravity torque message for every input; latency from publishing the
   joint state to receiving its torque message (both hops and the node's work), p99 <= 1 ms.
3. trajectory_inverse_dynamics with 1000 points of the 7-DoF arm: time inside the node (the
   response's compute_time) and round trip.

The node runs with ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST on a domain of its own (101..200).
`run()` returns the numbers as a dict for bench/bench.py.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
ARM7 = REPO / "urdf" / "arm7.urdf"
TARGETS = {"service_median_ms": 0.5, "service_p99_ms": 1.5, "stream_p99_ms": 1.0}


def _env(domain):
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(domain)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _start_node(domain, js_topic, log):
    cmd = [sys.executable, "-m", "dynamics_node.node", "--ros-args", "-r", "__node:=bench_dynamics_node",
           "-p", f"urdf_path:={ARM7}", "-p", f"joint_states_topic:={js_topic}", "-p", "markers_rate:=0.0",
           "--log-level", "warn"]
    return subprocess.Popen(cmd, cwd=str(REPO), env=_env(domain), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _pct(a_ms):
    a = np.asarray(a_ms)
    return {"median_ms": float(np.median(a)), "p99_ms": float(np.percentile(a, 99)),
            "max_ms": float(a.max()), "n": int(a.size)}


def run(calls=2000, messages=5000, points=1000, domain=None, verbose=True):
    domain = domain or (101 + os.getpid() % 100)
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.signals import SignalHandlerOptions
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectoryPoint
    from dynamics_interfaces.srv import InverseDynamics, TrajectoryInverseDynamics

    say = print if verbose else (lambda *a, **k: None)
    js_topic = "/bench_node/joint_states"
    log = tempfile.NamedTemporaryFile("w+", prefix="bench_node-", suffix=".log", delete=False)
    proc = _start_node(domain, js_topic, log)
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node(f"bench_client_{os.getpid()}", context=ctx)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    results = {}
    try:
        def call(client, req, timeout=5.0):
            fut = client.call_async(req)
            deadline = time.perf_counter() + timeout
            while not fut.done():
                if time.perf_counter() > deadline:
                    client.remove_pending_request(fut)
                    return None
                ex.spin_once(timeout_sec=0.01)
            return fut.result()

        cli = node.create_client(InverseDynamics, "/bench_dynamics_node/inverse_dynamics")
        t_wait = time.monotonic() + 120
        while not cli.service_is_ready():
            if proc.poll() is not None or time.monotonic() > t_wait:
                log.seek(0)
                raise RuntimeError(f"node did not start:\n{log.read()}")
            ex.spin_once(timeout_sec=0.05)
        rng = np.random.default_rng(0)
        names = [f"joint{i}" for i in range(1, 8)]
        req = InverseDynamics.Request(name=names, position=rng.uniform(-1, 1, 7).tolist(),
                                      velocity=rng.uniform(-1, 1, 7).tolist(),
                                      acceleration=rng.uniform(-1, 1, 7).tolist())
        # warm-up (and the first response Fast DDS may drop right after discovery)
        ok = 0
        while ok < 200:
            ok += call(cli, req, timeout=1.0) is not None
        rt = []
        for _ in range(calls):
            t0 = time.perf_counter()
            res = call(cli, req)
            rt.append((time.perf_counter() - t0) * 1e3)
            assert res is not None and res.success, res
        results["service"] = _pct(rt)
        s = results["service"]
        s["pass"] = s["median_ms"] <= TARGETS["service_median_ms"] and s["p99_ms"] <= TARGETS["service_p99_ms"]
        say(f"node: inverse_dynamics service round trip, arm7, {calls} calls, client in another process: "
            f"median {s['median_ms']:.3f} ms, p99 {s['p99_ms']:.3f} ms, max {s['max_ms']:.2f} ms "
            f"[target median <= 0.5 ms, p99 <= 1.5 ms: {'PASS' if s['pass'] else 'FAIL'}]")

        # --------------------------------------------------------------- 1 kHz joint states
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        pub = node.create_publisher(JointState, js_topic, qos)
        recv = {}

        def on_torque(msg):
            recv[msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec] = time.perf_counter()

        node.create_subscription(JointState, "/bench_dynamics_node/gravity_torques", on_torque, qos)
        t_wait = time.monotonic() + 30
        k = 0
        while not recv and time.monotonic() < t_wait:  # until both directions are matched
            k += 1
            m = JointState(name=names, position=[0.0] * 7)
            m.header.stamp.nanosec = k
            pub.publish(m)
            ex.spin_once(timeout_sec=0.05)
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:
            ex.spin_once(timeout_sec=0.01)
        recv.clear()
        Q = rng.uniform(-1.5, 1.5, (messages, 7))
        sent = {}
        period = 1e-3
        t_start = time.perf_counter() + 0.01
        i = 0
        while i < messages:
            now = time.perf_counter()
            t_next = t_start + i * period
            if now >= t_next:
                m = JointState(name=names, position=Q[i].tolist(), velocity=[0.0] * 7)
                stamp = 1_000_000_000 + i * 1_000_000
                m.header.stamp.sec, m.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
                sent[stamp] = time.perf_counter()
                pub.publish(m)
                i += 1
                continue
            ex.spin_once(timeout_sec=max(0.0, t_next - now))
        drain_end = time.perf_counter() + 2.0
        while len(recv) < messages and time.perf_counter() < drain_end:
            ex.spin_once(timeout_sec=0.01)
        rate = messages / (max(sent.values()) - min(sent.values())) if messages > 1 else 0.0
        lat = [(recv[s] - t) * 1e3 for s, t in sent.items() if s in recv]
        st = _pct(lat) if lat else {"median_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan"), "n": 0}
        st.update(sent=messages, answered=len(lat), rate_hz=rate)
        st["pass"] = len(lat) == messages and st["p99_ms"] <= TARGETS["stream_p99_ms"]
        results["stream"] = st
        say(f"node: joint states at {rate:.0f} Hz, {messages} messages: {len(lat)}/{messages} answered, "
            f"latency joint state -> gravity torques median {st['median_ms']:.3f} ms, p99 {st['p99_ms']:.3f} ms, "
            f"max {st['max_ms']:.2f} ms [target every message, p99 <= 1 ms: {'PASS' if st['pass'] else 'FAIL'}]")

        # --------------------------------------------------------------- trajectory
        tcli = node.create_client(TrajectoryInverseDynamics, "/bench_dynamics_node/trajectory_inverse_dynamics")
        treq = TrajectoryInverseDynamics.Request()
        treq.trajectory.joint_names = names
        for k in range(points):
            treq.trajectory.points.append(JointTrajectoryPoint(
                positions=rng.uniform(-1, 1, 7).tolist(), velocities=rng.uniform(-1, 1, 7).tolist(),
                accelerations=rng.uniform(-1, 1, 7).tolist()))
        t_wait = time.monotonic() + 10
        while not tcli.service_is_ready() and time.monotonic() < t_wait:
            ex.spin_once(timeout_sec=0.05)
        inside, rtt = [], []
        for rep in range(6):
            t0 = time.perf_counter()
            res = call(tcli, treq, timeout=2.0 if rep == 0 else 10.0)
            if res is None:   # first call after discovery may be dropped
                continue
            assert res.success, res.message
            if rep > 0:
                rtt.append((time.perf_counter() - t0) * 1e3)
                inside.append(res.compute_time * 1e3)
        results["trajectory"] = {"points": points, "inside_node_ms": float(np.median(inside)),
                                 "round_trip_ms": float(np.median(rtt)),
                                 "per_point_us": float(np.median(inside)) * 1e3 / points}
        t = results["trajectory"]
        say(f"node: trajectory_inverse_dynamics, {points} points x 7 joints: {t['inside_node_ms']:.2f} ms "
            f"inside the node ({t['per_point_us']:.2f} us/point incl. message conversion), "
            f"round trip {t['round_trip_ms']:.2f} ms")
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--points", type=int, default=1000)
    a = ap.parse_args(argv)
    r = run(a.calls, a.messages, a.points)
    return 0 if r["service"]["pass"] and r["stream"]["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
