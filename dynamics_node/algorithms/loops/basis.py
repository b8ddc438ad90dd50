"""G and g of Featherstone §8.8: every solution of K x = k as x = G y + g, by Gaussian elimination
with complete pivoting (Eqs. 8.48-8.51), on the whole K or per loop cluster (§8.9)."""
from __future__ import annotations

import numpy as np

from ...errors import RangeError
from .constraints import check_stab, matrix_rank, names, rank_tol, terms, v_labels


def gauss_complete_pivot(K, k, allowed_cols, tol=None):
    """Featherstone §8.8: solve K x = k as x = G y + g by Gaussian elimination with complete pivoting
    (row and column swaps, pivot columns restricted to ``allowed_cols``: all of them is the book's
    algorithm, a user's choice of independent variables the partial-pivoting variant it mentions).

    Returns (G, g, dep, indep): dep are the pivot columns (x_1 of Eq. 8.50, the dependent
    variables) in pivot order, indep the others (y = x_2 of Eq. 8.51) in increasing order.  Rows
    whose remaining entries fall below the rank tolerance are redundant and dropped (§8.8, item 2);
    the elimination runs above the pivot too (Gauss-Jordan), which does item 3's back-substitution.
    ``tol``: the rank test's threshold (default rank_tol(K); clusters.block_basis passes the whole
    K's to each block)."""
    m, n = K.shape
    A = np.array(K, dtype=float)
    b = np.array(k, dtype=float)
    tol = rank_tol(A) if tol is None else tol
    rows = list(range(m))
    piv_cols: list[int] = []
    allowed = [c for c in range(n) if allowed_cols[c]]
    r = 0
    while r < m:
        cand = [c for c in allowed if c not in piv_cols]
        if not cand:
            break
        sub = np.abs(A[np.ix_(rows[r:], cand)])
        i, j = np.unravel_index(int(np.argmax(sub)), sub.shape)
        if sub[i, j] <= tol:
            break  # rank test: the remaining rows are dependent (Featherstone §8.8, item 2)
        pr = rows[r + i]
        rows[r], rows[r + i] = rows[r + i], rows[r]
        pc = cand[j]
        piv_cols.append(pc)
        for rr in range(m):
            if rr != pr and A[rr, pc] != 0.0:
                f = A[rr, pc] / A[pr, pc]
                A[rr] -= f * A[pr]
                b[rr] -= f * b[pr]
        r += 1
    indep = [c for c in range(n) if c not in piv_cols]
    G = np.zeros((n, len(indep)))
    g = np.zeros(n)
    for jj, c in enumerate(indep):
        G[c, jj] = 1.0
    for t, c in enumerate(piv_cols):
        pr = rows[t]
        # x_c = (b - sum_{indep} A[pr, y] y) / piv   (Eq. 8.51: -K11^-1 K12 and K11^-1 k1)
        G[c, :] = -A[pr, indep] / A[pr, c]
        g[c] = b[pr] / A[pr, c]
    return G, g, piv_cols, indep


def constraint_basis(model, q, qd=None, independent=None, stabilization_time=None, _clustered=True):
    """G and g of Featherstone §8.8 (Eq. 8.51): every qdd with K qdd = k (+ k_stab) is G ydd + g.

    ``independent``: joint names whose velocity variables form y (Featherstone: "allow the user to
    specify his own choice of independent variables"); None = chosen by complete pivoting.  Returns
    (G, g, y_names) with y_names the velocity-variable labels (joint names; "name[i]" for multi-DoF).
    qd None gives g = 0.  Raises InputError if the named joints cannot be independent (the remaining
    joints do not span the constraints), naming the loop joints.  With loop clusters (§8.9) each
    block K_c is eliminated on its own (clusters.block_basis): the same pivots, hence the same G and g.
    """
    alpha = check_stab(stabilization_time)
    K, k, _, _ = terms(model, q, qd, alpha)
    if qd is None:
        k = np.zeros(K.shape[0])
    allowed = np.ones(model.nv, dtype=bool)
    if independent is not None:
        for j in names(independent):
            allowed[model.v_slice(j)] = False
    ld = model.loop_data
    if _clustered and ld is not None:
        parts, g = block_basis(ld.clusters, K, k, allowed)
        G, indep = dense_G(ld.clusters, model.nv, parts)
        dep = [c for p in parts for c in p[1]]
    else:
        G, g, dep, indep = gauss_complete_pivot(K, k, allowed)
    if independent is not None:
        r_all = matrix_rank(K)
        if len(dep) < r_all:
            raise RangeError(
                f"joints {sorted(names(independent))} cannot all be independent: the other joints "
                f"do not close loop(s) {', '.join(model.loop_joints)} (rank {len(dep)} < {r_all})",
                symptom=f"the loop constraints lose rank ({len(dep)} < {r_all})")
    labels = v_labels(model)
    return G, g, [labels[i] for i in indep]


def blocks(cd, K, k):
    """[(K_c, k_c)] per cluster: the diagonal blocks of K permuted to the consecutive numbering."""
    return [(K[np.ix_(r, c)], k[r]) for r, c in zip(cd.rows, cd.cols)]


def block_basis(cd, K, k, allowed=None):
    """§8.8 per block (§8.9): for each cluster c, K_c x_c = k_c solved as x_c = G_c y_c + g_c by
    Gaussian elimination with complete pivoting.  The rank test uses K's own tolerance (rank_tol(K)),
    so that the pivots, and hence G and g, are those of the elimination on the whole K (complete
    pivoting never mixes blocks: the largest remaining entry of a block is the largest of the whole
    matrix restricted to it, and eliminating in one block leaves the others as they are).

    Returns (Gb, dep, indep): per cluster the block G_c's rows at its dependent columns
    (len(dep_c) x len(indep_c), the -K11^-1 K12 of Eq. 8.51) with g_c there, dep_c and indep_c as
    model column indices; and g (nv) with g_c at the dependent columns."""
    tol = rank_tol(K)
    n = K.shape[1]
    allowed = np.ones(n, dtype=bool) if allowed is None else allowed
    g = np.zeros(n)
    out = []
    for r, c in zip(cd.rows, cd.cols):
        Gc, gc, piv, ind = gauss_complete_pivot(K[np.ix_(r, c)], k[r], allowed[c], tol=tol)
        dep = c[np.asarray(piv, dtype=np.int64)] if piv else np.zeros(0, np.int64)
        indep = c[np.asarray(ind, dtype=np.int64)] if ind else np.zeros(0, np.int64)
        g[dep] = gc[piv]
        out.append((Gc[piv][:, :] if piv else np.zeros((0, len(ind))), dep, indep))
    return out, g


def dense_G(cd, nv, parts):
    """The whole G (nv x n_y) and the y columns (increasing) from block_basis's parts."""
    indep = [cd.free] + [p[2] for p in parts]
    ycols = np.sort(np.concatenate(indep)) if indep else np.zeros(0, np.int64)
    where = np.full(nv, -1, dtype=np.int64)
    where[ycols] = np.arange(len(ycols))
    G = np.zeros((nv, len(ycols)))
    G[ycols, np.arange(len(ycols))] = 1.0
    for Gd, dep, ind in parts:
        if len(dep) and len(ind):
            G[np.ix_(dep, where[ind])] = Gd
    return G, ycols
