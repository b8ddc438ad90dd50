"""Jacobians of any point of a link in world or link axes, their time derivative J̇, the analytic
(Euler-angle) Jacobian, manipulability and the Jacobian's singular values.

Rows are [linear; angular] (the ROS edge's order). The point P is given in LINK coordinates; the
link frame may sit on its body at a fixed offset (model.link_R, link_p), so P in body coordinates
is p_L + R_L P. Geometric Jacobian (Jacobian notes, column [z_j x (P - o_j); z_j] of a revolute
joint): kinematics.jacobian_kernel. In the link's axes every row is rotated by R^T, R the link's
world orientation: J_link = diag(R^T, R^T) J_world.

J̇ (world axes): with S_j the world motion subspace at the world origin (angular-first,
coriolis.world_motion), S_j = [omega_j; v_Oj] and dS_j/dt = v_j x S_j (Featherstone Eq. 2.44),
the column of the point P (moving with the link, dP/dt = v_O + omega x P) is

    J_j = [v_Oj + omega_j x P; omega_j]
    dJ_j/dt = [dv_Oj + domega_j x P + omega_j x dP/dt; domega_j],

so that J qdd + J̇ qd is the classical acceleration of P and the angular acceleration (Featherstone
Eq. 2.48; dn.bias_acceleration is J̇ qd). In link axes, d/dt diag(R^T, R^T) J = diag(R^T, R^T)
(J̇ - diag(omega x, omega x) J) (dR/dt = omega x R).

Analytic Jacobian (Jacobian notes, "analytic Jacobian"): omega = B(phi) dphi/dt for Euler angles
phi = (a, b, c); J_a = diag(1, B^-1) J. "zyx": R = Rz(a) Ry(b) Rx(c), B = [e_z, Rz(a) e_y,
Rz(a) Ry(b) e_x], singular at cos b = 0; "zyz": R = Rz(a) Ry(b) Rz(c), B = [e_z, Rz(a) e_y,
Rz(a) Ry(b) e_z], singular at sin b = 0.

Manipulability (Yoshikawa 1985; Jacobian notes): w = sqrt(det(J J^T)) = product of the singular
values of the 6 x nv world Jacobian of the link origin, 0 where J has rank below 6.
"""
from __future__ import annotations

import math

import numpy as np

from ..._jit import carray, cfunc, njit, types
from ...dispatch import Route
from ...errors import InputError, clip
from ...packed import dof_count, first_dof, parent
from ...layout import H_NB, H_NVT, V_U_N, W_PW, W_PW_N, W_RW, W_RW_N, W_V_N
from ..._kernel_io import F1, FASTMATH, I1, SIG3S, check_q_qd, model_from_pointers
from .coriolis import motion_offsets, world_motion
from .kinematics import _link, _pose, jacobian_kernel

ROWS = 6  # a Jacobian's rows: [linear (3); angular (3)]
R_VX, R_VY, R_VZ, R_WX, R_WY, R_WZ = range(ROWS)  # their names, for flat row-major offsets (r * nvt)
AXES = ("world", "link")
EULER = ("zyx", "zyz")
SINGULAR_EULER = 1e-6  # |cos b| (zyx) or |sin b| (zyz) below this: the representation is singular


@njit(cache=True, inline="always")
def _jdot(mi, mf, q, qd, body, pl, out, dJ, w):
    """J̇ at out[dJ:dJ + 6 nvt] (flat row-major, rows [v; omega], world axes) of the point pl (body
    coordinates) of ``body`` (module docstring), and J at out[:dJ] when dJ = 6 nvt (dJ = 0: J̇
    alone); leaves the poses of body and its ancestors in w (kinematics._pose). No allocation and no
    reshaped views: it is also a C callback (jdot_c)."""
    nb = mi[H_NB]
    nvt = mi[H_NVT]
    st = check_q_qd(q, qd, mi)
    if st != 0:
        return st
    for k in range(dJ + ROWS * nvt):
        out[k] = 0.0
    if body < 0:
        return 0
    So, dSo, vo = motion_offsets(nb, nvt)
    for i in range(body + 1):  # poses and motion of the support only, outward (a parent's index is
        j = body               # below its children's: i supports body when the walk up meets it)
        while j > i:
            j = parent(mi, j)
        if j == i:
            _pose(mi, mf, q, w, i)
            world_motion(mi, mf, qd, w, i)
    R = W_RW * nb + W_RW_N * body
    pb = W_PW * nb + W_PW_N * body
    P0 = w[pb] + w[R] * pl[0] + w[R + 1] * pl[1] + w[R + 2] * pl[2]
    P1 = w[pb + 1] + w[R + 3] * pl[0] + w[R + 4] * pl[1] + w[R + 5] * pl[2]
    P2 = w[pb + 2] + w[R + 6] * pl[0] + w[R + 7] * pl[1] + w[R + 8] * pl[2]
    wb0, wb1, wb2 = w[vo + W_V_N * body], w[vo + W_V_N * body + 1], w[vo + W_V_N * body + 2]
    Pd0 = w[vo + W_V_N * body + 3] + wb1 * P2 - wb2 * P1  # dP/dt = v_O + omega x P
    Pd1 = w[vo + W_V_N * body + 4] + wb2 * P0 - wb0 * P2
    Pd2 = w[vo + W_V_N * body + 5] + wb0 * P1 - wb1 * P0
    j = body  # J's row r at out[r * nvt] (when dJ > 0), J̇'s at out[dJ + r * nvt]
    while j >= 0:
        vj = first_dof(mi, j)
        for d in range(vj, vj + dof_count(mi, j)):
            w0, w1, w2 = w[So + V_U_N * d], w[So + V_U_N * d + 1], w[So + V_U_N * d + 2]
            a0, a1, a2 = w[dSo + V_U_N * d], w[dSo + V_U_N * d + 1], w[dSo + V_U_N * d + 2]
            if dJ > 0:
                out[R_VX * nvt + d] = w[So + V_U_N * d + 3] + w1 * P2 - w2 * P1
                out[R_VY * nvt + d] = w[So + V_U_N * d + 4] + w2 * P0 - w0 * P2
                out[R_VZ * nvt + d] = w[So + V_U_N * d + 5] + w0 * P1 - w1 * P0
                out[R_WX * nvt + d], out[R_WY * nvt + d], out[R_WZ * nvt + d] = w0, w1, w2
            out[dJ + R_VX * nvt + d] = w[dSo + V_U_N * d + 3] + a1 * P2 - a2 * P1 + w1 * Pd2 - w2 * Pd1
            out[dJ + R_VY * nvt + d] = w[dSo + V_U_N * d + 4] + a2 * P0 - a0 * P2 + w2 * Pd0 - w0 * Pd2
            out[dJ + R_VZ * nvt + d] = w[dSo + V_U_N * d + 5] + a0 * P1 - a1 * P0 + w0 * Pd1 - w1 * Pd0
            out[dJ + R_WX * nvt + d], out[dJ + R_WY * nvt + d], out[dJ + R_WZ * nvt + d] = a0, a1, a2
        j = parent(mi, j)
    return 0


@njit(types.int64(I1, F1, F1, F1, types.int64, F1, F1, F1), cache=True, fastmath=FASTMATH)
def jdot_kernel(mi, mf, q, qd, body, pl, out, w):
    """_jdot with out = [J; J̇] (12 x nvt): the converting route's, which also needs J (link axes)."""
    return _jdot(mi, mf, q, qd, body, pl, out, ROWS * mi[H_NVT], w)


@cfunc(SIG3S, cache=True, fastmath=FASTMATH)
def jdot_c(mip, mfp, qp, nq, qdp, nqd, plp, npl, body, outp, wp, nw):
    """C callback of _jdot for a link _fastcall.Route: q, qd, the point (body coordinates) as the three
    vectors, the body's index as the float; out = J̇ alone (6 x nvt)."""
    mi, mf, nvt = model_from_pointers(mip, mfp)
    return _jdot(mi, mf, carray(qp, (nq,)), carray(qdp, (nqd,)), int(body), carray(plp, (npl,)),
                 carray(outp, (ROWS * nvt,)), 0, carray(wp, (nw,)))


@njit(cache=True, inline="always")
def _column(w, Rb, Rl, c):
    """Column c of R_body Rl (R_body flat at w[Rb:Rb + 9], Rl flat 3x3)."""
    return (w[Rb] * Rl[c] + w[Rb + 1] * Rl[3 + c] + w[Rb + 2] * Rl[6 + c],
            w[Rb + 3] * Rl[c] + w[Rb + 4] * Rl[3 + c] + w[Rb + 5] * Rl[6 + c],
            w[Rb + 6] * Rl[c] + w[Rb + 7] * Rl[3 + c] + w[Rb + 8] * Rl[6 + c])


@njit(types.int64(I1, F1, F1, types.int64, F1, F1, F1, F1), cache=True)
def link_jacobian_kernel(mi, mf, q, body, pl, Rl, Jout, w):
    """The Jacobian of the point pl (body coordinates) of ``body`` in the axes of a link fixed to it
    (Rl: the link's orientation in the body, flat 3x3): diag(R^T, R^T) J_world with R = R_body Rl,
    rotated in place (the body poses are left in w by jacobian_kernel)."""
    st = jacobian_kernel(mi, mf, q, body, pl, Jout, w)
    if st != 0 or body < 0:
        return st
    nvt = mi[H_NVT]
    Rb = W_RW * mi[H_NB] + W_RW_N * body
    c0 = _column(w, Rb, Rl, 0)  # the columns of R = R_body Rl: the link's axes in the world
    c1 = _column(w, Rb, Rl, 1)
    c2 = _column(w, Rb, Rl, 2)
    J = Jout.reshape((ROWS, nvt))
    for d in range(nvt):
        for blk in range(0, ROWS, 3):
            x0, x1, x2 = J[blk, d], J[blk + 1, d], J[blk + 2, d]
            J[blk, d] = c0[0] * x0 + c0[1] * x1 + c0[2] * x2  # (R^T x)_c = column c of R . x
            J[blk + 1, d] = c1[0] * x0 + c1[1] * x1 + c1[2] * x2
            J[blk + 2, d] = c2[0] * x0 + c2[1] * x1 + c2[2] * x2
    return 0


# ---------------------------------------------------------------------------------------------
def _point(model, link, point):
    """(body, R_L, point in body coordinates) of a point given in link coordinates."""
    b, Rl, pl = _link(model, link)
    if point is ORIGIN:  # the default: the link origin
        return b, Rl, pl
    if point.shape[0] != 3:
        raise InputError(f"point must have 3 numbers (x y z in the link frame of '{link}'), got {point.shape[0]}")
    if not np.all(np.isfinite(point)):
        raise InputError(f"point is not finite (NaN or inf): {point.tolist()}")
    return b, Rl, pl + Rl @ point


def _axes(axes):
    if not (isinstance(axes, str) and axes in AXES):
        raise InputError(f"axes must be 'world' or 'link', got {clip(repr(axes))}")


def _link_rotation(model, w, b, Rl):
    """World orientation of the link frame (poses of the last kernel call in w)."""
    if b < 0:
        return Rl
    nb = model.nb
    return w[W_RW * nb + W_RW_N * b:W_RW * nb + W_RW_N * b + 9].reshape(3, 3) @ Rl


def _rotate_rows(R, J):
    """diag(R^T, R^T) J."""
    out = np.empty_like(J)
    out[:3] = R.T @ J[:3]
    out[3:] = R.T @ J[3:]
    return out


def world_jacobian(model, w, qt, b, pb):
    """6 x nvt world Jacobian of the point pb (body coordinates) of body b; status, J."""
    Jt = np.empty(6 * model.nvt)
    st = jacobian_kernel(model._kmi, model._kmf, qt, b, pb, Jt, w)
    return st, Jt.reshape(6, model.nvt)


def _jacobian(model, data, w, qt, point, link, axes):
    b, Rl, pb = _point(model, link, point)
    _axes(axes)
    if axes == "world":
        return world_jacobian(model, w, qt, b, pb)
    if b < 0:  # a link on the fixed base: J = 0 in any axes
        return 0, np.zeros((ROWS, model.nvt))
    Jt = np.empty(ROWS * model.nvt)
    st = link_jacobian_kernel(model._kmi, model._kmf, qt, b, pb, np.array(Rl).reshape(-1), Jt, w)
    return st, Jt.reshape(ROWS, model.nvt)


def _jacobian_derivative(model, data, w, qt, qdt, point, link, axes):
    b, Rl, pb = _point(model, link, point)
    _axes(axes)
    out = np.empty((12, model.nvt))
    st = jdot_kernel(model._kmi, model._kmf, qt, qdt, b, pb, out.reshape(-1), w)
    J, dJ = out[:6], out[6:]
    if st == 0 and axes == "link":
        R = _link_rotation(model, w, b, Rl)
        om = J[3:] @ qdt  # the link's angular velocity (world axes)
        Wx = np.array([[0.0, -om[2], om[1]], [om[2], 0.0, -om[0]], [-om[1], om[0], 0.0]])
        dJ = dJ.copy()
        dJ[:3] -= Wx @ J[:3]
        dJ[3:] -= Wx @ J[3:]
        dJ = _rotate_rows(R, dJ)
    return st, dJ


def _reduce(model, J):
    return J @ model.G if model.has_mimic else J


def _singular_values(model, data, w, qt, link):
    b, Rl, pb = _point(model, link, np.zeros(3))
    st, J = world_jacobian(model, w, qt, b, pb)
    if st:
        return st, None
    return 0, np.linalg.svd(_reduce(model, J), compute_uv=False)


def _manipulability(model, data, w, qt, link):
    st, s = _singular_values(model, data, w, qt, link)
    if st:
        return st, None
    if s.shape[0] < 6 or s[-1] <= s[0] * 6 * max(model.nv, 6) * np.finfo(float).eps:
        return 0, 0.0
    return 0, float(np.prod(s))


def euler_rates_matrix(R, euler, link):
    """(angles, B^-1) with omega = B dphi/dt (module docstring); InputError at a singularity."""
    if euler == "zyx":
        b = math.atan2(-R[2, 0], math.hypot(R[0, 0], R[1, 0]))
        a = math.atan2(R[1, 0], R[0, 0])
        c = math.atan2(R[2, 1], R[2, 2])
        cb, sb = math.cos(b), math.sin(b)
        if abs(cb) < SINGULAR_EULER:
            raise InputError(f"the zyx Euler angles of link '{link}' are singular here (b = {b:+.6f} rad, at "
                             "±pi/2 their rates are undefined): use euler='zyz' or the geometric jacobian")
        B = np.array([[0.0, -math.sin(a), math.cos(a) * cb], [0.0, math.cos(a), math.sin(a) * cb], [1.0, 0.0, -sb]])
    else:
        b = math.atan2(math.hypot(R[0, 2], R[1, 2]), R[2, 2])
        sb, cb = math.sin(b), math.cos(b)
        if abs(sb) < SINGULAR_EULER:
            raise InputError(f"the zyz Euler angles of link '{link}' are singular here (b = {b:+.6f} rad, at 0 "
                             "or pi their rates are undefined): use euler='zyx' or the geometric jacobian")
        a = math.atan2(R[1, 2], R[0, 2])
        c = math.atan2(R[2, 1], -R[2, 0])
        B = np.array([[0.0, -math.sin(a), math.cos(a) * sb], [0.0, math.cos(a), math.sin(a) * sb], [1.0, 0.0, cb]])
    return (a, b, c), np.linalg.inv(B)


def _analytic(model, data, w, qt, link, euler):
    if not (isinstance(euler, str) and euler in EULER):
        raise InputError(f"euler must be 'zyx' or 'zyz', got {euler!r}")
    b, Rl, pb = _point(model, link, np.zeros(3))
    st, J = world_jacobian(model, w, qt, b, pb)
    if st:
        return st, None
    _, Binv = euler_rates_matrix(_link_rotation(model, w, b, Rl), euler, link)
    Ja = J.copy()
    Ja[3:] = Binv @ J[3:]
    return 0, Ja


ORIGIN = np.zeros(3)  # the default point (identity-tested: the link origin needs no arithmetic)
_Q, _QD, _PT = ("q", "q"), ("qd", "v"), ("point", "x")
_JACOBIAN = Route("the Jacobian", (_Q, _PT), _jacobian, extras=("link", "axes"), post="J").front
_JDOT = Route("the Jacobian derivative", (_Q, _QD, _PT), _jacobian_derivative, extras=("link", "axes"), post="J",
              link_shim=(jdot_c, ROWS, ORIGIN), fast=("world",)).front
_SVD = Route("the Jacobian's singular values", (_Q,), _singular_values, extras=("link",)).front
_MANIP = Route("the manipulability", (_Q,), _manipulability, extras=("link",)).front
_ANALYTIC = Route("the analytic Jacobian", (_Q,), _analytic, extras=("link", "euler"), post="J").front


def jacobian(model, q, link, point=ORIGIN, axes="world", data=None):
    """6 x nv geometric Jacobian of a point of a link, rows [linear; angular].

    point: (x, y, z) in the LINK frame (default its origin); axes: "world" (default) or "link"
    (both row blocks in the link's axes: diag(R^T, R^T) J_world)."""
    return _JACOBIAN(model, data, q, point, link, axes)


def jacobian_derivative(model, q, qd, link, point=ORIGIN, axes="world", data=None):
    """6 x nv dJ/dt of jacobian(model, q, link, point, axes) along qd: J qdd + J̇ qd is the
    classical acceleration of the point and the angular acceleration (in the chosen axes)."""
    return _JDOT(model, data, q, qd, point, link, axes)


def jacobian_singular_values(model, q, link, data=None):
    """Singular values (descending, min(6, nv) of them) of the world Jacobian of the link origin."""
    return _SVD(model, data, q, link)


def manipulability(model, q, link, data=None):
    """Yoshikawa's manipulability sqrt(det(J J^T)) of the world Jacobian of the link origin (a float;
    0.0 where J has rank below 6, e.g. at a singularity or with fewer than 6 dofs)."""
    return _MANIP(model, data, q, link)


def analytic_jacobian(model, q, link, euler="zyx", data=None):
    """6 x nv rows [d/dt position of the link origin; d/dt Euler angles (a, b, c)] with
    euler="zyx": R = Rz(a) Ry(b) Rx(c), or "zyz": R = Rz(a) Ry(b) Rz(c) (J_a = diag(1, B^-1) J).
    InputError near a representation singularity (b = ±pi/2 for zyx, b = 0 or pi for zyz)."""
    return _ANALYTIC(model, data, q, link, euler)


def euler_angles(R, euler="zyx"):
    """(a, b, c) of a rotation matrix in the convention of analytic_jacobian (b in [-pi/2, pi/2]
    for zyx, [0, pi] for zyz)."""
    R = np.asarray(R, dtype=float)
    if euler == "zyx":
        return (math.atan2(R[1, 0], R[0, 0]), math.atan2(-R[2, 0], math.hypot(R[0, 0], R[1, 0])),
                math.atan2(R[2, 1], R[2, 2]))
    return (math.atan2(R[1, 2], R[0, 2]), math.atan2(math.hypot(R[0, 2], R[1, 2]), R[2, 2]),
            math.atan2(R[2, 1], -R[2, 0]))

