"""Recursive Newton-Euler inverse dynamics (Featherstone Ch. 5, Table 5.1, body coordinates).

    v_i = X_i v_λ(i) + S_i qd_i                                  (Eq. 5.14)
    a_i = X_i a_λ(i) + S_i qdd_i + c_J + v_i x S_i qd_i           (Eq. 5.15; c_J = 0 here)
    f_i = I_i a_i + v_i x* I_i v_i - f_i^x                        (Eq. 5.16)
    tau_i = S_i^T f_i ;  f_λ(i) += X_i^T f_i                      (Eqs. 5.17-5.18)

Gravity enters as the fictitious base acceleration a_0 = -a_g (§5.3). Options of the model add
the rotor inertia term armature * qdd (Example 9.5) and friction damping * qd + coulomb * sign(qd).
``gravity`` is the stripped version with qd = qdd = 0 (Eqs. 5.12-5.13) and no external force.
"""
from __future__ import annotations

import numpy as np

from .._jit import carray, cfunc, njit, types

from ..joints import PRISMATIC, REVOLUTE, S_mul, jcalc_sc, sincos_all
from ..layout import BODY_STRIDE, DOF_STRIDE, HEADER_F, HEADER_I
from ..spatial import crf_t, crm_t, load6, rbi_mul_t, store6, xm_t, xtf_add_t
from ..dispatch import Route, check_model, wrenches
from .rnea_batch import rnea_lanes_kernel, work_size as lanes_work_size
from ._common import (FASTMATH, check_state, SIG1, SIG3, model_from_pointers, F1, I1, check_q, new_work, A_FEXT,
                      BAD_LENGTH)


@njit(cache=True, inline="always")
def inward_pass(mi, mf, w, tau, qd, qdd, joint_terms):
    """Table 5.1's inward pass (Eqs. 5.17-5.18) over the forces f_i at w[24nb + 6i]:
    tau_i = S_i^T f_i ; f_λ(i) += X_i^T f_i. With joint_terms, the model's rotor inertia
    (armature qdd, Example 9.5) and friction (damping qd + Coulomb sign(qd)) are added to tau_i."""
    nb = mi[0]
    do0 = HEADER_F + BODY_STRIDE * nb
    r0 = 9 * nb
    f0 = 24 * nb
    for i in range(nb - 1, -1, -1):
        ii = HEADER_I + 5 * i
        p = mi[ii]
        vi = mi[ii + 3]
        fo = f0 + 6 * i
        for dof in range(vi, vi + mi[ii + 4]):
            so = do0 + DOF_STRIDE * dof
            t = (mf[so] * w[fo] + mf[so + 1] * w[fo + 1] + mf[so + 2] * w[fo + 2] + mf[so + 3] * w[fo + 3]
                 + mf[so + 4] * w[fo + 4] + mf[so + 5] * w[fo + 5])
            if joint_terms:
                t += mf[so + 6] * qdd[dof] + mf[so + 7] * qd[dof]
                cf = mf[so + 8]
                if cf != 0.0:
                    if qd[dof] > 0.0:
                        t += cf
                    elif qd[dof] < 0.0:
                        t -= cf
            tau[dof] = t
        if p >= 0:
            xtf_add_t(w, 9 * i, r0 + 3 * i, load6(w, fo), w, f0 + 6 * p)


@njit(types.int64(I1, F1, F1, F1, F1, F1, F1, F1), cache=True, fastmath=FASTMATH)
def rnea_kernel(mi, mf, q, qd, qdd, fx, tau, w):
    """Table 5.1. Leaves X_i (E at w[9i], r at w[9nb+3i]), v_i (w[12nb+6i]), a_i (w[18nb+6i]) and
    f_i (w[24nb+6i]) in the work array, as algorithms/_common.work_views lays them out."""
    nb = mi[0]
    st = check_state(q, qd, qdd, mi)
    if st != 0:
        return st
    hasfx = fx.shape[0] != 0
    if hasfx and fx.shape[0] != 6 * nb:
        return BAD_LENGTH * 100000000 + A_FEXT * 100000 + min(fx.shape[0], 99999)
    r0 = 9 * nb
    v0 = 12 * nb
    a0 = 18 * nb
    f0 = 24 * nb
    do0 = HEADER_F + BODY_STRIDE * nb
    # sin q, cos q of every body's joint in one vectorised loop, in the slot c of work_views (unused here)
    sc0 = 30 * nb
    sincos_all(mi, q, w, sc0)
    ag = (0.0, 0.0, 0.0, -mf[0], -mf[1], -mf[2])  # a_0 = -a_g (§5.3)
    for i in range(nb):
        ii = HEADER_I + 5 * i
        p = mi[ii]
        jt = mi[ii + 1]
        bo = HEADER_F + BODY_STRIDE * i
        eo = 9 * i
        ro = r0 + 3 * i
        jcalc_sc(mi, mf, i, q, w, eo, ro, w[sc0 + i], w[sc0 + nb + i])
        if p >= 0:
            xv = xm_t(w, eo, ro, load6(w, v0 + 6 * p))
            xa = xm_t(w, eo, ro, load6(w, a0 + 6 * p))
        else:
            xv = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
            xa = xm_t(w, eo, ro, ag)
        # Eq. 5.14: v_i = X_i v_λ(i) + v_J, v_J = S qd (c_J = 0 for every joint kernel)
        # Eq. 5.15: a_i = X_i a_λ(i) + S qdd + v_i x v_J
        if jt == REVOLUTE or jt == PRISMATIC:
            # one degree of freedom, S = [u; 0] (revolute) or [0; u] (prismatic), Table 4.1: v_J = u qd
            # sits in one half and v_i x v_J = qd (omega_i x u; v_i,O x u) or qd (0; omega_i x u), Eq. 2.31
            dof = mi[ii + 3]
            so = do0 + DOF_STRIDE * dof + (0 if jt == REVOLUTE else 3)
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
        else:
            vJ = S_mul(mi, mf, i, qd)
            sq = S_mul(mi, mf, i, qdd)
            v = (xv[0] + vJ[0], xv[1] + vJ[1], xv[2] + vJ[2], xv[3] + vJ[3], xv[4] + vJ[4], xv[5] + vJ[5])
            cv = crm_t(v, vJ)
            a = (xa[0] + sq[0] + cv[0], xa[1] + sq[1] + cv[1], xa[2] + sq[2] + cv[2], xa[3] + sq[3] + cv[3],
                 xa[4] + sq[4] + cv[4], xa[5] + sq[5] + cv[5])
        # Eq. 5.16: f_i = I_i a_i + v_i x* I_i v_i - f^x_i
        Ia = rbi_mul_t(mf, bo, a)
        cf = crf_t(v, rbi_mul_t(mf, bo, v))
        fo = f0 + 6 * i
        store6(w, v0 + 6 * i, v)
        store6(w, a0 + 6 * i, a)
        store6(w, fo, (Ia[0] + cf[0], Ia[1] + cf[1], Ia[2] + cf[2], Ia[3] + cf[3], Ia[4] + cf[4], Ia[5] + cf[5]))
        if hasfx:
            for k in range(6):
                w[fo + k] -= fx[6 * i + k]
    # Eqs. 5.17-5.18, inwards
    inward_pass(mi, mf, w, tau, qd, qdd, True)
    return 0


@njit(types.int64(I1, F1, F1, F1, F1), cache=True, fastmath=FASTMATH)
def gravity_kernel(mi, mf, q, tau, w):
    """Table 5.1 with qd = qdd = 0: only a_i = X_i a_λ(i) and f_i = I_i a_i remain (Eqs. 5.12-5.13).
    Scalar arithmetic on flat offsets: this is the controllers' hot path."""
    nb = mi[0]
    st = check_q(q, mi)
    if st != 0:
        return st
    r0 = 9 * nb
    a0 = 18 * nb
    f0 = 24 * nb
    sc0 = 30 * nb  # sin, cos of the joint angles in the unused slot c of work_views
    sincos_all(mi, q, w, sc0)
    ag = (0.0, 0.0, 0.0, -mf[0], -mf[1], -mf[2])
    for i in range(nb):
        ii = HEADER_I + 5 * i
        p = mi[ii]
        bo = HEADER_F + BODY_STRIDE * i
        eo = 9 * i
        ro = r0 + 3 * i
        ao = a0 + 6 * i
        jcalc_sc(mi, mf, i, q, w, eo, ro, w[sc0 + i], w[sc0 + nb + i])
        a = xm_t(w, eo, ro, load6(w, a0 + 6 * p) if p >= 0 else ag)  # a_i = X_i a_λ(i), a_0 = -a_g
        store6(w, ao, a)
        store6(w, f0 + 6 * i, rbi_mul_t(mf, bo, a))  # f_i = I_i a_i
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


@cfunc(SIG3, cache=True)
def rnea_c(mip, mfp, qp, nq, qdp, nqd, qddp, nqdd, outp, wp, nw):
    mi, mf, nvt = model_from_pointers(mip, mfp)
    w = carray(wp, (nw,))
    return rnea_kernel(mi, mf, carray(qp, (nq,)), carray(qdp, (nqd,)), carray(qddp, (nqdd,)), w[0:0],
                       carray(outp, (nvt,)), w)


@cfunc(SIG1, cache=True)
def gravity_c(mip, mfp, qp, nq, outp, wp, nw):
    mi, mf, nvt = model_from_pointers(mip, mfp)
    return gravity_kernel(mi, mf, carray(qp, (nq,)), carray(outp, (nvt,)), carray(wp, (nw,)))


def _rnea(model, data, w, q, qd, qdd, f_ext):
    tau = np.empty(model.nvt)
    return rnea_kernel(model._kmi, model._kmf, q, qd, qdd, wrenches(model, f_ext), tau, w), tau


def _gravity(model, data, w, q):
    tau = np.empty(model.nvt)
    return gravity_kernel(model._kmi, model._kmf, q, tau, w), tau


_ID = Route("inverse dynamics", (("q", "q"), ("qd", "v"), ("qdd", "v")), _rnea, extras=("f_ext",), fast=(None,),
            shim=rnea_c, post="v").front
_GRAVITY = Route("gravity", (("q", "q"),), _gravity, shim=gravity_c, post="v").front


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
        from ..errors import InputError

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
    in groups of rnea_batch.LANES states (algorithms/rnea_batch.py)."""
    return _ID_BATCH(model, None, Q, QD, QDD)


def gravity_batch(model, Q):
    """Gravity torques of N configurations (rows of an N x nq array): the batch inverse dynamics
    with qd = qdd = 0, which side by side costs less than gravity_kernel one state at a time."""
    return _GRAVITY_BATCH(model, None, Q)


def _raise_batch(model, st, *arrays):
    from ..errors import InputError

    rows = [int(np.nonzero(~np.isfinite(A).all(axis=1))[0][0]) for A in arrays if not np.isfinite(A).all()]
    from ._common import raise_status

    try:
        raise_status(model, st, tree=model.has_mimic)
    except InputError as e:
        where = f" (row {rows[0]})" if rows else ""
        raise InputError(f"{e}{where}") from None
