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

from .layout import BODY_STRIDE, DOF_STRIDE, HEADER_F, HEADER_I

REVOLUTE = 0
PRISMATIC = 1
FREE = 2

JOINT_KERNEL_NAMES = {REVOLUTE: "revolute", PRISMATIC: "prismatic", FREE: "free"}


def motion_subspace(jtype: int, axis: np.ndarray) -> np.ndarray:
    """S (6 x nv, angular-first) of a kernel joint in its child frame (Table 4.1)."""
    if jtype == REVOLUTE:
        return np.concatenate([axis, np.zeros(3)])[:, None]
    if jtype == PRISMATIC:
        return np.concatenate([np.zeros(3), axis])[:, None]
    S = np.zeros((6, 6))
    S[3:, :3] = np.eye(3)  # qd[0:3] = linear velocity (child frame)
    S[:3, 3:] = np.eye(3)  # qd[3:6] = angular velocity (child frame)
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
    nb = mi[0]
    for i in range(nb):
        w[so + i], w[so + nb + i] = _sincos_reduced(q[mi[HEADER_I + 5 * i + 2]])
    for i in range(nb):
        x = q[mi[HEADER_I + 5 * i + 2]]
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


@njit(cache=True, inline="always")
def jcalc(mi, mf, i, q, w, eo, ro):
    """Joint transform composed with the tree transform: ^iX_λ(i) = X_J(q) X_T(i) (Table 4.1, §4.2).

    Revolute: X_J = rot(R(a, q)^T) (Rodrigues); prismatic: X_J = xlt(a q); free: X_J =
    rot(R(quat)^T) xlt(p). Composition rule of Table A.3: E = E_J E_T, r = r_T + E_T^T r_J.
    Body i of the packed model (mi, mf; see model.py); the result goes into w[eo:eo+9] (E, row-major)
    and w[ro:ro+3] (r). Flat offsets, not array views: numba would reference-count every view."""
    ii = HEADER_I + 5 * i
    s = 0.0
    c = 1.0
    if mi[ii + 1] == REVOLUTE:
        qi = mi[ii + 2]
        c = math.cos(q[qi])
        s = math.sin(q[qi])
    jcalc_sc(mi, mf, i, q, w, eo, ro, s, c)


@njit(cache=True, inline="always")
def jcalc_sc(mi, mf, i, q, w, eo, ro, s, c):
    """jcalc with s = sin q_i and c = cos q_i of a revolute joint given (e.g. from sincos_all)."""
    ii = HEADER_I + 5 * i
    jt = mi[ii + 1]
    qi = mi[ii + 2]
    bo = HEADER_F + BODY_STRIDE * i
    ax = HEADER_F + BODY_STRIDE * mi[0] + DOF_STRIDE * mi[ii + 3] + (3 if jt == PRISMATIC else 0)
    e0, e1, e2, e3, e4, e5, e6, e7, e8 = (mf[bo], mf[bo + 1], mf[bo + 2], mf[bo + 3], mf[bo + 4], mf[bo + 5],
                                          mf[bo + 6], mf[bo + 7], mf[bo + 8])
    t0, t1, t2 = mf[bo + 9], mf[bo + 10], mf[bo + 11]
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
    else:
        px, py, pz = q[qi], q[qi + 1], q[qi + 2]
        qx, qy, qz, qw = q[qi + 3], q[qi + 4], q[qi + 5], q[qi + 6]
        n = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
        qx /= n
        qy /= n
        qz /= n
        qw /= n
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
def S_mul(mi, mf, i, x):
    """S_i x as a 6-tuple (angular-first): joint i's motion subspace (Table 4.1) times the entries of x
    at its degrees of freedom, e.g. v_J = S qd (Eq. 3.32) or S qdd."""
    ii = HEADER_I + 5 * i
    vi = mi[ii + 3]
    do0 = HEADER_F + BODY_STRIDE * mi[0]
    j0 = j1 = j2 = j3 = j4 = j5 = 0.0
    for dof in range(vi, vi + mi[ii + 4]):
        so = do0 + DOF_STRIDE * dof
        y = x[dof]
        j0 += mf[so] * y
        j1 += mf[so + 1] * y
        j2 += mf[so + 2] * y
        j3 += mf[so + 3] * y
        j4 += mf[so + 4] * y
        j5 += mf[so + 5] * y
    return (j0, j1, j2, j3, j4, j5)
