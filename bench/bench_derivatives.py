#!/usr/bin/env python3
"""Derivatives of the dynamics (issue 29), ours against Pinocchio, per call from Python, in one run (run by
`make bench` through bench.py, or alone: .venv/bin/python bench/bench_derivatives.py).

  1. dn.inverse_dynamics_derivatives vs pin.computeRNEADerivatives, dn.forward_dynamics_derivatives vs
     pin.computeABADerivatives, dn.gravity_derivatives vs pin.computeGeneralizedGravityDerivatives, timed in
     alternating batches (9 rounds; the ratio is the median of the per-round ratios with their interquartile
     range, bench/pairing.py), at the same state, on the 7-DoF arm
     (urdf/arm7.urdf), Panda with its finger's mimic joint (ours in user coordinates, Pinocchio's with the
     follower as a joint of its own), a quadruped with a floating base (solo12) and TALOS (floating, mimic
     tags removed);
  2. the batch forms per state (N = 200) next to the single-state call (bench.paired: minimum over 5 rounds);
  3. the analytic derivatives against our own central finite differences (2 nv calls of inverse_dynamics for
     d/dq through dn.integrate, 2 nv for d/dqd): the reason analytic derivatives exist.
No assertion: this only prints.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np

import bench as B  # bench/bench.py: paired(), fmt_t(), Bench, humanoid(), arm(), pinocchio and urdfgen loaded
from bench import pin, ug
from pairing import RATIO_HEADER, paired_rounds


def _fd(dn, m, q, qd, qdd, eps=1e-6):
    n = m.nv
    for j in range(n):
        e = np.zeros(n)
        e[j] = eps
        dn.inverse_dynamics(m, dn.integrate(m, q, e), qd, qdd)
        dn.inverse_dynamics(m, dn.integrate(m, q, -e), qd, qdd)
        dn.inverse_dynamics(m, q, qd + e, qdd)
        dn.inverse_dynamics(m, q, qd - e, qdd)


def main():
    import dynamics_node as dn

    label, xml, path = B.arm()
    cases = [(label, xml, False, path)]
    panda = ug.erd("panda_description/urdf/panda.urdf")   # its finger's <mimic>: our nv 8, Pinocchio's 9
    cases.append(("panda (mimic finger)", panda.read_text(), False, panda))
    solo = ug.erd("solo_description/robots/solo12.urdf")
    cases.append(("solo12 floating", solo.read_text(), True, solo))
    hl, hx = B.humanoid()
    cases.append((hl, hx, True, None))
    print(f"Derivatives (issue 29), ours vs Pinocchio, paired, per call from Python; {RATIO_HEADER}")
    print(f"{'model':<34} {'function':<32} {'ours':>12} {'pinocchio':>12} {'ratio':>17}")
    print("-" * 112)
    benches = []
    for lab, x, fl, src in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b = B.Bench(lab, x, fl, our_source=src)
        benches.append(b)
        m, (q, qd, qdd, tau) = b.model, (b.q, b.qd, b.qdd, b.tau)
        pm, pd, pq, pv, pa, pt = b.pm, b.pd, b.pq, b.pv, b.pa, b.ptau
        rows = [
            ("inverse_dynamics_derivatives", lambda: dn.inverse_dynamics_derivatives(m, q, qd, qdd),
             lambda: pin.computeRNEADerivatives(pm, pd, pq, pv, pa)),
            ("forward_dynamics_derivatives", lambda: dn.forward_dynamics_derivatives(m, q, qd, tau),
             lambda: pin.computeABADerivatives(pm, pd, pq, pv, pt)),
            ("gravity_derivatives", lambda: dn.gravity_derivatives(m, q),
             lambda: pin.computeGeneralizedGravityDerivatives(pm, pd, pq)),
        ]
        for name, fo, fp in rows:
            r = paired_rounds(fo, fp)
            print(f"{lab:<34} {name:<32} {B.fmt_t(r.ours_median):>12} {B.fmt_t(r.ref_median):>12} {r.fmt():>17}",
                  flush=True)
    print()
    print(f"{'model':<34} {'per state (N = 200)':<44} {'batch':>12} {'single':>12} {'ratio':>7}")
    print("-" * 114)
    for b in benches:
        m = b.model
        rng = np.random.default_rng(1)
        S = [ug.random_state(m, rng) for _ in range(200)]
        Q, QD, QDD, TAU = (np.array([s[k] for s in S]) for k in range(4))
        pairs = [
            ("inverse_dynamics_derivatives_batch", lambda: dn.inverse_dynamics_derivatives_batch(m, Q, QD, QDD),
             lambda: dn.inverse_dynamics_derivatives(m, b.q, b.qd, b.qdd)),
            ("linearize_batch (dt = 1 ms)", lambda: dn.linearize_batch(m, Q, QD, TAU, 1e-3),
             lambda: dn.linearize(m, b.q, b.qd, b.tau, 1e-3)),
        ]
        for name, fb, fs in pairs:
            tb, ts = B.paired(fb, fs, target=1.0, rounds=5)
            tb /= len(Q)
            print(f"{b.label:<34} {name:<44} {B.fmt_t(tb):>12} {B.fmt_t(ts):>12} {tb / ts:7.2f}", flush=True)
    print()
    print(f"{'model':<34} {'dtau/dq and dtau/dqd':<32} {'analytic':>12} {'central FD':>12} {'FD/analytic':>11}")
    print("-" * 106)
    for b in benches:
        m = b.model
        ta, tf = B.paired(lambda: dn.inverse_dynamics_derivatives(m, b.q, b.qd, b.qdd),
                          lambda: _fd(dn, m, b.q, b.qd, b.qdd), target=1.0, rounds=5)
        print(f"{b.label:<34} {'':<32} {B.fmt_t(ta):>12} {B.fmt_t(tf):>12} {tf / ta:11.1f}", flush=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
