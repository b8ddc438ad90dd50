"""/clock as a client on simulated time sees it (issue 42 §3): the simulated robot at real_time_factor 5.

    .venv/bin/python bench/bench_clock.py [--seconds 20] [--settle 4]

The node, a subprocess started as bench_sim.py starts it (its "shapes+table" robot: arm7 with its collision
shapes, its joint limits, the table of simulation_obstacles and simulation_default_damping 0.1, falling from
joint2 = 1.2, joint4 = 0.6 onto the table), at real_time_factor 5 with its default /clock and /joint_states,
twice: publishing them at every step (simulation_publish_rate 1000 Hz = simulation_rate, what the node did
before that parameter) and at the default rate (100 Hz of simulated time). For each, a separate process (this
script with --client) runs an rclpy node subscribed to /clock (rosgraph_msgs/Clock) and /joint_states
(sensor_msgs/JointState) with the default QoS (depth 10: reliable, volatile), spun by a SingleThreadedExecutor
as a controller's Python node is. Once /clock has passed --settle s of simulated time (the arm at rest on the
table), it reads for --seconds of its wall clock (time.monotonic at each callback) and reports the /clock
advance over the wall time (the last /clock received minus the first, over the time between their arrivals)
and the messages of each topic it received per wall-clock second. Meanwhile this process reads the node's own
/diagnostics (bench_sim's reader) over a window of the same length from the same simulated time: its
real-time factor (simulated time over its own CLOCK_MONOTONIC between two reports), steps late and step p50
(the step with its publishing). Every process has ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST and this run's own
ROS_DOMAIN_ID (one no participant of this host uses: test/node_support.py). The target is a client's /clock
at >= 4.5 times the wall clock. Nothing is asserted: this is a measurement.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
RTF = 5.0
TARGET = 4.5
MODES = [("every step", ["-p", "simulation_publish_rate:=1000.0"]), ("default", [])]


def client(seconds, settle, timeout=300.0):
    """The client node (module docstring): prints one JSON line of what it measured."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState
    rclpy.init()
    node = rclpy.create_node("bench_clock_client")
    clock, js, win = [], [], {}

    def on_clock(m):
        now, t = time.monotonic(), m.clock.sec * 1_000_000_000 + m.clock.nanosec
        if not win and t >= settle * 1e9:
            win["end"] = now + seconds
        if win and now <= win["end"]:
            clock.append((now, t))

    def on_js(m):
        now = time.monotonic()
        if win and now <= win["end"]:
            js.append((now, m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec))

    node.create_subscription(Clock, "/clock", on_clock, 10)
    node.create_subscription(JointState, "/joint_states", on_js, 10)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    give_up = time.monotonic() + timeout
    while time.monotonic() < (win["end"] if win else give_up):
        ex.spin_once(timeout_sec=0.1)
    ex.shutdown()
    node.destroy_node()
    rclpy.shutdown()
    out = {"clock": len(clock), "joint_states": len(js), "window": seconds}
    if len(clock) >= 2:
        (w0, t0), (w1, t1) = clock[0], clock[-1]
        out.update(ratio=(t1 - t0) / ((w1 - w0) * 1e9), sim_s=(t1 - t0) * 1e-9, wall_s=w1 - w0)
    if len(js) >= 2:
        out["js_ratio"] = (js[-1][1] - js[0][1]) / ((js[-1][0] - js[0][0]) * 1e9)
    print(json.dumps(out), flush=True)
    return 0 if len(clock) >= 2 else 1


def run(mode, extra, env, latest, seconds, settle):
    """One node at RTF with one client: (the client's JSON, the node's diagnostics window)."""
    import bench_sim as S
    log = tempfile.NamedTemporaryFile("w+", prefix="bench_clock-", suffix=".log", delete=False)
    latest.clear()
    node = subprocess.Popen([sys.executable, "-m", "dynamics_node.ros", "--ros-args", "-r", f"__node:={S.NAME}",
                             "-p", "urdf_path:=" + str(REPO / "urdf" / "arm7.urdf"), "-p", "simulation:=true",
                             "-p", "simulation_initial_positions:=[joint2=1.2,joint4=0.6]",
                             *S.ROBOTS["shapes+table"], "-p", f"real_time_factor:={RTF}", *extra],
                            env=env, cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    cl = None
    try:
        cl = subprocess.Popen([sys.executable, str(pathlib.Path(__file__).resolve()), "--client",
                               "--seconds", str(seconds), "--settle", str(settle)],
                              env=env, cwd=str(REPO), stdout=subprocess.PIPE, text=True, start_new_session=True)
        S._wait(latest, lambda s: float(s["time"]) > settle, 180.0)
        diag = S.window(latest, seconds, load=False)
        got, _ = cl.communicate(timeout=seconds + 200.0)
        lines = [x for x in got.splitlines() if x.startswith("{")]
        if cl.returncode != 0 or not lines:
            raise RuntimeError(f"{mode}: the client exited with {cl.returncode}: {got[-2000:]}")
        return json.loads(lines[-1]), diag
    except Exception:
        log.seek(0)
        print(f"{mode}: the node's output ({log.name}):\n" + log.read()[-3000:], file=sys.stderr)
        raise
    finally:
        for p in (cl, node):
            if p is not None and p.poll() is None:
                p.send_signal(2)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="the window, s of wall clock")
    ap.add_argument("--settle", type=float, default=4.0, help="s of simulated time before the window")
    ap.add_argument("--client", action="store_true", help="be the client node (module docstring)")
    args = ap.parse_args(argv)
    if args.client:
        return client(args.seconds, args.settle)
    sys.path[:0] = [str(REPO / "bench"), str(REPO / "test")]
    import node_support  # noqa: F401 - picks this run's free ROS_DOMAIN_ID and LOCALHOST into os.environ

    import bench_sim as S
    env = S._env()
    latest = S._reader(env)
    print(f"/clock seen by a separate rclpy client subscribed to /clock and /joint_states (default QoS), arm7 with "
          f"shapes and a table at real_time_factor {RTF:g}, {args.seconds:g} s of wall clock after {args.settle:g} s "
          f"of simulated time; ROS_DOMAIN_ID {env['ROS_DOMAIN_ID']} (target: client /clock >= {TARGET:g} x wall)")
    print(f"{'publication':22s} {'client clock/wall':>17s} {'clock msg/s':>11s} {'js msg/s':>9s} "
          f"{'node rtf':>9s} {'node late':>9s} {'step p50 us':>12s}")
    for mode, extra in MODES:
        c, d = run(mode, extra, env, latest, args.seconds, args.settle)
        label = f"{mode} ({'1000' if extra else '100'} Hz)"
        ratio = f"{c['ratio']:.3f}" if "ratio" in c else "n/a"
        print(f"{label:22s} {ratio:>17s} {c['clock'] / c['window']:11.0f} {c['joint_states'] / c['window']:9.0f} "
              f"{d['rtf']:9.3f} {d['late']:9d} {d['p50']:>12s}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
