"""Sparse L^T D L factorisation of H using the parent array (Featherstone §6.5, Tables 6.3-6.5).

Branch-induced sparsity (§6.4): H_ij ≠ 0 only when i and j lie on one path to the root, and the
factorisation H = L^T D L (L unit lower triangular) fills in nothing. A multi-DoF joint is handled by
the *expanded parent array* λ' of §6.5: each degree of freedom becomes one entry whose parent is
the previous degree of freedom of the same joint, or the last degree of freedom of the parent joint.

Also here: psd_minnorm, the minimum-norm solution of a symmetric positive semidefinite system by
Cholesky with diagonal pivoting (the contact problem's singular A = T^T H^-1 T, contact_ncp.py).
"""
from __future__ import annotations

import math

import numpy as np
from .._jit import njit, types

from ._common import (F1, F2, I1)
from ..layout import BODY_I, HEADER_I, J_VI
from .topology import dof_parents, expanded_parent_array  # noqa: F401 - §6.5's λ', where the book has it


@njit(types.int64(F2, I1, types.float64), cache=True)
def ltdl_factor(H, lam, tol):
    """In-place L^T D L of H (Table 6.3, LTDL). On return the strict lower triangle holds L and the
    diagonal holds D. Returns -1, or the first index k whose pivot D_kk <= tol (H singular)."""
    n = H.shape[0]
    for k in range(n - 1, -1, -1):
        if H[k, k] <= tol:
            return k
        i = lam[k]
        while i != -1:
            a = H[k, i] / H[k, k]
            j = i
            while j != -1:
                H[i, j] -= a * H[k, j]
                j = lam[j]
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


@njit(cache=True)
def psd_minnorm(M, r, x):
    """x = the minimum-norm solution of M x = r for symmetric positive semidefinite M (n x n): Cholesky
    with diagonal pivoting M = P L L^T P^T of rank m, the basic solution, then its component in the
    null space N = P [-L11^-T L21^T; 1] removed. Returns False when r is not in M's range."""
    n = M.shape[0]
    L = M.copy()
    piv = np.arange(n)
    big = 0.0
    for i in range(n):
        big = max(big, M[i, i])
    tol = 1e-13 * big + 1e-300
    m = 0
    for j in range(n):  # outer-product Cholesky with diagonal pivoting, in place (lower part)
        p = j
        for i in range(j + 1, n):
            if L[i, i] > L[p, p]:
                p = i
        if not L[p, p] > tol:
            break
        if p != j:
            for c in range(n):
                L[j, c], L[p, c] = L[p, c], L[j, c]
            for c in range(n):
                L[c, j], L[c, p] = L[c, p], L[c, j]
            piv[j], piv[p] = piv[p], piv[j]
        L[j, j] = math.sqrt(L[j, j])
        for i in range(j + 1, n):
            L[i, j] /= L[j, j]
        for i in range(j + 1, n):  # the whole trailing block (both triangles: the swaps read both)
            for c in range(j + 1, n):
                L[i, c] -= L[i, j] * L[c, j]
        m += 1
    y = np.zeros(n)
    for i in range(m):  # L11 L11^T y = (P^T r)[:m]
        s = r[piv[i]]
        for c in range(i):
            s -= L[i, c] * y[c]
        y[i] = s / L[i, i]
    for i in range(m - 1, -1, -1):
        s = y[i]
        for c in range(i + 1, m):
            s -= L[c, i] * y[c]
        y[i] = s / L[i, i]
    nn = n - m
    if nn > 0:  # Z = [-L11^-T L21^T; 1] (n x nn, pivoted order); y -= Z (Z^T Z)^-1 Z^T y
        Z = np.zeros((n, nn))
        for c in range(nn):
            Z[m + c, c] = 1.0
            for i in range(m - 1, -1, -1):
                s = -L[m + c, i]
                for t in range(i + 1, m):
                    s -= L[t, i] * Z[t, c]
                Z[i, c] = s / L[i, i]
        G = Z.T @ Z
        g = Z.T @ y
        for c in range(nn):  # G is symmetric positive definite: Cholesky in place
            for t in range(c):
                G[c, c] -= G[c, t] * G[c, t]
            G[c, c] = math.sqrt(G[c, c])
            for i in range(c + 1, nn):
                for t in range(c):
                    G[i, c] -= G[i, t] * G[c, t]
                G[i, c] /= G[c, c]
        for c in range(nn):
            for t in range(c):
                g[c] -= G[c, t] * g[t]
            g[c] /= G[c, c]
        for c in range(nn - 1, -1, -1):
            for t in range(c + 1, nn):
                g[c] -= G[t, c] * g[t]
            g[c] /= G[c, c]
        y -= Z @ g
    for i in range(n):
        x[piv[i]] = y[i]
    res = 0.0
    rs = 0.0
    xs = 0.0
    for i in range(n):
        t = -r[i]
        for c in range(n):
            t += M[i, c] * x[c]
        res = max(res, abs(t))
        rs = max(rs, abs(r[i]))
        xs = max(xs, abs(x[i]))
    return res <= 1e-11 * (rs + big * xs + 1e-300)


def crba_forward_dynamics(model, q, qd, tau, f_ext=None, data=None):
    """qdd from H qdd = tau - C (Eq. 1.1): H by the CRBA, C by the RNEA, solved with L^T D L over the
    expanded parent array. With mimic joints (explicit constraints q_t = G q + offset, §9.6 / Eq. 3.19)
    the reduced system G^T H G qdd = G^T (tau_t - C) is dense and solved by Cholesky."""
    from ..dispatch import to_tree
    from ..errors import SingularMassMatrixError
    from .crba import mass_matrix_tree
    from .rnea import inverse_dynamics

    # q, qd, tau: checked vectors of the right lengths (dispatch.Route); tau must be finite here
    if not np.all(np.isfinite(tau)):
        from ..errors import InputError
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
        b = int(np.searchsorted(model.mi[HEADER_I + J_VI::BODY_I], k, side="right") - 1)
        raise SingularMassMatrixError(
            f"forward dynamics needs to invert the mass matrix, which is singular at {model.body_label[b]}: that body "
            "and the links it carries have no inertia about its joint axis")
    x = np.array(tau - C, dtype=float)
    ltdl_solve(Hf, lam, x)
    return x


def singular_mass_matrix(model, H, what):
    """The SingularMassMatrixError of a dense factorisation of H that failed, naming the body."""
    from ..errors import SingularMassMatrixError

    k = _first_singular_body(model, H)
    return SingularMassMatrixError(
        f"{what} needs to invert the mass matrix, which is singular at {model.body_label[k]}: that body "
        "and the links it carries have no positive inertia about its joint axis")


def _first_singular_body(model, H):
    vi = model.mi[HEADER_I + J_VI::BODY_I]
    for i in range(model.nb):
        if H[vi[i], vi[i]] <= model.singular_tol:
            return i
    return 0
