"""The C fronts of the derivatives (dispatch.Route with nout, _routes.c's matrices route): each writes its results
into one block of user-coordinate nv x nv matrices, with its scratch at the end of the work array (the route's
extra: per body, per dof, per dof squared, constant floats). A model without mimic joints runs the tree kernels
on the caller's arrays; a model with mimic joints (nv < nvt, layout.H_NVU) maps its inputs to the tree and the
results back (mimic.py, Featherstone §9.6): D_user = G^T D_tree G, and the forward dynamics' derivatives solve
the reduced system G^T H G by a dense Cholesky factor. A status sends the call to the Python side, which
recomputes and names the problem.
"""
from __future__ import annotations

from ..._jit import carray, cfunc, njit, view
from ...layout import GRAV_BODY, GRAV_DOF, GRAV_EXTRA, H_NB, H_NQT, H_NVT, H_NVU, HF_TOL
from ..._kernel_io import OVERFLOW, status
from ..._kernel_io import A_Q, A_QDD, A_TAU, BAD_LENGTH, FASTMATH, SIG1, SIG3, SINGULAR, check, model_from_pointers
from .aba_derivatives import aba_derivatives_kernel, add_qdd, tau0
from .gravity_derivatives import gravity_derivatives_kernel, scratch_size as gravity_scratch_size
from ..tree.dense import cholesky, cholesky_solve, cholesky_solve_rows
from ..tree.mimic import (g_vec, gt_vec, gtdg, q_to_tree, state_to_tree,
                    v_to_tree)
from .rnea_derivatives import NO_H, SCRATCH, backward_pass, forward_pass, rnea_derivatives_kernel, scratch_size

# scratch: the kernel's, H, and for mimic joints q_t (nqt <= nvt + nb), qd_t, qdd_t and dtau/dq, dtau/dqd of the tree
ID_EXTRA = (SCRATCH[0] + 1, SCRATCH[1] + 3, 3, SCRATCH[3])
# the kernel's, and for mimic joints q_t and dg/dq of the tree
G_EXTRA = (GRAV_BODY + 1, GRAV_DOF + 1, 1, GRAV_EXTRA)
# the RNEA derivatives' scratch, qdd, H and λ'; for mimic joints q_t, qd_t, qdd_t, tau0_t, the reduced
# right-hand side (nv <= nvt), the tree's H, dtau/dq and dtau/dqd and the reduced H (nv^2 <= nvt^2)
FD_EXTRA = (SCRATCH[0] + 1, SCRATCH[1] + 5, 4, SCRATCH[3])


@cfunc(SIG3, cache=True)
def rnea_derivatives_c(mip, mfp, qp, nq, qdp, nqd, qddp, nqdd, outp, wp, nw):
    """(dtau/dq, dtau/dqd) into out (2 nv^2); ID_EXTRA at the end of w."""
    mi, mf, n = model_from_pointers(mip, mfp)
    w = carray(wp, (nw,))
    ns = scratch_size(mi[H_NB], n)
    nu = mi[H_NVU]
    mimic = nu != n
    need = ns + n * n + (mi[H_NQT] + 2 * n + 2 * n * n if mimic else 0)
    if nw < need:
        return status(BAD_LENGTH, 0, 0)
    b = nw - need
    H = view(w, b, (n, n))
    s = w[nw - ns:nw]
    q, qd, qdd = carray(qp, (nq,)), carray(qdp, (nqd,)), carray(qddp, (nqdd,))
    out = carray(outp, (2 * nu * nu,))
    if not mimic:
        return rnea_derivatives_kernel(mi, mf, q, qd, qdd, w[0:0], view(out, 0, (n, n)), view(out, n * n, (n, n)),
                                       H, s, NO_H)
    o = b + n * n
    qt = w[o:o + mi[H_NQT]]
    o += mi[H_NQT]
    qdt = w[o:o + n]
    qddt = w[o + n:o + 2 * n]
    dq_t, dv_t = view(w, o + 2 * n, (n, n)), view(w, o + 2 * n + n * n, (n, n))
    st = state_to_tree(mi, mf, q, qd, qt, qdt)
    if st == 0:
        st = v_to_tree(mi, mf, qdd, qddt, A_QDD)
    if st == 0:
        st = rnea_derivatives_kernel(mi, mf, qt, qdt, qddt, w[0:0], dq_t, dv_t, H, s, NO_H)
    if st != 0:
        return st
    gtdg(mi, mf, dq_t, view(out, 0, (nu, nu)))
    gtdg(mi, mf, dv_t, view(out, nu * nu, (nu, nu)))
    return 0


@cfunc(SIG1, cache=True)
def gravity_derivatives_c(mip, mfp, qp, nq, outp, wp, nw):
    """dg/dq into out (nv^2); G_EXTRA at the end of w."""
    mi, mf, n = model_from_pointers(mip, mfp)
    w = carray(wp, (nw,))
    ns = gravity_scratch_size(mi[H_NB], n)
    nu = mi[H_NVU]
    mimic = nu != n
    need = ns + (mi[H_NQT] + n * n if mimic else 0)
    if nw < need:
        return status(BAD_LENGTH, 0, 0)
    q = carray(qp, (nq,))
    out = carray(outp, (nu * nu,))
    if not mimic:
        return gravity_derivatives_kernel(mi, mf, q, view(out, 0, (n, n)), w[nw - ns:nw])
    b = nw - need
    qt = w[b:b + mi[H_NQT]]
    dq_t = view(w, b + mi[H_NQT], (n, n))
    st = q_to_tree(mi, mf, q, qt, A_Q)
    if st == 0:
        st = gravity_derivatives_kernel(mi, mf, qt, dq_t, w[nw - ns:nw])
    if st != 0:
        return st
    gtdg(mi, mf, dq_t, view(out, 0, (nu, nu)))
    return 0


@njit(cache=True, fastmath=FASTMATH)
def aba_derivatives_mimic(mi, mf, q, qd, tau, ddq, ddv, Minv, w, s):
    """(dqdd/dq, dqdd/dqd, dqdd/dtau) in user coordinates of a model with mimic joints, at qdd = FD: with
    H_u = G^T H G and D_u = G^T dID/dx G (mimic.py), dqdd/dx = -H_u^-1 D_u and dqdd/dtau = H_u^-1 (Carpentier &
    Mansard 2018 on the reduced system). The pass at qdd = 0 gives H and tau0 (as aba_derivatives_kernel),
    qdd_u = H_u^-1 (tau - G^T tau0), and qdd_t = G qdd_u adds its part of dID/dq. w: FD_EXTRA less s."""
    n = mi[H_NVT]
    nu = mi[H_NVU]
    nqt = mi[H_NQT]
    qt = w[0:nqt]
    o = nqt
    qdt, qddt, t0, bu = w[o:o + n], w[o + n:o + 2 * n], w[o + 2 * n:o + 3 * n], w[o + 3 * n:o + 3 * n + nu]
    o += 3 * n + nu
    Ht, dq_t, dv_t, Hu = (view(w, o, (n, n)), view(w, o + n * n, (n, n)), view(w, o + 2 * n * n, (n, n)),
                          view(w, o + 3 * n * n, (nu, nu)))
    st = state_to_tree(mi, mf, q, qd, qt, qdt)
    if st == 0:
        st = check(tau, nu, A_TAU)
    if st != 0:
        return st
    for k in range(n):
        qddt[k] = 0.0
    st = forward_pass(mi, mf, qt, qdt, qddt, w[0:0], s, 0)   # at qdd = 0: H, tau0
    if st != 0:
        return st
    backward_pass(mi, mf, qdt, Ht, Ht, Ht, s, False, True, True, True)   # H and the sums, no rows yet
    tau0(mi, mf, s, qdt, t0)
    gt_vec(mi, mf, t0, bu)
    for a in range(nu):
        bu[a] = tau[a] - bu[a]
    gtdg(mi, mf, Ht, Hu)
    if cholesky(Hu, Hu, nu, mf[HF_TOL]) >= 0:
        return status(SINGULAR, 0, 0)   # (the Python side names the body)
    cholesky_solve(Hu, bu, nu)        # qdd_u
    for a in range(nu):
        if not (bu[a] - bu[a] == 0.0):
            return status(OVERFLOW, 0, 0)
    g_vec(mi, mf, bu, qddt)           # qdd_t = G qdd_u
    add_qdd(mi, qddt, s)
    backward_pass(mi, mf, qdt, dq_t, dv_t, Ht, s, True, False, False, True)   # the rows, at qdd_t
    gtdg(mi, mf, dq_t, ddq)
    gtdg(mi, mf, dv_t, ddv)
    cholesky_solve_rows(Hu, ddq, nu, -1.0)
    cholesky_solve_rows(Hu, ddv, nu, -1.0)
    for a in range(nu):
        for c in range(nu):
            Minv[a, c] = 1.0 if a == c else 0.0
    cholesky_solve_rows(Hu, Minv, nu, 1.0)
    return 0


@cfunc(SIG3, cache=True)
def aba_derivatives_c(mip, mfp, qp, nq, qdp, nqd, taup, ntau, outp, wp, nw):
    """(dqdd/dq, dqdd/dqd, dqdd/dtau) into out (3 nv^2); FD_EXTRA at the end of w."""
    mi, mf, n = model_from_pointers(mip, mfp)
    w = carray(wp, (nw,))
    ns = scratch_size(mi[H_NB], n)
    nu = mi[H_NVU]
    q, qd, tau = carray(qp, (nq,)), carray(qdp, (nqd,)), carray(taup, (ntau,))
    out = carray(outp, (3 * nu * nu,))
    if nu != n:
        need = ns + mi[H_NQT] + 3 * n + nu + 3 * n * n + nu * nu
        if nw < need:
            return status(BAD_LENGTH, 0, 0)
        return aba_derivatives_mimic(mi, mf, q, qd, tau, view(out, 0, (nu, nu)), view(out, nu * nu, (nu, nu)),
                                     view(out, 2 * nu * nu, (nu, nu)), w[nw - need:nw - ns], w[nw - ns:nw])
    b = nw - ns - 2 * n - n * n
    if b < 0:
        return status(BAD_LENGTH, 0, 0)
    return aba_derivatives_kernel(mi, mf, q, qd, tau, w[0:0], w[b:b + n], view(out, 0, (n, n)),
                                  view(out, n * n, (n, n)), view(out, 2 * n * n, (n, n)), view(w, b + n, (n, n)),
                                  w[b + n + n * n:b + 2 * n + n * n], w[b + 2 * n + n * n:nw])
