"""The configuration space as a Lie group: q ⊕ v (integrate), q1 ⊖ q0 (difference) and the Jacobians of
q ⊕ v, the tangent-space conventions of the derivatives (derivatives/dynamics_derivatives.py) and of linearize.

Every joint but the free one is a vector space: q ⊕ v = q + v. A free joint (the floating base, or a URDF
'floating' joint) has q = (p, quaternion x y z w), the child's pose M = (R, p) in its parent, and v =
(linear, angular) in the child frame; q ⊕ v = M exp(v) on SE(3) (as Pinocchio's free flyer), with
(Murray, Li & Sastry Eq. 2.36; Barfoot §7.1.9)

    exp(v) = (exp3(w), V(w) u),   V(w) = 1 + a(θ) w x + b(θ) (w x)^2,   a = (1 - cos θ)/θ², b = (θ - sin θ)/θ³

for v = (u, w), θ = |w|. The Jacobians (right trivialised, v's and dq's tangent at the result):

    d(q ⊕ v)/dq = Ad(exp(-v)) = [E^T, -E^T (t x);  0, E^T]   with exp(v) = (E, t)  (6 x 6, linear rows first)
    d(q ⊕ v)/dv = [E^T V, E^T d(V u)/dw;  0, Jr3(w)],   Jr3 = 1 - a w x + b (w x)^2
"""
from __future__ import annotations

import numpy as np

from ..._jit import njit, types
from ...dispatch import Route
from ..._kernel_io import F1, F2

_EPS = 1e-4   # below this |w| the coefficients use their Taylor series (error < 1e-16 relative)


def _hat(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def _coefficients(t):
    """a, b and (da/dθ)/θ, (db/dθ)/θ of V (module docstring) at θ = t."""
    if t < _EPS:
        t2 = t * t
        return (0.5 - t2 / 24.0, 1.0 / 6.0 - t2 / 120.0, -1.0 / 12.0 + t2 / 180.0, -1.0 / 60.0 + t2 / 1260.0)
    s, c = np.sin(t), np.cos(t)
    t2 = t * t   # products, not t ** k: a float power past 1e308 raises OverflowError, a product gives inf
    t4 = t2 * t2
    a, b = (1.0 - c) / t2, (t - s) / (t2 * t)
    return a, b, (t * s - 2.0 * (1.0 - c)) / t4, ((1.0 - c) * t - 3.0 * (t - s)) / (t4 * t)


def _exp3(w):
    t = float(np.linalg.norm(w))
    W = _hat(w)
    if t < _EPS:
        A, Bc = 1.0 - t * t / 6.0, 0.5 - t * t / 24.0
    else:
        A, Bc = np.sin(t) / t, (1.0 - np.cos(t)) / (t * t)
    return np.eye(3) + A * W + Bc * W @ W


def _log3(R):
    """w with exp3(w) = R (|w| <= π)."""
    c = min(1.0, max(-1.0, (np.trace(R) - 1.0) / 2.0))
    t = float(np.arccos(c))
    vee = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if t < _EPS:
        return 0.5 * (1.0 + t * t / 6.0) * vee
    if np.pi - t < 1e-6:  # near π: from the symmetric part, R = 2 n n^T - 1
        n = np.sqrt(np.maximum((np.diag(R) + 1.0) / 2.0, 0.0))
        k = int(np.argmax(n))
        n = (R[:, k] + R[k, :]) / (4.0 * n[k]) if n[k] > 0 else n
        n[k] = np.sqrt(max((R[k, k] + 1.0) / 2.0, 0.0))
        n /= np.linalg.norm(n)
        if np.dot(n, vee) < 0:
            n = -n
        return t * n
    return t / (2.0 * np.sin(t)) * vee


def _quat_to_R(x, y, z, w):
    n = np.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _R_to_quat(R):
    """(x, y, z, w) with w >= 0 (Shepperd's method: the largest diagonal term first)."""
    t = np.trace(R)
    if t > 0:
        s = 2.0 * np.sqrt(1.0 + t)
        q = np.array([(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s])
    else:
        k = int(np.argmax(np.diag(R)))
        i, j = (k + 1) % 3, (k + 2) % 3
        s = 2.0 * np.sqrt(1.0 + R[k, k] - R[i, i] - R[j, j])
        q = np.empty(4)
        q[k] = 0.25 * s
        q[i] = (R[i, k] + R[k, i]) / s
        q[j] = (R[j, k] + R[k, j]) / s
        q[3] = (R[j, i] - R[i, j]) / s
    return q if q[3] >= 0 else -q


def exp6(v):
    """(E, t) = exp(v) for v = (u, w), linear first."""
    u, w = v[:3], v[3:]
    a, b, _, _ = _coefficients(float(np.linalg.norm(w)))
    W = _hat(w)
    return _exp3(w), (np.eye(3) + a * W + b * W @ W) @ u


def free_joints(model):
    """[(q start, v start)] of the model's free joints in user coordinates (7 q, 6 v each)."""
    out = []
    for j, sq in model._q_slices.items():
        if sq.stop - sq.start == 7:
            out.append((sq.start, model._v_slices[j].start))
    return out


def _integrate(model, data, w, q, v):
    out = q.copy()
    nq_free = set()
    for qi, vi in free_joints(model):
        R = _quat_to_R(*q[qi + 3:qi + 7])
        E, t = exp6(v[vi:vi + 6])
        out[qi:qi + 3] = q[qi:qi + 3] + R @ t
        out[qi + 3:qi + 7] = _R_to_quat(R @ E)
        nq_free.update(range(qi, qi + 7))
    vec = [k for k in range(model.nq) if k not in nq_free]
    vv = [k for k in range(model.nv) if not any(vi <= k < vi + 6 for _, vi in free_joints(model))]
    out[vec] = q[vec] + v[vv]
    return 0, out


def _difference(model, data, w, q0, q1):
    out = np.empty(model.nv)
    free = free_joints(model)
    for qi, vi in free:
        R0, R1 = _quat_to_R(*q0[qi + 3:qi + 7]), _quat_to_R(*q1[qi + 3:qi + 7])
        wv = _log3(R0.T @ R1)
        a, b, _, _ = _coefficients(float(np.linalg.norm(wv)))
        W = _hat(wv)
        out[vi:vi + 3] = np.linalg.solve(np.eye(3) + a * W + b * W @ W, R0.T @ (q1[qi:qi + 3] - q0[qi:qi + 3]))
        out[vi + 3:vi + 6] = wv
    fq = {k for qi, _ in free for k in range(qi, qi + 7)}
    fv = {k for _, vi in free for k in range(vi, vi + 6)}
    vec = [k for k in range(model.nq) if k not in fq]
    vv = [k for k in range(model.nv) if k not in fv]
    out[vv] = q1[vec] - q0[vec]
    return 0, out


@njit(types.void(F1, F2, F2), cache=True)
def free_joint_jacobians(v, Jq, Jv):
    """Jq = d(q ⊕ v)/dq and Jv = d(q ⊕ v)/dv (6 x 6) of one free joint at its v = (u, w) (module docstring), in
    scalars (numpy's calls would cost more than these small products): exp(v) = (E, t), E = 1 + A W + B W^2,
    t = V u, V = 1 + a W + b W^2 (W = w x; A, B, a, b and a's, b's derivatives over θ as _coefficients)."""
    u0, u1, u2, w0, w1, w2 = v[0], v[1], v[2], v[3], v[4], v[5]
    t2 = w0 * w0 + w1 * w1 + w2 * w2
    t = t2 ** 0.5
    if t < _EPS:
        a, b, da, db = 0.5 - t2 / 24.0, 1.0 / 6.0 - t2 / 120.0, -1.0 / 12.0 + t2 / 180.0, -1.0 / 60.0 + t2 / 1260.0
        A, Bc = 1.0 - t2 / 6.0, 0.5 - t2 / 24.0
    else:
        sn, cs = np.sin(t), np.cos(t)
        t4 = t2 * t2
        a, b = (1.0 - cs) / t2, (t - sn) / (t2 * t)
        da, db = (t * sn - 2.0 * (1.0 - cs)) / t4, ((1.0 - cs) * t - 3.0 * (t - sn)) / (t4 * t)
        A, Bc = sn / t, (1.0 - cs) / t2
    W = np.empty((3, 3))
    W[0, 0], W[0, 1], W[0, 2] = 0.0, -w2, w1
    W[1, 0], W[1, 1], W[1, 2] = w2, 0.0, -w0
    W[2, 0], W[2, 1], W[2, 2] = -w1, w0, 0.0
    WW = np.empty((3, 3))
    for r in range(3):
        for c in range(3):
            WW[r, c] = W[r, 0] * W[0, c] + W[r, 1] * W[1, c] + W[r, 2] * W[2, c]
    E, V = np.empty((3, 3)), np.empty((3, 3))
    for r in range(3):
        for c in range(3):
            one = 1.0 if r == c else 0.0
            E[r, c] = one + A * W[r, c] + Bc * WW[r, c]
            V[r, c] = one + a * W[r, c] + b * WW[r, c]
            Jv[3 + r, 3 + c] = one - a * W[r, c] + b * WW[r, c]   # Jr3
            Jq[3 + r, c] = 0.0
            Jv[3 + r, c] = 0.0
    u = (u0, u1, u2)
    w = (w0, w1, w2)
    tr = (V[0, 0] * u0 + V[0, 1] * u1 + V[0, 2] * u2, V[1, 0] * u0 + V[1, 1] * u1 + V[1, 2] * u2,
          V[2, 0] * u0 + V[2, 1] * u1 + V[2, 2] * u2)
    Wu = (w1 * u2 - w2 * u1, w2 * u0 - w0 * u2, w0 * u1 - w1 * u0)
    WWu = (w1 * Wu[2] - w2 * Wu[1], w2 * Wu[0] - w0 * Wu[2], w0 * Wu[1] - w1 * Wu[0])
    wu = w0 * u0 + w1 * u1 + w2 * u2
    # d(V u)/dw = -a u x + da Wu w^T + b (w u^T + (w.u) 1 - 2 u w^T) + db WWu w^T
    uhat = ((0.0, -u2, u1), (u2, 0.0, -u0), (-u1, u0, 0.0))
    dVu = np.empty((3, 3))
    for r in range(3):
        for c in range(3):
            dVu[r, c] = (-a * uhat[r][c] + da * Wu[r] * w[c]
                         + b * (w[r] * u[c] + (wu if r == c else 0.0) - 2.0 * u[r] * w[c]) + db * WWu[r] * w[c])
    that = ((0.0, -tr[2], tr[1]), (tr[2], 0.0, -tr[0]), (-tr[1], tr[0], 0.0))
    for r in range(3):
        for c in range(3):
            Jq[r, c] = E[c, r]
            Jq[3 + r, 3 + c] = E[c, r]
            x = 0.0
            y = 0.0
            z = 0.0
            for k in range(3):   # (E^T)[r, k] = E[k, r]
                x -= E[k, r] * that[k][c]
                y += E[k, r] * V[k, c]
                z += E[k, r] * dVu[k, c]
            Jq[r, 3 + c] = x
            Jv[r, c] = y
            Jv[r, 3 + c] = z


def integrate_jacobian_blocks(model, v):
    """[(vi, Jq_b, Jv_b)]: the 6 x 6 blocks of d(q ⊕ v)/dq and d(q ⊕ v)/dv at each free joint's velocity rows and
    columns vi .. vi + 5 (free_joint_jacobians); every other joint's are 1."""
    out = []
    for _, vi in free_joints(model):
        Jq, Jv = np.empty((6, 6)), np.empty((6, 6))
        free_joint_jacobians(np.ascontiguousarray(v[vi:vi + 6], dtype=float), Jq, Jv)
        out.append((vi, Jq, Jv))
    return out


def integrate_jacobians(model, v):
    """(Jq, Jv), nv x nv: d(q ⊕ v)/dq and d(q ⊕ v)/dv in the tangent spaces (module docstring);
    identity blocks but at the free joints (integrate_jacobian_blocks)."""
    n = model.nv
    Jq, Jv = np.eye(n), np.eye(n)
    for vi, Jq_b, Jv_b in integrate_jacobian_blocks(model, v):
        Jq[vi:vi + 6, vi:vi + 6] = Jq_b
        Jv[vi:vi + 6, vi:vi + 6] = Jv_b
    return Jq, Jv


_INTEGRATE = Route("integrate", (("q", "q"), ("v", "v")), _integrate, tree=False).front
_DIFFERENCE = Route("difference", (("q0", "q"), ("q1", "q")), _difference, tree=False).front


def integrate(model, q, v):
    """q ⊕ v: the configuration reached from q along the tangent vector v (nv) in unit time. Joints but the
    free ones: q + v. A free joint (floating base): M exp(v) on SE(3), v = (linear, angular) in the joint's
    child frame (the root frame for a floating base), as Pinocchio's integrate; the result's quaternion is
    unit, with w >= 0. The derivatives' tangent space (dn.inverse_dynamics_derivatives, dn.linearize)."""
    return _INTEGRATE(model, None, q, v)


def difference(model, q0, q1):
    """q1 ⊖ q0: the tangent vector v (nv) with q0 ⊕ v = q1 (the inverse of dn.integrate; a free joint's
    rotation part is taken with |angle| <= π)."""
    return _DIFFERENCE(model, None, q0, q1)
