"""Derivatives of the forward dynamics (Carpentier & Mansard, RSS 2018, as Pinocchio's computeABADerivatives,
but with H^-1 from a dense Cholesky factor instead of the paper's dedicated pass): differentiating
ID(q, qd, FD(q, qd, tau)) = tau at qdd = FD(q, qd, tau) gives

    dqdd/dq = -H^-1 dID/dq,   dqdd/dqd = -H^-1 dID/dqd,   dqdd/dtau = H^-1,

with qdd from the articulated-body algorithm (aba.py, Table 7.1), dID/dq, dID/dqd and H = dID/dqdd from
the analytic RNEA derivatives (rnea_derivatives.py), and H^-1 from the Cholesky factor H = L L^T
(Golub & Van Loan Alg. 4.2.1), H^-1 = L^-T L^-1, all in one compiled call (tree coordinates; a model with
mimic joints takes the reduced system G^T H G in derivatives.py instead).
"""
from __future__ import annotations

import math

from .._jit import njit, types
from ..layout import BODY_I, HEADER_I, HF_TOL, H_NB, H_NVT, J_NV, J_VI
from ._common import F1, F2, FASTMATH, I1, SINGULAR
from .aba import aba_kernel
from .rnea_derivatives import rnea_derivatives_kernel

OVERFLOW = 5   # dispatch.OVERFLOW (a finite input whose result is not finite)


@njit(cache=True, inline="always")
def _cholesky_inverse(H, Minv, n, tol):
    """Minv = H^-1 for a symmetric positive definite H (L overwrites H's lower triangle). Returns -1, or
    the first index whose pivot is <= tol."""
    for j in range(n):
        d = H[j, j]
        for k in range(j):
            d -= H[j, k] * H[j, k]
        if not (d > tol):
            return j
        d = math.sqrt(d)
        H[j, j] = d
        for i in range(j + 1, n):
            t = H[i, j]
            for k in range(j):
                t -= H[i, k] * H[j, k]
            H[i, j] = t / d
    for c in range(n):   # Minv[:, c] = L^-T (L^-1 e_c): forward then back substitution
        for i in range(n):
            t = 1.0 if i == c else 0.0
            for k in range(i):
                t -= H[i, k] * Minv[k, c]
            Minv[i, c] = t / H[i, i]
        for i in range(n - 1, -1, -1):
            t = Minv[i, c]
            for k in range(i + 1, n):
                t -= H[k, i] * Minv[k, c]
            Minv[i, c] = t / H[i, i]
    return -1


@njit(cache=True, inline="always")
def _neg_mul(M, X, T, n):
    """X = -M X (T: n x n scratch)."""
    for i in range(n):
        for j in range(n):
            t = 0.0
            for k in range(n):
                t += M[i, k] * X[k, j]
            T[i, j] = -t
    for i in range(n):
        for j in range(n):
            X[i, j] = T[i, j]


@njit(types.int64(I1, F1, F1, F1, F1, F1, F1, F2, F2, F2, F2, F2, F1, F1), cache=True, fastmath=FASTMATH)
def aba_derivatives_kernel(mi, mf, q, qd, tau, fx, qdd, ddq, ddv, Minv, H, T, s, w):
    """(ddq, ddv, Minv) = (dqdd/dq, dqdd/dqd, dqdd/dtau) at qdd = FD(q, qd, tau, f^x) (module docstring);
    H, T: nvt x nvt scratch, s: rnea_derivatives.scratch_size, w: the ABA's work array."""
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
    k = _cholesky_inverse(H, Minv, n, mf[HF_TOL])
    if k >= 0:   # the body whose joint owns pivot k (its subtree has no inertia about that axis)
        for i in range(mi[H_NB]):
            ii = HEADER_I + BODY_I * i
            if mi[ii + J_VI] <= k < mi[ii + J_VI] + mi[ii + J_NV]:
                return SINGULAR * 100000000 + i
        return SINGULAR * 100000000
    _neg_mul(Minv, ddq, T, n)
    _neg_mul(Minv, ddv, T, n)
    return 0
