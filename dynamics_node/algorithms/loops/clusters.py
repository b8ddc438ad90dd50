"""Minimal loop clusters and the block-diagonal K and G (Featherstone §8.9, with §8.8 per block).

Two kinematic loops are coupled when they have a tree joint in common (the tree joints of loop l are
those on the paths from p(l) and s(l) up to their nearest common ancestor, the joints where
K_l is not zero, Eq. 8.20); the minimal loop clusters are the connected components of that relation.
With the tree joints of each cluster numbered consecutively (§8.9's numbering; here the permutation
``ClusterData.order`` of the velocity variables, applied when the blocks are gathered: the packed
tree and the API keep the model's depth-first order), K is block-diagonal with gaps: cluster c owns
the rows ``rows[c]`` of K and the columns ``cols[c]``, and nothing else of K is nonzero.  G is then
block-diagonal too: each block K_c x_c = k_c is solved on its own by §8.8's Gaussian elimination with
complete pivoting (basis.gauss_complete_pivot), and every column outside all clusters is an
identity block of G.

With mimic joints (§9.6) K is K_tree G_mimic, in the user's coordinates: a joint that mimics another
counts as that joint (its tree degree of freedom is the other's variable).
"""
from __future__ import annotations

import numpy as np

from ...layout import BODY_I, HEADER_I, J_NV, J_PARENT, J_VI
from .basis import gauss_complete_pivot
from .constraints import rank_tol
from .data import LI_HEADER, LJ_PRED, LJ_STRIDE, LJ_SUCC


class ClusterData:
    """The minimal loop clusters of one model (immutable; ``model.loop_data.clusters``).

    names: per cluster, the tuple of its loop-joint names (model.loops order within a cluster;
    clusters ordered by their first loop joint); loops: per cluster, its loop indices; rows: per
    cluster, the rows of K it owns (int arrays, increasing); cols: per cluster, the velocity
    variables (columns of K, user coordinates) of its tree joints (increasing = model order);
    free: the columns in no cluster; order: the consecutive numbering, cols[0] + cols[1] + ... +
    free (a permutation of range(nv))."""

    __slots__ = ("names", "loops", "rows", "cols", "free", "order")

    def __init__(self, names, loops, rows, cols, free):
        self.names = tuple(tuple(n) for n in names)
        self.loops = tuple(loops)
        self.rows = tuple(rows)
        self.cols = tuple(cols)
        self.free = free
        self.order = np.concatenate(list(self.cols) + [free]).astype(np.int64)
        for a in (*self.loops, *self.rows, *self.cols, self.free, self.order):
            a.setflags(write=False)

    def __len__(self):
        return len(self.names)

    def __repr__(self):
        return f"<ClusterData {len(self.names)} cluster(s): {list(self.names)}>"


def loop_tree_joints(mi, li, l):
    """Bodies (= their tree joints) on loop l's path: from p(l) and s(l) up to, not including, their
    nearest common ancestor (Table 8.4's while loop; depth-first numbering: a parent precedes its
    children, so the larger index is the deeper one)."""
    o = LI_HEADER + LJ_STRIDE * l
    bi, bj = int(li[o + LJ_PRED]), int(li[o + LJ_SUCC])
    out = []
    while bi != bj:
        if bi > bj:
            out.append(bi)
            bi = int(mi[HEADER_I + BODY_I * bi + J_PARENT])
        else:
            out.append(bj)
            bj = int(mi[HEADER_I + BODY_I * bj + J_PARENT])
    return out


def analyse(model, li, rows) -> ClusterData:
    """Cluster analysis of ``model`` (its loop data li, rows per loop): union-find over the loops
    that share a column of K.  Called once when the model is packed."""
    mi = model.mi
    nl = len(rows)
    v_src = np.asarray(model.v_src) if model.has_mimic else None
    cols = []
    for l in range(nl):
        c = set()
        for b in loop_tree_joints(mi, li, l):
            vi = int(mi[HEADER_I + BODY_I * b + J_VI])
            for t in range(vi, vi + int(mi[HEADER_I + BODY_I * b + J_NV])):
                c.add(int(v_src[t]) if v_src is not None else t)
        cols.append(c)
    parent = list(range(nl))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner = {}
    for l in range(nl):
        for c in cols[l]:
            if c in owner:
                a, b = find(owner[c]), find(l)
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                owner[c] = l
    groups: dict[int, list[int]] = {}
    for l in range(nl):
        groups.setdefault(find(l), []).append(l)
    comps = sorted(groups.values(), key=lambda g: g[0])
    names = [[model.loops[l].name for l in g] for g in comps]
    crow = [np.concatenate([np.arange(rows[l].start, rows[l].stop) for l in g]).astype(np.int64) for g in comps]
    ccol = [np.array(sorted(set().union(*(cols[l] for l in g))), dtype=np.int64) for g in comps]
    used = np.zeros(model.nv, dtype=bool)
    for c in ccol:
        used[c] = True
    return ClusterData(names, [np.array(g, dtype=np.int64) for g in comps], crow, ccol,
                       np.flatnonzero(~used).astype(np.int64))


def blocks(cd: ClusterData, K, k):
    """[(K_c, k_c)] per cluster: the diagonal blocks of K permuted to the consecutive numbering."""
    return [(K[np.ix_(r, c)], k[r]) for r, c in zip(cd.rows, cd.cols)]


def block_basis(cd: ClusterData, K, k, allowed=None):
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


def dense_G(cd: ClusterData, nv, parts):
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


def clustered_forward(model, q, qd, tau, alpha, f_ext):
    """Closed-loop forward dynamics on the cluster blocks (§8.9 with §8.5's Method 1 per block):

        K_c qdd_c = k_c (+ k_stab)  ->  qdd = G ydd + g         (§8.8 on each block, Eq. 8.51)
        (G^T H G) ydd = G^T (tau - C - H g)                      (Eqs. 8.10-8.13)
        K_c^T lambda_c = (H qdd + C - tau)[cols_c]               (Eq. 8.5 per block; minimum norm)

    G is block-diagonal: H G is H's identity-block columns plus, per cluster, H[:, dep_c] G_c, so the
    cost is O(n (n - r)) for H G and the one Cholesky factorisation of the (n - r) x (n - r) G^T H G,
    with no n^c x n^c matrix (Method 2's A = K H^-1 K^T couples every cluster through H^-1, and needs
    a pseudo-inverse when a planar loop makes it singular).  The minimum-norm lambda_c per block is
    the minimum-norm lambda of the whole (the null space of K^T is the direct sum of the blocks'), the
    choice of Eq. 8.41.  Returns (qdd, lambda) with lambda in K's row order."""
    from ..crba import mass_matrix
    from ..rnea import bias_forces, inverse_dynamics
    from .constraints import terms

    cd = model.loop_data.clusters
    K, kk, _, _ = terms(model, q, qd, alpha)
    H = np.asarray(mass_matrix(model, q), dtype=float)
    if f_ext is None:
        C = np.asarray(bias_forces(model, q, qd), dtype=float)
    else:
        C = np.asarray(inverse_dynamics(model, q, qd, np.zeros(model.nv), f_ext), dtype=float)
    parts, g = block_basis(cd, K, kk)
    nv = model.nv
    ycols = np.sort(np.concatenate([cd.free] + [p[2] for p in parts]))
    where = np.full(nv, -1, dtype=np.int64)
    where[ycols] = np.arange(len(ycols))
    HG = H[:, ycols].copy()                     # the identity rows of G
    for Gd, dep, ind in parts:
        if len(dep) and len(ind):
            HG[:, where[ind]] += H[:, dep] @ Gd  # the rows of G_c at the dependent columns
    M = HG[ycols].copy()                        # G^T (H G)
    rhs_full = tau - C - H @ g
    rhs = rhs_full[ycols].copy()
    for Gd, dep, ind in parts:
        if len(dep) and len(ind):
            wi = where[ind]
            M[wi] += Gd.T @ HG[dep]
            rhs[wi] += Gd.T @ rhs_full[dep]
    try:
        Lc = np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        from ...errors import SingularMassMatrixError

        raise SingularMassMatrixError("G^T H G of the closed-loop system is singular (Featherstone §8.5, "
                                      "Method 1 on the cluster blocks of §8.9)") from None
    ydd = np.linalg.solve(Lc.T, np.linalg.solve(Lc, rhs))
    qdd = g.copy()
    qdd[ycols] += ydd
    for Gd, dep, ind in parts:
        if len(dep) and len(ind):
            qdd[dep] += Gd @ ydd[where[ind]]
    r = H @ qdd + C - tau                       # = K^T lambda (Eq. 8.5)
    lam = np.zeros(K.shape[0])
    tol = rank_tol(K)
    for rows, cols in zip(cd.rows, cd.cols):
        Kc = K[np.ix_(rows, cols)]
        scale = max(float(np.max(np.abs(Kc))), 1e-300) if Kc.size else 1.0
        lam[rows] = np.linalg.lstsq(Kc.T, r[cols], rcond=tol / scale)[0]
    return qdd, lam
