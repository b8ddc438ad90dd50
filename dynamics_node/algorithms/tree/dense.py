"""Small dense factorisations and solves of the kernels, written without allocation (so that the contact
forward dynamics runs as one C callback, contact.contact_fd_c): every array they need is given, or cut
from the scratch arrays ``s`` (floats) and ``si`` (ints) of the sizes ``*_scratch(n)`` says (entries beyond
those are not touched).

    cholesky       A = L L^T of a symmetric positive definite A, the one dense Cholesky factor of the
                   package (the reduced mass matrix of mimic joints, H and A = Y^T Y of the closed loops'
                   Method 2, the operational-space inertia); cholesky_solve, cholesky_solve_rows its solves
    psd_minnorm    the minimum-norm solution of a symmetric positive semidefinite system (Cholesky with
                   diagonal pivoting): the contact problem's singular A = T^T H^-1 T (Eq. 11.35) when
                   several contacts share the arm's few degrees of freedom (four corners of a box)
    lstsq_minnorm  the minimum-norm least-squares solution of a square system of any rank (Householder
                   QR with column pivoting, then a QR of the trapezoid's transpose: the complete
                   orthogonal decomposition of LAPACK's gelsy): the Newton steps of contact.ncp.mode_solve
"""
from __future__ import annotations

import math

from ..._jit import njit


@njit(cache=True, inline="always")
def cholesky(A, L, n, tol):
    """L L^T = A for the symmetric positive definite n x n A (its lower triangle is read, L's lower triangle
    written; L may be A: in place). Returns -1, or the first column whose pivot is not above tol."""
    for j in range(n):
        d = A[j, j]
        for k in range(j):
            d -= L[j, k] * L[j, k]
        if not d > tol:
            return j
        d = math.sqrt(d)
        L[j, j] = d
        for i in range(j + 1, n):
            t = A[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t / d
    return -1


@njit(cache=True, inline="always")
def cholesky_solve(L, x, n):
    """x <- L^-T L^-1 x (A x = b with A = L L^T, b given in x)."""
    for i in range(n):
        t = x[i]
        for k in range(i):
            t -= L[i, k] * x[k]
        x[i] = t / L[i, i]
    for i in range(n - 1, -1, -1):
        t = x[i]
        for k in range(i + 1, n):
            t -= L[k, i] * x[k]
        x[i] = t / L[i, i]


@njit(cache=True, inline="always")
def cholesky_solve_rows(L, X, n, scale):
    """X <- scale L^-T L^-1 X, every column of X at once (row operations over contiguous memory)."""
    if scale != 1.0:
        for i in range(n):
            for c in range(X.shape[1]):
                X[i, c] *= scale
    for i in range(n):                 # L y = x
        for k in range(i):
            a = L[i, k]
            for c in range(X.shape[1]):
                X[i, c] -= a * X[k, c]
        d = 1.0 / L[i, i]
        for c in range(X.shape[1]):
            X[i, c] *= d
    for i in range(n - 1, -1, -1):     # L^T x = y
        for k in range(i + 1, n):
            a = L[k, i]
            for c in range(X.shape[1]):
                X[i, c] -= a * X[k, c]
        d = 1.0 / L[i, i]
        for c in range(X.shape[1]):
            X[i, c] *= d


@njit(cache=True, pure=True)
def psd_scratch(n):
    """(floats, ints) of psd_minnorm's scratch for an n x n M."""
    return 3 * n * n + 2 * n, n


@njit(cache=True)
def psd_minnorm(M, r, x, s, si):
    """x = the minimum-norm solution of M x = r for symmetric positive semidefinite M (n x n): Cholesky
    with diagonal pivoting M = P L L^T P^T of rank m, the basic solution, then its component in the
    null space N = P [-L11^-T L21^T; 1] removed. Returns False when r is not in M's range."""
    n = M.shape[0]
    L = s[:n * n].reshape((n, n))
    y = s[n * n:n * n + n]
    piv = si[:n]
    big = 0.0
    for i in range(n):
        piv[i] = i
        y[i] = 0.0
        big = max(big, M[i, i])
        for c in range(n):
            L[i, c] = M[i, c]
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
    for i in range(m):  # L11 L11^T y = (P^T r)[:m]
        t = r[piv[i]]
        for c in range(i):
            t -= L[i, c] * y[c]
        y[i] = t / L[i, i]
    for i in range(m - 1, -1, -1):
        t = y[i]
        for c in range(i + 1, m):
            t -= L[c, i] * y[c]
        y[i] = t / L[i, i]
    nn = n - m
    if nn > 0:  # Z = [-L11^-T L21^T; 1] (n x nn, pivoted order); y -= Z (Z^T Z)^-1 Z^T y
        o = n * n + n
        Z = s[o:o + n * nn].reshape((n, nn))
        o += n * nn
        G = s[o:o + nn * nn].reshape((nn, nn))
        g = s[o + nn * nn:o + nn * nn + nn]
        for c in range(nn):
            for i in range(m, n):
                Z[i, c] = 1.0 if i == m + c else 0.0
            for i in range(m - 1, -1, -1):
                t = -L[m + c, i]
                for u in range(i + 1, m):
                    t -= L[u, i] * Z[u, c]
                Z[i, c] = t / L[i, i]
        for c in range(nn):  # G = Z^T Z, g = Z^T y
            t = 0.0
            for i in range(n):
                t += Z[i, c] * y[i]
            g[c] = t
            for e in range(nn):
                t = 0.0
                for i in range(n):
                    t += Z[i, c] * Z[i, e]
                G[c, e] = t
        for c in range(nn):  # G is symmetric positive definite: Cholesky in place
            for u in range(c):
                G[c, c] -= G[c, u] * G[c, u]
            G[c, c] = math.sqrt(G[c, c])
            for i in range(c + 1, nn):
                for u in range(c):
                    G[i, c] -= G[i, u] * G[c, u]
                G[i, c] /= G[c, c]
        for c in range(nn):
            for u in range(c):
                g[c] -= G[c, u] * g[u]
            g[c] /= G[c, c]
        for c in range(nn - 1, -1, -1):
            for u in range(c + 1, nn):
                g[c] -= G[u, c] * g[u]
            g[c] /= G[c, c]
        for i in range(n):
            t = 0.0
            for c in range(nn):
                t += Z[i, c] * g[c]
            y[i] -= t
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


@njit(cache=True, pure=True)
def lstsq_scratch(n):
    """(floats, ints) of lstsq_minnorm's scratch for an n x n J."""
    return 2 * n * n + 5 * n, n


@njit(cache=True, inline="always")
def _reflect(V, p, lo, n, b, y):
    """y[lo:] -= b (v . y[lo:]) v with v = V[p, lo:] (a Householder reflector I - b v v^T)."""
    t = 0.0
    for i in range(lo, n):
        t += V[p, i] * y[i]
    t *= b
    for i in range(lo, n):
        y[i] -= t * V[p, i]


@njit(cache=True)
def lstsq_minnorm(J, rhs, x, rcond, s, si):
    """x = the minimum-norm least-squares solution of J x = rhs (n x n, any rank); directions whose
    pivot |R_pp| is at most rcond |R_00| count as singular (numpy.linalg.lstsq's rcond, judged on the
    rank-revealing QR instead of the singular values). J P = Q [R11 R12; 0 0] with Householder
    reflectors and column pivoting, rank r; then [R11 R12]^T = W S (a QR of the trapezoid's
    transpose), so that the least-squares solutions are P y with [R11 R12] y = (Q^T rhs)[:r], and the
    one of minimum norm is y = W [S^-T (Q^T rhs)[:r]; 0]. Returns r."""
    n = J.shape[0]
    T = s[:n * n].reshape((n, n))  # T[j] = column j of J P: reflectors at j >= p, R's column above
    U = s[n * n:2 * n * n].reshape((n, n))  # U[i] = row i of [R11 R12]: the second QR's reflectors
    o = 2 * n * n
    rd = s[o:o + n]  # the diagonal of R, then of S
    be = s[o + n:o + 2 * n]
    be2 = s[o + 2 * n:o + 3 * n]
    c = s[o + 3 * n:o + 4 * n]
    y = s[o + 4 * n:o + 5 * n]
    piv = si[:n]
    for j in range(n):
        piv[j] = j
        c[j] = rhs[j]
        for i in range(n):
            T[j, i] = J[i, j]
    r = 0
    tol = 0.0
    for p in range(n):
        best = -1.0
        bj = p
        for j in range(p, n):  # the remaining column of largest norm
            t = 0.0
            for i in range(p, n):
                t += T[j, i] * T[j, i]
            if t > best:
                best = t
                bj = j
        nrm = math.sqrt(best)
        if p == 0:
            tol = rcond * nrm
        if not nrm > tol:  # the rest is singular (or J is zero, or not finite)
            break
        if bj != p:
            for i in range(n):
                T[p, i], T[bj, i] = T[bj, i], T[p, i]
            piv[p], piv[bj] = piv[bj], piv[p]
        alpha = -nrm if T[p, p] >= 0.0 else nrm
        T[p, p] -= alpha
        vv = 0.0
        for i in range(p, n):
            vv += T[p, i] * T[p, i]
        be[p] = 2.0 / vv
        rd[p] = alpha
        for j in range(p + 1, n):
            _reflect(T, p, p, n, be[p], T[j])
        _reflect(T, p, p, n, be[p], c)
        r += 1
    for i in range(n):
        y[i] = 0.0
    if r == n:  # full rank: R y = c by back-substitution (R[i, j] = T[j, i] above the diagonal)
        for i in range(n - 1, -1, -1):
            t = c[i]
            for j in range(i + 1, n):
                t -= T[j, i] * y[j]
            y[i] = t / rd[i]
    elif r > 0:
        for i in range(r):  # U[i] = row i of [R11 R12]
            for j in range(n):
                U[i, j] = 0.0 if j < i else (rd[i] if j == i else T[j, i])
        for i in range(r):  # its transpose = W S: reflectors in U[i, i:], S[l, i] = U[i, l] above
            nrm = 0.0
            for l in range(i, n):
                nrm += U[i, l] * U[i, l]
            nrm = math.sqrt(nrm)
            alpha = -nrm if U[i, i] >= 0.0 else nrm
            U[i, i] -= alpha
            vv = 0.0
            for l in range(i, n):
                vv += U[i, l] * U[i, l]
            be2[i] = 2.0 / vv if vv > 0.0 else 0.0
            rd[i] = alpha
            for j in range(i + 1, r):
                _reflect(U, i, i, n, be2[i], U[j])
        for i in range(r):  # S^T z = c[:r]
            t = c[i]
            for l in range(i):
                t -= U[i, l] * y[l]
            y[i] = t / rd[i]
        for i in range(r - 1, -1, -1):  # y = W [z; 0]
            _reflect(U, i, i, n, be2[i], y)
    for j in range(n):
        x[piv[j]] = y[j]
    return r
