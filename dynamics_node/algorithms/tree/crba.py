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
from ..._jit import carray, cfunc, njit, types, view

from ...joints import jcalc_sc, sincos_all
from ...packed import body_f, dof_count, dof_f, first_dof, parent
from ...layout import (B_RBI, D_ARMATURE, D_S, H_NB, H_NQT, H_NVT, H_NVU,
                      RBI_N, W_COS, W_E, W_E_N, W_IA, W_IA_N, W_R, W_R_N, W_SIN)
from ...spatial import rbi_mul_t, rbi_to_parent_add, xtf_t
from ..._fast import invoke
from ...dispatch import Route, check_data, raise_status, vec
from ..._kernel_io import status
from ..._kernel_io import (A_Q, BAD_LENGTH, FASTMATH, SIG1, model_from_pointers, F1, I1, check_q, new_work)
from .mimic import gtdg, q_to_tree, scratch_at


@njit(cache=True, inline="always")
def S_dot(mf, so, F):
    """S_j^T F for the motion-subspace column at mf[so:so+6] and a force 6-tuple F."""
    return (mf[so] * F[0] + mf[so + 1] * F[1] + mf[so + 2] * F[2] + mf[so + 3] * F[3] + mf[so + 4] * F[4]
            + mf[so + 5] * F[5])


@njit(cache=True, fastmath=FASTMATH)
def crba_from_x(mi, mf, H, w):
    """crba_kernel (below) from the joint transforms ^iX_λ(i) already in the work array (W_E, W_R), as
    jcalc leaves them (the RNEA leaves the same: contact.contact_terms runs it first)."""
    nb = mi[H_NB]
    nvt = mi[H_NVT]
    E0, r0, Ic0 = W_E * nb, W_R * nb, W_IA * nb
    for i in range(nb):
        I_i = body_f(i) + B_RBI
        for k in range(RBI_N):
            w[Ic0 + W_IA_N * i + k] = mf[I_i + k]  # I_i^c = I_i (Eq. 6.13, before the children are added)
    for i in range(nb - 1, -1, -1):
        p = parent(mi, i)
        if p >= 0:  # I_λ(i)^c += ^λ(i)X_i^* I_i^c ^iX_λ(i)
            rbi_to_parent_add(w, E0 + W_E_N * i, r0 + W_R_N * i, Ic0 + W_IA_N * i, Ic0 + W_IA_N * p)
    for k in range(nvt * nvt):
        H[k] = 0.0
    for i in range(nb):
        vi = first_dof(mi, i)
        nv = dof_count(mi, i)
        for dof in range(vi, vi + nv):
            so = dof_f(nb, dof) + D_S
            # F = I_i^c S_i ; H_ii = S_i^T F  (Eq. 6.14)
            F = rbi_mul_t(w, Ic0 + W_IA_N * i, (mf[so], mf[so + 1], mf[so + 2], mf[so + 3], mf[so + 4], mf[so + 5]))
            for d2 in range(vi, vi + nv):
                H[dof * nvt + d2] = S_dot(mf, dof_f(nb, d2) + D_S, F)
            H[dof * nvt + dof] += mf[dof_f(nb, dof) + D_ARMATURE]  # rotor inertia (Example 9.5)
            j = i
            while parent(mi, j) >= 0:
                F = xtf_t(w, E0 + W_E_N * j, r0 + W_R_N * j, F)  # F = ^λ(j)X_j^* F
                j = parent(mi, j)  # j = λ(j)
                vj = first_dof(mi, j)
                for d2 in range(vj, vj + dof_count(mi, j)):
                    x = S_dot(mf, dof_f(nb, d2) + D_S, F)  # H_ij = H_ji^T = F^T S_j
                    H[dof * nvt + d2] = x
                    H[d2 * nvt + dof] = x
    return 0


@njit(types.int64(I1, F1, F1, F1, F1), cache=True, fastmath=FASTMATH)
def crba_kernel(mi, mf, q, H, w):
    """Table 6.2 on flat offsets. The composite inertia I_i^c is kept as rbi [m, h, Ibar] in the
    I^A slot of the work array (W_IA), which the CRBA does not otherwise use."""
    nb = mi[H_NB]
    st = check_q(q, mi)
    if st != 0:
        return st
    sincos_all(mi, q, w, W_SIN * nb)
    for i in range(nb):
        jcalc_sc(mi, mf, i, q, w, W_E * nb + W_E_N * i, W_R * nb + W_R_N * i, w[W_SIN * nb + i], w[W_COS * nb + i])
    return crba_from_x(mi, mf, H, w)


@njit(types.int64(I1, F1, F1, F1), cache=True)
def crba_entry(mi, mf, q, H):
    w = new_work(mi)
    return crba_kernel(mi, mf, q, H, w)


# the C front's scratch for a model with mimic joints (dispatch.Route's extra): q_t (nqt <= nb + nvt), H_t
H_MIMIC = (1, 1, 1, 0)


@cfunc(SIG1, cache=True)
def crba_c(mip, mfp, qp, nq, outp, wp, nw):
    """H into out; a model with mimic joints in user coordinates: G^T H(G q + offset) G (mimic.py), its scratch
    H_MIMIC at the end of w."""
    mi, mf, nvt = model_from_pointers(mip, mfp)
    w = carray(wp, (nw,))
    q = carray(qp, (nq,))
    if mi[H_NVU] == nvt:
        return crba_kernel(mi, mf, q, carray(outp, (nvt * nvt,)), w)
    nqt = mi[H_NQT]
    nu = mi[H_NVU]
    b = scratch_at(mi, nw, nqt + nvt * nvt)
    if b < 0:
        return status(BAD_LENGTH, 0, 0)
    qt, Ht = w[b:b + nqt], w[b + nqt:b + nqt + nvt * nvt]
    st = q_to_tree(mi, mf, q, qt, A_Q)
    if st == 0:
        st = crba_kernel(mi, mf, qt, Ht, w[0:b])
    if st == 0:
        gtdg(mi, mf, view(Ht, 0, (nvt, nvt)), view(carray(outp, (nu * nu,)), 0, (nu, nu)))
    return st


def _crba(model, data, w, q):
    H = np.empty((model.nvt, model.nvt))
    return crba_kernel(model._kmi, model._kmf, q, H.reshape(-1), w), H


_MASS_MATRIX = Route("the mass matrix", (("q", "q"),), _crba, shim=crba_c, matrix=True, post="vv", extra=H_MIMIC,
                     mimic=True)
_H = _MASS_MATRIX.front


def mass_matrix_tree(model, q_tree, data=None):
    """H over the tree coordinates (mimic followers included), for q_tree already checked (nqt)."""
    w = check_data(model, data)
    q_tree = vec(q_tree, "q")
    if _MASS_MATRIX.addr is not None and not model.has_mimic:   # (the C front takes a mimic model's user q)
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
