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
observer as dt → 0. Everything the observer sees of the robot is in the model: the model's joint law
(friction and offset, joint_law.py: τ − τ_f(q̇) is what accelerates the links; the armature
is in H), and what the model lacks (friction it has not, motor-side effects, model errors) appears in r
like an external torque.

Floating-base models are refused: a joint-state stream carries neither the base's velocity nor its
wrench, and the observer would need both.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

import dynamics_node as dn
from ...errors import InputError, clip

WRENCH_RCOND = 1e-6   # singular values of J below this fraction of the largest count as lost rank
                      # (the kernel resolves them to about 1e-8 of the largest: eig of J Jᵀ)


def _coriolis(model, q, qd):
    """C(q, q̇) with Ḣ = C + Cᵀ (a module-level hook, so that the tests can check that the observer
    fails with C in place of Cᵀ)."""
    return dn.coriolis_matrix(model, q, qd)


def _vector(x, n, what):
    try:
        v = np.array(x, dtype=float).reshape(-1)   # a copy: C-contiguous and writeable, the kernels' one type
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
        try:
            k = np.asarray(gain, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise InputError(f"momentum observer: gain must be one number or {self.nv} numbers (1/s), got "
                             f"{type(gain).__name__} {clip(repr(gain))}") from None
        if k.size == 1:
            k = np.full(self.nv, float(k[0]))
        if k.size != self.nv or not (np.isfinite(k).all() and (k > 0).all()):
            raise InputError(f"momentum observer: gain must be one value or {self.nv} values, each "
                             f"finite and > 0 (1/s), got {np.asarray(gain).tolist()}")
        try:
            timeout = float(timeout)
        except (TypeError, ValueError):
            raise InputError(f"momentum observer: timeout must be a number of seconds > 0, got "
                             f"{type(timeout).__name__} {clip(repr(timeout))}") from None
        if not (timeout > 0):
            raise InputError(f"momentum observer: timeout must be > 0 s, got {timeout!r}")
        self.gain = k
        self.timeout = float(timeout)
        from ...joint_law import has_friction

        self._friction = has_friction(model)  # the joint law's tau_f(qd) is taken off tau
        self.reset("first sample")

    def reset(self, why: str = "reset"):
        """Forget the past: the next sample starts the observer again (r = 0 there)."""
        self.r = np.zeros(self.nv)
        self._t = None
        self._pending_reason = why
        self.last_reset = why
        self.samples = 0
        self._p, self._beta = np.zeros(self.nv), np.zeros(self.nv)
        self._out = (np.zeros(self.nv), np.zeros(self.nv), np.zeros(self.nv))

    def update(self, stamp: float, q, qd, tau, g=None) -> Optional[np.ndarray]:
        """r (nv,) after the sample (stamp [s], q, q̇, measured joint torque τ); None for a repeated
        stamp. `g` may pass g(q) when the caller has it already (the stream computed it for the
        gravity torques), saving a pass. Stamps are floats: pass them relative to a recent origin
        (the stream uses the first sample's), not as seconds since 1970, whose float spacing of
        0.2 µs would be a visible error in (p_k − p_{k−1}) / dt at 1 kHz."""
        m, nv = self.model, self.nv
        try:
            stamp = float(stamp)
        except (TypeError, ValueError):
            raise InputError(f"momentum observer: stamp must be a number of seconds, got {type(stamp).__name__} "
                             f"{clip(repr(stamp))}") from None
        if not math.isfinite(stamp):
            raise InputError(f"momentum observer: stamp {stamp} is not finite")
        q, qd, tau = _arg(q, m.nq, "q"), _arg(qd, nv, "qd"), _arg(tau, nv, "tau")
        if self._t is not None:
            dt = stamp - self._t
            if dt == 0.0:
                return None
            if dt < 0.0:
                self.reset(f"stamp went back by {-dt:.6g} s")
            elif dt > self.timeout:
                self.reset(f"gap of {dt:.6g} s between stamps (timeout {self.timeout:g} s)")
        if self._friction:  # the drive's torque that friction takes: not external
            tau = tau - dn.joint_friction(m, qd)
        H = dn.mass_matrix(m, q)
        C = _coriolis(m, q, qd)
        g = dn.gravity(m, q) if g is None else _arg(g, nv, "g")
        first = self._t is None
        p, beta, r = self._out
        ok = _kernel(_update_kernel)(np.ascontiguousarray(H), np.ascontiguousarray(C), qd, tau, g, self.gain,
                                     0.0 if first else stamp - self._t, first, self._p, self._beta, self.r,
                                     p, beta, r)
        if not ok:
            for name, v in (("q", q), ("qd", qd), ("tau", tau), ("g", g)):
                _vector(v, v.size, name)   # names a non-finite input, if any
            big = max(("qd", float(np.abs(qd).max())), ("tau", float(np.abs(tau).max())), key=lambda x: x[1])
            raise InputError(f"momentum observer: the result overflowed (not finite) although every input is "
                             f"finite: inputs out of range (largest |{big[0]}| = {big[1]:.3g}); the sample is "
                             "not used")
        if first:
            self.last_reset = self._pending_reason
        self._out = (self._p, self._beta, self.r)   # the previous sample's arrays are the next outputs
        self._t, self._p, self._beta, self.r = stamp, p, beta, r
        self.samples += 1
        return r.copy()


def _update_kernel(H, C, qd, tau, g, gain, dt, first, p0, beta0, r0, p, beta, r):
    """One sample (see the module docstring): p = H q̇, β = τ + Cᵀ q̇ − g, and unless first
    d = (p − p0)/dt − (β + β0)/2, r = d + e^{−K dt} (r0 − d). False when anything is not finite."""
    n = qd.shape[0]
    ok = True
    for i in range(n):
        acc_p = 0.0
        acc_c = 0.0
        for j in range(n):
            acc_p += H[i, j] * qd[j]
            acc_c += C[j, i] * qd[j]
        p[i] = acc_p
        beta[i] = tau[i] + acc_c - g[i]
        if first:
            r[i] = 0.0
        else:
            d = (acc_p - p0[i]) / dt - 0.5 * (beta[i] + beta0[i])
            r[i] = d + math.exp(-gain[i] * dt) * (r0[i] - d)
        if not (math.isfinite(p[i]) and math.isfinite(beta[i]) and math.isfinite(r[i])):
            ok = False
    return ok


_KERNELS: dict = {}


def _kernel(fn):
    """fn compiled by numba (cached on disk; loaded once per process), or fn itself without numba."""
    k = _KERNELS.get(fn)
    if k is None:
        try:
            import numba
            k = numba.njit(cache=True)(fn)
        except ImportError:  # pragma: no cover - numba is a dependency; plain Python still answers
            k = fn
        _KERNELS[fn] = k
    return k


def _arg(x, n, what):
    """x as a float64 vector of n values (no copy when it is one already, contiguous and writeable);
    finiteness is checked on the result (a non-finite input makes it non-finite, and is then named)."""
    if (type(x) is np.ndarray and x.dtype == np.float64 and x.shape == (n,) and x.flags.c_contiguous
            and x.flags.writeable):
        return x
    return _vector(x, n, what)


class WrenchEstimate(NamedTuple):
    wrench: np.ndarray            # (6,) [fx fy fz tx ty tz] at the link origin, link axes
    rank: int                     # rank of J (6 when every wrench component is observable)
    condition_number: float       # of J (largest / smallest singular value; inf when rank < 6)
    residual: np.ndarray          # r − Jᵀ wrench: what no wrench at this link explains
    singular_values: np.ndarray


def link_jacobian(model, q, link):
    """6 x nv Jacobian of the link origin in the link's axes, rows [linear; angular]."""
    return dn.jacobian(model, q, link, axes="link")


def _wrench_kernel(J, r, rcond):
    """F = J⁺ᵀ r through the eigen-decomposition of A = J Jᵀ (6 x 6, cyclic Jacobi rotations, Golub &
    Van Loan §8.5): singular values sv = sqrt(eig A), descending; directions with sv below rcond
    times the largest are left out (the minimum-norm solution). Returns the rank. Small fixed sizes:
    numba makes it a microsecond, where numpy's linalg wrappers cost tens."""
    n, nv = J.shape
    A, V, F, sv, res = np.empty((n, n)), np.empty((n, n)), np.zeros(n), np.empty(n), np.empty(nv)
    for k in range(nv):
        if not math.isfinite(r[k]):
            return -1, F, sv, res
    for i in range(n):
        for j in range(n):
            acc = 0.0
            for k in range(nv):
                acc += J[i, k] * J[j, k]
            A[i, j] = acc
            V[i, j] = 1.0 if i == j else 0.0
    scale = 0.0
    for i in range(n):
        scale += A[i, i]
    for _sweep in range(60):
        off = 0.0
        for p in range(n - 1):
            for q in range(p + 1, n):
                off += A[p, q] * A[p, q]
        if off <= 1e-28 * scale * scale:   # off-diagonal below 1e-14 of the trace: converged
            break
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = A[p, q]
                if apq == 0.0:
                    continue
                theta = (A[q, q] - A[p, p]) / (2.0 * apq)
                t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                if theta < 0.0:
                    t = -t
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for k in range(n):
                    akp, akq = A[k, p], A[k, q]
                    A[k, p] = c * akp - s * akq
                    A[k, q] = s * akp + c * akq
                for k in range(n):
                    apk, aqk = A[p, k], A[q, k]
                    A[p, k] = c * apk - s * aqk
                    A[q, k] = s * apk + c * aqk
                for k in range(n):
                    vkp, vkq = V[k, p], V[k, q]
                    V[k, p] = c * vkp - s * vkq
                    V[k, q] = s * vkp + c * vkq
    smax = 0.0
    for i in range(n):
        sv[i] = math.sqrt(max(A[i, i], 0.0))
        smax = max(smax, sv[i])
    rank = 0
    for i in range(n):
        if sv[i] <= rcond * smax or sv[i] == 0.0:
            continue
        rank += 1
        proj = 0.0   # v_iᵀ J r / λ_i
        for a in range(n):
            jr = 0.0
            for k in range(nv):
                jr += J[a, k] * r[k]
            proj += V[a, i] * jr
        proj /= sv[i] * sv[i]
        for a in range(n):
            F[a] += V[a, i] * proj
    for k in range(nv):   # the residual r − Jᵀ F
        acc = r[k]
        for a in range(n):
            acc -= J[a, k] * F[a]
        res[k] = acc
    return rank, F, np.sort(sv)[::-1], res


def _wrench_solve(J, r, rcond):
    rank, F, sv, res = _kernel(_wrench_kernel)(J, r, rcond)
    return F, int(rank), sv, res


def external_wrench(model, q, link, r, rcond: float = WRENCH_RCOND, J=None) -> WrenchEstimate:
    """The wrench F the environment applies at `link`'s origin (link axes, [force; torque]) that
    explains the external joint torques r = Jᵀ F best in least squares (J: the link origin's
    Jacobian in link axes). Singular values of J below rcond times the largest are treated as zero:
    the minimum-norm wrench is returned and `rank` < 6 says that some components are not observable
    (a link near the base, or a singular configuration)."""
    if J is None:
        J = link_jacobian(model, q, link)    # names an unknown link
    elif link not in model.link_names:
        model.link_index(link)  # raises naming it
    r = _arg(r, model.nv, "r")
    J = np.require(J, dtype=float, requirements=("C", "W"))
    F, rank, sv, res = _wrench_solve(J, r, float(rcond))
    if rank < 0:
        _vector(r, model.nv, "r")  # raises naming the non-finite value
    cond = float(sv[0] / sv[-1]) if rank == 6 else math.inf
    return WrenchEstimate(F, rank, cond, res, sv)
