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
from ..._jit import njit, types

from ...errors import InputError
from ...joints import jcalc
from ...packed import dof_count, dof_f, first_dof, joint_type, parent
from ...spatial import load6, xm_t
from ...dispatch import Route
from ..._kernel_io import (check_state, F1, I1, check_q)
from ...joints import joint_motion
from ...layout import (D_S, H_NB, H_NVT, W_A,
                      W_A_N, W_E, W_E_N, W_PW, W_PW_N, W_R, W_RW, W_RW_N, W_R_N, W_V, W_V_N)
from ...spatial import store6


@njit(cache=True, inline="always")
def _pose(mi, mf, q, w, i):
    """World axes R_i (flat 3x3 at W_RW) and origin p_i (W_PW) of body i from its parent's (already
    done), with the joint transform ^iX_λ(i) left at W_E, W_R of the work array."""
    nb = mi[H_NB]
    jcalc(mi, mf, i, q, w, W_E * nb + W_E_N * i, W_R * nb + W_R_N * i)
    _pose_from_x(mi, w, i)


@njit(cache=True, inline="always")
def _pose_from_x(mi, w, i):
    """_pose with ^iX_λ(i) = (E, r) already in the work array (W_E, W_R; the RNEA leaves it there):
    R_i = R_λ(i) E^T, p_i = p_λ(i) + R_λ(i) r."""
    nb = mi[H_NB]
    p = parent(mi, i)
    eo = W_E * nb + W_E_N * i
    ro = W_R * nb + W_R_N * i
    Ro = W_RW * nb + W_RW_N * i
    po = W_PW * nb + W_PW_N * i
    if p >= 0:
        Rp = W_RW * nb + W_RW_N * p
        pp = W_PW * nb + W_PW_N * p
        for a in range(3):
            for b in range(3):  # R_i = R_λ(i) E_i^T
                w[Ro + 3 * a + b] = (w[Rp + 3 * a] * w[eo + 3 * b] + w[Rp + 3 * a + 1] * w[eo + 3 * b + 1]
                                     + w[Rp + 3 * a + 2] * w[eo + 3 * b + 2])
            # p_i = p_λ(i) + R_λ(i) r_i
            w[po + a] = (w[pp + a] + w[Rp + 3 * a] * w[ro] + w[Rp + 3 * a + 1] * w[ro + 1]
                         + w[Rp + 3 * a + 2] * w[ro + 2])
    else:
        for a in range(3):
            for b in range(3):
                w[Ro + 3 * a + b] = w[eo + 3 * b + a]
            w[po + a] = w[ro + a]


@njit(cache=True, inline="always")
def _poses(mi, mf, q, w):
    """_pose of every body (Featherstone §4.1, Eq. 2.24)."""
    for i in range(mi[H_NB]):
        _pose(mi, mf, q, w, i)


@njit(types.int64(I1, F1, F1, F1, F1, F1), cache=True)
def poses_kernel(mi, mf, q, w, Rout, pout):
    """World rotation (flat 3x3 per body) and origin of every body."""
    nb = mi[H_NB]
    st = check_q(q, mi)
    if st != 0:
        return st
    _poses(mi, mf, q, w)
    for k in range(W_RW_N * nb):
        Rout[k] = w[W_RW * nb + k]
    for k in range(W_PW_N * nb):
        pout[k] = w[W_PW * nb + k]
    return 0


@njit(types.int64(I1, F1, F1, types.int64, F1, F1, F1), cache=True)
def jacobian_kernel(mi, mf, q, body, pl, Jout, w):
    """6 x nvt (flat) Jacobian of the point pl (in body coordinates) of ``body``: rows [v; omega]."""
    nb = mi[H_NB]
    nvt = mi[H_NVT]
    st = check_q(q, mi)
    if st != 0:
        return st
    _poses(mi, mf, q, w)
    J = Jout.reshape((6, nvt))  # rows [v_P; omega]
    J[:, :] = 0.0
    if body < 0:
        return 0
    Rb = W_RW * nb + W_RW_N * body
    pb = W_PW * nb + W_PW_N * body
    P = (w[pb] + w[Rb] * pl[0] + w[Rb + 1] * pl[1] + w[Rb + 2] * pl[2],
         w[pb + 1] + w[Rb + 3] * pl[0] + w[Rb + 4] * pl[1] + w[Rb + 5] * pl[2],
         w[pb + 2] + w[Rb + 6] * pl[0] + w[Rb + 7] * pl[1] + w[Rb + 8] * pl[2])
    j = body
    while j >= 0:
        Rj = W_RW * nb + W_RW_N * j
        pj = W_PW * nb + W_PW_N * j
        d0 = P[0] - w[pj]
        d1 = P[1] - w[pj + 1]
        d2 = P[2] - w[pj + 2]
        vj = first_dof(mi, j)
        for dof in range(vj, vj + dof_count(mi, j)):
            s = dof_f(nb, dof) + D_S
            # omega = R_j s_w ; v_P = R_j s_v + omega x (P - p_j)
            w0 = w[Rj] * mf[s] + w[Rj + 1] * mf[s + 1] + w[Rj + 2] * mf[s + 2]
            w1 = w[Rj + 3] * mf[s] + w[Rj + 4] * mf[s + 1] + w[Rj + 5] * mf[s + 2]
            w2 = w[Rj + 6] * mf[s] + w[Rj + 7] * mf[s + 1] + w[Rj + 8] * mf[s + 2]
            l0 = w[Rj] * mf[s + 3] + w[Rj + 1] * mf[s + 4] + w[Rj + 2] * mf[s + 5]
            l1 = w[Rj + 3] * mf[s + 3] + w[Rj + 4] * mf[s + 4] + w[Rj + 5] * mf[s + 5]
            l2 = w[Rj + 6] * mf[s + 3] + w[Rj + 7] * mf[s + 4] + w[Rj + 8] * mf[s + 5]
            J[0, dof] = l0 + w1 * d2 - w2 * d1
            J[1, dof] = l1 + w2 * d0 - w0 * d2
            J[2, dof] = l2 + w0 * d1 - w1 * d0
            J[3, dof] = w0
            J[4, dof] = w1
            J[5, dof] = w2
        j = parent(mi, j)
    return 0


@njit(types.int64(I1, F1, F1, F1, F1, types.int64, F1, F1, F1), cache=True)
def motion_kernel(mi, mf, q, qd, qdd, body, pl, out, w):
    """out[0:6] = [v_P; omega], out[6:12] = [classical accel of P; omega_dot], world axes, for the
    point pl (body coordinates) of ``body``, from the outward RNEA pass (Eqs. 5.14-5.15) without
    gravity; classical = spatial + omega x v (Eq. 2.48)."""
    nb = mi[H_NB]
    st = check_state(q, qd, qdd, mi)
    if st != 0:
        return st
    for k in range(12):
        out[k] = 0.0
    if body < 0:
        return 0
    _poses(mi, mf, q, w)
    E0, r0, v0, a0 = W_E * nb, W_R * nb, W_V * nb, W_A * nb
    zero = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    for i in range(body + 1):
        p = parent(mi, i)
        eo = E0 + W_E_N * i
        ro = r0 + W_R_N * i
        xv = xm_t(w, eo, ro, load6(w, v0 + W_V_N * p)) if p >= 0 else zero
        xa = xm_t(w, eo, ro, load6(w, a0 + W_A_N * p)) if p >= 0 else zero
        v, a = joint_motion(mi, mf, i, joint_type(mi, i), xv, xa, qd, qdd)  # Eqs. 5.14-5.15
        store6(w, v0 + W_V_N * i, v)
        store6(w, a0 + W_A_N * i, a)
    vb = v0 + W_V_N * body
    ab = a0 + W_A_N * body
    w0, w1, w2 = w[vb], w[vb + 1], w[vb + 2]
    # velocity and spatial acceleration (linear part) at P, body coordinates
    vp0 = w[vb + 3] + w1 * pl[2] - w2 * pl[1]
    vp1 = w[vb + 4] + w2 * pl[0] - w0 * pl[2]
    vp2 = w[vb + 5] + w0 * pl[1] - w1 * pl[0]
    al0 = w[ab + 3] + w[ab + 1] * pl[2] - w[ab + 2] * pl[1] + w1 * vp2 - w2 * vp1
    al1 = w[ab + 4] + w[ab + 2] * pl[0] - w[ab] * pl[2] + w2 * vp0 - w0 * vp2
    al2 = w[ab + 5] + w[ab] * pl[1] - w[ab + 1] * pl[0] + w0 * vp1 - w1 * vp0
    loc = (vp0, vp1, vp2, w0, w1, w2, al0, al1, al2, w[ab], w[ab + 1], w[ab + 2])
    R = W_RW * nb + W_RW_N * body
    for blk in range(4):
        for k in range(3):
            out[3 * blk + k] = (w[R + 3 * k] * loc[3 * blk] + w[R + 3 * k + 1] * loc[3 * blk + 1]
                                + w[R + 3 * k + 2] * loc[3 * blk + 2])
    return 0


# ---------------------------------------------------------------------------------------------
def _link(model, link):
    if not isinstance(link, str):
        raise InputError(f"link must be a link name (str), got {'None' if link is None else type(link).__name__}")
    k = model.link_index(link)
    return int(model.link_body[k]), model.link_R[9 * k:9 * k + 9].reshape(3, 3), np.array(model.link_p[3 * k:3 * k + 3])


def _body_poses(model, data, w, qt):
    R = np.empty(9 * model.nb)
    p = np.empty(3 * model.nb)
    st = poses_kernel(model._kmi, model._kmf, qt, w, R, p)
    return st, (R.reshape(model.nb, 3, 3), p.reshape(model.nb, 3))


_BODY_POSES = Route("link poses", (("q", "q"),), _body_poses).front


def body_poses(model, q, data=None):
    """(R (nb,3,3), p (nb,3)) of every body in the world."""
    return _BODY_POSES(model, data, q)


def _link_pose(model, data, w, qt, link):
    b, Rl, pl = _link(model, link)
    T = np.eye(4)
    st, (R, p) = _body_poses(model, data, w, qt)
    if b < 0:
        T[:3, :3], T[:3, 3] = Rl, pl
    elif st == 0:
        T[:3, :3], T[:3, 3] = R[b] @ Rl, p[b] + R[b] @ pl
    return st, T


def _link_poses(model, data, w, qt):
    st, (R, p) = _body_poses(model, data, w, qt)
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
    return st, out


def _jacobian(model, data, w, qt, link):
    b, Rl, pl = _link(model, link)
    Jt = np.empty(6 * model.nvt)
    st = jacobian_kernel(model._kmi, model._kmf, qt, b, np.ascontiguousarray(pl), Jt, w)
    return st, Jt.reshape(6, model.nvt)


def _motion(model, data, w, qt, qdt, qddt, link, part):
    b, Rl, pl = _link(model, link)
    out = np.empty(12)
    st = motion_kernel(model._kmi, model._kmf, qt, qdt, qddt, b, np.ascontiguousarray(pl), out, w)
    return st, (out[:6] if part == 0 else out[6:])


def _velocity(model, data, w, qt, qdt, link):
    return _motion(model, data, w, qt, qdt, np.zeros(model.nvt), link, 0)


def _bias(model, data, w, qt, qdt, link):
    return _motion(model, data, w, qt, qdt, np.zeros(model.nvt), link, 1)


def _acceleration(model, data, w, qt, qdt, qddt, link):
    return _motion(model, data, w, qt, qdt, qddt, link, 1)


def _com(model, data, w, qt):
    st, (R, p) = _body_poses(model, data, w, qt)
    if st:
        return st, None
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
    return 0, acc / total


_Q, _QD, _QDD = ("q", "q"), ("qd", "v"), ("qdd", "v")
_LINK_POSE = Route("the link pose", (_Q,), _link_pose, extras=("link",)).front
_LINK_POSES = Route("the link poses", (_Q,), _link_poses).front
_JACOBIAN = Route("the Jacobian", (_Q,), _jacobian, extras=("link",), post="J").front
_VELOCITY = Route("the link velocity", (_Q, _QD), _velocity, extras=("link",)).front
_ACCELERATION = Route("the link acceleration", (_Q, _QD, _QDD), _acceleration, extras=("link",)).front
_BIAS = Route("the bias acceleration", (_Q, _QD), _bias, extras=("link",)).front
_COM = Route("the centre of mass", (_Q,), _com).front


def link_pose(model, q, link, data=None):
    """4 x 4 homogeneous transform of the link frame in the world frame."""
    return _LINK_POSE(model, data, q, link)


def link_poses(model, q, data=None) -> dict:
    """{link: 4x4 pose in the world} for every link of the model."""
    return _LINK_POSES(model, data, q)


def jacobian(model, q, link, data=None):
    """6 x nv geometric Jacobian of the link frame origin in world axes, rows [linear; angular]."""
    return _JACOBIAN(model, data, q, link)


def link_velocity(model, q, qd, link, data=None):
    """(6,) [velocity of the link origin; angular velocity], world axes (= jacobian @ qd)."""
    return _VELOCITY(model, data, q, qd, link)


def link_acceleration(model, q, qd, qdd, link, data=None):
    """(6,) classical acceleration [d/dt v_origin; d/dt omega] of the link origin, world axes, no gravity."""
    return _ACCELERATION(model, data, q, qd, qdd, link)


def bias_acceleration(model, q, qd, link, data=None):
    """(6,) J̇ q̇: the classical acceleration of the link origin when qdd = 0, world axes."""
    return _BIAS(model, data, q, qd, link)


def center_of_mass(model, q, data=None):
    """(3,) world position of the whole mechanism's centre of mass (bodies on the fixed base excluded
    only if they carry no mass: fixed-base links count with their fixed position)."""
    return _COM(model, data, q)
