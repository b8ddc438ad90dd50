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
took, and whether any start wrote into the kernel cache (a start that compiles would).

--build: also the kernel build alone from an empty cache (`python -m dynamics_node._jit_build build`)
in one process and in one per core (DYNAMICS_BUILD_JOBS), and `make setup` of a fresh clone of this
checkout with an empty kernel cache (the package downloads from pip's cache, or the network).
Prints only.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import statistics
import subprocess
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


def kernel_build(jobs):
    """(seconds, the build's last line) of the kernel build from an empty cache in `jobs` processes."""
    from dynamics_node import _build_jobs

    with tempfile.TemporaryDirectory(prefix="dn_bench_kernels_") as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": tmp, _build_jobs.JOBS: str(jobs)}
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "dynamics_node._jit_build", "build"], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=3600)
        seconds = time.monotonic() - t0
    last = (r.stdout.strip().splitlines() or [r.stderr.strip()[-300:]])[-1]
    return seconds, last if r.returncode == 0 else f"FAILED ({r.returncode}): {last}"


def make_setup():
    """(seconds, exit code) of `make setup` in a fresh clone of this checkout, its kernel cache empty."""
    with tempfile.TemporaryDirectory(prefix="dn_bench_setup_") as tmp:
        clone = pathlib.Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=300)
        env = {**os.environ, "NUMBA_CACHE_DIR": str(pathlib.Path(tmp) / "kernels")}
        env.pop("MAKEFLAGS", None)
        t0 = time.monotonic()
        r = subprocess.run(["make", "setup"], cwd=clone, env=env, capture_output=True,
                           text=True, timeout=3600)
        return time.monotonic() - t0, r.returncode


def builds():
    from dynamics_node import _build_jobs

    n = _build_jobs.jobs({}, ancestors_=[])
    print(f"this machine: {_build_jobs.cores()} cores, build processes by default: {n}", flush=True)
    for jobs in sorted({1, n}):
        seconds, last = kernel_build(jobs)
        print(f"kernel build from an empty cache, {jobs} process{'es' if jobs > 1 else ''}: {seconds:.0f} s ({last})",
              flush=True)
    seconds, rc = make_setup()
    print(f"make setup of a fresh clone, empty kernel cache: {seconds:.0f} s" + (f" (FAILED, exit {rc})" if rc else ""),
          flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--build", action="store_true", help="also the kernel build alone and make setup of a clone")
    args = ap.parse_args(argv)
    if args.build:
        builds()
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
