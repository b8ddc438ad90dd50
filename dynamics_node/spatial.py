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
from numba import njit

# --------------------------------------------------------------------------------------------
# Compiled primitives. E is a flat 9-vector (row-major 3x3), r a 3-vector.


@njit(cache=True, inline="always")
def x_mul_motion(E, r, v, out):
    """out = X v for X = rot(E) xlt(r) (Table A.3, 'X v'): [E w; E (v_O - r x w)]."""
    w0, w1, w2 = v[0], v[1], v[2]
    l0 = v[3] - (r[1] * w2 - r[2] * w1)
    l1 = v[4] - (r[2] * w0 - r[0] * w2)
    l2 = v[5] - (r[0] * w1 - r[1] * w0)
    out[0] = E[0] * w0 + E[1] * w1 + E[2] * w2
    out[1] = E[3] * w0 + E[4] * w1 + E[5] * w2
    out[2] = E[6] * w0 + E[7] * w1 + E[8] * w2
    out[3] = E[0] * l0 + E[1] * l1 + E[2] * l2
    out[4] = E[3] * l0 + E[4] * l1 + E[5] * l2
    out[5] = E[6] * l0 + E[7] * l1 + E[8] * l2


@njit(cache=True, inline="always")
def x_inv_mul_motion(E, r, v, out):
    """out = X^-1 v (Table A.3): [E^T w; E^T v + r x E^T w]."""
    w0 = E[0] * v[0] + E[3] * v[1] + E[6] * v[2]
    w1 = E[1] * v[0] + E[4] * v[1] + E[7] * v[2]
    w2 = E[2] * v[0] + E[5] * v[1] + E[8] * v[2]
    l0 = E[0] * v[3] + E[3] * v[4] + E[6] * v[5]
    l1 = E[1] * v[3] + E[4] * v[4] + E[7] * v[5]
    l2 = E[2] * v[3] + E[5] * v[4] + E[8] * v[5]
    out[0] = w0
    out[1] = w1
    out[2] = w2
    out[3] = l0 + r[1] * w2 - r[2] * w1
    out[4] = l1 + r[2] * w0 - r[0] * w2
    out[5] = l2 + r[0] * w1 - r[1] * w0


@njit(cache=True, inline="always")
def xt_mul_force_add(E, r, f, out):
    """out += X^T f = X^{-1}* f (Table A.3): [E^T n + r x E^T f; E^T f]. Child force to parent."""
    f0 = E[0] * f[3] + E[3] * f[4] + E[6] * f[5]
    f1 = E[1] * f[3] + E[4] * f[4] + E[7] * f[5]
    f2 = E[2] * f[3] + E[5] * f[4] + E[8] * f[5]
    out[0] += E[0] * f[0] + E[3] * f[1] + E[6] * f[2] + r[1] * f2 - r[2] * f1
    out[1] += E[1] * f[0] + E[4] * f[1] + E[7] * f[2] + r[2] * f0 - r[0] * f2
    out[2] += E[2] * f[0] + E[5] * f[1] + E[8] * f[2] + r[0] * f1 - r[1] * f0
    out[3] += f0
    out[4] += f1
    out[5] += f2


@njit(cache=True, inline="always")
def cross_motion_add(v, m, s, out):
    """out += s * (v x m): spatial cross product for motion vectors (Eq. 2.31)."""
    out[0] += s * (v[1] * m[2] - v[2] * m[1])
    out[1] += s * (v[2] * m[0] - v[0] * m[2])
    out[2] += s * (v[0] * m[1] - v[1] * m[0])
    out[3] += s * (v[1] * m[5] - v[2] * m[4] + v[4] * m[2] - v[5] * m[1])
    out[4] += s * (v[2] * m[3] - v[0] * m[5] + v[5] * m[0] - v[3] * m[2])
    out[5] += s * (v[0] * m[4] - v[1] * m[3] + v[3] * m[1] - v[4] * m[0])


@njit(cache=True, inline="always")
def cross_force_add(v, f, out):
    """out += v x* f: spatial cross product for force vectors (Eq. 2.32)."""
    out[0] += v[1] * f[2] - v[2] * f[1] + v[4] * f[5] - v[5] * f[4]
    out[1] += v[2] * f[0] - v[0] * f[2] + v[5] * f[3] - v[3] * f[5]
    out[2] += v[0] * f[1] - v[1] * f[0] + v[3] * f[4] - v[4] * f[3]
    out[3] += v[1] * f[5] - v[2] * f[4]
    out[4] += v[2] * f[3] - v[0] * f[5]
    out[5] += v[0] * f[4] - v[1] * f[3]


@njit(cache=True, inline="always")
def rbi_mul(m, h, Ib, v, out):
    """out = I v for I = rbi(m, h, Ibar) (Eq. 2.63): [Ibar w + h x v_O; m v_O - h x w]."""
    w0, w1, w2 = v[0], v[1], v[2]
    l0, l1, l2 = v[3], v[4], v[5]
    out[0] = Ib[0] * w0 + Ib[1] * w1 + Ib[2] * w2 + h[1] * l2 - h[2] * l1
    out[1] = Ib[3] * w0 + Ib[4] * w1 + Ib[5] * w2 + h[2] * l0 - h[0] * l2
    out[2] = Ib[6] * w0 + Ib[7] * w1 + Ib[8] * w2 + h[0] * l1 - h[1] * l0
    out[3] = m * l0 - (h[1] * w2 - h[2] * w1)
    out[4] = m * l1 - (h[2] * w0 - h[0] * w2)
    out[5] = m * l2 - (h[0] * w1 - h[1] * w0)


@njit(cache=True, inline="always")
def rbi_to_parent_add(E, r, m, h, Ib, mo, ho, Io):
    """(mo, ho, Io) += X^T rbi(m, h, Ibar) X for X = rot(E) xlt(r) (Table A.3, Eq. 2.66).

    With h1 = E^T h and I1 = E^T Ibar E (child origin, parent axes), shifting the origin by r gives
    h' = h1 + m r and Ibar' = I1 - r x h1 x - h1 x r x - m r x r x.
    """
    # h1 = E^T h
    a0 = E[0] * h[0] + E[3] * h[1] + E[6] * h[2]
    a1 = E[1] * h[0] + E[4] * h[1] + E[7] * h[2]
    a2 = E[2] * h[0] + E[5] * h[1] + E[8] * h[2]
    # T = Ibar E, then I1 = E^T T
    t00 = Ib[0] * E[0] + Ib[1] * E[3] + Ib[2] * E[6]
    t01 = Ib[0] * E[1] + Ib[1] * E[4] + Ib[2] * E[7]
    t02 = Ib[0] * E[2] + Ib[1] * E[5] + Ib[2] * E[8]
    t10 = Ib[3] * E[0] + Ib[4] * E[3] + Ib[5] * E[6]
    t11 = Ib[3] * E[1] + Ib[4] * E[4] + Ib[5] * E[7]
    t12 = Ib[3] * E[2] + Ib[4] * E[5] + Ib[5] * E[8]
    t20 = Ib[6] * E[0] + Ib[7] * E[3] + Ib[8] * E[6]
    t21 = Ib[6] * E[1] + Ib[7] * E[4] + Ib[8] * E[7]
    t22 = Ib[6] * E[2] + Ib[7] * E[5] + Ib[8] * E[8]
    i00 = E[0] * t00 + E[3] * t10 + E[6] * t20
    i01 = E[0] * t01 + E[3] * t11 + E[6] * t21
    i02 = E[0] * t02 + E[3] * t12 + E[6] * t22
    i11 = E[1] * t01 + E[4] * t11 + E[7] * t21
    i12 = E[1] * t02 + E[4] * t12 + E[7] * t22
    i22 = E[2] * t02 + E[5] * t12 + E[8] * t22
    r0, r1, r2 = r[0], r[1], r[2]
    # -(r x)(h1 x) - (h1 x)(r x) = 2 (r.h1) 1 - r h1^T - h1 r^T ;  -m (r x)(r x) = m |r|^2 1 - m r r^T
    rh = r0 * a0 + r1 * a1 + r2 * a2
    rr = r0 * r0 + r1 * r1 + r2 * r2
    d = 2.0 * rh + m * rr
    j00 = i00 + d - 2.0 * r0 * a0 - m * r0 * r0
    j11 = i11 + d - 2.0 * r1 * a1 - m * r1 * r1
    j22 = i22 + d - 2.0 * r2 * a2 - m * r2 * r2
    j01 = i01 - r0 * a1 - a0 * r1 - m * r0 * r1
    j02 = i02 - r0 * a2 - a0 * r2 - m * r0 * r2
    j12 = i12 - r1 * a2 - a1 * r2 - m * r1 * r2
    mo[0] += m
    ho[0] += a0 + m * r0
    ho[1] += a1 + m * r1
    ho[2] += a2 + m * r2
    Io[0] += j00
    Io[1] += j01
    Io[2] += j02
    Io[3] += j01
    Io[4] += j11
    Io[5] += j12
    Io[6] += j02
    Io[7] += j12
    Io[8] += j22


@njit(cache=True, inline="always")
def rbi_to_dense(m, h, Ib, out):
    """Dense 6x6 (flat, row-major) of rbi(m, h, Ibar) (Eq. 2.63): [[Ibar, h x], [(h x)^T, m 1]]."""
    for k in range(36):
        out[k] = 0.0
    for a in range(3):
        for b in range(3):
            out[6 * a + b] = Ib[3 * a + b]
    # h x  = [[0, -h2, h1], [h2, 0, -h0], [-h1, h0, 0]] in the upper-right block
    out[4] = -h[2]
    out[5] = h[1]
    out[9] = h[2]
    out[11] = -h[0]
    out[15] = -h[1]
    out[16] = h[0]
    # (h x)^T = -(h x) in the lower-left block
    out[19] = h[2]
    out[20] = -h[1]
    out[24] = -h[2]
    out[26] = h[0]
    out[30] = h[1]
    out[31] = -h[0]
    out[21] = m
    out[28] = m
    out[35] = m


@njit(cache=True)
def dense_to_parent_add(E, r, Ia, out, tmp):
    """out += X^T Ia X (dense symmetric 6x6, flat) for X = rot(E) xlt(r) (Eq. 2.66).

    Blocks Ia = [[A, B], [B^T, C]]: rotate (A1 = E^T A E etc.), then with R = r x:
    A' = A1 - B1 R + R B1^T - R C1 R,  B' = B1 + R C1,  C' = C1.
    """
    # tmp[0:36] <- rotated blocks, stored as a dense 6x6
    for bi in range(2):
        for bj in range(2):
            for a in range(3):
                for b in range(3):
                    s = 0.0
                    for k in range(3):
                        for l in range(3):
                            s += E[3 * k + a] * Ia[6 * (3 * bi + k) + 3 * bj + l] * E[3 * l + b]
                    tmp[6 * (3 * bi + a) + 3 * bj + b] = s
    r0, r1, r2 = r[0], r[1], r[2]
    # R = r x
    R = tmp[36:45]
    R[0] = 0.0
    R[1] = -r2
    R[2] = r1
    R[3] = r2
    R[4] = 0.0
    R[5] = -r0
    R[6] = -r1
    R[7] = r0
    R[8] = 0.0
    # RC = R C1 (3x3) and B1R = B1 R
    RC = tmp[45:54]
    BR = tmp[54:63]
    for a in range(3):
        for b in range(3):
            s1 = 0.0
            s2 = 0.0
            for k in range(3):
                s1 += R[3 * a + k] * tmp[6 * (3 + k) + 3 + b]
                s2 += tmp[6 * a + 3 + k] * R[3 * k + b]
            RC[3 * a + b] = s1
            BR[3 * a + b] = s2
    for a in range(3):
        for b in range(3):
            # A' = A1 - B1 R + R B1^T - R C1 R ; (R B1^T) = (B1 R^T)^T = -(B1 R)^T
            s = tmp[6 * a + b] - BR[3 * a + b] - BR[3 * b + a]
            for k in range(3):
                s -= RC[3 * a + k] * R[3 * k + b]
            out[6 * a + b] += s
            bp = tmp[6 * a + 3 + b] + RC[3 * a + b]
            out[6 * a + 3 + b] += bp
            out[6 * (3 + b) + a] += bp
            out[6 * (3 + a) + 3 + b] += tmp[6 * (3 + a) + 3 + b]


@njit(cache=True, inline="always")
def compose(E1, r1, E2, r2, Eo, ro):
    """X_o = X_1 X_2 with X_k = rot(E_k) xlt(r_k): E = E1 E2, r = r2 + E2^T r1 (Table A.3)."""
    for a in range(3):
        for b in range(3):
            Eo[3 * a + b] = E1[3 * a] * E2[b] + E1[3 * a + 1] * E2[3 + b] + E1[3 * a + 2] * E2[6 + b]
    for a in range(3):
        ro[a] = r2[a] + E2[a] * r1[0] + E2[3 + a] * r1[1] + E2[6 + a] * r1[2]


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


def pose_to_plx(R: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A frame B placed in A by rotation R (B's axes in A) and origin p (in A) is the Plücker
    transform ^B X_A = rot(R^T) xlt(p) (Eqs. 2.19-2.24)."""
    return R.T.copy(), np.asarray(p, dtype=float).copy()


def plx_compose(E1, r1, E2, r2):
    """(E, r) of rot(E1)xlt(r1) · rot(E2)xlt(r2) (Table A.3), numpy version."""
    return E1 @ E2, r2 + E2.T @ r1


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


def rbi_dense(m, h, Ib) -> np.ndarray:
    """Dense 6x6 spatial inertia of rbi(m, h, Ibar) (Eq. 2.63)."""
    I = np.zeros((6, 6))
    I[:3, :3] = Ib
    I[:3, 3:] = skew(h)
    I[3:, :3] = skew(h).T
    I[3:, 3:] = m * np.eye(3)
    return I


# --------------------------------------------------------------------------------------------
# Scalar forms of the same operations for the hot kernels: 6-vectors are passed as tuples of
# floats and transforms read from a flat array at an offset (E at eo, r at ro). Numba keeps these in
# registers; array views would each be reference-counted.


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
def rbi_to_parent_add_f(w, eo, ro, c, p):
    """rbi at w[p:p+13] += X^T rbi(w[c:c+13]) X, each stored as [m, h (3), Ibar (9)]: the same
    formulas as rbi_to_parent_add (Table A.3), on flat offsets."""
    E = w[eo:eo + 9]
    m = w[c]
    h0, h1, h2 = w[c + 1], w[c + 2], w[c + 3]
    a0 = E[0] * h0 + E[3] * h1 + E[6] * h2
    a1 = E[1] * h0 + E[4] * h1 + E[7] * h2
    a2 = E[2] * h0 + E[5] * h1 + E[8] * h2
    I = c + 4
    t00 = w[I] * E[0] + w[I + 1] * E[3] + w[I + 2] * E[6]
    t01 = w[I] * E[1] + w[I + 1] * E[4] + w[I + 2] * E[7]
    t02 = w[I] * E[2] + w[I + 1] * E[5] + w[I + 2] * E[8]
    t10 = w[I + 3] * E[0] + w[I + 4] * E[3] + w[I + 5] * E[6]
    t11 = w[I + 3] * E[1] + w[I + 4] * E[4] + w[I + 5] * E[7]
    t12 = w[I + 3] * E[2] + w[I + 4] * E[5] + w[I + 5] * E[8]
    t20 = w[I + 6] * E[0] + w[I + 7] * E[3] + w[I + 8] * E[6]
    t21 = w[I + 6] * E[1] + w[I + 7] * E[4] + w[I + 8] * E[7]
    t22 = w[I + 6] * E[2] + w[I + 7] * E[5] + w[I + 8] * E[8]
    i00 = E[0] * t00 + E[3] * t10 + E[6] * t20
    i01 = E[0] * t01 + E[3] * t11 + E[6] * t21
    i02 = E[0] * t02 + E[3] * t12 + E[6] * t22
    i11 = E[1] * t01 + E[4] * t11 + E[7] * t21
    i12 = E[1] * t02 + E[4] * t12 + E[7] * t22
    i22 = E[2] * t02 + E[5] * t12 + E[8] * t22
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
def rbi_to_dense_f(mf, bo, w, o):
    """w[o:o+36] = dense 6x6 of rbi(m, h, Ibar) at mf[bo+12:bo+25] (Eq. 2.63), flat form of rbi_to_dense."""
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
def dense_to_parent_add_f(w, eo, ro, ia, out, t):
    """w[out:out+36] += X^T Ia X, Ia = w[ia:ia+36] (dense symmetric, flat), X = rot(E) xlt(r) with E at
    w[eo], r at w[ro]; scratch w[t:t+63]. Same block formulas as dense_to_parent_add (Eq. 2.66); only
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
