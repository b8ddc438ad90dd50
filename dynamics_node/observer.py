"""External joint torques and the wrench at a link: the generalised-momentum observer.

De Luca & Mattone (ICRA 2003; De Luca, Albu-Schaeffer, Haddadin, Hirzinger, IROS 2006). With the
generalised momentum p = H(q) q̇, the equations of motion H q̈ + C(q, q̇) q̇ + g(q) = τ + τ_ext and
Ḣ = C + Cᵀ (C the Christoffel factorisation, `dn.coriolis_matrix`) give ṗ = τ + Cᵀ q̇ − g + τ_ext,
without any acceleration. The residual

    r(t) = K ( p(t) − p(t0) − ∫_{t0}^{t} (τ + Cᵀ(q, q̇) q̇ − g(q) + r) ds ),   r(t0) = 0,

obeys ṙ = K (τ_ext − r): a first-order filter of the external joint torque with time constant 1/K.

Discretisation (samples k at the messages' stamps t_k, dt = t_k − t_{k−1}): over each interval the
integrand β = τ + Cᵀq̇ − g is held at the mean of its two end values (trapezoid) and ṗ at the
difference quotient (p_k − p_{k−1}) / dt, so that ṙ = K (d − r) with d constant, whose exact solution
is the update

    d   = (p_k − p_{k−1}) / dt − (β_k + β_{k−1}) / 2
    r_k = e^{−K dt} r_{k−1} + (1 − e^{−K dt}) d.

It is stable for any K dt (forward Euler is not beyond K dt = 2) and tends to the continuous
observer as dt → 0. Everything the observer sees of the robot is in the model: friction (unless the
model has it), motor-side effects and model errors appear in r like an external torque.

Floating-base models are refused: a joint-state stream carries neither the base's velocity nor its
wrench, and the observer would need both.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

import dynamics_node as dn
from .errors import InputError

WRENCH_RCOND = 1e-6   # singular values of J below this fraction of the largest count as lost rank


def _coriolis(model, q, qd):
    """C(q, q̇) with Ḣ = C + Cᵀ (a module-level hook, so that the tests can check that the observer
    fails with C in place of Cᵀ)."""
    return dn.coriolis_matrix(model, q, qd)


def _vector(x, n, what):
    try:
        v = np.asarray(x, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(f"{what}: expected {n} numbers, got {type(x).__name__}") from None
    if v.size != n:
        raise InputError(f"{what}: expected {n} values, got {v.size}")
    if not np.isfinite(v).all():
        k = int(np.flatnonzero(~np.isfinite(v))[0])
        raise InputError(f"{what}[{k}] is {v[k]}: every value must be finite")
    return v


class MomentumObserver:
    """The observer of one model; `update` once per sample, in stamp order.

    gain: K in 1/s (> 0; one value, or one per joint). timeout: a gap between stamps longer than
    this [s] restarts the observer at the new sample (r = 0 there), as does a stamp that goes back.
    A sample with the same stamp as the previous one is not integrated (update returns None).
    `last_reset` says why the latest restart happened ("first sample", "gap of ... s", ...)."""

    def __init__(self, model, gain, timeout: float = math.inf):
        if model.floating_base:
            raise InputError("momentum observer: floating-base models are not supported (a joint "
                             "state carries neither the base's velocity nor the wrench on it)")
        if model.loop_joints:
            raise InputError("momentum observer: models with loop joints are not supported (the "
                             "observer needs the dynamics of independent coordinates)")
        self.model = model
        self.nv = model.nv
        k = np.asarray(gain, dtype=float).reshape(-1)
        if k.size == 1:
            k = np.full(self.nv, float(k[0]))
        if k.size != self.nv or not (np.isfinite(k).all() and (k > 0).all()):
            raise InputError(f"momentum observer: gain must be one value or {self.nv} values, each "
                             f"finite and > 0 (1/s), got {np.asarray(gain).tolist()}")
        if not (timeout > 0):
            raise InputError(f"momentum observer: timeout must be > 0 s, got {timeout!r}")
        self.gain = k
        self.timeout = float(timeout)
        self.reset("first sample")

    def reset(self, why: str = "reset"):
        """Forget the past: the next sample starts the observer again (r = 0 there)."""
        self.r = np.zeros(self.nv)
        self._t = None
        self._p = None
        self._beta = None
        self._pending_reason = why
        self.last_reset = why
        self.samples = 0

    def update(self, stamp: float, q, qd, tau, g=None) -> Optional[np.ndarray]:
        """r (nv,) after the sample (stamp [s], q, q̇, measured joint torque τ); None for a repeated
        stamp. `g` may pass g(q) when the caller has it already (the stream computed it for the
        gravity torques), saving a pass."""
        m = self.model
        stamp = float(stamp)
        if not math.isfinite(stamp):
            raise InputError(f"momentum observer: stamp {stamp} is not finite")
        q = _vector(q, m.nq, "q")
        qd = _vector(qd, self.nv, "qd")
        tau = _vector(tau, self.nv, "tau")
        if self._t is not None:
            dt = stamp - self._t
            if dt == 0.0:
                return None
            if dt < 0.0:
                self.reset(f"stamp went back by {-dt:.6g} s")
            elif dt > self.timeout:
                self.reset(f"gap of {dt:.6g} s between stamps (timeout {self.timeout:g} s)")
        H = dn.mass_matrix(m, q)
        C = _coriolis(m, q, qd)
        g = dn.gravity(m, q) if g is None else _vector(g, self.nv, "g")
        with np.errstate(all="ignore"):
            p = H @ qd
            beta = tau + C.T @ qd - g
            if self._t is None:
                r = np.zeros(self.nv)
            else:
                dt = stamp - self._t
                d = (p - self._p) / dt - 0.5 * (beta + self._beta)
                a = np.exp(-self.gain * dt)
                r = a * self.r + (1.0 - a) * d
        if not (np.isfinite(r).all() and np.isfinite(beta).all() and np.isfinite(p).all()):
            big = max(("qd", float(np.abs(qd).max())), ("tau", float(np.abs(tau).max())), key=lambda x: x[1])
            raise InputError(f"momentum observer: the result overflowed (not finite) although every input is "
                             f"finite: inputs out of range (largest |{big[0]}| = {big[1]:.3g}); the sample is "
                             "not used")
        if self._t is None:
            self.last_reset = self._pending_reason
        self.r = r
        self._t, self._p, self._beta = stamp, p, beta
        self.samples += 1
        return self.r.copy()


class WrenchEstimate(NamedTuple):
    wrench: np.ndarray            # (6,) [fx fy fz tx ty tz] at the link origin, link axes
    rank: int                     # rank of J (6 when every wrench component is observable)
    condition_number: float       # of J (largest / smallest singular value; inf when rank < 6)
    residual: np.ndarray          # r − Jᵀ wrench: what no wrench at this link explains
    singular_values: np.ndarray


def link_jacobian(model, q, link):
    """6 x nv Jacobian of the link origin in the link's axes, rows [linear; angular]."""
    J = np.asarray(dn.jacobian(model, q, link), dtype=float)
    R = np.asarray(dn.link_pose(model, q, link), dtype=float)[:3, :3]
    out = np.empty_like(J)
    out[:3] = R.T @ J[:3]
    out[3:] = R.T @ J[3:]
    return out


def external_wrench(model, q, link, r, rcond: float = WRENCH_RCOND, J=None) -> WrenchEstimate:
    """The wrench F the environment applies at `link`'s origin (link axes, [force; torque]) that
    explains the external joint torques r = Jᵀ F best in least squares (J: the link origin's
    Jacobian in link axes). Singular values of J below rcond times the largest are treated as zero:
    the minimum-norm wrench is returned and `rank` < 6 says that some components are not observable
    (a link near the base, or a singular configuration)."""
    if link not in model.link_names:
        raise InputError(f"external_wrench: unknown link '{link}' (links: {', '.join(model.link_names)})")
    r = _vector(r, model.nv, "r")
    if J is None:
        J = link_jacobian(model, q, link)
    F, _, rank, sv = np.linalg.lstsq(J.T, r, rcond=rcond)
    cond = float(sv[0] / sv[-1]) if rank == 6 and sv.size == 6 and sv[-1] > 0 else math.inf
    return WrenchEstimate(F, int(rank), cond, r - J.T @ F, sv)
