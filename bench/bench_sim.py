"""The simulator's speed (issue 23 §5, issue 30 §7, issue 36 §8): the step against MuJoCo's, and the node's rate.

    .venv/bin/python bench/bench_sim.py [--seconds 10] [--only-step]

1. In-process, in one run: `dn.simulate_step` on urdf/arm7.urdf (7 joints, no contacts, its state advanced
   at each call, joint damping DAMPING as efforts) against `mujoco.mj_step` on the same URDF (damping as
   dof_damping) (MuJoCo's own loader; its link cylinders as
   geoms, no floor, so no contacts), timed in alternating batches, minimum over 9 rounds (bench.paired);
   then with contacts: the simulated robot's step (`sim.world.World.step`: the pairs near the floor and a
   table selected, the step, its efforts; arm7 with a cylinder on every link, 128 points, its limits, the
   table of `simulation_obstacles` 0.8 0 0.15 0.6 1.0 0.3), fallen onto the table and resting there after
   4 s, against mj_step on arm7 with its cylinders on a floor and the same table, resting after 4 s.
2. The node: two robots, each starting from joint2 = 1.2, joint4 = 0.6, from where it falls and rests:
   - "4 points": arm7 with contact points at the origins of link4, link5, link6 and tool0 only, on the
     soft floor of issue 23 (1e4 N/m); it rests on those four points;
   - "shapes+table" (issue 30): arm7 with its collision shapes (128 points), its joint limits and the
     table beside the floor, the default stiffness (1e7 N/m) and simulation_default_damping 0.1.
   After 4 s of settling, a window of `--seconds` is read from the node's own /diagnostics
   (`<name>: simulation`: the steps it took and the simulated time it advanced over the wall time, the
   steps that started more than a period late, the step time of the last 2000 steps: the step plus
   publishing /joint_states and /clock at the default simulation_publish_rate, 100 Hz of simulated time,
   i.e. at every 10th step; no subscriber: bench_clock.py has one), at real_time_factor 1 and, for
   shapes+table, 5: alone, and with both cores loaded by two busy processes (nice 0) for the whole window.
Nothing is asserted: this is a measurement.
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
RUNS = [("4 points", 1.0), ("shapes+table", 1.0), ("shapes+table", 5.0)]  # (robot, real_time_factor)
TABLE = (0.8, 0.0, 0.15, 0.6, 1.0, 0.3)
DAMPING = 0.5  # N m s/rad on every joint of the arm without contacts, in both simulators
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


def _mujoco(contacts):
    """mujoco's (model, data) of urdf/arm7.urdf at joint2 = 1.2, joint4 = 0.6, dt 1 ms, joint damping
    DAMPING; with contacts a floor and TABLE, damping 0.1 as the node's robot, after 4 s (resting on the
    table)."""
    import tempfile

    import mujoco
    xml = (REPO / "urdf" / "arm7.urdf").read_text().replace(
        "<robot name=\"arm7\">", "<robot name=\"arm7\"><mujoco><compiler discardvisual=\"true\" fusestatic=\"false\"/>"
        "</mujoco>", 1)
    m = mujoco.MjModel.from_xml_string(xml)
    if contacts:
        with tempfile.NamedTemporaryFile(suffix=".xml") as f:
            mujoco.mj_saveLastXML(f.name, m)
            text = open(f.name).read()
        x, y, z, sx, sy, sz = TABLE
        text = text.replace("<worldbody>", f'<worldbody><geom name="table" type="box" pos="{x} {y} {z}" '
                            f'size="{sx / 2} {sy / 2} {sz / 2}"/><geom name="floor" type="plane" size="5 5 0.1"/>', 1)
        m = mujoco.MjModel.from_xml_string(text)
    m.dof_damping[:] = 0.1 if contacts else DAMPING
    m.opt.timestep = 1e-3
    d = mujoco.MjData(m)
    names = [m.joint(i).name for i in range(m.njnt)]
    d.qpos[names.index("joint2")], d.qpos[names.index("joint4")] = 1.2, 0.6
    for _ in range(4000 if contacts else 0):
        mujoco.mj_step(m, d)
    return m, d


def step_vs_mujoco():
    """Part 1 of the module docstring: (ours, mj_step) seconds per step without and with contacts, and
    the contacts each had."""
    import mujoco
    import numpy as np

    import bench as B  # bench/bench.py: paired()
    import dynamics_node as dn
    sys.path.insert(0, str(REPO / "test"))
    from test_sim_bench import world
    m = dn.load_model(str(REPO / "urdf" / "arm7.urdf"))
    x = [np.array([0.0, 1.2, 0.0, 0.6, 0.0, 0.0, 0.0]), np.zeros(7)]

    def ours():  # damped as MuJoCo's arm below (undamped, a free arm's semi-implicit Euler gains energy)
        r = dn.simulate_step(m, x[0], x[1], -DAMPING * x[1], [], 1e-3)
        x[0], x[1] = r.q, r.qd

    mm, md = _mujoco(False)
    free = B.paired(ours, lambda: mujoco.mj_step(mm, md))
    free_ncon = md.ncon
    w = world(simulation_initial_positions=["joint2=1.2", "joint4=0.6"], simulation_obstacles=list(TABLE),
              simulation_default_damping=0.1)
    for _ in range(4000):
        w.step()
    cm, cd = _mujoco(True)
    touch = B.paired(w.step, lambda: mujoco.mj_step(cm, cd))
    return free, free_ncon, touch, (w.env.count, w.touching()), cd.ncon


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--only-step", action="store_true", help="part 1 only (in-process, no ROS)")
    args = ap.parse_args(argv)
    free, free_ncon, touch, pairs, ncon = step_vs_mujoco()
    print("one step of arm7 at 1 kHz, in-process, ours against mujoco.mj_step in the same run (module docstring):")
    print(f"  no contacts:   dn.simulate_step {free[0] * 1e6:7.2f} us, mj_step {free[1] * 1e6:7.2f} us "
          f"(MuJoCo contacts: {free_ncon}): ratio {free[0] / free[1]:.2f}")
    print(f"  on the table:  sim.world.World.step {touch[0] * 1e6:7.2f} us ({pairs[0]} pairs near a surface, "
          f"{pairs[1]} touching), mj_step {touch[1] * 1e6:7.2f} us ({ncon} contacts): ratio "
          f"{touch[0] / touch[1]:.2f}", flush=True)
    if args.only_step:
        return 0
    env = _env()
    latest = _reader(env)
    print("simulated arm7 at 1 kHz x real_time_factor, resting after its fall (module docstring); step = the step "
          "+ /joint_states + /clock at 100 Hz of simulated time; p50/p99/max of the last 2000 steps")
    print(f"{'robot':13s} {'rtf':>4s} {'condition':13s} {'rate Hz':>9s} {'sim/wall':>9s} {'late':>6s} "
          f"{'touching':>9s} {'step p50 us':>12s} {'p99 us':>8s} {'max us':>8s}")
    for robot, rtf in RUNS:
        latest.clear()
        node = subprocess.Popen([sys.executable, "-m", "dynamics_node.ros", "--ros-args", "-r", f"__node:={NAME}",
                                 *PARAMS, *ROBOTS[robot], "-p", f"real_time_factor:={rtf}"], env=env, cwd=str(REPO),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            _wait(latest, lambda s: float(s["time"]) > 4.0, 180.0)
            for label, load in (("alone", False), ("cores loaded", True)):
                r = window(latest, args.seconds, load)
                print(f"{robot:13s} {rtf:4g} {label:13s} {r['rate']:9.1f} {r['rtf']:9.4f} {r['late']:6d} "
                      f"{r['touching']:>9s} {r['p50']:>12s} {r['p99']:>8s} {r['max']:>8s}", flush=True)
        finally:
            node.send_signal(2)
            try:
                node.wait(5)
            except subprocess.TimeoutExpired:
                node.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
