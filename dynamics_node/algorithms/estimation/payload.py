"""Payload identification: the ten inertial parameters of a payload on one link, from measured joint
torques, by least squares on the link regressor (algorithms/estimation/regressor.py).

The torque the payload causes is TAU - ID(model without that payload) = Y_L(q, qd, qdd) pi_L for
every sample, pi_L = [m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] in the link frame (inertia
about the link origin). The samples' rows are stacked (only the joints that carry the link: the
others' rows of Y_L are zero), the columns scaled to unit norm (the parameters differ by orders of
magnitude: kg, kg m, kg m^2), and the system solved with the SVD. Singular values below
``rcond`` times the largest mean directions of pi_L that the data do not determine: the call is
refused with an InputError naming those parameters, and the combinations left undetermined, from
the right singular vectors. A result that no rigid body can have (mass <= 0, inertia about the CoM
not positive definite or breaking the triangle inequality) is returned with ``consistent=False``
and the reasons in ``warnings``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...dispatch import check_model, check_out, mat, refuse
from ...errors import InputError, RangeError
from ...layout import J_NV, J_VI
from ...packed import body_ints

_DEFAULT_RCOND = 1e-6  # singular values of the column-scaled regressor below rcond * largest: undetermined
_POOR_CONDITION = 1e3  # above this condition number the result carries a warning (poor excitation)


@dataclass(frozen=True)
class Payload:
    """An identified payload. ``center_of_mass``: link frame (m); ``inertia``: (ixx ixy ixz iyy iyz
    izz) about the centre of mass, link axes (the convention of set_payload and Model.with_payload);
    ``parameters``: the ten estimated numbers pi_L (link frame, inertia about the link origin);
    ``residual_rms``: N m, over the torques of the joints that carry the link; ``condition_number``:
    of the column-scaled regressor; ``consistent``: False when no rigid body has these numbers
    (``warnings`` says why, and warns of poor excitation)."""

    link: str
    mass: float
    center_of_mass: tuple
    inertia: tuple
    residual_rms: float
    condition_number: float
    consistent: bool
    warnings: tuple
    parameters: tuple
    samples: int


def _stack(model, Q, QD, QDD, TAU):
    Q, QD, QDD, TAU = mat(Q, "Q"), mat(QD, "QD"), mat(QDD, "QDD"), mat(TAU, "TAU")
    for name, A, n in (("Q", Q, model.nq), ("QD", QD, model.nv), ("QDD", QDD, model.nv), ("TAU", TAU, model.nv)):
        if A.shape[1] != n:
            raise InputError(f"{name} must be an N x {n} array (one sample per row), got shape {A.shape}")
        if A.shape[0] != Q.shape[0]:
            raise InputError(f"Q, QD, QDD, TAU must have the same number of rows (samples), got "
                             f"{Q.shape[0]}, {QD.shape[0]}, {QDD.shape[0]}, {TAU.shape[0]}")
        bad = np.argwhere(~np.isfinite(A))
        if bad.size:
            k, i = (int(x) for x in bad[0])
            raise InputError(f"{name}[{k}, {i}] is not finite ({A[k, i]})")
    return Q, QD, QDD, TAU


def carrying_dofs(model, body) -> np.ndarray:
    """The velocity coordinates (user order) of the joints between the root and ``body``: the rows
    of a payload's torques that can be non-zero."""
    tree = []
    J = body_ints(model.mi, model.nb)
    i = body
    while i >= 0:
        vi, nvi = int(J[i, J_VI]), int(J[i, J_NV])
        tree.extend(range(vi, vi + nvi))
        i = int(model.parent[i])
    return np.unique(model.v_src[np.array(tree, dtype=np.int64)]) if tree else np.zeros(0, np.int64)


def _describe_null(Vnull) -> str:
    """Which parameters the null space touches, and the undetermined combinations of several."""
    from .regressor import PARAM_NAMES

    weight = np.sum(Vnull ** 2, axis=0)
    names = [PARAM_NAMES[k] for k in range(len(PARAM_NAMES)) if weight[k] > 1e-6]
    combos = []
    for v in Vnull:
        v = v / np.max(np.abs(v))
        terms = [(c, PARAM_NAMES[k]) for k, c in enumerate(v) if abs(c) > 1e-3]
        if len(terms) > 1:
            combos.append(" ".join(f"{'+' if c > 0 else '-'} {abs(c):.3g} {n}" for c, n in terms).lstrip("+ "))
    text = f"the data do not determine {', '.join(names)}"
    if combos:
        text += f" (undetermined combinations: {'; '.join(combos)})"
    return text


def _physical(mass, I_c):
    """Reasons why (mass, I_c) is not a rigid body's, empty when it is."""
    why = []
    if not mass > 0:
        why.append(f"mass {mass:.6g} kg is not positive")
    ev = np.linalg.eigvalsh(I_c)
    tol = 1e-12 + 1e-9 * float(np.max(np.abs(ev)))
    if ev.min() <= -tol:
        why.append(f"the inertia about the centre of mass is not positive semi-definite (principal moments "
                   f"{', '.join(f'{x:.4g}' for x in ev)} kg m^2)")
    elif ev[0] + ev[1] < ev[2] - tol:
        why.append(f"the principal moments {', '.join(f'{x:.4g}' for x in ev)} kg m^2 break the triangle "
                   "inequality (the largest must not exceed the sum of the two others)")
    return why


def identify_payload(model, link, Q, QD, QDD, TAU, rcond=_DEFAULT_RCOND) -> Payload:
    """The payload on ``link`` that best explains the measured torques TAU (N x nv) at the states
    Q (N x nq), QD, QDD (N x nv), by linear least squares over its ten inertial parameters (module
    docstring). The model's own payload on ``link``, if any, is left out (the torques are compared
    with ID of the model without it); its other payloads stay. Refuses (InputError) data that cannot
    determine the parameters: too few samples, or a rank-deficient regressor (the message names the
    undetermined parameters and combinations)."""
    from .regressor import N_PARAMS, link_parameters_map, link_regressor
    from ..tree.rnea import inverse_dynamics_batch

    check_model(model)
    body, T = link_parameters_map(model, link)
    if not (isinstance(rcond, (int, float)) and not isinstance(rcond, bool) and 0 < rcond < 1):
        raise InputError(f"rcond must be a number in (0, 1), got {rcond!r}")
    Q, QD, QDD, TAU = _stack(model, Q, QD, QDD, TAU)
    if body < 0:
        raise InputError(f"link '{link}' is welded to the fixed base: a payload there exerts no joint torque, "
                         "so nothing can be identified from joint torques")
    rows = carrying_dofs(model, body)
    n = Q.shape[0]
    need = math.ceil(N_PARAMS / rows.size)
    if n < need:
        raise InputError(f"too few samples: {n} given, at least {need} needed ({N_PARAMS} parameters, "
                         f"{rows.size} joint torque(s) per sample bear on link '{link}'); record a longer, "
                         "well-excited trajectory")
    base = model.with_payload(link, 0.0) if link in model.payloads else model
    R = (TAU - inverse_dynamics_batch(base, Q, QD, QDD))[:, rows].ravel()
    W = np.empty((n * rows.size, N_PARAMS))
    for k in range(n):
        W[k * rows.size:(k + 1) * rows.size] = link_regressor(base, Q[k], QD[k], QDD[k], link)[rows]
    check_out((R, W), "payload identification (torques and regressor)", ("Q", "QD", "QDD", "TAU"),
              (Q, QD, QDD, TAU), model=model)
    top = np.abs(W).max(axis=0)
    top[top == 0.0] = 1.0
    scale = top * np.linalg.norm(W / top, axis=0)  # column norms that cannot overflow
    scale[scale == 0.0] = 1.0
    U, s, Vt = np.linalg.svd(W / scale, full_matrices=False)
    rank = int(np.sum(s > rcond * s[0])) if s[0] > 0 else 0
    if rank < N_PARAMS:
        refuse(model, "payload identification", RangeError(  # a sample out of range is named
            f"the samples cannot identify the payload on '{link}': the regressor has rank {rank} "
            f"of {N_PARAMS} (singular values below {rcond:g} x the largest); "
            f"{_describe_null(Vt[rank:])}. Move every joint that carries the link, the wrist "
            "included, through a range of positions, velocities and accelerations",
            symptom=f"the regressor has rank {rank} of {N_PARAMS}"), ("Q", "QD", "QDD", "TAU"), (Q, QD, QDD, TAU))
    with np.errstate(all="ignore"):  # torques near the float range: an overflow is reported below
        pi = (Vt.T @ ((U.T @ R) / s)) / scale
        residual = W @ pi - R
        big = float(np.max(np.abs(residual))) if np.isfinite(residual).all() else np.inf
        rms = big * float(np.sqrt(np.mean((residual / big) ** 2))) if 0 < big < np.inf else big  # no squares' overflow
    m, c, I_c = _about_com(pi)
    check_out((pi, rms, c, I_c), "payload identification", ("Q", "QD", "QDD", "TAU"), (Q, QD, QDD, TAU), model=model)
    return _result(link, pi, m, c, I_c, rms, float(s[0] / s[-1]), n)


def _about_com(pi):
    """(m, c, I_C) from pi_L: c = h / m (0 when m = 0) and Eq. 2.63 solved for the inertia about the
    CoM: Ibar = I_C - m c x c x."""
    m, h = float(pi[0]), pi[1:4]
    with np.errstate(all="ignore"):  # an overflow is reported by the caller, naming the inputs
        c = h / m if m != 0 else np.zeros(3)
        S = np.array([[0.0, -c[2], c[1]], [c[2], 0.0, -c[0]], [-c[1], c[0], 0.0]])
        Ibar = np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])
        return m, c, Ibar + m * S @ S


def _result(link, pi, m, c, I_c, rms, cond, n) -> Payload:
    warnings = []
    why = _physical(m, I_c)
    if m == 0:
        why.append("mass 0: the centre of mass is undefined (reported as 0)")
    warnings += [f"physically inconsistent: {w}" for w in why]
    if cond > _POOR_CONDITION:
        warnings.append(f"condition number {cond:.3g} > {_POOR_CONDITION:g}: poorly excited trajectory, "
                        "the inertia in particular may be inaccurate")
    inertia = (I_c[0, 0], I_c[0, 1], I_c[0, 2], I_c[1, 1], I_c[1, 2], I_c[2, 2])
    return Payload(link=link, mass=m, center_of_mass=tuple(float(x) for x in c),
                   inertia=tuple(float(x) for x in inertia), residual_rms=rms, condition_number=cond,
                   consistent=not why, warnings=tuple(warnings), parameters=tuple(float(x) for x in pi), samples=n)
