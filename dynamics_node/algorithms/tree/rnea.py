"""Recursive Newton-Euler inverse dynamics (Featherstone Ch. 5, Table 5.1, body coordinates).

    v_i = X_i v_λ(i) + S_i qd_i                                  (Eq. 5.14)
    a_i = X_i a_λ(i) + S_i qdd_i + c_J + v_i x S_i qd_i           (Eq. 5.15; c_J = 0 here)
    f_i = I_i a_i + v_i x* I_i v_i - f_i^x                        (Eq. 5.16)
    tau_i = S_i^T f_i ;  f_λ(i) += X_i^T f_i                      (Eqs. 5.17-5.18)

Gravity enters as the fictitious base acceleration a_0 = -a_g (§5.3). Options of the model add
the rotor inertia term armature * qdd (Example 9.5) and the joint law's friction tau_f(qd) (joint_law.py).
``gravity`` is the stripped version with qd = qdd = 0 (Eqs. 5.12-5.13) and no external force.
"""
from __future__ import annotations

import numpy as np

from ..._jit import carray, cfunc, njit, types

from ...joints import jcalc_sc, sincos_all
from ...packed import body_f, dof_count, dof_f, first_dof, joint_type, parent
from ...spatial import crf_t, load6, rbi_mul_t, store6, xm_t, xtf_add_t
from ...dispatch import Route, check_model, wrenches
from ...joints import joint_motion
from ...layout import (B_RBI, D_ARMATURE, D_S, FEXT_N, HF_GRAVITY, H_NB, H_NQT, H_NVU,
                      W_A, W_A_N, W_COS, W_E, W_E_N, W_F, W_F_N, W_R, W_R_N, W_SIN, W_V,
                      W_V_N)
from ...joint_law import friction_torque
from .mimic import gt_vec, q_to_tree, scratch_at, state_to_tree, v_to_tree
from .rnea_batch import rnea_lanes_kernel, work_size as lanes_work_size
from ..._kernel_io import INDEX_MAX, status
from ..._kernel_io import (FASTMATH, check_state, SIG1, SIG3, model_from_pointers, F1, I1, check_q, new_work, A_FEXT,
                      A_Q, A_QDD, BAD_LENGTH)


@njit(cache=True, inline="always")
def gravity_acceleration(mf):
    """a_0 = -a_g: gravity as a fictitious acceleration of the base (§5.3)."""
    g = HF_GRAVITY
    return (0.0, 0.0, 0.0, -mf[g], -mf[g + 1], -mf[g + 2])


@njit(cache=True, inline="always")
def inward_pass(mi, mf, w, tau, qd, qdd, joint_terms):
    """Table 5.1's inward pass (Eqs. 5.17-5.18) over the forces f_i of the work array:
    tau_i = S_i^T f_i ; f_λ(i) += ^iX_λ(i)^T f_i. With joint_terms, the model's rotor inertia
    (armature qdd, Example 9.5) and friction (the joint law of joint_law.py) are added to tau_i."""
    nb = mi[H_NB]
    E0, r0, f0 = W_E * nb, W_R * nb, W_F * nb
    for i in range(nb - 1, -1, -1):
        p = parent(mi, i)  # λ(i)
        vi = first_dof(mi, i)
        fo = f0 + W_F_N * i
        for dof in range(vi, vi + dof_count(mi, i)):
            dd = dof_f(nb, dof)
            so = dd + D_S
            t = (mf[so] * w[fo] + mf[so + 1] * w[fo + 1] + mf[so + 2] * w[fo + 2] + mf[so + 3] * w[fo + 3]
                 + mf[so + 4] * w[fo + 4] + mf[so + 5] * w[fo + 5])  # tau_i = S_i^T f_i (Eq. 5.17)
            if joint_terms:  # rotor inertia and the joint law (joint_law.py)
                t += mf[dd + D_ARMATURE] * qdd[dof] + friction_torque(mf, dd, qd[dof])
            tau[dof] = t
        if p >= 0:  # f_λ(i) += ^iX_λ(i)^T f_i (Eq. 5.18)
            xtf_add_t(w, E0 + W_E_N * i, r0 + W_R_N * i, load6(w, fo), w, f0 + W_F_N * p)


@njit(types.int64(I1, F1, F1, F1, F1, F1, F1, F1), cache=True, fastmath=FASTMATH)
def rnea_kernel(mi, mf, q, qd, qdd, fx, tau, w):
    """Table 5.1. Leaves ^iX_λ(i) (W_E, W_R), v_i (W_V), a_i (W_A) and f_i (W_F) in the work array
    (layout.WORK_PER_BODY)."""
    nb = mi[H_NB]
    st = check_state(q, qd, qdd, mi)
    if st != 0:
        return st
    hasfx = fx.shape[0] != 0
    if hasfx and fx.shape[0] != FEXT_N * nb:
        return status(BAD_LENGTH, A_FEXT, min(fx.shape[0], INDEX_MAX))
    E0, r0, v0, a0, f0 = W_E * nb, W_R * nb, W_V * nb, W_A * nb, W_F * nb
    sincos_all(mi, q, w, W_SIN * nb)  # sin q, cos q of every joint, in one vectorised loop
    a_0 = gravity_acceleration(mf)
    for i in range(nb):
        p = parent(mi, i)  # λ(i)
        jt = joint_type(mi, i)
        i_X_p = (E0 + W_E_N * i, r0 + W_R_N * i)
        jcalc_sc(mi, mf, i, q, w, i_X_p[0], i_X_p[1], w[W_SIN * nb + i], w[W_COS * nb + i])
        if p >= 0:
            xv = xm_t(w, i_X_p[0], i_X_p[1], load6(w, v0 + W_V_N * p))
            xa = xm_t(w, i_X_p[0], i_X_p[1], load6(w, a0 + W_A_N * p))
        else:
            xv = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
            xa = xm_t(w, i_X_p[0], i_X_p[1], a_0)
        v, a = joint_motion(mi, mf, i, jt, xv, xa, qd, qdd)  # Eqs. 5.14-5.15
        # Eq. 5.16: f_i = I_i a_i + v_i x* I_i v_i - f^x_i
        I_i = body_f(i) + B_RBI
        Ia = rbi_mul_t(mf, I_i, a)
        vIv = crf_t(v, rbi_mul_t(mf, I_i, v))
        fo = f0 + W_F_N * i
        store6(w, v0 + W_V_N * i, v)
        store6(w, a0 + W_A_N * i, a)
        store6(w, fo, (Ia[0] + vIv[0], Ia[1] + vIv[1], Ia[2] + vIv[2], Ia[3] + vIv[3], Ia[4] + vIv[4],
                       Ia[5] + vIv[5]))
        if hasfx:
            for k in range(6):
                w[fo + k] -= fx[FEXT_N * i + k]
    inward_pass(mi, mf, w, tau, qd, qdd, True)  # Eqs. 5.17-5.18
    return 0


@njit(types.int64(I1, F1, F1, F1, F1), cache=True, fastmath=FASTMATH)
def gravity_kernel(mi, mf, q, tau, w):
    """Table 5.1 with qd = qdd = 0: only a_i = X_i a_λ(i) and f_i = I_i a_i remain (Eqs. 5.12-5.13).
    Scalar arithmetic on flat offsets: this is the controllers' hot path."""
    nb = mi[H_NB]
    st = check_q(q, mi)
    if st != 0:
        return st
    E0, r0, a0, f0 = W_E * nb, W_R * nb, W_A * nb, W_F * nb
    sincos_all(mi, q, w, W_SIN * nb)
    a_0 = gravity_acceleration(mf)
    for i in range(nb):
        p = parent(mi, i)
        i_X_p = (E0 + W_E_N * i, r0 + W_R_N * i)
        jcalc_sc(mi, mf, i, q, w, i_X_p[0], i_X_p[1], w[W_SIN * nb + i], w[W_COS * nb + i])
        a = xm_t(w, i_X_p[0], i_X_p[1], load6(w, a0 + W_A_N * p) if p >= 0 else a_0)  # a_i = X_i a_λ(i)
        store6(w, a0 + W_A_N * i, a)
        store6(w, f0 + W_F_N * i, rbi_mul_t(mf, body_f(i) + B_RBI, a))  # f_i = I_i a_i
    inward_pass(mi, mf, w, tau, q, q, False)  # Eqs. 5.17-5.18 (no joint-rate terms at rest)
    return 0


# ---------------------------------------------------------------------------------------------
@njit(types.int64(I1, F1, F1, F1, F1, F1), cache=True)
def rnea_entry(mi, mf, q, qd, qdd, tau):
    """The Python entry of the RNEA: fewer arguments (each costs at the call) and no external force."""
    w = new_work(mi)
    return rnea_kernel(mi, mf, q, qd, qdd, w[0:0], tau, w)


@njit(types.int64(I1, F1, F1, F1), cache=True)
def gravity_entry(mi, mf, q, tau):
    w = new_work(mi)
    return gravity_kernel(mi, mf, q, tau, w)


# the C fronts' scratch for a model with mimic joints (dispatch.Route's extra: per body, per dof, per dof squared,
# constant): q_t (nqt <= nb + nvt), then qd_t, qdd_t and tau_t, or tau_t alone (gravity)
ID_MIMIC = (1, 4, 0, 0)
G_MIMIC = (1, 2, 0, 0)


@cfunc(SIG3, cache=True)
def rnea_c(mip, mfp, qp, nq, qdp, nqd, qddp, nqdd, outp, wp, nw):
    """tau into out; a model with mimic joints in user coordinates: tau = G^T ID(G q + offset, G qd, G qdd)
    (mimic.py), its scratch ID_MIMIC at the end of w."""
    mi, mf, nvt = model_from_pointers(mip, mfp)
    w = carray(wp, (nw,))
    q, qd, qdd = carray(qp, (nq,)), carray(qdp, (nqd,)), carray(qddp, (nqdd,))
    if mi[H_NVU] == nvt:
        return rnea_kernel(mi, mf, q, qd, qdd, w[0:0], carray(outp, (nvt,)), w)
    nqt = mi[H_NQT]
    b = scratch_at(mi, nw, nqt + nvt + nvt + nvt)
    if b < 0:
        return status(BAD_LENGTH, 0, 0)
    qt = w[b:b + nqt]
    o = b + nqt   # then qd_t, qdd_t, tau_t, nvt each
    qdt = w[o:o + nvt]
    o += nvt
    qddt = w[o:o + nvt]
    o += nvt
    taut = w[o:o + nvt]
    st = state_to_tree(mi, mf, q, qd, qt, qdt)
    if st == 0:
        st = v_to_tree(mi, mf, qdd, qddt, A_QDD)
    if st == 0:
        st = rnea_kernel(mi, mf, qt, qdt, qddt, w[0:0], taut, w[0:b])
    if st == 0:
        gt_vec(mi, mf, taut, carray(outp, (mi[H_NVU],)))
    return st


@cfunc(SIG1, cache=True)
def gravity_c(mip, mfp, qp, nq, outp, wp, nw):
    """g(q) into out; a model with mimic joints in user coordinates (as rnea_c), its scratch G_MIMIC."""
    mi, mf, nvt = model_from_pointers(mip, mfp)
    w = carray(wp, (nw,))
    q = carray(qp, (nq,))
    if mi[H_NVU] == nvt:
        return gravity_kernel(mi, mf, q, carray(outp, (nvt,)), w)
    nqt = mi[H_NQT]
    b = scratch_at(mi, nw, nqt + nvt)
    if b < 0:
        return status(BAD_LENGTH, 0, 0)
    qt, taut = w[b:b + nqt], w[b + nqt:b + nqt + nvt]
    st = q_to_tree(mi, mf, q, qt, A_Q)
    if st == 0:
        st = gravity_kernel(mi, mf, qt, taut, w[0:b])
    if st == 0:
        gt_vec(mi, mf, taut, carray(outp, (mi[H_NVU],)))
    return st


def _rnea(model, data, w, q, qd, qdd, f_ext):
    tau = np.empty(model.nvt)
    return rnea_kernel(model._kmi, model._kmf, q, qd, qdd, wrenches(model, f_ext), tau, w), tau


def _gravity(model, data, w, q):
    tau = np.empty(model.nvt)
    return gravity_kernel(model._kmi, model._kmf, q, tau, w), tau


_ID = Route("inverse dynamics", (("q", "q"), ("qd", "v"), ("qdd", "v")), _rnea, extras=("f_ext",), fast=(None,),
            shim=rnea_c, post="v", extra=ID_MIMIC, mimic=True).front
_GRAVITY = Route("gravity", (("q", "q"),), _gravity, shim=gravity_c, post="v", extra=G_MIMIC, mimic=True).front


def inverse_dynamics(model, q, qd, qdd, f_ext=None, data=None):
    """tau = ID(model, q, qd, qdd, f_ext) (Featherstone Eq. 3.4, Table 5.1).

    f_ext: {link: (fx, fy, fz, tx, ty, tz)} acting on the link, link frame, about its origin.
    Returns tau (nv,), in the order of model.joint_names (after the 6 root entries of a floating base).
    """
    return _ID(model, data, q, qd, qdd, f_ext)


def gravity(model, q, data=None):
    """Gravity compensation torques: ID(q, 0, 0) (Featherstone §5.3)."""
    return _GRAVITY(model, data, q)


def bias_forces(model, q, qd, data=None):
    """C(q, qd) = ID(q, qd, 0) (Featherstone Eq. 6.2): Coriolis, centrifugal, gravity (and friction
    when the model has it)."""
    check_model(model)
    return _ID(model, data, q, qd, np.zeros(model.nv), None)


def _rows(model, *arrays):
    if any(A.shape[0] != arrays[0].shape[0] for A in arrays):
        from ...errors import InputError

        names = ("Q", "QD", "QDD")[:len(arrays)]
        raise InputError(f"{', '.join(names)} must have the same number of rows, got "
                         f"{', '.join(str(A.shape[0]) for A in arrays)}")


def _id_batch(model, data, w, Q, QD, QDD):
    _rows(model, Q, QD, QDD)
    TAU = np.empty((Q.shape[0], model.nvt))
    st = rnea_lanes_kernel(model._kmi, model._kmf, Q, QD, QDD, TAU, np.empty(lanes_work_size(model)))
    if st:
        _raise_batch(model, st, Q, QD, QDD)
    return 0, TAU


def _gravity_batch(model, data, w, Q):
    TAU = np.empty((Q.shape[0], model.nvt))
    Z = np.zeros((Q.shape[0], model.nvt))  # qd = qdd = 0: ID(q, 0, 0), every state side by side
    st = rnea_lanes_kernel(model._kmi, model._kmf, Q, Z, Z, TAU, np.empty(lanes_work_size(model)))
    if st:
        _raise_batch(model, st, Q)
    return 0, TAU


_ID_BATCH = Route("batch inverse dynamics", (("Q", "Q"), ("QD", "V"), ("QDD", "V")), _id_batch, post="J").front
_GRAVITY_BATCH = Route("batch gravity", (("Q", "Q"),), _gravity_batch, post="J").front


def inverse_dynamics_batch(model, Q, QD, QDD):
    """Inverse dynamics of N states at once (rows of N x nq / N x nv arrays), computed side by side
    in groups of rnea_batch.LANES states (algorithms/tree/rnea_batch.py)."""
    return _ID_BATCH(model, None, Q, QD, QDD)


def gravity_batch(model, Q):
    """Gravity torques of N configurations (rows of an N x nq array): the batch inverse dynamics
    with qd = qdd = 0, which side by side costs less than gravity_kernel one state at a time."""
    return _GRAVITY_BATCH(model, None, Q)


def _raise_batch(model, st, *arrays):
    from ...errors import InputError

    rows = [int(np.nonzero(~np.isfinite(A).all(axis=1))[0][0]) for A in arrays if not np.isfinite(A).all()]
    from ..._kernel_io import raise_status

    try:
        raise_status(model, st, tree=model.has_mimic)
    except InputError as e:
        where = f" (row {rows[0]})" if rows else ""
        raise InputError(f"{e}{where}") from None
