"""Impact at point contacts with Coulomb friction (Featherstone §11.7, Eqs. 11.55-11.72, for several
contacts on a rigid-body system: Eqs. 11.57-11.59 with T of forward_dynamics.py): an impulse iota changes qd
by H^-1 T iota, the contact velocities by A iota (A = T^T H^-1 T, forward_dynamics.py).

The law: Newton's restitution on the normal component and Coulomb friction on the
tangential velocity after the impact. With xi = A iota + b, b = ((v_t-), (1 + e) v_n-), the contact
problem of ncp.py holds on (iota, xi): xi_n = v_n+ + e v_n- >= 0, iota_n >= 0,
xi_n iota_n = 0 (so v_n+ >= -e v_n-, complementary), friction in the cone, sticking xi_t = v_t+ = 0
when the impulse it needs lies in the cone, else sliding with iota_t = -mu iota_n v_t+/|v_t+|
(maximum dissipation). For e = 0 this is the perfectly plastic impact, and kinetic energy never grows.
For e > 0 with friction, Newton's law can raise the kinetic energy (the normal and tangential
directions coupled through A: Kane's paradox); where it would, the impact is solved by Moreau's law
instead, b = (1 + e) v- on every component (what Pinocchio's impulseDynamics imposes, J v+ = -e J v-),
under which it never grows for 0 <= e <= 1: with T = 1/2 qd^T H qd, T+ - T- = iota^T xi/(1 + e) -
(1 - e)/(2 (1 + e)) iota^T A iota <= 0, because iota^T xi <= 0 by the conditions. So energy never
increases, and v_t+ = 0 for a sticking contact whenever that is possible without a gain.

Contacts already leaving (v_n- > 0) take no impulse, unless the others' impulses would make one
approach: the impact is then solved again with that contact in it at restitution 0 (v_n+ >= 0,
v_t+ = 0 when sticking).
"""
from __future__ import annotations

import numpy as np

from ..._jit import njit, types
from ...errors import InputError
from ...layout import H_NVT
from ..._kernel_io import F1, I1
from .forward_dynamics import STATE_NAMES, TERMS_SCRATCH, contact_A, contact_terms
from .checks import _check_common, _dense_terms, _raise
from .ncp import SEP, SLIDE, SLIP, STICK, solve
from ..tree.ltdl import dl_solve

MODE_STATE = {SEP: 0, STICK: 1, SLIDE: 2, SLIP: 2}


@njit(cache=True)
def impact_stages(A, v, mu, e, moreau, imp, modes):
    """Impulses imp (3k, local) of one simultaneous impact on the contacts not leaving (v_n- <= 0),
    Newton's law with e on the normal (moreau = 0) or Moreau's on every component (moreau = 1); a
    leaving contact that those impulses would make approach joins the set with restitution 0
    (v_n+ >= 0, sticking v_t+ = 0) and the impact is solved again, at most k times.
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
            for c in range(3):  # xi = A iota + b: b_n = (1 + e) v_n-, b_t = v_t- (Newton) or (1 + e) v_t- (Moreau)
                f = 1.0 + ej[ja] if (c == 2 or moreau) else 1.0
                bs[3 * a + c] = f * v[3 * ja + c]
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
def impact_law(A, v, mu, e, imp, modes):
    """The module docstring's law: Newton's; Moreau's where Newton's would raise the kinetic energy
    (T+ - T- = iota^T v- + 1/2 iota^T A iota in contact space, Eqs. 11.57-11.59)."""
    st = impact_stages(A, v, mu, e, 0, imp, modes)
    if st != 0 or e == 0.0:
        return st
    k3 = imp.shape[0]
    gain = 0.0
    scale = 0.0
    for r in range(k3):
        ai = 0.0
        for c in range(k3):
            ai += A[r, c] * imp[c]
        gain += imp[r] * (v[r] + 0.5 * ai)
        scale += abs(imp[r] * v[r])
    if gain > 1e-12 * scale:
        return impact_stages(A, v, mu, e, 1, imp, modes)
    return 0


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
    st = contact_terms(mi, mf, q, qd, tau, mf[0:0], cb, cp, cR, H, lam, Yt, b, v, qdd0, w,
                       np.empty(TERMS_SCRATCH * nvt))
    if st != 0:
        return st
    Hm = H[:nvt * nvt].reshape((nvt, nvt))
    A = np.empty((3 * k, 3 * k))
    contact_A(Hm, Yt, A)
    for r in range(3 * k):
        imp[r] = 0.0
    for e2 in range(nvt):
        qd_out[e2] = qd[e2]
    st = impact_law(A, v, mu, e, imp, modes)
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


def impact(model, q, qd_minus, contacts, restitution=0.0, data=None):
    """The velocity after an impact at the listed contacts (module docstring; Featherstone §11.7):
    ImpactResult(qd, impulses (k x 3, world, N s), states). restitution: e in [0, 1]."""
    from ...dispatch import check_data, check_out
    from .args import ImpactResult, _real, to_world

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
        st = impact_law(A, v, packed.mu, e, imp, modes)
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
