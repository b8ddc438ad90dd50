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
    return xm_s(w, eo, ro, m, 1)


@njit(cache=True, inline="always")
def xm_s(w, eo, ro, m, s):
    """xm_t with E's entries s apart in w (E_jk at w[eo + (3j+k)s]) and r's too (r_j at w[ro + js]):
    the layout of algorithms/rnea_batch, where s states sit side by side."""
    rx, ry, rz = w[ro], w[ro + s], w[ro + 2 * s]
    l0 = m[3] - (ry * m[2] - rz * m[1])
    l1 = m[4] - (rz * m[0] - rx * m[2])
    l2 = m[5] - (rx * m[1] - ry * m[0])
    e0, e1, e2, e3, e4, e5, e6, e7, e8 = (w[eo], w[eo + s], w[eo + 2 * s], w[eo + 3 * s], w[eo + 4 * s],
                                          w[eo + 5 * s], w[eo + 6 * s], w[eo + 7 * s], w[eo + 8 * s])
    return (e0 * m[0] + e1 * m[1] + e2 * m[2],
            e3 * m[0] + e4 * m[1] + e5 * m[2],
            e6 * m[0] + e7 * m[1] + e8 * m[2],
            e0 * l0 + e1 * l1 + e2 * l2,
            e3 * l0 + e4 * l1 + e5 * l2,
            e6 * l0 + e7 * l1 + e8 * l2)


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
def rbi_mul_t(a, o, v):
    """rbi(m, h, Ibar) v (Eq. 2.63) with the 13 numbers m, h (3), Ibar (9, row-major) at a[o:o+13]."""
    return rbi_mul_c((a[o], a[o + 1], a[o + 2], a[o + 3], a[o + 4], a[o + 5], a[o + 6], a[o + 7], a[o + 8],
                      a[o + 9], a[o + 10], a[o + 11], a[o + 12]), v)


@njit(cache=True, inline="always")
def rbi_mul_c(c, v):
    """rbi(m, h, Ibar) v (Eq. 2.63) with c = (m, h0, h1, h2, Ibar row-major) a 13-tuple."""
    m, h0, h1, h2 = c[0], c[1], c[2], c[3]
    return (c[4] * v[0] + c[5] * v[1] + c[6] * v[2] + h1 * v[5] - h2 * v[4],
            c[7] * v[0] + c[8] * v[1] + c[9] * v[2] + h2 * v[3] - h0 * v[5],
            c[10] * v[0] + c[11] * v[1] + c[12] * v[2] + h0 * v[4] - h1 * v[3],
            m * v[3] - (h1 * v[2] - h2 * v[1]),
            m * v[4] - (h2 * v[0] - h0 * v[2]),
            m * v[5] - (h0 * v[1] - h1 * v[0]))


@njit(cache=True, inline="always")
def xtf_t(w, eo, ro, f):
    """X^T f as a tuple (child force to parent, Table A.3)."""
    return xtf_s(w, eo, ro, f, 1)


@njit(cache=True, inline="always")
def xtf_s(w, eo, ro, f, s):
    """xtf_t with E's and r's entries s apart in w (see xm_s)."""
    e0, e1, e2, e3, e4, e5, e6, e7, e8 = (w[eo], w[eo + s], w[eo + 2 * s], w[eo + 3 * s], w[eo + 4 * s],
                                          w[eo + 5 * s], w[eo + 6 * s], w[eo + 7 * s], w[eo + 8 * s])
    F0 = e0 * f[3] + e3 * f[4] + e6 * f[5]
    F1 = e1 * f[3] + e4 * f[4] + e7 * f[5]
    F2 = e2 * f[3] + e5 * f[4] + e8 * f[5]
    rx, ry, rz = w[ro], w[ro + s], w[ro + 2 * s]
    return (e0 * f[0] + e3 * f[1] + e6 * f[2] + ry * F2 - rz * F1,
            e1 * f[0] + e4 * f[1] + e7 * f[2] + rz * F0 - rx * F2,
            e2 * f[0] + e5 * f[1] + e8 * f[2] + rx * F1 - ry * F0,
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
def rbi_to_dense(a, o, w, out):
    """w[out:out+36] = dense 6x6 of rbi(m, h, Ibar) at a[o:o+13] (Eq. 2.63): [[Ibar, h x], [(h x)^T, m 1]]."""
    for k in range(36):
        w[out + k] = 0.0
    m, h0, h1, h2 = a[o], a[o + 1], a[o + 2], a[o + 3]
    for r in range(3):
        for c in range(3):
            w[out + 6 * r + c] = a[o + 4 + 3 * r + c]
    w[out + 4] = -h2
    w[out + 5] = h1
    w[out + 9] = h2
    w[out + 11] = -h0
    w[out + 15] = -h1
    w[out + 16] = h0
    w[out + 19] = h2
    w[out + 20] = -h1
    w[out + 24] = -h2
    w[out + 26] = h0
    w[out + 30] = h1
    w[out + 31] = -h0
    w[out + 21] = m
    w[out + 28] = m
    w[out + 35] = m


@njit(cache=True, inline="always")
def dense_to_parent_add(w, eo, ro, ia, out):
    """w[out:out+36] += X^T Ia X, Ia = w[ia:ia+36] (dense symmetric, flat), X = rot(E) xlt(r) with E at
    w[eo], r at w[ro]: Featherstone Eq. 2.66 by 3x3 blocks, Ia = [[A, B], [B^T, C]]. Rotated first,
    A1 = E^T A E, B1 = E^T B E, C1 = E^T C E; then with R = r x (and Q = B1 R):
    A' = A1 - Q - Q^T - R C1 R, B' = B1 + R C1, C' = C1. In scalars (registers, no scratch), and
    only the 6 distinct entries of the symmetric A', C' computed."""
    E00, E01, E02, E10, E11, E12, E20, E21, E22 = (w[eo], w[eo + 1], w[eo + 2], w[eo + 3], w[eo + 4], w[eo + 5],
                                                  w[eo + 6], w[eo + 7], w[eo + 8])
    r0, r1, r2 = w[ro], w[ro + 1], w[ro + 2]
    # the blocks of I^a = [[A, B], [B^T, C]] (A, C symmetric)
    A00, A01, A02, A11, A12, A22 = w[ia], w[ia + 1], w[ia + 2], w[ia + 7], w[ia + 8], w[ia + 14]
    B00, B01, B02 = w[ia + 3], w[ia + 4], w[ia + 5]
    B10, B11, B12 = w[ia + 9], w[ia + 10], w[ia + 11]
    B20, B21, B22 = w[ia + 15], w[ia + 16], w[ia + 17]
    C00, C01, C02, C11, C12, C22 = w[ia + 21], w[ia + 22], w[ia + 23], w[ia + 28], w[ia + 29], w[ia + 35]
    # rotated: A1 = E^T A E, B1 = E^T B E, C1 = E^T C E (via T = A E etc.)
    tA00 = A00 * E00 + A01 * E10 + A02 * E20
    tA01 = A00 * E01 + A01 * E11 + A02 * E21
    tA02 = A00 * E02 + A01 * E12 + A02 * E22
    tA10 = A01 * E00 + A11 * E10 + A12 * E20
    tA11 = A01 * E01 + A11 * E11 + A12 * E21
    tA12 = A01 * E02 + A11 * E12 + A12 * E22
    tA20 = A02 * E00 + A12 * E10 + A22 * E20
    tA21 = A02 * E01 + A12 * E11 + A22 * E21
    tA22 = A02 * E02 + A12 * E12 + A22 * E22
    A1_00 = E00 * tA00 + E10 * tA10 + E20 * tA20
    A1_01 = E00 * tA01 + E10 * tA11 + E20 * tA21
    A1_02 = E00 * tA02 + E10 * tA12 + E20 * tA22
    A1_11 = E01 * tA01 + E11 * tA11 + E21 * tA21
    A1_12 = E01 * tA02 + E11 * tA12 + E21 * tA22
    A1_22 = E02 * tA02 + E12 * tA12 + E22 * tA22
    tC00 = C00 * E00 + C01 * E10 + C02 * E20
    tC01 = C00 * E01 + C01 * E11 + C02 * E21
    tC02 = C00 * E02 + C01 * E12 + C02 * E22
    tC10 = C01 * E00 + C11 * E10 + C12 * E20
    tC11 = C01 * E01 + C11 * E11 + C12 * E21
    tC12 = C01 * E02 + C11 * E12 + C12 * E22
    tC20 = C02 * E00 + C12 * E10 + C22 * E20
    tC21 = C02 * E01 + C12 * E11 + C22 * E21
    tC22 = C02 * E02 + C12 * E12 + C22 * E22
    C1_00 = E00 * tC00 + E10 * tC10 + E20 * tC20
    C1_01 = E00 * tC01 + E10 * tC11 + E20 * tC21
    C1_02 = E00 * tC02 + E10 * tC12 + E20 * tC22
    C1_11 = E01 * tC01 + E11 * tC11 + E21 * tC21
    C1_12 = E01 * tC02 + E11 * tC12 + E21 * tC22
    C1_22 = E02 * tC02 + E12 * tC12 + E22 * tC22
    tB00 = B00 * E00 + B01 * E10 + B02 * E20
    tB01 = B00 * E01 + B01 * E11 + B02 * E21
    tB02 = B00 * E02 + B01 * E12 + B02 * E22
    tB10 = B10 * E00 + B11 * E10 + B12 * E20
    tB11 = B10 * E01 + B11 * E11 + B12 * E21
    tB12 = B10 * E02 + B11 * E12 + B12 * E22
    tB20 = B20 * E00 + B21 * E10 + B22 * E20
    tB21 = B20 * E01 + B21 * E11 + B22 * E21
    tB22 = B20 * E02 + B21 * E12 + B22 * E22
    B1_00 = E00 * tB00 + E10 * tB10 + E20 * tB20
    B1_01 = E00 * tB01 + E10 * tB11 + E20 * tB21
    B1_02 = E00 * tB02 + E10 * tB12 + E20 * tB22
    B1_10 = E01 * tB00 + E11 * tB10 + E21 * tB20
    B1_11 = E01 * tB01 + E11 * tB11 + E21 * tB21
    B1_12 = E01 * tB02 + E11 * tB12 + E21 * tB22
    B1_20 = E02 * tB00 + E12 * tB10 + E22 * tB20
    B1_21 = E02 * tB01 + E12 * tB11 + E22 * tB21
    B1_22 = E02 * tB02 + E12 * tB12 + E22 * tB22
    # R = r x: B' = B1 + R C1 ; A' = A1 - Q - Q^T - (R C1) R with Q = B1 R (Featherstone Eq. 2.66)
    RC_00 = r1 * C1_02 - r2 * C1_01
    RC_10 = r2 * C1_00 - r0 * C1_02
    RC_20 = r0 * C1_01 - r1 * C1_00
    RC_01 = r1 * C1_12 - r2 * C1_11
    RC_11 = r2 * C1_01 - r0 * C1_12
    RC_21 = r0 * C1_11 - r1 * C1_01
    RC_02 = r1 * C1_22 - r2 * C1_12
    RC_12 = r2 * C1_02 - r0 * C1_22
    RC_22 = r0 * C1_12 - r1 * C1_02
    Q00 = (B1_01 * r2 - B1_02 * r1)
    Q01 = (B1_02 * r0 - B1_00 * r2)
    Q02 = (B1_00 * r1 - B1_01 * r0)
    Q10 = (B1_11 * r2 - B1_12 * r1)
    Q11 = (B1_12 * r0 - B1_10 * r2)
    Q12 = (B1_10 * r1 - B1_11 * r0)
    Q20 = (B1_21 * r2 - B1_22 * r1)
    Q21 = (B1_22 * r0 - B1_20 * r2)
    Q22 = (B1_20 * r1 - B1_21 * r0)
    S00 = (RC_01 * r2 - RC_02 * r1)
    S01 = (RC_02 * r0 - RC_00 * r2)
    S02 = (RC_00 * r1 - RC_01 * r0)
    S11 = (RC_12 * r0 - RC_10 * r2)
    S12 = (RC_10 * r1 - RC_11 * r0)
    S22 = (RC_20 * r1 - RC_21 * r0)
    a00 = A1_00 - Q00 - Q00 - S00
    a01 = A1_01 - Q01 - Q10 - S01
    a02 = A1_02 - Q02 - Q20 - S02
    a11 = A1_11 - Q11 - Q11 - S11
    a12 = A1_12 - Q12 - Q21 - S12
    a22 = A1_22 - Q22 - Q22 - S22
    # accumulate into the parent, both triangles
    w[out + 0] += a00
    w[out + 1] += a01
    w[out + 2] += a02
    w[out + 6] += a01
    w[out + 7] += a11
    w[out + 8] += a12
    w[out + 12] += a02
    w[out + 13] += a12
    w[out + 14] += a22
    b00 = B1_00 + RC_00
    w[out + 3] += b00
    w[out + 18] += b00
    b01 = B1_01 + RC_01
    w[out + 4] += b01
    w[out + 24] += b01
    b02 = B1_02 + RC_02
    w[out + 5] += b02
    w[out + 30] += b02
    b10 = B1_10 + RC_10
    w[out + 9] += b10
    w[out + 19] += b10
    b11 = B1_11 + RC_11
    w[out + 10] += b11
    w[out + 25] += b11
    b12 = B1_12 + RC_12
    w[out + 11] += b12
    w[out + 31] += b12
    b20 = B1_20 + RC_20
    w[out + 15] += b20
    w[out + 20] += b20
    b21 = B1_21 + RC_21
    w[out + 16] += b21
    w[out + 26] += b21
    b22 = B1_22 + RC_22
    w[out + 17] += b22
    w[out + 32] += b22
    w[out + 21] += C1_00
    w[out + 22] += C1_01
    w[out + 23] += C1_02
    w[out + 27] += C1_01
    w[out + 28] += C1_11
    w[out + 29] += C1_12
    w[out + 33] += C1_02
    w[out + 34] += C1_12
    w[out + 35] += C1_22


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


@njit(cache=True, inline="always")
def ld6_s(w, o, s):
    """w[o], w[o + s], ..., w[o + 5 s] as a 6-tuple (one state's 6-vector in algorithms/rnea_batch's
    layout); unsigned indices (see rnea_batch)."""
    return (w[np.uint64(o)], w[np.uint64(o + s)], w[np.uint64(o + 2 * s)], w[np.uint64(o + 3 * s)],
            w[np.uint64(o + 4 * s)], w[np.uint64(o + 5 * s)])


@njit(cache=True, inline="always")
def st6_s(w, o, s, t):
    """w[o + j s] = t[j] for j < 6 (the store of ld6_s)."""
    w[np.uint64(o)] = t[0]
    w[np.uint64(o + s)] = t[1]
    w[np.uint64(o + 2 * s)] = t[2]
    w[np.uint64(o + 3 * s)] = t[3]
    w[np.uint64(o + 4 * s)] = t[4]
    w[np.uint64(o + 5 * s)] = t[5]
