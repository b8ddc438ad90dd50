"""Articulated-body algorithm for forward dynamics (Featherstone Ch. 7, Table 7.1), with the
inverse-dynamics joints of articulated-body hybrid dynamics (Table 9.3) as an option of the same
three passes (``hybrid.py`` is its public face).

Pass 1 (outward):  v_i = X_i v_λ(i) + S_i qd_i ;  c_i = v_i x S_i qd_i  (c_J = 0)      (Eqs. 7.34-7.36)
                   I_i^A = I_i ;  p_i^A = v_i x* I_i v_i - f_i^x                          (Eqs. 7.37-7.38)
Pass 2 (inward):   U_i = I_i^A S_i ;  D_i = S_i^T U_i ;  u_i = tau_i - S_i^T p_i^A         (Eqs. 7.43-7.45)
                   I^a = I_i^A - U_i D_i^-1 U_i^T ;  p^a = p_i^A + I^a c_i + U_i D_i^-1 u_i (Eqs. 7.39-7.40)
                   I_λ(i)^A += X_i^T I^a X_i ;  p_λ(i)^A += X_i^T p^a                      (Eqs. 7.47-7.48)
Pass 3 (outward):  a' = X_i a_λ(i) + c_i ;  qdd_i = D_i^-1 (u_i - U_i^T a') ;  a_i = a' + S_i qdd_i
                   with a_0 = -a_g                                                         (Eqs. 7.49-7.50)
At an inverse-dynamics joint of Table 9.3: c_i += S_i qdd_i, I^a = I_i^A, p^a = p_i^A + I^a c_i, and
pass 3 gives a_i = X_i a_λ(i) + c_i and tau_i = S_i^T (I_i^A a_i + p_i^A).

The rotor inertia (Example 9.5, Eq. 9.28) adds to D_i; friction subtracts from u_i. A floating base
is the 6-DoF joint of body 0, so this is also the floating-base ABA (Table 9.4 is the same
computation with the base's D = I_0^A, which is what the 6-DoF pass produces). A D_i that is not
positive (a subtree with no inertia about its joint) stops the algorithm with an error naming the
body instead of producing inf or NaN.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types

from ..joints import jcalc
from ..spatial import (cross_force_add, cross_motion_add, dense_to_parent_add, rbi_mul, rbi_to_dense,
                       x_mul_motion, xt_mul_force_add)
from ._common import (F1, F2, I1, check_q, A_FEXT, A_Q, A_QD, A_TAU, BAD_LENGTH, EMPTY, EMPTY_I, SINGULAR, axis_of, check,
                      fast_vec, fext_array, raise_status, to_tree_q, to_tree_v, unpack, work_views)


@njit(cache=True, inline="always")
def _sign(x):
    return 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)


@njit(cache=True)
def _invert_spd(A, n, out, tol):
    """out = A^-1 for a small symmetric positive definite n x n (flat, stride 6) by Gauss-Jordan
    with diagonal pivots. Returns False when a pivot is <= tol (singular)."""
    M = np.empty((6, 12))
    for a in range(n):
        for b in range(n):
            M[a, b] = A[6 * a + b]
            M[a, 6 + b] = 1.0 if a == b else 0.0
    for k in range(n):
        piv = M[k, k]
        if not (piv > tol):
            return False
        for b in range(12):
            M[k, b] /= piv
        for a in range(n):
            if a != k:
                fac = M[a, k]
                if fac != 0.0:
                    for b in range(12):
                        M[a, b] -= fac * M[k, b]
    for a in range(n):
        for b in range(n):
            out[6 * a + b] = M[a, 6 + b]
    return True


@njit(types.int64(I1, F1, F1, F1, F1, F1, F1, F1, I1, F1, F1), cache=True)
def aba_kernel(mi, mf, q, qd, tau, fx, qdd, w, fdmask, qdd_in, tau_out):
    nb, nvt, nqt, J, B, D = unpack(mi, mf)
    hybrid = fdmask.shape[0] != 0
    st = check_q(q, nqt, J, nb)
    if st == 0:
        st = check(qd, nvt, A_QD)
    if st == 0:
        st = check(tau, nvt, A_TAU)
    if st == 0 and hybrid:
        st = check(qdd_in, nvt, 2)
    if st != 0:
        return st
    if fx.shape[0] != 0 and fx.shape[0] != 6 * nb:
        return BAD_LENGTH * 100000000 + A_FEXT * 100000 + min(fx.shape[0], 99999)
    tol = mf[3]
    E, r, v, a, f, c, IA, pA, Rw, pw, Dinv, U, u, d, tmp = work_views(w, nb, nvt)
    vJ = tmp[0:6]
    Iv = tmp[6:12]
    Ia = tmp[12:48]
    pa = tmp[48:54]
    Dm = tmp[54:90]
    a0 = tmp[90:96]
    ap = tmp[96:102]
    xtmp = tmp[102:165]
    # ---- pass 1
    for i in range(nb):
        p = J[i, 0]
        jt = J[i, 1]
        vi = J[i, 3]
        nv = J[i, 4]
        Bi = B[i]
        jcalc(jt, axis_of(jt, D[vi]), q, J[i, 2], Bi[0:9], Bi[9:12], E[i], r[i])
        for k in range(6):
            vJ[k] = 0.0
        for dof in range(vi, vi + nv):
            for k in range(6):
                vJ[k] += D[dof, k] * qd[dof]
        vv = v[i]
        if p >= 0:
            x_mul_motion(E[i], r[i], v[p], vv)
            for k in range(6):
                vv[k] += vJ[k]
        else:
            for k in range(6):
                vv[k] = vJ[k]
        ci = c[i]
        for k in range(6):
            ci[k] = 0.0
        cross_motion_add(vv, vJ, 1.0, ci)
        if hybrid and fdmask[i] == 0:
            for dof in range(vi, vi + nv):
                for k in range(6):
                    ci[k] += D[dof, k] * qdd_in[dof]
        m = Bi[12]
        h = Bi[13:16]
        Ib = Bi[16:25]
        rbi_to_dense(m, h, Ib, IA[i])
        rbi_mul(m, h, Ib, vv, Iv)
        for k in range(6):
            pA[i, k] = 0.0
        cross_force_add(vv, Iv, pA[i])
        if fx.shape[0] != 0:
            for k in range(6):
                pA[i, k] -= fx[6 * i + k]
    # ---- pass 2
    for i in range(nb - 1, -1, -1):
        p = J[i, 0]
        vi = J[i, 3]
        nv = J[i, 4]
        IAi = IA[i]
        fd = (not hybrid) or fdmask[i] != 0
        if fd:
            for col in range(nv):
                dof = vi + col
                s = D[dof]
                Uc = U[dof]
                for k in range(6):
                    x = 0.0
                    for l in range(6):
                        x += IAi[6 * k + l] * s[l]
                    Uc[k] = x
                x = tau[dof] - (s[0] * pA[i, 0] + s[1] * pA[i, 1] + s[2] * pA[i, 2] + s[3] * pA[i, 3]
                                + s[4] * pA[i, 4] + s[5] * pA[i, 5])
                x -= s[7] * qd[dof] + s[8] * _sign(qd[dof])
                u[dof] = x
            for r1 in range(nv):
                for r2 in range(nv):
                    s = D[vi + r1]
                    Uc = U[vi + r2]
                    Dm[6 * r1 + r2] = (s[0] * Uc[0] + s[1] * Uc[1] + s[2] * Uc[2] + s[3] * Uc[3] + s[4] * Uc[4]
                                       + s[5] * Uc[5])
                Dm[6 * r1 + r1] += D[vi + r1, 6]
            if nv == 1:
                if not (Dm[0] > tol):
                    return SINGULAR * 100000000 + i
                Dinv[i, 0] = 1.0 / Dm[0]
            else:
                if not _invert_spd(Dm, nv, Dinv[i], tol):
                    return SINGULAR * 100000000 + i
            if p >= 0:
                # Ia = IA - U Dinv U^T ; pa = pA + Ia c + U Dinv u
                for k in range(36):
                    Ia[k] = IAi[k]
                for k in range(6):
                    pa[k] = pA[i, k]
                for r1 in range(nv):
                    # w_r1 = Σ_r2 Dinv[r1, r2] U_r2  and  Dinv u
                    du = 0.0
                    for r2 in range(nv):
                        du += Dinv[i, 6 * r1 + r2] * u[vi + r2]
                    Ur1 = U[vi + r1]
                    for k in range(6):
                        pa[k] += Ur1[k] * du
                    for r2 in range(nv):
                        dv = Dinv[i, 6 * r1 + r2]
                        Ur2 = U[vi + r2]
                        for k in range(6):
                            x = Ur1[k] * dv
                            for l in range(6):
                                Ia[6 * k + l] -= x * Ur2[l]
            else:
                continue
        else:
            if p < 0:
                continue
            for k in range(36):
                Ia[k] = IAi[k]
            for k in range(6):
                pa[k] = pA[i, k]
        ci = c[i]
        for k in range(6):
            x = 0.0
            for l in range(6):
                x += Ia[6 * k + l] * ci[l]
            pa[k] += x
        dense_to_parent_add(E[i], r[i], Ia, IA[p], xtmp)
        xt_mul_force_add(E[i], r[i], pa, pA[p])
    # ---- pass 3
    a0[0] = 0.0
    a0[1] = 0.0
    a0[2] = 0.0
    a0[3] = -mf[0]
    a0[4] = -mf[1]
    a0[5] = -mf[2]
    for i in range(nb):
        p = J[i, 0]
        vi = J[i, 3]
        nv = J[i, 4]
        ai = a[i]
        x_mul_motion(E[i], r[i], a[p] if p >= 0 else a0, ai)
        for k in range(6):
            ai[k] += c[i, k]
        fd = (not hybrid) or fdmask[i] != 0
        if fd:
            for r1 in range(nv):
                Uc = U[vi + r1]
                ap[r1] = u[vi + r1] - (Uc[0] * ai[0] + Uc[1] * ai[1] + Uc[2] * ai[2] + Uc[3] * ai[3]
                                       + Uc[4] * ai[4] + Uc[5] * ai[5])
            for r1 in range(nv):
                x = 0.0
                for r2 in range(nv):
                    x += Dinv[i, 6 * r1 + r2] * ap[r2]
                qdd[vi + r1] = x
                s = D[vi + r1]
                for k in range(6):
                    ai[k] += s[k] * x
            if hybrid:
                for r1 in range(nv):
                    tau_out[vi + r1] = tau[vi + r1]
        else:
            # tau_i = S_i^T (I_i^A a_i + p_i^A)   (Table 9.3, pass 3)
            IAi = IA[i]
            for r1 in range(nv):
                dof = vi + r1
                s = D[dof]
                x = 0.0
                for k in range(6):
                    y = pA[i, k]
                    for l in range(6):
                        y += IAi[6 * k + l] * ai[l]
                    x += s[k] * y
                x += s[6] * qdd_in[dof] + s[7] * qd[dof] + s[8] * _sign(qd[dof])
                tau_out[dof] = x
                qdd[dof] = qdd_in[dof]
    return 0


def forward_dynamics(model, q, qd, tau, f_ext=None, data=None, method="aba"):
    """qdd = FD(model, q, qd, tau, f_ext) (Featherstone Eq. 3.3).

    method="aba": the articulated-body algorithm (Table 7.1), O(n). method="crba": H from the CRBA and
    C from the RNEA, solved with the sparse L^T D L factorisation (Tables 6.2-6.5; with a floating base
    this is Table 9.5's route). Models with mimic joints always use the CRBA route on G^T H G (§9.6).
    Raises SingularMassMatrixError (naming the link) when H is singular.
    """
    if model.has_mimic or method == "crba":
        from .ltdl import crba_forward_dynamics

        return crba_forward_dynamics(model, q, qd, tau, f_ext, data)
    if method != "aba":
        from ..errors import InputError

        raise InputError(f"method must be 'aba' or 'crba', got {method!r}")
    w = data.work if data is not None else np.empty(model.work_size)
    fx = fext_array(model, f_ext) if f_ext else EMPTY
    qdd = np.empty(model.nvt)
    try:
        st = aba_kernel(model._kmi, model._kmf, q, qd, tau, fx, qdd, w, EMPTY_I, EMPTY, EMPTY)
    except TypeError:
        st = aba_kernel(model._kmi, model._kmf, fast_vec(q, "q"), fast_vec(qd, "qd"), fast_vec(tau, "tau"), fx, qdd, w,
                        EMPTY_I, EMPTY, EMPTY)
    if st:
        raise_status(model, st, what="forward dynamics")
    return qdd
