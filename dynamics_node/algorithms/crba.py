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
from numba import njit, types

from ..joints import jcalc
from ..spatial import rbi_mul, rbi_to_parent_add, xt_mul_force_add
from ._common import F1, F2, I1, check_q, A_Q, axis_of, check, fast_vec, raise_status, to_tree_q, unpack, work_views


@njit(types.int64(I1, F1, F1, F1, F1), cache=True)
def crba_kernel(mi, mf, q, H, w):
    nb, nvt, nqt, J, B, D = unpack(mi, mf)
    st = check_q(q, nqt, J, nb)
    if st != 0:
        return st
    E, r, v, a, f, c, IA, pA, Rw, pw, Dinv, U, u, d, tmp = work_views(w, nb, nvt)
    # composite inertia rbi(m, h, Ibar) of each subtree: m in c[i,0], h in c[i,1:4], Ibar in IA[i,0:9]
    for i in range(nb):
        jt = J[i, 1]
        Bi = B[i]
        jcalc(jt, axis_of(jt, D[J[i, 3]]), q, J[i, 2], Bi[0:9], Bi[9:12], E[i], r[i])
        c[i, 0] = Bi[12]
        for k in range(3):
            c[i, 1 + k] = Bi[13 + k]
        for k in range(9):
            IA[i, k] = Bi[16 + k]
    for i in range(nb - 1, -1, -1):
        p = J[i, 0]
        if p >= 0:
            rbi_to_parent_add(E[i], r[i], c[i, 0], c[i, 1:4], IA[i, 0:9], c[p, 0:1], c[p, 1:4], IA[p, 0:9])
    for k in range(nvt * nvt):
        H[k] = 0.0
    F = tmp[0:6]
    G = tmp[6:12]
    for i in range(nb):
        vi = J[i, 3]
        nv = J[i, 4]
        for dof in range(vi, vi + nv):
            rbi_mul(c[i, 0], c[i, 1:4], IA[i, 0:9], D[dof], F)
            for d2 in range(vi, vi + nv):
                s = D[d2]
                H[dof * nvt + d2] = s[0] * F[0] + s[1] * F[1] + s[2] * F[2] + s[3] * F[3] + s[4] * F[4] + s[5] * F[5]
            H[dof * nvt + dof] += D[dof, 6]
            j = i
            while J[j, 0] >= 0:
                for k in range(6):
                    G[k] = 0.0
                xt_mul_force_add(E[j], r[j], F, G)
                for k in range(6):
                    F[k] = G[k]
                j = J[j, 0]
                vj = J[j, 3]
                for d2 in range(vj, vj + J[j, 4]):
                    s = D[d2]
                    x = s[0] * F[0] + s[1] * F[1] + s[2] * F[2] + s[3] * F[3] + s[4] * F[4] + s[5] * F[5]
                    H[dof * nvt + d2] = x
                    H[d2 * nvt + dof] = x
    return 0


def mass_matrix_tree(model, q_tree, data=None):
    """H over the tree coordinates (mimic followers included)."""
    w = data.work if data is not None else np.empty(model.work_size)
    H = np.empty(model.nvt * model.nvt)
    st = crba_kernel(model._kmi, model._kmf, q_tree, H, w)
    if st:
        raise_status(model, st, tree=True)
    return H.reshape(model.nvt, model.nvt)


def mass_matrix(model, q, data=None):
    """The joint-space inertia matrix H(q) (nv x nv, symmetric positive definite unless a massless
    subtree makes it singular): Featherstone Table 6.2."""
    if model.has_mimic:
        H = mass_matrix_tree(model, to_tree_q(model, q), data)
        return model.G.T @ H @ model.G
    w = data.work if data is not None else np.empty(model.work_size)
    H = np.empty(model.nvt * model.nvt)
    try:
        st = crba_kernel(model._kmi, model._kmf, q, H, w)
    except TypeError:
        st = crba_kernel(model._kmi, model._kmf, fast_vec(q, "q"), H, w)
    if st:
        raise_status(model, st)
    return H.reshape(model.nvt, model.nvt)
