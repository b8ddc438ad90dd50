"""Minimal loop clusters and the block-diagonal K and G (Featherstone §8.9, with §8.8 per block).

Two kinematic loops are coupled when they have a tree joint in common (the tree joints of loop l are
those on the paths from p(l) and s(l) up to their nearest common ancestor, the joints where
K_l is not zero, Eq. 8.20); the minimal loop clusters are the connected components of that relation.
With the tree joints of each cluster numbered consecutively (§8.9's numbering; here the permutation
``data.ClusterData.order`` of the velocity variables, applied when the blocks are gathered: the packed
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

from .basis import block_basis
from .constraints import rank_tol


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
    from ..tree.crba import mass_matrix
    from ..tree.rnea import bias_forces, inverse_dynamics
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
