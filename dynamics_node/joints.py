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
from numba import njit

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


@njit(cache=True, inline="always")
def jcalc(jtype, axis, q, qi, ET, rT, E, r):
    """Joint transform composed with the tree transform: ^iX_λ(i) = X_J(q) X_T(i) (Table 4.1,
    Eq. 4.x of §4.2). Writes E (flat 3x3) and r of the result.

    Revolute: X_J = rot(R(a, q)^T) (Rodrigues); prismatic: X_J = xlt(a q); free: X_J =
    rot(R(quat)^T) xlt(p). Composition rule of Table A.3: E = E_J E_T, r = r_T + E_T^T r_J.
    """
    if jtype == REVOLUTE:
        c = math.cos(q[qi])
        s = math.sin(q[qi])
        t = 1.0 - c
        x, y, z = axis[0], axis[1], axis[2]
        # E_J = R^T where R = c 1 + s a x + t a a^T
        j00 = c + t * x * x
        j01 = t * x * y + s * z
        j02 = t * x * z - s * y
        j10 = t * x * y - s * z
        j11 = c + t * y * y
        j12 = t * y * z + s * x
        j20 = t * x * z + s * y
        j21 = t * y * z - s * x
        j22 = c + t * z * z
        for b in range(3):
            E[b] = j00 * ET[b] + j01 * ET[3 + b] + j02 * ET[6 + b]
            E[3 + b] = j10 * ET[b] + j11 * ET[3 + b] + j12 * ET[6 + b]
            E[6 + b] = j20 * ET[b] + j21 * ET[3 + b] + j22 * ET[6 + b]
        r[0] = rT[0]
        r[1] = rT[1]
        r[2] = rT[2]
    elif jtype == PRISMATIC:
        d = q[qi]
        for k in range(9):
            E[k] = ET[k]
        p0, p1, p2 = axis[0] * d, axis[1] * d, axis[2] * d
        r[0] = rT[0] + ET[0] * p0 + ET[3] * p1 + ET[6] * p2
        r[1] = rT[1] + ET[1] * p0 + ET[4] * p1 + ET[7] * p2
        r[2] = rT[2] + ET[2] * p0 + ET[5] * p1 + ET[8] * p2
    else:
        px, py, pz = q[qi], q[qi + 1], q[qi + 2]
        qx, qy, qz, qw = q[qi + 3], q[qi + 4], q[qi + 5], q[qi + 6]
        n = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
        qx /= n
        qy /= n
        qz /= n
        qw /= n
        # R(quat); E_J = R^T
        r00 = 1.0 - 2.0 * (qy * qy + qz * qz)
        r01 = 2.0 * (qx * qy - qz * qw)
        r02 = 2.0 * (qx * qz + qy * qw)
        r10 = 2.0 * (qx * qy + qz * qw)
        r11 = 1.0 - 2.0 * (qx * qx + qz * qz)
        r12 = 2.0 * (qy * qz - qx * qw)
        r20 = 2.0 * (qx * qz - qy * qw)
        r21 = 2.0 * (qy * qz + qx * qw)
        r22 = 1.0 - 2.0 * (qx * qx + qy * qy)
        for b in range(3):
            E[b] = r00 * ET[b] + r10 * ET[3 + b] + r20 * ET[6 + b]
            E[3 + b] = r01 * ET[b] + r11 * ET[3 + b] + r21 * ET[6 + b]
            E[6 + b] = r02 * ET[b] + r12 * ET[3 + b] + r22 * ET[6 + b]
        r[0] = rT[0] + ET[0] * px + ET[3] * py + ET[6] * pz
        r[1] = rT[1] + ET[1] * px + ET[4] * py + ET[7] * pz
        r[2] = rT[2] + ET[2] * px + ET[5] * py + ET[8] * pz


@njit(cache=True, inline="always")
def jcalc_flat(jt, mf, ax, bo, q, qi, w, eo, ro):
    """jcalc on flat arrays: the axis at mf[ax:ax+3], X_T at mf[bo:bo+12] (E_T then r_T), result into
    w[eo:eo+9] (E) and w[ro:ro+3] (r). Same formulas as jcalc; offsets instead of array views, which
    numba would reference-count one by one (the hot paths use this form)."""
    e0, e1, e2, e3, e4, e5, e6, e7, e8 = (mf[bo], mf[bo + 1], mf[bo + 2], mf[bo + 3], mf[bo + 4], mf[bo + 5],
                                          mf[bo + 6], mf[bo + 7], mf[bo + 8])
    t0, t1, t2 = mf[bo + 9], mf[bo + 10], mf[bo + 11]
    if jt == REVOLUTE:
        c = math.cos(q[qi])
        s = math.sin(q[qi])
        t = 1.0 - c
        x, y, z = mf[ax], mf[ax + 1], mf[ax + 2]
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
