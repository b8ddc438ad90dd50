"""The inertial-parameter regressor: tau = Y(q, qd, qdd) pi (Atkeson, An & Hollerbach 1986).

A rigid-body inertia rbi(m, h, Ibar) (Featherstone Eq. 2.63) is linear in the ten numbers

    pi_i = [m, h_x, h_y, h_z, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]      (h = m c, Ibar about the body origin)

(Pinocchio's order, ``Inertia.toDynamicParameters``). The body force of Table 5.1,
f_i = I_i a_i + v_i x* I_i v_i (Eq. 5.16), is therefore f_i = A_i pi_i, where column k of the
6 x 10 matrix A_i is that same expression evaluated with the unit inertia e_k (every parameter 0 but
the k-th). The inward pass (Eqs. 5.17-5.18) is linear in the forces too: body j's columns of Y are
A_j carried to the root, tau_k = S_k^T (^jX_k)^T A_j for every k on the path from j to the root.

So ``regressor_kernel`` is the RNEA: its outward pass (rnea_kernel, which leaves ^iX_λ(i), v_i and
a_i with gravity as a_0 = -a_g in the work array), then per body the ten unit-inertia forces and
their inward pass. Y @ pi equals inverse dynamics (gravity included) for the model's rigid bodies;
the model options armature and friction are not inertial parameters and are not in Y.
"""
from __future__ import annotations

import functools

import numpy as np

from ..._jit import njit, types
from ...dispatch import Route
from ...errors import InputError
from ...packed import dof_count, dof_f, first_dof, parent
from ...layout import (D_S, H_NB, H_NVT, RBI_N, W_A, W_A_N, W_E, W_E_N, W_R, W_R_N, W_V, W_V_N)
from ...spatial import crf_t, load6, rbi_mul_t, xtf_t
from ..._kernel_io import F1, F2, I1
from ..tree.rnea import rnea_kernel

N_PARAMS = 10
PARAM_NAMES = ("m", "m*cx", "m*cy", "m*cz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")


def _unit_inertias() -> np.ndarray:
    """Row k: the 13 numbers rbi(m, h, Ibar) (layout.B_RBI order: m, h, Ibar row-major) of the unit
    parameter vector e_k. Off-diagonal moments fill both symmetric places."""
    U = np.zeros((N_PARAMS, RBI_N))
    U[0, 0] = 1.0
    U[1, 1] = U[2, 2] = U[3, 3] = 1.0
    ibar = {4: ((0, 0),), 5: ((0, 1), (1, 0)), 6: ((1, 1),), 7: ((0, 2), (2, 0)), 8: ((1, 2), (2, 1)),
            9: ((2, 2),)}
    for k, places in ibar.items():
        for r, c in places:
            U[k, 4 + 3 * r + c] = 1.0
    return U.ravel()


UNIT = _unit_inertias()  # a global array: a compile-time constant of the kernel


@njit(types.int64(I1, F1, F1, F1, F1, types.int64, F2, F2, F1), cache=True)
def regressor_kernel(mi, mf, q, qd, qdd, body, Y, A, w):
    """Y (nvt x 10 nb, or nvt x 10 with body >= 0: that body's columns only) of tau = Y pi. A is a
    10 x 6 scratch (the unit-inertia forces, one row per parameter). Y must hold zeros on entry.
    Status as rnea_kernel."""
    nb = mi[H_NB]
    st = rnea_kernel(mi, mf, q, qd, qdd, w[0:0], np.empty(mi[H_NVT]), w)  # outward pass: X_i, v_i, a_i
    if st != 0:
        return st
    E0, r0, v0, a0 = W_E * nb, W_R * nb, W_V * nb, W_A * nb
    first, last = (0, nb) if body < 0 else (body, body + 1)
    for j in range(first, last):
        v = load6(w, v0 + W_V_N * j)
        a = load6(w, a0 + W_A_N * j)
        for k in range(N_PARAMS):  # column k of A_j: Eq. 5.16 with the unit inertia e_k
            Ia = rbi_mul_t(UNIT, RBI_N * k, a)
            vIv = crf_t(v, rbi_mul_t(UNIT, RBI_N * k, v))
            for e in range(6):
                A[k, e] = Ia[e] + vIv[e]
        col = N_PARAMS * j if body < 0 else 0
        i = j
        while i >= 0:  # tau_i = S_i^T f (Eq. 5.17), f carried to the parent (Eq. 5.18)
            vi = first_dof(mi, i)
            for dof in range(vi, vi + dof_count(mi, i)):
                so = dof_f(nb, dof) + D_S
                for k in range(N_PARAMS):
                    Y[dof, col + k] = (mf[so] * A[k, 0] + mf[so + 1] * A[k, 1] + mf[so + 2] * A[k, 2]
                                       + mf[so + 3] * A[k, 3] + mf[so + 4] * A[k, 4] + mf[so + 5] * A[k, 5])
            p = parent(mi, i)
            if p >= 0:
                eo, ro = E0 + W_E_N * i, r0 + W_R_N * i
                for k in range(N_PARAMS):
                    f = xtf_t(w, eo, ro, (A[k, 0], A[k, 1], A[k, 2], A[k, 3], A[k, 4], A[k, 5]))
                    for e in range(6):
                        A[k, e] = f[e]
            i = p
    return 0


# ---------------------------------------------------------------------------------------------
# Python side: the parameters of a model and of a link, and the routes


def inertial_parameters(model) -> np.ndarray:
    """pi (10 nb): per body, in model order (after fixed-joint merging, payloads included), the ten
    numbers [m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] in the body frame, the rotational
    inertia about the body origin (Eq. 2.63; Pinocchio's Inertia.toDynamicParameters order), such
    that regressor(model, q, qd, qdd) @ pi == inverse_dynamics(model, q, qd, qdd) for a model without
    armature or friction."""
    from ...dispatch import check_model

    check_model(model)
    out = np.empty(N_PARAMS * model.nb)
    for i in range(model.nb):
        m, h, Ib = model.body_inertia(i)
        out[N_PARAMS * i:N_PARAMS * (i + 1)] = [m, *h, Ib[0, 0], Ib[0, 1], Ib[1, 1], Ib[0, 2], Ib[1, 2], Ib[2, 2]]
    return out


def _skew(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _sym(pi):
    return np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])


def frame_to_body(R, p) -> np.ndarray:
    """T of a frame at (R, p), cached: a link's map is asked for at every sample of an identification."""
    R, p = np.asarray(R, dtype=float).reshape(9), np.asarray(p, dtype=float).reshape(3)
    return _frame_to_body(tuple(R.tolist()), tuple(p.tolist()))


@functools.lru_cache(maxsize=256)
def _frame_to_body(R, p) -> np.ndarray:
    """T (10 x 10) with pi_body = T pi_frame for the parameters of a rigid body given in a frame at
    pose (R, p) in the body frame. Eq. 2.63 with c_b = R c + p and I_C unchanged:
    h_b = R h + m p and Ibar_b = R Ibar R^T - ([Rh]x [p]x + [p]x [Rh]x) - m [p]x [p]x, linear in pi."""
    R, p = np.array(R).reshape(3, 3), np.array(p)
    P = _skew(p)
    T = np.empty((N_PARAMS, N_PARAMS))
    for k in range(N_PARAMS):
        e = np.zeros(N_PARAMS)
        e[k] = 1.0
        m, h = e[0], R @ e[1:4]
        H = _skew(h)
        Ib = R @ _sym(e) @ R.T - (H @ P + P @ H) - m * P @ P
        T[:, k] = [m, *(h + m * p), Ib[0, 0], Ib[0, 1], Ib[1, 1], Ib[0, 2], Ib[1, 2], Ib[2, 2]]
    T.setflags(write=False)
    return T


def _regressor(model, data, w, q, qd, qdd):
    Y = np.zeros((model.nvt, N_PARAMS * model.nb))
    return regressor_kernel(model._kmi, model._kmf, q, qd, qdd, -1, Y, np.empty((N_PARAMS, 6)), w), Y


def link_parameters_map(model, link):
    """(body, T): the body a link is welded to (-1: the fixed base) and T with pi_body = T pi_link."""
    if not isinstance(link, str):
        raise InputError(f"link must be a link name (str), got {type(link).__name__}")
    k = model.link_index(link)
    R = model.link_R[9 * k:9 * k + 9].reshape(3, 3)
    p = model.link_p[3 * k:3 * k + 3]
    return int(model.link_body[k]), frame_to_body(R, p)


def _link_regressor(model, data, w, q, qd, qdd, link):
    body, T = link_parameters_map(model, link)
    Y = np.zeros((model.nvt, N_PARAMS))
    if body < 0:  # welded to the fixed base: a payload there moves no joint (the state is still checked)
        from ..._kernel_io import check_state

        return check_state(q, qd, qdd, model._kmi), Y
    st = regressor_kernel(model._kmi, model._kmf, q, qd, qdd, body, Y, np.empty((N_PARAMS, 6)), w)
    return st, Y @ T


_REGRESSOR = Route("regressor", (("q", "q"), ("qd", "v"), ("qdd", "v")), _regressor, post="v").front
_LINK_REGRESSOR = Route("link regressor", (("q", "q"), ("qd", "v"), ("qdd", "v")), _link_regressor,
                        extras=("link",), post="v").front


def regressor(model, q, qd, qdd, data=None):
    """Y (nv x 10 nb) with Y @ inertial_parameters(model) == inverse_dynamics(model, q, qd, qdd)
    (gravity included; the model's armature and friction, which are not inertial parameters, are
    not in Y). Columns 10 i .. 10 i + 9 belong to body i in the order of inertial_parameters."""
    return _REGRESSOR(model, data, q, qd, qdd)


def link_regressor(model, q, qd, qdd, link, data=None):
    """Y_L (nv x 10): the joint torques of a payload rigidly attached to ``link`` are Y_L @ pi_L, with
    pi_L = [m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] in the LINK frame (inertia about the
    link origin, link axes). Zero for a link welded to the fixed base."""
    return _LINK_REGRESSOR(model, data, q, qd, qdd, link)
