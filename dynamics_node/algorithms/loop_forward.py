"""Forward dynamics of a closed-loop system (Featherstone §8.5, Method 2, Eqs. 8.34-8.41).

Two implementations of the same equations: closed_loop_forward_dynamics runs one compiled kernel
(the core's CRBA and RNEA kernels, then Table 8.4's loop terms from the RNEA's body velocities and
accelerations, Method 2 on the sparse L^T D L of §6.5); the forward dynamics of models with mimic
joints or external forces (_closed_loop_fd_generic), like the other loop modules, builds the loop
terms from the core's public API (link_pose, jacobian, link_velocity, bias_acceleration,
mass_matrix, bias_forces, inverse_dynamics), whose 6-vectors are linear first, world axes, about
the link origin.  The tests check that both agree.
"""
from __future__ import annotations

import math

import numpy as np
from .._jit import njit, types

from ..errors import SingularMassMatrixError
from .loop_constraints import _assemble, _check_stab, _constrained_index, _core, _require_loops, _vec

# the core's compiled kernels (tree coordinates, packed model)
from ._common import check as _check, A_TAU as _A_TAU, raise_status as _raise_status
from ._common import F1, I1, unpack, work_views as _work_views
from .ltdl import dof_parents as _dof_parents, ltdl_factor as _ltdl_factor, ltdl_solve as _ltdl_solve
from .crba import crba_kernel as _crba_kernel
from .rnea import rnea_kernel as _rnea_kernel


# ---------------------------------------------------------------------------------------------
# forward dynamics (§8.5, Method 2)


@njit(cache=True, inline="always")
def _cholesky_solve(L, b, y, x):
    """x = (L L^T)^-1 b for a lower-triangular Cholesky factor L: L y = b, then L^T x = y (y and x
    may be the same array)."""
    n = b.shape[0]
    for i in range(n):
        t = b[i]
        for p in range(i):
            t -= L[i, p] * y[p]
        y[i] = t / L[i, i]
    for i in range(n - 1, -1, -1):
        t = y[i]
        for p in range(i + 1, n):
            t -= L[p, i] * x[p]
        x[i] = t / L[i, i]


@njit(cache=True)
def _lambda_solve(A, b, lam, LA, y):
    """A lambda = b for the small symmetric positive semi-definite A of Eq. 8.37: Cholesky when A is
    positive definite (Eq. 8.40), else the pseudo-inverse (minimum-norm lambda, Eq. 8.41, z = 0)."""
    m = A.shape[0]
    amax = 0.0
    for i in range(m):
        if A[i, i] > amax:
            amax = A[i, i]
    full = True
    for j in range(m):
        s = A[j, j]
        for p in range(j):
            s -= LA[j, p] * LA[j, p]
        if not (s > 1e-10 * amax):
            full = False
            break
        d = math.sqrt(s)
        LA[j, j] = d
        for i in range(j + 1, m):
            t = A[i, j]
            for p in range(j):
                t -= LA[i, p] * LA[j, p]
            LA[i, j] = t / d
    if full:
        _cholesky_solve(LA, b, y, lam)
        return
    w, V = np.linalg.eigh(A)
    wmax = max(w[m - 1], 0.0)
    for i in range(m):
        lam[i] = 0.0
    for e in range(m):
        if w[e] > wmax * 1e-10 and w[e] > 1e-300:
            t = 0.0
            for i in range(m):
                t += V[i, e] * b[i]
            t /= w[e]
            for i in range(m):
                lam[i] += V[i, e] * t


@njit(cache=True)
def _method2(H, rhs, K, kk, qdd, lam):
    """Featherstone §8.5 Method 2 (its six steps) with a dense H: H = L L^T (step 1); Y = L^-1 K^T,
    z = L^-1 tau' (step 3); A = Y^T Y (Eq. 8.38), b = k + k_stab - Y^T z (Eq. 8.39, step 4);
    A lambda = b (step 5, :func:`_lambda_solve`); H qdd = tau' + K^T lambda (step 6).
    Returns 0, or 1 if H is not positive definite.  (The compiled FD uses the sparse variant.)"""
    n = H.shape[0]
    m = K.shape[0]
    L = np.zeros((n, n))
    for j in range(n):
        s = H[j, j]
        for p in range(j):
            s -= L[j, p] * L[j, p]
        if not (s > 1e-300):
            return 1
        d = math.sqrt(s)
        L[j, j] = d
        for i in range(j + 1, n):
            t = H[i, j]
            for p in range(j):
                t -= L[i, p] * L[j, p]
            L[i, j] = t / d
    Y = np.empty((n, m))
    z = np.empty(n)
    for i in range(n):
        t = rhs[i]
        for p in range(i):
            t -= L[i, p] * z[p]
        z[i] = t / L[i, i]
        for c in range(m):
            t = K[c, i]
            for p in range(i):
                t -= L[i, p] * Y[p, c]
            Y[i, c] = t / L[i, i]
    A = np.empty((m, m))
    b = np.empty(m)
    for r in range(m):
        t = kk[r]
        for i in range(n):
            t -= Y[i, r] * z[i]
        b[r] = t
        for c in range(r, m):
            t = 0.0
            for i in range(n):
                t += Y[i, r] * Y[i, c]
            A[r, c] = t
            A[c, r] = t
    _lambda_solve(A, b, lam, np.zeros((m, m)), np.empty(m))
    for i in range(n):
        t = rhs[i]
        for c in range(m):
            t += K[c, i] * lam[c]
        z[i] = t
    _cholesky_solve(L, z, qdd, qdd)
    return 0


def _solve_method2(H, rhs, K, kk):
    """Python entry of :func:`_method2` (generic path)."""
    n = H.shape[0]
    qdd = np.empty(n)
    lam = np.empty(K.shape[0])
    st = _method2(np.ascontiguousarray(H, dtype=float), np.ascontiguousarray(rhs, dtype=float),
                  np.ascontiguousarray(K, dtype=float).reshape(K.shape[0], n),
                  np.ascontiguousarray(kk, dtype=float), qdd, lam)
    if st:
        raise SingularMassMatrixError("the joint-space inertia H of the spanning tree is singular "
                                      "(closed-loop forward dynamics needs H^-1, Featherstone §8.5)")
    return qdd, lam


# ---------------------------------------------------------------------------------------------
# compiled fast path of closed_loop_forward_dynamics: one kernel call does RNEA (C), CRBA (H), the
# joint-frame poses, Jacobians and bias accelerations of every loop (Table 8.4), Table 8.1's delta,
# Baumgarte, and Method 2, using the core's kernels on its packed model.

_TYPE_CODE = {"fixed": 0, "revolute": 1, "continuous": 1, "prismatic": 2, "cylindrical": 3,
              "spherical": 4, "planar": 5}
_LI = 10  # per loop ints: body_p, body_s, type, nc, constrained indices (6)
_LF = 24  # per loop floats: p_p (3), R_p (9), p_s (3), R_s (9): joint frame in body coordinates

@njit(cache=True)
def _delta_code(code, Rp, op, Rs, os, out, idx, nc):
    """Table 8.1 on ^sX_p built from the aligned joint frames (Rp, op) and (Rs, os) in the world;
    same formulas as _position_error.  out[0:nc] ordered like T's columns (idx)."""
    # R_ps = Rp^T Rs, r = Rp^T (os - op); X = [[E, 0], [-E r x, E]] with E = R_ps^T
    E = np.empty((3, 3))
    for a in range(3):
        for b in range(3):
            t = 0.0
            for k in range(3):
                t += Rp[k, b] * Rs[k, a]  # E[a, b] = (Rp^T Rs)^T[a, b] = sum_k Rs[k, a] Rp[k, b]
            E[a, b] = t
    r = np.empty(3)
    for a in range(3):
        r[a] = Rp[0, a] * (os[0] - op[0]) + Rp[1, a] * (os[1] - op[1]) + Rp[2, a] * (os[2] - op[2])
    X = np.zeros((6, 6))
    for a in range(3):
        for b in range(3):
            X[a, b] = E[a, b]
            X[3 + a, 3 + b] = E[a, b]
    # -E skew(r)
    sk = np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])
    for a in range(3):
        for b in range(3):
            t = 0.0
            for k in range(3):
                t -= E[a, k] * sk[k, b]
            X[3 + a, b] = t
    d = np.zeros(6)
    if code == 0:
        d[0] = 0.5 * (X[1, 2] - X[2, 1])
        d[1] = 0.5 * (X[2, 0] - X[0, 2])
        d[2] = 0.5 * (X[0, 1] - X[1, 0])
        d[3] = 0.5 * (X[4, 2] - X[5, 1])
        d[4] = 0.5 * (X[5, 0] - X[3, 2])
        d[5] = 0.5 * (X[3, 1] - X[4, 0])
    elif code == 1:
        d[0], d[1], d[3], d[4] = X[1, 2], -X[0, 2], X[4, 2], -X[3, 2]
        d[5] = X[3, 0] * X[1, 0] + X[3, 1] * X[1, 1]
    elif code == 2:
        d[0] = 0.5 * (X[1, 2] - X[2, 1])
        d[1] = 0.5 * (X[2, 0] - X[0, 2])
        d[2] = 0.5 * (X[0, 1] - X[1, 0])
        d[3], d[4] = X[4, 2], -X[3, 2]
    elif code == 3:
        d[0], d[1], d[3], d[4] = X[1, 2], -X[0, 2], X[4, 2], -X[3, 2]
    elif code == 4:
        d[3] = X[4, 0] * X[2, 0] + X[4, 1] * X[2, 1] + X[4, 2] * X[2, 2]
        d[4] = X[5, 0] * X[0, 0] + X[5, 1] * X[0, 1] + X[5, 2] * X[0, 2]
        d[5] = X[3, 0] * X[1, 0] + X[3, 1] * X[1, 1] + X[3, 2] * X[1, 2]
    else:
        d[0], d[1] = X[1, 2], -X[0, 2]
        d[5] = r[2]
    for c in range(nc):
        i = idx[c]
        out[c] = d[3 + i] if i < 3 else d[i - 3]


@njit(cache=True)
def _method2_sparse(H, lamp, tol, rhs, K, kk, qdd, lam, sc):
    """Method 2 (§8.5) with H = L^T D L over the expanded parent array (Featherstone §6.5, Tables
    6.3 and 6.5, no fill-in): X = H^-1 K^T and x0 = H^-1 (tau - C) by sparse back-substitution,
    A = K X (Eq. 8.38), b = k + k_stab - K x0 (Eq. 8.39), lambda from A lambda = b, and
    qdd = x0 + X lambda (Eq. 8.34 solved for qdd).  H is factorised in place.  Returns -1, or the
    first dof whose pivot is <= tol (H singular)."""
    n = H.shape[0]
    m = K.shape[0]
    k = _ltdl_factor(H, lamp, tol)
    if k >= 0:
        return k
    X = sc[0:n * m].reshape((m, n))
    o = n * m
    A = sc[o:o + m * m].reshape((m, m))
    o += m * m
    LA = sc[o:o + m * m].reshape((m, m))
    o += m * m
    b = sc[o:o + m]
    o += m
    y = sc[o:o + m]
    for c in range(m):
        xc = X[c]
        for i in range(n):
            xc[i] = K[c, i]
        _ltdl_solve(H, lamp, xc)
    for i in range(n):
        qdd[i] = rhs[i]
    _ltdl_solve(H, lamp, qdd)
    for r in range(m):
        t = kk[r]
        for i in range(n):
            t -= K[r, i] * qdd[i]
        b[r] = t
        for c in range(r, m):
            t1 = 0.0
            t2 = 0.0
            for i in range(n):
                t1 += K[r, i] * X[c, i]
                t2 += K[c, i] * X[r, i]
            A[r, c] = 0.5 * (t1 + t2)
            A[c, r] = A[r, c]
    _lambda_solve(A, b, lam, LA, y)
    for c in range(m):
        lc = lam[c]
        for i in range(n):
            qdd[i] += X[c, i] * lc
    return -1


@njit(types.int64(I1, F1, F1, F1, F1, I1, F1, types.float64, F1), cache=True)  # others: TypeError
def _fd_kernel(mi, mf, q, qd, tau, LI, LF, alpha, buf):
    """Closed-loop forward dynamics on the packed tree (Featherstone §8.5-8.7).

    CRBA gives H (Table 6.2); the RNEA with qdd = 0 gives C (Eq. 6.2) and leaves in the work array
    every body's transform, velocity v_i and velocity-product acceleration a_i^vp - a_g (Table 8.2,
    body coordinates; the -a_g offset cancels in a_s - a_p, Table 8.2's footnote).  The loop terms
    follow Table 8.4 in world axes at the successor joint origin o: K by its while loop over the
    loop's path, k by Eq. 8.47, k_stab by Eq. 8.22, delta by Table 8.1.  Method 2 solves.
    buf = [qdd (nv) | wrenches (6 N_L) | H | C | K | k | lambda].  Returns a core status code,
    or 1 if H is singular."""
    nb, nvt, nqt, J, B, D = unpack(mi, mf)
    nv = nvt
    nl = LI[0]
    m = LI[1]
    w = np.empty(LI[2])
    o = 0
    qdd = buf[o:o + nv]
    o += nv
    Wr = buf[o:o + 6 * nl]
    o += 6 * nl
    Hf = buf[o:o + nv * nv]
    o += nv * nv
    C = buf[o:o + nv]
    o += nv
    Kf = buf[o:o + m * nv]
    o += m * nv
    kk = buf[o:o + m]
    o += m
    lam = buf[o:o + m]
    st = _crba_kernel(mi, mf, q, Hf, w)
    if st != 0:
        return st
    zero = np.zeros(nv)
    st = _rnea_kernel(mi, mf, q, qd, zero, np.zeros(0), C, w)
    if st != 0:
        return st
    st = _check(tau, nv, _A_TAU)
    if st != 0:
        return st
    E, r, v, a, f, c, IA, pA, Rw, pw, Dinv, U, u, d, tmp = _work_views(w, nb, nvt)
    # world poses of the bodies: R_i = R_p E_i^T, p_i = p_p + R_p r_i
    for i in range(nb):
        p = J[i, 0]
        Ei = E[i]
        ri = r[i]
        if p >= 0:
            Rp = Rw[p]
            for x in range(3):
                for y in range(3):
                    Rw[i, 3 * x + y] = Rp[3 * x] * Ei[3 * y] + Rp[3 * x + 1] * Ei[3 * y + 1] + Rp[3 * x + 2] * Ei[3 * y + 2]
                pw[i, x] = pw[p, x] + Rp[3 * x] * ri[0] + Rp[3 * x + 1] * ri[1] + Rp[3 * x + 2] * ri[2]
        else:
            for x in range(3):
                for y in range(3):
                    Rw[i, 3 * x + y] = Ei[3 * y + x]
                pw[i, x] = ri[x]
    K = Kf.reshape((m, nv))
    H = Hf.reshape((nv, nv))
    Rj = np.empty((2, 3, 3))   # aligned joint frames in the world: predecessor, successor
    oj = np.empty((2, 3))
    sv = np.empty((2, 6))      # spatial velocity at o, linear first
    sa = np.empty((2, 6))      # velocity-product acceleration at o, linear first
    dl = np.empty(6)
    row = 0
    for l in range(nl):
        base = 3 + _LI * l
        nc = LI[base + 3]
        for side in range(2):
            b = LI[base + side]
            pj = LF[_LF * l + 12 * side:_LF * l + 12 * side + 3]
            Rjb = LF[_LF * l + 12 * side + 3:_LF * l + 12 * side + 12]
            for x in range(3):
                if b < 0:
                    oj[side, x] = pj[x]
                    for y in range(3):
                        Rj[side, x, y] = Rjb[3 * x + y]
                else:
                    Rb = Rw[b]
                    oj[side, x] = pw[b, x] + Rb[3 * x] * pj[0] + Rb[3 * x + 1] * pj[1] + Rb[3 * x + 2] * pj[2]
                    for y in range(3):
                        Rj[side, x, y] = Rb[3 * x] * Rjb[y] + Rb[3 * x + 1] * Rjb[3 + y] + Rb[3 * x + 2] * Rjb[6 + y]
        o0, o1, o2 = oj[1, 0], oj[1, 1], oj[1, 2]
        for side in range(2):
            b = LI[base + side]
            if b < 0:  # the fixed base: v = 0, a = -a_g
                for k in range(6):
                    sv[side, k] = 0.0
                    sa[side, k] = 0.0
                sa[side, 0] = -mf[0]
                sa[side, 1] = -mf[1]
                sa[side, 2] = -mf[2]
                continue
            Rb = Rw[b]
            d0, d1, d2 = o0 - pw[b, 0], o1 - pw[b, 1], o2 - pw[b, 2]
            for vec in range(2):
                src = v[b] if vec == 0 else a[b]
                dst = sv[side] if vec == 0 else sa[side]
                w0 = Rb[0] * src[0] + Rb[1] * src[1] + Rb[2] * src[2]
                w1 = Rb[3] * src[0] + Rb[4] * src[1] + Rb[5] * src[2]
                w2 = Rb[6] * src[0] + Rb[7] * src[1] + Rb[8] * src[2]
                l0 = Rb[0] * src[3] + Rb[1] * src[4] + Rb[2] * src[5]
                l1 = Rb[3] * src[3] + Rb[4] * src[4] + Rb[5] * src[5]
                l2 = Rb[6] * src[3] + Rb[7] * src[4] + Rb[8] * src[5]
                dst[0] = l0 + w1 * d2 - w2 * d1
                dst[1] = l1 + w2 * d0 - w0 * d2
                dst[2] = l2 + w0 * d1 - w1 * d0
                dst[3] = w0
                dst[4] = w1
                dst[5] = w2
        vs = sv[1]
        vp = sv[0]
        acc = np.empty(6)
        for k in range(6):
            acc[k] = sa[1, k] - sa[0, k]
        # + v_s x v_p (Eq. 8.47), linear first: [w_s x v_p + v_s x w_p; w_s x w_p]
        acc[0] += vs[4] * vp[2] - vs[5] * vp[1] + vs[1] * vp[5] - vs[2] * vp[4]
        acc[1] += vs[5] * vp[0] - vs[3] * vp[2] + vs[2] * vp[3] - vs[0] * vp[5]
        acc[2] += vs[3] * vp[1] - vs[4] * vp[0] + vs[0] * vp[4] - vs[1] * vp[3]
        acc[3] += vs[4] * vp[5] - vs[5] * vp[4]
        acc[4] += vs[5] * vp[3] - vs[3] * vp[5]
        acc[5] += vs[3] * vp[4] - vs[4] * vp[3]
        _delta_code(LI[base + 2], Rj[0], oj[0], Rj[1], oj[1], dl, LI[base + 4:base + 10], nc)
        for cc in range(nc):
            rr = row + cc
            ix = LI[base + 4 + cc]
            blk = 0 if ix < 3 else 3
            ax = ix - blk
            t0, t1, t2 = Rj[1, 0, ax], Rj[1, 1, ax], Rj[1, 2, ax]   # column of T_w
            for j in range(nv):
                K[rr, j] = 0.0
            # Table 8.4: i = p(k), j = s(k) stepped back to their nearest common ancestor
            bi = LI[base]
            bj = LI[base + 1]
            while bi != bj:
                if bi > bj:
                    b = bi
                    sgn = -1.0
                    bi = J[bi, 0]
                else:
                    b = bj
                    sgn = 1.0
                    bj = J[bj, 0]
                Rb = Rw[b]
                d0, d1, d2 = o0 - pw[b, 0], o1 - pw[b, 1], o2 - pw[b, 2]
                for dof in range(J[b, 3], J[b, 3] + J[b, 4]):
                    s6 = D[dof]
                    w0 = Rb[0] * s6[0] + Rb[1] * s6[1] + Rb[2] * s6[2]
                    w1 = Rb[3] * s6[0] + Rb[4] * s6[1] + Rb[5] * s6[2]
                    w2 = Rb[6] * s6[0] + Rb[7] * s6[1] + Rb[8] * s6[2]
                    if blk == 0:
                        l0 = Rb[0] * s6[3] + Rb[1] * s6[4] + Rb[2] * s6[5] + w1 * d2 - w2 * d1
                        l1 = Rb[3] * s6[3] + Rb[4] * s6[4] + Rb[5] * s6[5] + w2 * d0 - w0 * d2
                        l2 = Rb[6] * s6[3] + Rb[7] * s6[4] + Rb[8] * s6[5] + w0 * d1 - w1 * d0
                        K[rr, dof] = sgn * (t0 * l0 + t1 * l1 + t2 * l2)        # Eq. 8.20
                    else:
                        K[rr, dof] = sgn * (t0 * w0 + t1 * w1 + t2 * w2)
            kl = -(t0 * acc[blk] + t1 * acc[blk + 1] + t2 * acc[blk + 2])         # Eq. 8.47
            if alpha > 0.0:
                vJ = t0 * (vs[blk] - vp[blk]) + t1 * (vs[blk + 1] - vp[blk + 1]) + t2 * (vs[blk + 2] - vp[blk + 2])
                kl -= 2.0 * alpha * vJ + alpha * alpha * dl[cc]                    # Eq. 8.22
            kk[rr] = kl
        row += nc
    sc = np.empty(nv + nv * m + 2 * m * m + 2 * m)
    rhs = sc[0:nv]
    for i in range(nv):
        rhs[i] = tau[i] - C[i]
    lamp = LI[3 + _LI * nl:3 + _LI * nl + nv]
    ks = _method2_sparse(H, lamp, LF[_LF * nl], rhs, K, kk, qdd, lam, sc[nv:])
    if ks >= 0:
        bsing = 0
        for i in range(nb):
            if J[i, 3] <= ks:
                bsing = i
        return 300000000 + bsing
    # loop wrenches f_k = T_w lambda_k (Eq. 8.30); T_w's columns are the successor frame's axes
    row = 0
    for l in range(nl):
        base = 3 + _LI * l
        nc = LI[base + 3]
        b = LI[base + 1]
        Rjb = LF[_LF * l + 15:_LF * l + 24]
        for k in range(6):
            Wr[6 * l + k] = 0.0
        for cc in range(nc):
            ix = LI[base + 4 + cc]
            blk = 0 if ix < 3 else 3
            ax = ix - blk
            for x in range(3):
                if b < 0:
                    col = Rjb[3 * x + ax]
                else:
                    Rb = Rw[b]
                    col = Rb[3 * x] * Rjb[ax] + Rb[3 * x + 1] * Rjb[3 + ax] + Rb[3 * x + 2] * Rjb[6 + ax]
                Wr[6 * l + blk + x] += col * lam[row + cc]
        row += nc
    return 0


_PACK_CACHE: dict = {}


def _pack_loops(model):
    """Loop data for _fd_kernel (cached per model object): LI = [N_L, n^c, work size, then per loop
    body_p, body_s, type code, n_k^c, constrained indices (6)], LF = per loop the aligned joint frame
    (origin, rotation) in the predecessor and successor body coordinates."""
    key = id(model)
    hit = _PACK_CACHE.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    loops = _require_loops(model)
    n = len(loops)
    LI = np.zeros(3 + _LI * n + model.nv, dtype=np.int64)
    LF = np.zeros(_LF * n + 1)
    LI[3 + _LI * n:] = _dof_parents(model)          # expanded parent array (Featherstone §6.5)
    LF[_LF * n] = model.singular_tol
    m = 0
    for l, lj in enumerate(loops):
        base = 3 + _LI * l
        idx = _constrained_index(lj)
        LI[base + 2] = _TYPE_CODE[lj.type]
        LI[base + 3] = len(idx)
        LI[base + 4:base + 4 + len(idx)] = idx
        for side, (link, X) in enumerate(((lj.predecessor, lj.X_P), (lj.successor, lj.X_S))):
            k = model.link_index(link)
            LI[base + side] = int(model.link_body[k])
            Rl = np.asarray(model.link_R[9 * k:9 * k + 9]).reshape(3, 3)
            pl = np.asarray(model.link_p[3 * k:3 * k + 3])
            off = _LF * l + 12 * side
            LF[off:off + 3] = Rl @ X[:3, 3] + pl
            LF[off + 3:off + 12] = (Rl @ X[:3, :3] @ lj.R_align).reshape(9)
        m += len(idx)
    LI[0], LI[1], LI[2] = n, m, model.work_size
    nv = model.nv
    size = nv + 6 * n + nv * nv + nv + m * nv + 2 * m
    packed = (LI, LF, n, m, tuple(lj.name for lj in loops), size)
    if len(_PACK_CACHE) > 32:
        _PACK_CACHE.clear()
    _PACK_CACHE[key] = (model, packed)
    return packed


def _fast_ok(model):
    """The compiled path needs the core's kernels, no mimic joints (tree coordinates = user
    coordinates) and at least one loop."""
    return (getattr(model, "loops", ()) != () and not getattr(model, "has_mimic", True)
            and getattr(model, "nvt", -1) == model.nv)


def _fd_fast(model, q, qd, tau, alpha):
    LI, LF, n, m, names, size = _pack_loops(model)
    nv = model.nv
    buf = np.empty(size)
    try:
        status = _fd_kernel(model._kmi, model._kmf, q, qd, tau, LI, LF, alpha, buf)
    except TypeError:  # lists, other dtypes: convert (the core's slow path)
        q = _vec(model, q, model.nq, "q")
        qd = _vec(model, qd, model.nv, "qd")
        tau = _vec(model, tau, model.nv, "tau")
        status = _fd_kernel(model._kmi, model._kmf, q, qd, tau, LI, LF, alpha, buf)
    if status:
        _raise_status(model, status, what="closed-loop forward dynamics")
    W = buf[nv:nv + 6 * n]
    return buf[:nv], {name: W[6 * i:6 * i + 6] for i, name in enumerate(names)}


_STAB_DEFAULT = 0.1  # s; the default object is recognised by identity, any other value is checked


def closed_loop_forward_dynamics(model, q, qd, tau, stabilization_time=_STAB_DEFAULT, f_ext=None):
    """Forward dynamics of the closed-loop system (Featherstone §8.5, Method 2, Eqs. 8.34-8.41).

    Returns (qdd, loop_wrenches).  ``loop_wrenches`` maps every loop joint's name to the wrench
    (fx fy fz tx ty tz) its predecessor link exerts on its successor link, world axes, moments about
    the joint origin (Featherstone §8.4, f_k = T_k lambda_k, Eq. 8.30).  Constraint drift is
    stabilised by Baumgarte's method (Eq. 8.22) with alpha = beta = 1 / stabilization_time (None:
    no stabilisation).  A rank-deficient K (e.g. a planar loop closed by a spatial revolute joint) is
    handled with the pseudo-inverse of Eq. 8.41; the indeterminate constraint forces are then the
    minimum-norm ones.  ``f_ext`` as in dn.forward_dynamics.
    """
    st = _STAB_DEFAULT if stabilization_time is _STAB_DEFAULT else _check_stab(stabilization_time)
    if f_ext is None and _fast_ok(model):
        return _fd_fast(model, q, qd, tau, 0.0 if st is None else 1.0 / st)
    return _closed_loop_fd_generic(model, q, qd, tau, st, f_ext)


def _closed_loop_fd_generic(model, q, qd, tau, st, f_ext=None):
    """closed_loop_forward_dynamics through the core's public API (mimic joints, f_ext)."""
    dn = _core()
    q = _vec(model, q, model.nq, "q")
    qd = _vec(model, qd, model.nv, "qd")
    tau = _vec(model, tau, model.nv, "tau")
    loops = _require_loops(model)
    if not loops:
        return dn.forward_dynamics(model, q, qd, tau, f_ext), {}
    K, kk, kin = _assemble(model, q, qd, st)
    H = np.asarray(dn.mass_matrix(model, q), dtype=float)
    if f_ext is None:
        C = np.asarray(dn.bias_forces(model, q, qd), dtype=float)
    else:
        C = np.asarray(dn.inverse_dynamics(model, q, qd, np.zeros(model.nv), f_ext), dtype=float)
    qdd, lam = _solve_method2(H, tau - C, K, kk)
    return qdd, _wrenches(loops, kin, lam)


def _wrenches(loops, kin, lam):
    out = {}
    i = 0
    for lj, L in zip(loops, kin):
        nc = L["T_w"].shape[1]
        out[lj.name] = L["T_w"] @ lam[i:i + nc]  # Eq. 8.30, f_k = T_k lambda_k (world axes at o)
        i += nc
    return out
