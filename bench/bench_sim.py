"""The simulated robot's real-time rate (issue 23 §5, issue 30 §7): does `simulation: true` keep 1 kHz?

    .venv/bin/python bench/bench_sim.py [--seconds 10]

Two robots, each starting from joint2 = 1.2, joint4 = 0.6, from where it falls and comes to rest:
- "4 points": arm7 with contact points at the origins of link4, link5, link6 and tool0 only, on the
  soft floor of issue 23 (1e4 N/m); it rests on those four points (the 12 x 12 contact problem every
  step);
- "shapes+table" (issue 30): arm7 with its collision shapes (every link a cylinder: 16 rim points each,
  128 in all), its joint limits and a table (simulation_obstacles 0.8 0 0.15 0.6 1.0 0.3) beside the
  floor, with the default stiffness (1e7 N/m) and simulation_default_damping 0.1; it falls onto the
  table and lies on it (the points within 1 cm of a surface enter each step's contact problem).
After 4 s of settling, a window of `--seconds` is read from the node's own /diagnostics
(`<name>: simulation`: the steps it took and the simulated time it advanced over the wall time, the
steps that started more than a period late, the step time of the last 2000 steps: dn.simulate_step
plus publishing /joint_states and /clock). Two conditions: alone, and with both cores loaded by two
busy processes (nice 0) for the whole window. Nothing is asserted: this is a measurement.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
NAME = "bench_sim"
PARAMS = ["-p", "urdf_path:=" + str(REPO / "urdf" / "arm7.urdf"), "-p", "simulation:=true",
          "-p", "simulation_initial_positions:=[joint2=1.2,joint4=0.6]",
          "-p", f"joint_states_topic:=/{NAME}/joint_states", "-r", f"/clock:=/{NAME}/clock"]
ROBOTS = {"4 points": ["-p", "simulation_contact_links:=[link4,link5,link6,tool0]",
                       "-p", "simulation_contact_points:=[0.,0.,0.,0.,0.,0.,0.,0.,0.,0.,0.,0.]",
                       "-p", "simulation_stiffness:=10000.0"],
          "shapes+table": ["-p", "simulation_obstacles:=[0.8,0.0,0.15,0.6,1.0,0.3]",
                           "-p", "simulation_default_damping:=0.1"]}
BURN = "import os, time\nend = time.monotonic() + float(os.sys.argv[1])\nwhile time.monotonic() < end: pass\n"


def _env():
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(env.get("ROS_DOMAIN_ID") or 150 + os.getpid() % 50)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _reader(env):
    """An rclpy context in this process on the node's domain, keeping its latest simulation status."""
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    import threading

    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    rclpy.init()
    node = rclpy.create_node("bench_sim_reader")
    latest = {}

    def on_diag(msg):
        for s in msg.status:
            if s.name == f"{NAME}: simulation":
                latest.clear()
                latest.update({kv.key: kv.value for kv in s.values}, _at=time.monotonic(), _level=s.level)

    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 10)
    threading.Thread(target=rclpy.spin, args=(node,), daemon=True).start()
    return latest


def _wait(latest, pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if latest and pred(latest):
            return dict(latest)
        time.sleep(0.05)
    raise TimeoutError(f"no such status within {timeout} s: {latest}")


def window(latest, seconds, load):
    burn = [subprocess.Popen([sys.executable, "-c", BURN, str(seconds + 3)]) for _ in range(2 if load else 0)]
    try:
        t0 = time.monotonic()
        a = _wait(latest, lambda s: s["_at"] > t0, 5.0)
        time.sleep(seconds)
        b = _wait(latest, lambda s: s["_at"] > a["_at"] + seconds - 0.5, 5.0)
    finally:
        for p in burn:
            p.kill()
    wall = float(b["wall"]) - float(a["wall"])  # the simulator's own clock at its two reports
    steps = int(b["steps"]) - int(a["steps"])
    return {"rate": steps / wall, "rtf": (float(b["time"]) - float(a["time"])) / wall,
            "late": int(b["late"]) - int(a["late"]), "steps": steps, "touching": b["touching"],
            "p50": b.get("step_recent_us.p50"), "p99": b.get("step_recent_us.p99"), "max": b.get("step_recent_us.max"),
            "lat99": b.get("lateness_us.p99")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args(argv)
    env = _env()
    latest = _reader(env)
    print("simulated arm7 at 1 kHz x real time 1, resting after its fall (module docstring); step = dn.simulate_step "
          "+ /joint_states + /clock; p50/p99/max of the last 2000 steps")
    print(f"{'robot':13s} {'condition':13s} {'rate Hz':>9s} {'sim/wall':>9s} {'late':>6s} {'touching':>9s} "
          f"{'step p50 us':>12s} {'p99 us':>8s} {'max us':>8s}")
    for robot, extra in ROBOTS.items():
        latest.clear()
        node = subprocess.Popen([sys.executable, "-m", "dynamics_node.ros", "--ros-args", "-r", f"__node:={NAME}",
                                 *PARAMS, *extra], env=env, cwd=str(REPO), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            _wait(latest, lambda s: float(s["time"]) > 4.0, 180.0)
            for label, load in (("alone", False), ("cores loaded", True)):
                r = window(latest, args.seconds, load)
                print(f"{robot:13s} {label:13s} {r['rate']:9.1f} {r['rtf']:9.4f} {r['late']:6d} {r['touching']:>9s} "
                      f"{r['p50']:>12s} {r['p99']:>8s} {r['max']:>8s}", flush=True)
        finally:
            node.send_signal(2)
            try:
                node.wait(5)
            except subprocess.TimeoutExpired:
                node.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
