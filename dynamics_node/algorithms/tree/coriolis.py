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

from ..._jit import carray, cfunc, njit, types, view
from ...dispatch import Route
from ...packed import body_f, dof_count, dof_f, first_dof, parent
from ...layout import (B_RBI, D_S, H_NB, H_NQT, H_NVT, H_NVU, V_U, V_U_N, WORK_BODY, W_DINV, W_F, W_F_N, W_IA,
                      W_PW, W_PW_N, W_RW, W_RW_N, W_V, W_V_N)
from ...spatial import crf_t, crm_t, load6, rbi_mul_c
from ..._kernel_io import status
from ..._kernel_io import BAD_LENGTH, F1, FASTMATH, I1, SIG3, check_q_qd, model_from_pointers
from .mimic import gtdg, scratch_at, state_to_tree
from .kinematics import _poses

RBI = 13  # m, h (3), Ibar (9, row-major): rbi(m, h, Ibar) of Table A.3


@njit(cache=True, inline="always")
def world_rbi(mf, i, R, p, out, o):
    """rbi of body i about the world origin in world axes, into out[o:o+13]: with h_r = R h_b and
    I_r = R Ibar_b R^T (body origin p, world axes), h = m p + h_r and
    Ibar = I_r - m p x p x - p x h_r x - h_r x p x (Eq. 2.63 shifted by p)."""
    b = body_f(i) + B_RBI
    m = mf[b]
    hb0, hb1, hb2 = mf[b + 1], mf[b + 2], mf[b + 3]
    r0, r1, r2, r3, r4, r5, r6, r7, r8 = R[0], R[1], R[2], R[3], R[4], R[5], R[6], R[7], R[8]
    hr0 = r0 * hb0 + r1 * hb1 + r2 * hb2
    hr1 = r3 * hb0 + r4 * hb1 + r5 * hb2
    hr2 = r6 * hb0 + r7 * hb1 + r8 * hb2
    I = b + 4
    i00, i01, i02, i11, i12, i22 = mf[I], mf[I + 1], mf[I + 2], mf[I + 4], mf[I + 5], mf[I + 8]
    # T = Ibar_b R^T (Ibar_b symmetric), then I_r = R T
    t00 = i00 * r0 + i01 * r1 + i02 * r2
    t01 = i00 * r3 + i01 * r4 + i02 * r5
    t02 = i00 * r6 + i01 * r7 + i02 * r8
    t10 = i01 * r0 + i11 * r1 + i12 * r2
    t11 = i01 * r3 + i11 * r4 + i12 * r5
    t12 = i01 * r6 + i11 * r7 + i12 * r8
    t20 = i02 * r0 + i12 * r1 + i22 * r2
    t21 = i02 * r3 + i12 * r4 + i22 * r5
    t22 = i02 * r6 + i12 * r7 + i22 * r8
    p0, p1, p2 = p[0], p[1], p[2]
    d = m * (p0 * p0 + p1 * p1 + p2 * p2) + 2.0 * (p0 * hr0 + p1 * hr1 + p2 * hr2)
    # -m p x p x = m (|p|^2 1 - p p^T); -(p x h x + h x p x) = 2 (p.h) 1 - p h^T - h p^T
    a00 = r0 * t00 + r1 * t10 + r2 * t20 + d - m * p0 * p0 - 2.0 * p0 * hr0
    a11 = r3 * t01 + r4 * t11 + r5 * t21 + d - m * p1 * p1 - 2.0 * p1 * hr1
    a22 = r6 * t02 + r7 * t12 + r8 * t22 + d - m * p2 * p2 - 2.0 * p2 * hr2
    a01 = r0 * t01 + r1 * t11 + r2 * t21 - m * p0 * p1 - p0 * hr1 - hr0 * p1
    a02 = r0 * t02 + r1 * t12 + r2 * t22 - m * p0 * p2 - p0 * hr2 - hr0 * p2
    a12 = r3 * t02 + r4 * t12 + r5 * t22 - m * p1 * p2 - p1 * hr2 - hr1 * p2
    out[o] = m
    out[o + 1] = m * p0 + hr0
    out[o + 2] = m * p1 + hr1
    out[o + 3] = m * p2 + hr2
    out[o + 4], out[o + 5], out[o + 6] = a00, a01, a02
    out[o + 7], out[o + 8], out[o + 9] = a01, a11, a12
    out[o + 10], out[o + 11], out[o + 12] = a02, a12, a22


@njit(cache=True, inline="always")
def inertia_rate(I, v):
    """dI/dt = v x* I - I v x of a body moving at v (world coordinates, origin fixed), which is again
    of the rbi form: rbi(0, dh/dt, dIbar/dt) with dh/dt = m v_O + omega x h and
    dIbar/dt = omega x Ibar - Ibar omega x + 2 (h.v_O) 1 - v_O h^T - h v_O^T (from Ibar = I_C +
    m (c.c 1 - c c^T), Eq. 2.63, and dc/dt = v_O + omega x c)."""
    m, h0, h1, h2 = I[0], I[1], I[2], I[3]
    w0, w1, w2, u0, u1, u2 = v[0], v[1], v[2], v[3], v[4], v[5]
    a00, a01, a02, a11, a12, a22 = I[4], I[5], I[6], I[8], I[9], I[12]
    # W = omega x Ibar (rows), then W - W^T (Ibar symmetric: Ibar omega x = -(omega x Ibar)^T)
    b00 = w1 * a02 - w2 * a01
    b01 = w1 * a12 - w2 * a11
    b02 = w1 * a22 - w2 * a12
    b10 = w2 * a00 - w0 * a02
    b11 = w2 * a01 - w0 * a12
    b12 = w2 * a02 - w0 * a22
    b20 = w0 * a01 - w1 * a00
    b21 = w0 * a11 - w1 * a01
    b22 = w0 * a12 - w1 * a02
    hv = 2.0 * (h0 * u0 + h1 * u1 + h2 * u2)
    d00 = 2.0 * b00 + hv - 2.0 * u0 * h0
    d11 = 2.0 * b11 + hv - 2.0 * u1 * h1
    d22 = 2.0 * b22 + hv - 2.0 * u2 * h2
    d01 = b01 + b10 - u0 * h1 - h0 * u1
    d02 = b02 + b20 - u0 * h2 - h0 * u2
    d12 = b12 + b21 - u1 * h2 - h1 * u2
    return (0.0, m * u0 + w1 * h2 - w2 * h1, m * u1 + w2 * h0 - w0 * h2, m * u2 + w0 * h1 - w1 * h0,
            d00, d01, d02, d01, d11, d12, d02, d12, d22)


@njit(cache=True, inline="always")
def load_rbi(a, o):
    return (a[o], a[o + 1], a[o + 2], a[o + 3], a[o + 4], a[o + 5], a[o + 6], a[o + 7], a[o + 8], a[o + 9],
            a[o + 10], a[o + 11], a[o + 12])


@njit(cache=True, inline="always")
def motion_offsets(nb, nvt):
    """Where world_motion keeps its results in the work array: S (6 per dof) in the per-dof U
    block, dS (6 per dof) in the D_i^-1 block (36 per body >= 6 per dof), ov in v_i's block. Flat
    offsets, no array views: a reshaped view would make the C callback need numba's runtime."""
    return WORK_BODY * nb + V_U * nvt, W_DINV * nb, W_V * nb


@njit(cache=True, inline="always")
def world_motion(mi, mf, qd, w, i):
    """For body i (its pose in w by kinematics._poses, its parent's ov done): S[dof] the world
    motion subspace column at the world origin, ov[i] the body's world spatial velocity (Eq. 5.14
    summed in the world frame), dS[dof] = ov[i] x S[dof] (Eq. 2.44), at motion_offsets."""
    nb = mi[H_NB]
    So, dSo, vo = motion_offsets(nb, mi[H_NVT])
    p = parent(mi, i)
    Ro = W_RW * nb + W_RW_N * i
    Po = W_PW * nb + W_PW_N * i
    r0, r1, r2, r3, r4, r5, r6, r7, r8 = w[Ro], w[Ro + 1], w[Ro + 2], w[Ro + 3], w[Ro + 4], w[Ro + 5], w[Ro + 6], \
        w[Ro + 7], w[Ro + 8]
    P0, P1, P2 = w[Po], w[Po + 1], w[Po + 2]
    v = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0) if p < 0 else load6(w, vo + W_V_N * p)
    vi = first_dof(mi, i)
    for dof in range(vi, vi + dof_count(mi, i)):
        s = dof_f(nb, dof) + D_S
        w0 = r0 * mf[s] + r1 * mf[s + 1] + r2 * mf[s + 2]
        w1 = r3 * mf[s] + r4 * mf[s + 1] + r5 * mf[s + 2]
        w2 = r6 * mf[s] + r7 * mf[s + 1] + r8 * mf[s + 2]
        # linear part at the world origin: R s_v + p x omega
        l0 = r0 * mf[s + 3] + r1 * mf[s + 4] + r2 * mf[s + 5] + P1 * w2 - P2 * w1
        l1 = r3 * mf[s + 3] + r4 * mf[s + 4] + r5 * mf[s + 5] + P2 * w0 - P0 * w2
        l2 = r6 * mf[s + 3] + r7 * mf[s + 4] + r8 * mf[s + 5] + P0 * w1 - P1 * w0
        o = So + V_U_N * dof
        w[o], w[o + 1], w[o + 2], w[o + 3], w[o + 4], w[o + 5] = w0, w1, w2, l0, l1, l2
        x = qd[dof]
        v = (v[0] + w0 * x, v[1] + w1 * x, v[2] + w2 * x, v[3] + l0 * x, v[4] + l1 * x, v[5] + l2 * x)
    for k in range(6):
        w[vo + W_V_N * i + k] = v[k]
    for dof in range(vi, vi + dof_count(mi, i)):
        d = crm_t(v, load6(w, So + V_U_N * dof))
        for k in range(6):
            w[dSo + V_U_N * dof + k] = d[k]


@njit(types.int64(I1, F1, F1, F1, F1, F1), cache=True, fastmath=FASTMATH)
def coriolis_kernel(mi, mf, q, qd, Cout, w):
    """C (nvt x nvt, flat row-major) by the two passes of the module docstring, with
    B^c_i u = 1/2 (dI^c_i/dt u + u x* h^c_i) (dI/dt: inertia_rate, additive; h^c: the subtree's
    momentum) and B^c_i^T u = 1/2 (dI^c_i/dt u - u x* h^c_i) (the map u -> u x* h is antisymmetric)."""
    nb = mi[H_NB]
    nvt = mi[H_NVT]
    st = check_q_qd(q, qd, mi)
    if st != 0:
        return st
    _poses(mi, mf, q, w)
    So, dSo, vo = motion_offsets(nb, nvt)
    Ic = w[W_IA * nb:W_IA * nb + RBI * nb]  # composite rbi (world), in the I^A block (36 per body)
    dIc = w[W_IA * nb + RBI * nb:W_IA * nb + 2 * RBI * nb]  # composite dI/dt (rbi form), same block
    hc = w[W_F * nb:W_F * nb + W_F_N * nb]  # composite momentum, in the f_i block
    for i in range(nb):
        world_motion(mi, mf, qd, w, i)
    for k in range(nvt * nvt):
        Cout[k] = 0.0
    for i in range(nb):
        R = w[W_RW * nb + W_RW_N * i:W_RW * nb + W_RW_N * i + 9]
        P = w[W_PW * nb + W_PW_N * i:W_PW * nb + W_PW_N * i + 3]
        world_rbi(mf, i, R, P, Ic, RBI * i)
        I = load_rbi(Ic, RBI * i)
        v = load6(w, vo + W_V_N * i)
        h = rbi_mul_c(I, v)
        dI = inertia_rate(I, v)
        for k in range(RBI):
            dIc[RBI * i + k] = dI[k]
        for k in range(6):
            hc[6 * i + k] = h[k]
    for i in range(nb - 1, -1, -1):
        vi = first_dof(mi, i)
        I = load_rbi(Ic, RBI * i)
        dI = load_rbi(dIc, RBI * i)
        hm = load6(hc, 6 * i)
        for d in range(vi, vi + dof_count(mi, i)):
            s = load6(w, So + V_U_N * d)
            Ids = rbi_mul_c(I, load6(w, dSo + V_U_N * d))
            dIs = rbi_mul_c(dI, s)
            sh = crf_t(s, hm)
            # F = I^c dS_d + B^c S_d ; Bt = B^c^T S_d ; A = I^c S_d
            F0 = Ids[0] + 0.5 * (dIs[0] + sh[0])
            F1 = Ids[1] + 0.5 * (dIs[1] + sh[1])
            F2 = Ids[2] + 0.5 * (dIs[2] + sh[2])
            F3 = Ids[3] + 0.5 * (dIs[3] + sh[3])
            F4 = Ids[4] + 0.5 * (dIs[4] + sh[4])
            F5 = Ids[5] + 0.5 * (dIs[5] + sh[5])
            T0, T1, T2 = 0.5 * (dIs[0] - sh[0]), 0.5 * (dIs[1] - sh[1]), 0.5 * (dIs[2] - sh[2])
            T3, T4, T5 = 0.5 * (dIs[3] - sh[3]), 0.5 * (dIs[4] - sh[4]), 0.5 * (dIs[5] - sh[5])
            A = rbi_mul_c(I, s)
            C = Cout
            j = i
            while j >= 0:
                vj = first_dof(mi, j)
                for e in range(vj, vj + dof_count(mi, j)):
                    se = So + V_U_N * e  # S_e
                    de = dSo + V_U_N * e  # dS_e
                    # row e (ancestor or self), column d: S_e^T (I^c_i dS_d + B^c_i S_d)
                    C[e * nvt + d] = (w[se] * F0 + w[se + 1] * F1 + w[se + 2] * F2 + w[se + 3] * F3
                                      + w[se + 4] * F4 + w[se + 5] * F5)
                    if j != i:  # row d, column e (strict ancestor): (I^c_i S_d)^T dS_e + S_d^T B^c_i S_e
                        C[d * nvt + e] = (A[0] * w[de] + A[1] * w[de + 1] + A[2] * w[de + 2] + A[3] * w[de + 3]
                                          + A[4] * w[de + 4] + A[5] * w[de + 5] + T0 * w[se] + T1 * w[se + 1]
                                          + T2 * w[se + 2] + T3 * w[se + 3] + T4 * w[se + 4] + T5 * w[se + 5])
                j = parent(mi, j)
        p = parent(mi, i)
        if p >= 0:
            for k in range(RBI):
                Ic[RBI * p + k] += Ic[RBI * i + k]
                dIc[RBI * p + k] += dIc[RBI * i + k]
            for k in range(6):
                hc[6 * p + k] += hc[6 * i + k]
    return 0


# the C front's scratch for a model with mimic joints (dispatch.Route's extra): q_t (nqt <= nb + nvt), qd_t, C_t
C_MIMIC = (1, 2, 1, 0)


@cfunc(SIG3, cache=True)
def coriolis_c(mip, mfp, qp, nq, qdp, nqd, q2p, nq2, outp, wp, nw):
    """The C callback (the shim's three-input form; the third input is qd again, unused); a model with mimic
    joints in user coordinates: G^T C(G q + offset, G qd) G (G is constant), its scratch C_MIMIC."""
    mi, mf, nvt = model_from_pointers(mip, mfp)
    w = carray(wp, (nw,))
    q, qd = carray(qp, (nq,)), carray(qdp, (nqd,))
    if mi[H_NVU] == nvt:
        return coriolis_kernel(mi, mf, q, qd, carray(outp, (nvt * nvt,)), w)
    nqt = mi[H_NQT]
    nu = mi[H_NVU]
    b = scratch_at(mi, nw, nqt + nvt + nvt * nvt)
    if b < 0:
        return status(BAD_LENGTH, 0, 0)
    qt, qdt, Ct = w[b:b + nqt], w[b + nqt:b + nqt + nvt], w[b + nqt + nvt:b + nqt + nvt + nvt * nvt]
    st = state_to_tree(mi, mf, q, qd, qt, qdt)
    if st == 0:
        st = coriolis_kernel(mi, mf, qt, qdt, Ct, w[0:b])
    if st == 0:
        gtdg(mi, mf, view(Ct, 0, (nvt, nvt)), view(carray(outp, (nu * nu,)), 0, (nu, nu)))
    return st


def _coriolis(model, data, w, qt, qdt, _qdt):
    C = np.empty((model.nvt, model.nvt))
    st = coriolis_kernel(model._kmi, model._kmf, qt, qdt, C.reshape(-1), w)
    return st, C


# qd passed twice: the C shim's routes take one or three vectors (SIG1, SIG3)
_CORIOLIS = Route("the Coriolis matrix", (("q", "q"), ("qd", "v"), ("qd", "v")), _coriolis, shim=coriolis_c,
                  matrix=True, post="vv", extra=C_MIMIC, mimic=True).front


def coriolis_matrix(model, q, qd, data=None):
    """C(q, qd) (nv x nv) with C qd = bias_forces - gravity (minus the friction terms of a model
    loaded with friction=True, which are not Coriolis forces) and dH/dt = C + C^T: the Christoffel
    factorisation (Pinocchio's computeCoriolisMatrix; Echeandia & Wensing 2021), computed in the
    world frame over the parent array (module docstring). Mimic joints: G^T C G (§9.6)."""
    return _CORIOLIS(model, data, q, qd, qd)
