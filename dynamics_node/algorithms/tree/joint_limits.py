"""Joint limits as unilateral constraints in joint space, for the simulation step (algorithms/contact/soft.py).

Featherstone Ch. 11 (§11.2-11.4, Eqs. 11.14-11.18 and the impulse of §11.6) with the contact normal a
unit vector of joint space: the limit q_i >= lower_i is a constraint whose "normal" is e_i and whose
"force" lam >= 0 is a generalized force on coordinate i (for the upper limit, -e_i). Its row of the
contact problem is exactly that of a point contact: T = s e_i (s = +1 lower, -1 upper), so

    A_ll = s s' (H^-1)_{ii'},   A_cl = T_c^T H^-1 E,   b_l = s qdd0_i        (Eqs. 11.35-11.36)

and the step solves it with the contacts (contact.ncp.solve: a 3-row block with mu = 0, whose two
tangential rows are inert). With Y_E = L^-T E (Table 6.5) these are A_ll = Y_E D^-1 Y_E^T and
A_cl = Y D^-1 Y_E^T, the same factorisation the contacts use.

The step is on velocities (as dn.simulate_step's contacts: semi-implicit Euler, q+ = q + dt qd+), so
a limit row asks qd+ to satisfy s qd+_i >= w, with a_l = (s qd_i - w) / dt + b_l + (A lam)_l >= 0,
lam a_l = 0:
- w = -gap / dt (gap = s (q_i - limit) >= 0 inside the range): the joint ends the step exactly at the
  limit at most, never beyond (a speculative contact: the row is there before the joint touches, and
  carries no force unless the step would cross the limit);
- at an impact (the step would cross the limit, approaching faster than REST_SPEED), with
  restitution e > 0: w = e |s qd_i| (Newton's law of restitution, §11.6, Eq. 11.58's e; the joint
  leaves the stop as fast as e times it came).
Rows are made only for joints near a limit (within what two steps at the current speed and free
acceleration reach, plus NEAR); the others cannot carry a force this step.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..._jit import njit
from .ltdl import dl_solve, lt_solve

REST_SPEED = 1e-2  # rad/s or m/s: slower approaches stop at the limit without a bounce
NEAR = 1e-3        # rad or m: rows for joints this close to a limit whatever their speed


class LimitRows(NamedTuple):
    """The limit rows of one step: coordinate (v index), sign (+1 lower, -1 upper), target w."""
    index: np.ndarray
    sign: np.ndarray
    target: np.ndarray


_QI = {}  # id(model) -> (model, q index of each v index or -1)
_CHECKED = {}  # id(limits) -> (limits, model, limits_arg's result) for read-only limit arrays


def _q_index(model):
    hit = _QI.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    qi = np.full(model.nv, -1, dtype=np.intp)
    for j in model.joint_names:
        qs, vs = model.q_slice(j), model.v_slice(j)
        if qs.stop - qs.start == 1 and vs.stop - vs.start == 1:
            qi[vs.start] = qs.start
    if len(_QI) > 64:
        _QI.clear()
    _QI[id(model)] = (model, qi)
    return qi


def limits_arg(model, limits):
    """limits: None, or an nv x 2 array of [lower, upper] per velocity coordinate (-inf/inf: none).
    Only single-coordinate joints (revolute, prismatic) can be limited. Returns (lower, upper, q index)."""
    from ...dispatch import mat
    from ...errors import InputError

    frozen = isinstance(limits, np.ndarray) and not limits.flags.writeable
    hit = _CHECKED.get(id(limits)) if frozen else None
    if hit is not None and hit[0] is limits and hit[1] is model:  # a read-only array cannot have changed
        return hit[2]
    a = mat(limits, "limits")
    if a.shape != (model.nv, 2):
        raise InputError(f"limits must be an nv x 2 array ({model.nv} x 2: lower upper per velocity "
                         f"coordinate), got shape {a.shape}")
    lo, hi = a[:, 0], a[:, 1]
    if not (lo <= hi).all():
        r = int(np.flatnonzero(~(lo <= hi))[0])
        raise InputError(f"limits[{r}]: lower {lo[r]:g} and upper {hi[r]:g} are not lower <= upper (NaN? use -inf "
                         "/ inf for no limit)")
    qi = _q_index(model)
    bad = np.flatnonzero((np.isfinite(lo) | np.isfinite(hi)) & (qi < 0))
    if bad.size:
        raise InputError(f"limits[{int(bad[0])}]: only the coordinate of a revolute or prismatic joint can be "
                         "limited (a floating base's or a multi-coordinate joint's cannot)")
    if frozen:
        if len(_CHECKED) > 64:
            _CHECKED.clear()
        _CHECKED[id(limits)] = (limits, model, (lo, hi, qi))
    return lo, hi, qi


def limit_rows(q, qd, qdd0, lo, hi, qi, dt, restitution) -> LimitRows:
    """The rows of this step (module docstring), lower limits first."""
    out = []
    for s, bound in ((1.0, lo), (-1.0, hi)):
        i = np.flatnonzero(np.isfinite(bound))
        gap = s * (q[qi[i]] - bound[i])
        vn, an = s * qd[i], s * qdd0[i]
        near = gap <= NEAR + 2.0 * dt * (np.abs(vn) + dt * np.abs(an))
        i, gap, vn, an = i[near], gap[near], vn[near], an[near]
        w = -gap / dt
        if restitution > 0.0:
            hit = (gap + dt * (vn + dt * an) < 0.0) & (vn < -REST_SPEED)
            w = np.where(hit, np.maximum(w, -restitution * vn), w)
        out.append((i, np.full(i.size, s), w))
    return LimitRows(*(np.concatenate(x) for x in zip(*out)))


@njit(cache=True)
def coupling_kernel(Hm, lam, Yt, idx, sgn, Acl, All, M):
    """For the factored H = L^T D L (Hm, lam) and the contacts' Y = L^-T T (Yt rows): Y_E = L^-T E,
    Acl = Y D^-1 Y_E^T, All = Y_E D^-1 Y_E^T and the rows of M = (H^-1 E)^T = (L^-1 D^-1 Y_E^T)^T."""
    nl = idx.shape[0]
    nvt = Hm.shape[0]
    n = Yt.shape[0]
    YE = np.zeros((nl, nvt))
    for a in range(nl):
        YE[a, idx[a]] = sgn[a]
        lt_solve(Hm, lam, YE[a])
    for r in range(n):
        for a in range(nl):
            s = 0.0
            for d in range(nvt):
                s += Yt[r, d] * YE[a, d] / Hm[d, d]
            Acl[r, a] = s
    for a in range(nl):
        for b in range(a, nl):
            s = 0.0
            for d in range(nvt):
                s += YE[a, d] * YE[b, d] / Hm[d, d]
            All[a, b] = s
            All[b, a] = s
        for d in range(nvt):
            M[a, d] = YE[a, d]
        dl_solve(Hm, lam, M[a])


def coupling(model, q, rows, fac, apply, ncontact_rows):
    """(Acl (3k x nl), All (nl x nl), M (nl x nv)): the limits against the contacts and each other,
    and each limit's qdd per unit lam. fac = (Hm, lam, Yt) of the tree route, None for a mimic model
    (then densely, in the model's coordinates)."""
    nl = rows.index.size
    if fac is not None:
        Hm, lam, Yt = fac
        Acl, All, M = np.empty((Yt.shape[0], nl)), np.empty((nl, nl)), np.empty((nl, Hm.shape[0]))
        coupling_kernel(Hm, lam, np.ascontiguousarray(Yt), rows.index, rows.sign, Acl, All, M)
        return Acl, All, M
    from .crba import mass_matrix

    H = mass_matrix(model, q)
    E = np.zeros((model.nv, nl))
    E[rows.index, np.arange(nl)] = rows.sign
    HE = np.linalg.solve(H, E)
    All = E.T @ HE
    Acl = np.empty((ncontact_rows, nl))
    for r in range(ncontact_rows):  # (A_cl)_r = (H^-1 T e_r)^T E
        u = np.zeros(ncontact_rows)
        u[r] = 1.0
        Acl[r] = apply(u) @ E
    return Acl, All, HE.T
