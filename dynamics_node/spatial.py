"""Spatial vector algebra (Featherstone Ch. 2 and App. A), in the compact forms of Table A.3.

Inside the core every spatial vector is angular-first (Featherstone §2.4): a motion vector is
[omega; v_O], a force vector [n_O; f]. A Plücker transform ``X = rot(E) xlt(r)`` (Eq. 2.24, the
``plx(E, r)`` form of Table A.3) is stored as the 3x3 rotation ``E`` (a coordinate transform: B
coordinates of a vector given in A coordinates, Table 2.2) and the position ``r`` of B's origin in A
coordinates. A rigid-body inertia is stored as ``rbi(m, h, Ibar)`` (Table A.3): mass, first moment
h = m c, and the rotational inertia Ibar about the frame origin (Eq. 2.63).

The functions below are small numba kernels over flat arrays so that the algorithms in
``algorithms/`` can call them from compiled code; they cost what Table A.4 says (X·v: 24m + 18a)
instead of a 6x6 product (36m + 30a). Plain-numpy helpers for building a model sit at the end.
"""
from __future__ import annotations

import math

import numpy as np
from ._jit import njit

# --------------------------------------------------------------------------------------------
# Plain-numpy helpers used while building a model (not on the hot path).


def rpy_to_matrix(rpy) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes X, Y, Z) to the rotation matrix R = Rz(y) Ry(p) Rx(r)."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def skew(v) -> np.ndarray:
    """The 3x3 matrix v x (Eq. 2.6 and Table 2.1)."""
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def plx_to_matrix(E, r) -> np.ndarray:
    """Dense 6x6 motion transform [[E, 0], [-E r x, E]] (Eq. 2.24), for tests and documentation."""
    X = np.zeros((6, 6))
    X[:3, :3] = E
    X[3:, 3:] = E
    X[3:, :3] = -E @ skew(r)
    return X


def rbi_from_com(mass: float, com, I_com) -> tuple[float, np.ndarray, np.ndarray]:
    """rbi(m, h, Ibar) about a frame origin from mass, centre of mass c and inertia about the CoM
    (same axes): h = m c, Ibar = I_C - m c x c x (Eq. 2.63)."""
    c = np.asarray(com, dtype=float)
    S = skew(c)
    return float(mass), mass * c, np.asarray(I_com, dtype=float) - mass * S @ S


# --------------------------------------------------------------------------------------------
# Compiled primitives for the kernels: 6-vectors are tuples of floats and transforms are read from a
# flat array at an offset (E at eo, row-major, r at ro). Numba keeps these in registers; array views
# would each be reference-counted.


@njit(cache=True, inline="always")
def xm_t(w, eo, ro, m):
    """X m for X = rot(E) xlt(r) (Table A.3), m a 6-tuple."""
    rx, ry, rz = w[ro], w[ro + 1], w[ro + 2]
    l0 = m[3] - (ry * m[2] - rz * m[1])
    l1 = m[4] - (rz * m[0] - rx * m[2])
    l2 = m[5] - (rx * m[1] - ry * m[0])
    return (w[eo] * m[0] + w[eo + 1] * m[1] + w[eo + 2] * m[2],
            w[eo + 3] * m[0] + w[eo + 4] * m[1] + w[eo + 5] * m[2],
            w[eo + 6] * m[0] + w[eo + 7] * m[1] + w[eo + 8] * m[2],
            w[eo] * l0 + w[eo + 1] * l1 + w[eo + 2] * l2,
            w[eo + 3] * l0 + w[eo + 4] * l1 + w[eo + 5] * l2,
            w[eo + 6] * l0 + w[eo + 7] * l1 + w[eo + 8] * l2)


@njit(cache=True, inline="always")
def xtf_add_t(w, eo, ro, f, dst, do):
    """dst[do:do+6] += X^T f (child force to parent, Table A.3), f a 6-tuple."""
    F0 = w[eo] * f[3] + w[eo + 3] * f[4] + w[eo + 6] * f[5]
    F1 = w[eo + 1] * f[3] + w[eo + 4] * f[4] + w[eo + 7] * f[5]
    F2 = w[eo + 2] * f[3] + w[eo + 5] * f[4] + w[eo + 8] * f[5]
    rx, ry, rz = w[ro], w[ro + 1], w[ro + 2]
    dst[do] += w[eo] * f[0] + w[eo + 3] * f[1] + w[eo + 6] * f[2] + ry * F2 - rz * F1
    dst[do + 1] += w[eo + 1] * f[0] + w[eo + 4] * f[1] + w[eo + 7] * f[2] + rz * F0 - rx * F2
    dst[do + 2] += w[eo + 2] * f[0] + w[eo + 5] * f[1] + w[eo + 8] * f[2] + rx * F1 - ry * F0
    dst[do + 3] += F0
    dst[do + 4] += F1
    dst[do + 5] += F2


@njit(cache=True, inline="always")
def crm_t(v, m):
    """v x m for motion vectors (Eq. 2.31)."""
    return (v[1] * m[2] - v[2] * m[1],
            v[2] * m[0] - v[0] * m[2],
            v[0] * m[1] - v[1] * m[0],
            v[1] * m[5] - v[2] * m[4] + v[4] * m[2] - v[5] * m[1],
            v[2] * m[3] - v[0] * m[5] + v[5] * m[0] - v[3] * m[2],
            v[0] * m[4] - v[1] * m[3] + v[3] * m[1] - v[4] * m[0])


@njit(cache=True, inline="always")
def crf_t(v, f):
    """v x* f for force vectors (Eq. 2.32)."""
    return (v[1] * f[2] - v[2] * f[1] + v[4] * f[5] - v[5] * f[4],
            v[2] * f[0] - v[0] * f[2] + v[5] * f[3] - v[3] * f[5],
            v[0] * f[1] - v[1] * f[0] + v[3] * f[4] - v[4] * f[3],
            v[1] * f[5] - v[2] * f[4],
            v[2] * f[3] - v[0] * f[5],
            v[0] * f[4] - v[1] * f[3])


@njit(cache=True, inline="always")
def rbi_mul_t(mf, bo, v):
    """rbi(m, h, Ibar) v (Eq. 2.63) with m, h, Ibar at mf[bo+12], mf[bo+13:16], mf[bo+16:25]."""
    m, h0, h1, h2 = mf[bo + 12], mf[bo + 13], mf[bo + 14], mf[bo + 15]
    I = bo + 16
    return (mf[I] * v[0] + mf[I + 1] * v[1] + mf[I + 2] * v[2] + h1 * v[5] - h2 * v[4],
            mf[I + 3] * v[0] + mf[I + 4] * v[1] + mf[I + 5] * v[2] + h2 * v[3] - h0 * v[5],
            mf[I + 6] * v[0] + mf[I + 7] * v[1] + mf[I + 8] * v[2] + h0 * v[4] - h1 * v[3],
            m * v[3] - (h1 * v[2] - h2 * v[1]),
            m * v[4] - (h2 * v[0] - h0 * v[2]),
            m * v[5] - (h0 * v[1] - h1 * v[0]))


@njit(cache=True, inline="always")
def xtf_t(w, eo, ro, f):
    """X^T f as a tuple (child force to parent, Table A.3)."""
    F0 = w[eo] * f[3] + w[eo + 3] * f[4] + w[eo + 6] * f[5]
    F1 = w[eo + 1] * f[3] + w[eo + 4] * f[4] + w[eo + 7] * f[5]
    F2 = w[eo + 2] * f[3] + w[eo + 5] * f[4] + w[eo + 8] * f[5]
    rx, ry, rz = w[ro], w[ro + 1], w[ro + 2]
    return (w[eo] * f[0] + w[eo + 3] * f[1] + w[eo + 6] * f[2] + ry * F2 - rz * F1,
            w[eo + 1] * f[0] + w[eo + 4] * f[1] + w[eo + 7] * f[2] + rz * F0 - rx * F2,
            w[eo + 2] * f[0] + w[eo + 5] * f[1] + w[eo + 8] * f[2] + rx * F1 - ry * F0,
            F0, F1, F2)


@njit(cache=True, inline="always")
def rbi_to_parent_add(w, eo, ro, c, p):
    """rbi at w[p:p+13] += X^T rbi(w[c:c+13]) X, each stored as [m, h (3), Ibar (9)] (Table A.3, Eq. 2.66).

    With h1 = E^T h and I1 = E^T Ibar E (child origin, parent axes), shifting the origin by r gives
    h' = h1 + m r and Ibar' = I1 - r x h1 x - h1 x r x - m r x r x."""
    E0, E1, E2, E3, E4, E5, E6, E7, E8 = (w[eo], w[eo + 1], w[eo + 2], w[eo + 3], w[eo + 4], w[eo + 5], w[eo + 6],
                                          w[eo + 7], w[eo + 8])
    m = w[c]
    h0, h1, h2 = w[c + 1], w[c + 2], w[c + 3]
    a0 = E0 * h0 + E3 * h1 + E6 * h2
    a1 = E1 * h0 + E4 * h1 + E7 * h2
    a2 = E2 * h0 + E5 * h1 + E8 * h2
    I = c + 4
    t00 = w[I] * E0 + w[I + 1] * E3 + w[I + 2] * E6
    t01 = w[I] * E1 + w[I + 1] * E4 + w[I + 2] * E7
    t02 = w[I] * E2 + w[I + 1] * E5 + w[I + 2] * E8
    t10 = w[I + 3] * E0 + w[I + 4] * E3 + w[I + 5] * E6
    t11 = w[I + 3] * E1 + w[I + 4] * E4 + w[I + 5] * E7
    t12 = w[I + 3] * E2 + w[I + 4] * E5 + w[I + 5] * E8
    t20 = w[I + 6] * E0 + w[I + 7] * E3 + w[I + 8] * E6
    t21 = w[I + 6] * E1 + w[I + 7] * E4 + w[I + 8] * E7
    t22 = w[I + 6] * E2 + w[I + 7] * E5 + w[I + 8] * E8
    i00 = E0 * t00 + E3 * t10 + E6 * t20
    i01 = E0 * t01 + E3 * t11 + E6 * t21
    i02 = E0 * t02 + E3 * t12 + E6 * t22
    i11 = E1 * t01 + E4 * t11 + E7 * t21
    i12 = E1 * t02 + E4 * t12 + E7 * t22
    i22 = E2 * t02 + E5 * t12 + E8 * t22
    r0, r1, r2 = w[ro], w[ro + 1], w[ro + 2]
    rh = r0 * a0 + r1 * a1 + r2 * a2
    d = 2.0 * rh + m * (r0 * r0 + r1 * r1 + r2 * r2)
    j01 = i01 - r0 * a1 - a0 * r1 - m * r0 * r1
    j02 = i02 - r0 * a2 - a0 * r2 - m * r0 * r2
    j12 = i12 - r1 * a2 - a1 * r2 - m * r1 * r2
    w[p] += m
    w[p + 1] += a0 + m * r0
    w[p + 2] += a1 + m * r1
    w[p + 3] += a2 + m * r2
    P = p + 4
    w[P] += i00 + d - 2.0 * r0 * a0 - m * r0 * r0
    w[P + 1] += j01
    w[P + 2] += j02
    w[P + 3] += j01
    w[P + 4] += i11 + d - 2.0 * r1 * a1 - m * r1 * r1
    w[P + 5] += j12
    w[P + 6] += j02
    w[P + 7] += j12
    w[P + 8] += i22 + d - 2.0 * r2 * a2 - m * r2 * r2


@njit(cache=True, inline="always")
def rbi_to_dense(mf, bo, w, o):
    """w[o:o+36] = dense 6x6 of rbi(m, h, Ibar) at mf[bo+12:bo+25] (Eq. 2.63): [[Ibar, h x], [(h x)^T, m 1]]."""
    for k in range(36):
        w[o + k] = 0.0
    I = bo + 16
    for a in range(3):
        for b in range(3):
            w[o + 6 * a + b] = mf[I + 3 * a + b]
    h0, h1, h2, m = mf[bo + 13], mf[bo + 14], mf[bo + 15], mf[bo + 12]
    w[o + 4] = -h2
    w[o + 5] = h1
    w[o + 9] = h2
    w[o + 11] = -h0
    w[o + 15] = -h1
    w[o + 16] = h0
    w[o + 19] = h2
    w[o + 20] = -h1
    w[o + 24] = -h2
    w[o + 26] = h0
    w[o + 30] = h1
    w[o + 31] = -h0
    w[o + 21] = m
    w[o + 28] = m
    w[o + 35] = m


@njit(cache=True, inline="always")
def dense_to_parent_add(w, eo, ro, ia, out, t):
    """w[out:out+36] += X^T Ia X, Ia = w[ia:ia+36] (dense symmetric, flat), X = rot(E) xlt(r) with E at
    w[eo], r at w[ro]; scratch w[t:t+63]. Featherstone Eq. 2.66 by blocks (Ia = [[A, B], [B^T, C]]):
    rotate A1 = E^T A E etc., then with R = r x: A' = A1 - B1 R + R B1^T - R C1 R, B' = B1 + R C1,
    C' = C1. Only
    the blocks A, B and C are rotated (the lower-left one is B^T), each as (E^T (A E))."""
    for bi, bj in ((0, 0), (0, 1), (1, 1)):
        base = ia + 18 * bi + 3 * bj
        for k in range(3):
            # row k of (A E), kept in scalars
            a0, a1, a2 = w[base + 6 * k], w[base + 6 * k + 1], w[base + 6 * k + 2]
            x0 = a0 * w[eo] + a1 * w[eo + 3] + a2 * w[eo + 6]
            x1 = a0 * w[eo + 1] + a1 * w[eo + 4] + a2 * w[eo + 7]
            x2 = a0 * w[eo + 2] + a1 * w[eo + 5] + a2 * w[eo + 8]
            w[t + 36 + 3 * k] = x0
            w[t + 36 + 3 * k + 1] = x1
            w[t + 36 + 3 * k + 2] = x2
        ob = t + 18 * bi + 3 * bj
        for a in range(3):
            e0, e1, e2 = w[eo + a], w[eo + 3 + a], w[eo + 6 + a]
            for b in range(3):
                w[ob + 6 * a + b] = e0 * w[t + 36 + b] + e1 * w[t + 39 + b] + e2 * w[t + 42 + b]
    r0, r1, r2 = w[ro], w[ro + 1], w[ro + 2]
    R = t + 36
    w[R], w[R + 1], w[R + 2] = 0.0, -r2, r1
    w[R + 3], w[R + 4], w[R + 5] = r2, 0.0, -r0
    w[R + 6], w[R + 7], w[R + 8] = -r1, r0, 0.0
    RC = t + 45
    BR = t + 54
    for a in range(3):
        for b in range(3):
            s1 = 0.0
            s2 = 0.0
            for k in range(3):
                s1 += w[R + 3 * a + k] * w[t + 6 * (3 + k) + 3 + b]
                s2 += w[t + 6 * a + 3 + k] * w[R + 3 * k + b]
            w[RC + 3 * a + b] = s1
            w[BR + 3 * a + b] = s2
    for a in range(3):
        for b in range(3):
            s = w[t + 6 * a + b] - w[BR + 3 * a + b] - w[BR + 3 * b + a]
            for k in range(3):
                s -= w[RC + 3 * a + k] * w[R + 3 * k + b]
            w[out + 6 * a + b] += s
            bp = w[t + 6 * a + 3 + b] + w[RC + 3 * a + b]
            w[out + 6 * a + 3 + b] += bp
            w[out + 6 * (3 + b) + a] += bp
            w[out + 6 * (3 + a) + 3 + b] += w[t + 6 * (3 + a) + 3 + b]


@njit(cache=True, inline="always")
def load6(w, o):
    """w[o:o+6] as a 6-tuple."""
    return (w[o], w[o + 1], w[o + 2], w[o + 3], w[o + 4], w[o + 5])


@njit(cache=True, inline="always")
def store6(w, o, t):
    """w[o:o+6] = the 6-tuple t."""
    w[o] = t[0]
    w[o + 1] = t[1]
    w[o + 2] = t[2]
    w[o + 3] = t[3]
    w[o + 4] = t[4]
    w[o + 5] = t[5]
