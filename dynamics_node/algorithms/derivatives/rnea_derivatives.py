"""Analytic derivatives of the recursive Newton-Euler algorithm (Carpentier & Mansard, RSS 2018,
"Analytical Derivatives of Rigid Body Dynamics Algorithms": a forward and a backward pass over world-frame
quantities, as Pinocchio's computeRNEADerivatives). The paper is not among the project's seeds: the
equations below are derived here, in Featherstone's notation, and checked against Pinocchio and finite
differences (test_core_derivatives.py).

Every quantity below is expressed in the world (base) frame, angular-first (Featherstone §2.2):
J_i = ^0X_i S_i are the motion-subspace columns of joint i in the world frame, Y_i the body's spatial
inertia in the world frame, and for a body k the forward pass gives (Featherstone Eqs. 5.14-5.16
written in the world frame, where d(J_i)/dt = v_i x J_i because S_i is constant in the body frame):

    v_k = v_λ(k) + J_k qd_k                              a_k = a_λ(k) + J_k qdd_k + v_k x J_k qd_k
    f_k = Y_k a_k + v_k x* Y_k v_k - f^x_k               a_0 = -a_g (gravity as a base acceleration, §5.3)
    tau_i = J_i^T F_i,  F_i = sum of f_k over the subtree of i  (Eqs. 5.17-5.18)

A tangent perturbation of q_j (Lie-group coordinates: q ⊕ dq; for a free joint q ⊕ dq = M exp(dq) with dq
in the child frame, as Pinocchio) moves the subtree of j rigidly with the world twist J_j dq_j: every world
quantity of that subtree is transported (motions by J_j x, forces by J_j x*, inertias by J_j x* Y - Y J_j x),
except the parent's velocity and acceleration that it carries. With p = λ(j), the forward pass keeps per column j:

    dV/dq_j = v_p x J_j                               (the velocity's untransported part, "dVdq")
    dA/dq_j = a_p x J_j + v_p x dV/dq_j               ("dAdq")
    dA/dqd_j = (v_j + v_p) x J_j                      ("dAdv": d/dqd_j of a_k less the part B_k takes)

and with the composite inertia Y^C_i = sum Y_k and its variation B^C_i = sum B_k over the subtree, where

    B_k = v_k x* Y_k - Y_k v_k x + (Y_k v_k) x̄*      (d/dv of v x* Y v, less Y v x;  f x̄* m := m x* f;
                                                       the B of Singh, Russell & Wensing's IDSVA, times 2)

the backward pass gives, for joints i and j on one path (the derivatives are zero otherwise):

    j in subtree(i):  dtau_i/dq_j  = J_i^T (Y^C_j dA/dq_j + B^C_j dV/dq_j + [j != i] J_j x* F_j)
                      dtau_i/dqd_j = J_i^T (Y^C_j dA/dqd_j + B^C_j J_j)
                      H_ij         = J_i^T Y^C_j J_j                       (the CRBA's H, Table 6.2)
    j ancestor of i:  dtau_i/dq_j  = J_i^T (Y^C_i dA/dq_j + B^C_i dV/dq_j)
                      dtau_i/dqd_j = J_i^T (Y^C_i dA/dqd_j + B^C_i J_j)
                      H_ij         = J_i^T Y^C_i J_j

(the transport of J_i and of F_i cancel: (J_j x J_i)^T F + J_i^T (J_j x* F) = 0, which is why the own block
and the ancestors' columns carry no J x* F term). The model's joint terms are added per dof: armature qdd
(Example 9.5) gives H_ii += armature, and the joint law (``friction.friction_slope``, the one place that knows it)
adds its d tau_f / d qd on the diagonal of dtau/dqd.
"""
from __future__ import annotations

import numpy as np

from ..._jit import njit, types, view
from ...joints import _u, jcalc_sc, sincos_all
from ...packed import body_f, dof_count, dof_f, first_dof, parent, subtree_end
from ...layout import (B_H, B_IBAR, B_M, DERIV_BODY, DERIV_DOF, DERIV_EXTRA, D_ARMATURE, D_S,
                      FEXT_N, HF_GRAVITY, H_NB, H_NVT, RB_A, RB_BC,
                      RB_F, RB_PW, RB_RW, RB_SC, RB_V, RB_YC, RC_A0, RC_TMP, RC_TMP2, RC_VJ, RC_X, RC_ZERO, RD_DA,
                      RD_DAV, RD_DFA, RD_DFQ, RD_DFV, RD_DV, RD_J)
from ...joint_law import friction_slope  # the joint law's d tau_f / d qd, written once
from ..._kernel_io import INDEX_MAX, status
from ..._kernel_io import (A_FEXT, BAD_LENGTH, F1, F2, FASTMATH, I1, check_q, check_state)



@njit(cache=True, inline="always")
def _cross_m(m, n, out):
    """out = m x n (motion cross motion, Featherstone Eq. 2.31, angular-first)."""
    out[0] = m[1] * n[2] - m[2] * n[1]
    out[1] = m[2] * n[0] - m[0] * n[2]
    out[2] = m[0] * n[1] - m[1] * n[0]
    out[3] = m[1] * n[5] - m[2] * n[4] + m[4] * n[2] - m[5] * n[1]
    out[4] = m[2] * n[3] - m[0] * n[5] + m[5] * n[0] - m[3] * n[2]
    out[5] = m[0] * n[4] - m[1] * n[3] + m[3] * n[1] - m[4] * n[0]


@njit(cache=True, inline="always")
def _cross_f(m, f, out):
    """out = m x* f (motion cross force, Featherstone Eq. 2.32)."""
    out[0] = m[1] * f[2] - m[2] * f[1] + m[4] * f[5] - m[5] * f[4]
    out[1] = m[2] * f[0] - m[0] * f[2] + m[5] * f[3] - m[3] * f[5]
    out[2] = m[0] * f[1] - m[1] * f[0] + m[3] * f[4] - m[4] * f[3]
    out[3] = m[1] * f[5] - m[2] * f[4]
    out[4] = m[2] * f[3] - m[0] * f[5]
    out[5] = m[0] * f[4] - m[1] * f[3]


@njit(cache=True, inline="always")
def _mul6(A, x, out):
    for r in range(6):
        s = 0.0
        for c in range(6):
            s += A[r, c] * x[c]
        out[r] = s


@njit(cache=True, inline="always")
def _mul_inertia(Y, x, out):
    """out = Y x for a spatial inertia Y = [Ibar, h x; -h x, m 1] (Featherstone Eq. 2.63, world frame; a sum
    of such, Y^C, has the same form): Ibar x_w + h x x_u, m x_u - h x x_w, with h = (Y[2, 4], Y[0, 5], Y[1, 3])."""
    h0, h1, h2, m = Y[2, 4], Y[0, 5], Y[1, 3], Y[3, 3]
    w0, w1, w2, u0, u1, u2 = x[0], x[1], x[2], x[3], x[4], x[5]
    out[0] = Y[0, 0] * w0 + Y[0, 1] * w1 + Y[0, 2] * w2 + h1 * u2 - h2 * u1
    out[1] = Y[1, 0] * w0 + Y[1, 1] * w1 + Y[1, 2] * w2 + h2 * u0 - h0 * u2
    out[2] = Y[2, 0] * w0 + Y[2, 1] * w1 + Y[2, 2] * w2 + h0 * u1 - h1 * u0
    out[3] = m * u0 - h1 * w2 + h2 * w1
    out[4] = m * u1 - h2 * w0 + h0 * w2
    out[5] = m * u2 - h0 * w1 + h1 * w0


@njit(cache=True, inline="always")
def _skew(x, y, z, M, r0, c0, s):
    """M[r0:r0+3, c0:c0+3] = s * (x, y, z)x (the cross-product matrix)."""
    M[r0, c0], M[r0, c0 + 1], M[r0, c0 + 2] = 0.0, -s * z, s * y
    M[r0 + 1, c0], M[r0 + 1, c0 + 1], M[r0 + 1, c0 + 2] = s * z, 0.0, -s * x
    M[r0 + 2, c0], M[r0 + 2, c0 + 1], M[r0 + 2, c0 + 2] = -s * y, s * x, 0.0


NO_H = 2   # rnea_derivatives_kernel's last argument: dtau/dq and dtau/dqd only (0: H too; 1: gravity)
# The kernel's scratch s: layout.DERIV_PER_BODY, DERIV_PER_DOF and DERIV_SCRATCH (struct of arrays)
SCRATCH = (DERIV_BODY, DERIV_DOF, 0, DERIV_EXTRA)   # floats per body, per dof, per dof squared, constant


@njit(cache=True, pure=True)
def scratch_size(nb, nv):
    """Floats of the kernel's scratch (layout.DERIV_*)."""
    return DERIV_BODY * nb + DERIV_DOF * nv + DERIV_EXTRA


@njit(cache=True, inline="always")
def scratch_views(s, nb, nv):
    """The scratch's fields by name (layout.DERIV_*), as views: per body (nb x ...) Rw, pw, v, a, F, Y^C, B^C;
    per dof (nv x 6) J, dV, dA, dAv, dFq, dFv, dFa; the constants x, tmp, tmp2, vJ, zero, a0; and the offset
    of the sines and cosines. The caller has checked len(s) >= scratch_size(nb, nv)."""
    d = DERIV_BODY * nb
    c = d + DERIV_DOF * nv
    return (view(s, RB_RW * nb, (nb, 3, 3)), view(s, RB_PW * nb, (nb, 3)), view(s, RB_V * nb, (nb, 6)),
            view(s, RB_A * nb, (nb, 6)), view(s, RB_F * nb, (nb, 6)), view(s, RB_YC * nb, (nb, 6, 6)),
            view(s, RB_BC * nb, (nb, 6, 6)),
            view(s, d + RD_J * nv, (nv, 6)), view(s, d + RD_DV * nv, (nv, 6)), view(s, d + RD_DA * nv, (nv, 6)),
            view(s, d + RD_DAV * nv, (nv, 6)), view(s, d + RD_DFQ * nv, (nv, 6)), view(s, d + RD_DFV * nv, (nv, 6)),
            view(s, d + RD_DFA * nv, (nv, 6)),
            view(s, c + RC_X, (12,)), view(s, c + RC_TMP, (6,)), view(s, c + RC_TMP2, (6,)), view(s, c + RC_VJ, (6,)),
            view(s, c + RC_ZERO, (6,)), view(s, c + RC_A0, (6,)), RB_SC * nb)


@njit(cache=True, inline="always")
def _world_inertia(mf, i, R, p, Y):
    """Y = ^0X_i^* I_i ^iX_0 dense (Featherstone Eq. 2.66): rbi(m, h, Ibar) rotated by R (body to world)
    and moved to the world origin: h_w = R h + m p, Ibar_w = R Ibar R^T - m p x p x - p x h' x - h' x p x
    (-a x b x = (a.b) 1 - b a^T), as [Ibar_w, h_w x; -h_w x, m 1] (Eq. 2.63)."""
    bo = body_f(i)
    m = mf[bo + B_M]
    ib = bo + B_IBAR
    hr0 = R[0, 0] * mf[bo + B_H] + R[0, 1] * mf[bo + B_H + 1] + R[0, 2] * mf[bo + B_H + 2]
    hr1 = R[1, 0] * mf[bo + B_H] + R[1, 1] * mf[bo + B_H + 1] + R[1, 2] * mf[bo + B_H + 2]
    hr2 = R[2, 0] * mf[bo + B_H] + R[2, 1] * mf[bo + B_H + 1] + R[2, 2] * mf[bo + B_H + 2]
    for r in range(3):   # R Ibar R^T into Y[0:3, 3:6] first (as scratch), then its final place
        for c in range(3):
            Y[r, 3 + c] = R[r, 0] * mf[ib + c] + R[r, 1] * mf[ib + 3 + c] + R[r, 2] * mf[ib + 6 + c]
    p0, p1, p2 = p[0], p[1], p[2]
    pp = p0 * p0 + p1 * p1 + p2 * p2
    ph = p0 * hr0 + p1 * hr1 + p2 * hr2
    pv = (p0, p1, p2)
    hv = (hr0, hr1, hr2)
    for r in range(3):
        for c in range(3):
            t = Y[r, 3] * R[c, 0] + Y[r, 4] * R[c, 1] + Y[r, 5] * R[c, 2]
            # -m p x p x = m (p.p 1 - p p^T);  -(p x h x + h x p x) = 2 (p.h) 1 - h p^T - p h^T
            t += m * ((pp if r == c else 0.0) - pv[r] * pv[c])
            t += (2.0 * ph if r == c else 0.0) - hv[r] * pv[c] - pv[r] * hv[c]
            Y[r, c] = t
    h0, h1, h2 = hr0 + m * p0, hr1 + m * p1, hr2 + m * p2
    for r in range(3):
        for c in range(3):
            Y[3 + r, 3 + c] = m if r == c else 0.0
    _skew(h0, h1, h2, Y, 0, 3, 1.0)
    _skew(h0, h1, h2, Y, 3, 0, -1.0)


@njit(cache=True, inline="always")
def _variation(Y, v, h, B):
    """B = v x* Y - Y v x + h x̄* with h = Y v (the inertia's variation, see the module docstring). Y is
    symmetric, so with M = Y (v x): v x* Y = -(v x)^T Y = -M^T, and B = h x̄* - M - M^T; M's column c is
    Y (v x e_c), where v x e_c has four nonzeros (crm(v) = [w x, 0; u x, w x], Featherstone Eq. 2.31)."""
    w0, w1, w2, u0, u1, u2 = v[0], v[1], v[2], v[3], v[4], v[5]
    for r in range(6):   # M into B (then B = -(M + M^T) in place)
        y0, y1, y2, y3, y4, y5 = Y[r, 0], Y[r, 1], Y[r, 2], Y[r, 3], Y[r, 4], Y[r, 5]
        B[r, 0] = w2 * y1 - w1 * y2 + u2 * y4 - u1 * y5
        B[r, 1] = w0 * y2 - w2 * y0 + u0 * y5 - u2 * y3
        B[r, 2] = w1 * y0 - w0 * y1 + u1 * y3 - u0 * y4
        B[r, 3] = w2 * y4 - w1 * y5
        B[r, 4] = w0 * y5 - w2 * y3
        B[r, 5] = w1 * y3 - w0 * y4
    for r in range(6):
        B[r, r] = -2.0 * B[r, r]
        for c in range(r + 1, 6):
            t = -(B[r, c] + B[c, r])
            B[r, c] = t
            B[c, r] = t
    # h x̄* = [-hn x, -hf x; -hf x, 0] with h = (hn, hf) (f x̄* m := m x* f)
    hn0, hn1, hn2, hf0, hf1, hf2 = h[0], h[1], h[2], h[3], h[4], h[5]
    B[0, 1] += hn2
    B[0, 2] -= hn1
    B[1, 0] -= hn2
    B[1, 2] += hn0
    B[2, 0] += hn1
    B[2, 1] -= hn0
    for o in (0, 3):
        r0 = 3 - o
        B[r0, o + 1] += hf2
        B[r0, o + 2] -= hf1
        B[r0 + 1, o] -= hf2
        B[r0 + 1, o + 2] += hf0
        B[r0 + 2, o] += hf1
        B[r0 + 2, o + 1] -= hf0


@njit(cache=True, inline="always")
def forward_pass(mi, mf, q, qd, qdd, fx, s, gravity_only):
    """The checks of the inputs and the forward pass (module docstring): per body Rw, pw, v, a, its own Y (in Y^C's
    place), B (in B^C's) and f (in F's); per dof J, dV/dq, dA/dq and dA/dqd. Returns 0 or a status (_kernel_io)."""
    nb = mi[H_NB]
    nv = mi[H_NVT]
    if gravity_only == 1:
        st = check_q(q, mi)
    else:
        st = check_state(q, qd, qdd, mi)
    if st != 0:
        return st
    hasfx = fx.shape[0] != 0
    if hasfx and fx.shape[0] != FEXT_N * nb:
        return status(BAD_LENGTH, A_FEXT, min(fx.shape[0], INDEX_MAX))
    if s.shape[0] < DERIV_BODY * nb + DERIV_DOF * nv + DERIV_EXTRA:   # scratch_size
        return status(BAD_LENGTH, 0, 0)
    Rw, pw, ov, oa, F, Yc, Bc, J, dV, dA, dAv, dFq, dFv, dFa, x, tmp, tmp2, vJ, zero6, a0, sc = scratch_views(s, nb, nv)
    full = gravity_only != 1
    for k in range(6):
        zero6[k] = 0.0
        a0[k] = 0.0
    for k in range(3):
        a0[3 + k] = -mf[HF_GRAVITY + k]
    # ---- forward pass ----------------------------------------------------------------------
    sincos_all(mi, q, s, sc)
    for i in range(nb):
        p = parent(mi, i)
        vi = first_dof(mi, i)
        nvi = dof_count(mi, i)
        jcalc_sc(mi, mf, i, q, x, 0, 9, s[sc + i], s[sc + nb + i])   # ^iX_λ(i) = (E, r) (Table 4.1, §4.2)
        R = Rw[i]
        if p >= 0:   # body -> world rotation: ^0E_i^T = ^0E_p^T E^T; origin p_i = p_p + ^0E_p^T r
            Rp = Rw[p]
            for a in range(3):
                for b in range(3):
                    R[a, b] = Rp[a, 0] * x[3 * b] + Rp[a, 1] * x[3 * b + 1] + Rp[a, 2] * x[3 * b + 2]
                pw[i, a] = pw[p, a] + Rp[a, 0] * x[9] + Rp[a, 1] * x[10] + Rp[a, 2] * x[11]
            vp = ov[p]
            ap = oa[p]
        else:
            for a in range(3):
                for b in range(3):
                    R[a, b] = x[3 * b + a]
                pw[i, a] = x[9 + a]
            vp = zero6
            ap = a0
        op = pw[i]
        for k in range(6):
            vJ[k] = 0.0
        for c in range(vi, vi + nvi):   # J_c = ^0X_i S_c: w = R s_w, u = R s_u + o x w
            so = dof_f(nb, c) + D_S
            for a in range(3):
                J[c, a] = R[a, 0] * mf[so] + R[a, 1] * mf[so + 1] + R[a, 2] * mf[so + 2]
                J[c, 3 + a] = R[a, 0] * mf[so + 3] + R[a, 1] * mf[so + 4] + R[a, 2] * mf[so + 5]
            J[c, 3] += op[1] * J[c, 2] - op[2] * J[c, 1]
            J[c, 4] += op[2] * J[c, 0] - op[0] * J[c, 2]
            J[c, 5] += op[0] * J[c, 1] - op[1] * J[c, 0]
            if full:
                for k in range(6):
                    vJ[k] += J[c, k] * qd[c]
        for k in range(6):
            ov[i, k] = vp[k] + vJ[k]                      # v_i = v_λ(i) + J_i qd_i
        _cross_m(ov[i], vJ, tmp)
        for k in range(6):
            oa[i, k] = ap[k] + tmp[k]                     # a_i = a_λ(i) + v_i x J_i qd_i + J_i qdd_i
        if full:
            for c in range(vi, vi + nvi):
                for k in range(6):
                    oa[i, k] += J[c, k] * qdd[c]
        for c in range(vi, vi + nvi):
            if p >= 0 and full:
                _cross_m(vp, J[c], dV[c])                 # dV/dq_j = v_p x J_j
                _cross_m(vp, dV[c], tmp)
            else:
                for k in range(6):
                    dV[c, k] = 0.0
                    tmp[k] = 0.0
            _cross_m(ap, J[c], dA[c])                     # dA/dq_j = a_p x J_j + v_p x dV/dq_j
            for k in range(6):
                dA[c, k] += tmp[k]
                tmp2[k] = ov[i, k] + vp[k]
            _cross_m(tmp2, J[c], dAv[c])                  # dA/dqd_j = (v_j + v_p) x J_j
        _world_inertia(mf, i, R, op, Yc[i])
        _mul_inertia(Yc[i], oa[i], F[i])                      # f_i = Y_i a_i + v_i x* Y_i v_i - f^x_i
        if full:
            _mul_inertia(Yc[i], ov[i], tmp)
            _cross_f(ov[i], tmp, tmp2)
            for k in range(6):
                F[i, k] += tmp2[k]
            _variation(Yc[i], ov[i], tmp, Bc[i])
        if hasfx:  # f^x in body coordinates -> world: n_w = R n + o x f_w, f_w = R f
            fo = FEXT_N * i
            for a in range(3):
                tmp[3 + a] = R[a, 0] * fx[fo + 3] + R[a, 1] * fx[fo + 4] + R[a, 2] * fx[fo + 5]
                tmp[a] = R[a, 0] * fx[fo] + R[a, 1] * fx[fo + 1] + R[a, 2] * fx[fo + 2]
            tmp[0] += op[1] * tmp[5] - op[2] * tmp[4]
            tmp[1] += op[2] * tmp[3] - op[0] * tmp[5]
            tmp[2] += op[0] * tmp[4] - op[1] * tmp[3]
            for k in range(6):
                F[i, k] -= tmp[k]
    return 0


@njit(cache=True, inline="always")
def backward_pass(mi, mf, qd, dq, dv, H, s, want_rows, want_h, want_sums, full):
    """The backward pass after forward_pass (module docstring), body by body from the leaves: with want_rows the
    rows of dq and dv (and of H with want_h), each body's once its subtree is summed; with want_sums the subtree
    sums F, Y^C and B^C (B^C when full), each body's added to its parent's after its rows. want_rows False: H
    alone (Featherstone Table 6.2 in the world frame: H_mc = J_m^T Y^C J_c, dFa = Y^C J kept per dof) and the
    sums; want_sums False: the rows from sums a previous call left whole (aba_derivatives.py runs the two apart,
    with qdd's part added between them)."""
    nb = mi[H_NB]
    nv = mi[H_NVT]
    Rw, pw, ov, oa, F, Yc, Bc, J, dV, dA, dAv, dFq, dFv, dFa, x, tmp, tmp2, vJ, zero6, a0, sc = scratch_views(s, nb, nv)
    for a in range(nv):
        for b in range(nv):
            if want_rows:
                dq[a, b] = 0.0
                dv[a, b] = 0.0
            if want_h:
                H[a, b] = 0.0
    for i in range(nb - 1, -1, -1):
        p = parent(mi, i)
        vi = first_dof(mi, i)
        nvi = dof_count(mi, i)
        end = subtree_end(mi, i)   # the subtree's columns: the joint's own, then its descendants' (depth-first)
        Y = Yc[i]
        B = Bc[i]
        if not want_rows:   # H and the sums only (aba_derivatives.py, before qdd is known)
            for c in range(vi, vi + nvi):
                _mul_inertia(Y, J[c], dFa[c])
            for m in range(vi, vi + nvi):
                for c in range(vi, end):
                    t = 0.0
                    for k in range(6):
                        t += J[m, k] * dFa[c, k]
                    H[m, c] = t
                H[m, m] += mf[dof_f(nb, m) + D_ARMATURE]
        else:
            for c in range(vi, vi + nvi):   # the joint's own columns' force derivatives
                _mul_inertia(Y, dA[c], dFq[c])
                if full:
                    if want_h:
                        _mul_inertia(Y, J[c], dFa[c])
                    _mul_inertia(Y, dAv[c], dFv[c])
                    _mul6(B, J[c], tmp)
                    for k in range(6):
                        dFv[c, k] += tmp[k]
                    _mul6(B, dV[c], tmp)
                    for k in range(6):
                        dFq[c, k] += tmp[k]
            for m in range(vi, vi + nvi):
                Jm = J[m]
                dd = dof_f(nb, m)
                if full:
                    for c in range(vi, end):   # own and descendant columns: J_m^T dF_c
                        s_q = 0.0
                        s_v = 0.0
                        s_a = 0.0
                        cu = _u(c)   # (unsigned: no wrap-around select on each access)
                        for k in range(6):
                            s_q += Jm[k] * dFq[cu, k]
                            s_v += Jm[k] * dFv[cu, k]
                        dq[_u(m), cu] = s_q
                        dv[_u(m), cu] = s_v
                        if want_h:
                            for k in range(6):
                                s_a += Jm[k] * dFa[c, k]
                            H[m, c] = s_a
                else:   # gravity: B = 0, dV = 0, and only dtau/dq
                    for c in range(vi, end):
                        s_q = 0.0
                        for k in range(6):
                            s_q += Jm[k] * dFq[c, k]
                        dq[m, c] = s_q
                # ancestors' columns: (J_m^T Y^C_i) X_c + (J_m^T B^C_i) Z_c
                for k in range(6):
                    s1 = 0.0
                    s2 = 0.0
                    for l2 in range(6):
                        s1 += Jm[l2] * Y[l2, k]
                        if full:
                            s2 += Jm[l2] * B[l2, k]
                    tmp[k] = s1
                    tmp2[k] = s2
                anc = p
                while anc >= 0:
                    if full:
                        for c in range(first_dof(mi, anc), first_dof(mi, anc) + dof_count(mi, anc)):
                            s_q = 0.0
                            s_v = 0.0
                            cu = _u(c)
                            for k in range(6):   # (H's ancestors' columns: by symmetry, at the end)
                                s_q += tmp[k] * dA[cu, k] + tmp2[k] * dV[cu, k]
                                s_v += tmp[k] * dAv[cu, k] + tmp2[k] * J[cu, k]
                            dq[_u(m), cu] = s_q
                            dv[_u(m), cu] = s_v
                    else:
                        for c in range(first_dof(mi, anc), first_dof(mi, anc) + dof_count(mi, anc)):
                            s_q = 0.0
                            for k in range(6):
                                s_q += tmp[k] * dA[c, k]
                            dq[m, c] = s_q
                    anc = parent(mi, anc)
                if want_h:
                    H[m, m] += mf[dd + D_ARMATURE]
                if full:
                    dv[m, m] += friction_slope(mf, dd, qd[m])
            for c in range(vi, vi + nvi):   # the transport of the subtree's force, for the ancestors' rows
                _cross_f(J[c], F[i], tmp)
                for k in range(6):
                    dFq[c, k] += tmp[k]
        if p >= 0 and want_sums:   # the subtree sums (Table 6.2's I^c_λ(i) += I^c_i, Eq. 5.18's f_λ(i) += f_i)
            for a in range(6):
                F[p, a] += F[i, a]
                for b in range(6):
                    Yc[p, a, b] += Y[a, b]
            if full:
                for a in range(6):
                    for b in range(6):
                        Bc[p, a, b] += B[a, b]
    if want_h:   # H_ij for j an ancestor of i: H_ji (H is symmetric; the rows of j have it)
        for i in range(nb):
            for m in range(first_dof(mi, i), first_dof(mi, i) + dof_count(mi, i)):
                anc = parent(mi, i)
                while anc >= 0:
                    for c in range(first_dof(mi, anc), first_dof(mi, anc) + dof_count(mi, anc)):
                        H[m, c] = H[c, m]
                    anc = parent(mi, anc)


@njit(types.int64(I1, F1, F1, F1, F1, F1, F2, F2, F2, F1, types.int64), cache=True, fastmath=FASTMATH)
def rnea_derivatives_kernel(mi, mf, q, qd, qdd, fx, dq, dv, H, s, gravity_only):
    """dq = dtau/dq (tangent), dv = dtau/dqd and H = dtau/dqdd of tau = ID(q, qd, qdd, f^x) (tree
    coordinates, nvt x nvt each), with s the scratch (scratch_size floats). gravity_only: 1: qd = qdd = 0
    and no f^x (qd, qdd are not read); NO_H (2): H is not written. Returns 0 or a status (_kernel_io)."""
    st = forward_pass(mi, mf, q, qd, qdd, fx, s, gravity_only)
    if st != 0:
        return st
    backward_pass(mi, mf, qd, dq, dv, H, s, True, gravity_only == 0, True, gravity_only != 1)
    return 0


@njit("Tuple((int64, float64[:, ::1], float64[:, ::1]))(int64[::1], float64[::1], float64[::1], float64[::1], "
      "float64[::1], float64[::1], int64)", cache=True)
def rnea_derivatives_entry(mi, mf, q, qd, qdd, fx, gravity_only):
    """The Python entry: (status, dtau/dq, dtau/dqd) with the outputs and the scratch allocated in
    compiled code (fewer arguments and no numpy calls from Python: the call costs less)."""
    n = mi[H_NVT]
    dq = np.empty((n, n))
    dv = np.empty((n, n))
    H = np.empty((n, n))
    s = np.empty(scratch_size(mi[H_NB], n))
    st = rnea_derivatives_kernel(mi, mf, q, qd, qdd, fx, dq, dv, H, s, gravity_only)
    return st, dq, dv


@njit("UniTuple(int64, 2)(int64[::1], float64[::1], float64[:, ::1], float64[:, ::1], float64[:, ::1], "
      "float64[:, :, ::1], float64[:, :, ::1])", cache=True)
def rnea_derivatives_batch_entry(mi, mf, Q, QD, QDD, DQ, DV):
    """DQ[k], DV[k] = dtau/dq, dtau/dqd of state k (rows of Q, QD, QDD), one scratch for all states.
    Returns (status, k) of the first state refused, or (0, -1)."""
    n = mi[H_NVT]
    H = np.empty((n, n))
    s = np.empty(scratch_size(mi[H_NB], n))
    e = np.empty(0)
    for k in range(Q.shape[0]):
        st = rnea_derivatives_kernel(mi, mf, Q[k], QD[k], QDD[k], e, DQ[k], DV[k], H, s, NO_H)
        if st != 0:
            return st, k
    return 0, -1
