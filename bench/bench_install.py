#!/usr/bin/env python3
"""First torque after an install (run by `make bench`): docs/install.md's workspace on ROS 2 Jazzy, built
with `colcon build` from a fresh kernel cache (test/workspace_support.py: the venv of Jazzy's wheels made
by `make workspace-venv` stands in for /opt/ros/jazzy), then `ros2 launch dynamics_node
dynamics.launch.py` started ROUNDS times in a row. This process publishes the demo arm's joint states
at 100 Hz from before each launch and times, from the moment the launch command is started:
  serving       the node's "serving" line in the launch's output;
  first torque  the first message on /dynamics_node/gravity_torques it receives.
Round 1 is the first start after the install (the one the robot's first minute used to wait for while
the kernels compiled); the later rounds are ordinary starts. Also printed: how long `colcon build`
took, and whether any start wrote into the kernel cache (a start that compiles would). Prints only.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import statistics
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "test"))
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))

import node_support as ns  # noqa: E402
import workspace_support as wss  # noqa: E402

Q = [0.0, 0.5, 0.0, -1.0, 0.0, 0.5, 0.0]
JOINTS = [f"joint{i}" for i in range(1, 8)]


def fmt(x):
    return "none" if x is None else f"{x:.2f} s"


def one_start(w, pub, torques, timeout=120.0):
    """(seconds to "serving", seconds to the first torque) of one `ros2 launch`, from its start."""
    ns.drain(torques)
    t0 = time.monotonic()
    p = w.start("ros2 launch dynamics_node dynamics.launch.py")
    serving = first = None
    try:
        while time.monotonic() - t0 < timeout and (first is None or serving is None):
            pub.publish(ns.joint_state(JOINTS, Q))
            if serving is None and re.search(r"serving", p.output()):
                serving = time.monotonic() - t0
            if first is None and ns.drain(torques, timeout=0.01):
                first = time.monotonic() - t0
            if p.proc.poll() is not None:
                break
            time.sleep(0.01)
    finally:
        p.stop()
    return serving, first


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args(argv)
    if wss.KIT is None or not wss.ready():
        print("bench_install.py: no workspace venv (make workspace-venv) or no ros2 kit: skipped")
        return 0
    from sensor_msgs.msg import JointState

    with tempfile.TemporaryDirectory(prefix="dn_bench_ws_") as tmp:
        w, seconds, _ = wss.build(pathlib.Path(tmp))
        print(f"colcon build (dynamics_interfaces, the C shim, the kernels from an empty cache): {seconds:.0f} s")
        c = ns.ros()
        torques, sub = c.subscribe(JointState, "/dynamics_node/gravity_torques")
        pub = c.publisher(JointState, "/joint_states")
        rows = []
        try:
            for k in range(args.rounds):
                before = w.cache_files()
                serving, first = one_start(w, pub, torques)
                wrote = sorted(f for f, st in w.cache_files().items() if before.get(f) != st)
                rows.append((serving, first))
                what = "first start after the install" if k == 0 else "a later start"
                print(f"round {k + 1} ({what}): serving {fmt(serving)}, first gravity torque {fmt(first)} after "
                      f"`ros2 launch`; kernel cache files written: {len(wrote)}")
        finally:
            c.node.destroy_publisher(pub)
            c.node.destroy_subscription(sub)
            w.run(["ros2 daemon stop"], timeout=60)
        later = [f for _, f in rows[1:] if f is not None]
        if later:
            print(f"first torque, later starts: median {statistics.median(later):.2f} s, max {max(later):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
