"""Mimic joints inside the kernels: the map between user and tree coordinates (Featherstone §9.6, Eq. 3.19:
q_t = G q + offset, qd_t = G qd, and a tree quantity D seen in user coordinates as G^T D G), read from the
packed model's mimic section (layout.MODEL_MIMIC_*), and the dense Cholesky factor of the reduced mass matrix
G^T H G (which has no branch-induced sparsity left: the L^T D L of ltdl.py does not apply).

G has one entry per tree coordinate (row k: MUL at column SRC), so each product below is one pass over the
tree coordinates, never a matrix product with G. The C fronts of the derivatives call these for a model
with mimic joints (rnea_derivatives_c, gravity_derivatives_c, aba_derivatives_c); the Python side keeps its
own numpy route (algorithms/derivatives/dynamics_derivatives.py), which the tests hold them against.
"""
from __future__ import annotations

from ..._jit import njit
from ...joints import _u
from ...packed import dof_f
from ...layout import (H_NB, H_NQT, H_NVT, MH_NQ, MH_NV, MIMIC_HEAD, MIMIC_Q, MIMIC_V,
                      MQ_MUL, MQ_OFF, MQ_SRC, MV_MUL, MV_SRC, WORK_BODY, WORK_DOF, WORK_EXTRA)
from ..._kernel_io import INDEX_MAX, status
from ..._kernel_io import A_Q, A_QD, BAD_LENGTH


@njit(cache=True, inline="always")
def mimic_at(mi):
    """The offset of the mimic section in mf."""
    return dof_f(mi[H_NB], mi[H_NVT])


@njit(cache=True, inline="always")
def scratch_at(mi, nw, need):
    """Where `need` floats of a C front's scratch start at the end of its work array of nw (the model's work
    array first, layout.WORK_*), or -1 if it is too short."""
    b = nw - need
    return b if b >= WORK_BODY * mi[H_NB] + WORK_DOF * mi[H_NVT] + WORK_EXTRA else -1


@njit(cache=True, inline="always")
def user_sizes(mi, mf):
    """(nq, nv) of the user coordinates."""
    o = mimic_at(mi)
    return int(mf[o + MH_NQ]), int(mf[o + MH_NV])


@njit(cache=True, inline="always")
def q_to_tree(mi, mf, q, qt, arg):
    """qt = G q + offset (the tree's position coordinates); a status if q is not nq long."""
    nq, _ = user_sizes(mi, mf)
    if q.shape[0] != nq:
        return status(BAD_LENGTH, arg, min(q.shape[0], INDEX_MAX))
    o = mimic_at(mi) + MIMIC_HEAD
    for k in range(mi[H_NQT]):
        r = o + MIMIC_Q * k
        qt[k] = mf[r + MQ_MUL] * q[int(mf[r + MQ_SRC])] + mf[r + MQ_OFF]
    return 0


@njit(cache=True, inline="always")
def v_to_tree(mi, mf, v, vt, arg):
    """vt = G v (velocities, accelerations); a status if v is not nv long."""
    _, nv = user_sizes(mi, mf)
    if v.shape[0] != nv:
        return status(BAD_LENGTH, arg, min(v.shape[0], INDEX_MAX))
    o = mimic_at(mi) + MIMIC_HEAD + MIMIC_Q * mi[H_NQT]
    for k in range(mi[H_NVT]):
        r = o + MIMIC_V * k
        vt[k] = mf[r + MV_MUL] * v[int(mf[r + MV_SRC])]
    return 0


@njit(cache=True, inline="always")
def state_to_tree(mi, mf, q, qd, qt, qdt):
    """q_to_tree and v_to_tree of a state (q, qd): the first status, or 0."""
    st = q_to_tree(mi, mf, q, qt, A_Q)
    return st if st != 0 else v_to_tree(mi, mf, qd, qdt, A_QD)


@njit(cache=True, inline="always")
def gt_vec(mi, mf, xt, x):
    """x = G^T xt (a tree force to user coordinates)."""
    _, nv = user_sizes(mi, mf)
    o = mimic_at(mi) + MIMIC_HEAD + MIMIC_Q * mi[H_NQT]
    for a in range(nv):
        x[a] = 0.0
    for k in range(mi[H_NVT]):
        r = o + MIMIC_V * k
        x[int(mf[r + MV_SRC])] += mf[r + MV_MUL] * xt[k]


@njit(cache=True, inline="always")
def _run_end(mf, o, k, nvt):
    """The end of the run of tree dofs from k: those after k that follow the next user dof each, with MUL 1
    (k alone when its MUL is not 1). o: the MV_* table."""
    e = k + 1
    if mf[o + MIMIC_V * k + MV_MUL] == 1.0:
        s = mf[o + MIMIC_V * k + MV_SRC]
        while e < nvt and mf[o + MIMIC_V * e + MV_MUL] == 1.0 and mf[o + MIMIC_V * e + MV_SRC] == s + (e - k):
            e += 1
    return e


@njit(cache=True, inline="always")
def gtdg(mi, mf, Dt, D):
    """D = G^T Dt G (nv x nv from nvt x nvt): D[SRC_k, SRC_l] += MUL_k MUL_l Dt[k, l], a block per pair of runs
    (_run_end: a tree without mimic joints is one run, Panda with its finger two), each block's rows copied as
    contiguous memory with unsigned indices (joints._u)."""
    _, nv = user_sizes(mi, mf)
    nvt = mi[H_NVT]
    o = mimic_at(mi) + MIMIC_HEAD + MIMIC_Q * mi[H_NQT]
    for a in range(nv):
        for b in range(nv):
            D[_u(a), _u(b)] = 0.0
    ka = 0
    while ka < nvt:
        ea = _run_end(mf, o, ka, nvt)
        sa = int(mf[o + MIMIC_V * ka + MV_SRC])
        ma = mf[o + MIMIC_V * ka + MV_MUL]
        kb = 0
        while kb < nvt:
            eb = _run_end(mf, o, kb, nvt)
            sb = int(mf[o + MIMIC_V * kb + MV_SRC])
            mab = ma * mf[o + MIMIC_V * kb + MV_MUL]
            for i in range(ea - ka):
                r, t = _u(sa + i), _u(ka + i)
                for j in range(eb - kb):
                    D[r, _u(sb + j)] += mab * Dt[t, _u(kb + j)]
            kb = eb
        ka = ea


@njit(cache=True, inline="always")
def g_vec(mi, mf, x, xt):
    """xt = G x."""
    o = mimic_at(mi) + MIMIC_HEAD + MIMIC_Q * mi[H_NQT]
    for k in range(mi[H_NVT]):
        r = o + MIMIC_V * k
        xt[k] = mf[r + MV_MUL] * x[int(mf[r + MV_SRC])]
