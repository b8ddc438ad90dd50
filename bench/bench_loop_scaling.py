#!/usr/bin/env python3
"""Cost against size of the closed-loop routes (issue 28), printed by `make bench` (via bench_loops.py):

1. Loop clusters (Featherstone §8.9): a chain carrying k four-bar linkages (k independent loops,
   test/data/loops/linkages.chain_with_fourbars), k = 1, 2, 4, ..., 32: the former route (Method 2 on
   the whole K: one n^c x n^c A = K H^-1 K^T, singular for planar loops, hence a pseudo-inverse) and
   the clustered one (§8.8 per block, Method 1 on the blocks; forced at every k, and the default,
   which takes the blocks from 48 loop constraints on), side by side, with each one's fitted growth
   exponent (least-squares slope of log time on log k).
2. The sparse-matrix method (§8.13, Eq. 8.64) on Fig. 8.4's ladder (linkages.ladder, a URDF with
   spherical <loop_joint>s), n = 9 ... 513 bodies: the spanning-tree route and the sparse one, time
   per call, each one's fitted exponent (slope of log time on log n over the whole range and over
   the upper half), and the crossover n (the smallest measured n from which the sparse method is
   faster).

Time per call: the minimum over repeats (machine load only adds), after a warm-up call.  The two
results of each pair are checked to agree before timing.  Run standalone or through bench_loops.py.
"""
from __future__ import annotations

import pathlib
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
for p in (REPO, REPO / "test" / "data" / "loops"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def per_call(fn, budget_s=0.3, max_repeat=50):
    fn()
    best = float("inf")
    spent = 0.0
    for _ in range(max_repeat):
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        best = min(best, dt)
        spent += dt
        if spent > budget_s:
            break
    return best


def slope(x, y):
    """Least-squares slope of log y on log x: the fitted growth exponent."""
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _state(m, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(scale=0.3, size=m.nq), rng.normal(size=m.nv), rng.normal(size=m.nv)


def clusters(ks=(1, 2, 4, 8, 16, 32)):
    import dynamics_node as dn
    import linkages
    from dynamics_node.algorithms.loops import forward as fwd

    rows = []
    for k in ks:
        m = dn.load_model(linkages.chain_with_fourbars(k)[0])
        q, qd, tau = _state(m)
        a0, _ = dn.closed_loop_forward_dynamics(m, q, qd, tau, _clustered=False)
        a1, _ = dn.closed_loop_forward_dynamics(m, q, qd, tau)
        err = float(np.linalg.norm(a1 - a0) / np.linalg.norm(a0))
        t0 = per_call(lambda: dn.closed_loop_forward_dynamics(m, q, qd, tau, _clustered=False))
        t1 = per_call(lambda: dn.closed_loop_forward_dynamics(m, q, qd, tau))
        keep = fwd.CLUSTER_MIN_NC
        fwd.CLUSTER_MIN_NC = 0  # the block route at every k
        try:
            a2, _ = dn.closed_loop_forward_dynamics(m, q, qd, tau)
            err = max(err, float(np.linalg.norm(a2 - a0) / np.linalg.norm(a0)))
            t2 = per_call(lambda: dn.closed_loop_forward_dynamics(m, q, qd, tau))
        finally:
            fwd.CLUSTER_MIN_NC = keep
        rows.append((k, m.nv, m.loop_data.n_c, t0, t2, t1, err))
    return rows


def ladder(cells=(3, 6, 11, 22, 43, 86, 171)):
    import dynamics_node as dn
    import linkages

    rows = []
    for c in cells:
        m = dn.load_model(linkages.ladder(c)[0])
        q, qd, tau = _state(m)
        a0, _ = dn.closed_loop_forward_dynamics(m, q, qd, tau)
        a1, _ = dn.closed_loop_forward_dynamics(m, q, qd, tau, method="sparse")
        err = float(np.linalg.norm(a1 - a0) / np.linalg.norm(a0))
        t1 = per_call(lambda: dn.closed_loop_forward_dynamics(m, q, qd, tau, method="sparse"))
        t0 = per_call(lambda: dn.closed_loop_forward_dynamics(m, q, qd, tau), max_repeat=50 if c < 100 else 3)
        rows.append((m.nb, m.loop_data.n_c, t0, t1, err))
    return rows


def main() -> int:
    rc = clusters()
    print("== loop clusters (§8.9): chain carrying k four-bars, closed-loop FD, time per call ==")
    print("  former: Method 2 on the whole K (one compiled kernel); blocks: §8.8 per cluster and Method 1 on the "
          "blocks; default: blocks from CLUSTER_MIN_NC = 48 loop constraints on")
    print(f"  {'k':>3} {'nv':>4} {'n^c':>4} {'former (us)':>12} {'blocks (us)':>12} {'default (us)':>13}  "
          f"{'|rel diff|':>10}")
    for k, nv, nc, t0, t2, t1, err in rc:
        print(f"  {k:>3} {nv:>4} {nc:>4} {t0 * 1e6:>12.1f} {t2 * 1e6:>12.1f} {t1 * 1e6:>13.1f}  {err:>10.1e}")
    ks = [r[0] for r in rc]
    print(f"  fitted exponent in k: former {slope(ks, [r[3] for r in rc]):.2f}, "
          f"blocks {slope(ks, [r[4] for r in rc]):.2f}, default {slope(ks, [r[5] for r in rc]):.2f}")
    rl = ladder()
    print("== sparse-matrix method (§8.13, Eq. 8.64): Fig. 8.4 ladder, closed-loop FD, time per call ==")
    print(f"  {'n':>4} {'n^c':>4} {'spanning tree (us)':>19} {'sparse (us)':>12}  {'|rel diff|':>10}")
    for n, nc, t0, t1, err in rl:
        print(f"  {n:>4} {nc:>4} {t0 * 1e6:>19.1f} {t1 * 1e6:>12.1f}  {err:>10.1e}")
    ns = [r[0] for r in rl]
    half = len(rl) // 2
    cross = next((r[0] for i, r in enumerate(rl) if all(s[3] < s[2] for s in rl[i:])), None)
    print(f"  fitted exponent in n: spanning tree {slope(ns, [r[2] for r in rl]):.2f} "
          f"(upper half {slope(ns[half:], [r[2] for r in rl[half:]]):.2f}), sparse "
          f"{slope(ns, [r[3] for r in rl]):.2f} (upper half {slope(ns[half:], [r[3] for r in rl[half:]]):.2f}; "
          "target <= 1.2)")
    print(f"  crossover: the sparse method is faster from n = {cross} bodies" if cross else
          "  crossover: not reached in this range")
    return 0


if __name__ == "__main__":
    sys.exit(main())
