"""dg/dq, the tangent-space derivative of the generalised gravity g(q) = ID(q, 0, 0) (Pinocchio's
computeGeneralizedGravityDerivatives), by the RNEA derivatives of rnea_derivatives.py specialised to
qd = qdd = 0 and no external force, where only the bodies' masses and first moments enter.

With qd = 0 every velocity and the inertias' variations B vanish, and every body's acceleration is the
base's a_0 = (0, a_g) with a_g = -gravity (gravity as a base acceleration, Featherstone §5.3). Then, in
the world frame (angular-first, Featherstone §2.2; see rnea_derivatives.py for the general equations):

    dA/dq_j = a_0 x J_j = (0, d_j),   d_j = a_g x w_j         (J_j = (w_j, u_j): a pure linear vector)
    Y^C (0, d) = (h^C x d, m^C d)                             (Y = [Ibar, h x; -h x, m 1], Eq. 2.63)
    F^C_i = Y^C_i a_0 = (h^C_i x a_g, m^C_i a_g)

with m^C_i, h^C_i the mass and world first moment (about the world origin, h = m c) of the subtree of i.
So, for joints i and j on one path (zero otherwise):

    j in subtree(i):  dg_i/dq_j = J_i^T ((h^C_j x d_j, m^C_j d_j) + [j != i] J_j x* F^C_j)
    j ancestor of i:  dg_i/dq_j = J_i^T (h^C_i x d_j, m^C_i d_j) = d_j . (w_i x h^C_i + m^C_i u_i)

Four numbers per body (m, h) replace the 6 x 6 inertias of the general pass.
"""
from __future__ import annotations

import numpy as np

from ..._jit import njit, types, view
from ...joints import jcalc_sc, sincos_all
from ...packed import body_f, dof_count, dof_f, first_dof, parent, subtree_end
from ...layout import (B_H, B_M, D_S, GB_HC, GB_MC, GB_PW, GB_RW, GB_SC, GC_AG, GC_X, GD_D,
                      GD_DF, GD_J, GRAV_BODY, GRAV_DOF, GRAV_EXTRA, HF_GRAVITY, H_NB, H_NVT)
from ..._kernel_io import status
from ..._kernel_io import BAD_LENGTH, F1, F2, FASTMATH, I1, check_q



@njit(types.int64(I1, F1, F1, F2, F1), cache=True, fastmath=FASTMATH)
def gravity_derivatives_kernel(mi, mf, q, dq, s):
    """dq = dg/dq (tree coordinates, nvt x nvt, tangent space); s: scratch of EXTRA floats. Returns 0 or a
    status (_kernel_io)."""
    st = check_q(q, mi)
    if st != 0:
        return st
    nb = mi[H_NB]
    nv = mi[H_NVT]
    if s.shape[0] < GRAV_BODY * nb + GRAV_DOF * nv + GRAV_EXTRA:   # scratch_size
        return status(BAD_LENGTH, 0, 0)
    d0 = GRAV_BODY * nb          # the scratch's fields by name (layout.GRAV_*)
    c0 = d0 + GRAV_DOF * nv
    Rw = view(s, GB_RW * nb, (nb, 3, 3))
    pw = view(s, GB_PW * nb, (nb, 3))
    hc = view(s, GB_HC * nb, (nb, 3))        # h^C_i (world, about the origin)
    mc = view(s, GB_MC * nb, (nb,))          # m^C_i
    o = GB_SC * nb                           # sin, cos of every joint's first coordinate (one vectorised loop)
    J = view(s, d0 + GD_J * nv, (nv, 6))
    d = view(s, d0 + GD_D * nv, (nv, 3))     # d_j = a_g x w_j
    dF = view(s, d0 + GD_DF * nv, (nv, 6))   # column j's force derivative (for the rows of j's ancestors)
    x = view(s, c0 + GC_X, (12,))
    ag = view(s, c0 + GC_AG, (3,))
    sincos_all(mi, q, s, o)
    for k in range(3):
        ag[k] = -mf[HF_GRAVITY + k]
    # ---- forward pass: poses, J, the bodies' m and h in the world frame ----------------------------
    for i in range(nb):
        p = parent(mi, i)
        vi = first_dof(mi, i)
        jcalc_sc(mi, mf, i, q, x, 0, 9, s[o + i], s[o + nb + i])   # ^iX_λ(i) = (E, r) (Table 4.1, §4.2)
        R = Rw[i]
        if p >= 0:   # body -> world rotation ^0E_i^T = ^0E_p^T E^T; origin p_i = p_p + ^0E_p^T r
            Rp = Rw[p]
            for a in range(3):
                for b in range(3):
                    R[a, b] = Rp[a, 0] * x[3 * b] + Rp[a, 1] * x[3 * b + 1] + Rp[a, 2] * x[3 * b + 2]
                pw[i, a] = pw[p, a] + Rp[a, 0] * x[9] + Rp[a, 1] * x[10] + Rp[a, 2] * x[11]
        else:
            for a in range(3):
                for b in range(3):
                    R[a, b] = x[3 * b + a]
                pw[i, a] = x[9 + a]
        p0, p1, p2 = pw[i, 0], pw[i, 1], pw[i, 2]
        for c in range(vi, vi + dof_count(mi, i)):   # J_c = ^0X_i S_c: w = R s_w, u = R s_u + o x w
            so = dof_f(nb, c) + D_S
            for a in range(3):
                J[c, a] = R[a, 0] * mf[so] + R[a, 1] * mf[so + 1] + R[a, 2] * mf[so + 2]
                J[c, 3 + a] = R[a, 0] * mf[so + 3] + R[a, 1] * mf[so + 4] + R[a, 2] * mf[so + 5]
            J[c, 3] += p1 * J[c, 2] - p2 * J[c, 1]
            J[c, 4] += p2 * J[c, 0] - p0 * J[c, 2]
            J[c, 5] += p0 * J[c, 1] - p1 * J[c, 0]
            d[c, 0] = ag[1] * J[c, 2] - ag[2] * J[c, 1]
            d[c, 1] = ag[2] * J[c, 0] - ag[0] * J[c, 2]
            d[c, 2] = ag[0] * J[c, 1] - ag[1] * J[c, 0]
        bo = body_f(i)
        m = mf[bo + B_M]
        mc[i] = m
        for a in range(3):   # h_w = R h + m p (Eq. 2.63's h moved to the world origin)
            hc[i, a] = R[a, 0] * mf[bo + B_H] + R[a, 1] * mf[bo + B_H + 1] + R[a, 2] * mf[bo + B_H + 2] + m * pw[i, a]
    # ---- backward pass ------------------------------------------------------------------------------
    for a in range(nv):
        for b in range(nv):
            dq[a, b] = 0.0
    for i in range(nb - 1, -1, -1):   # children come after their parents: m^C, h^C are complete at i
        p = parent(mi, i)
        vi = first_dof(mi, i)
        nvi = dof_count(mi, i)
        end = subtree_end(mi, i)   # the subtree's columns follow the joint's own (depth-first order)
        M = mc[i]
        h0, h1, h2 = hc[i, 0], hc[i, 1], hc[i, 2]
        for c in range(vi, vi + nvi):   # own columns: Y^C_i (0, d_c) = (h^C x d_c, m^C d_c)
            dF[c, 0] = h1 * d[c, 2] - h2 * d[c, 1]
            dF[c, 1] = h2 * d[c, 0] - h0 * d[c, 2]
            dF[c, 2] = h0 * d[c, 1] - h1 * d[c, 0]
            dF[c, 3] = M * d[c, 0]
            dF[c, 4] = M * d[c, 1]
            dF[c, 5] = M * d[c, 2]
        for r in range(vi, vi + nvi):
            for c in range(vi, end):   # own and descendant columns: J_r^T dF_c
                t = 0.0
                for k in range(6):
                    t += J[r, k] * dF[c, k]
                dq[r, c] = t
            # ancestors' columns: d_c . (w_r x h^C_i + m^C_i u_r)
            t0 = J[r, 1] * h2 - J[r, 2] * h1 + M * J[r, 3]
            t1 = J[r, 2] * h0 - J[r, 0] * h2 + M * J[r, 4]
            t2 = J[r, 0] * h1 - J[r, 1] * h0 + M * J[r, 5]
            anc = p
            while anc >= 0:
                for c in range(first_dof(mi, anc), first_dof(mi, anc) + dof_count(mi, anc)):
                    dq[r, c] = t0 * d[c, 0] + t1 * d[c, 1] + t2 * d[c, 2]
                anc = parent(mi, anc)
        # the transport of the subtree's force F^C_i = (h^C x a_g, m^C a_g), for the ancestors' rows:
        # J_c x* F = (w x n + u x f, w x f)
        n0, n1, n2 = h1 * ag[2] - h2 * ag[1], h2 * ag[0] - h0 * ag[2], h0 * ag[1] - h1 * ag[0]
        f0, f1, f2 = M * ag[0], M * ag[1], M * ag[2]
        for c in range(vi, vi + nvi):
            w0, w1, w2, u0, u1, u2 = J[c, 0], J[c, 1], J[c, 2], J[c, 3], J[c, 4], J[c, 5]
            dF[c, 0] += w1 * n2 - w2 * n1 + u1 * f2 - u2 * f1
            dF[c, 1] += w2 * n0 - w0 * n2 + u2 * f0 - u0 * f2
            dF[c, 2] += w0 * n1 - w1 * n0 + u0 * f1 - u1 * f0
            dF[c, 3] += w1 * f2 - w2 * f1
            dF[c, 4] += w2 * f0 - w0 * f2
            dF[c, 5] += w0 * f1 - w1 * f0
        if p >= 0:
            mc[p] += M
            for a in range(3):
                hc[p, a] += hc[i, a]
    return 0


@njit(cache=True, pure=True)
def scratch_size(nb, nv):
    return GRAV_BODY * nb + GRAV_DOF * nv + GRAV_EXTRA


@njit(types.int64(I1, F1, F1, F2), cache=True)
def gravity_derivatives_entry(mi, mf, q, dq):
    """The Python entry: the scratch allocated in compiled code."""
    s = np.empty(scratch_size(mi[H_NB], mi[H_NVT]))
    return gravity_derivatives_kernel(mi, mf, q, dq, s)
