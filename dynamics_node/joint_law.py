"""The joint law: the torque a joint's drive spends on friction, and its derivative, in one
place. Every kernel that adds the model's joint terms (rnea.py, rnea_batch.py, aba.py, hybrid.py
through aba's kernel) calls ``friction_torque``; the derivatives call ``friction_slope``.

For one degree of freedom with velocity v (rad/s or m/s) the measured effort is

    tau = ID(q, qd, qdd) + Ia qdd + tau_f(v)
    tau_f(v) = b v + (fc + fs exp(-(v / vs)^2)) s(v) + o
    s(v) = tanh(v / vc) if vc > 0, sign(v) if vc = 0 (sign(0) = 0)

with Ia the armature (Featherstone Example 9.5, Eq. 9.28: on H's diagonal, so forward dynamics
solves (H + diag(Ia)) qdd = tau - C - g - tau_f(qd)), b viscous friction, fc Coulomb friction, vc the
velocity scale of smooth Coulomb friction, fs and vs the Stribeck term (vs = 0: no Stribeck term)
and o a constant offset. Only the URDF: b and fc from <dynamics damping friction>, the rest 0. The
Stribeck term is the Gaussian form of Armstrong-Helouvry, Dupont & Canudas de Wit, "A survey of
models, analysis tools and compensation methods for the control of machines with friction"
(Automatica 1994, Eq. 4); the smooth Coulomb term the tanh of Makkar et al. (IEEE TAC 2007).

Signs: Ia, b, fc, vc, vs >= 0; fs and o of any sign (fs < 0: friction that grows from fc at rest
to fc + |fs| at speed, which real harmonic drives show; the sum fc + fs must stay >= 0 so that the
friction at low speed never drives the joint: refused otherwise).

``JointFriction`` holds the law's coefficients per joint for ``dn.load_model(..., friction=...)``;
``joint_friction(model, qd)`` evaluates tau_f and ``joint_friction_slope(model, qd)`` d tau_f / d qd
(diagonal: one joint's friction depends on its own velocity only).

The law's coefficients are checked here, once, for every reader: ``coefficient_problem`` (a number, finite,
the sign the law needs, and with ``bounded`` the node's RANGES) and ``rest_problem`` (fc + fs >= 0), which
``apply`` (the loader's JointFriction) and ``law_lists`` (the node's friction_model.* parameters and the
parameter file dynamics_identify writes: ros/params/friction_params.py, identify/law_out.py) word the same way.
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import njit
from .packed import dof_f, dof_floats
from .layout import (D_COULOMB, D_COULOMB_VELOCITY, D_DAMPING, D_OFFSET, D_STRIBECK, D_STRIBECK_VELOCITY,
                      LAW_COLUMNS)

LAYOUT = dict(LAW_COLUMNS)   # field -> its column of the packed model's dofs (layout.MODEL_DOF_F)
FIELDS = tuple(LAYOUT)       # viscous, coulomb, coulomb_velocity, stribeck, stribeck_velocity, offset
UNITS = {"viscous": "N m s/rad (N s/m)", "coulomb": "N m (N)", "coulomb_velocity": "rad/s (m/s); 0 = sign(qd)",
         "stribeck": "N m (N)", "stribeck_velocity": "rad/s (m/s); 0 = no Stribeck term", "offset": "N m (N)"}
NONNEGATIVE = ("viscous", "coulomb", "coulomb_velocity", "stribeck_velocity")
RANGES = {  # the node's range of each entry (its parameters, the parameter file), SI per joint type
    "viscous": (0.0, 1.0e6), "coulomb": (0.0, 1.0e6), "coulomb_velocity": (0.0, 100.0),
    "stribeck": (-1.0e6, 1.0e6), "stribeck_velocity": (0.0, 100.0), "offset": (-1.0e6, 1.0e6),
}


@njit(cache=True, inline="always")
def friction_torque(mf, dd, v):
    """tau_f(v) of the degree of freedom whose floats start at mf[dd] (module docstring)."""
    t = mf[dd + D_DAMPING] * v + mf[dd + D_OFFSET]
    fc = mf[dd + D_COULOMB]
    fs = mf[dd + D_STRIBECK]
    if fc != 0.0 or fs != 0.0:
        vc = mf[dd + D_COULOMB_VELOCITY]
        if vc > 0.0:
            s = math.tanh(v / vc)
        else:
            s = 1.0 if v > 0.0 else (-1.0 if v < 0.0 else 0.0)
        g = fc
        vs = mf[dd + D_STRIBECK_VELOCITY]
        if fs != 0.0 and vs > 0.0:
            x = v / vs
            g += fs * math.exp(-x * x)
        t += g * s
    return t


@njit(cache=True, inline="always")
def friction_slope(mf, dd, v):
    """d tau_f / d v (module docstring); with vc = 0 the sign's derivative is taken as 0 (v != 0) and
    the Dirac at v = 0 is left out."""
    d = mf[dd + D_DAMPING]
    fc = mf[dd + D_COULOMB]
    fs = mf[dd + D_STRIBECK]
    if fc != 0.0 or fs != 0.0:
        vc = mf[dd + D_COULOMB_VELOCITY]
        vs = mf[dd + D_STRIBECK_VELOCITY]
        if vc > 0.0:
            th = math.tanh(v / vc)
            s, ds = th, (1.0 - th * th) / vc
        else:
            s, ds = (1.0 if v > 0.0 else (-1.0 if v < 0.0 else 0.0)), 0.0
        g, dg = fc, 0.0
        if fs != 0.0 and vs > 0.0:
            x = v / vs
            e = fs * math.exp(-x * x)
            g += e
            dg = -2.0 * x / vs * e
        d += dg * s + g * ds
    return d


@njit(cache=True)
def _law_kernel(mf, nb, QD, out, slope):
    for k in range(QD.shape[0]):
        for dof in range(QD.shape[1]):
            dd = dof_f(nb, dof)
            out[k, dof] = friction_slope(mf, dd, QD[k, dof]) if slope else friction_torque(mf, dd, QD[k, dof])


def coefficient_problem(field, x, bounded=False):
    """Why x cannot be the law's ``field`` (a phrase that follows the coefficient's name), or None: not a
    number, not finite, negative where the law needs >= 0, or (``bounded``) outside the node's RANGES."""
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating, np.integer)):
        return f"must be a number, got {type(x).__name__} {repr(x)[:60]}"
    x = float(x)
    if not math.isfinite(x):
        return f"is {x}: it must be a finite number"
    lo, hi = RANGES[field] if bounded else (0.0 if field in NONNEGATIVE else -math.inf, math.inf)
    if x < lo or x > hi:
        why = f"negative: it must be >= 0 ({UNITS[field]})" if x < 0 <= lo else UNITS[field]
        return f"is {x:g}, outside [{lo:g}, {hi:g}]: {why}"
    return None


def rest_problem(coulomb, stribeck):
    """Why fc + fs < 0 cannot be, or None (module docstring: the friction at rest never drives the joint)."""
    if coulomb + stribeck < -1e-12 * max(abs(stribeck), 1.0):
        return f"coulomb + stribeck = {coulomb + stribeck:g} < 0: the friction at rest would drive the joint"
    return None


def law_lists(joints, lists, error, where=""):
    """{field: [value per joint]} from the node's form of the law (friction_model.joints and one list per field,
    each empty (zeros) or one value per joint), checked against the node's RANGES; ``error(message)`` (the
    caller's exception class) names the entry, after ``where``."""
    names = []
    for k, j in enumerate(joints):
        if not isinstance(j, str) or not j:
            raise error(f"{where}friction_model.joints[{k}]: {repr(j)[:80]} is not a joint name")
        if j in names:
            raise error(f"{where}friction_model.joints[{k}]: '{j[:80]}' is listed twice")
        names.append(j)
    law = {}
    for f in FIELDS:
        vals = lists.get(f)
        vals = [] if vals is None else vals
        if not isinstance(vals, (list, tuple)):
            raise error(f"{where}friction_model.{f} must be a list of numbers (one per friction_model.joints entry), "
                        f"got {repr(vals)[:80]}")
        if vals and len(vals) != len(names):
            raise error(f"{where}friction_model.{f}: {len(vals)} values for {len(names)} friction_model.joints (one "
                        "per joint, in that order; empty = zeros)")
        for k, x in enumerate(vals):
            why = coefficient_problem(f, x, bounded=True)
            if why:
                raise error(f"{where}friction_model.{f}[{k}] ({names[k][:80]}) {why}")
        law[f] = [float(x) for x in vals] or [0.0] * len(names)
    for k, j in enumerate(names):
        why = rest_problem(law["coulomb"][k], law["stribeck"][k])
        if why:
            raise error(f"{where}friction_model.stribeck[{k}] ({j[:80]}): {why}")
    return law


class JointFriction:
    """The law's coefficients per joint (module docstring) for ``dn.load_model(urdf, friction=...)``.
    Each field is None (the URDF's <dynamics> for viscous and coulomb, 0 for the rest), one number for
    every joint, or {joint name: number} (joints not named: as None). Units: SI per joint type (N m
    and rad for revolute joints, N and m for prismatic ones)."""

    __slots__ = FIELDS

    def __init__(self, viscous=None, coulomb=None, coulomb_velocity=None, stribeck=None, stribeck_velocity=None,
                 offset=None):
        for name, val in zip(FIELDS, (viscous, coulomb, coulomb_velocity, stribeck, stribeck_velocity, offset)):
            object.__setattr__(self, name, dict(val) if isinstance(val, dict) else val)

    def __setattr__(self, *_):
        raise AttributeError("JointFriction is immutable")

    def __repr__(self):
        return "JointFriction(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in FIELDS
                                            if getattr(self, n) is not None) + ")"


def apply(friction, names, dofs, urdf_values, src):
    """The per-dof arrays {field: (nvt,)} of the law for load_model. ``names``: the model's tree joints
    with friction; ``dofs[name]``: their tree dofs (a floating base's are not listed); ``urdf_values``:
    {field: (nvt,)} from <dynamics> (viscous and coulomb). ModelError naming the joint and field for a
    value that is not a finite number, a negative one where the law needs >= 0, an unknown joint, or
    fc + fs < 0."""
    from .errors import ModelError, clip

    n = len(urdf_values["viscous"])
    out = {f: np.array(urdf_values[f], dtype=float) if f in urdf_values else np.zeros(n) for f in FIELDS}
    if friction is True or friction is False or friction is None:
        return out
    if not isinstance(friction, JointFriction):
        raise ModelError(f"{src}: option friction must be True, False or a dn.JointFriction, got "
                         f"{type(friction).__name__} {clip(repr(friction), 80)}")
    for field in FIELDS:
        val = getattr(friction, field)
        if val is None:
            continue
        items = val.items() if isinstance(val, dict) else [(n, val) for n in names]
        for n, x in items:
            if not isinstance(n, str) or n not in dofs:
                raise ModelError(f"{src}: option friction.{field} given for unknown joint {clip(repr(n), 80)} "
                                 f"(the model's joints: {clip(', '.join(names), 200)})")
            why = coefficient_problem(field, x)
            if why:
                raise ModelError(f"{src}: option friction.{field} of joint '{clip(n, 80)}' {why}")
            x = float(x)
            out[field][dofs[n]] = x
    for n in names:
        for d in dofs[n]:
            why = rest_problem(out["coulomb"][d], out["stribeck"][d])
            if why:
                raise ModelError(f"{src}: option friction of joint '{clip(n, 80)}': {why}")
    return out


def has_friction(model) -> bool:
    """True when some coefficient of the law (joint_law.py) is not zero."""
    D = dof_floats(model._kmf, model.nb, model.nvt)
    return bool(np.any(D[:, [LAYOUT[f] for f in FIELDS]] != 0.0))


def _evaluate(model, qd, slope):
    from .dispatch import check_model, check_out, mat, vec

    check_model(model)
    try:
        single = np.ndim(qd) <= 1
    except Exception:  # noqa: BLE001 - ragged nesting: vec names it
        single = True
    QD = vec(qd, "qd")[None, :] if single else mat(qd, "qd")
    if QD.shape[1] != model.nv:
        from .errors import InputError

        raise InputError(f"qd must have {model.nv} entries per state (the model's velocity coordinates), got "
                         f"{QD.shape[1]}")
    bad = np.argwhere(~np.isfinite(QD))
    if bad.size:
        from .errors import InputError

        k, i = (int(x) for x in bad[0])
        raise InputError(f"qd{'' if single else f'[{k}]'}[{i}] is not finite ({QD[k, i]})")
    QDt = QD[:, model.v_src] * model.v_mul if model.has_mimic else QD  # tree dofs (§9.6)
    T = np.empty_like(QDt)
    _law_kernel(model._kmf, model.nb, np.ascontiguousarray(QDt), T, slope)
    if model.has_mimic:  # tau = G^T tau_tree; d/dqd = G^T diag(slope) G, returned as its diagonal per joint
        T = np.einsum("tv,nt->nv", model.G, T * (model.v_mul if slope else 1.0))
    check_out((T,), "joint friction", ("qd",), (QD,))
    return T[0] if single else T


def joint_friction(model, qd) -> np.ndarray:
    """tau_f(qd) of every joint (nv, or N x nv for N states), the law of the module docstring with the
    model's coefficients (zero unless the model was loaded with friction on). The part of
    ``dn.inverse_dynamics`` that depends on qd alone through the joints' drives."""
    return _evaluate(model, qd, False)


def joint_friction_slope(model, qd) -> np.ndarray:
    """d tau_f / d qd (nv, or N x nv): the diagonal of the friction's Jacobian (module docstring)."""
    return _evaluate(model, qd, True)
