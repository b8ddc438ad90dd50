"""Point contacts with Coulomb friction on a rigid-body system: the contact forces and the
acceleration (Featherstone §11.3, Eqs. 11.23-11.36, with friction), and the impact (§11.7).

A contact i is a point P_i of a link (``dn.Contact``: point in the link frame) touching a fixed
surface with unit normal n_i (world, pointing toward the robot). Its local axes are [t1 t2 n]
(t1, t2 any orthonormal tangents), columns of R_i; the force the environment exerts on the robot at
P_i is f_i = R_i [f_t1 f_t2 f_n] (world). Per contact, the rows of the point's linear Jacobian in
those axes are T_i^T = R_i^T J_i (Eq. 11.25 for the three directions), so that

    H qdd + C = tau + T f                                      (Eqs. 11.23, 11.32)
    a = T^T qdd + (dT/dt)^T qd = A f + b                        (Eqs. 11.33-11.34)
    A = T^T H^-1 T,   b = T^T H^-1 (tau - C) + (dT/dt)^T qd     (Eqs. 11.35-11.36)

with a the contact points' classical accelerations in the local axes ((dT/dt)^T qd = R^T J̇ qd, the
point's J̇q̇ including omega x v, jacobians._jdot; the normals are fixed, so n-dot is 0). H = L^T D L
is factored sparsely (Table 6.3) and Y = L^-T T (Table 6.5) gives A = Y^T D^-1 Y; qdd0 = H^-1 (tau - C)
and, once f is known, qdd = qdd0 + L^-1 D^-1 Y f. The conditions on (f, a) and how they are solved:
contact_ncp.py. Tangential velocities decide which contacts slide: |v_t| > rest_speed.

Impact (§11.7, Eqs. 11.57-11.59 and 11.68-11.72 for several contacts and friction): an impulse
iota changes qd by H^-1 T iota, the contact velocities by A iota. Moreau's law with one coefficient e
for the whole contact velocity (what Pinocchio's impulseDynamics imposes, J v+ = -e J v-): with
xi = v+ + e v- = A iota + (1 + e) v-, the same problem as above holds on (iota, xi): xi_n >= 0,
iota_n >= 0, xi_n iota_n = 0 (so v_n+ >= -e v_n-), friction in the cone, sticking xi_t = 0
(v_t+ = -e v_t-, 0 for e = 0), else iota_t = -mu iota_n xi_t/|xi_t|. Kinetic energy never grows
for 0 <= e <= 1: with T = 1/2 qd^T H qd, T+ - T- = iota^T xi/(1 + e) - (1 - e)/(2 (1 + e)) iota^T A iota
<= 0, because iota^T xi <= 0 by the conditions. (Newton's law on the normal alone with v_t+ = 0 can
gain energy with friction; that is why the tangential part carries e too.) Contacts already leaving
(v_n- > 0) take no impulse, unless the others' impulses would make one approach: the impact is then
solved again with that contact in it at restitution 0 (v_n+ >= 0, v_t+ = 0 when sticking). With
e > 0 such a mixed impact has no energy guarantee (the proof needs one e for all); with e = 0 it has.
"""
from __future__ import annotations

import math

import numpy as np

from .._jit import njit, types
from ..errors import InputError
from ..layout import HF_TOL, H_NVT
from ._common import A_Q, A_QD, A_TAU, F1, I1, SINGULAR, check
from ..dispatch import _conform
from ..model import Model as _Model
from .contact_args import ContactResult, cached_pack
from .contact_ncp import NO_SOLUTION, SEP, SLIDE, SLIP, STICK, solve
from .crba import crba_kernel
from .jacobians import ROWS, R_VX, R_VY, R_VZ, _jdot
from .ltdl import dl_solve, lt_solve, ltdl_factor
from .operational_space import expanded_parents
from .rnea import rnea_kernel

_EMPTY = np.zeros(0)
STATE_NAMES = ("separating", "sticking", "sliding")
OVERFLOW_STATUS = 5 * 100000000  # dispatch.OVERFLOW: a finite input whose result is not finite
FIXED_LINK = -8  # a contact on a link welded to the fixed base


def tangent_frame(n):
    """R = [t1 t2 n] (columns, world) for a unit normal n: t1 along the world axis least aligned with
    n, made orthogonal to it."""
    e = np.zeros(3)
    e[int(np.argmin(np.abs(n)))] = 1.0
    t1 = e - n * float(n @ e)
    t1 /= np.linalg.norm(t1)
    return np.column_stack((t1, np.cross(n, t1), n))


@njit(cache=True)
def contact_terms(mi, mf, q, qd, tau, fx, cb, cp, cR, H, lam, Yt, bias, vloc, qdd0, w):
    """H factored in place (L^T D L over lam), qdd0 = H^-1 (tau - C), and per contact j (3 rows
    3j..3j+2, local axes [t1 t2 n]): Yt[r] = L^-T T_r, bias[r] = (dT/dt)_r^T qd + T_r^T qdd0 (b of
    Eq. 11.36), vloc[r] = T_r^T qd. Returns a kernel status."""
    nvt = mi[H_NVT]
    k = cb.shape[0]
    st = crba_kernel(mi, mf, q, H, w)
    if st != 0:
        return st
    st = check(tau, nvt, A_TAU)
    if st != 0:
        return st
    z = np.zeros(nvt)
    C = np.empty(nvt)
    st = rnea_kernel(mi, mf, q, qd, z, fx, C, w)  # C = ID(q, qd, 0, f_ext) (Eq. 6.2)
    if st != 0:
        return st
    Hm = H[:nvt * nvt].reshape((nvt, nvt))
    expanded_parents(mi, lam)
    kk = ltdl_factor(Hm, lam, mf[HF_TOL])  # Table 6.3
    if kk >= 0:
        return SINGULAR * 100000000 + kk  # the caller names the body of dof kk
    for d in range(nvt):
        qdd0[d] = tau[d] - C[d]
    lt_solve(Hm, lam, qdd0)  # Table 6.5
    dl_solve(Hm, lam, qdd0)
    dJ = ROWS * nvt  # out = [J; J̇] (jacobians._jdot), row r of J at r nvt, of J̇ at dJ + r nvt
    out = np.empty(dJ + dJ)
    for j in range(k):
        if cb[j] < 0:
            return FIXED_LINK
        _jdot(mi, mf, q, qd, cb[j], cp[3 * j:3 * j + 3], out, dJ, w)  # rows [v; omega], world axes
        for c in range(3):  # local axis c = column c of R_j (world)
            r = 3 * j + c
            e0, e1, e2 = cR[9 * j + c], cR[9 * j + 3 + c], cR[9 * j + 6 + c]
            jb = 0.0
            v = 0.0
            b = 0.0
            for d in range(nvt):
                t = e0 * out[R_VX * nvt + d] + e1 * out[R_VY * nvt + d] + e2 * out[R_VZ * nvt + d]
                Yt[r, d] = t
                v += t * qd[d]
                b += t * qdd0[d]
                jb += (e0 * out[dJ + R_VX * nvt + d] + e1 * out[dJ + R_VY * nvt + d]
                       + e2 * out[dJ + R_VZ * nvt + d]) * qd[d]
            vloc[r] = v
            bias[r] = b + jb
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
def sliding(v, mu, rest_speed):
    """(dyn, d): contact j slides when |v_t| > rest_speed (and 0 < mu < inf), in direction d = v_t/|v_t|."""
    k = mu.shape[0]
    dyn = np.zeros(k, dtype=np.int64)
    d = np.zeros((k, 2))
    for j in range(k):
        s = math.hypot(v[3 * j], v[3 * j + 1])
        if s > rest_speed and 0.0 < mu[j] < np.inf:
            dyn[j] = 1
            d[j, 0] = v[3 * j] / s
            d[j, 1] = v[3 * j + 1] / s
    return dyn, d


@njit(cache=True)
def impact_stages(A, v, mu, e, imp, modes):
    """Impulses imp (3k, local) of one simultaneous impact on the contacts not leaving (v_n- <= 0),
    Moreau's law with e; a leaving contact that those impulses would make approach joins the set with
    restitution 0 (v_n+ >= 0, sticking v_t+ = 0) and the impact is solved again, at most k times.
    modes[j] = SEP for the contacts that take no impulse."""
    k = mu.shape[0]
    act = np.zeros(k, dtype=np.int64)
    ej = np.full(k, e)
    vs = 0.0
    for r in range(3 * k):
        vs = max(vs, abs(v[r]))
    for j in range(k):
        modes[j] = SEP
        if v[3 * j + 2] <= 0.0:
            act[j] = 1
    for _round in range(k + 1):
        na = 0
        idx = np.empty(k, dtype=np.int64)
        for j in range(k):
            if act[j]:
                idx[na] = j
                na += 1
        for r in range(3 * k):
            imp[r] = 0.0
        if na == 0:
            return 0
        As = np.empty((3 * na, 3 * na))
        bs = np.empty(3 * na)
        mus = np.empty(na)
        for a in range(na):
            ja = idx[a]
            mus[a] = mu[ja]
            for c in range(3):
                bs[3 * a + c] = (1.0 + ej[ja]) * v[3 * ja + c]  # xi = A iota + (1 + e) v-
                for b2 in range(na):
                    for c2 in range(3):
                        As[3 * a + c, 3 * b2 + c2] = A[3 * ja + c, 3 * idx[b2] + c2]
        x = np.empty(4 * na)
        ms = np.empty(na, dtype=np.int64)
        st = solve(As, bs, mus, np.zeros(na, dtype=np.int64), np.zeros((na, 2)), x, ms)
        if st != 0:
            return st
        for a in range(na):
            modes[idx[a]] = ms[a]
            for c in range(3):
                imp[3 * idx[a] + c] = x[3 * a + c]
        vp = A @ imp + v
        again = False
        for j in range(k):
            if not act[j] and vp[3 * j + 2] < -1e-12 * vs:
                act[j] = 1
                ej[j] = 0.0
                again = True
        if not again:
            return 0
    return 0


@njit(cache=True)
def finish(A, b, v, x, modes, mu, rest_speed, cR, out, nvt, k):
    """out[nvt:nvt + 3k] = the forces in world axes (R_j f_j), out[nvt + 3k:] = the state codes
    (0 separating, 1 sticking, 2 sliding; a frictionless contact at rest whose tangential
    acceleration is zero sticks). Returns OVERFLOW_STATUS when anything in out is not finite."""
    a = A @ x[:3 * k] + b
    scale = 1e-300
    for r in range(3 * k):
        scale = max(scale, abs(a[r]))
    for j in range(k):
        for c in range(3):
            s = 0.0
            for c2 in range(3):
                s += cR[9 * j + 3 * c + c2] * x[3 * j + c2]
            out[nvt + 3 * j + c] = s
        md = modes[j]
        code = 0 if md == SEP else (1 if md == STICK else 2)
        if code == 2 and mu[j] == 0.0 and math.hypot(v[3 * j], v[3 * j + 1]) <= rest_speed and \
                math.hypot(a[3 * j], a[3 * j + 1]) <= 1e-9 * scale:
            code = 1
        out[nvt + 3 * k + j] = code
    for r in range(nvt + 3 * k):
        if not (out[r] - out[r] == 0.0):
            return OVERFLOW_STATUS
    return 0


@njit(types.int64(I1, F1, F1, F1, F1, F1, I1, F1, F1, F1, types.float64, F1, F1), cache=True)
def contact_fd_kernel(mi, mf, q, qd, tau, fx, cb, cp, cR, mu, rest_speed, out, w):
    """Contact forward dynamics of a tree without mimic joints: out = [qdd (nvt) | forces (3k, world)
    | state codes (k), see finish]. Returns a kernel status, FIXED_LINK or NO_SOLUTION."""
    nvt = mi[H_NVT]
    k = cb.shape[0]
    H = np.empty(max(nvt * nvt, 1))
    lam = np.empty(max(nvt, 1), dtype=np.int64)
    Yt = np.empty((3 * k, nvt))
    b = np.empty(3 * k)
    v = np.empty(3 * k)
    st = contact_terms(mi, mf, q, qd, tau, fx, cb, cp, cR, H, lam, Yt, b, v, out[:nvt], w)  # qdd0 in out
    if st != 0:
        return st
    Hm = H[:nvt * nvt].reshape((nvt, nvt))
    A = np.empty((3 * k, 3 * k))
    contact_A(Hm, Yt, A)
    dyn, d = sliding(v, mu, rest_speed)
    x = np.empty(4 * k)
    modes = np.empty(k, dtype=np.int64)
    st = solve(A, b, mu, dyn, d, x, modes)
    if st != 0:
        return st
    y = np.zeros(nvt)
    for r in range(3 * k):
        for e in range(nvt):
            y[e] += Yt[r, e] * x[r]
    dl_solve(Hm, lam, y)  # qdd = qdd0 + L^-1 D^-1 Y f
    for e in range(nvt):
        out[e] += y[e]
    return finish(A, b, v, x, modes, mu, rest_speed, cR, out, nvt, k)


@njit(types.int64(I1, F1, F1, F1, I1, F1, F1, F1, types.float64, F1, F1, I1, F1), cache=True)
def impact_kernel(mi, mf, q, qd, cb, cp, cR, mu, e, qd_out, imp, modes, w):
    """The impact of the module docstring on a tree without mimic joints: qd_out (nvt), imp (3k,
    local axes), modes (k). Returns a kernel status, FIXED_LINK or NO_SOLUTION."""
    nvt = mi[H_NVT]
    k = cb.shape[0]
    H = np.empty(max(nvt * nvt, 1))
    lam = np.empty(max(nvt, 1), dtype=np.int64)
    Yt = np.empty((3 * k, nvt))
    b = np.empty(3 * k)
    v = np.empty(3 * k)
    tau = np.zeros(nvt)
    qdd0 = np.empty(nvt)
    st = contact_terms(mi, mf, q, qd, tau, mf[0:0], cb, cp, cR, H, lam, Yt, b, v, qdd0, w)
    if st != 0:
        return st
    Hm = H[:nvt * nvt].reshape((nvt, nvt))
    A = np.empty((3 * k, 3 * k))
    contact_A(Hm, Yt, A)
    for r in range(3 * k):
        imp[r] = 0.0
    for e2 in range(nvt):
        qd_out[e2] = qd[e2]
    st = impact_stages(A, v, mu, e, imp, modes)
    if st != 0:
        return st
    y = np.zeros(nvt)
    for r in range(3 * k):
        for e2 in range(nvt):
            y[e2] += Yt[r, e2] * imp[r]
    dl_solve(Hm, lam, y)  # qd+ = qd- + H^-1 T iota (Eqs. 11.57-11.58)
    for e2 in range(nvt):
        qd_out[e2] += y[e2]
    return 0


MODE_STATE = {SEP: 0, STICK: 1, SLIDE: 2, SLIP: 2}
REST_SPEED = 1e-9  # m/s, the default of rest_speed


# ---------------------------------------------------------------------------------------------
# Python side: arguments, the dense route of models with mimic joints (H = G^T H_t G, §9.6), results

def _check_common(model, q, qd, contacts, name_qd="qd"):
    from ..dispatch import _length, check_model, vec
    from .contact_args import pack

    check_model(model)
    if model.loops:
        raise InputError(f"model '{model.name}' has loop joints ({', '.join(model.loop_joints)}): contact dynamics "
                         "is implemented for trees (fixed or floating base, mimic joints) only")
    q = vec(q, "q")
    _length(model, q, "q", "q")
    qd = vec(qd, name_qd)
    _length(model, qd, name_qd, "v")
    for nm, x, arg in (("q", q, A_Q), (name_qd, qd, A_QD)):
        finite_or_raise(model, x, nm, arg)
    return q, qd, pack(model, contacts)


def finite_or_raise(model, x, name, arg):
    """InputError naming the first non-finite entry of x and its joint."""
    from ..dispatch import finite
    from ._common import coordinate_owner

    if not finite(x):
        i = int(np.nonzero(~np.isfinite(x))[0][0])
        raise InputError(f"{name}[{i}] (joint '{coordinate_owner(model, arg, i, False)}') is not finite (NaN or inf)")


def _raise(model, st, what, names, arrays, f_ext=None):
    from ..dispatch import raise_status
    from ..layout import BODY_I, HEADER_I, J_VI

    if st == NO_SOLUTION:
        raise InputError(f"{what}: no contact forces satisfy the contact conditions here (with Coulomb friction "
                         "the problem may have no solution, Painlevé's paradox, or one that the solver did not "
                         "find): lower the friction coefficients or drop contacts")
    if st // 100000000 == SINGULAR:
        k = st % 100000
        vi = model.mi[HEADER_I + J_VI::BODY_I]
        st = SINGULAR * 100000000 + int(np.searchsorted(vi, k, side="right") - 1)
    raise_status(model, st, False, what, names, arrays, (("f_ext", f_ext),) if f_ext else ())


def _dense_terms(model, q, qd, tau, packed, f_ext):
    """(A, b, v, qdd0, solve) by dense linear algebra on the reduced coordinates (mimic models)."""
    from .crba import mass_matrix
    from .jacobians import jacobian, jacobian_derivative
    from .ltdl import singular_mass_matrix
    from .rnea import inverse_dynamics

    H = mass_matrix(model, q)
    C = inverse_dynamics(model, q, qd, np.zeros(model.nv), f_ext=f_ext)
    k = packed.body.shape[0]
    T = np.empty((3 * k, model.nv))
    jb = np.empty(3 * k)
    for j, c in enumerate(packed.contacts):
        R = c.frame
        T[3 * j:3 * j + 3] = R.T @ jacobian(model, q, c.link, c.point)[:3]
        jb[3 * j:3 * j + 3] = R.T @ (jacobian_derivative(model, q, qd, c.link, c.point)[:3] @ qd)
    try:
        L = np.linalg.cholesky(H)
    except np.linalg.LinAlgError:
        raise singular_mass_matrix(model, H, "contact dynamics") from None

    def hsolve(x):
        return np.linalg.solve(L.T, np.linalg.solve(L, x))

    qdd0 = hsolve(tau - C)
    Y = np.linalg.solve(L, T.T)
    return Y.T @ Y, T @ qdd0 + jb, T @ qd, qdd0, lambda f: hsolve(T.T @ f)


def contact_forward_dynamics(model, q, qd, tau, contacts, f_ext=None, rest_speed=REST_SPEED, data=None):
    """qdd, contact forces and states of a rigid-body system whose listed contacts touch (module
    docstring; Featherstone §11.3-11.5 with Coulomb friction on the circular cone).

    contacts: a list of dn.Contact; rest_speed (m/s): a contact whose tangential speed is at most this
    is at rest (it may stick), faster it slides. Returns ContactResult(qdd, forces (k x 3, world),
    states). InputError when no forces satisfy the conditions (see docs/API.md)."""
    if (f_ext is None and rest_speed is REST_SPEED and data is None and type(model) is _Model
            and model.loop_data is None and not model.has_mimic
            and _conform(q) and _conform(qd) and _conform(tau)):  # the hot path: the kernel checks the rest
        packed = cached_pack(model, contacts)
        if packed is not None:
            nvt, k = model.nvt, packed.k
            out = np.empty(nvt + 4 * k)
            st = contact_fd_kernel(model._kmi, model._kmf, q, qd, tau, _EMPTY, packed.body, packed.point,
                                   packed.frame, packed.mu, REST_SPEED, out, np.empty(model.work_size))
            if st == 0:
                return ContactResult(out[:nvt], out[nvt:nvt + 3 * k].reshape(k, 3), _states(out[nvt + 3 * k:]))
    return _contact_fd_checked(model, q, qd, tau, contacts, f_ext, rest_speed, data)


def _contact_fd_checked(model, q, qd, tau, contacts, f_ext, rest_speed, data):
    """contact_forward_dynamics with every argument checked, every error explained."""
    from ..dispatch import _length, check_data, vec, wrenches
    from .contact_args import _real

    q, qd, packed = _check_common(model, q, qd, contacts)
    tau = vec(tau, "tau")
    _length(model, tau, "tau", "v")
    finite_or_raise(model, tau, "tau", A_TAU)
    rest_speed = _real(rest_speed, "rest_speed")
    fx = wrenches(model, f_ext)
    w = check_data(model, data)
    k = packed.body.shape[0]
    nvt = model.nv if model.has_mimic else model.nvt
    out = np.empty(nvt + 4 * k)
    if model.has_mimic:
        A, b, v, qdd0, hs = _dense_terms(model, q, qd, tau, packed, f_ext)
        st = 0 if np.all(np.isfinite(A)) and np.all(np.isfinite(b)) else OVERFLOW_STATUS
        if st == 0:
            dyn, d = sliding(v, packed.mu, rest_speed)
            x = np.empty(4 * k)
            modes = np.empty(k, dtype=np.int64)
            st = solve(A, b, packed.mu, dyn, d, x, modes)
        if st == 0:
            out[:nvt] = qdd0 + hs(x[:3 * k])
            st = finish(A, b, v, x, modes, packed.mu, rest_speed, packed.frame, out, nvt, k)
    else:
        st = contact_fd_kernel(model._kmi, model._kmf, q, qd, tau, fx, packed.body, packed.point, packed.frame,
                               packed.mu, rest_speed, out, w if w is not None else np.empty(model.work_size))
    if st:
        _raise(model, st, "contact forward dynamics", ("q", "qd", "tau"), (q, qd, tau), f_ext)
    return ContactResult(out[:nvt], out[nvt:nvt + 3 * k].reshape(k, 3), _states(out[nvt + 3 * k:]))


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


def impact(model, q, qd_minus, contacts, restitution=0.0, data=None):
    """The velocity after an impact at the listed contacts (module docstring; Featherstone §11.7):
    ImpactResult(qd, impulses (k x 3, world, N s), states). restitution: e in [0, 1]."""
    from ..dispatch import check_data, check_out
    from .contact_args import ImpactResult, _real, to_world

    q, qd, packed = _check_common(model, q, qd_minus, contacts, "qd_minus")
    e = _real(restitution, "restitution")
    if e > 1.0:
        raise InputError(f"restitution must be in [0, 1], got {e:g}")
    w = check_data(model, data)
    k = packed.body.shape[0]
    what = "the impact"
    modes = np.empty(k, dtype=np.int64)
    imp = np.zeros(3 * k)
    if model.has_mimic:
        A, _b, v, _q0, hs = _dense_terms(model, q, qd, np.zeros(model.nv), packed, None)
        st = impact_stages(A, v, packed.mu, e, imp, modes)
        if st:
            _raise(model, st, what, ("q", "qd_minus"), (q, qd))
        qd_out = qd + hs(imp)
    else:
        qd_out = np.empty(model.nvt)
        st = impact_kernel(model._kmi, model._kmf, q, qd, packed.body, packed.point, packed.frame, packed.mu, e,
                           qd_out, imp, modes, w if w is not None else np.empty(model.work_size))
        if st:
            _raise(model, st, what, ("q", "qd_minus"), (q, qd))
    impulses = to_world(packed, imp)
    check_out((qd_out, impulses), what, ("q", "qd_minus"), (q, qd))
    states = tuple(STATE_NAMES[MODE_STATE[int(m)]] for m in modes)
    return ImpactResult(qd_out, impulses, states)
