"""Inverse dynamics of many states at once: Table 5.1 (Featherstone Ch. 5) with LANES states side
by side, so that every step of the recursion is a short loop over states that LLVM turns into SIMD
instructions.

The recursion is the one of algorithms/tree/rnea.py, equation for equation:

    X_i = X_J(q_i) X_T(i)                                        (Table 4.1, §4.2)
    v_i = X_i v_λ(i) + v_J,          v_J = S_i qd_i              (Eq. 5.14)
    a_i = X_i a_λ(i) + S_i qdd_i + v_i x v_J                     (Eq. 5.15; c_J = 0)
    f_i = I_i a_i + v_i x* I_i v_i                               (Eq. 5.16)
    tau_i = S_i^T f_i ;  f_λ(i) += X_i^T f_i                     (Eqs. 5.17-5.18)

with a_0 = -a_g (§5.3) and the model's joint terms (armature qdd, the joint law's friction tau_f(qd),
joint_law.py).
What differs is the layout. One state at a time, a body's step is some 150 scalar operations, a
good part of them waiting on each other. Here every quantity has a row of LANES entries, one per
state, and each step is a loop over those entries: the same operation on LANES independent states,
which LLVM vectorises (8 doubles per instruction with AVX-512, 4 with AVX2). On the 50-DoF TALOS a
state costs about half of what it costs alone (bench/bench.py, "Batch").

Work array (layout.BATCH_ROWS): one block of BATCH_BLOCK rows per body (row L_X of body i's block
is w[(BATCH_BLOCK i + L_X) LANES + k], k = 0 .. LANES - 1), and one for the fixed base as a
pseudo-body whose v = 0 and a = -a_g (§5.3).
LLVM vectorises a loop over k only if it can tell that its stores do not overwrite what it loads.
Within one block the rows are at distances it knows (LANES is a compile-time constant); rows of two
blocks are at distances it does not know, and it would need a run-time check per pair of rows, more
than it allows. So every loop reads and writes one block only: what a body needs from elsewhere
(its parent's v and a; its q, qd and qdd) is copied into its block first, and its X^T f is added
to its parent's f afterwards, each by one plain copy or sum. Indices are unsigned (`_u`). The free
joint (the root of a floating base) is done one state at a time, by the functions of rnea.py's
kernels (joints.jcalc_sc, joints.S_mul); the others by joints.jcalc_lanes. A last, partial group of
states is padded with copies of the last state, whose results are dropped.
"""
from __future__ import annotations


from ..._jit import njit, types
from ...joints import FREE, REVOLUTE, S_mul, _u, jcalc_lanes, jcalc_sc, sincos_row
from ...packed import body_f, dof_count, dof_f, first_dof, first_q, joint_type, parent
from ...layout import (BATCH_BLOCK, BATCH_EXTRA, B_RBI, D_ARMATURE, D_S, HF_GRAVITY, H_NB, LANES, LT_X, L_A,
                      L_A_N, L_COS, L_E, L_E_N, L_F, L_PAC, L_PV, L_Q, L_QD, L_QDD, L_R, L_R_N, L_SIN, L_SQ, L_TAU,
                      L_V, L_V_N, L_VJ)
from ...spatial import crf_t, crm_t, ld6_s, rbi_mul_c, st6_s, xm_s, xtf_s
from ..._kernel_io import FASTMATH, F1, F2, I1, check_state
from ...joint_law import friction_torque


def work_size(model):
    """Length of rnea_lanes_kernel's work array: a block per body and one for the base, and the scratch."""
    return BATCH_BLOCK * (model.nb + 1) * LANES + BATCH_EXTRA


@njit(cache=True, inline="always")
def _ld6(w, o):
    """w[o], w[o + LANES], ..., w[o + 5 LANES]: one state's 6-vector in the lanes layout."""
    return ld6_s(w, o, LANES)


@njit(cache=True, inline="always")
def _st6(w, o, t):
    st6_s(w, o, LANES, t)


@njit(cache=True, inline="always")
def _dof_constants(mf, dd):
    """(S 6-vector, armature) of the degree of freedom whose floats start at mf[dd]."""
    so = dd + D_S
    return (mf[so], mf[so + 1], mf[so + 2], mf[so + 3], mf[so + 4], mf[so + 5], mf[dd + D_ARMATURE])


@njit(cache=True, inline="always")
def _joint_force(c, f, qd, qdd, mf, dd):
    """tau = S^T f (Eq. 5.17) + armature qdd + tau_f(qd) (the joint law, joint_law.py), c
    from _dof_constants."""
    return (c[0] * f[0] + c[1] * f[1] + c[2] * f[2] + c[3] * f[3] + c[4] * f[4] + c[5] * f[5]
            + c[6] * qdd + friction_torque(mf, dd, qd))


@njit(types.int64(I1, F1, F2, F2, F2, F2, F1), cache=True, fastmath=FASTMATH)
def rnea_lanes_kernel(mi, mf, Q, QD, QDD, TAU, w):
    """TAU[k] = ID(Q[k], QD[k], QDD[k]) for every row k; w of work_size(model). Status as rnea_kernel."""
    L = LANES
    nb = mi[H_NB]
    n = Q.shape[0]
    for k in range(n):  # the checks of rnea_kernel, all first: a refused batch computes nothing
        st = check_state(Q[k], QD[k], QDD[k], mi)
        if st != 0:
            return st
    base = BATCH_BLOCK * nb * L                    # the fixed base: v = 0, a = -a_g (§5.3)
    tmp = w[BATCH_BLOCK * (nb + 1) * L + LT_X:]    # E and r of a free joint, one state at a time
    for m in range(6):
        for k in range(L):
            w[_u(base + (L_V + m) * L + k)] = 0.0
            w[_u(base + (L_A + m) * L + k)] = 0.0 if m < 3 else -mf[HF_GRAVITY + m - 3]
    for k0 in range(0, n, L):
        nk = min(L, n - k0)
        # outward pass, Eqs. 5.14-5.16
        for i in range(nb):
            p = parent(mi, i)
            jt = joint_type(mi, i)
            qi = first_q(mi, i)
            vi = first_dof(mi, i)
            I_i = body_f(i) + B_RBI
            b = BATCH_BLOCK * i * L
            pb = BATCH_BLOCK * p * L if p >= 0 else base
            for t in range((L_V_N + L_A_N) * L):  # the parent's v and a (one run: layout.py), into this block
                w[_u(b + L_PV * L + t)] = w[_u(pb + L_V * L + t)]
            if jt == FREE:  # one state at a time
                for k in range(L):
                    kk = min(k0 + k, n - 1)
                    jcalc_sc(mi, mf, i, Q[kk], tmp, 0, L_E_N, 0.0, 1.0)
                    for m in range(L_E_N):
                        w[_u(b + (L_E + m) * L + k)] = tmp[m]
                    for m in range(L_R_N):
                        w[_u(b + (L_R + m) * L + k)] = tmp[L_E_N + m]
                    _st6(w, b + L_VJ * L + k, S_mul(mi, mf, i, QD[kk]))
                    _st6(w, b + L_SQ * L + k, S_mul(mi, mf, i, QDD[kk]))
            else:
                for k in range(L):
                    kk = min(k0 + k, n - 1)
                    w[_u(b + L_Q * L + k)] = Q[kk, qi]
                    w[_u(b + L_QD * L + k)] = QD[kk, vi]
                    w[_u(b + L_QDD * L + k)] = QDD[kk, vi]
                if jt == REVOLUTE:
                    sincos_row(w, b + L_Q * L, b + L_SIN * L, b + L_COS * L, L)
                jcalc_lanes(mi, mf, i, w, b + L_E * L, b + L_R * L, b + L_Q * L, b + L_SIN * L, b + L_COS * L, L)
                so = dof_f(nb, vi) + D_S  # v_J = S qd, S qdd (Table 4.1: S is constant)
                s0, s1, s2, s3, s4, s5 = mf[so], mf[so + 1], mf[so + 2], mf[so + 3], mf[so + 4], mf[so + 5]
                for k in range(L):
                    x = w[_u(b + L_QD * L + k)]
                    y = w[_u(b + L_QDD * L + k)]
                    _st6(w, b + L_VJ * L + k, (s0 * x, s1 * x, s2 * x, s3 * x, s4 * x, s5 * x))
                    _st6(w, b + L_SQ * L + k, (s0 * y, s1 * y, s2 * y, s3 * y, s4 * y, s5 * y))
            I = (mf[I_i], mf[I_i + 1], mf[I_i + 2], mf[I_i + 3], mf[I_i + 4], mf[I_i + 5], mf[I_i + 6],
                 mf[I_i + 7], mf[I_i + 8], mf[I_i + 9], mf[I_i + 10], mf[I_i + 11], mf[I_i + 12])  # RBI_N numbers
            for k in range(L):
                o = b + k
                vJ = _ld6(w, o + L_VJ * L)
                xv = xm_s(w, o + L_E * L, o + L_R * L, _ld6(w, o + L_PV * L), L)
                xa = xm_s(w, o + L_E * L, o + L_R * L, _ld6(w, o + L_PAC * L), L)
                sq = _ld6(w, o + L_SQ * L)
                v = (xv[0] + vJ[0], xv[1] + vJ[1], xv[2] + vJ[2], xv[3] + vJ[3], xv[4] + vJ[4], xv[5] + vJ[5])
                cv = crm_t(v, vJ)
                a = (xa[0] + sq[0] + cv[0], xa[1] + sq[1] + cv[1], xa[2] + sq[2] + cv[2],
                     xa[3] + sq[3] + cv[3], xa[4] + sq[4] + cv[4], xa[5] + sq[5] + cv[5])
                Ia = rbi_mul_c(I, a)
                cf = crf_t(v, rbi_mul_c(I, v))
                _st6(w, o + L_V * L, v)
                _st6(w, o + L_A * L, a)
                _st6(w, o + L_F * L, (Ia[0] + cf[0], Ia[1] + cf[1], Ia[2] + cf[2], Ia[3] + cf[3],
                                      Ia[4] + cf[4], Ia[5] + cf[5]))
        # inward pass, Eqs. 5.17-5.18
        for i in range(nb - 1, -1, -1):
            p = parent(mi, i)
            vi = first_dof(mi, i)
            b = BATCH_BLOCK * i * L
            if joint_type(mi, i) == FREE:
                for dof in range(vi, vi + dof_count(mi, i)):
                    c = _dof_constants(mf, dof_f(nb, dof))
                    for k in range(nk):
                        TAU[k0 + k, dof] = _joint_force(c, _ld6(w, b + L_F * L + k), QD[k0 + k, dof],
                                                        QDD[k0 + k, dof], mf, dof_f(nb, dof))
            else:
                c = _dof_constants(mf, dof_f(nb, vi))  # read once, outside the loop
                for k in range(L):
                    w[_u(b + L_TAU * L + k)] = _joint_force(c, _ld6(w, b + L_F * L + k), w[_u(b + L_QD * L + k)],
                                                            w[_u(b + L_QDD * L + k)], mf, dof_f(nb, vi))
                for k in range(nk):
                    TAU[k0 + k, vi] = w[_u(b + L_TAU * L + k)]
            if p >= 0:
                for k in range(L):  # X_i^T f_i, in this block
                    _st6(w, b + L_VJ * L + k, xtf_s(w, b + L_E * L + k, b + L_R * L + k,
                                                    _ld6(w, b + L_F * L + k), L))
                src = b + L_VJ * L
                dst = BATCH_BLOCK * p * L + L_F * L
                for t in range(6 * L):  # f_λ(i) += X_i^T f_i
                    w[_u(dst + t)] += w[_u(src + t)]
    return 0
