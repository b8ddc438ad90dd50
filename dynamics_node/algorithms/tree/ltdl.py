"""Sparse L^T D L factorisation of H using the parent array (Featherstone §6.5, Tables 6.3-6.5).

Branch-induced sparsity (§6.4): H_ij ≠ 0 only when i and j lie on one path to the root, and the
factorisation H = L^T D L (L unit lower triangular) fills in nothing. A multi-DoF joint is handled by
the *expanded parent array* λ' of §6.5: each degree of freedom becomes one entry whose parent is
the previous degree of freedom of the same joint, or the last degree of freedom of the parent joint.
"""
from __future__ import annotations

import numpy as np
from ..._jit import njit, types

from ..._kernel_io import (F1, F2, I1)
from ...layout import J_VI
from ...packed import body_ints
from ...topology import dof_parents, expanded_parent_array  # noqa: F401 - §6.5's λ', where the book has it


@njit(types.int64(F2, I1, types.float64), cache=True)
def ltdl_factor(H, lam, tol):
    """In-place L^T D L of H (Table 6.3, LTDL). On return the strict lower triangle holds L and the
    diagonal holds D. Returns -1, or the first index k whose pivot D_kk <= tol (H singular). The innermost
    loop walks the ancestors of i as runs of consecutive dofs (a chain: λ'(m) = m - 1), so that it reads
    contiguous memory rather than one pointer chase per entry."""
    n = H.shape[0]
    for k in range(n - 1, -1, -1):
        if H[k, k] <= tol:
            return k
        i = lam[k]
        while i != -1:
            a = H[k, i] / H[k, k]
            j = i
            while j != -1:   # H[i, j] -= a H[k, j] for j = i and its ancestors, a chain run at a time:
                r = j        # r .. j each the parent of the next (λ'(m) = m - 1), contiguous in memory
                while r > 0 and lam[r] == r - 1:
                    r -= 1
                for m in range(r, j + 1):
                    H[i, m] -= a * H[k, m]
                j = lam[r]
            H[k, i] = a
            i = lam[i]
    return -1


@njit(cache=True, inline="always")
def lt_solve(L, lam, b):
    """b <- L^-T b for the unit lower-triangular L of H = L^T D L (Table 6.5's back-substitution
    with L^T, over the expanded parent array lam)."""
    for i in range(b.shape[0] - 1, -1, -1):
        j = lam[i]
        while j != -1:
            b[j] -= L[i, j] * b[i]
            j = lam[j]


@njit(cache=True, inline="always")
def dl_solve(L, lam, b):
    """b <- L^-1 D^-1 b (Table 6.5: D, then the back-substitution with L)."""
    n = b.shape[0]
    for i in range(n):
        b[i] /= L[i, i]
    for i in range(n):
        j = lam[i]
        while j != -1:
            b[i] -= L[i, j] * b[j]
            j = lam[j]


@njit(types.void(F2, I1, F1), cache=True)
def ltdl_solve(L, lam, b):
    """Solve (L^T D L) x = b in place in b (Table 6.5: back-substitution with L^T, then D, then L)."""
    lt_solve(L, lam, b)
    dl_solve(L, lam, b)


def crba_forward_dynamics(model, q, qd, tau, f_ext=None, data=None):
    """qdd from H qdd = tau - C (Eq. 1.1): H by the CRBA, C by the RNEA, solved with L^T D L over the
    expanded parent array. With mimic joints (explicit constraints q_t = G q + offset, §9.6 / Eq. 3.19)
    the reduced system G^T H G qdd = G^T (tau_t - C) is dense and solved by Cholesky."""
    from ...dispatch import to_tree
    from ...errors import SingularMassMatrixError
    from .crba import mass_matrix_tree
    from .rnea import inverse_dynamics

    # q, qd, tau: checked vectors of the right lengths (dispatch.Route); tau must be finite here
    if not np.all(np.isfinite(tau)):
        from ...errors import InputError
        k = int(np.nonzero(~np.isfinite(tau))[0][0])
        raise InputError(f"tau[{k}] is not finite (NaN or inf)")
    C = inverse_dynamics(model, q, qd, np.zeros(model.nv), f_ext=f_ext, data=data)
    qt = to_tree(model, q, "q") if model.has_mimic else q
    H = mass_matrix_tree(model, qt, data)
    if model.has_mimic:
        Hy = model.G.T @ H @ model.G
        try:
            L = np.linalg.cholesky(Hy)
        except np.linalg.LinAlgError:
            raise singular_mass_matrix(model, H, "forward dynamics") from None
        y = np.linalg.solve(L, tau - C)
        return np.linalg.solve(L.T, y)
    lam = dof_parents(model)
    Hf = np.array(H)
    k = ltdl_factor(Hf, lam, model.singular_tol)
    if k >= 0:
        b = int(np.searchsorted(body_ints(model.mi, model.nb)[:, J_VI], k, side="right") - 1)
        raise SingularMassMatrixError(
            f"forward dynamics needs to invert the mass matrix, which is singular at {model.body_label[b]}: that body "
            "and the links it carries have no inertia about its joint axis")
    x = np.array(tau - C, dtype=float)
    ltdl_solve(Hf, lam, x)
    return x


def singular_mass_matrix(model, H, what):
    """The SingularMassMatrixError of a dense factorisation of H that failed, naming the body."""
    from ...errors import SingularMassMatrixError

    k = _first_singular_body(model, H)
    return SingularMassMatrixError(
        f"{what} needs to invert the mass matrix, which is singular at {model.body_label[k]}: that body "
        "and the links it carries have no positive inertia about its joint axis")


def _first_singular_body(model, H):
    vi = body_ints(model.mi, model.nb)[:, J_VI]
    for i in range(model.nb):
        if H[vi[i], vi[i]] <= model.singular_tol:
            return i
    return 0
