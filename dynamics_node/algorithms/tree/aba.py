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
from ..._jit import carray, cfunc, njit, types, view

from ...joints import jcalc_sc, sincos_all
from ...packed import body_f, dof_count, dof_f, first_dof, parent
from ...spatial import crf_t, dense_to_parent_add, load6, rbi_mul_t, rbi_to_dense, xm_t, xtf_add_t
from ...dispatch import Route, wrenches
from ...errors import InputError, clip
from ..._kernel_io import INDEX_MAX, status
from ..._kernel_io import (FASTMATH, SIG3, model_from_pointers, F1, I1, check_q_qd, new_work, A_FEXT, A_TAU,
                      BAD_LENGTH, EMPTY, EMPTY_I, SINGULAR, check)
from ...joints import joint_velocity
from ...layout import (B_RBI, D_ARMATURE, D_S, FEXT_N, HF_TOL, H_NB, H_NQT,
                      H_NVT, H_NVU, T_D, T_D_N, T_IA, T_PA, T_UA, V_U, V_UU, V_U_N, WORK_BODY,
                      WORK_DOF, W_A, W_A_N, W_C, W_COS, W_C_N, W_DINV, W_DINV_N, W_E, W_E_N, W_IA, W_IA_N, W_PA,
                      W_PA_N, W_R, W_R_N, W_SIN, W_V, W_V_N)
from ...joint_law import friction_torque
from .crba import crba_kernel
from .dense import cholesky, cholesky_solve
from .mimic import gt_vec, gtdg, scratch_at, state_to_tree
from .rnea import gravity_acceleration, rnea_kernel


@njit(cache=True)
def _invert_spd(A, n, out, tol):
    """out = A^-1 for a small symmetric positive definite n x n (flat, stride 6): Gauss-Jordan in
    place with diagonal pivots (no allocation). Returns False when a pivot is <= tol (singular)."""
    for a in range(n):
        for b in range(n):
            out[6 * a + b] = A[6 * a + b]
    for k in range(n):
        piv = out[7 * k]
        if not (piv > tol):
            return False
        out[7 * k] = 1.0
        inv = 1.0 / piv
        for b in range(n):
            out[6 * k + b] *= inv
        for a in range(n):
            if a != k:
                fac = out[6 * a + k]
                if fac != 0.0:
                    out[6 * a + k] = 0.0
                    for b in range(n):
                        out[6 * a + b] -= fac * out[6 * k + b]
    return True


@njit(types.int64(I1, F1, F1, F1, F1, F1, F1, F1, I1, F1, F1), cache=True, fastmath=FASTMATH)
def aba_kernel(mi, mf, q, qd, tau, fx, qdd, w, fdmask, qdd_in, tau_out):
    """Tables 7.1 / 9.3 on flat offsets into the work array (layout.WORK_PER_BODY: X_i at W_E, W_R;
    v_i W_V; a_i W_A; c_i W_C; I_i^A W_IA; p_i^A W_PA; D_i^-1 W_DINV; per dof U_i V_U, u_i V_UU; the
    scratch T_*). fdmask empty = every joint forward."""
    nb = mi[H_NB]
    nvt = mi[H_NVT]
    hybrid = fdmask.shape[0] != 0
    st = check_q_qd(q, qd, mi)
    if st == 0:
        st = check(tau, nvt, A_TAU)
    if st == 0 and hybrid:
        st = check(qdd_in, nvt, 2)
    if st != 0:
        return st
    hasfx = fx.shape[0] != 0
    if hasfx and fx.shape[0] != FEXT_N * nb:
        return status(BAD_LENGTH, A_FEXT, min(fx.shape[0], INDEX_MAX))
    tol = mf[HF_TOL]
    E0, r0, v0, a0, c0 = W_E * nb, W_R * nb, W_V * nb, W_A * nb, W_C * nb
    I0, P0, Di0 = W_IA * nb, W_PA * nb, W_DINV * nb
    U0 = WORK_BODY * nb + V_U * nvt
    u0 = WORK_BODY * nb + V_UU * nvt
    t0 = WORK_BODY * nb + WORK_DOF * nvt
    Ia, pa, Dm, ap = t0 + T_IA, t0 + T_PA, t0 + T_D, t0 + T_UA
    sincos_all(mi, q, w, W_SIN * nb)
    # ---- pass 1 (Eqs. 7.34-7.38)
    for i in range(nb):
        p = parent(mi, i)
        vi = first_dof(mi, i)
        nv = dof_count(mi, i)
        I_i = body_f(i) + B_RBI
        eo = E0 + W_E_N * i
        ro = r0 + W_R_N * i
        jcalc_sc(mi, mf, i, q, w, eo, ro, w[W_SIN * nb + i], w[W_COS * nb + i])
        xv = xm_t(w, eo, ro, load6(w, v0 + W_V_N * p)) if p >= 0 else (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        v, cc = joint_velocity(mi, mf, i, xv, qd)  # v_i = X_i v_λ(i) + S_i qd_i ; c_i = v_i x S_i qd_i
        vo = v0 + W_V_N * i
        co = c0 + W_C_N * i
        for k in range(6):
            w[vo + k] = v[k]
            w[co + k] = cc[k]
        if hybrid and fdmask[i] == 0:  # Table 9.3: c_i += S_i qdd_i at an inverse-dynamics joint
            for dof in range(vi, vi + nv):
                so = dof_f(nb, dof) + D_S
                for k in range(6):
                    w[co + k] += mf[so + k] * qdd_in[dof]
        rbi_to_dense(mf, I_i, w, I0 + W_IA_N * i)  # I_i^A = I_i
        pf = crf_t(v, rbi_mul_t(mf, I_i, v))  # p_i^A = v_i x* I_i v_i - f_i^x
        po = P0 + W_PA_N * i
        for k in range(6):
            w[po + k] = pf[k]
        if hasfx:
            for k in range(6):
                w[po + k] -= fx[FEXT_N * i + k]
    # ---- pass 2 (Eqs. 7.39-7.48)
    for i in range(nb - 1, -1, -1):
        p = parent(mi, i)
        vi = first_dof(mi, i)
        nv = dof_count(mi, i)
        IAo = I0 + W_IA_N * i
        po = P0 + W_PA_N * i
        co = c0 + W_C_N * i
        fd = (not hybrid) or fdmask[i] != 0
        Dio = Di0 + W_DINV_N * i
        if fd and nv == 1:
            # one degree of freedom (every joint but a free one): scalars, and I^a, p^a formed in
            # place of I^A, p^A, which pass 3 no longer needs at a forward-dynamics joint
            dd = dof_f(nb, vi)
            so = dd + D_S
            Uo = U0 + V_U_N * vi
            s0, s1, s2, s3, s4, s5 = mf[so], mf[so + 1], mf[so + 2], mf[so + 3], mf[so + 4], mf[so + 5]
            D = mf[dd + D_ARMATURE]  # rotor inertia (Eq. 9.28)
            for k in range(6):  # U_i = I_i^A S_i ; D_i = S_i^T U_i
                b = IAo + 6 * k
                x = w[b] * s0 + w[b + 1] * s1 + w[b + 2] * s2 + w[b + 3] * s3 + w[b + 4] * s4 + w[b + 5] * s5
                w[Uo + k] = x
                D += mf[so + k] * x
            if not (D > tol):
                return status(SINGULAR, 0, i)
            dinv = 1.0 / D
            w[Dio] = dinv
            uu = (tau[vi] - (s0 * w[po] + s1 * w[po + 1] + s2 * w[po + 2] + s3 * w[po + 3] + s4 * w[po + 4]
                             + s5 * w[po + 5]) - friction_torque(mf, dd, qd[vi]))  # the joint law
            w[u0 + vi] = uu
            if p < 0:
                continue
            for k in range(6):  # I^a = I^A - U D^-1 U^T ;  p^a = p^A + U D^-1 u (+ I^a c below)
                x = w[Uo + k] * dinv
                for l in range(6):
                    w[IAo + 6 * k + l] -= x * w[Uo + l]
                w[po + k] += x * uu
            Iao = IAo
            pao = po
        elif fd:
            for col in range(nv):
                dof = vi + col
                dd = dof_f(nb, dof)
                so = dd + D_S
                Uo = U0 + V_U_N * dof
                for k in range(6):  # U_i = I_i^A S_i
                    x = 0.0
                    for l in range(6):
                        x += w[IAo + 6 * k + l] * mf[so + l]
                    w[Uo + k] = x
                x = tau[dof]  # u_i = tau_i - S_i^T p_i^A (- friction)
                for k in range(6):
                    x -= mf[so + k] * w[po + k]
                x -= friction_torque(mf, dd, qd[dof])
                w[u0 + dof] = x
            for r1 in range(nv):  # D_i = S_i^T U_i (+ rotor inertia, Eq. 9.28)
                dd = dof_f(nb, vi + r1)
                so = dd + D_S
                for r2 in range(nv):
                    Uo = U0 + V_U_N * (vi + r2)
                    x = 0.0
                    for k in range(6):
                        x += mf[so + k] * w[Uo + k]
                    w[Dm + 6 * r1 + r2] = x
                w[Dm + 7 * r1] += mf[dd + D_ARMATURE]
            if not _invert_spd(w[Dm:Dm + T_D_N], nv, w[Dio:Dio + W_DINV_N], tol):
                return status(SINGULAR, 0, i)
            if p < 0:
                continue
            # I^a = I^A - U D^-1 U^T ;  p^a = p^A + U D^-1 u (+ I^a c below)
            for k in range(W_IA_N):
                w[Ia + k] = w[IAo + k]
            for k in range(6):
                w[pa + k] = w[po + k]
            for r1 in range(nv):
                U1 = U0 + V_U_N * (vi + r1)
                du = 0.0
                for r2 in range(nv):
                    du += w[Dio + 6 * r1 + r2] * w[u0 + vi + r2]
                for k in range(6):
                    w[pa + k] += w[U1 + k] * du
                for r2 in range(nv):
                    dv = w[Dio + 6 * r1 + r2]
                    U2 = U0 + V_U_N * (vi + r2)
                    for k in range(6):
                        x = w[U1 + k] * dv
                        for l in range(6):
                            w[Ia + 6 * k + l] -= x * w[U2 + l]
            Iao = Ia
            pao = pa
        else:
            if p < 0:
                continue
            # Table 9.3 at an inverse-dynamics joint: I^a = I^A (read in place), p^a = p^A + I^a c
            # (in scratch: pass 3 needs p^A)
            for k in range(6):
                w[pa + k] = w[po + k]
            Iao = IAo
            pao = pa
        for k in range(6):
            b = Iao + 6 * k
            w[pao + k] += (w[b] * w[co] + w[b + 1] * w[co + 1] + w[b + 2] * w[co + 2] + w[b + 3] * w[co + 3]
                           + w[b + 4] * w[co + 4] + w[b + 5] * w[co + 5])
        # I_λ(i)^A += X^T I^a X ;  p_λ(i)^A += X^T p^a
        dense_to_parent_add(w, E0 + W_E_N * i, r0 + W_R_N * i, Iao, I0 + W_IA_N * p)
        xtf_add_t(w, E0 + W_E_N * i, r0 + W_R_N * i, load6(w, pao), w, P0 + W_PA_N * p)
    # ---- pass 3 (Eqs. 7.49-7.50), a_0 = -a_g
    a_0 = gravity_acceleration(mf)
    for i in range(nb):
        p = parent(mi, i)
        vi = first_dof(mi, i)
        nv = dof_count(mi, i)
        eo = E0 + W_E_N * i
        ro = r0 + W_R_N * i
        co = c0 + W_C_N * i
        xa = xm_t(w, eo, ro, load6(w, a0 + W_A_N * p) if p >= 0 else a_0)
        ao = a0 + W_A_N * i
        for k in range(6):
            w[ao + k] = xa[k] + w[co + k]  # a' = X a_λ(i) + c_i
        fd = (not hybrid) or fdmask[i] != 0
        if fd:
            Dio = Di0 + W_DINV_N * i
            for r1 in range(nv):
                U1 = U0 + V_U_N * (vi + r1)
                x = w[u0 + vi + r1]
                for k in range(6):
                    x -= w[U1 + k] * w[ao + k]
                w[ap + r1] = x
            for r1 in range(nv):  # qdd_i = D_i^-1 (u_i - U_i^T a') ; a_i = a' + S_i qdd_i
                x = 0.0
                for r2 in range(nv):
                    x += w[Dio + 6 * r1 + r2] * w[ap + r2]
                qdd[vi + r1] = x
                so = dof_f(nb, vi + r1) + D_S
                for k in range(6):
                    w[ao + k] += mf[so + k] * x
            if hybrid:
                for r1 in range(nv):
                    tau_out[vi + r1] = tau[vi + r1]
        else:
            # tau_i = S_i^T (I_i^A a_i + p_i^A)   (Table 9.3, pass 3)
            IAo = I0 + W_IA_N * i
            po = P0 + W_PA_N * i
            for r1 in range(nv):
                dof = vi + r1
                dd = dof_f(nb, dof)
                so = dd + D_S
                x = 0.0
                for k in range(6):
                    y = w[po + k]
                    for l in range(6):
                        y += w[IAo + 6 * k + l] * w[ao + l]
                    x += mf[so + k] * y
                x += mf[dd + D_ARMATURE] * qdd_in[dof] + friction_torque(mf, dd, qd[dof])
                tau_out[dof] = x
                qdd[dof] = qdd_in[dof]
    return 0


@njit(types.int64(I1, F1, F1, F1, F1, F1), cache=True)
def aba_entry(mi, mf, q, qd, tau, qdd):
    w = new_work(mi)
    e = w[0:0]
    return aba_kernel(mi, mf, q, qd, tau, e, qdd, w, mi[0:0], e, e)


# the C front's scratch for a model with mimic joints (dispatch.Route's extra): q_t (nqt <= nb + nvt), qd_t, a zero
# qdd_t, the bias C_t, the reduced right-hand side (nv <= nvt), H_t and the reduced G^T H G
FD_MIMIC = (1, 4, 2, 0)


@cfunc(SIG3, cache=True)
def aba_c(mip, mfp, qp, nq, qdp, nqd, taup, ntau, outp, wp, nw):
    """qdd into out; a model with mimic joints in user coordinates: G^T H G qdd = tau - G^T C (Featherstone §9.6,
    as ltdl.crba_forward_dynamics: H by the CRBA, C by the RNEA at qdd = 0, the reduced H by Cholesky,
    mimic.py), its scratch FD_MIMIC at the end of w."""
    mi, mf, nvt = model_from_pointers(mip, mfp)
    w = carray(wp, (nw,))
    e = w[0:0]
    q, qd, tau = carray(qp, (nq,)), carray(qdp, (nqd,)), carray(taup, (ntau,))
    if mi[H_NVU] == nvt:
        return aba_kernel(mi, mf, q, qd, tau, e, carray(outp, (nvt,)), w, mi[0:0], e, e)
    nqt, nu = mi[H_NQT], mi[H_NVU]
    b = scratch_at(mi, nw, nqt + nvt + nvt + nvt + nu + nvt * nvt + nu * nu)
    if b < 0:
        return status(BAD_LENGTH, 0, 0)
    qt = w[b:b + nqt]
    o = b + nqt   # then qd_t, a zero qdd_t, C_t (nvt each), the right-hand side (nu), H_t and the reduced H
    qdt = w[o:o + nvt]
    o += nvt
    zt = w[o:o + nvt]
    o += nvt
    Ct = w[o:o + nvt]
    o += nvt
    bu = w[o:o + nu]
    o += nu
    Ht, Hu = w[o:o + nvt * nvt], view(w, o + nvt * nvt, (nu, nu))
    st = state_to_tree(mi, mf, q, qd, qt, qdt)
    if st == 0:
        st = check(tau, nu, A_TAU)
    if st != 0:
        return st
    for k in range(nvt):
        zt[k] = 0.0
    st = rnea_kernel(mi, mf, qt, qdt, zt, e, Ct, w[0:b])
    if st == 0:
        st = crba_kernel(mi, mf, qt, Ht, w[0:b])
    if st != 0:
        return st
    gtdg(mi, mf, view(Ht, 0, (nvt, nvt)), Hu)
    gt_vec(mi, mf, Ct, bu)
    for a in range(nu):
        bu[a] = tau[a] - bu[a]
    if cholesky(Hu, Hu, nu, mf[HF_TOL]) >= 0:
        return status(SINGULAR, 0, 0)   # (the Python side names the body)
    cholesky_solve(Hu, bu, nu)
    out = carray(outp, (nu,))
    for a in range(nu):
        out[a] = bu[a]
    return 0


def _aba(model, data, w, q, qd, tau, f_ext, method):
    if method not in ("aba", "crba"):
        if method == "sparse":  # Featherstone §8.13 on the tree's bodies and joints
            from ..loops.sparse import sparse_forward_dynamics

            return 0, sparse_forward_dynamics(model, q, qd, tau, 0.0, f_ext, loops=False)
        raise InputError(f"method must be 'aba', 'crba' or 'sparse', got {clip(repr(method))}")
    if model.has_mimic or method == "crba":
        from .ltdl import crba_forward_dynamics

        return 0, crba_forward_dynamics(model, q, qd, tau, f_ext, data)
    qdd = np.empty(model.nvt)
    fx = wrenches(model, f_ext)
    return aba_kernel(model._kmi, model._kmf, q, qd, tau, fx, qdd, w, EMPTY_I, EMPTY, EMPTY), qdd


# user coordinates in (a mimic model's reduced system is solved by ltdl.crba_forward_dynamics)
_FD = Route("forward dynamics", (("q", "q"), ("qd", "v"), ("tau", "v")), _aba, extras=("f_ext", "method"),
            fast=(None, "aba"), shim=aba_c, tree=False, extra=FD_MIMIC, mimic=True).front


def forward_dynamics(model, q, qd, tau, f_ext=None, data=None, method="aba"):
    """qdd = FD(model, q, qd, tau, f_ext) (Featherstone Eq. 3.3).

    method="aba": the articulated-body algorithm (Table 7.1), O(n). method="crba": H from the CRBA and
    C from the RNEA, solved with the sparse L^T D L factorisation (Tables 6.2-6.5; with a floating base
    this is Table 9.5's route). method="sparse": the sparse-matrix method (§8.13, Eq. 8.64) on the
    bodies and joints, factored by SuperLU (algorithms/loops/sparse.py; no mimic joints, no armature).
    Models with mimic joints otherwise use the CRBA route on G^T H G (§9.6).
    Raises SingularMassMatrixError (naming the link) when H is singular.
    """
    return _FD(model, data, q, qd, tau, f_ext, method)
