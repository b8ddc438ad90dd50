"""Derivatives of the forward dynamics (Carpentier & Mansard, RSS 2018, as Pinocchio's computeABADerivatives,
but with H^-1 applied through the sparse L^T D L factor of H instead of the paper's dedicated pass): differentiating
ID(q, qd, FD(q, qd, tau)) = tau at qdd = FD(q, qd, tau) gives

    dqdd/dq = -H^-1 dID/dq,   dqdd/dqd = -H^-1 dID/dqd,   dqdd/dtau = H^-1,

with dID/dq, dID/dqd and H = dID/dqdd from the analytic RNEA derivatives (rnea_derivatives.py), in three
steps over one scratch: its forward pass at qdd = 0, then its backward pass without the derivative rows
(H and the subtree sums, no CRBA of its own), which leave tau0 = ID(q, qd, 0, f^x) (with the
joint law's friction), so qdd = H^-1 (tau - tau0) comes from the factor below (no ABA); qdd's part of the pass
is added (add_qdd: the pass is linear in qdd) and the backward pass's rows run once, at qdd. The
products with H^-1 by the factor H = L^T D L over the expanded parent array (Featherstone §6.5, Tables 6.3
and 6.5: branch-induced sparsity, no fill-in), its solves applied to whole rows of the right-hand sides
(-dID/dq, -dID/dqd and the identity) at once, all in one compiled call (tree coordinates; a model with mimic
joints takes the dense reduced system G^T H G in c_fronts.py and dynamics_derivatives.py instead).
"""
from __future__ import annotations

from ..._jit import ints, njit, types
from ...packed import dof_count, dof_f, first_dof, parent, subtree_end
from ...layout import FEXT_N, HF_TOL, H_NB, H_NVT
from ..._kernel_io import INDEX_MAX, OVERFLOW, status
from ..._kernel_io import (A_FEXT, A_TAU, BAD_LENGTH, F1, F2, FASTMATH, I1, SINGULAR, check, check_q_qd)
from ...joint_law import friction_torque
from ..tree.ltdl import ltdl_factor, ltdl_solve
from ...topology import expanded_parents
from .rnea_derivatives import _cross_m, _mul_inertia, backward_pass, forward_pass, scratch_views



@njit(cache=True, inline="always")
def _solve_rows(L, lam, X, Y, n):
    """(X, Y) <- (-H^-1 X, -H^-1 Y) with H = L^T D L (Featherstone Table 6.5, ltdl.ltdl_solve, applied to all
    the columns of both right-hand sides at once: one walk over λ', each step a row operation over contiguous
    memory)."""
    for i in range(n - 1, -1, -1):   # L^T
        j = lam[i]
        while j != -1:
            a = L[i, j]
            for c in range(n):
                X[j, c] -= a * X[i, c]
                Y[j, c] -= a * Y[i, c]
            j = lam[j]
    for i in range(n):                # D, then L
        d = -1.0 / L[i, i]
        for c in range(n):
            X[i, c] *= d
            Y[i, c] *= d
        j = lam[i]
        while j != -1:
            a = L[i, j]
            for c in range(n):
                X[i, c] -= a * X[j, c]
                Y[i, c] -= a * Y[j, c]
            j = lam[j]


@njit(cache=True, inline="always")
def _inverse(mi, L, lam, Z, n):
    """Z = H^-1 = L^-1 D^-1 L^-T (H = L^T D L over λ', Featherstone Table 6.5 applied to the identity), with the
    identity's sparsity and H^-1's symmetry: L^-T's row j has entries only in the columns of j's subtree
    (dofs j .. J_DEND - 1 of j's body: the sweep for dof i touches columns i .. the end of i's subtree), and
    the L sweep computes the upper triangle (row i, columns >= i needs rows j < i at columns >= i only), the
    lower is its mirror."""
    for i in range(n):
        for c in range(n):
            Z[i, c] = 0.0
        Z[i, i] = 1.0
    for b in range(mi[H_NB] - 1, -1, -1):   # L^T, dofs in descending order (bodies, then their own dofs)
        end = subtree_end(mi, b)
        for i in range(first_dof(mi, b) + dof_count(mi, b) - 1, first_dof(mi, b) - 1, -1):
            j = lam[i]
            while j != -1:
                a = L[i, j]
                for c in range(i, end):
                    Z[j, c] -= a * Z[i, c]
                j = lam[j]
    for i in range(n):                        # D, then L on the upper triangle
        d = 1.0 / L[i, i]
        for c in range(i, n):
            Z[i, c] *= d
        j = lam[i]
        while j != -1:
            a = L[i, j]
            for c in range(i, n):
                Z[i, c] -= a * Z[j, c]
            j = lam[j]
    for i in range(n):
        for c in range(i + 1, n):
            Z[c, i] = Z[i, c]


@njit(cache=True, inline="always")
def add_qdd(mi, qdd, s):
    """The part of the pass that qdd carries, added after the sums (backward_pass without its rows; the pass
    is linear in qdd): with a^q_i = a^q_λ(i) + J_i qdd_i (a^q_0 = 0), dA/dq_j gains a^q_λ(j) x J_j and the
    subtree force F_i gains the sum over k in subtree(i) of Y_k a^q_k = Y^C_i a^q_λ(i) + the sum over the dofs c
    of subtree(i) of (Y^C J)_c qdd_c (the dFa that pass kept). The velocity's slots v (no longer read) hold
    that sum, a's hold a^q."""
    nb = mi[H_NB]
    nv = mi[H_NVT]
    _, _, G, aq, F, Yc, _, J, _, dA, _, _, _, Fa, _, tmp, _, _, _, _, _ = scratch_views(s, nb, nv)
    for i in range(nb):
        p = parent(mi, i)
        for k in range(6):
            aq[i, k] = aq[p, k] if p >= 0 else 0.0
            G[i, k] = 0.0
        for c in range(first_dof(mi, i), first_dof(mi, i) + dof_count(mi, i)):
            if p >= 0:
                _cross_m(aq[p], J[c], tmp)
                for k in range(6):
                    dA[c, k] += tmp[k]
            for k in range(6):
                aq[i, k] += J[c, k] * qdd[c]
    for i in range(nb - 1, -1, -1):
        p = parent(mi, i)
        for c in range(first_dof(mi, i), first_dof(mi, i) + dof_count(mi, i)):
            for k in range(6):
                G[i, k] += Fa[c, k] * qdd[c]
        if p >= 0:
            _mul_inertia(Yc[i], aq[p], tmp)
            for k in range(6):
                G[p, k] += G[i, k]
                F[i, k] += G[i, k] + tmp[k]
        else:
            for k in range(6):
                F[i, k] += G[i, k]


@njit(cache=True, inline="always")
def tau0(mi, mf, s, qd, out):
    """out = tau0 = ID(q, qd, 0, f^x) = J^T F (F: the composite force rnea_derivatives_kernel left in its scratch
    s, run at qdd = 0) + the joint law's friction (joint_law.py), tree coordinates."""
    nv = mi[H_NVT]
    nb = mi[H_NB]
    _, _, _, _, F, _, _, J, _, _, _, _, _, _, _, _, _, _, _, _, _ = scratch_views(s, nb, nv)
    for i in range(nb):
        for c in range(first_dof(mi, i), first_dof(mi, i) + dof_count(mi, i)):
            t = 0.0
            for k in range(6):
                t += J[c, k] * F[i, k]
            out[c] = t + friction_torque(mf, dof_f(nb, c), qd[c])


@njit(types.int64(I1, F1, F1, F1, F1, F1, F1, F2, F2, F2, F2, F1, F1), cache=True, fastmath=FASTMATH)
def aba_derivatives_kernel(mi, mf, q, qd, tau, fx, qdd, ddq, ddv, Minv, H, lam, s):
    """(ddq, ddv, Minv) = (dqdd/dq, dqdd/dqd, dqdd/dtau) at qdd = FD(q, qd, tau, f^x) (module docstring);
    H: nvt x nvt scratch, lam: nvt floats' room (λ', as integers), s: rnea_derivatives.scratch_size."""
    n = mi[H_NVT]
    st = check_q_qd(q, qd, mi)   # the order of the ABA's checks: q, qd, tau, f^x
    if st == 0:
        st = check(tau, n, A_TAU)
    if st != 0:
        return st
    if fx.shape[0] != 0 and fx.shape[0] != FEXT_N * mi[H_NB]:
        return status(BAD_LENGTH, A_FEXT, min(fx.shape[0], INDEX_MAX))
    for k in range(n):
        qdd[k] = 0.0
    st = forward_pass(mi, mf, q, qd, qdd, fx, s, 0)   # at qdd = 0: H and tau0
    if st != 0:
        return st
    backward_pass(mi, mf, qd, H, H, H, s, False, True, True, True)   # H and the sums, no rows yet
    tau0(mi, mf, s, qd, qdd)
    for k in range(n):
        qdd[k] = tau[k] - qdd[k]
    if lam.shape[0] < n:
        return status(BAD_LENGTH, 0, 0)
    lam_i = ints(lam, 0, (n,))   # λ' (integers in the float scratch)
    expanded_parents(mi, lam_i)
    k = ltdl_factor(H, lam_i, mf[HF_TOL])
    if k >= 0:   # the body whose joint owns pivot k (its subtree has no inertia about that axis)
        for i in range(mi[H_NB]):
            if first_dof(mi, i) <= k < first_dof(mi, i) + dof_count(mi, i):
                return status(SINGULAR, 0, i)
        return status(SINGULAR, 0, 0)
    ltdl_solve(H, lam_i, qdd)   # qdd = H^-1 (tau - tau0) (armature on H's diagonal: the pass adds it)
    for k in range(n):
        if not (qdd[k] - qdd[k] == 0.0):
            return status(OVERFLOW, 0, 0)   # finite inputs, qdd not finite: the caller names the inputs
    add_qdd(mi, qdd, s)
    backward_pass(mi, mf, qd, ddq, ddv, H, s, True, False, False, True)   # the rows, at qdd (H: the factor)
    _solve_rows(H, lam_i, ddq, ddv, n)
    _inverse(mi, H, lam_i, Minv, n)
    return 0
