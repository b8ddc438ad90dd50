"""Loop constraints of a closed-loop system (Featherstone, *Rigid Body Dynamics Algorithms*, Ch. 8):
Table 8.1's position error delta, Table 8.4's K and k (Eqs. 8.17-8.22, 8.47) with Baumgarte's
k_stab, G and g of §8.8, and the mobility of §8.10.

Inside, the book's convention: angular-first spatial vectors, transforms as plx(E, r) (Table A.3).
Every loop's terms are computed in the coordinates of its *successor joint frame* (origin o, the
local-z axes of Table 4.1), the remedy of §8.7 "The Rounding-Error Problem": there T_k is a
selection of unit vectors (see loop_data.py), so T_k^T m is m[dir] (t_dot: the helical joint's screw row
is (m[5] - h m[2]) / sqrt(1 + h^2)) and

    K_l = T_k^T ( ^J X_s J_s - ^J X_p J_p )                 (Eqs. 8.18-8.20, Table 8.4's while loop)
    k_l = -T_k^T ( a_s^vp - a_p^vp + v_s x v_p )            (Eq. 8.47)
    k_stab = -2 alpha T_k^T (v_s - v_p) - alpha^2 delta      (Eq. 8.22, alpha = beta = 1/T_stab)

with v_i and a_i^vp - a_g the body velocities and velocity-product accelerations the RNEA leaves in
its work array (Table 8.2; -a_g cancels in a_s - a_p).  delta = Table 8.1 applied to
^sX_p = ^sX_0 (^pX_0)^-1 (Eq. 8.24), so d(delta)/dt = K qd to first order (checked by the tests).

At the API the rows of K, k and delta are grouped per loop joint (model.loops order), within a loop
in the order of the parser's LoopJoint.T columns.
"""
from __future__ import annotations

import math

import numpy as np

from ..._jit import njit
from ...errors import InputError, clip_names
from ...packed import dof_count, dof_f, first_dof, parent
from ...layout import (H_NB, H_NVT, HF_GRAVITY, W_A, W_A_N, W_E, W_E_N, W_R, W_R_N, W_V, W_V_N)
from ...spatial import crm_t, load6, xm_t
from ..._kernel_io import (A_Q, ARG_NAMES, FASTMATH, as_vec, coordinate_owner, new_work, raise_status, to_tree_q,
                           to_tree_v)
from ..tree.rnea import rnea_kernel
from ...loop_data import (SB_E0, SB_E0_N, SB_P0, SB_P0_N, SCRATCH_BODY, TS_D, t_dot, TS_EJ, TS_EP, TS_ES, TS_M, TS_OP,
                          TS_OS, TS_RJ, TS_XB, TS_XE, scratch_size, LF_EP, LF_ES, LF_HEADER, LF_PITCH, LF_RP, LF_RS,
                          LF_STRIDE, LI_HEADER, LI_NC, LI_NL, LJ_DIR, LJ_NC, LJ_PRED, LJ_ROW, LJ_STRIDE, LJ_SUCC,
                          LJ_TYPE)

# the packed model and what the RNEA leaves in the work array (X_i as W_E, W_R; v_i, a_i as W_V,
# W_A; field X of body i at W_X nb + W_X_N i) are read by the names of dynamics_node/layout.py
@njit(cache=True, inline="always")
def _joint_world(lf, eo, ro, b, s, p0, to_e, to_o):
    """^JX_0 of a joint frame on body b: E = E_J E0_b, o = p_b + E0_b^T r_J (Table A.3, X1 X2)."""
    if b < 0:
        for k in range(9):
            s[to_e + k] = lf[eo + k]
        for k in range(3):
            s[to_o + k] = lf[ro + k]
        return
    e0 = SB_E0_N * b  # the first block (SB_E0 = 0)
    for x in range(3):
        for y in range(3):
            s[to_e + 3 * x + y] = (lf[eo + 3 * x] * s[e0 + y] + lf[eo + 3 * x + 1] * s[e0 + 3 + y]
                                   + lf[eo + 3 * x + 2] * s[e0 + 6 + y])
        s[to_o + x] = (s[p0 + SB_P0_N * b + x] + s[e0 + x] * lf[ro] + s[e0 + 3 + x] * lf[ro + 1]
                       + s[e0 + 6 + x] * lf[ro + 2])


@njit(cache=True, inline="always")
def _joint_from_body(s, g, b, p0):
    """^JX_b = ^JX_0 (^bX_0)^-1 at s[g + TS_EJ], s[g + TS_RJ]: E = E_J0 E0_b^T, r = E0_b (o - p_b)."""
    ej = g + TS_EJ
    rj = g + TS_RJ
    es = g + TS_ES
    os_ = g + TS_OS
    if b < 0:
        for k in range(9):
            s[ej + k] = s[es + k]
        for k in range(3):
            s[rj + k] = s[os_ + k]
        return
    e0 = SB_E0_N * b  # the first block (SB_E0 = 0)
    d0 = s[os_] - s[p0 + SB_P0_N * b]
    d1 = s[os_ + 1] - s[p0 + SB_P0_N * b + 1]
    d2 = s[os_ + 2] - s[p0 + SB_P0_N * b + 2]
    for x in range(3):
        for y in range(3):
            s[ej + 3 * x + y] = (s[es + 3 * x] * s[e0 + 3 * y] + s[es + 3 * x + 1] * s[e0 + 3 * y + 1]
                                 + s[es + 3 * x + 2] * s[e0 + 3 * y + 2])
        s[rj + x] = s[e0 + 3 * x] * d0 + s[e0 + 3 * x + 1] * d1 + s[e0 + 3 * x + 2] * d2


@njit(cache=True, inline="always")
def _position_error(code, s, g, h):
    """Table 8.1: delta of ^sX_p = rot(E) xlt(r) (Eq. 8.24) into s[g + TS_D:+6], Featherstone's
    order (rotation x y z, translation x y z, successor axes).  x_ij (1-based) of X = [[E, 0], [B, E]].
    Helical (pitch h, not in Table 8.1): the revolute's four entries and, in the screw row's slot 5,
    (r_z - h theta) / sqrt(1 + h^2), theta = atan2(x_12, x_11) taken on the turn that r_z / h says."""
    xe = g + TS_XE
    xb = g + TS_XB
    ep = g + TS_EP
    es = g + TS_ES
    d = g + TS_D
    # E = E_s0 E_p0^T, r = E_p0 (o_s - o_p): the successor origin in predecessor coordinates
    for x in range(3):
        for y in range(3):
            s[xe + 3 * x + y] = (s[es + 3 * x] * s[ep + 3 * y] + s[es + 3 * x + 1] * s[ep + 3 * y + 1]
                                 + s[es + 3 * x + 2] * s[ep + 3 * y + 2])
    u0 = s[g + TS_OS] - s[g + TS_OP]
    u1 = s[g + TS_OS + 1] - s[g + TS_OP + 1]
    u2 = s[g + TS_OS + 2] - s[g + TS_OP + 2]
    r0 = s[ep] * u0 + s[ep + 1] * u1 + s[ep + 2] * u2
    r1 = s[ep + 3] * u0 + s[ep + 4] * u1 + s[ep + 5] * u2
    r2 = s[ep + 6] * u0 + s[ep + 7] * u1 + s[ep + 8] * u2
    for x in range(3):  # B = -E r x
        e0, e1, e2 = s[xe + 3 * x], s[xe + 3 * x + 1], s[xe + 3 * x + 2]
        s[xb + 3 * x] = -(e1 * r2 - e2 * r1)
        s[xb + 3 * x + 1] = -(e2 * r0 - e0 * r2)
        s[xb + 3 * x + 2] = -(e0 * r1 - e1 * r0)
    E = s[xe:xe + 9]
    B = s[xb:xb + 9]
    for k in range(6):
        s[d + k] = 0.0
    if code == 0:  # fixed: zero-DoF column
        s[d] = 0.5 * (E[5] - E[7])
        s[d + 1] = 0.5 * (E[6] - E[2])
        s[d + 2] = 0.5 * (E[1] - E[3])
        s[d + 3] = 0.5 * (B[5] - B[7])
        s[d + 4] = 0.5 * (B[6] - B[2])
        s[d + 5] = 0.5 * (B[1] - B[3])
    elif code == 1 or code == 3 or code == 6:  # revolute; cylindrical (no d6); helical (its screw row)
        s[d] = E[5]
        s[d + 1] = -E[2]
        s[d + 3] = B[5]
        s[d + 4] = -B[2]
        if code == 1:
            s[d + 5] = B[0] * E[3] + B[1] * E[4]
        elif code == 6:  # closed: rot(rz(theta)) xlt(0, 0, h theta) (Table 4.1)
            th = math.atan2(E[1], E[0])
            if h != 0.0:
                th += 2.0 * math.pi * math.floor((r2 / h - th) / (2.0 * math.pi) + 0.5)
            s[d + 5] = (r2 - h * th) / math.sqrt(1.0 + h * h)
    elif code == 2:  # prismatic
        s[d] = 0.5 * (E[5] - E[7])
        s[d + 1] = 0.5 * (E[6] - E[2])
        s[d + 2] = 0.5 * (E[1] - E[3])
        s[d + 3] = B[5]
        s[d + 4] = -B[2]
    elif code == 4:  # spherical
        s[d + 3] = B[3] * E[6] + B[4] * E[7] + B[5] * E[8]
        s[d + 4] = B[6] * E[0] + B[7] * E[1] + B[8] * E[2]
        s[d + 5] = B[0] * E[3] + B[1] * E[4] + B[2] * E[5]
    else:  # planar (not in Table 8.1; by Eqs. 8.25-8.27): the tilt of z, the offset along z
        s[d] = E[5]
        s[d + 1] = -E[2]
        s[d + 5] = r2


@njit(cache=True, inline="always")
def world_poses(mi, w, s):
    """^iX_0 = ^iX_λ(i) ^λ(i)X_0 of every body into the scratch s (E0_i, p_i, see loop_data.py) from the
    ^iX_λ(i) the RNEA left in w: E0_i = E_i E0_λ, p_i = p_λ + E0_λ^T r_i."""
    nb = mi[H_NB]
    e0w = W_E * nb
    r0w = W_R * nb
    p0 = SB_P0 * nb
    for i in range(nb):
        p = parent(mi, i)
        ei = e0w + W_E_N * i
        ri = r0w + W_R_N * i
        si = SB_E0 * nb + SB_E0_N * i
        pi = p0 + SB_P0_N * i
        if p < 0:
            for k in range(9):
                s[si + k] = w[ei + k]
            for k in range(3):
                s[pi + k] = w[ri + k]
            continue
        sp = SB_E0 * nb + SB_E0_N * p
        pp = p0 + SB_P0_N * p
        for x in range(3):
            e0, e1, e2 = w[ei + 3 * x], w[ei + 3 * x + 1], w[ei + 3 * x + 2]
            for y in range(3):
                s[si + 3 * x + y] = e0 * s[sp + y] + e1 * s[sp + 3 + y] + e2 * s[sp + 6 + y]
            s[pi + x] = s[pp + x] + s[sp + x] * w[ri] + s[sp + 3 + x] * w[ri + 1] + s[sp + 6 + x] * w[ri + 2]


@njit(cache=True, inline="always")
def loop_rows(mf, li, lf, w, s, nb, l, alpha, kk, dl, vj):
    """Loop l's rows of k (+ k_stab), delta and K qd (Eqs. 8.47, 8.22, Table 8.1), after world_poses:
    its two joint frames, ^sX_p's position error, the bodies' v and a^vp in the successor joint
    frame.  Leaves the joint frames in s (TS_EP, TS_OP, TS_ES, TS_OS)."""
    ag = (0.0, 0.0, 0.0, -mf[HF_GRAVITY], -mf[HF_GRAVITY + 1], -mf[HF_GRAVITY + 2])  # a_0 = -a_g
    zero6 = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    p0 = SB_P0 * nb
    g = SCRATCH_BODY * nb
    o = LI_HEADER + LJ_STRIDE * l
    fo = LF_HEADER + LF_STRIDE * l
    bp = li[o + LJ_PRED]
    bs = li[o + LJ_SUCC]
    nc = li[o + LJ_NC]
    row = li[o + LJ_ROW]
    _joint_world(lf, fo + LF_EP, fo + LF_RP, bp, s, p0, g + TS_EP, g + TS_OP)
    _joint_world(lf, fo + LF_ES, fo + LF_RS, bs, s, p0, g + TS_ES, g + TS_OS)
    hp = lf[fo + LF_PITCH]
    _position_error(li[o + LJ_TYPE], s, g, hp)
    # velocities and velocity-product accelerations of the two bodies in joint coordinates
    _joint_from_body(s, g, bs, p0)
    vs = xm_t(s, g + TS_EJ, g + TS_RJ, load6(w, W_V * nb + W_V_N * bs)) if bs >= 0 else zero6
    as_ = xm_t(s, g + TS_EJ, g + TS_RJ, load6(w, W_A * nb + W_A_N * bs) if bs >= 0 else ag)
    _joint_from_body(s, g, bp, p0)
    vp = xm_t(s, g + TS_EJ, g + TS_RJ, load6(w, W_V * nb + W_V_N * bp)) if bp >= 0 else zero6
    ap = xm_t(s, g + TS_EJ, g + TS_RJ, load6(w, W_A * nb + W_A_N * bp) if bp >= 0 else ag)
    cv = crm_t(vs, vp)
    for c in range(nc):
        k = li[o + LJ_DIR + c]
        vj[row + c] = t_dot(vs, k, hp) - t_dot(vp, k, hp)
        dl[row + c] = s[g + TS_D + k]
        kc = -(t_dot(as_, k, hp) - t_dot(ap, k, hp) + t_dot(cv, k, hp))  # Eq. 8.47
        if alpha > 0.0:
            kc -= 2.0 * alpha * vj[row + c] + alpha * alpha * dl[row + c]  # Eq. 8.22
        kk[row + c] = kc


@njit(cache=True, fastmath=FASTMATH)
def loop_terms(mi, mf, li, lf, w, alpha, K, kk, dl, vj, s):
    """Table 8.4 (K, k), Eq. 8.22 (k_stab, alpha > 0) and Table 8.1 (delta) of every loop, after the
    RNEA has left X_i, v_i and a_i in the work array w.  K is m x nvt (flat, zeroed here), kk, dl,
    vj (= T^T v_J = K qd) have m entries; s is scratch (scratch_size(nb))."""
    nb = mi[H_NB]
    nvt = mi[H_NVT]
    p0 = SB_P0 * nb
    g = SCRATCH_BODY * nb
    world_poses(mi, w, s)
    for k in range(K.shape[0]):
        K[k] = 0.0
    for l in range(li[LI_NL]):
        o = LI_HEADER + LJ_STRIDE * l
        bp = li[o + LJ_PRED]
        bs = li[o + LJ_SUCC]
        nc = li[o + LJ_NC]
        row = li[o + LJ_ROW]
        hp = lf[LF_HEADER + LF_STRIDE * l + LF_PITCH]
        loop_rows(mf, li, lf, w, s, nb, l, alpha, kk, dl, vj)
        # Table 8.4: i = p(k), j = s(k) stepped back to their nearest common ancestor
        bi = bp
        bj = bs
        while bi != bj:
            if bi > bj:
                b = bi
                sgn = -1.0
                bi = parent(mi, bi)
            else:
                b = bj
                sgn = 1.0
                bj = parent(mi, bj)
            _joint_from_body(s, g, b, p0)
            vb = first_dof(mi, b)
            for dof in range(vb, vb + dof_count(mi, b)):
                m6 = xm_t(s, g + TS_EJ, g + TS_RJ, load6(mf, dof_f(nb, dof)))  # ^JX_b S_dof
                for c in range(nc):
                    K[(row + c) * nvt + dof] = sgn * t_dot(m6, li[o + LJ_DIR + c], hp)  # Eq. 8.20
    return 0


@njit(cache=True, inline="always")
def loop_wrench(li, lf, s, nb, l, lam, wr):
    """wr[6l:6l+6] = f_k = T_k lambda_k (Eq. 8.30) of loop l: (f, n) in world axes about the joint
    origin (the API's order); T_k^T is the selection dir in joint coordinates, E_s0^T turns them.
    Needs the body poses loop_terms left in s."""
    o = LI_HEADER + LJ_STRIDE * l
    fo = LF_HEADER + LF_STRIDE * l
    g = SCRATCH_BODY * nb
    _joint_world(lf, fo + LF_ES, fo + LF_RS, li[o + LJ_SUCC], s, SB_P0 * nb, g + TS_ES, g + TS_OS)
    for k in range(6):
        s[g + TS_M + k] = 0.0
    row = li[o + LJ_ROW]
    hp = lf[fo + LF_PITCH]
    for c in range(li[o + LJ_NC]):
        k = li[o + LJ_DIR + c]
        s[g + TS_M + k] = lam[row + c] / math.sqrt(1.0 + hp * hp) if k == 5 else lam[row + c]
        if k == 5:  # the helical screw column (e6 - h e3) / sqrt(1 + h^2) (t_dot); h = 0 for other types
            s[g + TS_M + 2] -= hp * s[g + TS_M + 5]
    es = g + TS_ES
    for x in range(3):  # column x of E_s0^T is row x of E_s0: world = sum_a E_s0[a, x] joint_a
        n = s[es + x] * s[g + TS_M] + s[es + 3 + x] * s[g + TS_M + 1] + s[es + 6 + x] * s[g + TS_M + 2]
        f = s[es + x] * s[g + TS_M + 3] + s[es + 3 + x] * s[g + TS_M + 4] + s[es + 6 + x] * s[g + TS_M + 5]
        wr[6 * l + x] = f
        wr[6 * l + 3 + x] = n


@njit(cache=True)
def terms_entry(mi, mf, li, lf, q, qd, alpha, out):
    """RNEA (for X_i, v_i, a_i) then loop_terms; out = [K (m nvt) | k | delta | K qd]."""
    nvt = mi[H_NVT]
    m = li[LI_NC]
    w = new_work(mi)
    C = np.empty(nvt)
    st = rnea_kernel(mi, mf, q, qd, np.zeros(nvt), np.zeros(0), C, w)
    if st != 0:
        return st
    o = m * nvt
    return loop_terms(mi, mf, li, lf, w, alpha, out[0:o], out[o:o + m], out[o + m:o + 2 * m],
                      out[o + 2 * m:o + 3 * m], np.empty(scratch_size(mi[H_NB])))


# ---------------------------------------------------------------------------------------------
# Python side: argument checks and the public functions


def vec(model, x, n, what):
    """x as n finite floats, or InputError naming ``what`` with the messages of every other function
    (_kernel_io.as_vec and raise_status: the length with the joint order, the first non-finite entry
    with the joint that owns it)."""
    if x is None:
        raise InputError(f"{what} must be {n} numbers, got None")
    a = as_vec(x, what)
    if a.shape[0] != n:
        order = f" (joint order: {clip_names(model.joint_names, quote=False)})" if n in (model.nq, model.nv) else ""
        raise InputError(f"{what} has length {a.shape[0]}, expected {n}{order}")
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        k = int(bad[0])
        arg = ARG_NAMES.index(what) if what in ARG_NAMES else None
        owner = (f" (joint '{coordinate_owner(model, arg, k, False)}')"
                 if arg is not None and n == (model.nq if arg == A_Q else model.nv) else "")
        raise InputError(f"{what}[{k}]{owner} is not finite (NaN or inf)")
    return a


def check_stab(stabilization_time):
    """1/T_stab of Eq. 8.22 (0.0 for None: no stabilisation), or InputError naming the argument."""
    if stabilization_time is None:
        return 0.0
    try:
        st = float(stabilization_time)
    except (TypeError, ValueError):
        st = float("nan")
    if not (st > 0.0) or not math.isfinite(st):
        raise InputError(f"stabilization_time must be a positive number of seconds, got {stabilization_time!r}")
    alpha = 1.0 / st
    if not math.isfinite(alpha * alpha):
        raise InputError(f"stabilization_time {stabilization_time!r} is too small: the Baumgarte gains 1/T and "
                         "1/T^2 (Featherstone Eq. 8.22) overflow")
    return alpha


def names(x):
    return [x] if isinstance(x, str) else list(x)


def terms(model, q, qd=None, alpha=0.0):
    """(K (m x nv, user coordinates), k (+ k_stab when alpha > 0), delta, K qd) at (q, qd); qd None
    means zero rates.  With mimic joints the tree's K is mapped by G (q_t = G q + offset, §9.6)."""
    ld = model.loop_data
    nv = model.nv
    q = vec(model, q, model.nq, "q")   # checked like every function's, loops or not
    qd = np.zeros(nv) if qd is None else vec(model, qd, nv, "qd")
    if ld is None:
        z = np.zeros(0)
        return np.zeros((0, nv)), z, z, z
    if model.has_mimic:
        q, qd = to_tree_q(model, q), to_tree_v(model, qd, "qd", 1)
    m, nvt = ld.n_c, model.nvt
    out = np.empty(m * nvt + 3 * m)
    st = terms_entry(model._kmi, model._kmf, ld._kli, ld._klf, q, qd, float(alpha), out)
    if st:
        raise_status(model, st, tree=model.has_mimic, what="the loop constraints")
    K = out[:m * nvt].reshape(m, nvt)
    if model.has_mimic:
        K = K @ model.G
    o = m * nvt
    return K, out[o:o + m], out[o + m:o + 2 * m], out[o + 2 * m:o + 3 * m]


class LoopState(dict):
    """Per loop joint: {'delta': position error (Table 8.1), 'velocity_error': K_l qd (= T^T v_J),
    'error_norm': |delta|, 'velocity_error_norm': |K_l qd|}; ``max_error`` / ``max_velocity_error``."""

    @property
    def max_error(self) -> float:
        return max((v["error_norm"] for v in self.values()), default=0.0)

    @property
    def max_velocity_error(self) -> float:
        return max((v["velocity_error_norm"] for v in self.values()), default=0.0)


def loop_state(model, q, qd=None) -> LoopState:
    """Loop-closure position error delta (Featherstone Table 8.1) and constraint velocity K qd of
    every loop joint, keyed by loop-joint name (file order)."""
    _, _, dl, ve = terms(model, q, qd)
    out = LoopState()
    ld = model.loop_data
    for name, rows in zip(ld.names if ld else (), ld.rows if ld else ()):
        out[name] = {"delta": dl[rows].copy(), "velocity_error": ve[rows].copy(),
                     "error_norm": float(np.linalg.norm(dl[rows])),
                     "velocity_error_norm": float(np.linalg.norm(ve[rows]))}
    return out


def loop_position_errors(model, q) -> np.ndarray:
    """All loop position errors delta_l stacked in loop order (Featherstone Eq. 8.22's [delta_1 ...])."""
    return terms(model, q)[2].copy()


def loop_constraints(model, q, qd, stabilization_time=None):
    """(K, k) of the loop constraint K qdd = k (Featherstone Eqs. 8.4, 8.15-8.17, 8.47), with the
    Baumgarte term k_stab of Eq. 8.22 added to k when ``stabilization_time`` is given.  Rows are
    grouped per loop joint in model.loops order, T_k's columns (LoopJoint.T) within a loop."""
    alpha = check_stab(stabilization_time)
    if qd is None:
        raise InputError(f"qd must have {model.nv} entries for model '{model.name}', got None")
    K, k, _, _ = terms(model, q, qd, alpha)
    return K, k.copy()


def rank_tol(M):
    if M.size == 0:
        return 0.0
    return max(M.shape) * np.finfo(float).eps * 1e4 * max(1.0, float(np.max(np.abs(M))))


def matrix_rank(M):
    if M.size == 0:
        return 0
    s = np.linalg.svd(M, compute_uv=False)
    return int(np.sum(s > rank_tol(M)))


def mobility(model, q) -> tuple[int, int, int]:
    """(mobility, rank, n^c) at configuration q: mobility = n - rank(K) (Featherstone Eq. 8.52),
    n^c = number of loop constraints (Eq. 8.1); rank < n^c means over-constrained (§8.10)."""
    K = terms(model, q)[0]
    r = matrix_rank(K)
    return model.nv - r, r, K.shape[0]


def v_labels(model):
    """Labels of the velocity variables: joint names, "name[i]" for multi-DoF joints."""
    labels = [None] * model.nv
    for j in model.joint_names:
        s = model.v_slice(j)
        for i in range(s.start, s.stop):
            labels[i] = j if s.stop - s.start == 1 else f"{j}[{i - s.start}]"
    base = "base" if getattr(model, "floating_base", False) else "v"
    return [lab if lab is not None else f"{base}[{i}]" for i, lab in enumerate(labels)]
