"""Forward dynamics of a closed-loop system (Featherstone §8.5, Method 2, Eqs. 8.34-8.41).

    H qdd + C = tau + K^T lambda,   K qdd = k + k_stab                       (Eqs. 8.3-8.6)
    with H = L^T D L (§6.5), Y = L^-T K^T, z = L^-T (tau - C)     (the six steps of Method 2)
    A lambda = b with A = K H^-1 K^T = Y^T D^-1 Y (Eq. 8.38), b = k + k_stab - Y^T D^-1 z (Eq. 8.39)
    qdd = L^-1 D^-1 (z + Y lambda)

One compiled kernel does it all on the packed model: the core's CRBA (H, Table 6.2) and RNEA
(C, Eq. 6.2, which leaves X_i, v_i, a_i for the loop terms), constraints.loop_terms (Table 8.4,
Table 8.1, Eq. 8.22), the sparse L^T D L of H over the expanded parent array (§6.5, Tables 6.3-6.5,
no fill-in), and lambda by Cholesky (Eq. 8.40), or, when A is singular (rank K < n^c, e.g. a planar
loop closed by a spatial revolute joint), the minimum-norm lambda = A^+ b (Eq. 8.41, z = 0) from a
Jacobi eigen-decomposition of the small A.  The loop wrench f_k = T_k lambda_k (Eq. 8.30) is then
turned from joint coordinates into world axes.  The kernel is exported as a C callback that the C
shim calls (``_fastcall.invoke3s``), and through a numba entry for the converting route and f_ext; models with
mimic joints take the dense Method 2 on the core's public H and C.
"""
from __future__ import annotations

import math

import numpy as np

from ..._fast import invoke3s as _invoke3s
from ..._jit import carray, cfunc, njit, types
from ...errors import InputError, SingularMassMatrixError, clip
from ..._kernel_io import status
from ..._kernel_io import (A_TAU, F1, I1, SIG3S, SINGULAR, check, fext_array, model_from_pointers, new_work,
                       raise_status)
from ..tree.aba import forward_dynamics
from ..tree.crba import crba_kernel, mass_matrix
from ..tree.dense import cholesky, cholesky_solve
from ..tree.kinematics import link_pose
from ..tree.ltdl import dl_solve, lt_solve, ltdl_factor
from ..tree.rnea import bias_forces, inverse_dynamics, rnea_kernel
from ...packed import first_dof
from ...layout import H_NB, H_NVT
from .constraints import check_stab, loop_terms, loop_wrench, terms, vec
from ...loop_data import (LF_HEADER, LF_STRIDE, LF_TOL, LI_HEADER, LI_LAMBDA, LI_NC, LI_NL, LJ_STRIDE, WRENCH_N,
                          out_size, scratch_size)

JACOBI_SWEEPS = 60  # cyclic Jacobi sweeps at most (it converges quadratically; A is n^c x n^c)

# the C callback's signature is _kernel_io.SIG3S (_fastcall.invoke3s): the float after the third vector is
# the Baumgarte gain alpha


@njit(cache=True, inline="always")
def out_views(out, nb, nvt, nl, m):
    """The named parts of out (see out_size)."""
    o = 0
    H = out[o:o + nvt * nvt]
    o += nvt * nvt
    qdd = out[o:o + nvt]
    o += nvt
    wr = out[o:o + WRENCH_N * nl]
    o += WRENCH_N * nl
    C = out[o:o + nvt]
    o += nvt
    K = out[o:o + m * nvt]
    o += m * nvt
    kk = out[o:o + m]
    o += m
    dl = out[o:o + m]
    o += m
    vj = out[o:o + m]
    o += m
    lam = out[o:o + m]
    o += m
    Y = out[o:o + m * nvt]
    o += m * nvt
    A = out[o:o + m * m]
    o += m * m
    LA = out[o:o + m * m]
    o += m * m
    V = out[o:o + m * m]
    o += m * m
    b = out[o:o + m]
    o += m
    y = out[o:o + m]
    o += m
    zero = out[o:o + nvt]
    o += nvt
    s = out[o:o + scratch_size(nb)]
    return qdd, wr, H, C, K, kk, dl, vj, lam, Y, A, LA, V, b, y, zero, s


@njit(cache=True, inline="always")
def _jacobi_pinv_solve(A, b, lam, V, m):
    """lambda = A^+ b for the symmetric positive semi-definite m x m A (flat, destroyed): cyclic
    Jacobi rotations A = V diag(w) V^T, then the sum over w_e > 1e-10 max(w) of V_e (V_e^T b) / w_e
    (Eq. 8.41 with z = 0: the minimum-norm lambda)."""
    for i in range(m * m):
        V[i] = 0.0
    for i in range(m):
        V[i * m + i] = 1.0
    for sweep in range(JACOBI_SWEEPS):
        off = 0.0
        dia = 0.0
        for p in range(m):
            dia += A[p * m + p] * A[p * m + p]
            for q in range(p + 1, m):
                off += A[p * m + q] * A[p * m + q]
        if off <= 1e-32 * dia or off < 1e-300:
            break
        for p in range(m):
            for q in range(p + 1, m):
                apq = A[p * m + q]
                if apq == 0.0:
                    continue
                theta = (A[q * m + q] - A[p * m + p]) / (2.0 * apq)
                t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                if theta < 0.0:
                    t = -t
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for k in range(m):  # A J, then J^T (A J), V J
                    akp = A[k * m + p]
                    akq = A[k * m + q]
                    A[k * m + p] = c * akp - s * akq
                    A[k * m + q] = s * akp + c * akq
                for k in range(m):
                    apk = A[p * m + k]
                    aqk = A[q * m + k]
                    A[p * m + k] = c * apk - s * aqk
                    A[q * m + k] = s * apk + c * aqk
                for k in range(m):
                    vkp = V[k * m + p]
                    vkq = V[k * m + q]
                    V[k * m + p] = c * vkp - s * vkq
                    V[k * m + q] = s * vkp + c * vkq
    wmax = 0.0
    for e in range(m):
        wmax = max(wmax, A[e * m + e])
    for i in range(m):
        lam[i] = 0.0
    for e in range(m):
        we = A[e * m + e]
        if we > wmax * 1e-10 and we > 1e-300:
            t = 0.0
            for i in range(m):
                t += V[i * m + e] * b[i]
            t /= we
            for i in range(m):
                lam[i] += V[i * m + e] * t


@njit(cache=True, inline="always")
def lambda_solve(A, b, lam, LA, V, m):
    """A lambda = b (Eq. 8.37, A flat m x m): Cholesky A = L_A L_A^T when A is positive definite
    (Eq. 8.40), else the minimum-norm lambda of Eq. 8.41."""
    amax = 0.0
    for i in range(m):
        amax = max(amax, A[i * m + i])
    L = LA[:m * m].reshape((m, m))
    if cholesky(A[:m * m].reshape((m, m)), L, m, 1e-10 * amax) >= 0:
        _jacobi_pinv_solve(A, b, lam, V, m)
        return
    for i in range(m):
        lam[i] = b[i]
    cholesky_solve(L, lam, m)


@njit(cache=True)
def fd_kernel(mi, mf, li, lf, q, qd, tau, fx, alpha, out, H2, w):
    """Closed-loop forward dynamics (see the module docstring) into out (out_views); H2 is out's
    first nvt^2 floats as an nvt x nvt array (made by the caller: a reshape here would need numba's
    helper library, which the ahead-of-time C callback does not have).  Returns 0 or a core status
    code (bad or non-finite input, singular H naming the body)."""
    nb = mi[H_NB]
    nvt = mi[H_NVT]
    nl = li[LI_NL]
    m = li[LI_NC]
    qdd, wr, H, C, K, kk, dl, vj, lam, Y, A, LA, V, b, y, zero, s = out_views(out, nb, nvt, nl, m)
    st = crba_kernel(mi, mf, q, H, w)                       # H (Table 6.2)
    if st != 0:
        return st
    for i in range(nvt):
        zero[i] = 0.0
    st = rnea_kernel(mi, mf, q, qd, zero, fx, C, w)          # C (Eq. 6.2); X_i, v_i, a_i stay in w
    if st != 0:
        return st
    st = check(tau, nvt, A_TAU)
    if st != 0:
        return st
    loop_terms(mi, mf, li, lf, w, alpha, K, kk, dl, vj, s)  # K, k + k_stab (Table 8.4, Eq. 8.22)
    lo = li[LI_LAMBDA]
    lamp = li[lo:lo + nvt]
    kd = ltdl_factor(H2, lamp, lf[LF_TOL])                 # step 1: H = L^T D L (Table 6.3)
    if kd >= 0:
        bs = 0
        for i in range(nb):
            if first_dof(mi, i) <= kd:
                bs = i
        return status(SINGULAR, 0, bs)
    for i in range(nvt):
        qdd[i] = tau[i] - C[i]
    lt_solve(H2, lamp, qdd)                                # step 3: z = L^-T (tau - C)
    for c in range(m):
        yc = Y[c * nvt:(c + 1) * nvt]
        for i in range(nvt):
            yc[i] = K[c * nvt + i]
        lt_solve(H2, lamp, yc)                             #         Y = L^-T K^T (column c)
    for r in range(m):                                      # step 4: A = Y^T D^-1 Y, b = k - Y^T D^-1 z
        t = kk[r]
        for i in range(nvt):
            t -= Y[r * nvt + i] * qdd[i] / H2[i, i]
        b[r] = t                                            # Eq. 8.39
        for c in range(r, m):
            t = 0.0
            for i in range(nvt):
                t += Y[r * nvt + i] * Y[c * nvt + i] / H2[i, i]
            A[r * m + c] = t                                # Eq. 8.38
            A[c * m + r] = t
    lambda_solve(A, b, lam, LA, V, m)                       # step 5
    for c in range(m):                                      # step 6: qdd = L^-1 D^-1 (z + Y lambda)
        lc = lam[c]
        for i in range(nvt):
            qdd[i] += Y[c * nvt + i] * lc
    dl_solve(H2, lamp, qdd)
    for l in range(nl):
        loop_wrench(li, lf, s, nb, l, lam, wr)               # f_k = T_k lambda_k (Eq. 8.30)
    return 0


@cfunc(SIG3S, cache=True)
def fd_c(mip, mfp, qp, nq, qdp, nqd, taup, ntau, alpha, outp, wp, nw):
    """C callback of fd_kernel: mip, mfp point at model.loop_data's packed arrays (the model's mi,
    mf with li, lf appended)."""
    mi, mf, nvt = model_from_pointers(mip, mfp)
    nmi = mi.shape[0]
    nmf = mf.shape[0]
    hdr = carray(mip, (nmi + LI_HEADER,))
    nl = hdr[nmi + LI_NL]
    m = hdr[nmi + LI_NC]
    li = carray(mip, (nmi + LI_HEADER + LJ_STRIDE * nl + nvt,))[nmi:]
    lf = carray(mfp, (nmf + LF_HEADER + LF_STRIDE * nl,))[nmf:]
    return fd_kernel(mi, mf, li, lf, carray(qp, (nq,)), carray(qdp, (nqd,)), carray(taup, (ntau,)), lf[0:0],
                     alpha, carray(outp, (out_size(mi[H_NB], nvt, nl, m),)), carray(outp, (nvt, nvt)),
                     carray(wp, (nw,)))


_FD_C = fd_c.address


@njit(types.int64(I1, F1, I1, F1, F1, F1, F1, F1, types.float64, F1), cache=True)
def fd_entry(mi, mf, li, lf, q, qd, tau, fx, alpha, out):
    nvt = mi[H_NVT]
    return fd_kernel(mi, mf, li, lf, q, qd, tau, fx, alpha, out, out[0:nvt * nvt].reshape((nvt, nvt)), new_work(mi))


@njit(cache=True)
def method2_dense(H, rhs, K, kk, qdd, lam):
    """Method 2 (§8.5, its six steps) with a dense H = L L^T (step 1): Y = L^-1 K^T, z = L^-1 tau'
    (step 3); A = Y^T Y (Eq. 8.38), b = k + k_stab - Y^T z (Eq. 8.39, step 4); lambda (step 5);
    H qdd = tau' + K^T lambda (step 6).  Returns 0, or 1 if H is not positive definite."""
    n = H.shape[0]
    m = K.shape[0]
    L = np.zeros((n, n))
    if cholesky(H, L, n, 1e-300) >= 0:                     # step 1
        return 1
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
    A = np.empty(m * m)
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
            A[r * m + c] = t
            A[c * m + r] = t
    lambda_solve(A, b, lam, np.zeros(m * m), np.zeros(m * m), m)
    for i in range(n):  # step 6: H qdd = tau' + K^T lambda
        t = rhs[i]
        for c in range(m):
            t += K[c, i] * lam[c]
        qdd[i] = t
    cholesky_solve(L, qdd, n)
    return 0


#: the block route (§8.9) is taken with two or more clusters and at least this many loop constraints;
#: below, the one compiled Method 2 kernel on the whole K is faster (bench/bench_loop_scaling.py measures
#: both on a chain of k four-bars, n^c = 5k; docs/performance.md)
CLUSTER_MIN_NC = 48
_STAB_DEFAULT = 0.1  # s; the default object is recognised by identity, any other value is checked
_ALPHA_DEFAULT = 1.0 / _STAB_DEFAULT
_ndarray = np.ndarray


def closed_loop_forward_dynamics(model, q, qd, tau, stabilization_time=_STAB_DEFAULT, f_ext=None,
                                 method="spanning_tree", _clustered=True):
    """Forward dynamics of the closed-loop system (Featherstone §8.5, Method 2, Eqs. 8.34-8.41).

    Returns (qdd, loop_wrenches).  ``loop_wrenches`` maps every loop joint's name to the wrench
    (fx fy fz tx ty tz) its predecessor link exerts on its successor link, world axes, moments about
    the joint origin (Featherstone §8.4, f_k = T_k lambda_k, Eq. 8.30).  Constraint drift is
    stabilised by Baumgarte's method (Eq. 8.22) with alpha = beta = 1 / stabilization_time (None:
    no stabilisation).  A rank-deficient K (e.g. a planar loop closed by a spatial revolute joint) is
    handled with the pseudo-inverse of Eq. 8.41; the indeterminate constraint forces are then the
    minimum-norm ones.  ``f_ext`` as in dn.forward_dynamics.  A model without loop joints gives
    (dn.forward_dynamics(...), {}).

    ``method="spanning_tree"`` (default): the equations above on the spanning tree.  With two or more
    minimal loop clusters (``model.loop_clusters``, §8.9) K and G are block-diagonal and are built and
    solved per cluster (§8.8 per block, then Method 1 on the blocks, clusters.clustered_forward) once
    there are CLUSTER_MIN_NC loop constraints or more; with one cluster the block is K itself, and
    with fewer constraints Method 2 on the whole K runs in one compiled kernel, which is then faster.
    ``method="sparse"``: the sparse-matrix method of §8.13 (Eq. 8.64) on the bodies and joints,
    without the spanning tree (algorithms/loops/sparse.py; its docstring says what it does with a
    rank-deficient coefficient matrix: an over-constrained mechanism).
    Both give the same accelerations and loop wrenches.
    """
    alpha = _ALPHA_DEFAULT if stabilization_time is _STAB_DEFAULT else check_stab(stabilization_time)
    if method != "spanning_tree":
        if method != "sparse":
            raise InputError(f"method must be 'spanning_tree' or 'sparse', got {clip(repr(method))}")
        from .sparse import sparse_forward_dynamics

        return sparse_forward_dynamics(model, q, qd, tau, alpha, f_ext, loops=True)
    ld = model.loop_data
    if ld is None:
        return forward_dynamics(model, q, qd, tau, f_ext), {}
    if _clustered and len(ld.clusters) > 1 and ld.n_c >= CLUSTER_MIN_NC:
        from .clusters import clustered_forward

        q = vec(model, q, model.nq, "q")
        qd = vec(model, qd, model.nv, "qd")
        tau = vec(model, tau, model.nv, "tau")
        qdd, lam = clustered_forward(model, q, qd, tau, alpha, f_ext)
        return qdd, world_wrenches(model, q, lam)
    if f_ext is None and model._direct and _invoke3s is not None:
        # the C callback on the thread's work buffer; out[qdd_at:] holds qdd then the wrenches (the
        # part returned, checked finite by the shim). A status (bad input, singular H, overflow)
        # falls through to the numba entry below, which names the problem
        o = ld.qdd_at
        e = o + model.nv
        r = _invoke3s(_FD_C, ld.out_size, o, e + 6 * ld.n_loops, ld._kmi, ld._kmf, None, q, qd, tau, alpha)
        if r.__class__ is _ndarray:
            if ld.n_loops == 1:
                return r[o:e], {ld.names[0]: r[e:e + 6]}
            return r[o:e], {n: r[e + 6 * i:e + 6 * i + 6] for i, n in enumerate(ld.names)}
    q = vec(model, q, model.nq, "q")
    qd = vec(model, qd, model.nv, "qd")
    tau = vec(model, tau, model.nv, "tau")
    if not model.has_mimic:
        out = np.empty(ld.out_size)
        st = fd_entry(model._kmi, model._kmf, ld._kli, ld._klf, q, qd, tau, fext_array(model, f_ext), alpha, out)
        if st:
            raise_status(model, st, what="closed-loop forward dynamics")
        o = ld.qdd_at
        e = o + model.nv
        return out[o:e], {n: out[e + 6 * i:e + 6 * i + 6] for i, n in enumerate(ld.names)}
    return _fd_mimic(model, q, qd, tau, alpha, f_ext)


def _fd_mimic(model, q, qd, tau, alpha, f_ext):
    """The dense Method 2 in the independent coordinates: H = G^T H_t G and C from the core (§9.6),
    K = K_t G from the loop kernel."""
    K, kk, _, _ = terms(model, q, qd, alpha)
    H = np.asarray(mass_matrix(model, q), dtype=float)
    if f_ext is None:
        C = np.asarray(bias_forces(model, q, qd), dtype=float)
    else:
        C = np.asarray(inverse_dynamics(model, q, qd, np.zeros(model.nv), f_ext), dtype=float)
    qdd = np.empty(model.nv)
    lam = np.empty(K.shape[0])
    if method2_dense(np.ascontiguousarray(H), tau - C, np.ascontiguousarray(K), np.ascontiguousarray(kk), qdd, lam):
        raise SingularMassMatrixError("the joint-space inertia H of the spanning tree is singular "
                                      "(closed-loop forward dynamics needs H^-1, Featherstone §8.5)")
    return qdd, world_wrenches(model, q, lam)


def world_wrenches(model, q, lam):
    """{loop joint: f_k = T_k lambda_k (Eq. 8.30)} in world axes about the joint origin, linear first,
    from lambda in K's row order."""
    wrenches = {}
    for lj, rows in zip(model.loops, model.loop_data.rows):
        RJ = link_pose(model, q, lj.successor)[:3, :3] @ lj.X_S[:3, :3]  # URDF joint axes in the world
        f = lj.T @ lam[rows]                                              # linear first, joint axes
        wrenches[lj.name] = np.concatenate([RJ @ f[:3], RJ @ f[3:]])
    return wrenches
