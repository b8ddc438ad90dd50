"""Linearised discrete dynamics for model-predictive control: A and B of one semi-implicit
(symplectic) Euler step of the forward dynamics, in the tangent space of x = (q, qd):

    qd+ = qd + dt FD(q, qd, tau)          q+ = q ⊕ (dt qd+)

    d qd+ = K dq + L dqd + dt Minv dtau,  K = dt dqdd/dq,  L = 1 + dt dqdd/dqd,  Minv = dqdd/dtau
    d q+  = Jq dq + dt Jv d qd+           (Jq, Jv: the Jacobians of ⊕, lie_group.integrate_jacobian_blocks)

    A = [Jq + dt Jv K,  dt Jv L;  K,  L]   (2nv x 2nv)      B = [dt² Jv Minv;  dt Minv]   (2nv x nv)

The deviation dq of q+ is taken as q+ ⊕ dq (the derivatives' convention), so A maps (dq, dqd) at the
state to (dq+, dqd+) at the next state. dqdd/dx from derivatives.forward_dynamics_derivatives.
"""
from __future__ import annotations

import math

import numpy as np

from ..._jit import njit, types
from ...dispatch import Route
from ...errors import InputError
from ..._kernel_io import F2, FASTMATH
from .dynamics_derivatives import each_state, forward_dynamics_derivatives
from ..tree.lie_group import integrate_jacobian_blocks

CONVENTION = ("semi-implicit Euler: qd+ = qd + dt FD(q, qd, tau), q+ = q (+) dt qd+; x = (dq, dqd) in the "
              "tangent space, dq of q (+) dq (floating base: the root's 6 velocity directions, linear then "
              "angular, in the root frame, integrated on SE(3)), then nv joint rates; A is 2nv x 2nv and B "
              "2nv x nv, row-major")


def _dt(dt):
    if isinstance(dt, bool) or not isinstance(dt, (int, float, np.integer, np.floating)):
        raise InputError(f"dt must be a real number, got {type(dt).__name__}")
    dt = float(dt)
    if not (math.isfinite(dt) and dt > 0.0):
        raise InputError(f"dt must be finite and > 0, got {dt}")
    return dt


@njit(types.void(F2, F2, F2, types.float64, F2, F2), cache=True, fastmath=FASTMATH)
def step_matrices(dq, dv, Minv, dt, A, B):
    """A and B (module docstring) with Jq = Jv = 1: K = dt dqdd/dq, L = 1 + dt dqdd/dqd, the top rows dt times
    the bottom ones (plus 1 on A's diagonal); the free joints' rows are redone in _step_matrices."""
    n = dq.shape[0]
    for i in range(n):
        for j in range(n):
            k = dt * dq[i, j]
            lv = dt * dv[i, j] + (1.0 if i == j else 0.0)
            A[n + i, j] = k
            A[n + i, n + j] = lv
            A[i, j] = dt * k + (1.0 if i == j else 0.0)
            A[i, n + j] = dt * lv
            b = dt * Minv[i, j]
            B[n + i, j] = b
            B[i, j] = dt * b


@njit(types.void(types.int64, F2, F2, types.float64, F2, F2), cache=True, fastmath=FASTMATH)
def free_joint_rows(vi, Jq_b, Jv_b, dt, A, B):
    """A free joint's 6 rows of the top half: d q+ = Jq dq + dt Jv d qd+ with its blocks Jq_b, Jv_b (rows and
    columns vi .. vi + 5), the bottom half (K, L, dt Minv) already in place."""
    n = B.shape[1]
    for r in range(6):
        for c in range(2 * n):
            t = 0.0
            for k in range(6):
                t += Jv_b[r, k] * A[n + vi + k, c]
            A[vi + r, c] = dt * t + (Jq_b[r, c - vi] if vi <= c < vi + 6 else 0.0)
        for c in range(n):
            t = 0.0
            for k in range(6):
                t += Jv_b[r, k] * B[n + vi + k, c]
            B[vi + r, c] = dt * t


def _step_matrices(model, q, qd, tau, dt):
    """A and B (module docstring). Jq and Jv are 1 but at the free joints' 6 x 6 blocks, so the top rows are
    dt times the bottom ones (plus 1 on A's diagonal) but at those blocks' rows: no dense product."""
    n = model.nv
    dq, dv, Minv = forward_dynamics_derivatives(model, q, qd, tau)
    A = np.empty((2 * n, 2 * n))
    B = np.empty((2 * n, n))
    step_matrices(dq, dv, Minv, dt, A, B)
    if model.nq != model.nv:   # free joints (7 position coordinates, 6 velocities): the floating base, ...
        from ..tree.aba import forward_dynamics

        blocks = integrate_jacobian_blocks(model, dt * (qd + dt * forward_dynamics(model, q, qd, tau)))
        for vi, Jq_b, Jv_b in blocks:
            free_joint_rows(vi, Jq_b, Jv_b, dt, A, B)
    return A, B


def _linearize(model, data, w, q, qd, tau, dt):
    return 0, _step_matrices(model, q, qd, tau, _dt(dt))


def _linearize_batch(model, data, w, Q, QD, TAU, dt):
    dt = _dt(dt)
    out = each_state(model, "batch linearize", ["Q", "QD", "TAU"], [Q, QD, TAU],
                     lambda q, qd, tau: _step_matrices(model, q, qd, tau, dt))
    n = model.nv
    N = Q.shape[0]
    A = np.array([o[0] for o in out]).reshape(N, 2 * n, 2 * n)
    return 0, (A, np.array([o[1] for o in out]).reshape(N, 2 * n, n))


_LINEARIZE = Route("linearize", (("q", "q"), ("qd", "v"), ("tau", "v")), _linearize, extras=("dt",), tree=False).front
_LINEARIZE_BATCH = Route("batch linearize", (("Q", "Q"), ("QD", "V"), ("TAU", "V")), _linearize_batch, extras=("dt",),
                         tree=False).front


def linearize(model, q, qd, tau, dt):
    """(A, B): the linearised semi-implicit Euler step x+ = f(x, tau) at x = (q, qd) (module docstring,
    CONVENTION): A = df/dx (2nv x 2nv), B = df/dtau (2nv x nv), x in the tangent space (dn.integrate,
    dn.difference); for a floating base nv counts the base's 6."""
    return _LINEARIZE(model, None, q, qd, tau, dt)


def linearize_batch(model, Q, QD, TAU, dt):
    """linearize at N states (rows of N x nq, N x nv, N x nv arrays): (A, B) as N x 2nv x 2nv and
    N x 2nv x nv. A refused state is named as 'QD[3, 2]'."""
    return _LINEARIZE_BATCH(model, None, Q, QD, TAU, dt)
