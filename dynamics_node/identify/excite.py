"""An exciting trajectory: per joint a finite Fourier series (Swevers, Ganseman, Tukel, De Schutter &
Van Brussel 1997, "Optimal robot excitation and identification"), periodic with the given period,

    q_j(t) = c_j + sum_l a_jl sin(l w t) + b_jl (cos(l w t) - 1),     w = 2 pi / period,

with the last harmonic's coefficients chosen so that q_j'(0) = q_j''(0) = 0 (it starts and, every
period, passes through c_j at rest). The coefficients minimise the condition number of the
column-normalised base-parameter regressor (friction columns included) along one period, with the
positions within 90 % of the URDF's range and the velocities within 90 % of its velocity limit
(penalties during the search, then every joint's amplitude shrunk until the limits hold).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InputError, clip
from .report import atomic_write

MARGIN = 0.9
POINT_DT = 0.02   # s between the trajectory's points
LEAD_IN = 5.0     # s to reach the start point at rest


def _limits(model):
    lo, hi, vl = [], [], []
    for name in model.joint_names:
        lim = model.joint_limits.get(name)
        a, b, _, v = lim if lim is not None else (math.nan,) * 4
        if model.joint_kinds.get(name) == "continuous" or not (np.isfinite(a) and np.isfinite(b) and b > a):
            a, b = -math.pi, math.pi
        lo.append(a)
        hi.append(b)
        vl.append(v if np.isfinite(v) and v > 0 else 1.0)
    return np.array(lo), np.array(hi), np.array(vl)


def trajectory(theta, nv, L, w, t):
    """(Q, QD, QDD) of the coefficients theta = [c (nv), a (nv x (L-1)), b (nv x (L-1))]."""
    c = theta[:nv]
    a = theta[nv:nv + nv * (L - 1)].reshape(nv, L - 1)
    b = theta[nv + nv * (L - 1):].reshape(nv, L - 1)
    ls = np.arange(1, L)
    aL = -(a @ ls) / L
    bL = -(b @ ls ** 2) / L ** 2
    A = np.concatenate([a, aL[:, None]], axis=1)
    Bc = np.concatenate([b, bL[:, None]], axis=1)
    k = np.arange(1, L + 1) * w
    S, C = np.sin(np.outer(t, k)), np.cos(np.outer(t, k))
    Q = c + S @ A.T + (C - 1) @ Bc.T
    QD = (C * k) @ A.T - (S * k) @ Bc.T
    QDD = -(S * k ** 2) @ A.T - (C * k ** 2) @ Bc.T
    return Q, QD, QDD


def condition(par, Q, QD, QDD):
    from .stack import full_regressor

    Y = full_regressor(par, Q, QD, QDD)[:, :, par.base_idx].reshape(-1, par.base_idx.size)
    n = np.linalg.norm(Y, axis=0)
    if np.any(n == 0):
        return np.inf
    s = np.linalg.svd(Y / n, compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else np.inf


def optimise(par, period, L, seed=0, iters=40):
    from scipy.optimize import minimize

    m = par.model
    nv = m.nv
    lo, hi, vl = _limits(m)
    mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    w = 2 * math.pi / period
    t = np.linspace(0, period, 60, endpoint=False)
    rng = np.random.default_rng(seed)

    def violation(theta):
        Q, QD, _ = trajectory(theta, nv, L, w, t)
        pv = np.maximum(np.abs(Q - mid) - MARGIN * half, 0) / half
        vv = np.maximum(np.abs(QD) - MARGIN * vl, 0) / vl
        return float(np.sum(pv ** 2) + np.sum(vv ** 2))

    def cost(theta):
        Q, QD, QDD = trajectory(theta, nv, L, w, t)
        c = condition(par, Q, QD, QDD)
        return (math.log(c) if np.isfinite(c) else 50.0) + 1e3 * violation(theta)

    best = None
    for _ in range(1):
        amp = 0.3 * np.minimum(half, 1.5)[:, None] / np.arange(1, L)[None, :]
        theta0 = np.concatenate([mid + 0.2 * half * rng.uniform(-1, 1, nv),
                                 (rng.normal(size=(nv, L - 1)) * amp).ravel(),
                                 (rng.normal(size=(nv, L - 1)) * amp).ravel()])
        r = minimize(cost, theta0, method="L-BFGS-B", options=dict(maxiter=iters, maxfun=iters * (theta0.size + 1)))
        if best is None or r.fun < best.fun:
            best = r
    theta = _shrink(best.x, nv, L, w, mid, half, vl, period)
    Q, QD, QDD = trajectory(theta, nv, L, w, t)
    return theta, condition(par, Q, QD, QDD)


def _shrink(theta, nv, L, w, mid, half, vl, period):
    """Scale each joint's harmonics (and pull its centre in) until positions and velocities are within limits."""
    theta = theta.copy()
    t = np.linspace(0, period, 2000, endpoint=False)
    for _ in range(50):
        Q, QD, _ = trajectory(theta, nv, L, w, t)
        c = theta[:nv]
        c[:] = np.clip(c, mid - MARGIN * half, mid + MARGIN * half)
        over_q = np.max(np.abs(Q - mid), axis=0) / (MARGIN * half)
        over_v = np.max(np.abs(QD), axis=0) / (MARGIN * vl)
        f = np.maximum(over_q, over_v)
        if np.all(f <= 1.0):
            break
        for j in np.nonzero(f > 1.0)[0]:
            theta[nv + j * (L - 1):nv + (j + 1) * (L - 1)] *= 0.95 / f[j] if over_v[j] > 1 else 0.97
            o = nv + nv * (L - 1)
            theta[o + j * (L - 1):o + (j + 1) * (L - 1)] *= 0.95 / f[j] if over_v[j] > 1 else 0.97
            if over_q[j] > 1:
                theta[j] = mid[j] + 0.9 * (theta[j] - mid[j])
    return theta


def excite_command(args, out=print):
    from .fit_params import setup
    from .run import load

    if not (args.period > 0 and math.isfinite(args.period)):
        raise InputError(f"--period must be a positive number of seconds, got {args.period!r}")
    duration = 2 * args.period if args.duration is None else args.duration
    if not (duration > 0 and math.isfinite(duration)):
        raise InputError(f"--duration must be a positive number of seconds, got {args.duration!r}")
    if not 2 <= args.harmonics <= 20:
        raise InputError(f"--harmonics must be 2..20, got {args.harmonics}")
    model, _ = load(args.urdf, False)
    model_f, _ = load(args.urdf, True)
    par = setup(model, model_f)
    theta, cond = optimise(par, args.period, args.harmonics, seed=args.seed)
    w = 2 * math.pi / args.period
    t = np.arange(0.0, duration + 1e-9, POINT_DT)
    Q, QD, QDD = trajectory(theta, model.nv, args.harmonics, w, t)
    lo, hi, vl = _limits(model)
    if np.any(Q < lo - 1e-9) or np.any(Q > hi + 1e-9) or np.any(np.abs(QD) > vl + 1e-9):
        raise InputError("could not keep the trajectory within the URDF's limits; try a longer --period")
    lines = ["header:", "  stamp: {sec: 0, nanosec: 0}", "  frame_id: ''",
             "joint_names: [" + ", ".join(repr(n) for n in model.joint_names) + "]", "points:"]

    def point(q, qd, qdd, ts):
        sec = int(math.floor(ts + 1e-12))
        ns = int(round((ts - sec) * 1e9))
        if ns >= 1000000000:
            sec, ns = sec + 1, ns - 1000000000
        return [f"  - positions: [{', '.join(repr(float(x)) for x in q)}]",
                f"    velocities: [{', '.join(repr(float(x)) for x in qd)}]",
                f"    accelerations: [{', '.join(repr(float(x)) for x in qdd)}]",
                f"    time_from_start: {{sec: {sec}, nanosec: {ns}}}"]

    for k in range(t.size):
        lines += point(Q[k], QD[k], QDD[k], LEAD_IN + t[k])
    atomic_write(args.output, lambda fh: fh.write("\n".join(lines) + "\n"))
    out(f"exciting trajectory for {len(model.joint_names)} joints: period {args.period:g} s, {args.harmonics} "
        f"harmonics, {duration:g} s after a {LEAD_IN:g} s lead-in to the start point; condition number "
        f"{cond:.4g} (column-normalised base regressor, {par.base_idx.size} base parameters)")
    out(f"wrote {clip(args.output, 160)}")
    return cond
