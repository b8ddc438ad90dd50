"""Composite-rigid-body algorithm for the joint-space inertia matrix H (Featherstone Ch. 6,
Table 6.2, body coordinates).

    I_i^c = I_i + Σ_{j ∈ μ(i)} ^iX_j^* I_j^c ^jX_i          (Eq. 6.13; rbi arithmetic of Table A.3)
    F = I_i^c S_i ;  H_ii = S_i^T F
    j = i; while λ(j) ≠ 0: F = ^λ(j)X_j^* F; j = λ(j); H_ij = H_ji^T = F^T S_j      (Eq. 6.14)

The rotor inertia of the model (Example 9.5, Eq. 9.28) is added to the diagonal. With mimic joints,
H of the independent coordinates is G^T H G (Eq. 3.19, §9.6).
"""
from __future__ import annotations

import numpy as np
from .._jit import carray, cfunc, njit, types

from ..joints import jcalc_sc, sincos_all
from ..layout import BODY_STRIDE, DOF_STRIDE, HEADER_F, HEADER_I
from ..spatial import rbi_mul_t, rbi_to_parent_add, xtf_t
from .._fast import invoke
from ..dispatch import Route, check_data, raise_status, vec
from ._common import (FASTMATH, SIG1, model_from_pointers, F1, I1, check_q, new_work)


@njit(types.int64(I1, F1, F1, F1, F1), cache=True, fastmath=FASTMATH)
def crba_kernel(mi, mf, q, H, w):
    """Table 6.2 on flat offsets. The composite inertia I_i^c is kept as rbi [m, h, Ibar] at
    w[36nb + 36i] (the articulated-inertia slot of work_views, unused here)."""
    nb = mi[0]
    nvt = mi[1]
    st = check_q(q, mi)
    if st != 0:
        return st
    do0 = HEADER_F + BODY_STRIDE * nb
    r0 = 9 * nb
    c0 = 36 * nb
    sc0 = 30 * nb  # sin, cos of the joint angles (joints.sincos_all) in the unused slot c
    sincos_all(mi, q, w, sc0)
    for i in range(nb):
        ii = HEADER_I + 5 * i
        bo = HEADER_F + BODY_STRIDE * i
        jcalc_sc(mi, mf, i, q, w, 9 * i, r0 + 3 * i, w[sc0 + i], w[sc0 + nb + i])
        co = c0 + 36 * i
        for k in range(13):
            w[co + k] = mf[bo + 12 + k]  # I_i^c = I_i (Eq. 6.13, before the children are added)
    for i in range(nb - 1, -1, -1):
        p = mi[HEADER_I + 5 * i]
        if p >= 0:
            rbi_to_parent_add(w, 9 * i, r0 + 3 * i, c0 + 36 * i, c0 + 36 * p)
    for k in range(nvt * nvt):
        H[k] = 0.0
    for i in range(nb):
        ii = HEADER_I + 5 * i
        vi = mi[ii + 3]
        nv = mi[ii + 4]
        for dof in range(vi, vi + nv):
            so = do0 + DOF_STRIDE * dof
            # F = I_i^c S_i ; H_ii = S_i^T F  (Eq. 6.14)
            F = rbi_mul_t(w, c0 + 36 * i - 12, (mf[so], mf[so + 1], mf[so + 2], mf[so + 3], mf[so + 4], mf[so + 5]))
            for d2 in range(vi, vi + nv):
                s2 = do0 + DOF_STRIDE * d2
                H[dof * nvt + d2] = (mf[s2] * F[0] + mf[s2 + 1] * F[1] + mf[s2 + 2] * F[2] + mf[s2 + 3] * F[3]
                                     + mf[s2 + 4] * F[4] + mf[s2 + 5] * F[5])
            H[dof * nvt + dof] += mf[so + 6]  # rotor inertia (Example 9.5)
            j = i
            while mi[HEADER_I + 5 * j] >= 0:
                F = xtf_t(w, 9 * j, r0 + 3 * j, F)  # F = ^λ(j)X_j^* F
                j = mi[HEADER_I + 5 * j]
                vj = mi[HEADER_I + 5 * j + 3]
                for d2 in range(vj, vj + mi[HEADER_I + 5 * j + 4]):
                    s2 = do0 + DOF_STRIDE * d2
                    x = (mf[s2] * F[0] + mf[s2 + 1] * F[1] + mf[s2 + 2] * F[2] + mf[s2 + 3] * F[3]
                         + mf[s2 + 4] * F[4] + mf[s2 + 5] * F[5])
                    H[dof * nvt + d2] = x
                    H[d2 * nvt + dof] = x
    return 0


@njit(types.int64(I1, F1, F1, F1), cache=True)
def crba_entry(mi, mf, q, H):
    w = new_work(mi)
    return crba_kernel(mi, mf, q, H, w)


@cfunc(SIG1, cache=True)
def crba_c(mip, mfp, qp, nq, outp, wp, nw):
    mi, mf, nvt = model_from_pointers(mip, mfp)
    return crba_kernel(mi, mf, carray(qp, (nq,)), carray(outp, (nvt * nvt,)), carray(wp, (nw,)))


def _crba(model, data, w, q):
    H = np.empty((model.nvt, model.nvt))
    return crba_kernel(model._kmi, model._kmf, q, H.reshape(-1), w), H


_MASS_MATRIX = Route("the mass matrix", (("q", "q"),), _crba, shim=crba_c, matrix=True, post="vv")
_H = _MASS_MATRIX.front


def mass_matrix_tree(model, q_tree, data=None):
    """H over the tree coordinates (mimic followers included), for q_tree already checked (nqt)."""
    w = check_data(model, data)
    q_tree = vec(q_tree, "q")
    if _MASS_MATRIX.addr is not None:
        r = invoke(_MASS_MATRIX.addr, True, model._kmi, model._kmf, w, q_tree)
        st, H = (0, r) if r.__class__ is np.ndarray else (r, None)
    else:
        st, H = _crba(model, data, w if w is not None else np.empty(model.work_size), q_tree)
    if st:
        raise_status(model, st, True, "the mass matrix", ("q",), (q_tree,))
    return H


def mass_matrix(model, q, data=None):
    """The joint-space inertia matrix H(q) (nv x nv, symmetric positive definite unless a massless
    subtree makes it singular): Featherstone Table 6.2."""
    return _H(model, data, q)
