"""Refusals of the batch functions (rows of states: N x nq, N x nv arrays) that name the sample and the
field, as 'QD[3, 2] (joint 'elbow')': the service layer maps that to the request's own field
(points[3].velocities[2]), as the single-state functions name q[2] or qd[2] (issue 29 §1).

Used by dispatch.Route for every route with an input of kind 'Q' or 'V', before the kernel (the first
non-finite entry) and after it (a finite input whose result is not finite: the largest entry above 1e8
of the first state whose result is not finite), and by algorithms.derivatives.each_state for the batch
forms that run a single-state function per state.
"""
from __future__ import annotations

import numpy as np

from .errors import InputError

BIG = 1e8   # magnitudes above this are 'out of range' (dispatch.magnitudes)


def owner(model, name, i):
    """' (joint 'j')' for column i of a Q-like (q slices) or V-like (v slices) array, else ''."""
    slices = model._q_slices if name.upper() == "Q" else model._v_slices
    for j, sl in slices.items():
        if sl.start <= i < sl.stop:
            return f" (joint '{j}')"
    return ""


def check_finite(model, what, names, arrays):
    """InputError naming NAME[row, column] of the first non-finite entry of the 2-D arrays."""
    for nm, A in zip(names, arrays):
        if A.ndim == 2 and A.size and not np.isfinite(A).all():
            k, i = (int(x) for x in np.argwhere(~np.isfinite(A))[0])
            raise InputError(f"{what}: {nm}[{k}, {i}]{owner(model, nm, i)} is not finite ({A[k, i]})")


def blame_row(model, what, names, arrays, k, detail=""):
    """The message for state k of a batch whose result is not finite although its inputs are."""
    best = None
    for nm, A in zip(names, arrays):
        if A.ndim != 2 or not A.shape[1]:
            continue
        i = int(np.argmax(np.abs(A[k])))
        if abs(A[k, i]) > BIG and (best is None or abs(A[k, i]) > best[0]):
            best = (abs(A[k, i]), nm, i, A[k, i])
    head = (f"the result of {what} overflowed (not finite) at state {k} although every input is finite: "
            "inputs out of range: ")
    if best is None:
        return head + (detail or "the model's parameters")
    _, nm, i, x = best
    return head + f"{nm}[{k}, {i}]{owner(model, nm, i)} = {x:.3g}"


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
