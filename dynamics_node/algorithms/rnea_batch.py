"""Inverse dynamics of many states at once: Table 5.1 (Featherstone Ch. 5) with LANES states side
by side, so that every step of the recursion is a short loop over states that LLVM turns into SIMD
instructions.

The recursion is the one of algorithms/rnea.py, equation for equation:

    X_i = X_J(q_i) X_T(i)                                        (Table 4.1, §4.2)
    v_i = X_i v_λ(i) + v_J,          v_J = S_i qd_i              (Eq. 5.14)
    a_i = X_i a_λ(i) + S_i qdd_i + v_i x v_J                     (Eq. 5.15; c_J = 0)
    f_i = I_i a_i + v_i x* I_i v_i                               (Eq. 5.16)
    tau_i = S_i^T f_i ;  f_λ(i) += X_i^T f_i                     (Eqs. 5.17-5.18)

with a_0 = -a_g (§5.3) and the model's joint terms (armature qdd, damping qd, Coulomb sign(qd)).
What differs is the layout. One state at a time, a body's step is some 150 scalar operations, a
good part of them waiting on each other. Here every quantity has a row of LANES entries, one per
state, and each step is a loop over those entries: the same operation on LANES independent states,
which LLVM vectorises (8 doubles per instruction with AVX-512, 4 with AVX2). On the 50-DoF TALOS a
state costs about half of what it costs alone (bench/bench.py, "Batch").

Work array: one block of BLOCK rows per body (row r of block b is w[(BLOCK b + r) LANES + k],
k = 0 .. LANES - 1), and one for the fixed base as a pseudo-body whose v = 0 and a = -a_g (§5.3).
LLVM vectorises a loop over k only if it can tell that its stores do not overwrite what it loads.
Within one block the rows are at distances it knows (LANES is a compile-time constant); rows of two
blocks are at distances it does not know, and it would need a run-time check per pair of rows, more
than it allows. So every loop reads and writes one block only: what a body needs from elsewhere
(its parent's v and a; its q, qd and qdd) is copied into its block first, and its X^T f is added
to its parent's f afterwards, each by one plain copy or sum. Indices are unsigned (`_u`). The free
joint (the root of a floating base) is done one state at a time, by the functions of rnea.py's
kernels (joints.jcalc_sc, joints.S_mul). A last, partial group of states is padded with copies of
the last state, whose results are dropped.
"""
from __future__ import annotations

import numpy as np

from .._jit import njit, types
from ..joints import FREE, PRISMATIC, REVOLUTE, S_mul, jcalc_sc, sincos_row
from ..layout import BODY_STRIDE, DOF_STRIDE, HEADER_F, HEADER_I
from ..spatial import crf_t, crm_t, rbi_mul_c, xm_s, xtf_s
from ._common import FASTMATH, F1, F2, I1, check_state

LANES = 32  # states side by side. Measured on TALOS and arm7 among 8, 16, 32, 64 and 128: 16 and 32
#             best; 8 about 1.5x slower (LLVM unrolls such short loops instead of vectorising them),
#             64 and more slower again (the work array, 0.7 MB for TALOS at 32, outgrows the L2 cache)
# rows of a body's block
R_E, R_R, R_V, R_A, R_F = 0, 9, 12, 18, 24   # X_i = (E, r), v_i, a_i, f_i
R_VJ, R_SQ = 30, 36                          # v_J = S qd and S qdd; R_VJ holds X_i^T f_i later
R_PV = 42                                    # the parent's v and a (12 rows)
R_Q, R_QD, R_QDD, R_SIN, R_COS, R_TAU = 54, 55, 56, 57, 58, 59
BLOCK = 60


def work_size(model):
    """Length of rnea_lanes_kernel's work array: the blocks, and 12 scalars for the free joint."""
    return BLOCK * (model.nb + 1) * LANES + 12


@njit(cache=True, inline="always")
def _u(i):
    """An index as unsigned: numba then drops its negative-index wrap-around, a select on every
    access that keeps LLVM from seeing consecutive addresses (and from vectorising)."""
    return np.uint64(i)


@njit(cache=True, inline="always")
def _ld6(w, o):
    """w[o], w[o + LANES], ..., w[o + 5 LANES]: one state's 6-vector in the lanes layout."""
    return (w[_u(o)], w[_u(o + LANES)], w[_u(o + 2 * LANES)], w[_u(o + 3 * LANES)], w[_u(o + 4 * LANES)],
            w[_u(o + 5 * LANES)])


@njit(cache=True, inline="always")
def _st6(w, o, t):
    w[_u(o)] = t[0]
    w[_u(o + LANES)] = t[1]
    w[_u(o + 2 * LANES)] = t[2]
    w[_u(o + 3 * LANES)] = t[3]
    w[_u(o + 4 * LANES)] = t[4]
    w[_u(o + 5 * LANES)] = t[5]


@njit(cache=True, inline="always")
def _dof_constants(mf, so):
    """(S 6-vector, armature, damping, Coulomb friction) of the degree of freedom at mf[so]."""
    return (mf[so], mf[so + 1], mf[so + 2], mf[so + 3], mf[so + 4], mf[so + 5], mf[so + 6], mf[so + 7],
            mf[so + 8])


@njit(cache=True, inline="always")
def _joint_force(c, f, qd, qdd):
    """tau = S^T f (Eq. 5.17) + armature qdd + damping qd + Coulomb sign(qd), c from _dof_constants."""
    sgn = 1.0 if qd > 0.0 else (-1.0 if qd < 0.0 else 0.0)
    return (c[0] * f[0] + c[1] * f[1] + c[2] * f[2] + c[3] * f[3] + c[4] * f[4] + c[5] * f[5]
            + c[6] * qdd + c[7] * qd + c[8] * sgn)


@njit(cache=True, inline="always")
def _joint_transform(mi, mf, i, w, b):
    """E_i, r_i of a revolute or prismatic body for the LANES states of block b (Table 4.1 composed
    with X_T, as joints.jcalc_sc)."""
    L = LANES
    nb = mi[0]
    ii = HEADER_I + 5 * i
    jt = mi[ii + 1]
    bo = HEADER_F + BODY_STRIDE * i
    e0, e1, e2, e3, e4, e5, e6, e7, e8 = (mf[bo], mf[bo + 1], mf[bo + 2], mf[bo + 3], mf[bo + 4], mf[bo + 5],
                                          mf[bo + 6], mf[bo + 7], mf[bo + 8])
    t0, t1, t2 = mf[bo + 9], mf[bo + 10], mf[bo + 11]
    ax = HEADER_F + BODY_STRIDE * nb + DOF_STRIDE * mi[ii + 3] + (3 if jt == PRISMATIC else 0)
    x, y, z = mf[ax], mf[ax + 1], mf[ax + 2]
    E = b + R_E * L
    r = b + R_R * L
    if jt == PRISMATIC:  # E = E_T, r = r_T + E_T^T a q
        for k in range(L):
            d = w[_u(b + R_Q * L + k)]
            _st6(w, E + k, (e0, e1, e2, e3, e4, e5))
            w[_u(E + 6 * L + k)], w[_u(E + 7 * L + k)], w[_u(E + 8 * L + k)] = e6, e7, e8
            p0, p1, p2 = x * d, y * d, z * d
            w[_u(r + k)] = t0 + e0 * p0 + e3 * p1 + e6 * p2
            w[_u(r + L + k)] = t1 + e1 * p0 + e4 * p1 + e7 * p2
            w[_u(r + 2 * L + k)] = t2 + e2 * p0 + e5 * p1 + e8 * p2
        return
    S = b + R_SIN * L
    C = b + R_COS * L
    if x == 0.0 and y == 0.0:  # E = rz(z q) E_T (Table 2.2)
        for k in range(L):
            s = w[_u(S + k)] * z
            c = w[_u(C + k)]
            _st6(w, E + k, (c * e0 + s * e3, c * e1 + s * e4, c * e2 + s * e5,
                            c * e3 - s * e0, c * e4 - s * e1, c * e5 - s * e2))
            w[_u(E + 6 * L + k)], w[_u(E + 7 * L + k)], w[_u(E + 8 * L + k)] = e6, e7, e8
            w[_u(r + k)], w[_u(r + L + k)], w[_u(r + 2 * L + k)] = t0, t1, t2
    elif y == 0.0 and z == 0.0:  # rx
        for k in range(L):
            s = w[_u(S + k)] * x
            c = w[_u(C + k)]
            _st6(w, E + k, (e0, e1, e2, c * e3 + s * e6, c * e4 + s * e7, c * e5 + s * e8))
            w[_u(E + 6 * L + k)] = c * e6 - s * e3
            w[_u(E + 7 * L + k)] = c * e7 - s * e4
            w[_u(E + 8 * L + k)] = c * e8 - s * e5
            w[_u(r + k)], w[_u(r + L + k)], w[_u(r + 2 * L + k)] = t0, t1, t2
    elif x == 0.0 and z == 0.0:  # ry
        for k in range(L):
            s = w[_u(S + k)] * y
            c = w[_u(C + k)]
            _st6(w, E + k, (c * e0 - s * e6, c * e1 - s * e7, c * e2 - s * e8, e3, e4, e5))
            w[_u(E + 6 * L + k)] = s * e0 + c * e6
            w[_u(E + 7 * L + k)] = s * e1 + c * e7
            w[_u(E + 8 * L + k)] = s * e2 + c * e8
            w[_u(r + k)], w[_u(r + L + k)], w[_u(r + 2 * L + k)] = t0, t1, t2
    else:
        for k in range(L):  # any axis: E_J = R(a, q)^T (Rodrigues), E = E_J E_T
            s = w[_u(S + k)]
            c = w[_u(C + k)]
            t = 1.0 - c
            j00, j01, j02 = c + t * x * x, t * x * y + s * z, t * x * z - s * y
            j10, j11, j12 = t * x * y - s * z, c + t * y * y, t * y * z + s * x
            j20, j21, j22 = t * x * z + s * y, t * y * z - s * x, c + t * z * z
            _st6(w, E + k, (j00 * e0 + j01 * e3 + j02 * e6, j00 * e1 + j01 * e4 + j02 * e7,
                            j00 * e2 + j01 * e5 + j02 * e8, j10 * e0 + j11 * e3 + j12 * e6,
                            j10 * e1 + j11 * e4 + j12 * e7, j10 * e2 + j11 * e5 + j12 * e8))
            w[_u(E + 6 * L + k)] = j20 * e0 + j21 * e3 + j22 * e6
            w[_u(E + 7 * L + k)] = j20 * e1 + j21 * e4 + j22 * e7
            w[_u(E + 8 * L + k)] = j20 * e2 + j21 * e5 + j22 * e8
            w[_u(r + k)], w[_u(r + L + k)], w[_u(r + 2 * L + k)] = t0, t1, t2


@njit(types.int64(I1, F1, F2, F2, F2, F2, F1), cache=True, fastmath=FASTMATH)
def rnea_lanes_kernel(mi, mf, Q, QD, QDD, TAU, w):
    """TAU[k] = ID(Q[k], QD[k], QDD[k]) for every row k; w of work_size(model). Status as rnea_kernel."""
    L = LANES
    nb = mi[0]
    n = Q.shape[0]
    for k in range(n):  # the checks of rnea_kernel, all first: a refused batch computes nothing
        st = check_state(Q[k], QD[k], QDD[k], mi)
        if st != 0:
            return st
    do0 = HEADER_F + BODY_STRIDE * nb
    base = BLOCK * nb * L                # the fixed base: v = 0, a = -a_g (§5.3)
    tmp = w[BLOCK * (nb + 1) * L:]       # 12 scalars for the free joint's X
    for m in range(6):
        for k in range(L):
            w[_u(base + (R_V + m) * L + k)] = 0.0
            w[_u(base + (R_A + m) * L + k)] = 0.0 if m < 3 else -mf[m - 3]
    for k0 in range(0, n, L):
        nk = min(L, n - k0)
        # outward pass, Eqs. 5.14-5.16
        for i in range(nb):
            ii = HEADER_I + 5 * i
            p = mi[ii]
            jt = mi[ii + 1]
            qi = mi[ii + 2]
            vi = mi[ii + 3]
            bo = HEADER_F + BODY_STRIDE * i
            b = BLOCK * i * L
            src = (BLOCK * p * L if p >= 0 else base) + R_V * L
            dst = b + R_PV * L
            for t in range(12 * L):  # the parent's v and a, into this block
                w[_u(dst + t)] = w[_u(src + t)]
            if jt == FREE:  # one state at a time
                for k in range(L):
                    kk = min(k0 + k, n - 1)
                    jcalc_sc(mi, mf, i, Q[kk], tmp, 0, 9, 0.0, 1.0)
                    for m in range(12):
                        w[_u(b + m * L + k)] = tmp[m]
                    _st6(w, b + R_VJ * L + k, S_mul(mi, mf, i, QD[kk]))
                    _st6(w, b + R_SQ * L + k, S_mul(mi, mf, i, QDD[kk]))
            else:
                for k in range(L):
                    kk = min(k0 + k, n - 1)
                    w[_u(b + R_Q * L + k)] = Q[kk, qi]
                    w[_u(b + R_QD * L + k)] = QD[kk, vi]
                    w[_u(b + R_QDD * L + k)] = QDD[kk, vi]
                if jt == REVOLUTE:
                    sincos_row(w, b + R_Q * L, b + R_SIN * L, b + R_COS * L, L)
                _joint_transform(mi, mf, i, w, b)
                so = do0 + DOF_STRIDE * vi  # v_J = S qd, S qdd (Table 4.1: S is constant)
                s0, s1, s2, s3, s4, s5 = mf[so], mf[so + 1], mf[so + 2], mf[so + 3], mf[so + 4], mf[so + 5]
                for k in range(L):
                    x = w[_u(b + R_QD * L + k)]
                    y = w[_u(b + R_QDD * L + k)]
                    _st6(w, b + R_VJ * L + k, (s0 * x, s1 * x, s2 * x, s3 * x, s4 * x, s5 * x))
                    _st6(w, b + R_SQ * L + k, (s0 * y, s1 * y, s2 * y, s3 * y, s4 * y, s5 * y))
            I = (mf[bo + 12], mf[bo + 13], mf[bo + 14], mf[bo + 15], mf[bo + 16], mf[bo + 17], mf[bo + 18],
                 mf[bo + 19], mf[bo + 20], mf[bo + 21], mf[bo + 22], mf[bo + 23], mf[bo + 24])
            for k in range(L):
                o = b + k
                vJ = _ld6(w, o + R_VJ * L)
                xv = xm_s(w, o + R_E * L, o + R_R * L, _ld6(w, o + R_PV * L), L)
                xa = xm_s(w, o + R_E * L, o + R_R * L, _ld6(w, o + (R_PV + 6) * L), L)
                sq = _ld6(w, o + R_SQ * L)
                v = (xv[0] + vJ[0], xv[1] + vJ[1], xv[2] + vJ[2], xv[3] + vJ[3], xv[4] + vJ[4], xv[5] + vJ[5])
                cv = crm_t(v, vJ)
                a = (xa[0] + sq[0] + cv[0], xa[1] + sq[1] + cv[1], xa[2] + sq[2] + cv[2],
                     xa[3] + sq[3] + cv[3], xa[4] + sq[4] + cv[4], xa[5] + sq[5] + cv[5])
                Ia = rbi_mul_c(I, a)
                cf = crf_t(v, rbi_mul_c(I, v))
                _st6(w, o + R_V * L, v)
                _st6(w, o + R_A * L, a)
                _st6(w, o + R_F * L, (Ia[0] + cf[0], Ia[1] + cf[1], Ia[2] + cf[2], Ia[3] + cf[3],
                                      Ia[4] + cf[4], Ia[5] + cf[5]))
        # inward pass, Eqs. 5.17-5.18
        for i in range(nb - 1, -1, -1):
            ii = HEADER_I + 5 * i
            p = mi[ii]
            vi = mi[ii + 3]
            b = BLOCK * i * L
            if mi[ii + 1] == FREE:
                for dof in range(vi, vi + 6):
                    c = _dof_constants(mf, do0 + DOF_STRIDE * dof)
                    for k in range(nk):
                        TAU[k0 + k, dof] = _joint_force(c, _ld6(w, b + R_F * L + k), QD[k0 + k, dof],
                                                        QDD[k0 + k, dof])
            else:
                c = _dof_constants(mf, do0 + DOF_STRIDE * vi)  # read once, outside the loop
                for k in range(L):
                    w[_u(b + R_TAU * L + k)] = _joint_force(c, _ld6(w, b + R_F * L + k), w[_u(b + R_QD * L + k)],
                                                            w[_u(b + R_QDD * L + k)])
                for k in range(nk):
                    TAU[k0 + k, vi] = w[_u(b + R_TAU * L + k)]
            if p >= 0:
                for k in range(L):  # X_i^T f_i, in this block
                    _st6(w, b + R_VJ * L + k, xtf_s(w, b + R_E * L + k, b + R_R * L + k,
                                                    _ld6(w, b + R_F * L + k), L))
                src = b + R_VJ * L
                dst = BLOCK * p * L + R_F * L
                for t in range(6 * L):  # f_λ(i) += X_i^T f_i
                    w[_u(dst + t)] += w[_u(src + t)]
    return 0
