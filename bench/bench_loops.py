#!/usr/bin/env python3
"""Closed-loop forward dynamics of the dual-arm model (urdf/dual_arm_object.urdf, 12 joints, one
spherical loop joint) against Pinocchio's constraintDynamics on the same model and state (issue 12:
ratio <= 1), measured in one run.

Both sides solve the same problem: a CONTACT_3D RigidConstraintModel between the two joint frames of
the loop joint (Pinocchio) vs dn.closed_loop_forward_dynamics with Baumgarte stabilisation (ours;
Pinocchio's corrector is off, its default).  The state is a closed configuration with
constraint-consistent velocities; the two accelerations are checked to agree before timing.
Timing: warm-up, then batches of ours and Pinocchio's calls interleaved (so machine load hits both
alike), median time per call over the batches.  Run standalone or via bench/bench.py (``run()``).
"""
from __future__ import annotations

import json
import pathlib
import statistics
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "test" / "data" / "loops"))


def _batch(fn, number):
    t = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t) / number


def run(batches: int = 15, target_s: float = 0.02) -> dict:
    """Returns {'ours_s', 'pin_s', 'ratio', 'max_abs_diff', 'nv'} (seconds per call)."""
    import dynamics_node as dn
    from pin_oracle import PinLoop

    urdf = REPO / "urdf" / "dual_arm_object.urdf"
    model = dn.load_model(urdf)
    q0d = json.loads((REPO / "test" / "data" / "loops" / "dual_arm_q0.json").read_text())["q0"]
    q = np.array([q0d[n] for n in model.joint_names])

    keep = [n for n in model.joint_names if n not in ("arm2_joint1", "arm2_joint2", "arm2_joint3")]
    rng = np.random.default_rng(0)
    qd = dn.close_loop_velocities(model, q, rng.normal(size=model.nv), keep)
    tau = rng.normal(scale=5.0, size=model.nv)

    oracle = PinLoop(urdf, model, "object_sphere", contact="3D")  # accurate (20 proximal iterations)
    fast = PinLoop(urdf, model, "object_sphere", contact="3D", max_iter=1)  # timed: one iteration,
    # exact up to mu = 1e-12 for this full-rank constraint (Pinocchio's fastest setting)
    qp, qdp, taup = oracle.q_to_pin(q), oracle._to_pin(qd), oracle._to_pin(tau)
    a_pin, _ = oracle.forward(q, qd, tau)
    a_fast, _ = fast.forward(q, qd, tau)
    a_ours, _ = dn.closed_loop_forward_dynamics(model, q, qd, tau)
    diff = float(max(np.max(np.abs(a_ours - a_pin)), np.max(np.abs(a_fast - a_pin))))

    def ours():
        dn.closed_loop_forward_dynamics(model, q, qd, tau)

    def theirs():
        fast.call(qp, qdp, taup)

    for f in (ours, theirs):  # warm-up and calibration
        for _ in range(50):
            f()
    n_ours = max(1, int(target_s / max(_batch(ours, 200), 1e-9)))
    n_pin = max(1, int(target_s / max(_batch(theirs, 200), 1e-9)))
    t_ours, t_pin = [], []
    for _ in range(batches):
        t_ours.append(_batch(ours, n_ours))
        t_pin.append(_batch(theirs, n_pin))
    mo, mp = statistics.median(t_ours), statistics.median(t_pin)
    return {"ours_s": mo, "pin_s": mp, "ratio": mo / mp, "max_abs_diff": diff, "nv": model.nv}


def main() -> int:
    try:
        r = run()
    except Exception as e:  # the benchmark only reports
        print(f"closed-loop FD benchmark: error: {type(e).__name__}: {e}")
        return 1
    print("== closed-loop forward dynamics: dual arm holding a jointed object (12 joints, 1 spherical loop) ==")
    print(f"  ours  dn.closed_loop_forward_dynamics   {r['ours_s'] * 1e6:8.2f} us/call")
    print(f"  pin   constraintDynamics (CONTACT_3D, 1 it) {r['pin_s'] * 1e6:8.2f} us/call")
    print(f"  ratio ours/pinocchio = {r['ratio']:.2f}  (target <= 1)   "
          f"|qdd_ours - qdd_pin|max = {r['max_abs_diff']:.1e}")
    import bench_loop_scaling  # loop clusters (§8.9) and the sparse-matrix method (§8.13) against size

    return bench_loop_scaling.main()


if __name__ == "__main__":
    sys.exit(main())
