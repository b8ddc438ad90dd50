"""Operational-space inertia Λ = (J H^-1 J^T)^-1 of a point of a link (Khatib 1987; Featherstone
§6.5 for the factorisation), world axes, rows [linear; angular] (x y z rx ry rz).

H = L^T D L is factored in place over the expanded parent array λ' (Featherstone Table 6.3, LTDL;
no fill-in, §6.4), so that H^-1 = L^-1 D^-1 L^-T and

    J H^-1 J^T = Y^T D^-1 Y,    Y = L^-T J^T      (back-substitution of Table 6.5 on J's columns).

J^T is non-zero only on the dofs that support the link, a set closed under λ', so Y is too: the
substitution and the product run over the link's support only. H is never inverted densely. With
mimic joints (H = G^T H_t G, §9.6, dense) the reduced H is factored by Cholesky instead.

Where J loses rank, J H^-1 J^T is singular and Λ does not exist: InputError naming the rows that
are dependent, unless ``rows`` selects a subset of the six (named "x", "y", "z" for the linear and
"rx", "ry", "rz" for the angular rows, world axes) of full rank; Λ is then k x k in that order.
"""
from __future__ import annotations

import numpy as np

from ..._jit import njit, types
from ...dispatch import Route, magnitudes, overflow
from ...errors import InputError, RangeError, clip
from ...packed import dof_count, first_dof, parent
from ...layout import HF_TOL, H_NB, H_NVT
from ..._kernel_io import status
from ..._kernel_io import F1, F2, FASTMATH, I1, RANK_LOST_KIND, SINGULAR
from .crba import crba_kernel
from .jacobians import ORIGIN, ROWS, _point
from .kinematics import jacobian_kernel
from .dense import cholesky
from .ltdl import ltdl_factor
from ...topology import expanded_parents

ROW_NAMES = ("x", "y", "z", "rx", "ry", "rz")
RANK_TOL = 1e-10  # a Cholesky pivot of J H^-1 J^T at or below this times its largest diagonal: rank lost
RANK_LOST = status.py_func(RANK_LOST_KIND, 0, 0)  # osi_kernel's status: the selected rows of J H^-1 J^T singular
ALL_ROWS = np.arange(6, dtype=np.int64)


@njit(cache=True, inline="always")
def spd_inverse(A, tol):
    """In place: A = A^-1 for symmetric positive definite A (k x k), by Cholesky A = L L^T. Returns
    -1, or the first index whose pivot is at or below tol times A's largest diagonal entry."""
    n = A.shape[0]
    big = 0.0
    for i in range(n):
        big = max(big, A[i, i])
    L = np.zeros((n, n))
    k = cholesky(A, L, n, tol * big)
    if k >= 0:
        return k
    for i in range(n):  # L := L^-1 (lower triangular), row by row
        L[i, i] = 1.0 / L[i, i]
        for j in range(i):
            s = 0.0
            for k in range(j, i):
                s -= L[i, k] * L[k, j]
            L[i, j] = s * L[i, i]
    for i in range(n):  # A^-1 = L^-T L^-1
        for j in range(i + 1):
            s = 0.0
            for k in range(i, n):
                s += L[k, i] * L[k, j]
            A[i, j] = s
            A[j, i] = s
    return -1


@njit(types.int64(I1, F1, F1, types.int64, F1, I1, F1, F1), cache=True, fastmath=FASTMATH)
def osi_kernel(mi, mf, q, body, pl, sel, out, w):
    """out[36:72] = M = J H^-1 J^T (6 x 6) of the point pl (body coordinates) of ``body``, world
    axes, by the module docstring's route, and out[0:k*k] = (M[sel, sel])^-1 for the k rows sel.
    Returns a kernel status, or RANK_LOST when M[sel, sel] is singular."""
    nb = mi[H_NB]
    nvt = mi[H_NVT]
    H = np.empty(max(nvt * nvt, 1))
    st = crba_kernel(mi, mf, q, H, w)
    if st != 0:
        return st
    J = np.empty(max(ROWS * nvt, 1))
    jacobian_kernel(mi, mf, q, body, pl, J, w)
    lam = np.empty(max(nvt, 1), dtype=np.int64)
    expanded_parents(mi, lam)
    Hm = H[:nvt * nvt].reshape((nvt, nvt))
    k = ltdl_factor(Hm, lam, mf[HF_TOL])  # Table 6.3
    if k >= 0:
        for i in range(nb):
            if first_dof(mi, i) <= k < first_dof(mi, i) + dof_count(mi, i):
                return status(SINGULAR, 0, i)
        return status(SINGULAR, 0, 0)
    M = out[out.shape[0] - 36:].reshape((6, 6))
    M[:, :] = 0.0
    Jm = J[:ROWS * nvt].reshape((ROWS, nvt))
    Y = np.zeros((max(nvt, 1), 6))
    j = body
    while j >= 0:  # Y = J^T on the support
        for d in range(first_dof(mi, j), first_dof(mi, j) + dof_count(mi, j)):
            for r in range(6):
                Y[d, r] = Jm[r, d]
        j = parent(mi, j)
    j = body
    while j >= 0:  # Y = L^-T Y (Table 6.5, first loop), support dofs in descending order
        vj = first_dof(mi, j)
        for i in range(vj + dof_count(mi, j) - 1, vj - 1, -1):
            a = lam[i]
            while a != -1:
                Lia = Hm[i, a]
                for r in range(6):
                    Y[a, r] -= Lia * Y[i, r]
                a = lam[a]
            dinv = 1.0 / Hm[i, i]
            for r in range(6):  # M += Y_i^T D_i^-1 Y_i (Y_i final: its descendants on the support are done)
                yr = Y[i, r] * dinv
                for c in range(r, 6):
                    M[r, c] += yr * Y[i, c]
        j = parent(mi, j)
    for r in range(6):
        for c in range(r):
            M[r, c] = M[c, r]
    for r in range(6):
        for c in range(6):
            if not (M[r, c] - M[r, c] == 0.0):
                return RANK_LOST  # not finite: the caller reports the overflow
    n = sel.shape[0]
    A = out[:n * n].reshape((n, n))
    for r in range(n):
        for c in range(n):
            A[r, c] = M[sel[r], sel[c]]
    if spd_inverse(A, RANK_TOL) >= 0:
        return RANK_LOST
    return 0


def _rows(rows):
    """Indices of the requested rows (None: all six), or InputError naming rows."""
    if rows is None:
        return ALL_ROWS
    items = [rows] if isinstance(rows, str) else rows
    try:
        items = list(items)
    except TypeError:
        raise InputError(f"rows must be None or a list of row names {ROW_NAMES}, got {type(rows).__name__}") from None
    bad = [r for r in items if not (isinstance(r, str) and r in ROW_NAMES)]
    if bad or not items:
        what = f"unknown row {clip(bad[0])!r}" if bad else "an empty list"
        raise InputError(f"rows: {what}; rows are named {', '.join(ROW_NAMES)} (linear x y z, angular rx ry rz, "
                         "world axes)")
    if len(set(items)) != len(items):
        raise InputError(f"rows must not repeat a row, got {items}")
    return np.array([ROW_NAMES.index(r) for r in items], dtype=np.int64)


def _explain(M, sel, link):
    """InputError saying which of the selected rows of J are dependent (M = J H^-1 J^T of them)."""
    ev, V = np.linalg.eigh(M)
    k = int(np.sum(ev <= RANK_TOL * max(float(ev[-1]), 0.0))) or 1
    names = [ROW_NAMES[int(i)] for i in sel]
    weight = np.linalg.norm(V[:, :k], axis=1)  # each row's share in the lost directions
    dep = [n for n, x in zip(names, weight) if x > 1e-3 * np.max(weight)]
    raise RangeError(f"the Jacobian of link '{link}' loses rank here: its rows {', '.join(names)} have rank "
                     f"{len(names) - k} of {len(names)} (the lost directions involve rows {', '.join(dep)}), so "
                     "J H^-1 J^T is singular and the operational-space inertia does not exist; pass rows= a subset "
                     f"of full rank (names: {', '.join(ROW_NAMES)})",
                     symptom=f"the Jacobian of link '{link}' loses rank (rank {len(names) - k} of {len(names)})")


def _osi(model, data, w, qt, point, link, rows):
    sel = _rows(rows)
    b, Rl, pb = _point(model, link, point)
    if b < 0:
        raise InputError(f"link '{link}' is fixed to the world: its Jacobian is zero and it has no "
                         "operational-space inertia")
    k = len(sel)
    if model.has_mimic:
        M = _reduced_M(model, data, w, qt, b, pb)
        if isinstance(M, int):
            return M, None
        out = np.empty(k * k + 36)
        out[k * k:] = M.reshape(-1)
        A = out[:k * k].reshape(k, k)
        A[:] = M[np.ix_(sel, sel)]
        st = 0 if np.all(np.isfinite(M)) and spd_inverse_entry(A, RANK_TOL) < 0 else RANK_LOST
    else:
        out = np.empty(k * k + 36)
        st = osi_kernel(model._kmi, model._kmf, qt, b, pb, sel, out, w)
    if st == RANK_LOST:
        M = out[k * k:].reshape(6, 6)
        if not np.all(np.isfinite(M)):
            raise overflow("the operational-space inertia", magnitudes(["q", "point"], [qt, point]))
        _explain(M[np.ix_(sel, sel)], sel, link)
    if st:
        return st, None
    return 0, out[:k * k].reshape(k, k)


def _reduced_M(model, data, w, qt, b, pb):
    """J H^-1 J^T with mimic joints: J = J_t G, H = G^T H_t G (dense, Cholesky); or a status."""
    from .crba import _crba

    n = model.nvt
    st, H = _crba(model, data, w, qt)
    if st:
        return st
    J = np.empty(6 * n)
    jacobian_kernel(model._kmi, model._kmf, qt, b, pb, J, w)
    G = model.G
    Jr = J.reshape(6, n) @ G
    Hr = G.T @ H @ G
    try:
        Lc = np.linalg.cholesky(Hr)
    except np.linalg.LinAlgError:
        from .ltdl import singular_mass_matrix

        raise singular_mass_matrix(model, H, "the operational-space inertia") from None
    Y = np.linalg.solve(Lc, Jr.T)
    return Y.T @ Y


@njit(types.int64(F2, types.float64), cache=True)
def spd_inverse_entry(A, tol):
    return spd_inverse(A, tol)


_OSI = Route("the operational-space inertia", (("q", "q"), ("point", "x")), _osi, extras=("link", "rows"))
_OSI_FRONT = _OSI.front


def operational_space_inertia(model, q, link, point=ORIGIN, rows=None, data=None):
    """Λ = (J H^-1 J^T)^-1 (6 x 6, or k x k for k selected rows) of a point of a link (point in the
    link frame), world axes, rows [linear; angular] = ("x", "y", "z", "rx", "ry", "rz").

    rows: None (all six) or a subset of those names, in the order wanted. Where the selected rows of
    J are dependent: InputError naming them. Where H is singular: SingularMassMatrixError."""
    return _OSI_FRONT(model, data, q, point, link, rows)
