"""Point contacts with Coulomb friction on a rigid-body system: the contact forces and the
acceleration (Featherstone §11.3, Eqs. 11.23-11.36, with friction). The impact: impact.py.

A contact i is a point P_i of a link (``dn.Contact``: point in the link frame) touching a fixed
surface with unit normal n_i (world, pointing toward the robot). Its local axes are [t1 t2 n]
(t1, t2 any orthonormal tangents), columns of R_i; the force the environment exerts on the robot at
P_i is f_i = R_i [f_t1 f_t2 f_n] (world). Per contact, the rows of the point's linear Jacobian in
those axes are T_i^T = R_i^T J_i (Eq. 11.25 for the three directions), so that

    H qdd + C = tau + T f                                      (Eqs. 11.23, 11.32)
    a = T^T qdd + (dT/dt)^T qd = A f + b                        (Eqs. 11.33-11.34)
    A = T^T H^-1 T,   b = T^T H^-1 (tau - C) + (dT/dt)^T qd     (Eqs. 11.35-11.36)

with a the contact points' classical accelerations in the local axes: (dT/dt)^T qd = R^T J̇q̇ of the
point, omega x v included, from the RNEA's outward pass (the normals are fixed, so n-dot is 0).
H = L^T D L is factored sparsely (Table 6.3) and Y = L^-T T (Table 6.5) gives A = Y^T D^-1 Y;
qdd0 = H^-1 (tau - C) and, once f is known, qdd = qdd0 + L^-1 D^-1 Y f. The conditions on (f, a)
and how they are solved: ncp.py. Tangential velocities decide which contacts slide:
|v_t| > rest_speed.

The whole computation is one kernel without allocation (contact_fd_core, on scratch arrays of
contact_scratch's sizes), exported as a C callback (contact_fd_c) that the C front of the public
function (_fastcall.ContactRoute, dynamics_node/_contact_route.c) calls for the plain call; the
arguments and errors of every other call: checks.py.
"""
from __future__ import annotations

import math

import numpy as np

from ..._jit import carray, cfunc, njit, types
from ...packed import dof_count, dof_f, first_dof, parent
from ...layout import (D_S, HF_GRAVITY, HF_TOL, H_NB, H_NVT, W_A, W_A_N, W_PW, W_PW_N, W_RW, W_RW_N, W_V,
                      W_V_N)
from ..._kernel_io import FIXED_LINK_KIND, OVERFLOW_STATUS, SCRATCH_KIND, status
from ..._kernel_io import A_TAU, F1, F2, I1, P_F, P_I, SINGULAR, check, model_from_pointers
from ...dispatch import _conform
from ...model import Model as _Model
from .args import ContactResult, cached_pack
from .checks import _check_common, _dense_terms, _raise, finite_or_raise
from .ncp import SEP, STICK, scratch_size, solve, solve_in
from ..tree.crba import crba_from_x
from ..tree.kinematics import _pose_from_x
from ..tree.ltdl import dl_solve, lt_solve, ltdl_factor
from ..tree.rnea import rnea_kernel
from ...topology import expanded_parents

_EMPTY = np.zeros(0)
STATE_NAMES = ("separating", "sticking", "sliding")
FIXED_LINK = status.py_func(FIXED_LINK_KIND, 0, 0)  # a contact on a link welded to the fixed base
SCRATCH = status.py_func(SCRATCH_KIND, 0, 0)  # contact_fd_core's scratch too small (the C front: Python route)
TERMS_SCRATCH = 2  # contact_terms' scratch: this many vectors of nvt (the zero qdd, C)


@njit(cache=True)
def contact_terms(mi, mf, q, qd, tau, fx, cb, cp, cR, H, lam, Yt, bias, vloc, qdd0, w, s):
    """H factored in place (L^T D L over lam), qdd0 = H^-1 (tau - C), and per contact j (3 rows
    3j..3j+2, local axes [t1 t2 n]): Yt[r] = L^-T T_r, bias[r] = (dT/dt)_r^T qd + T_r^T qdd0 (b of
    Eq. 11.36), vloc[r] = T_r^T qd: rigid_terms, the poses of the contacts' bodies, contact_rows.
    s: scratch of TERMS_SCRATCH nvt floats. Returns a kernel status."""
    st = rigid_terms(mi, mf, q, qd, tau, fx, H, lam, qdd0, w, s)
    if st != 0:
        return st
    top = -1
    for j in range(cb.shape[0]):
        if cb[j] < 0:
            return FIXED_LINK
        top = max(top, cb[j])
    for i in range(top + 1):  # a parent's index is below its children's
        _pose_from_x(mi, w, i)
    nvt = mi[H_NVT]
    contact_rows(mi, mf, qd, cb, cp, cR, H[:nvt * nvt].reshape((nvt, nvt)), lam, Yt, bias, vloc, qdd0, w)
    return 0


@njit(cache=True)
def rigid_terms(mi, mf, q, qd, tau, fx, H, lam, qdd0, w, s):
    """H (Table 6.2) factored in place as L^T D L over lam (Table 6.3) and qdd0 = H^-1 (tau - C). One
    RNEA pass gives C and the joint transforms (W_E, W_R), from which the CRBA takes them and the
    world poses follow (kinematics._pose_from_x), and v_i, a_i at qdd = 0, whose a_i is J̇q̇ plus the
    fictitious base acceleration -a_g (§5.3). s: scratch of TERMS_SCRATCH nvt floats. Returns a kernel
    status."""
    nvt = mi[H_NVT]
    z = s[:nvt]
    z[:] = 0.0
    C = s[nvt:nvt + nvt]
    st = rnea_kernel(mi, mf, q, qd, z, fx, C, w)  # C = ID(q, qd, 0, f_ext) (Eq. 6.2)
    if st != 0:
        return st
    st = check(tau, nvt, A_TAU)
    if st != 0:
        return st
    crba_from_x(mi, mf, H, w)  # H (Table 6.2) from the RNEA's joint transforms
    Hm = H[:nvt * nvt].reshape((nvt, nvt))
    expanded_parents(mi, lam)
    kk = ltdl_factor(Hm, lam, mf[HF_TOL])  # Table 6.3
    if kk >= 0:
        return status(SINGULAR, 0, kk)  # the caller names the body of dof kk
    for d in range(nvt):
        qdd0[d] = tau[d] - C[d]
    lt_solve(Hm, lam, qdd0)  # Table 6.5
    dl_solve(Hm, lam, qdd0)
    return 0


@njit(cache=True)
def contact_rows(mi, mf, qd, cb, cp, cR, Hm, lam, Yt, bias, vloc, qdd0, w):
    """Per contact j (rows 3j..3j+2, its local axes [t1 t2 n]): Yt[r] = L^-T T_r, bias[r] = (dT/dt)_r^T
    qd + T_r^T qdd0, vloc[r] = T_r^T qd, with rigid_terms' H factored in Hm and the world poses of the
    contacts' bodies and their ancestors already in w. The point's J̇q̇ is the classical acceleration
    a + alpha x p + omega x v_P (Eq. 2.48) of the RNEA's a_i, plus a_g."""
    nb = mi[H_NB]
    nvt = mi[H_NVT]
    k = cb.shape[0]
    g = HF_GRAVITY
    for j in range(k):
        bj = cb[j]
        Rb = W_RW * nb + W_RW_N * bj
        pb = W_PW * nb + W_PW_N * bj
        l0, l1, l2 = cp[3 * j], cp[3 * j + 1], cp[3 * j + 2]
        P0 = w[pb] + w[Rb] * l0 + w[Rb + 1] * l1 + w[Rb + 2] * l2
        P1 = w[pb + 1] + w[Rb + 3] * l0 + w[Rb + 4] * l1 + w[Rb + 5] * l2
        P2 = w[pb + 2] + w[Rb + 6] * l0 + w[Rb + 7] * l1 + w[Rb + 8] * l2
        vo = W_V * nb + W_V_N * bj
        ao = W_A * nb + W_A_N * bj
        o0, o1, o2 = w[vo], w[vo + 1], w[vo + 2]  # the body's omega, v_O, alpha, a_O (body axes)
        vp0 = w[vo + 3] + o1 * l2 - o2 * l1
        vp1 = w[vo + 4] + o2 * l0 - o0 * l2
        vp2 = w[vo + 5] + o0 * l1 - o1 * l0
        ab0 = w[ao + 3] + w[ao + 1] * l2 - w[ao + 2] * l1 + o1 * vp2 - o2 * vp1
        ab1 = w[ao + 4] + w[ao + 2] * l0 - w[ao] * l2 + o2 * vp0 - o0 * vp2
        ab2 = w[ao + 5] + w[ao] * l1 - w[ao + 1] * l0 + o0 * vp1 - o1 * vp0
        jq0 = w[Rb] * ab0 + w[Rb + 1] * ab1 + w[Rb + 2] * ab2 + mf[g]  # J̇q̇ of the point, world
        jq1 = w[Rb + 3] * ab0 + w[Rb + 4] * ab1 + w[Rb + 5] * ab2 + mf[g + 1]
        jq2 = w[Rb + 6] * ab0 + w[Rb + 7] * ab1 + w[Rb + 8] * ab2 + mf[g + 2]
        for r in range(3 * j, 3 * j + 3):
            for d in range(nvt):
                Yt[r, d] = 0.0
        i = bj
        while i >= 0:  # the support: T^T rows = R_j^T [omega_d x (P - p_i) + v_d] (jacobian_kernel)
            Ri = W_RW * nb + W_RW_N * i
            pi = W_PW * nb + W_PW_N * i
            d0, d1, d2 = P0 - w[pi], P1 - w[pi + 1], P2 - w[pi + 2]
            vi = first_dof(mi, i)
            for dof in range(vi, vi + dof_count(mi, i)):
                so = dof_f(nb, dof) + D_S
                w0 = w[Ri] * mf[so] + w[Ri + 1] * mf[so + 1] + w[Ri + 2] * mf[so + 2]
                w1 = w[Ri + 3] * mf[so] + w[Ri + 4] * mf[so + 1] + w[Ri + 5] * mf[so + 2]
                w2 = w[Ri + 6] * mf[so] + w[Ri + 7] * mf[so + 1] + w[Ri + 8] * mf[so + 2]
                x0 = w[Ri] * mf[so + 3] + w[Ri + 1] * mf[so + 4] + w[Ri + 2] * mf[so + 5] + w1 * d2 - w2 * d1
                x1 = w[Ri + 3] * mf[so + 3] + w[Ri + 4] * mf[so + 4] + w[Ri + 5] * mf[so + 5] + w2 * d0 - w0 * d2
                x2 = w[Ri + 6] * mf[so + 3] + w[Ri + 7] * mf[so + 4] + w[Ri + 8] * mf[so + 5] + w0 * d1 - w1 * d0
                for c in range(3):  # local axis c = column c of R_j (world)
                    Yt[3 * j + c, dof] = cR[9 * j + c] * x0 + cR[9 * j + 3 + c] * x1 + cR[9 * j + 6 + c] * x2
            i = parent(mi, i)
        for c in range(3):
            r = 3 * j + c
            v = 0.0
            b = 0.0
            for d in range(nvt):
                v += Yt[r, d] * qd[d]
                b += Yt[r, d] * qdd0[d]
            vloc[r] = v
            bias[r] = b + cR[9 * j + c] * jq0 + cR[9 * j + 3 + c] * jq1 + cR[9 * j + 6 + c] * jq2
    for r in range(3 * k):
        lt_solve(Hm, lam, Yt[r])  # Y = L^-T T
    return 0


@njit(cache=True)
def contact_A(Hm, Yt, A):
    """A = Y^T D^-1 Y (Eq. 11.35; D on the diagonal of the factored H)."""
    n = Yt.shape[0]
    nvt = Yt.shape[1]
    for r in range(n):
        for c in range(r, n):
            s = 0.0
            for d in range(nvt):
                s += Yt[r, d] * Yt[c, d] / Hm[d, d]
            A[r, c] = s
            A[c, r] = s


@njit(cache=True)
def sliding(v, mu, rest_speed, dyn, d):
    """dyn[j] = 1 when contact j slides, |v_t| > rest_speed (and 0 < mu < inf), in direction
    d[j] = v_t/|v_t|; else 0."""
    for j in range(mu.shape[0]):
        s = math.hypot(v[3 * j], v[3 * j + 1])
        dyn[j] = 0
        d[j, 0] = 0.0
        d[j, 1] = 0.0
        if s > rest_speed and 0.0 < mu[j] < np.inf:
            dyn[j] = 1
            d[j, 0] = v[3 * j] / s
            d[j, 1] = v[3 * j + 1] / s


@njit(cache=True)
def finish(A, b, v, x, modes, mu, rest_speed, cR, qdd, F, codes, a):
    """F[j] = the force of contact j in world axes (R_j f_j), codes[j] its state (0 separating,
    1 sticking, 2 sliding; a frictionless contact at rest whose tangential acceleration is zero
    sticks). a: scratch (3k). Returns OVERFLOW_STATUS when qdd or F is not finite."""
    k = codes.shape[0]
    scale = 1e-300
    frictionless = False
    for j in range(k):
        frictionless = frictionless or mu[j] == 0.0
    if frictionless:  # the tangential accelerations are needed only to name frictionless contacts
        for r in range(3 * k):
            t = b[r]
            for c in range(3 * k):
                t += A[r, c] * x[c]
            a[r] = t
            scale = max(scale, abs(t))
    ok = True
    for j in range(k):
        for c in range(3):
            s = 0.0
            for c2 in range(3):
                s += cR[9 * j + 3 * c + c2] * x[3 * j + c2]
            F[j, c] = s
            ok = ok and s - s == 0.0
        md = modes[j]
        code = 0 if md == SEP else (1 if md == STICK else 2)
        if code == 2 and mu[j] == 0.0 and math.hypot(v[3 * j], v[3 * j + 1]) <= rest_speed and \
                math.hypot(a[3 * j], a[3 * j + 1]) <= 1e-9 * scale:
            code = 1
        codes[j] = code
    for e in range(qdd.shape[0]):
        ok = ok and qdd[e] - qdd[e] == 0.0
    return 0 if ok else OVERFLOW_STATUS


@njit(cache=True, pure=True)
def contact_scratch(nvt, k):
    """(floats, ints) of contact_fd_core's scratch: [H (nvt^2) | Y^T (3k nvt) | b, v, finish's a (3k
    each) | A (9k^2) | x (4k) | d (2k) | y (nvt) | contact_terms' (TERMS_SCRATCH nvt) | solve_in's] and
    [lam (nvt) | modes (k) | dyn (k) | solve_in's]."""
    nf, ni = scratch_size(k)
    n3 = 3 * k
    return nvt * nvt + n3 * nvt + 3 * n3 + n3 * n3 + 6 * k + (1 + TERMS_SCRATCH) * nvt + nf, nvt + 2 * k + ni


@njit(cache=True)
def contact_fd_core(mi, mf, q, qd, tau, fx, cb, cp, cR, mu, rest_speed, qdd, F, codes, w, s, si):
    """Contact forward dynamics of a tree without mimic joints: qdd (nvt), F (k x 3, world), codes
    (k, see finish), every array cut from the scratch s, si (contact_scratch). Returns a kernel
    status, FIXED_LINK, NO_SOLUTION or SCRATCH (s or si too small)."""
    nvt = mi[H_NVT]
    k = cb.shape[0]
    n3 = 3 * k
    nf, ni = contact_scratch(nvt, k)
    if s.shape[0] < nf or si.shape[0] < ni:
        return SCRATCH
    o = nvt * nvt
    H = s[:o]
    Yt = s[o:o + n3 * nvt].reshape((n3, nvt))
    o += n3 * nvt
    b = s[o:o + n3]
    v = s[o + n3:o + 2 * n3]
    a = s[o + 2 * n3:o + 3 * n3]
    o += 3 * n3
    A = s[o:o + n3 * n3].reshape((n3, n3))
    o += n3 * n3
    x = s[o:o + 4 * k]
    d = s[o + 4 * k:o + 6 * k].reshape((k, 2))
    o += 6 * k
    y = s[o:o + nvt]
    o += nvt
    st = s[o:o + TERMS_SCRATCH * nvt]
    s2 = s[o + TERMS_SCRATCH * nvt:]
    lam = si[:nvt]
    modes = si[nvt:nvt + k]
    dyn = si[nvt + k:nvt + 2 * k]
    si2 = si[nvt + 2 * k:]
    r = contact_terms(mi, mf, q, qd, tau, fx, cb, cp, cR, H, lam, Yt, b, v, qdd, w, st)  # qdd0 in qdd
    if r != 0:
        return r
    Hm = H.reshape((nvt, nvt))
    contact_A(Hm, Yt, A)
    sliding(v, mu, rest_speed, dyn, d)
    r = solve_in(A, b, mu, dyn, d, x, modes, s2, si2)
    if r != 0:
        return r
    y[:] = 0.0
    for j in range(n3):
        for e in range(nvt):
            y[e] += Yt[j, e] * x[j]
    dl_solve(Hm, lam, y)  # qdd = qdd0 + L^-1 D^-1 Y f
    for e in range(nvt):
        qdd[e] += y[e]
    return finish(A, b, v, x, modes, mu, rest_speed, cR, qdd, F, codes, a)


@njit(types.int64(I1, F1, F1, F1, F1, F1, I1, F1, F1, F1, types.float64, F1, F2, I1, F1), cache=True)
def contact_fd_kernel(mi, mf, q, qd, tau, fx, cb, cp, cR, mu, rest_speed, qdd, F, codes, w):
    """contact_fd_core with scratch of its own."""
    nf, ni = contact_scratch(mi[H_NVT], cb.shape[0])
    return contact_fd_core(mi, mf, q, qd, tau, fx, cb, cp, cR, mu, rest_speed, qdd, F, codes, w, np.empty(nf),
                           np.empty(ni, dtype=np.int64))


# the C callback of the front (_fastcall.ContactRoute): q, qd, tau with their lengths; the contacts'
# bodies, points, frames and mu (k of them); rest_speed; qdd, F, codes out; the work array and the
# scratch, each with its length
SIG_CONTACT = types.int64(P_I, P_F, P_F, types.int64, P_F, types.int64, P_F, types.int64, P_I, P_F, P_F, P_F,
                          types.int64, types.float64, P_F, P_F, P_I, P_F, types.int64, P_F, types.int64, P_I,
                          types.int64)


@cfunc(SIG_CONTACT, cache=True)
def contact_fd_c(mip, mfp, qp, nq, qdp, nqd, taup, ntau, cbp, cpp, cRp, mup, k, rest_speed, qddp, Fp, codesp, wp,
                 nw, sp, ns, sip, nsi):
    mi, mf, nvt = model_from_pointers(mip, mfp)
    return contact_fd_core(mi, mf, carray(qp, (nq,)), carray(qdp, (nqd,)), carray(taup, (ntau,)), mf[0:0],
                           carray(cbp, (k,)), carray(cpp, (3 * k,)), carray(cRp, (9 * k,)), carray(mup, (k,)),
                           rest_speed, carray(qddp, (nvt,)), carray(Fp, (k, 3)), carray(codesp, (k,)),
                           carray(wp, (nw,)), carray(sp, (ns,)), carray(sip, (nsi,)))


REST_SPEED = 1e-9  # m/s, the default of rest_speed


# ---------------------------------------------------------------------------------------------
# Python side: the public function, its C front, the checked route (arguments and errors:
# checks.py), results

def contact_forward_dynamics(model, q, qd, tau, contacts, f_ext=None, rest_speed=REST_SPEED, data=None):
    """qdd, contact forces and states of a rigid-body system whose listed contacts touch (module
    docstring; Featherstone §11.3-11.5 with Coulomb friction on the circular cone).

    contacts: a list of dn.Contact; rest_speed (m/s): a contact whose tangential speed is at most this
    is at rest (it may stick), faster it slides. Returns ContactResult(qdd, forces (k x 3, world),
    states). InputError when no forces satisfy the conditions (see docs/API.md)."""
    return _CFD(model, q, qd, tau, contacts, f_ext, rest_speed, data)


def _contact_fd_slow(model, q, qd, tau, contacts, f_ext, rest_speed, data):
    """Every call the C front (_CFD) does not answer, errors included; without the C shim the plain
    call still goes straight to the kernel (through numba's dispatcher)."""
    if (f_ext is None and rest_speed is REST_SPEED and data is None and type(model) is _Model
            and model.loop_data is None and not model.has_mimic
            and _conform(q) and _conform(qd) and _conform(tau)):  # the hot path: the kernel checks the rest
        packed = cached_pack(model, contacts)
        if packed is not None:
            k = packed.k
            qdd, F, codes = np.empty(model.nvt), np.empty((k, 3)), np.empty(k, dtype=np.int64)
            st = contact_fd_kernel(model._kmi, model._kmf, q, qd, tau, _EMPTY, packed.body, packed.point,
                                   packed.frame, packed.mu, REST_SPEED, qdd, F, codes, np.empty(model.work_size))
            if st == 0:
                return ContactResult(qdd, F, _states(codes))
    return _contact_fd_checked(model, q, qd, tau, contacts, f_ext, rest_speed, data)


_C_CACHE: dict = {}  # (model, *contacts) -> the C front's entry (_c_entry)


def _c_entry(model, contacts):
    """What the C front needs of a list of contacts on a model, made on its first call with them and
    kept in _C_CACHE (at most 256 entries; the keys hold the model and the contacts): (body, point,
    frame, mu, floats, ints) with the packing of args.pack and the sizes of contact_fd_core's
    scratch. None when the list does not pack (the Python route then says why)."""
    p = cached_pack(model, contacts)
    if p is None:
        return None
    e = (p.body, p.point, p.frame, p.mu, *contact_scratch(model.nvt, p.k))
    if len(_C_CACHE) >= 256:
        _C_CACHE.clear()
    _C_CACHE[(model, *contacts)] = e
    return e


def _front():
    """The C front of contact_forward_dynamics (_fastcall.ContactRoute, dynamics_node/_contact_route.c):
    the plain call (f_ext and data None, a float rest_speed, float64 vectors, a list or tuple of
    dn.Contact, a model without mimic or loop joints) answered by contact_fd_c on the thread's own work
    array; anything else, and any status but 0, by _contact_fd_slow."""
    from ... import _fast
    from ...dispatch import _bind_model

    if not _fast.AVAILABLE:
        return _contact_fd_slow
    _bind_model()
    return _fast.ContactRoute(contact_fd_c.address, _C_CACHE, _c_entry, ContactResult, STATE_NAMES,
                              _contact_fd_slow)


def _contact_fd_checked(model, q, qd, tau, contacts, f_ext, rest_speed, data):
    """contact_forward_dynamics with every argument checked, every error explained."""
    from ...dispatch import _length, check_data, vec, wrenches
    from .args import _real

    q, qd, packed = _check_common(model, q, qd, contacts)
    tau = vec(tau, "tau")
    _length(model, tau, "tau", "v")
    finite_or_raise(model, tau, "tau", A_TAU)
    rest_speed = _real(rest_speed, "rest_speed")
    fx = wrenches(model, f_ext)
    w = check_data(model, data)
    k = packed.body.shape[0]
    qdd, F, codes = np.empty(model.nv if model.has_mimic else model.nvt), np.empty((k, 3)), np.empty(k, dtype=np.int64)
    if model.has_mimic:
        A, b, v, qdd0, hs = _dense_terms(model, q, qd, tau, packed, f_ext)
        st = 0 if np.all(np.isfinite(A)) and np.all(np.isfinite(b)) else OVERFLOW_STATUS
        if st == 0:
            dyn, d = np.empty(k, dtype=np.int64), np.empty((k, 2))
            sliding(v, packed.mu, rest_speed, dyn, d)
            x = np.empty(4 * k)
            modes = np.empty(k, dtype=np.int64)
            st = solve(A, b, packed.mu, dyn, d, x, modes)
        if st == 0:
            qdd[:] = qdd0 + hs(x[:3 * k])
            st = finish(A, b, v, x, modes, packed.mu, rest_speed, packed.frame, qdd, F, codes, np.empty(3 * k))
    else:
        st = contact_fd_kernel(model._kmi, model._kmf, q, qd, tau, fx, packed.body, packed.point, packed.frame,
                               packed.mu, rest_speed, qdd, F, codes, w if w is not None else np.empty(model.work_size))
    if st:
        _raise(model, st, "contact forward dynamics", ("q", "qd", "tau"), (q, qd, tau), f_ext)
    return ContactResult(qdd, F, _states(codes))


_STATES: dict = {}


def _states(codes):
    """The state names of the codes (0 separating, 1 sticking, 2 sliding), one tuple per pattern."""
    key = codes.tobytes()
    t = _STATES.get(key)
    if t is None:
        t = tuple([STATE_NAMES[int(c)] for c in codes])
        if len(_STATES) < 4096:
            _STATES[key] = t
    return t


_CFD = _front()
