"""One contact alone (Featherstone §11.1, Eqs. 11.1-11.10, with Coulomb friction on the circular
cone): its force f (local axes [t1 t2 n]) when a = A_ii f + r, A_ii its 3 x 3 block of the
contact-space inverse inertia and r the rest. The block Gauss-Seidel sweeps of ncp.py solve
each contact this way against the others' forces. The modes (ncp.py's docstring):

    SEP    r_n >= 0: f = 0 leaves a_n = r_n >= 0 (Eq. 11.10, first case)
    SLIDE  frictionless or sliding in direction d: f = f_n (-mu d, 1), a_n = 0 (Eq. 11.10, second case
           with A_nn - mu A_nt d in place of M)
    STICK  a = 0: f = -A_ii^-1 r, when f_n >= 0 and |f_t| <= mu f_n
    SLIP   at rest, the cone's edge: f = f_n (-mu u, 1) with a_n = 0 and a_t = s u, s >= 0, so that the
           friction opposes the slip acceleration; u = (cos th, sin th) is a root of a_t x u = 0 found
           by sampling th and bisecting (ncp.py then solves the mode exactly).
"""
from __future__ import annotations

import math

import numpy as np

from ..._jit import njit

SEP, STICK, SLIDE, SLIP = 0, 1, 2, 3
ANGLES = 24  # samples of the slip direction's angle
WARM_STEPS = 8  # secant steps from the previous direction
BISECTIONS = 40  # halvings of a bracket (to 2e-12 rad; ncp.py refines the mode exactly)


@njit(cache=True)
def _slip_warm(Ai, r, mu, th):
    """_slip_single's root by a few secant steps from th (the previous sweep's direction); (ok, f_n, u0, u1)."""
    g0, _s, _f, v0 = _slip_residual(Ai, r, mu, th)
    if not v0:
        return False, 0.0, 0.0, 0.0
    t1 = th + 1e-3
    for _ in range(WARM_STEPS):
        g1, s1, f1, v1 = _slip_residual(Ai, r, mu, t1)
        if not v1:
            return False, 0.0, 0.0, 0.0
        if abs(g1) <= 1e-13 * (abs(s1) + 1e-300):
            return s1 >= 0.0, f1, math.cos(t1), math.sin(t1)
        if g1 == g0:
            return False, 0.0, 0.0, 0.0
        th, t1, g0 = t1, t1 - g1 * (t1 - th) / (g1 - g0), g1
    return False, 0.0, 0.0, 0.0


@njit(cache=True)
def _slip_single(Ai, r, mu):
    """Contact at rest starting to slide, alone (A_ii, rest r): f = f_n (-mu u, 1), a_n = 0, a_t = s u
    with s >= 0, u = (cos th, sin th). Returns (ok, f_n, u0, u1)."""
    best_ok = False
    bf, b0, b1 = 0.0, 0.0, 0.0
    prev_g = 0.0
    prev_th = 0.0
    prev_valid = False
    for k in range(ANGLES + 1):
        th = 2.0 * math.pi * k / ANGLES
        g, s, fn, valid = _slip_residual(Ai, r, mu, th)
        if valid and prev_valid and (g == 0.0 or (g > 0.0) != (prev_g > 0.0)):
            lo, hi, glo = prev_th, th, prev_g
            for _ in range(BISECTIONS):  # on the sign change of g
                mid = 0.5 * (lo + hi)
                gm, _s, _f, vm = _slip_residual(Ai, r, mu, mid)
                if (gm > 0.0) == (glo > 0.0):
                    lo, glo = mid, gm
                else:
                    hi = mid
            th0 = 0.5 * (lo + hi)
            g0, s0, fn0, v0 = _slip_residual(Ai, r, mu, th0)
            if v0 and s0 >= 0.0 and (not best_ok or fn0 > bf):
                best_ok = True
                bf, b0, b1 = fn0, math.cos(th0), math.sin(th0)
        prev_g, prev_th, prev_valid = g, th, valid
    return best_ok, bf, b0, b1


@njit(cache=True, inline="always")
def _slip_residual(Ai, r, mu, th):
    """g = a_t x u (zero when a_t is parallel to u), s = a_t . u, f_n, valid (f_n > 0 finite)."""
    u0, u1 = math.cos(th), math.sin(th)
    m = Ai[2, 2] - mu * (Ai[2, 0] * u0 + Ai[2, 1] * u1)
    if not m > 0.0:
        return 0.0, 0.0, 0.0, False
    fn = -r[2] / m
    if not fn > 0.0:
        return 0.0, 0.0, 0.0, False
    a0 = fn * (Ai[0, 2] - mu * (Ai[0, 0] * u0 + Ai[0, 1] * u1)) + r[0]
    a1 = fn * (Ai[1, 2] - mu * (Ai[1, 0] * u0 + Ai[1, 1] * u1)) + r[1]
    return a0 * u1 - a1 * u0, a0 * u0 + a1 * u1, fn, True


@njit(cache=True, inline="always")
def _solve3(M, r0, r1, r2):
    """(ok, M^-1 r) for a 3 x 3 M (Cramer); ok False when M is singular."""
    c00 = M[1, 1] * M[2, 2] - M[1, 2] * M[2, 1]
    c01 = M[1, 2] * M[2, 0] - M[1, 0] * M[2, 2]
    c02 = M[1, 0] * M[2, 1] - M[1, 1] * M[2, 0]
    det = M[0, 0] * c00 + M[0, 1] * c01 + M[0, 2] * c02
    scale = abs(M[0, 0]) + abs(M[1, 1]) + abs(M[2, 2])
    if not abs(det) > 1e-14 * scale * scale * scale:
        return False, 0.0, 0.0, 0.0
    c10 = M[0, 2] * M[2, 1] - M[0, 1] * M[2, 2]
    c11 = M[0, 0] * M[2, 2] - M[0, 2] * M[2, 0]
    c12 = M[0, 1] * M[2, 0] - M[0, 0] * M[2, 1]
    c20 = M[0, 1] * M[1, 2] - M[0, 2] * M[1, 1]
    c21 = M[0, 2] * M[1, 0] - M[0, 0] * M[1, 2]
    c22 = M[0, 0] * M[1, 1] - M[0, 1] * M[1, 0]
    return (True, (c00 * r0 + c10 * r1 + c20 * r2) / det, (c01 * r0 + c11 * r1 + c21 * r2) / det,
            (c02 * r0 + c12 * r1 + c22 * r2) / det)


@njit(cache=True)
def single(Ai, r, mu, dyn, d0, d1, f):  # f: the previous sweep's force on entry
    """One contact against a known rest r (a = A_ii f + r): its force f (3) by the modes in the module
    docstring, tried in the order SEP, STICK, SLIDE/SLIP. Returns the mode."""
    p0, p1 = f[0], f[1]
    f[0] = 0.0
    f[1] = 0.0
    f[2] = 0.0
    if r[2] >= 0.0:
        return SEP  # f = 0 leaves a_n = r_n >= 0 (Eq. 11.10)
    if mu == 0.0 or dyn:  # frictionless, or sliding: f_t = -mu f_n d, a_n = 0
        m = Ai[2, 2] - (mu * (Ai[2, 0] * d0 + Ai[2, 1] * d1) if dyn else 0.0)
        if m > 0.0:
            fn = -r[2] / m
            f[2] = fn
            if dyn:
                f[0] = -mu * fn * d0
                f[1] = -mu * fn * d1
        return SLIDE
    ok, s0, s1, s2 = _solve3(Ai, -r[0], -r[1], -r[2])
    if ok and s2 >= 0.0 and (mu == np.inf or math.hypot(s0, s1) <= mu * s2):
        f[0], f[1], f[2] = s0, s1, s2
        return STICK
    if mu == np.inf:
        return STICK  # no solution for this contact alone: leave it at zero this sweep
    ok = False
    if p0 != 0.0 or p1 != 0.0:  # it slipped in the previous sweep: start from that direction
        ok, fn, u0, u1 = _slip_warm(Ai, r, mu, math.atan2(-p1, -p0))
    if not ok:
        ok, fn, u0, u1 = _slip_single(Ai, r, mu)
    if ok:
        f[0], f[1], f[2] = -mu * fn * u0, -mu * fn * u1, fn
        return SLIP
    m = Ai[2, 2]  # fallback: frictionless normal force, friction clipped to the cone
    if m > 0.0:
        f[2] = -r[2] / m
    return SLIP
