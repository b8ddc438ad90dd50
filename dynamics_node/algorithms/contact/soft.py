"""Soft contact with Coulomb friction (Featherstone §11.8, Eqs. 11.73-11.79), and a simulation step.

Each dn.Contact is a point P of a link against the plane through ``surface_point`` with normal n
(world). The surface is a massless spring-damper (stiffness K, damping D per contact, the same in the
normal and the two tangential directions), so the contact forces follow from positions, velocities
and the surface's own state; any forward-dynamics algorithm then takes them as known forces.

Per contact, in its axes [t1 t2 n] (dn.Contact.frame): p = n . (P - surface_point) (the signed
distance, negative when P is below the surface), pdot = n . v_P, v = [t1 t2]^T v_P, and the surface
state s = (x1, x2, z): its tangential and normal displacements (zero = undeformed).

    in contact (p <= z):  f_n = max(0, -K p - D pdot)                          (Eq. 11.75, z = p)
                          zdot = pdot if f_n > 0, else -K p / D                  (Eq. 11.76)
                          f_stick = -K x - D v                                   (Eq. 11.78)
                          f_t = f_stick if |f_stick| <= mu f_n, else mu f_n f_stick/|f_stick|
                                (Eq. 11.79 on the exact circular cone)
                          xdot = -(K x + f_t) / D                                (Eq. 11.77; = v sticking)
    apart (p > z):        f = 0, zdot = -K z / D, xdot = -K x / D                (the surface recovers)

dn.simulate_step integrates one step of length dt with the same law made implicit, so that 1 kHz is
stable whatever the stiffness, damping and the effective mass at a contact (an explicit damper is
unstable once dt D exceeds about twice the effective mass, which a light link reaches): the spring
and damper are taken at the end of the step (backward Euler), f = -K (y + dt v+) - D v+ with y =
(x1, x2, p) and v+ = v + dt (b + A f) the contact points' velocities after the step (A = T^T H^-1 T,
b their accelerations without contact, forward_dynamics.py), and the max of Eq. 11.75 and the cone of
Eq. 11.79 on top. That is the contact problem of ncp.py with A + 1/(dt (D + dt K)) on the
diagonal (positive definite) and v/dt + b + K y / (dt (D + dt K)) for b: SEP where f_n would be
negative, STICK inside the cone, SLIP on its edge (the book's clipping). Then qdd = qdd0 + H^-1 T f,
qd and q by semi-implicit Euler (a free joint's quaternion by the exponential map of its body
angular velocity), z = p at the new configuration while pressed (Featherstone's note below Eq.
11.76; a surface lagging the point by a step makes the contact chatter), z recovering exactly while
apart, x following the point while it sticks and Eq. 11.77 by backward Euler while it slips. The
defaults (K = 1e4 N/m, D = 100 N s/m): a 20 kg robot sinks about 2 cm; backward Euler damps a little
more than the book's continuous law (by dt K in the damping). A contact is found up to |v| dt inside
the surface, so a step can add at most about 1/2 K (v dt)^2 of spring energy per contact as it lands.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..._jit import njit, types
from ...layout import H_NB, W_PW, W_PW_N, W_RW, W_RW_N
from ..._kernel_io import F1, I1
from ..tree.jacobians import ROWS
from ..tree.kinematics import jacobian_kernel
from ..tree.ltdl import dl_solve


class SoftContactResult(NamedTuple):
    """forces (k x 3, world: the surface on the robot), tau (nv: sum J_i^T f_i), distance (k: p, m,
    negative = penetration), state_rate (k x 3: d/dt of the surface state (x1, x2, z)), touching (k)."""
    forces: np.ndarray
    tau: np.ndarray
    distance: np.ndarray
    state_rate: np.ndarray
    touching: np.ndarray


class SimulationStep(NamedTuple):
    """simulate_step: q, qd after the step, the surface state (k x 3) after it, and the contact
    forces (k x 3, world) and qdd used in it; limit_tau (nv): the joint limits' generalized force."""
    q: np.ndarray
    qd: np.ndarray
    state: np.ndarray
    forces: np.ndarray
    qdd: np.ndarray
    limit_tau: np.ndarray


@njit(types.int64(I1, F1, F1, F1, I1, F1, F1, F1, F1, F1), cache=True)
def points_kernel(mi, mf, q, qd, cb, cp, pos, vel, Jt, w):
    """World position and velocity of each contact point (pos, vel: 3k) and the rows of its linear
    Jacobian (Jt: 3k x nvt flat)."""
    nb = mi[H_NB]
    k = cb.shape[0]
    nvt = qd.shape[0]
    J = np.empty(ROWS * nvt)
    for j in range(k):
        st = jacobian_kernel(mi, mf, q, cb[j], cp[3 * j:3 * j + 3], J, w)
        if st != 0:
            return st
        R = W_RW * nb + W_RW_N * cb[j]
        p = W_PW * nb + W_PW_N * cb[j]
        for r in range(3):
            pos[3 * j + r] = (w[p + r] + w[R + 3 * r] * cp[3 * j] + w[R + 3 * r + 1] * cp[3 * j + 1]
                              + w[R + 3 * r + 2] * cp[3 * j + 2])
            s = 0.0
            for d in range(nvt):
                x = J[r * nvt + d]  # rows R_VX, R_VY, R_VZ = 0, 1, 2: the linear ones
                Jt[(3 * j + r) * nvt + d] = x
                s += x * qd[d]
            vel[3 * j + r] = s
    return 0


def soft_forces(pos, vel, packed, state):
    """The book's equations of the module docstring for every contact: (f world (k x 3), distance,
    state rate (k x 3), touching)."""
    k = packed.body.shape[0]
    F = np.zeros((k, 3))
    dist = np.empty(k)
    rate = np.empty((k, 3))
    touching = np.zeros(k, dtype=bool)
    for j, c in enumerate(packed.contacts):
        R = c.frame
        P = pos[3 * j:3 * j + 3]
        vl = R.T @ vel[3 * j:3 * j + 3]
        p = float(c.normal @ (P - c.surface_point))
        K, D, mu = c.stiffness, c.damping, c.friction
        x1, x2, z = state[j]
        dist[j] = p
        if p <= z:
            touching[j] = True
            fn = max(0.0, -K * p - D * vl[2])  # Eq. 11.75
            rate[j, 2] = vl[2] if fn > 0.0 else -K * p / D  # Eq. 11.76
            s0, s1 = -K * x1 - D * vl[0], -K * x2 - D * vl[1]  # Eq. 11.78
            ns = math.hypot(s0, s1)
            lim = mu * fn
            if ns > lim:  # Eq. 11.79 on the circular cone
                s0, s1 = (s0 * lim / ns, s1 * lim / ns) if ns > 0.0 else (0.0, 0.0)
            rate[j, 0] = -(K * x1 + s0) / D  # Eq. 11.77
            rate[j, 1] = -(K * x2 + s1) / D
            F[j] = R @ np.array([s0, s1, fn])
        else:
            rate[j] = -K / D * np.array([x1, x2, z])
    return F, dist, rate, touching


def _state_arg(state, k):
    from ...dispatch import mat
    from ...errors import InputError

    if state is None:
        return np.zeros((k, 3))
    s = mat(state, "state")
    if s.shape != (k, 3):
        raise InputError(f"state must be a {k} x 3 array (x1 x2 z of each contact's surface), got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise InputError("state is not finite (NaN or inf)")
    return s


def _points(model, q, qd, packed, w):
    from .checks import _raise

    k = packed.body.shape[0]
    pos, vel = np.empty(3 * k), np.empty(3 * k)
    Jt = np.empty(3 * k * model.nvt)
    qt, qdt = q, qd
    if model.has_mimic:
        from ...dispatch import to_tree

        qt, qdt = to_tree(model, q, "q"), to_tree(model, qd, "v")
    st = points_kernel(model._kmi, model._kmf, qt, qdt, packed.body, packed.point, pos, vel, Jt, w)
    if st:
        _raise(model, st, "the soft contact forces", ("q", "qd"), (q, qd))
    J = Jt.reshape(3 * k, model.nvt)
    return pos, vel, (J @ model.G if model.has_mimic else J)


def soft_contact_forces(model, q, qd, contacts, state=None):
    """Contact forces of soft surfaces (module docstring, Featherstone Eqs. 11.73-11.79).

    state: k x 3 surface displacements (x1 x2 z per contact, its axes), None = undeformed.
    Returns SoftContactResult(forces, tau, distance, state_rate, touching)."""
    from ...dispatch import check_out
    from .checks import _check_common

    q, qd, packed = _check_common(model, q, qd, contacts)
    k = packed.body.shape[0]
    s = _state_arg(state, k)
    pos, vel, J = _points(model, q, qd, packed, np.empty(model.work_size))
    F, dist, rate, touching = soft_forces(pos, vel, packed, s)
    tau = J.T @ F.reshape(-1) if k else np.zeros(model.nv)
    out = SoftContactResult(F, tau, dist, rate, touching)
    check_out(out[:4], "the soft contact forces", ("q", "qd"), (q, qd))
    return out


def integrate(model, q, v, dt):
    """q(t + dt) for constant velocity v: joints linearly, free joints on SE(3) (body-frame linear and
    angular velocity: p += R v dt, quaternion times exp(omega dt / 2))."""
    out = q + 0.0
    vs = model._v_slices
    done = set()
    for name, sl in model._q_slices.items():
        if sl.stop - sl.start != 7:
            continue
        done.add(name)
        i, iv = sl.start, vs[name].start
        x, y, z, w = q[i + 3:i + 7] / np.linalg.norm(q[i + 3:i + 7])
        R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                      [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                      [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        out[i:i + 3] = q[i:i + 3] + R @ v[iv:iv + 3] * dt
        om = v[iv + 3:iv + 6] * dt
        a = float(np.linalg.norm(om))
        s = math.sin(a / 2) / a if a > 1e-12 else 0.5 - a * a / 48
        dx, dy, dz, dw = om[0] * s, om[1] * s, om[2] * s, math.cos(a / 2)
        qn = np.array([w * dx + x * dw + y * dz - z * dy, w * dy - x * dz + y * dw + z * dx,
                       w * dz + x * dy - y * dx + z * dw, w * dw - x * dx - y * dy - z * dz])
        out[i + 3:i + 7] = qn / np.linalg.norm(qn)
    for name, sl in model._q_slices.items():
        if name not in done:
            out[sl] = q[sl] + v[vs[name]] * dt
    return out


def _rigid_terms(model, q, qd, tau, packed, f_ext, w):
    """(A, b, v, qdd0, apply, fac) in the contacts' local axes (forward_dynamics.py), apply(f) = H^-1 T f, fac =
    (the factored H, its parents, Y = L^-T T) for joint_limits.coupling (None for a mimic model)."""
    from ...dispatch import wrenches
    from .forward_dynamics import TERMS_SCRATCH, contact_A, contact_terms
    from .checks import _dense_terms, _raise

    if model.has_mimic:
        return (*_dense_terms(model, q, qd, tau, packed, f_ext), None)
    nvt, k = model.nvt, packed.body.shape[0]
    H = np.empty(max(nvt * nvt, 1))
    lam = np.empty(max(nvt, 1), dtype=np.int64)
    Yt, b, v, qdd0 = np.empty((3 * k, nvt)), np.empty(3 * k), np.empty(3 * k), np.empty(nvt)
    st = contact_terms(model._kmi, model._kmf, q, qd, tau, wrenches(model, f_ext), packed.body, packed.point,
                       packed.frame, H, lam, Yt, b, v, qdd0, w, np.empty(TERMS_SCRATCH * nvt))
    if st:
        _raise(model, st, "the simulation step", ("q", "qd", "tau"), (q, qd, tau))
    Hm = H[:nvt * nvt].reshape(nvt, nvt)
    A = np.empty((3 * k, 3 * k))
    contact_A(Hm, Yt, A)

    def apply(f):
        y = Yt.T @ f
        dl_apply(Hm, lam, y)
        return y

    return A, b, v, qdd0, apply, (Hm, lam, Yt)


@njit(types.void(types.float64[:, ::1], I1, F1), cache=True)
def dl_apply(Hm, lam, y):
    """y <- L^-1 D^-1 y (Table 6.5)."""
    dl_solve(Hm, lam, y)


def reference_step(model, q, qd, tau, contacts, dt, state=None, f_ext=None, limits=None, restitution=0.0,
                   speculative=False):
    """dn.simulate_step (sim/route.py) in Python over the kernels of its parts (contact_terms, ncp.solve,
    joint_limits): the route of a model with mimic joints (dense terms in its own coordinates), and the
    form the tests hold the compiled step (sim/step.py) to. Its result is not checked for finiteness
    (sim/route.py does that)."""
    with np.errstate(all="ignore"):
        return _reference_step(model, q, qd, tau, contacts, dt, state, f_ext, limits, restitution, speculative)


def step_args(model, q, qd, tau, contacts, dt, state, limits, restitution):
    """A simulation step's arguments checked, each refused by name as every route does (the Python side of
    dn.simulate_step and reference_step): (q, qd, tau, the packed contacts, dt, the restitution e, the joint
    limits or None, the contacts' surface states, k x 3)."""
    from ...dispatch import _length, vec
    from ...errors import InputError
    from ..._kernel_io import A_TAU
    from .checks import _check_common, finite_or_raise
    from .args import _real
    from ..tree.joint_limits import limits_arg

    q, qd, packed = _check_common(model, q, qd, contacts)
    tau = vec(tau, "tau")
    _length(model, tau, "tau", "v")
    finite_or_raise(model, tau, "tau", A_TAU)
    dt = _real(dt, "dt")
    if not dt > 0.0:
        raise InputError(f"dt must be > 0, got {dt:g}")
    e = _real(restitution, "restitution")
    if not 0.0 <= e <= 1.0:
        raise InputError(f"restitution must be in [0, 1], got {e:g}")
    lim = limits_arg(model, limits) if limits is not None else None
    return q, qd, tau, packed, dt, e, lim, _state_arg(state, packed.k)


def _reference_step(model, q, qd, tau, contacts, dt, state, f_ext, limits, restitution, speculative):
    from .checks import _raise
    from .args import to_world
    from .ncp import STICK, solve
    from ..tree.joint_limits import coupling, limit_rows

    q, qd, tau, packed, dt, e, lim, s = step_args(model, q, qd, tau, contacts, dt, state, limits, restitution)
    k = packed.k
    w = np.empty(model.work_size)
    pos, vel, _J = _points(model, q, qd, packed, w) if k else (None, None, None)
    dist = np.array([float(c.normal @ (pos[3 * j:3 * j + 3] - c.surface_point)) for j, c in enumerate(packed.contacts)])
    A, b, v, qdd0, apply, fac = _rigid_terms(model, q, qd, tau, packed, f_ext, w)
    touching = dist <= s[:, 2] if k else np.zeros(0, dtype=bool)
    if speculative and k:
        touching |= dist + dt * (v[2::3] + dt * b[2::3]) <= 0.0
    rows_l = limit_rows(q, qd, qdd0, *lim, dt, e) if lim is not None else None
    nl = 0 if rows_l is None else rows_l.index.size
    idx = np.nonzero(touching)[0]
    nc = idx.size
    f = np.zeros(3 * k)
    lam_l = np.zeros(nl)
    modes = np.zeros(k, dtype=np.int64)
    rows = (3 * idx[:, None] + np.arange(3)).reshape(-1)
    if nl:
        Acl, All, M = coupling(model, q, rows_l, fac, apply, 3 * k)
    if nc or nl:  # backward Euler in the spring and damper: f = -K (y + dt v+) - D v+, v+ = v + dt (b + A f)
        n = 3 * (nc + nl)
        As, bs = np.zeros((n, n)), np.zeros(n)
        if nc:
            Kc = np.repeat([packed.contacts[j].stiffness for j in idx], 3)
            Dp = np.repeat([packed.contacts[j].damping for j in idx], 3) + dt * Kc
            y = np.column_stack((s[idx, 0], s[idx, 1], dist[idx])).reshape(-1)  # x1 x2 p
            As[:3 * nc, :3 * nc] = A[np.ix_(rows, rows)] + np.diag(1.0 / (dt * Dp))
            bs[:3 * nc] = v[rows] / dt + b[rows] + Kc * y / (dt * Dp)
        if nl:  # the limits' rows (joint_limits.py): the normal of a 3-row block with mu = 0
            lr = 3 * nc + 3 * np.arange(nl) + 2
            As[lr[:, None], lr] = All + np.eye(nl) * (1e-12 * float(np.trace(All)) / nl)
            As[lr - 1, lr - 1] = As[lr - 2, lr - 2] = 1.0
            As[np.ix_(np.arange(3 * nc), lr)] = Acl[rows]
            As[np.ix_(lr, np.arange(3 * nc))] = Acl[rows].T
            i, sg = rows_l.index, rows_l.sign
            bs[lr] = (sg * qd[i] - rows_l.target) / dt + sg * qdd0[i]
        mu = np.concatenate((packed.mu[idx], np.zeros(nl)))
        x = np.empty(4 * (nc + nl))
        ms = np.empty(nc + nl, dtype=np.int64)
        st = solve(As, bs, mu, np.zeros(nc + nl, dtype=np.int64), np.zeros((nc + nl, 2)), x, ms)
        if st:
            _raise(model, st, "the simulation step", ("q", "qd", "tau"), (q, qd, tau))
        f[rows] = x[:3 * nc]
        modes[idx] = ms[:nc]
        if nl:
            lam_l = x[lr]
    qdd = qdd0 + apply(f) if k else qdd0 + 0.0
    limit_tau = np.zeros(model.nv)
    if nl:
        qdd = qdd + M.T @ lam_l
        for i, sg, x in zip(rows_l.index, rows_l.sign, lam_l):
            limit_tau[i] += sg * x
    qd1 = qd + dt * qdd
    q1 = integrate(model, q, qd1, dt)
    s1 = s.copy()
    if nc:
        vp = v + dt * (b + A @ f + (Acl @ lam_l if nl else 0.0))  # the points' velocities after the step (local)
        pos1 = _points(model, q1, qd1, packed, w)[0]
    for j, c in enumerate(packed.contacts):
        decay = math.exp(-c.stiffness / c.damping * dt)
        if not touching[j]:
            s1[j] = s[j] * decay  # the exact recovery of Eqs. 11.76-11.77 with f = 0
            continue
        # the surface follows the point (z = p, below Eq. 11.76) unless the point leaves faster than
        # the surface recovers from where it was pressed (never above its rest: a speculative contact)
        s1[j, 2] = min(float(c.normal @ (pos1[3 * j:3 * j + 3] - c.surface_point)), dist[j] * decay, 0.0)
        if modes[j] == STICK:  # x follows the point: xdot = v (Eq. 11.77 at f_t = f_stick)
            s1[j, :2] = s[j, :2] + dt * vp[3 * j:3 * j + 2]
        else:  # slipping, Eq. 11.77 by backward Euler
            s1[j, :2] = (s[j, :2] - dt * f[3 * j:3 * j + 2] / c.damping) / (1.0 + dt * c.stiffness / c.damping)
    return SimulationStep(q1, qd1, s1, to_world(packed, f), qdd, limit_tau)
