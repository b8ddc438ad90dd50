"""Kinematics: link poses, geometric Jacobians, link velocities and the bias acceleration J̇q̇.

Body poses in the world follow from the chain of Plücker transforms (Featherstone §4.1, Eq. 2.24):
body i's axes in world coordinates are R_i = R_λ(i) E_i^T and its origin p_i = p_λ(i) + R_λ(i) r_i.
The geometric Jacobian of a point P on link L (Jacobian notes: column [z_j x (P - o_j); z_j] for a
revolute joint, [z_j; 0] for a prismatic one) is built from each supporting degree of freedom's
motion subspace S_j (Table 4.1) carried to world axes: with S = [s_w; s_v] in body j's frame,
omega = R_j s_w and v_P = R_j s_v + omega x (P - p_j). Rows are [linear; angular] (the ROS edge's
order). Velocities and the bias acceleration come from the RNEA's outward pass (Eqs. 5.14-5.15) with
qdd = 0 and no gravity; the classical acceleration of a body-fixed point is the spatial one plus
omega x v (Featherstone Eq. 2.48).
"""
from __future__ import annotations

import numpy as np
from numba import njit, types

from ..errors import InputError
from ..joints import jcalc
from ..spatial import cross_motion_add, x_mul_motion
from ._common import F1, F2, I1, check_q, A_Q, A_QD, A_QDD, axis_of, check, fast_vec, raise_status, to_tree_q, to_tree_v, unpack, work_views


@njit(cache=True, inline="always")
def _poses(nb, J, B, D, q, E, r, Rw, pw):
    for i in range(nb):
        p = J[i, 0]
        jt = J[i, 1]
        Bi = B[i]
        jcalc(jt, axis_of(jt, D[J[i, 3]]), q, J[i, 2], Bi[0:9], Bi[9:12], E[i], r[i])
        Ei = E[i]
        ri = r[i]
        if p >= 0:
            Rp = Rw[p]
            pp = pw[p]
            for a in range(3):
                for b in range(3):
                    # R_i = R_p E_i^T
                    Rw[i, 3 * a + b] = Rp[3 * a] * Ei[3 * b] + Rp[3 * a + 1] * Ei[3 * b + 1] + Rp[3 * a + 2] * Ei[3 * b + 2]
                pw[i, a] = pp[a] + Rp[3 * a] * ri[0] + Rp[3 * a + 1] * ri[1] + Rp[3 * a + 2] * ri[2]
        else:
            for a in range(3):
                for b in range(3):
                    Rw[i, 3 * a + b] = Ei[3 * b + a]
                pw[i, a] = ri[a]


@njit(types.int64(I1, F1, F1, F1, F1, F1), cache=True)
def poses_kernel(mi, mf, q, w, Rout, pout):
    """World rotation (flat 3x3 per body) and origin of every body."""
    nb, nvt, nqt, J, B, D = unpack(mi, mf)
    st = check_q(q, nqt, J, nb)
    if st != 0:
        return st
    E, r, v, a, f, c, IA, pA, Rw, pw, Dinv, U, u, d, tmp = work_views(w, nb, nvt)
    _poses(nb, J, B, D, q, E, r, Rw, pw)
    for i in range(nb):
        for k in range(9):
            Rout[9 * i + k] = Rw[i, k]
        for k in range(3):
            pout[3 * i + k] = pw[i, k]
    return 0


@njit(types.int64(I1, F1, F1, types.int64, F1, F1, F1), cache=True)
def jacobian_kernel(mi, mf, q, body, pl, Jout, w):
    """6 x nvt (flat) Jacobian of the point pl (in body coordinates) of ``body``: rows [v; omega]."""
    nb, nvt, nqt, J, B, D = unpack(mi, mf)
    st = check_q(q, nqt, J, nb)
    if st != 0:
        return st
    E, r, v, a, f, c, IA, pA, Rw, pw, Dinv, U, u, d, tmp = work_views(w, nb, nvt)
    _poses(nb, J, B, D, q, E, r, Rw, pw)
    for k in range(6 * nvt):
        Jout[k] = 0.0
    if body < 0:
        return 0
    Rb = Rw[body]
    P0 = pw[body, 0] + Rb[0] * pl[0] + Rb[1] * pl[1] + Rb[2] * pl[2]
    P1 = pw[body, 1] + Rb[3] * pl[0] + Rb[4] * pl[1] + Rb[5] * pl[2]
    P2 = pw[body, 2] + Rb[6] * pl[0] + Rb[7] * pl[1] + Rb[8] * pl[2]
    j = body
    while j >= 0:
        Rj = Rw[j]
        d0 = P0 - pw[j, 0]
        d1 = P1 - pw[j, 1]
        d2 = P2 - pw[j, 2]
        vj = J[j, 3]
        for dof in range(vj, vj + J[j, 4]):
            s = D[dof]
            w0 = Rj[0] * s[0] + Rj[1] * s[1] + Rj[2] * s[2]
            w1 = Rj[3] * s[0] + Rj[4] * s[1] + Rj[5] * s[2]
            w2 = Rj[6] * s[0] + Rj[7] * s[1] + Rj[8] * s[2]
            l0 = Rj[0] * s[3] + Rj[1] * s[4] + Rj[2] * s[5]
            l1 = Rj[3] * s[3] + Rj[4] * s[4] + Rj[5] * s[5]
            l2 = Rj[6] * s[3] + Rj[7] * s[4] + Rj[8] * s[5]
            Jout[0 * nvt + dof] = l0 + w1 * d2 - w2 * d1
            Jout[1 * nvt + dof] = l1 + w2 * d0 - w0 * d2
            Jout[2 * nvt + dof] = l2 + w0 * d1 - w1 * d0
            Jout[3 * nvt + dof] = w0
            Jout[4 * nvt + dof] = w1
            Jout[5 * nvt + dof] = w2
        j = J[j, 0]
    return 0


@njit(types.int64(I1, F1, F1, F1, F1, types.int64, F1, F1, F1), cache=True)
def motion_kernel(mi, mf, q, qd, qdd, body, pl, out, w):
    """out[0:6] = [v_P; omega], out[6:12] = [classical accel of P; omega_dot], world axes, for the
    point pl (body coordinates) of ``body``, from the outward RNEA pass without gravity."""
    nb, nvt, nqt, J, B, D = unpack(mi, mf)
    st = check_q(q, nqt, J, nb)
    if st == 0:
        st = check(qd, nvt, A_QD)
    if st == 0:
        st = check(qdd, nvt, A_QDD)
    if st != 0:
        return st
    E, r, v, a, f, c, IA, pA, Rw, pw, Dinv, U, u, d, tmp = work_views(w, nb, nvt)
    for k in range(12):
        out[k] = 0.0
    if body < 0:
        return 0
    _poses(nb, J, B, D, q, E, r, Rw, pw)
    vJ = tmp[0:6]
    for i in range(body + 1):
        p = J[i, 0]
        vi = J[i, 3]
        for k in range(6):
            vJ[k] = 0.0
        ai = a[i]
        vv = v[i]
        if p >= 0:
            x_mul_motion(E[i], r[i], v[p], vv)
            x_mul_motion(E[i], r[i], a[p], ai)
        else:
            for k in range(6):
                vv[k] = 0.0
                ai[k] = 0.0
        for dof in range(vi, vi + J[i, 4]):
            for k in range(6):
                vJ[k] += D[dof, k] * qd[dof]
                ai[k] += D[dof, k] * qdd[dof]
        for k in range(6):
            vv[k] += vJ[k]
        cross_motion_add(vv, vJ, 1.0, ai)
    vb = v[body]
    ab = a[body]
    w0, w1, w2 = vb[0], vb[1], vb[2]
    # velocity and spatial acceleration (linear part) at P, body coordinates
    vp0 = vb[3] + w1 * pl[2] - w2 * pl[1]
    vp1 = vb[4] + w2 * pl[0] - w0 * pl[2]
    vp2 = vb[5] + w0 * pl[1] - w1 * pl[0]
    al0 = ab[3] + ab[1] * pl[2] - ab[2] * pl[1] + w1 * vp2 - w2 * vp1
    al1 = ab[4] + ab[2] * pl[0] - ab[0] * pl[2] + w2 * vp0 - w0 * vp2
    al2 = ab[5] + ab[0] * pl[1] - ab[1] * pl[0] + w0 * vp1 - w1 * vp0
    R = Rw[body]
    loc = tmp[6:18]
    loc[0], loc[1], loc[2] = vp0, vp1, vp2
    loc[3], loc[4], loc[5] = w0, w1, w2
    loc[6], loc[7], loc[8] = al0, al1, al2
    loc[9], loc[10], loc[11] = ab[0], ab[1], ab[2]
    for blk in range(4):
        for k in range(3):
            out[3 * blk + k] = R[3 * k] * loc[3 * blk] + R[3 * k + 1] * loc[3 * blk + 1] + R[3 * k + 2] * loc[3 * blk + 2]
    return 0


# ---------------------------------------------------------------------------------------------
def _tree_q(model, q):
    return to_tree_q(model, q) if model.has_mimic else fast_vec(q, "q")


def _link(model, link):
    k = model.link_index(link)
    return int(model.link_body[k]), model.link_R[9 * k:9 * k + 9].reshape(3, 3), np.array(model.link_p[3 * k:3 * k + 3])


def body_poses(model, q, data=None):
    """(R (nb,3,3), p (nb,3)) of every body in the world."""
    w = data.work if data is not None else np.empty(model.work_size)
    R = np.empty(9 * model.nb)
    p = np.empty(3 * model.nb)
    st = poses_kernel(model._kmi, model._kmf, _tree_q(model, q), w, R, p)
    if st:
        raise_status(model, st, tree=model.has_mimic)
    return R.reshape(model.nb, 3, 3), p.reshape(model.nb, 3)


def link_pose(model, q, link, data=None):
    """4 x 4 homogeneous transform of the link frame in the world frame."""
    b, Rl, pl = _link(model, link)
    T = np.eye(4)
    if b < 0:
        T[:3, :3] = Rl
        T[:3, 3] = pl
        _tree_q_checked(model, q)
        return T
    R, p = body_poses(model, q, data)
    T[:3, :3] = R[b] @ Rl
    T[:3, 3] = p[b] + R[b] @ pl
    return T


def _tree_q_checked(model, q):
    qt = _tree_q(model, q)
    st = check_only(model, qt)
    if st:
        raise_status(model, st, tree=model.has_mimic)


def check_only(model, qt):
    if qt.shape[0] != model.nqt:
        return 1 * 100000000 + min(qt.shape[0], 99999)
    bad = np.nonzero(~np.isfinite(qt))[0]
    return 2 * 100000000 + int(bad[0]) if bad.size else 0


def link_poses(model, q, data=None) -> dict:
    """{link: 4x4 pose in the world} for every link of the model."""
    R, p = body_poses(model, q, data)
    out = {}
    for k, name in enumerate(model.link_names):
        b = int(model.link_body[k])
        Rl = model.link_R[9 * k:9 * k + 9].reshape(3, 3)
        pl = model.link_p[3 * k:3 * k + 3]
        T = np.eye(4)
        if b < 0:
            T[:3, :3], T[:3, 3] = Rl, pl
        else:
            T[:3, :3], T[:3, 3] = R[b] @ Rl, p[b] + R[b] @ pl
        out[name] = T
    return out


def jacobian(model, q, link, data=None):
    """6 x nv geometric Jacobian of the link frame origin in world axes, rows [linear; angular]."""
    b, Rl, pl = _link(model, link)
    w = data.work if data is not None else np.empty(model.work_size)
    Jt = np.empty(6 * model.nvt)
    st = jacobian_kernel(model._kmi, model._kmf, _tree_q(model, q), b, np.ascontiguousarray(pl), Jt, w)
    if st:
        raise_status(model, st, tree=model.has_mimic)
    Jm = Jt.reshape(6, model.nvt)
    return Jm @ model.G if model.has_mimic else Jm


def _motion(model, q, qd, qdd, link, data):
    b, Rl, pl = _link(model, link)
    w = data.work if data is not None else np.empty(model.work_size)
    out = np.empty(12)
    if model.has_mimic:
        qt, qdt, qddt = to_tree_q(model, q), to_tree_v(model, qd, "qd", A_QD), to_tree_v(model, qdd, "qdd", A_QDD)
    else:
        qt, qdt, qddt = fast_vec(q, "q"), fast_vec(qd, "qd"), fast_vec(qdd, "qdd")
    st = motion_kernel(model._kmi, model._kmf, qt, qdt, qddt, b, np.ascontiguousarray(pl), out, w)
    if st:
        raise_status(model, st, tree=model.has_mimic)
    return out


def link_velocity(model, q, qd, link, data=None):
    """(6,) [velocity of the link origin; angular velocity], world axes (= jacobian @ qd)."""
    return _motion(model, q, qd, np.zeros(model.nv), link, data)[:6]


def link_acceleration(model, q, qd, qdd, link, data=None):
    """(6,) classical acceleration [d/dt v_origin; d/dt omega] of the link origin, world axes, no gravity."""
    return _motion(model, q, qd, qdd, link, data)[6:]


def bias_acceleration(model, q, qd, link, data=None):
    """(6,) J̇ q̇: the classical acceleration of the link origin when qdd = 0, world axes."""
    return _motion(model, q, qd, np.zeros(model.nv), link, data)[6:]


def center_of_mass(model, q, data=None):
    """(3,) world position of the whole mechanism's centre of mass (bodies on the fixed base excluded
    only if they carry no mass: fixed-base links count with their fixed position)."""
    R, p = body_poses(model, q, data)
    total = 0.0
    acc = np.zeros(3)
    for i in range(model.nb):
        m, h, _ = model.body_inertia(i)
        total += m
        acc += m * p[i] + R[i] @ h
    spec = model._spec
    for name, fr in spec.link_frames.items():
        if fr.body < 0:
            m, c, _ = spec.link_inertia[name]
            total += m
            acc += m * (fr.p + fr.R @ c)
    for pl in model.payloads.values():
        fr = spec.link_frames[pl.link]
        if fr.body < 0:
            total += pl.mass
            acc += pl.mass * (fr.p + fr.R @ np.asarray(pl.com))
    if total <= 0:
        raise InputError("the model has no mass: its centre of mass is undefined")
    return acc / total
