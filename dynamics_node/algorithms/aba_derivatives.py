"""Derivatives of the forward dynamics (Carpentier & Mansard, RSS 2018, as Pinocchio's computeABADerivatives,
but with H^-1 applied through the sparse L^T D L factor of H instead of the paper's dedicated pass): differentiating
ID(q, qd, FD(q, qd, tau)) = tau at qdd = FD(q, qd, tau) gives

    dqdd/dq = -H^-1 dID/dq,   dqdd/dqd = -H^-1 dID/dqd,   dqdd/dtau = H^-1,

with qdd from the articulated-body algorithm (aba.py, Table 7.1), dID/dq, dID/dqd and H = dID/dqdd from
the analytic RNEA derivatives (rnea_derivatives.py; H comes from the same pass, no CRBA), and the products
with H^-1 by the factor H = L^T D L over the expanded parent array (Featherstone §6.5, Tables 6.3 and 6.5:
branch-induced sparsity, no fill-in), its solves applied to whole rows of the right-hand sides (-dID/dq,
-dID/dqd and the identity) at once, all in one compiled call (tree coordinates; a model with mimic joints
takes the dense reduced system G^T H G in derivatives.py instead).
"""
from __future__ import annotations

from .._jit import carray, cfunc, njit, types
from ..layout import BODY_I, HEADER_I, HF_TOL, H_NB, H_NVT, J_NV, J_PARENT, J_VI
from ._common import BAD_LENGTH, F1, F2, FASTMATH, I1, SIG3, SINGULAR, model_from_pointers
from .aba import aba_kernel
from .rnea_derivatives import S_BODY, S_CONST, S_DOF, SCRATCH, rnea_derivatives_kernel

OVERFLOW = 5   # dispatch.OVERFLOW (a finite input whose result is not finite)


@njit(cache=True, inline="always")
def _dof_parents(mi, lam):
    """lam = λ' (Featherstone §6.5, topology.dof_parents: the expanded parent array, -1 for the base) as
    floats (the kernel's scratch is float): a joint's first dof has the last dof of the nearest ancestor
    that has dofs, every other dof the one before it."""
    for i in range(mi[H_NB]):
        ii = HEADER_I + BODY_I * i
        vi = mi[ii + J_VI]
        p = mi[ii + J_PARENT]
        while p >= 0 and mi[HEADER_I + BODY_I * p + J_NV] == 0:
            p = mi[HEADER_I + BODY_I * p + J_PARENT]
        first = -1.0 if p < 0 else float(mi[HEADER_I + BODY_I * p + J_VI] + mi[HEADER_I + BODY_I * p + J_NV] - 1)
        for c in range(vi, vi + mi[ii + J_NV]):
            lam[c] = first if c == vi else c - 1.0


@njit(cache=True, inline="always")
def _ltdl(H, lam, n, tol):
    """In-place H = L^T D L over λ' (Featherstone Table 6.3, ltdl.ltdl_factor with a float λ'): no fill-in
    (branch-induced sparsity, §6.4). Returns -1, or the first index whose pivot is <= tol."""
    for k in range(n - 1, -1, -1):
        if H[k, k] <= tol:
            return k
        i = int(lam[k])
        while i != -1:
            a = H[k, i] / H[k, k]
            j = i
            while j != -1:
                H[i, j] -= a * H[k, j]
                j = int(lam[j])
            H[k, i] = a
            i = int(lam[i])
    return -1


@njit(cache=True, inline="always")
def _solve_rows(L, lam, X, Y, Z, n):
    """(X, Y, Z) <- (-H^-1 X, -H^-1 Y, H^-1 Z) with H = L^T D L (Featherstone Table 6.5, ltdl.ltdl_solve,
    applied to all the columns of the three right-hand sides at once: one walk over λ', each step a row
    operation over contiguous memory)."""
    for i in range(n - 1, -1, -1):   # L^T
        j = int(lam[i])
        while j != -1:
            a = L[i, j]
            for c in range(n):
                X[j, c] -= a * X[i, c]
                Y[j, c] -= a * Y[i, c]
                Z[j, c] -= a * Z[i, c]
            j = int(lam[j])
    for i in range(n):                # D
        d = 1.0 / L[i, i]
        for c in range(n):
            X[i, c] *= -d
            Y[i, c] *= -d
            Z[i, c] *= d
    for i in range(n):                # L
        j = int(lam[i])
        while j != -1:
            a = L[i, j]
            for c in range(n):
                X[i, c] -= a * X[j, c]
                Y[i, c] -= a * Y[j, c]
                Z[i, c] -= a * Z[j, c]
            j = int(lam[j])


@njit(types.int64(I1, F1, F1, F1, F1, F1, F1, F2, F2, F2, F2, F1, F1, F1), cache=True, fastmath=FASTMATH)
def aba_derivatives_kernel(mi, mf, q, qd, tau, fx, qdd, ddq, ddv, Minv, H, lam, s, w):
    """(ddq, ddv, Minv) = (dqdd/dq, dqdd/dqd, dqdd/dtau) at qdd = FD(q, qd, tau, f^x) (module docstring);
    H: nvt x nvt scratch, lam: nvt floats, s: rnea_derivatives.scratch_size, w: the ABA's work array."""
    e = w[0:0]
    st = aba_kernel(mi, mf, q, qd, tau, fx, qdd, w, mi[0:0], e, e)
    if st != 0:
        return st
    for k in range(qdd.shape[0]):
        if not (qdd[k] - qdd[k] == 0.0):
            return OVERFLOW * 100000000   # finite inputs, qdd not finite: the caller names the inputs
    st = rnea_derivatives_kernel(mi, mf, q, qd, qdd, fx, ddq, ddv, H, s, 0)
    if st != 0:
        return st
    n = mi[H_NVT]
    _dof_parents(mi, lam)
    k = _ltdl(H, lam, n, mf[HF_TOL])
    if k >= 0:   # the body whose joint owns pivot k (its subtree has no inertia about that axis)
        for i in range(mi[H_NB]):
            ii = HEADER_I + BODY_I * i
            if mi[ii + J_VI] <= k < mi[ii + J_VI] + mi[ii + J_NV]:
                return SINGULAR * 100000000 + i
        return SINGULAR * 100000000
    for i in range(n):
        for j in range(n):
            Minv[i, j] = 1.0 if i == j else 0.0
    _solve_rows(H, lam, ddq, ddv, Minv, n)
    return 0


# the fast front's scratch after the ABA's work array: the RNEA derivatives' scratch, qdd, λ' and H
FD_EXTRA = (SCRATCH[0], SCRATCH[1] + 2, 1, SCRATCH[3])


@cfunc(SIG3, cache=True)
def aba_derivatives_c(mip, mfp, qp, nq, qdp, nqd, taup, ntau, outp, wp, nw):
    """(dqdd/dq, dqdd/dqd, dqdd/dtau) into out (3 nvt^2); w: the ABA's work array, then FD_EXTRA."""
    mi, mf, n = model_from_pointers(mip, mfp)
    w = carray(wp, (nw,))
    need = S_BODY * mi[H_NB] + (S_DOF + 2) * n + n * n + S_CONST
    if nw < need:
        return BAD_LENGTH * 100000000
    b = nw - need
    out = carray(outp, (3 * n * n,))
    return aba_derivatives_kernel(mi, mf, carray(qp, (nq,)), carray(qdp, (nqd,)), carray(taup, (ntau,)), w[0:0],
                                  w[b:b + n], out[0:n * n].reshape((n, n)), out[n * n:2 * n * n].reshape((n, n)),
                                  out[2 * n * n:3 * n * n].reshape((n, n)), w[b + n:b + n + n * n].reshape((n, n)),
                                  w[b + n + n * n:b + 2 * n + n * n], w[b + 2 * n + n * n:nw], w[0:b])
