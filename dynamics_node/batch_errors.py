"""Refusals that name the entry of an input: 'qd[3] (joint 'elbow')' of a single state, 'QD[3, 2]
(joint 'elbow')' of rows of states (N x nq, N x nv arrays). The service layer maps these to the request's
own fields (velocity[3], points[3].velocities[2]).

Two kinds:
- a non-finite entry of a batch input (check_finite), before the kernel;
- a finite input out of range (out_of_range): when a computation from finite inputs fails in the way
  numbers beyond float64's range or precision make it fail (its result overflowed, a factorisation met
  inf or NaN, a matrix is singular to working precision, an iteration cannot converge), the refusal
  names the input entry at fault, its field, index, joint and value, rather than that symptom. An entry
  is at fault when its magnitude is at least BIG (1e8: no robot's position, rate, acceleration or effort
  reaches it in SI units); a joint angle is blamed only when nothing else is that large (angles enter
  through their sine and cosine and overflow nothing, but beyond 1e8 rad float64 keeps less than 1e-8
  rad of them). Used by dispatch.Route and dispatch.guard for every public function, by check_out for
  the few that compute outside a route, and by algorithms.derivatives.each_state.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .errors import InputError, RangeError

BIG = 1e8   # magnitudes from here on are 'out of range'
IN_RANGE = "a robot's positions, rates, accelerations and efforts are below 1e8 in magnitude (SI units)"
_WRENCH = ("fx", "fy", "fz", "tx", "ty", "tz")
_ANGLE_KINDS = ("revolute", "continuous")


def owner(model, name, i):
    """' (joint 'j')' for column i of a Q-like (q slices) or V-like (v slices) array, else ''."""
    slices = model._q_slices if name.upper() == "Q" else model._v_slices
    for j, sl in slices.items():
        if sl.start <= i < sl.stop:
            return f" (joint '{j}')"
    return ""


def _joint_of(model, name, n, i):
    """(joint, is_angle) owning entry i of an input of length n named name; (None, False) if none. An
    array named q (q0, q1, Q) indexes positions, another of length nv velocities (or forces)."""
    if model is None:
        return None, False
    is_q = name.upper() in ("Q", "Q0", "Q1")
    if not is_q and n != model.nv:
        return None, False
    for j, sl in (model._q_slices if is_q else model._v_slices).items():
        if sl.start <= i < sl.stop:
            quat = sl.stop - sl.start == 7 and i >= sl.start + 3   # a free joint's q: x y z, then its quaternion
            return j, is_q and (model.joint_kinds.get(j) in _ANGLE_KINDS or quat)
    return None, False


def _candidates(model, names, arrays, extras, row):
    """(magnitude, is_angle, text) of each input entry at least BIG: per array its largest such entry (in
    row `row` of 2-D arrays when given), per wrench dict its largest, per number its value."""
    out = []
    for nm, a in zip(names, arrays):
        if not isinstance(a, np.ndarray) or a.dtype.kind not in "fiu" or not a.size:
            continue
        if a.ndim == 2:
            ks = [row] if row is not None and row < a.shape[0] else range(a.shape[0])
            for k in ks:
                x = np.where(np.isfinite(a[k]), np.abs(a[k]), 0.0)
                for i in np.flatnonzero(x >= BIG):
                    j, angle = _joint_of(model, nm, a.shape[1], int(i))
                    who = f" (joint '{j}')" if j else ""
                    out.append((float(x[i]), angle, f"{nm}[{k}, {int(i)}]{who} = {a[k, i]:.3g}"))
        elif a.ndim == 1:
            x = np.where(np.isfinite(a), np.abs(a), 0.0)
            for i in np.flatnonzero(x >= BIG):
                j, angle = _joint_of(model, nm, a.shape[0], int(i))
                who = f" (joint '{j}')" if j else ""
                out.append((float(x[i]), angle, f"{nm}[{int(i)}]{who} = {a[i]:.3g}"))
    for nm, v in extras:
        if isinstance(v, Mapping):
            for link, w in v.items():
                w = np.asarray(w, dtype=float).reshape(-1)
                if w.size and np.isfinite(w).all() and np.abs(w).max() >= BIG:
                    i = int(np.argmax(np.abs(w)))
                    comp = f" ({_WRENCH[i]})" if w.size == 6 else ""
                    out.append((float(abs(w[i])), False, f"{nm}[{link!r}][{i}]{comp} = {w[i]:.3g}"))
        elif isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
            if np.isfinite(v) and abs(v) >= BIG:
                out.append((float(abs(v)), False, f"{nm} = {float(v):.3g}"))
    return out


def out_of_range(model, what, symptom, names, arrays, extras=(), row=None, angles=True):
    """The RangeError naming the input entry out of range (module docstring) behind `symptom`, or None
    when no input entry reaches BIG (then the symptom's own error stands); angles=False: joint angles are
    not blamed (the model's own gravity or payload is out of range: that error names it)."""
    found = [c for c in _candidates(model, names, arrays, extras, row) if angles or not c[1]]
    if not found:
        return None
    found.sort(key=lambda c: (not c[1], c[0]), reverse=True)   # not an angle first, then the largest
    text = found[0][2]
    more = len(found) - 1
    also = f" (and {more} more entr{'ies' if more > 1 else 'y'} at least 1e8)" if more else ""
    return RangeError(f"{what}: {text} is out of range{also}: {symptom}; {IN_RANGE}", symptom=symptom)


def symptom_of(e) -> str:
    """What a computation's failure says, short: a RangeError's own symptom, else its first 200 characters."""
    s = getattr(e, "symptom", None) or str(e)
    return s if len(s) <= 200 else s[:200] + " ..."


def magnitudes(names, arrays, extras=(), quiet=False) -> str:
    """The part of an overflow message that says which inputs are out of range (those above 1e8,
    else, unless quiet, all of them with their largest magnitudes)."""
    parts = []
    for n, a in zip(names, arrays):
        if isinstance(a, np.ndarray) and a.size:
            parts.append((float(np.max(np.abs(a))), n))
    for n, v in extras:  # wrench dicts: their largest entry; scalars: their value
        if isinstance(v, Mapping):
            vals = [np.max(np.abs(np.asarray(w, dtype=float)), initial=0.0) for w in v.values()]
            parts.append((float(max(vals, default=0.0)), n))
    big = [f"{n} (largest |{n}| = {m:.3g})" for m, n in sorted(parts, reverse=True) if m > 1e8]
    big += [f"{n} = {v!r}" for n, v in extras if not isinstance(v, Mapping)]
    if not big and not quiet:
        big = [f"{n} (largest |{n}| = {m:.3g})" for m, n in sorted(parts, reverse=True)]
    return ", ".join(big) if big or quiet else "the model's parameters"


def overflow(what: str, detail: str):
    return RangeError(f"the result of {what} overflowed (not finite) although every input is finite: "
                      f"inputs out of range: {detail}", symptom=f"{what} overflowed (not finite)")


def model_out_of_range(model, names, arrays, extras):
    """magnitudes() plus the model's own parameters that no robot has (gravity, payload mass)."""
    own = []
    if model is None:
        return magnitudes(names, arrays, extras)
    g = float(np.max(np.abs(model.gravity))) if model.gravity.size else 0.0
    if not g < 1e8:
        own.append(f"the model's gravity (|g| = {g:.3g})")
    heavy = [f"{n} ({p.mass:.3g} kg)" for n, p in model.payloads.items() if not abs(p.mass) < 1e8]
    if heavy:
        own.append(f"the payload(s) {', '.join(heavy)}")
    detail = magnitudes(names, arrays, extras, quiet=bool(own))
    return "; ".join(([detail] if detail else []) + own)


def check_finite(model, what, names, arrays):
    """InputError naming NAME[row, column] of the first non-finite entry of the 2-D arrays."""
    for nm, A in zip(names, arrays):
        if A.ndim == 2 and A.size and not np.isfinite(A).all():
            k, i = (int(x) for x in np.argwhere(~np.isfinite(A))[0])
            raise InputError(f"{what}: {nm}[{k}, {i}]{owner(model, nm, i)} is not finite ({A[k, i]})")


def blame_row(model, what, names, arrays, k, symptom):
    """The error for state k of a batch whose computation failed although its inputs are finite: the
    RangeError naming the entry of that state out of range, else `symptom` at state k."""
    e = out_of_range(model, what, f"{symptom} at state {k}", names, arrays, row=k)
    return e if e is not None else RangeError(f"{what}: state {k}: {symptom}", symptom=symptom)


def first_bad_row(out, n):
    """The first row k < n at which an array of the result (or of a tuple of them) with n rows is not
    finite; None if there is none."""
    parts = out if isinstance(out, (tuple, list)) else (out,)
    rows = []
    for a in parts:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.ndim >= 1 and a.shape[0] == n:
            bad = ~np.isfinite(a.reshape(n, -1)).all(axis=1)
            if bad.any():
                rows.append(int(np.flatnonzero(bad)[0]))
    return min(rows) if rows else None
