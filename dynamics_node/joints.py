"""Joint models (Featherstone Table 4.1) for the joint types a URDF can name.

Every tree joint of the model is one of three kernels; the URDF types map onto them:

=============  ==========  =====  =====  ==========================================================
URDF type      kernel      nq     nv     motion
=============  ==========  =====  =====  ==========================================================
revolute       REVOLUTE    1      1      rotation q about the unit axis a (joint frame)
continuous     REVOLUTE    1      1      the same, unbounded (one angle in q, not cos/sin)
prismatic      PRISMATIC   1      1      translation q along a
planar         3 bodies    3      3      PRISMATIC along u, PRISMATIC along w, REVOLUTE about the
                                         normal a: q = [x, y, theta] in the joint frame, where
                                         (u, w, a) is a right-handed frame built from the axis
floating       FREE        7      6      q = [x y z qx qy qz qw] position and unit quaternion of the
                                         child in the parent frame; qd = [v_lin, omega] of the child
                                         in the child frame (Table 4.1's 6-DoF joint with Example
                                         4.5's mixed variables, as Pinocchio's free flyer)
fixed          merged      0      0      the child's inertia joins the parent body (Ch. 4)
=============  ==========  =====  =====  ==========================================================

A planar joint is expanded into three single-DoF joints exactly as §6.5 expands multi-DoF joints
for the sparse factorisation (two massless intermediate bodies), so the kernels need only
single-DoF joints and the 6-DoF free joint. The motion subspace S of each degree of freedom is a
constant 6-vector in the child frame (Table 4.1: revolute [a; 0], prismatic [0; a], free: the
identity with the linear rows first in qd), hence c_J = 0 for all of them.
"""
from __future__ import annotations

import math

import numpy as np
from ._jit import njit

from .packed import body_f, dof_count, dof_f, first_dof, first_q, joint_type
from .layout import (B_ET, B_RT, D_S, H_NB, W_COS, W_SIN)
from .spatial import crm_t, st6_s

assert W_COS == W_SIN + 1  # sincos_all writes the cosines right after the sines

REVOLUTE = 0
PRISMATIC = 1
FREE = 2

JOINT_KERNEL_NAMES = {REVOLUTE: "revolute", PRISMATIC: "prismatic", FREE: "free"}
FREE_QD_LIN, FREE_QD_ANG = 0, 3  # a free joint's qd: linear velocity first, then angular (child frame)


def joint_dims(jtype):
    """(nq, nv) per joint of the packed types: the free joint has 7 position coordinates (x y z and
    a unit quaternion) and 6 velocities, the others (revolute, prismatic) one of each."""
    nq = [7 if t == FREE else 1 for t in jtype]
    nv = [6 if t == FREE else 1 for t in jtype]
    return nq, nv


def motion_subspace(jtype: int, axis: np.ndarray) -> np.ndarray:
    """S (6 x nv, angular-first) of a kernel joint in its child frame (Table 4.1)."""
    if jtype == REVOLUTE:
        return np.concatenate([axis, np.zeros(3)])[:, None]
    if jtype == PRISMATIC:
        return np.concatenate([np.zeros(3), axis])[:, None]
    S = np.zeros((6, 6))
    S[3:, FREE_QD_LIN:FREE_QD_LIN + 3] = np.eye(3)  # qd[0:3] = linear velocity (child frame)
    S[:3, FREE_QD_ANG:FREE_QD_ANG + 3] = np.eye(3)  # qd[3:6] = angular velocity (child frame)
    return S


# sin and cos of the joint angles, all at once: Cody-Waite reduction by pi/2 (pi/2 split in four so
# that x - n pi/2 is exact to the last bit) and fdlibm's minimax polynomials (__kernel_sin/cos) on
# [-pi/4, pi/4]; within 2 ulp of libm (test_core_sincos). Branch-free, so LLVM vectorises the loop.
_INVPIO2 = 6.36619772367581382433e-01
_PIO2_1, _PIO2_2 = 1.57079632673412561417e+00, 6.07710050630396597660e-11
_PIO2_3, _PIO2_3T = 2.02226624871116645580e-21, 8.47842766036889956997e-32
_S1, _S2, _S3 = -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04
_S4, _S5, _S6 = 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10
_C1, _C2, _C3 = 4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05
_C4, _C5, _C6 = -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11
_ROUND = 6755399441055744.0  # 1.5 * 2**52: (x + _ROUND) - _ROUND is x rounded to an integer


@njit(cache=True, inline="always")
def _sincos_reduced(x):
    """(sin x, cos x) by the reduction and polynomials above; for |x| < 1e5 (beyond, the callers use
    libm). Inlined only into callers compiled without fastmath (reassociation would undo the
    reduction)."""
    fn = (x * _INVPIO2 + _ROUND) - _ROUND
    r = (((x - fn * _PIO2_1) - fn * _PIO2_2) - fn * _PIO2_3) - fn * _PIO2_3T
    z = r * r
    s = r + r * z * (_S1 + z * (_S2 + z * (_S3 + z * (_S4 + z * (_S5 + z * _S6)))))
    c = 1.0 - 0.5 * z + z * z * (_C1 + z * (_C2 + z * (_C3 + z * (_C4 + z * (_C5 + z * _C6)))))
    quadrant = int(fn)  # x = quadrant pi/2 + r
    odd = (quadrant & 1) != 0
    s1 = c if odd else s
    c1 = s if odd else c
    return (-s1 if (quadrant & 2) != 0 else s1), (-c1 if ((quadrant + 1) & 2) != 0 else c1)


@njit(cache=True, fastmath=False)  # explicit: a fastmath caller's flags would undo the reduction
def sincos_all(mi, q, w, so):
    """w[so + i] = sin q and w[so + nb + i] = cos q of the first coordinate q of every body's joint
    (used for the revolute ones), in one loop that LLVM vectorises; libm beyond |q| >= 1e5."""
    nb = mi[H_NB]
    for i in range(nb):
        w[so + i], w[so + nb + i] = _sincos_reduced(q[first_q(mi, i)])
    for i in range(nb):
        x = q[first_q(mi, i)]
        if not (abs(x) < 1.0e5):
            w[so + i] = math.sin(x)
            w[so + nb + i] = math.cos(x)


@njit(cache=True, fastmath=False)
def sincos_row(w, xo, so, co, n):
    """w[so + k], w[co + k] = sin, cos of w[xo + k] for k < n: sincos_all over a row of states (the
    layout of algorithms/rnea_batch); libm beyond |x| >= 1e5. Unsigned indices: see rnea_batch._u."""
    for k in range(n):
        w[np.uint64(so + k)], w[np.uint64(co + k)] = _sincos_reduced(w[np.uint64(xo + k)])
    for k in range(n):
        x = w[np.uint64(xo + k)]
        if not (abs(x) < 1.0e5):
            w[np.uint64(so + k)] = math.sin(x)
            w[np.uint64(co + k)] = math.cos(x)


# ---------------------------------------------------------------------------------------------
# The joint models' calc (Pinocchio's jmodel.calc): what depends on the joint type, for the kernels.
# Body i of the packed model (mi, mf; layout.py); results at flat offsets of w, not array views
# (numba would reference-count every view).

DBL_MIN = 2.2250738585072014e-308  # smallest normal double: a quaternion below it has lost its digits


@njit(cache=True, inline="always")
def quat_scale(q, k):
    """The largest |component| of the quaternion q[k:k+4]: dividing by it first makes the norm
    computable for any finite magnitude (the sum of squares of 1e160 would overflow, of 1e-160
    underflow). The quaternion is unusable (zero, or subnormal) when this is below DBL_MIN."""
    return max(max(abs(q[k]), abs(q[k + 1])), max(abs(q[k + 2]), abs(q[k + 3])))


@njit(cache=True, inline="always")
def unit_quaternion(q, k):
    """q[k:k+4] = (x, y, z, w) normalised robustly: scaled by its largest component, then by its norm."""
    m = quat_scale(q, k)
    x, y, z, w = q[k] / m, q[k + 1] / m, q[k + 2] / m, q[k + 3] / m
    n = math.sqrt(x * x + y * y + z * z + w * w)  # in [1, 2]
    return x / n, y / n, z / n, w / n


@njit(cache=True, inline="always")
def jcalc(mi, mf, i, q, w, eo, ro):
    """Joint transform composed with the tree transform: ^iX_λ(i) = X_J(q) X_T(i) (Table 4.1, §4.2).

    Revolute: X_J = rot(R(a, q)^T) (Rodrigues); prismatic: X_J = xlt(a q); free: X_J =
    rot(R(quat)^T) xlt(p). Composition rule of Table A.3: E = E_J E_T, r = r_T + E_T^T r_J.
    The result goes into w[eo:eo+9] (E, row-major) and w[ro:ro+3] (r)."""
    s = 0.0
    c = 1.0
    if joint_type(mi, i) == REVOLUTE:
        qi = first_q(mi, i)
        c = math.cos(q[qi])
        s = math.sin(q[qi])
    jcalc_sc(mi, mf, i, q, w, eo, ro, s, c)


@njit(cache=True, inline="always")
def jcalc_sc(mi, mf, i, q, w, eo, ro, s, c):
    """jcalc with s = sin q_i and c = cos q_i of a revolute joint given (e.g. from sincos_all)."""
    jt = joint_type(mi, i)
    qi = first_q(mi, i)
    et = body_f(i) + B_ET
    rt = body_f(i) + B_RT
    # the axis u: S = [u; 0] (revolute) or [0; u] (prismatic)
    ax = dof_f(mi[H_NB], first_dof(mi, i)) + D_S + (3 if jt == PRISMATIC else 0)
    e0, e1, e2, e3, e4, e5, e6, e7, e8 = (mf[et], mf[et + 1], mf[et + 2], mf[et + 3], mf[et + 4], mf[et + 5],
                                          mf[et + 6], mf[et + 7], mf[et + 8])
    t0, t1, t2 = mf[rt], mf[rt + 1], mf[rt + 2]
    if jt == REVOLUTE:
        x, y, z = mf[ax], mf[ax + 1], mf[ax + 2]
        w[ro] = t0
        w[ro + 1] = t1
        w[ro + 2] = t2
        # the usual axes first: E = rz(z q) E_T, rx(x q) E_T or ry(y q) E_T (Table 2.2), a third of
        # the arithmetic of the general product below
        if x == 0.0 and y == 0.0:
            s *= z
            w[eo], w[eo + 1], w[eo + 2] = c * e0 + s * e3, c * e1 + s * e4, c * e2 + s * e5
            w[eo + 3], w[eo + 4], w[eo + 5] = c * e3 - s * e0, c * e4 - s * e1, c * e5 - s * e2
            w[eo + 6], w[eo + 7], w[eo + 8] = e6, e7, e8
            return
        if y == 0.0 and z == 0.0:
            s *= x
            w[eo], w[eo + 1], w[eo + 2] = e0, e1, e2
            w[eo + 3], w[eo + 4], w[eo + 5] = c * e3 + s * e6, c * e4 + s * e7, c * e5 + s * e8
            w[eo + 6], w[eo + 7], w[eo + 8] = c * e6 - s * e3, c * e7 - s * e4, c * e8 - s * e5
            return
        if x == 0.0 and z == 0.0:
            s *= y
            w[eo], w[eo + 1], w[eo + 2] = c * e0 - s * e6, c * e1 - s * e7, c * e2 - s * e8
            w[eo + 3], w[eo + 4], w[eo + 5] = e3, e4, e5
            w[eo + 6], w[eo + 7], w[eo + 8] = s * e0 + c * e6, s * e1 + c * e7, s * e2 + c * e8
            return
        t = 1.0 - c
        j00 = c + t * x * x
        j01 = t * x * y + s * z
        j02 = t * x * z - s * y
        j10 = t * x * y - s * z
        j11 = c + t * y * y
        j12 = t * y * z + s * x
        j20 = t * x * z + s * y
        j21 = t * y * z - s * x
        j22 = c + t * z * z
    elif jt == PRISMATIC:
        d = q[qi]
        j00, j01, j02, j10, j11, j12, j20, j21, j22 = 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0
        p0, p1, p2 = mf[ax] * d, mf[ax + 1] * d, mf[ax + 2] * d
        t0 += e0 * p0 + e3 * p1 + e6 * p2
        t1 += e1 * p0 + e4 * p1 + e7 * p2
        t2 += e2 * p0 + e5 * p1 + e8 * p2
    else:  # FREE: q = [p, quaternion (x y z w)]
        px, py, pz = q[qi], q[qi + 1], q[qi + 2]
        qx, qy, qz, qw = unit_quaternion(q, qi + 3)
        # E_J = R(quat)^T
        j00 = 1.0 - 2.0 * (qy * qy + qz * qz)
        j10 = 2.0 * (qx * qy - qz * qw)
        j20 = 2.0 * (qx * qz + qy * qw)
        j01 = 2.0 * (qx * qy + qz * qw)
        j11 = 1.0 - 2.0 * (qx * qx + qz * qz)
        j21 = 2.0 * (qy * qz - qx * qw)
        j02 = 2.0 * (qx * qz - qy * qw)
        j12 = 2.0 * (qy * qz + qx * qw)
        j22 = 1.0 - 2.0 * (qx * qx + qy * qy)
        t0 += e0 * px + e3 * py + e6 * pz
        t1 += e1 * px + e4 * py + e7 * pz
        t2 += e2 * px + e5 * py + e8 * pz
    w[eo] = j00 * e0 + j01 * e3 + j02 * e6
    w[eo + 1] = j00 * e1 + j01 * e4 + j02 * e7
    w[eo + 2] = j00 * e2 + j01 * e5 + j02 * e8
    w[eo + 3] = j10 * e0 + j11 * e3 + j12 * e6
    w[eo + 4] = j10 * e1 + j11 * e4 + j12 * e7
    w[eo + 5] = j10 * e2 + j11 * e5 + j12 * e8
    w[eo + 6] = j20 * e0 + j21 * e3 + j22 * e6
    w[eo + 7] = j20 * e1 + j21 * e4 + j22 * e7
    w[eo + 8] = j20 * e2 + j21 * e5 + j22 * e8
    w[ro] = t0
    w[ro + 1] = t1
    w[ro + 2] = t2


@njit(cache=True, inline="always")
def jcalc_lanes(mi, mf, i, w, E, R, Q, SIN, COS, L):
    """jcalc_sc of a revolute or prismatic body for L states side by side (algorithms/rnea_batch):
    the states' q at w[Q + k], sin, cos at w[SIN + k], w[COS + k]; E's entry j at w[E + j L + k], r's at
    w[R + j L + k]. One loop over the states per case, which LLVM vectorises."""
    jt = joint_type(mi, i)
    et = body_f(i) + B_ET
    rt = body_f(i) + B_RT
    e0, e1, e2, e3, e4, e5, e6, e7, e8 = (mf[et], mf[et + 1], mf[et + 2], mf[et + 3], mf[et + 4], mf[et + 5],
                                          mf[et + 6], mf[et + 7], mf[et + 8])
    t0, t1, t2 = mf[rt], mf[rt + 1], mf[rt + 2]
    ax = dof_f(mi[H_NB], first_dof(mi, i)) + D_S + (3 if jt == PRISMATIC else 0)
    x, y, z = mf[ax], mf[ax + 1], mf[ax + 2]
    if jt == PRISMATIC:  # E = E_T, r = r_T + E_T^T u q
        for k in range(L):
            d = w[_u(Q + k)]
            st6_s(w, E + k, L, (e0, e1, e2, e3, e4, e5))
            w[_u(E + 6 * L + k)], w[_u(E + 7 * L + k)], w[_u(E + 8 * L + k)] = e6, e7, e8
            p0, p1, p2 = x * d, y * d, z * d
            w[_u(R + k)] = t0 + e0 * p0 + e3 * p1 + e6 * p2
            w[_u(R + L + k)] = t1 + e1 * p0 + e4 * p1 + e7 * p2
            w[_u(R + 2 * L + k)] = t2 + e2 * p0 + e5 * p1 + e8 * p2
        return
    if x == 0.0 and y == 0.0:  # E = rz(z q) E_T (Table 2.2)
        for k in range(L):
            s = w[_u(SIN + k)] * z
            c = w[_u(COS + k)]
            st6_s(w, E + k, L, (c * e0 + s * e3, c * e1 + s * e4, c * e2 + s * e5,
                                c * e3 - s * e0, c * e4 - s * e1, c * e5 - s * e2))
            w[_u(E + 6 * L + k)], w[_u(E + 7 * L + k)], w[_u(E + 8 * L + k)] = e6, e7, e8
            w[_u(R + k)], w[_u(R + L + k)], w[_u(R + 2 * L + k)] = t0, t1, t2
    elif y == 0.0 and z == 0.0:  # rx
        for k in range(L):
            s = w[_u(SIN + k)] * x
            c = w[_u(COS + k)]
            st6_s(w, E + k, L, (e0, e1, e2, c * e3 + s * e6, c * e4 + s * e7, c * e5 + s * e8))
            w[_u(E + 6 * L + k)] = c * e6 - s * e3
            w[_u(E + 7 * L + k)] = c * e7 - s * e4
            w[_u(E + 8 * L + k)] = c * e8 - s * e5
            w[_u(R + k)], w[_u(R + L + k)], w[_u(R + 2 * L + k)] = t0, t1, t2
    elif x == 0.0 and z == 0.0:  # ry
        for k in range(L):
            s = w[_u(SIN + k)] * y
            c = w[_u(COS + k)]
            st6_s(w, E + k, L, (c * e0 - s * e6, c * e1 - s * e7, c * e2 - s * e8, e3, e4, e5))
            w[_u(E + 6 * L + k)] = s * e0 + c * e6
            w[_u(E + 7 * L + k)] = s * e1 + c * e7
            w[_u(E + 8 * L + k)] = s * e2 + c * e8
            w[_u(R + k)], w[_u(R + L + k)], w[_u(R + 2 * L + k)] = t0, t1, t2
    else:
        for k in range(L):  # any axis: E_J = R(u, q)^T (Rodrigues), E = E_J E_T
            s = w[_u(SIN + k)]
            c = w[_u(COS + k)]
            t = 1.0 - c
            j00, j01, j02 = c + t * x * x, t * x * y + s * z, t * x * z - s * y
            j10, j11, j12 = t * x * y - s * z, c + t * y * y, t * y * z + s * x
            j20, j21, j22 = t * x * z + s * y, t * y * z - s * x, c + t * z * z
            st6_s(w, E + k, L, (j00 * e0 + j01 * e3 + j02 * e6, j00 * e1 + j01 * e4 + j02 * e7,
                                j00 * e2 + j01 * e5 + j02 * e8, j10 * e0 + j11 * e3 + j12 * e6,
                                j10 * e1 + j11 * e4 + j12 * e7, j10 * e2 + j11 * e5 + j12 * e8))
            w[_u(E + 6 * L + k)] = j20 * e0 + j21 * e3 + j22 * e6
            w[_u(E + 7 * L + k)] = j20 * e1 + j21 * e4 + j22 * e7
            w[_u(E + 8 * L + k)] = j20 * e2 + j21 * e5 + j22 * e8
            w[_u(R + k)], w[_u(R + L + k)], w[_u(R + 2 * L + k)] = t0, t1, t2


@njit(cache=True, inline="always")
def _u(i):
    """An index as unsigned: numba then drops its negative-index wrap-around, a select on every access that
    keeps LLVM from seeing consecutive addresses (and from vectorising). The kernels' one copy (rnea_batch,
    mimic)."""
    return np.uint64(i)


@njit(cache=True, inline="always")
def S_mul(mi, mf, i, x):
    """S_i x as a 6-tuple (angular-first): joint i's motion subspace (Table 4.1) times the entries of x
    at its degrees of freedom, e.g. v_J = S qd (Eq. 3.32) or S qdd."""
    vi = first_dof(mi, i)
    nb = mi[H_NB]
    j0 = j1 = j2 = j3 = j4 = j5 = 0.0
    for dof in range(vi, vi + dof_count(mi, i)):
        so = dof_f(nb, dof) + D_S
        y = x[dof]
        j0 += mf[so] * y
        j1 += mf[so + 1] * y
        j2 += mf[so + 2] * y
        j3 += mf[so + 3] * y
        j4 += mf[so + 4] * y
        j5 += mf[so + 5] * y
    return (j0, j1, j2, j3, j4, j5)


@njit(cache=True, inline="always")
def joint_velocity(mi, mf, i, xv, qd):
    """(v_i, c_i) of body i given xv = ^iX_λ(i) v_λ(i): v_i = xv + S_i qd_i (Eq. 5.14) and the
    velocity-product c_i = v_i x S_i qd_i (Eq. 7.35; c_J = 0, S constant for every joint kernel)."""
    vJ = S_mul(mi, mf, i, qd)
    v = (xv[0] + vJ[0], xv[1] + vJ[1], xv[2] + vJ[2], xv[3] + vJ[3], xv[4] + vJ[4], xv[5] + vJ[5])
    return v, crm_t(v, vJ)


@njit(cache=True, inline="always")
def joint_motion(mi, mf, i, jt, xv, xa, qd, qdd):
    """(v_i, a_i) of body i given xv = X_i v_λ(i) and xa = X_i a_λ(i) (Eqs. 5.14-5.15, c_J = 0):
    v_i = xv + S_i qd_i ;  a_i = xa + S_i qdd_i + v_i x S_i qd_i.

    A revolute joint has S = [u; 0], a prismatic one S = [0; u] (Table 4.1): v_J = u qd sits in one
    half, and v_i x v_J = qd (omega_i x u; v_i,O x u) or qd (0; omega_i x u) (Eq. 2.31), half the
    arithmetic of the general product, which the free joint takes. jt: the joint's type (J_TYPE of body i).

    No loop here (the free joint reads its six rates directly instead of S_mul's loop over S): numba
    inlines this function with its array arguments as new references, and its reference-count pruning
    cannot remove their incref/decref pairs across a branch that holds a loop; those were 6 calls per
    body in rnea_kernel (with every live float spilled around them), +7% on Talos inverse dynamics."""
    if jt == REVOLUTE or jt == PRISMATIC:
        dof = first_dof(mi, i)
        so = dof_f(mi[H_NB], dof) + D_S + (0 if jt == REVOLUTE else 3)
        x, y, z = mf[so], mf[so + 1], mf[so + 2]
        qdi = qd[dof]
        qddi = qdd[dof]
        if jt == REVOLUTE:
            v = (xv[0] + x * qdi, xv[1] + y * qdi, xv[2] + z * qdi, xv[3], xv[4], xv[5])
            a = (xa[0] + x * qddi + qdi * (v[1] * z - v[2] * y),
                 xa[1] + y * qddi + qdi * (v[2] * x - v[0] * z),
                 xa[2] + z * qddi + qdi * (v[0] * y - v[1] * x),
                 xa[3] + qdi * (v[4] * z - v[5] * y),
                 xa[4] + qdi * (v[5] * x - v[3] * z),
                 xa[5] + qdi * (v[3] * y - v[4] * x))
        else:
            v = (xv[0], xv[1], xv[2], xv[3] + x * qdi, xv[4] + y * qdi, xv[5] + z * qdi)
            a = (xa[0], xa[1], xa[2],
                 xa[3] + x * qddi + qdi * (v[1] * z - v[2] * y),
                 xa[4] + y * qddi + qdi * (v[2] * x - v[0] * z),
                 xa[5] + z * qddi + qdi * (v[0] * y - v[1] * x))
    else:  # FREE: S = [0 1; 1 0] (motion_subspace), so S x = (x_omega; x_lin) straight from qd, qdd
        lin = first_dof(mi, i) + FREE_QD_LIN
        ang = first_dof(mi, i) + FREE_QD_ANG
        vJ = (qd[ang], qd[ang + 1], qd[ang + 2], qd[lin], qd[lin + 1], qd[lin + 2])
        v = (xv[0] + vJ[0], xv[1] + vJ[1], xv[2] + vJ[2], xv[3] + vJ[3], xv[4] + vJ[4], xv[5] + vJ[5])
        c = crm_t(v, vJ)  # the general product v_i x v_J
        a = (xa[0] + qdd[ang] + c[0], xa[1] + qdd[ang + 1] + c[1], xa[2] + qdd[ang + 2] + c[2],
             xa[3] + qdd[lin] + c[3], xa[4] + qdd[lin + 1] + c[4], xa[5] + qdd[lin + 2] + c[5])
    return v, a
