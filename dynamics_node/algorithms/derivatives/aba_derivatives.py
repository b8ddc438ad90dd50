"""Derivatives of the forward dynamics (Carpentier & Mansard, RSS 2018, as Pinocchio's computeABADerivatives,
but with H^-1 applied through the sparse L^T D L factor of H instead of the paper's dedicated pass): differentiating
ID(q, qd, FD(q, qd, tau)) = tau at qdd = FD(q, qd, tau) gives

    dqdd/dq = -H^-1 dID/dq,   dqdd/dqd = -H^-1 dID/dqd,   dqdd/dtau = H^-1,

with dID/dq, dID/dqd and H = dID/dqdd from the analytic RNEA derivatives (rnea_derivatives.py; H comes from
the same pass, no CRBA), run at qdd = 0: the pass also leaves tau0 = ID(q, qd, 0, f^x) (with the joint law's
friction), qdd = H^-1 (tau - tau0) comes from the factor below (no ABA), and dID/dq, linear in qdd, gets qdd's
part in one more sweep over the pass's scratch (add_qdd_terms); the products
with H^-1 by the factor H = L^T D L over the expanded parent array (Featherstone §6.5, Tables 6.3 and 6.5:
branch-induced sparsity, no fill-in), its solves applied to whole rows of the right-hand sides (-dID/dq,
-dID/dqd and the identity) at once, all in one compiled call (tree coordinates; a model with mimic joints
takes the dense reduced system G^T H G in dynamics_derivatives.py instead).
"""
from __future__ import annotations

from ..._jit import ints, njit, types
from ...packed import dof_count, dof_f, first_dof, parent, subtree_end
from ...layout import (FEXT_N, HF_TOL, H_NB, H_NVT)
from ..._kernel_io import INDEX_MAX, OVERFLOW, status
from ..._kernel_io import (A_FEXT, A_TAU, BAD_LENGTH, F1, F2, FASTMATH, I1, SINGULAR, check, check_q_qd)
from ...joint_law import friction_torque
from ..tree.ltdl import ltdl_factor, ltdl_solve
from ...topology import expanded_parents
from .rnea_derivatives import (_cross_f, _cross_m, _mul6, rnea_derivatives_kernel, scratch_views)



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
def add_qdd_terms(mi, qdd, dq, s):
    """dq += the part of dtau/dq that qdd carries, after rnea_derivatives_kernel ran at qdd = 0 (its scratch s,
    laid out as there: x, Rw, pw, v, a, F, Y^C, B^C per body, then J, dV, dA, dAv, dFq, dFv, dFa per dof).
    The pass is linear in the accelerations: with a^q_i = a^q_λ(i) + J_i qdd_i (a^q_0 = 0), dA^q_j = a^q_λ(j) x J_j
    and F^q_j = Y^C_j a^q_λ(j) + sum over the dofs c of subtree(j) of (Y^C J)_c qdd_c (dFa: Y^C of c's body
    times J_c), its terms are J_i^T (Y^C_j dA^q_j + [j != i] J_j x* F^q_j) for j in subtree(i) and
    (Y^C_i J_i)^T dA^q_j for j an ancestor of i (module docstring of rnea_derivatives)."""
    nb = mi[H_NB]
    nv = mi[H_NVT]
    # the pass's fields (layout.DERIV_*) that are read here, and those whose places are reused: a (no longer
    # needed) holds a^q, F (already read for tau0) F^q, dV dA^q_j, dA Y^C_j dA^q_j and dAv that plus J_j x* F^q_j
    _, _, _, aq, Fq, Yc, _, J, dAq, Xa, Xt, _, _, Fa, _, _, _, _, _, _, _ = scratch_views(s, nb, nv)
    for i in range(nb):
        p = parent(mi, i)
        for k in range(6):
            aq[i, k] = aq[p, k] if p >= 0 else 0.0
            Fq[i, k] = 0.0
        for c in range(first_dof(mi, i), first_dof(mi, i) + dof_count(mi, i)):
            if p >= 0:
                _cross_m(aq[p], J[c], dAq[c])
            else:
                for k in range(6):
                    dAq[c, k] = 0.0
            for k in range(6):
                aq[i, k] += J[c, k] * qdd[c]
    for i in range(nb - 1, -1, -1):   # F^q: the dofs' part summed over the subtree, then Y^C_i a^q_λ(i)
        p = parent(mi, i)
        for c in range(first_dof(mi, i), first_dof(mi, i) + dof_count(mi, i)):
            for k in range(6):
                Fq[i, k] += Fa[c, k] * qdd[c]
        if p >= 0:
            for k in range(6):
                Fq[p, k] += Fq[i, k]
    for i in range(nb):
        p = parent(mi, i)
        if p >= 0:
            _mul6(Yc[i], aq[p], Xt[0])   # (a scratch row, refilled below)
            for k in range(6):
                Fq[i, k] += Xt[0, k]
    for i in range(nb):
        for c in range(first_dof(mi, i), first_dof(mi, i) + dof_count(mi, i)):
            _mul6(Yc[i], dAq[c], Xa[c])
            _cross_f(J[c], Fq[i], Xt[c])
            for k in range(6):
                Xt[c, k] += Xa[c, k]
    for i in range(nb):
        vi = first_dof(mi, i)
        nvi = dof_count(mi, i)
        end = subtree_end(mi, i)   # the subtree's dofs follow the joint's own (depth-first order)
        for m in range(vi, vi + nvi):
            for c in range(vi, end):
                X = Xa if c < vi + nvi else Xt
                t = 0.0
                for k in range(6):
                    t += J[m, k] * X[c, k]
                dq[m, c] += t
            anc = parent(mi, i)
            while anc >= 0:
                for c in range(first_dof(mi, anc), first_dof(mi, anc) + dof_count(mi, anc)):
                    t = 0.0
                    for k in range(6):
                        t += Fa[m, k] * dAq[c, k]
                    dq[m, c] += t
                anc = parent(mi, anc)


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
    st = rnea_derivatives_kernel(mi, mf, q, qd, qdd, fx, ddq, ddv, H, s, 0)   # at qdd = 0: H and tau0
    if st != 0:
        return st
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
    add_qdd_terms(mi, qdd, ddq, s)
    _solve_rows(H, lam_i, ddq, ddv, n)
    _inverse(mi, H, lam_i, Minv, n)
    return 0
