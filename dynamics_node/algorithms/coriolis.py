"""The Coriolis matrix C(q, qd) of the Christoffel factorisation (the one Pinocchio's
computeCoriolisMatrix returns): C qd = bias_forces - gravity and dH/dt = C + C^T.

Everything is expressed in world coordinates at the world origin (angular-first Plücker vectors,
Featherstone §2.4), where a body's spatial inertia only moves with the body: with S_j the motion
subspace of dof j carried to the world (Featherstone Eq. 2.24 with the pose of §4.1) and v_k the
velocity of body k, dS_j/dt = v_j x S_j (Featherstone Eq. 2.44, S_j fixed in body j) and
dI_k/dt = v_k x* I_k - I_k v_k x (Eq. 2.70 in world coordinates). Summing Featherstone's H = sum_k
J_k^T I_k J_k (Eq. 6.3 with J_k the body Jacobian) and the Lagrangian's C = sum_k J_k^T (I_k dJ_k +
B_k J_k) with

    B_k = 1/2 (v_k x* I_k - I_k v_k x + (I_k v_k) xbar*)        ((f xbar*) u := u x* f)

gives dH/dt = C + C^T (Echeandia & Wensing, "A numerical method for computing the Coriolis matrix
and Christoffel symbols of rigid-body systems", 2021, Eq. 20; Pinocchio's CoriolisMatrix passes).
With the composite quantities I^c_i = sum_{k in subtree(i)} I_k, B^c_i likewise (additive: all
share the world frame), branch-induced sparsity (Featherstone §6.4) leaves

    C_ij = S_i^T (I^c_j dS_j + B^c_j S_j)            j in the subtree of i (i's own dofs included)
    C_ij = (I^c_i S_i)^T dS_j + S_i^T B^c_i S_j      j a strict ancestor of i
    C_ij = 0                                         otherwise,

computed in one outward pass (poses, S_j, v_j, B_k) and one inward pass (composites), O(n d).
With mimic joints: C = G^T C_tree G (constant G, §9.6), as for H.
"""
from __future__ import annotations

import numpy as np

from .._jit import njit, types
from ..dispatch import Route
from ..layout import (BODY_F, BODY_I, B_RBI, DOF_F, D_S, HEADER_F, HEADER_I, H_NB, H_NVT, J_NV, J_PARENT, J_VI,
                      W_PW, W_PW_N, W_RW, W_RW_N)
from ..spatial import crf_t, crm_t, rbi_mul_c
from ._common import A_QD, F1, I1, check, check_q
from .kinematics import _poses

RBI = 13  # m, h (3), Ibar (9, row-major): rbi(m, h, Ibar) of Table A.3


@njit(cache=True, inline="always")
def world_rbi(mf, i, R, p, out, o):
    """rbi of body i about the world origin in world axes, into out[o:o+13]: with h_r = R h_b and
    I_r = R Ibar_b R^T (body origin p, world axes), h = m p + h_r and
    Ibar = I_r - m p x p x - p x h_r x - h_r x p x (Eq. 2.63 shifted by p)."""
    b = HEADER_F + BODY_F * i + B_RBI
    m = mf[b]
    hb0, hb1, hb2 = mf[b + 1], mf[b + 2], mf[b + 3]
    hr0 = R[0] * hb0 + R[1] * hb1 + R[2] * hb2
    hr1 = R[3] * hb0 + R[4] * hb1 + R[5] * hb2
    hr2 = R[6] * hb0 + R[7] * hb1 + R[8] * hb2
    Ib = b + 4
    T = np.empty(9)  # Ibar_b R^T
    for a in range(3):
        for c in range(3):
            T[3 * a + c] = (mf[Ib + 3 * a] * R[3 * c] + mf[Ib + 3 * a + 1] * R[3 * c + 1]
                            + mf[Ib + 3 * a + 2] * R[3 * c + 2])
    p0, p1, p2 = p[0], p[1], p[2]
    ph = p0 * hr0 + p1 * hr1 + p2 * hr2
    pp = p0 * p0 + p1 * p1 + p2 * p2
    P = (p0, p1, p2)
    Hr = (hr0, hr1, hr2)
    out[o] = m
    out[o + 1] = m * p0 + hr0
    out[o + 2] = m * p1 + hr1
    out[o + 3] = m * p2 + hr2
    for a in range(3):
        for c in range(3):
            Ir = R[3 * a] * T[c] + R[3 * a + 1] * T[3 + c] + R[3 * a + 2] * T[6 + c]
            # -m p x p x = m (|p|^2 1 - p p^T); -(p x h x + h x p x) = 2 (p.h) 1 - p h^T - h p^T
            d = (m * pp + 2.0 * ph) if a == c else 0.0
            out[o + 4 + 3 * a + c] = Ir + d - m * P[a] * P[c] - P[a] * Hr[c] - Hr[a] * P[c]


@njit(cache=True, inline="always")
def load_rbi(a, o):
    return (a[o], a[o + 1], a[o + 2], a[o + 3], a[o + 4], a[o + 5], a[o + 6], a[o + 7], a[o + 8], a[o + 9],
            a[o + 10], a[o + 11], a[o + 12])


@njit(cache=True, inline="always")
def world_motion(mi, mf, qd, w, nbody, S, dS, ov):
    """For bodies 0 .. nbody-1 (poses already in w by kinematics._poses): S[dof] the world motion
    subspace column at the world origin, ov[i] the body's world spatial velocity (Eq. 5.14 summed in
    the world frame), dS[dof] = ov[i] x S[dof] (Eq. 2.44)."""
    nb = mi[H_NB]
    do0 = HEADER_F + BODY_F * nb
    for i in range(nbody):
        ii = HEADER_I + BODY_I * i
        p = mi[ii + J_PARENT]
        R = w[W_RW * nb + W_RW_N * i:W_RW * nb + W_RW_N * i + 9]
        P = w[W_PW * nb + W_PW_N * i:W_PW * nb + W_PW_N * i + 3]
        v = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0) if p < 0 else (ov[p, 0], ov[p, 1], ov[p, 2], ov[p, 3], ov[p, 4], ov[p, 5])
        vi = mi[ii + J_VI]
        for dof in range(vi, vi + mi[ii + J_NV]):
            s = do0 + DOF_F * dof + D_S
            w0 = R[0] * mf[s] + R[1] * mf[s + 1] + R[2] * mf[s + 2]
            w1 = R[3] * mf[s] + R[4] * mf[s + 1] + R[5] * mf[s + 2]
            w2 = R[6] * mf[s] + R[7] * mf[s + 1] + R[8] * mf[s + 2]
            # linear part at the world origin: R s_v + p x omega
            l0 = R[0] * mf[s + 3] + R[1] * mf[s + 4] + R[2] * mf[s + 5] + P[1] * w2 - P[2] * w1
            l1 = R[3] * mf[s + 3] + R[4] * mf[s + 4] + R[5] * mf[s + 5] + P[2] * w0 - P[0] * w2
            l2 = R[6] * mf[s + 3] + R[7] * mf[s + 4] + R[8] * mf[s + 5] + P[0] * w1 - P[1] * w0
            S[dof, 0], S[dof, 1], S[dof, 2], S[dof, 3], S[dof, 4], S[dof, 5] = w0, w1, w2, l0, l1, l2
            x = qd[dof]
            v = (v[0] + w0 * x, v[1] + w1 * x, v[2] + w2 * x, v[3] + l0 * x, v[4] + l1 * x, v[5] + l2 * x)
        for k in range(6):
            ov[i, k] = v[k]
        for dof in range(vi, vi + mi[ii + J_NV]):
            d = crm_t(v, (S[dof, 0], S[dof, 1], S[dof, 2], S[dof, 3], S[dof, 4], S[dof, 5]))
            for k in range(6):
                dS[dof, k] = d[k]


@njit(types.int64(I1, F1, F1, F1, F1, F1), cache=True)
def coriolis_kernel(mi, mf, q, qd, Cout, w):
    """C (nvt x nvt, flat row-major) by the two passes of the module docstring."""
    nb = mi[H_NB]
    nvt = mi[H_NVT]
    st = check_q(q, mi)
    if st == 0:
        st = check(qd, nvt, A_QD)
    if st != 0:
        return st
    _poses(mi, mf, q, w)
    S = np.empty((max(nvt, 1), 6))
    dS = np.empty((max(nvt, 1), 6))
    ov = np.empty((max(nb, 1), 6))
    Ic = np.empty(RBI * max(nb, 1))
    Bc = np.zeros((max(nb, 1), 6, 6))
    world_motion(mi, mf, qd, w, nb, S, dS, ov)
    C = Cout.reshape((nvt, nvt)) if nvt > 0 else Cout.reshape((0, 0))
    C[:, :] = 0.0
    for i in range(nb):
        R = w[W_RW * nb + W_RW_N * i:W_RW * nb + W_RW_N * i + 9]
        P = w[W_PW * nb + W_PW_N * i:W_PW * nb + W_PW_N * i + 3]
        world_rbi(mf, i, R, P, Ic, RBI * i)
        I = load_rbi(Ic, RBI * i)
        v = (ov[i, 0], ov[i, 1], ov[i, 2], ov[i, 3], ov[i, 4], ov[i, 5])
        h = rbi_mul_c(I, v)
        for k in range(6):  # column k of B_i = 1/2 (v x* I e_k - I (v x e_k) + e_k x* h)
            e = (1.0 if k == 0 else 0.0, 1.0 if k == 1 else 0.0, 1.0 if k == 2 else 0.0,
                 1.0 if k == 3 else 0.0, 1.0 if k == 4 else 0.0, 1.0 if k == 5 else 0.0)
            a = crf_t(v, rbi_mul_c(I, e))
            b = rbi_mul_c(I, crm_t(v, e))
            c = crf_t(e, h)
            for r in range(6):
                Bc[i, r, k] = 0.5 * (a[r] - b[r] + c[r])
    for i in range(nb - 1, -1, -1):
        ii = HEADER_I + BODY_I * i
        vi = mi[ii + J_VI]
        I = load_rbi(Ic, RBI * i)
        for d in range(vi, vi + mi[ii + J_NV]):
            s = (S[d, 0], S[d, 1], S[d, 2], S[d, 3], S[d, 4], S[d, 5])
            ds = (dS[d, 0], dS[d, 1], dS[d, 2], dS[d, 3], dS[d, 4], dS[d, 5])
            Ids = rbi_mul_c(I, ds)
            F = np.empty(6)   # I^c_i dS_d + B^c_i S_d
            Bt = np.empty(6)  # B^c_i^T S_d
            for r in range(6):
                acc = Ids[r]
                acc2 = 0.0
                for k in range(6):
                    acc += Bc[i, r, k] * s[k]
                    acc2 += Bc[i, k, r] * s[k]
                F[r] = acc
                Bt[r] = acc2
            A = rbi_mul_c(I, s)  # I^c_i S_d
            j = i
            while j >= 0:
                jj = HEADER_I + BODY_I * j
                vj = mi[jj + J_VI]
                for e in range(vj, vj + mi[jj + J_NV]):
                    # row e (ancestor or self), column d: S_e^T (I^c_i dS_d + B^c_i S_d)
                    C[e, d] = (S[e, 0] * F[0] + S[e, 1] * F[1] + S[e, 2] * F[2] + S[e, 3] * F[3]
                               + S[e, 4] * F[4] + S[e, 5] * F[5])
                    if j != i:  # row d, column e (strict ancestor): (I^c_i S_d)^T dS_e + S_d^T B^c_i S_e
                        C[d, e] = (A[0] * dS[e, 0] + A[1] * dS[e, 1] + A[2] * dS[e, 2] + A[3] * dS[e, 3]
                                   + A[4] * dS[e, 4] + A[5] * dS[e, 5] + Bt[0] * S[e, 0] + Bt[1] * S[e, 1]
                                   + Bt[2] * S[e, 2] + Bt[3] * S[e, 3] + Bt[4] * S[e, 4] + Bt[5] * S[e, 5])
                j = mi[jj + J_PARENT]
        p = mi[ii + J_PARENT]
        if p >= 0:
            for k in range(RBI):
                Ic[RBI * p + k] += Ic[RBI * i + k]
            for r in range(6):
                for k in range(6):
                    Bc[p, r, k] += Bc[i, r, k]
    return 0


def _coriolis(model, data, w, qt, qdt):
    C = np.empty((model.nvt, model.nvt))
    st = coriolis_kernel(model._kmi, model._kmf, qt, qdt, C.reshape(-1), w)
    return st, C


_CORIOLIS = Route("the Coriolis matrix", (("q", "q"), ("qd", "v")), _coriolis, post="vv").front


def coriolis_matrix(model, q, qd, data=None):
    """C(q, qd) (nv x nv) with C qd = bias_forces - gravity and dH/dt = C + C^T: the Christoffel
    factorisation (Pinocchio's computeCoriolisMatrix; Echeandia & Wensing 2021), computed in the
    world frame over the parent array (module docstring). Mimic joints: G^T C G (§9.6)."""
    return _CORIOLIS(model, data, q, qd)
