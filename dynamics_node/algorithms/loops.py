"""Closed kinematic loops (Featherstone, *Rigid Body Dynamics Algorithms*, Ch. 8).

A closed-loop system is modelled as its spanning tree (the URDF tree) plus loop-closing joints
(``<loop_joint>``, see :mod:`dynamics_node.loop_joints`).  The equation of motion of the closed
system is the tree's, with the loop-joint constraint forces added (Featherstone Eqs. 8.3-8.6):

    H qdd + C = tau + K^T lambda,        K qdd = k + k_stab.

Conventions (the rest of dynamics_node and ROS order 6-vectors linear first):

* Every spatial quantity of this module is written in *world axes at a fixed reference point o*,
  linear first: motion [v_o; omega], force [f; n_o].  o is the successor joint-frame origin of the
  loop joint at hand.  This is Featherstone's Table 8.4 with "base coordinates" replaced by a frame
  parallel to the world frame located at o (§8.7, "The Rounding-Error Problem"), and with the two
  halves of every 6-vector swapped.  The cross product of two motion vectors in this order is
  [v1; w1] x [v2; w2] = [w1 x v2 + v1 x w2; w1 x w2] (Featherstone Eq. 2.31 re-ordered).
* T_k (constraint-force subspace, Table 4.1) is fixed in the successor joint frame; in world axes it
  is T_w = blockdiag(R_s, R_s) T_k with R_s the successor joint frame's orientation.
* ``loop_wrenches[name]`` = f_k = T_w lambda_k: the wrench (fx fy fz tx ty tz) the predecessor link
  exerts on the successor link (Featherstone §8.4), world axes, moments about the joint origin o.
* The position error delta_l of loop l is Featherstone's Table 8.1 applied to the Plücker transform
  ^{s}X_{p} from the predecessor to the successor joint frame (Eq. 8.24), re-ordered to match T_k's
  columns; it is measured in successor-frame axes, as K's rows are (T_w^T v = T_k^T (v in s axes)),
  so that d(delta)/dt = K qd to first order (checked by the tests).

Two implementations of the same equations: closed_loop_forward_dynamics runs one compiled kernel
(the core's CRBA and RNEA kernels, then Table 8.4's loop terms from the RNEA's body velocities and
accelerations, Method 2 on the sparse L^T D L of §6.5); everything else (and the forward dynamics of
models with mimic joints or external forces) builds the loop terms from the core's public API
(link_pose, jacobian, link_velocity, bias_acceleration, mass_matrix, bias_forces,
inverse_dynamics), whose 6-vectors are linear first, world axes, about the link origin.  The tests
check that both agree.

Public functions
    closed_loop_forward_dynamics(model, q, qd, tau, stabilization_time=0.1) -> (qdd, loop_wrenches)
    closed_loop_inverse_dynamics(model, q, qd, qdd, actuated=None, loop_wrenches=None) -> tau
    closed_loop_gravity(model, q, actuated=None) -> tau          gravity compensation
    close_loops(model, q, independent) -> q                      Newton on delta
    close_loop_velocities(model, q, qd, independent) -> qd       K qd = 0
    loop_state(model, q, qd=None) -> {loop joint: delta, K_l qd, norms}
    loop_constraints(model, q, qd, stabilization_time=None) -> (K, k)
    constraint_basis(model, q, qd=None, independent=None) -> (G, g, y_names)     §8.8
    mobility(model, q) -> (n - rank K, rank K, n^c)                               §8.10
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..errors import DynamicsError, InputError

__all__ = [
    "LoopState", "loop_state", "loop_constraints", "constraint_basis", "mobility",
    "closed_loop_forward_dynamics", "closed_loop_inverse_dynamics", "closed_loop_gravity",
    "close_loops", "close_loop_velocities", "loop_position_errors",
]


def _core():
    # imported lazily: the core package imports this module for its exports
    import dynamics_node as dn

    return dn


# ---------------------------------------------------------------------------------------------
# small 3-D helpers


def _skew(a):
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def _mcross(m1, m2):
    """Motion cross product m1 x m2, linear-first (Featherstone Eq. 2.31 with halves swapped)."""
    v1, w1, v2, w2 = m1[:3], m1[3:], m2[:3], m2[3:]
    return np.concatenate([np.cross(w1, v2) + np.cross(v1, w2), np.cross(w1, w2)])


# ---------------------------------------------------------------------------------------------
# argument checking


def _vec(model, x, n, what):
    a = np.asarray(x, dtype=float).reshape(-1) if x is not None else None
    if a is None or a.shape != (n,):
        got = None if a is None else a.shape[0]
        raise InputError(f"{what} must have {n} entries for model '{model.name}', got {got}")
    if not np.all(np.isfinite(a)):
        raise InputError(f"{what} contains NaN or inf")
    return a


def _require_loops(model):
    loops = getattr(model, "loops", ())
    return tuple(loops)


# ---------------------------------------------------------------------------------------------
# Table 8.1: position error delta = jcalc(jtype, ^sX_p)


def _plucker(E, r):
    """Featherstone ^BX_A = rot(E) xlt(r) (Eq. 2.24), angular first: [[E, 0], [-E r x, E]]."""
    X = np.zeros((6, 6))
    X[:3, :3] = E
    X[3:, 3:] = E
    X[3:, :3] = -E @ _skew(r)
    return X


def _position_error(lj, W_p, W_s):
    """delta of loop joint ``lj`` (Featherstone Eqs. 8.23-8.27, Table 8.1), ordered like lj.T's columns.

    W_p, W_s: world poses (4x4) of the predecessor and successor joint frames.  Both are turned into
    Featherstone's local-z frames (right-multiplied by R_align) and X = ^sX_p is built from the
    relative pose: E = R_ps^T, r = position of the successor origin in predecessor coordinates.
    """
    Ra = lj.R_align
    Rp = W_p[:3, :3] @ Ra
    Rs = W_s[:3, :3] @ Ra
    R_ps = Rp.T @ Rs
    r = Rp.T @ (W_s[:3, 3] - W_p[:3, 3])
    X = _plucker(R_ps.T, r)

    def x(i, j):  # Featherstone's 1-based X_ij
        return X[i - 1, j - 1]

    d = np.zeros(6)  # Featherstone order: d1..d3 rotation, d4..d6 translation (successor axes)
    t = lj.type
    if t == "fixed":  # zero-DoF column of Table 8.1
        d[:] = 0.5 * np.array([x(2, 3) - x(3, 2), x(3, 1) - x(1, 3), x(1, 2) - x(2, 1),
                               x(5, 3) - x(6, 2), x(6, 1) - x(4, 3), x(4, 2) - x(5, 1)])
    elif t in ("revolute", "continuous"):
        d[0], d[1], d[3], d[4] = x(2, 3), -x(1, 3), x(5, 3), -x(4, 3)
        d[5] = x(4, 1) * x(2, 1) + x(4, 2) * x(2, 2)
    elif t == "prismatic":
        d[0] = 0.5 * (x(2, 3) - x(3, 2))
        d[1] = 0.5 * (x(3, 1) - x(1, 3))
        d[2] = 0.5 * (x(1, 2) - x(2, 1))
        d[3], d[4] = x(5, 3), -x(4, 3)
    elif t == "cylindrical":
        d[0], d[1], d[3], d[4] = x(2, 3), -x(1, 3), x(5, 3), -x(4, 3)
    elif t == "spherical":
        d[3] = x(5, 1) * x(3, 1) + x(5, 2) * x(3, 2) + x(5, 3) * x(3, 3)
        d[4] = x(6, 1) * x(1, 1) + x(6, 2) * x(1, 2) + x(6, 3) * x(1, 3)
        d[5] = x(4, 1) * x(2, 1) + x(4, 2) * x(2, 2) + x(4, 3) * x(2, 3)
    elif t == "planar":
        # not in Table 8.1; by Eqs. 8.25-8.27: the tilt of the successor z axis (as revolute) and the
        # distance of the successor origin from the predecessor's x-y plane.
        d[0], d[1] = x(2, 3), -x(1, 3)
        d[5] = r[2]
    else:  # pragma: no cover - the parser rejects other types
        raise DynamicsError(f"loop joint '{lj.name}': unknown type {t!r}")
    # linear-first index i of T's columns <-> Featherstone index: linear i -> d[3 + i], angular i -> d[i]
    lin_first = np.concatenate([d[3:], d[:3]])
    return lin_first[_constrained_index(lj)]


_CONSTRAINED_CACHE: dict = {}


def _constrained_index(lj):
    """Indices (linear-first, Featherstone local-z frame) of the constrained directions of ``lj``,
    in the order of lj.T's columns (see loop_joints.motion_subspace)."""
    key = lj.type
    idx = _CONSTRAINED_CACHE.get(key)
    if idx is None:
        free = {"fixed": [], "revolute": [5], "continuous": [5], "prismatic": [2],
                "cylindrical": [5, 2], "spherical": [3, 4, 5], "planar": [5, 0, 1]}[key]
        idx = np.array([i for i in range(6) if i not in free], dtype=np.int64)
        _CONSTRAINED_CACHE[key] = idx
    return idx


# ---------------------------------------------------------------------------------------------
# per-loop kinematics from the core (Table 8.4, world axes at o)


def _loop_kinematics(model, q, qd, lj, need_bias):
    """Everything Table 8.4 needs for one loop joint, in world axes at the successor joint origin o.

    Returns dict with W_p, W_s (joint-frame poses), o, T_w (6 x nc), J_L (6 x nv loop Jacobian
    J_s - J_p, Eq. 8.18), v_J (v_s - v_p, Eq. 8.7), k_l (Eq. 8.47; None if not need_bias), delta.
    """
    dn = _core()
    P = dn.link_pose(model, q, lj.predecessor)
    S = dn.link_pose(model, q, lj.successor)
    W_p = P @ lj.X_P
    W_s = S @ lj.X_S
    o = W_s[:3, 3]
    R_s = W_s[:3, :3]
    nc = lj.T.shape[1]
    T_w = np.empty((6, nc))
    T_w[:3] = R_s @ lj.T[:3]
    T_w[3:] = R_s @ lj.T[3:]
    out = {"W_p": W_p, "W_s": W_s, "o": o, "T_w": T_w}
    Js = []
    vs = []
    avp = []
    for link, pose in ((lj.predecessor, P), (lj.successor, S)):
        J = np.array(dn.jacobian(model, q, link), dtype=float)
        rho = o - pose[:3, 3]  # from the link origin to o
        # velocity of the body point at o: v_o = v_origin + omega x rho = v_origin - rho x omega
        J[:3] -= _skew(rho) @ J[3:]
        Js.append(J)
        if qd is not None:
            vb = np.array(dn.link_velocity(model, q, qd, link), dtype=float)
            w = vb[3:]
            v_o = vb[:3] + np.cross(w, rho)
            vs.append(np.concatenate([v_o, w]))
            if need_bias:
                ab = np.array(dn.bias_acceleration(model, q, qd, link), dtype=float)
                alpha = ab[3:]
                # spatial (not classical) acceleration at the fixed point o (Featherstone Eq. 2.47 ff.):
                # a_origin = d/dt v_o + alpha x (p_b - o) + omega x v_origin
                a_o = ab[:3] + np.cross(alpha, rho) - np.cross(w, vb[:3])
                avp.append(np.concatenate([a_o, alpha]))
    out["J_L"] = Js[1] - Js[0]  # Eq. 8.18
    out["delta"] = _position_error(lj, W_p, W_s)
    if qd is not None:
        v_s, v_p = vs[1], vs[0]
        out["v_J"] = v_s - v_p  # Eq. 8.7
        if need_bias:
            # Eq. 8.47: k_l = -T^T (a_s^vp - a_p^vp + v_s x v_p)
            out["k"] = -T_w.T @ (avp[1] - avp[0] + _mcross(v_s, v_p))
    return out


def _assemble(model, q, qd, stabilization_time, need_bias=True):
    """K, k (+ k_stab), per-loop kinematics.  Featherstone Eqs. 8.17, 8.21-8.22, Table 8.4."""
    loops = _require_loops(model)
    nv = model.nv
    rows = []
    ks = []
    kin = []
    for lj in loops:
        L = _loop_kinematics(model, q, qd, lj, need_bias)
        kin.append(L)
        rows.append(L["T_w"].T @ L["J_L"])  # Eqs. 8.19-8.20: K_l = T_k^T J_Ll
        if qd is not None and need_bias:
            k = L["k"]
            if stabilization_time is not None:
                # Baumgarte (Eq. 8.22): k_stab = -2 alpha T^T v_J - beta^2 delta, alpha = beta = 1/T_stab
                a = 1.0 / float(stabilization_time)
                k = k - 2.0 * a * (L["T_w"].T @ L["v_J"]) - a * a * L["delta"]
            ks.append(k)
    K = np.vstack(rows) if rows else np.zeros((0, nv))
    k = np.concatenate(ks) if ks else np.zeros(K.shape[0] if need_bias and qd is not None else 0)
    return K, k, kin


def _check_stab(stabilization_time):
    if stabilization_time is None:
        return None
    st = float(stabilization_time)
    if not (st > 0.0) or not math.isfinite(st):
        raise InputError(f"stabilization_time must be a positive number of seconds, got {stabilization_time!r}")
    return st


# ---------------------------------------------------------------------------------------------
# public: constraint terms and state


class LoopState(dict):
    """Per loop joint: {'delta': position error (Table 8.1), 'velocity_error': K_l qd (= T^T v_J),
    'error_norm': |delta|, 'velocity_error_norm': |K_l qd|}; ``max_error`` / ``max_velocity_error``."""

    @property
    def max_error(self) -> float:
        return max((v["error_norm"] for v in self.values()), default=0.0)

    @property
    def max_velocity_error(self) -> float:
        return max((v["velocity_error_norm"] for v in self.values()), default=0.0)


def loop_state(model, q, qd=None) -> LoopState:
    """Loop-closure position error delta (Featherstone Table 8.1) and constraint velocity K qd of
    every loop joint, keyed by loop-joint name (file order)."""
    q = _vec(model, q, model.nq, "q")
    qd = None if qd is None else _vec(model, qd, model.nv, "qd")
    out = LoopState()
    for lj in _require_loops(model):
        L = _loop_kinematics(model, q, None, lj, False)
        Kl = L["T_w"].T @ L["J_L"]
        ve = Kl @ qd if qd is not None else np.zeros(Kl.shape[0])
        out[lj.name] = {"delta": L["delta"], "velocity_error": ve,
                        "error_norm": float(np.linalg.norm(L["delta"])),
                        "velocity_error_norm": float(np.linalg.norm(ve))}
    return out


def loop_position_errors(model, q) -> np.ndarray:
    """All loop position errors delta_l stacked in loop order (Featherstone Eq. 8.22's [delta_1 ...])."""
    q = _vec(model, q, model.nq, "q")
    parts = [_loop_kinematics(model, q, None, lj, False)["delta"] for lj in _require_loops(model)]
    return np.concatenate(parts) if parts else np.zeros(0)


def loop_constraints(model, q, qd, stabilization_time=None):
    """(K, k) of the loop constraint K qdd = k (Featherstone Eqs. 8.4, 8.15-8.17, 8.47), with the
    Baumgarte term k_stab of Eq. 8.22 added to k when ``stabilization_time`` is given.  Rows are
    grouped per loop joint in model.loops order, T_k's columns within a loop."""
    q = _vec(model, q, model.nq, "q")
    qd = _vec(model, qd, model.nv, "qd")
    K, k, _ = _assemble(model, q, qd, _check_stab(stabilization_time))
    return K, k


def _rank_tol(M):
    if M.size == 0:
        return 0.0
    return max(M.shape) * np.finfo(float).eps * 1e4 * max(1.0, float(np.max(np.abs(M))))


def _matrix_rank(M):
    if M.size == 0:
        return 0
    s = np.linalg.svd(M, compute_uv=False)
    return int(np.sum(s > _rank_tol(M)))


def mobility(model, q) -> tuple[int, int, int]:
    """(mobility, rank, n^c) at configuration q: mobility = n - rank(K) (Featherstone Eq. 8.52),
    n^c = number of loop constraints (Eq. 8.1); rank < n^c means over-constrained (§8.10)."""
    q = _vec(model, q, model.nq, "q")
    K, _, _ = _assemble(model, q, None, None, need_bias=False)
    r = _matrix_rank(K)
    return model.nv - r, r, K.shape[0]


def _gauss_complete_pivot(K, k, allowed_cols):
    """Featherstone §8.8: solve K x = k as x = G y + g by Gaussian elimination with complete pivoting
    (row and column swaps), pivot columns restricted to ``allowed_cols`` (the dependent variables;
    with every column allowed this is the book's algorithm, with a user choice of independent
    variables it is the partial-pivoting variant the section mentions).  Returns (G, g, dep, indep)
    where dep are the pivot columns (x_1 of Eq. 8.50) and indep the rest (y = x_2, Eq. 8.51)."""
    m, n = K.shape
    A = np.array(K, dtype=float)
    b = np.array(k, dtype=float)
    tol = _rank_tol(A)
    rows = list(range(m))
    piv_cols: list[int] = []
    allowed = [c for c in range(n) if allowed_cols[c]]
    r = 0
    while r < m:
        cand = [c for c in allowed if c not in piv_cols]
        if not cand:
            break
        sub = np.abs(A[np.ix_(rows[r:], cand)])
        if sub.size == 0:
            break
        i, j = np.unravel_index(int(np.argmax(sub)), sub.shape)
        if sub[i, j] <= tol:
            break  # rank test: the remaining rows are dependent (Featherstone §8.8, item 2)
        pr = rows[r + i]
        rows[r], rows[r + i] = rows[r + i], rows[r]
        pc = cand[j]
        piv_cols.append(pc)
        # eliminate below (and above: Gauss-Jordan, equivalent to the back-substitution of item 3)
        for rr in range(m):
            if rr == pr:
                continue
            f = A[rr, pc] / A[pr, pc]
            if f != 0.0:
                A[rr] -= f * A[pr]
                b[rr] -= f * b[pr]
        r += 1
    dep = piv_cols
    indep = [c for c in range(n) if c not in dep]
    G = np.zeros((n, len(indep)))
    g = np.zeros(n)
    for jj, c in enumerate(indep):
        G[c, jj] = 1.0
    for t, c in enumerate(dep):
        pr = rows[t]
        piv = A[pr, c]
        # x_c = (b - sum_{indep} A[pr, y] y) / piv   (Eq. 8.51: -K11^-1 K12 and K11^-1 k1)
        G[c, :] = -A[pr, indep] / piv
        g[c] = b[pr] / piv
    return G, g, dep, indep, rows[:len(dep)]


def constraint_basis(model, q, qd=None, independent=None, stabilization_time=None):
    """G and g of Featherstone §8.8 (Eq. 8.51): every qdd with K qdd = k (+ k_stab) is G ydd + g.

    ``independent``: joint names whose velocity variables form y (Featherstone: "allow the user to
    specify his own choice of independent variables"); None = chosen by complete pivoting.  Returns
    (G, g, y_names) with y_names the velocity-variable labels (joint names; "name[i]" for multi-DoF).
    qd None gives g = 0.  Raises InputError if the named joints cannot be independent (the remaining
    joints do not span the constraints), naming the loop joints.
    """
    q = _vec(model, q, model.nq, "q")
    qdv = None if qd is None else _vec(model, qd, model.nv, "qd")
    st = _check_stab(stabilization_time)
    K, k, _ = _assemble(model, q, qdv, st, need_bias=qdv is not None)
    if qdv is None:
        k = np.zeros(K.shape[0])
    return _basis_from_K(model, K, k, independent)


def _v_labels(model):
    labels = [None] * model.nv
    for j in model.joint_names:
        s = model.v_slice(j)
        for i in range(s.start, s.stop):
            labels[i] = j if s.stop - s.start == 1 else f"{j}[{i - s.start}]"
    if getattr(model, "floating_base", False):
        for i in range(6):
            if labels[i] is None:
                labels[i] = f"base[{i}]"
    return [lab if lab is not None else f"v[{i}]" for i, lab in enumerate(labels)]


def _basis_from_K(model, K, k, independent):
    nv = model.nv
    allowed = np.ones(nv, dtype=bool)
    if independent is not None:
        for j in _names(independent):
            allowed[model.v_slice(j)] = False
    G, g, dep, indep, _ = _gauss_complete_pivot(K, k, allowed)
    if independent is not None:
        r_all = _matrix_rank(K)
        if len(dep) < r_all:
            raise InputError(
                f"joints {sorted(_names(independent))} cannot all be independent: the other joints "
                f"do not close loop(s) {', '.join(model.loop_joints)} (rank {len(dep)} < {r_all})")
    labels = _v_labels(model)
    return G, g, [labels[i] for i in indep]


def _names(x):
    if isinstance(x, str):
        return [x]
    return list(x)


# ---------------------------------------------------------------------------------------------
# forward dynamics (§8.5, Method 2)


@njit(cache=True)
def _lambda_solve(A, b, lam, LA, y):
    """A lambda = b for the small symmetric positive semi-definite A of Eq. 8.37: Cholesky when A is
    positive definite (Eq. 8.40), else the pseudo-inverse (minimum-norm lambda, Eq. 8.41, z = 0)."""
    m = A.shape[0]
    amax = 0.0
    for i in range(m):
        if A[i, i] > amax:
            amax = A[i, i]
    full = True
    for j in range(m):
        s = A[j, j]
        for p in range(j):
            s -= LA[j, p] * LA[j, p]
        if not (s > 1e-10 * amax):
            full = False
            break
        d = math.sqrt(s)
        LA[j, j] = d
        for i in range(j + 1, m):
            t = A[i, j]
            for p in range(j):
                t -= LA[i, p] * LA[j, p]
            LA[i, j] = t / d
    if full:
        for i in range(m):
            t = b[i]
            for p in range(i):
                t -= LA[i, p] * y[p]
            y[i] = t / LA[i, i]
        for i in range(m - 1, -1, -1):
            t = y[i]
            for p in range(i + 1, m):
                t -= LA[p, i] * lam[p]
            lam[i] = t / LA[i, i]
        return
    w, V = np.linalg.eigh(A)
    wmax = max(w[m - 1], 0.0)
    for i in range(m):
        lam[i] = 0.0
    for e in range(m):
        if w[e] > wmax * 1e-10 and w[e] > 1e-300:
            t = 0.0
            for i in range(m):
                t += V[i, e] * b[i]
            t /= w[e]
            for i in range(m):
                lam[i] += V[i, e] * t


@njit(cache=True)
def _method2(H, rhs, K, kk, qdd, lam):
    """Featherstone §8.5 Method 2 (its six steps) with a dense H: H = L L^T (step 1); Y = L^-1 K^T,
    z = L^-1 tau' (step 3); A = Y^T Y (Eq. 8.38), b = k + k_stab - Y^T z (Eq. 8.39, step 4);
    A lambda = b (step 5, :func:`_lambda_solve`); H qdd = tau' + K^T lambda (step 6).
    Returns 0, or 1 if H is not positive definite.  (The compiled FD uses the sparse variant.)"""
    n = H.shape[0]
    m = K.shape[0]
    L = np.zeros((n, n))
    for j in range(n):
        s = H[j, j]
        for p in range(j):
            s -= L[j, p] * L[j, p]
        if not (s > 1e-300):
            return 1
        d = math.sqrt(s)
        L[j, j] = d
        for i in range(j + 1, n):
            t = H[i, j]
            for p in range(j):
                t -= L[i, p] * L[j, p]
            L[i, j] = t / d
    Y = np.empty((n, m))
    z = np.empty(n)
    for i in range(n):
        t = rhs[i]
        for p in range(i):
            t -= L[i, p] * z[p]
        z[i] = t / L[i, i]
        for c in range(m):
            t = K[c, i]
            for p in range(i):
                t -= L[i, p] * Y[p, c]
            Y[i, c] = t / L[i, i]
    A = np.empty((m, m))
    b = np.empty(m)
    for r in range(m):
        t = kk[r]
        for i in range(n):
            t -= Y[i, r] * z[i]
        b[r] = t
        for c in range(r, m):
            t = 0.0
            for i in range(n):
                t += Y[i, r] * Y[i, c]
            A[r, c] = t
            A[c, r] = t
    _lambda_solve(A, b, lam, np.zeros((m, m)), np.empty(m))
    for i in range(n):
        t = rhs[i]
        for c in range(m):
            t += K[c, i] * lam[c]
        z[i] = t
    for i in range(n):
        t = z[i]
        for p in range(i):
            t -= L[i, p] * qdd[p]
        qdd[i] = t / L[i, i]
    for i in range(n - 1, -1, -1):
        t = qdd[i]
        for p in range(i + 1, n):
            t -= L[p, i] * qdd[p]
        qdd[i] = t / L[i, i]
    return 0


def _solve_method2(H, rhs, K, kk):
    """Python entry of :func:`_method2` (generic path)."""
    n = H.shape[0]
    qdd = np.empty(n)
    lam = np.empty(K.shape[0])
    st = _method2(np.ascontiguousarray(H, dtype=float), np.ascontiguousarray(rhs, dtype=float),
                  np.ascontiguousarray(K, dtype=float).reshape(K.shape[0], n),
                  np.ascontiguousarray(kk, dtype=float), qdd, lam)
    if st:
        from ..errors import SingularMassMatrixError

        raise SingularMassMatrixError("the joint-space inertia H of the spanning tree is singular "
                                      "(closed-loop forward dynamics needs H^-1, Featherstone §8.5)")
    return qdd, lam


# ---------------------------------------------------------------------------------------------
# compiled fast path of closed_loop_forward_dynamics: one kernel call does RNEA (C), CRBA (H), the
# joint-frame poses, Jacobians and bias accelerations of every loop (Table 8.4), Table 8.1's delta,
# Baumgarte, and Method 2, using the core's kernels on its packed model.

_TYPE_CODE = {"fixed": 0, "revolute": 1, "continuous": 1, "prismatic": 2, "cylindrical": 3,
              "spherical": 4, "planar": 5}
_LI = 10  # per loop ints: body_p, body_s, type, nc, constrained indices (6)
_LF = 24  # per loop floats: p_p (3), R_p (9), p_s (3), R_s (9): joint frame in body coordinates

# the core's compiled kernels (tree coordinates, packed model)
from ._common import check as _check, A_TAU as _A_TAU, raise_status as _raise_status  # noqa: E402
from ._common import unpack, work_views as _work_views  # noqa: E402
from .ltdl import dof_parents as _dof_parents, ltdl_factor as _ltdl_factor, ltdl_solve as _ltdl_solve  # noqa: E402
from .crba import crba_kernel as _crba_kernel  # noqa: E402
from .rnea import rnea_kernel as _rnea_kernel  # noqa: E402

_HAVE_KERNELS = True


@njit(cache=True)
def _delta_code(code, Rp, op, Rs, os, out, idx, nc):
    """Table 8.1 on ^sX_p built from the aligned joint frames (Rp, op) and (Rs, os) in the world;
    same formulas as _position_error.  out[0:nc] ordered like T's columns (idx)."""
    # R_ps = Rp^T Rs, r = Rp^T (os - op); X = [[E, 0], [-E r x, E]] with E = R_ps^T
    E = np.empty((3, 3))
    for a in range(3):
        for b in range(3):
            t = 0.0
            for k in range(3):
                t += Rp[k, b] * Rs[k, a]  # E[a, b] = (Rp^T Rs)^T[a, b] = sum_k Rs[k, a] Rp[k, b]
            E[a, b] = t
    r = np.empty(3)
    for a in range(3):
        r[a] = Rp[0, a] * (os[0] - op[0]) + Rp[1, a] * (os[1] - op[1]) + Rp[2, a] * (os[2] - op[2])
    X = np.zeros((6, 6))
    for a in range(3):
        for b in range(3):
            X[a, b] = E[a, b]
            X[3 + a, 3 + b] = E[a, b]
    # -E skew(r)
    sk = np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])
    for a in range(3):
        for b in range(3):
            t = 0.0
            for k in range(3):
                t -= E[a, k] * sk[k, b]
            X[3 + a, b] = t
    d = np.zeros(6)
    if code == 0:
        d[0] = 0.5 * (X[1, 2] - X[2, 1])
        d[1] = 0.5 * (X[2, 0] - X[0, 2])
        d[2] = 0.5 * (X[0, 1] - X[1, 0])
        d[3] = 0.5 * (X[4, 2] - X[5, 1])
        d[4] = 0.5 * (X[5, 0] - X[3, 2])
        d[5] = 0.5 * (X[3, 1] - X[4, 0])
    elif code == 1:
        d[0], d[1], d[3], d[4] = X[1, 2], -X[0, 2], X[4, 2], -X[3, 2]
        d[5] = X[3, 0] * X[1, 0] + X[3, 1] * X[1, 1]
    elif code == 2:
        d[0] = 0.5 * (X[1, 2] - X[2, 1])
        d[1] = 0.5 * (X[2, 0] - X[0, 2])
        d[2] = 0.5 * (X[0, 1] - X[1, 0])
        d[3], d[4] = X[4, 2], -X[3, 2]
    elif code == 3:
        d[0], d[1], d[3], d[4] = X[1, 2], -X[0, 2], X[4, 2], -X[3, 2]
    elif code == 4:
        d[3] = X[4, 0] * X[2, 0] + X[4, 1] * X[2, 1] + X[4, 2] * X[2, 2]
        d[4] = X[5, 0] * X[0, 0] + X[5, 1] * X[0, 1] + X[5, 2] * X[0, 2]
        d[5] = X[3, 0] * X[1, 0] + X[3, 1] * X[1, 1] + X[3, 2] * X[1, 2]
    else:
        d[0], d[1] = X[1, 2], -X[0, 2]
        d[5] = r[2]
    for c in range(nc):
        i = idx[c]
        out[c] = d[3 + i] if i < 3 else d[i - 3]


@njit(cache=True)
def _method2_sparse(H, lamp, tol, rhs, K, kk, qdd, lam, sc):
    """Method 2 (§8.5) with H = L^T D L over the expanded parent array (Featherstone §6.5, Tables
    6.3 and 6.5, no fill-in): X = H^-1 K^T and x0 = H^-1 (tau - C) by sparse back-substitution,
    A = K X (Eq. 8.38), b = k + k_stab - K x0 (Eq. 8.39), lambda from A lambda = b, and
    qdd = x0 + X lambda (Eq. 8.34 solved for qdd).  H is factorised in place.  Returns -1, or the
    first dof whose pivot is <= tol (H singular)."""
    n = H.shape[0]
    m = K.shape[0]
    k = _ltdl_factor(H, lamp, tol)
    if k >= 0:
        return k
    X = sc[0:n * m].reshape((m, n))
    o = n * m
    A = sc[o:o + m * m].reshape((m, m))
    o += m * m
    LA = sc[o:o + m * m].reshape((m, m))
    o += m * m
    b = sc[o:o + m]
    o += m
    y = sc[o:o + m]
    for c in range(m):
        xc = X[c]
        for i in range(n):
            xc[i] = K[c, i]
        _ltdl_solve(H, lamp, xc)
    for i in range(n):
        qdd[i] = rhs[i]
    _ltdl_solve(H, lamp, qdd)
    for r in range(m):
        t = kk[r]
        for i in range(n):
            t -= K[r, i] * qdd[i]
        b[r] = t
        for c in range(r, m):
            t1 = 0.0
            t2 = 0.0
            for i in range(n):
                t1 += K[r, i] * X[c, i]
                t2 += K[c, i] * X[r, i]
            A[r, c] = 0.5 * (t1 + t2)
            A[c, r] = A[r, c]
    _lambda_solve(A, b, lam, LA, y)
    for c in range(m):
        lc = lam[c]
        for i in range(n):
            qdd[i] += X[c, i] * lc
    return -1


def _fd_kernel(mi, mf, q, qd, tau, LI, LF, alpha, buf):
    """Closed-loop forward dynamics on the packed tree (Featherstone §8.5-8.7).

    CRBA gives H (Table 6.2); the RNEA with qdd = 0 gives C (Eq. 6.2) and leaves in the work array
    every body's transform, velocity v_i and velocity-product acceleration a_i^vp - a_g (Table 8.2,
    body coordinates; the -a_g offset cancels in a_s - a_p, Table 8.2's footnote).  The loop terms
    follow Table 8.4 in world axes at the successor joint origin o: K by its while loop over the
    loop's path, k by Eq. 8.47, k_stab by Eq. 8.22, delta by Table 8.1.  Method 2 solves.
    buf = [qdd (nv) | wrenches (6 N_L) | H | C | K | k | lambda].  Returns a core status code,
    or 1 if H is singular."""
    nb, nvt, nqt, J, B, D = unpack(mi, mf)
    nv = nvt
    nl = LI[0]
    m = LI[1]
    w = np.empty(LI[2])
    o = 0
    qdd = buf[o:o + nv]
    o += nv
    Wr = buf[o:o + 6 * nl]
    o += 6 * nl
    Hf = buf[o:o + nv * nv]
    o += nv * nv
    C = buf[o:o + nv]
    o += nv
    Kf = buf[o:o + m * nv]
    o += m * nv
    kk = buf[o:o + m]
    o += m
    lam = buf[o:o + m]
    st = _crba_kernel(mi, mf, q, Hf, w)
    if st != 0:
        return st
    zero = np.zeros(nv)
    st = _rnea_kernel(mi, mf, q, qd, zero, np.zeros(0), C, w)
    if st != 0:
        return st
    st = _check(tau, nv, _A_TAU)
    if st != 0:
        return st
    E, r, v, a, f, c, IA, pA, Rw, pw, Dinv, U, u, d, tmp = _work_views(w, nb, nvt)
    # world poses of the bodies: R_i = R_p E_i^T, p_i = p_p + R_p r_i
    for i in range(nb):
        p = J[i, 0]
        Ei = E[i]
        ri = r[i]
        if p >= 0:
            Rp = Rw[p]
            for x in range(3):
                for y in range(3):
                    Rw[i, 3 * x + y] = Rp[3 * x] * Ei[3 * y] + Rp[3 * x + 1] * Ei[3 * y + 1] + Rp[3 * x + 2] * Ei[3 * y + 2]
                pw[i, x] = pw[p, x] + Rp[3 * x] * ri[0] + Rp[3 * x + 1] * ri[1] + Rp[3 * x + 2] * ri[2]
        else:
            for x in range(3):
                for y in range(3):
                    Rw[i, 3 * x + y] = Ei[3 * y + x]
                pw[i, x] = ri[x]
    K = Kf.reshape((m, nv))
    H = Hf.reshape((nv, nv))
    Rj = np.empty((2, 3, 3))   # aligned joint frames in the world: predecessor, successor
    oj = np.empty((2, 3))
    sv = np.empty((2, 6))      # spatial velocity at o, linear first
    sa = np.empty((2, 6))      # velocity-product acceleration at o, linear first
    dl = np.empty(6)
    row = 0
    for l in range(nl):
        base = 3 + 10 * l
        nc = LI[base + 3]
        for side in range(2):
            b = LI[base + side]
            pj = LF[24 * l + 12 * side:24 * l + 12 * side + 3]
            Rjb = LF[24 * l + 12 * side + 3:24 * l + 12 * side + 12]
            for x in range(3):
                if b < 0:
                    oj[side, x] = pj[x]
                    for y in range(3):
                        Rj[side, x, y] = Rjb[3 * x + y]
                else:
                    Rb = Rw[b]
                    oj[side, x] = pw[b, x] + Rb[3 * x] * pj[0] + Rb[3 * x + 1] * pj[1] + Rb[3 * x + 2] * pj[2]
                    for y in range(3):
                        Rj[side, x, y] = Rb[3 * x] * Rjb[y] + Rb[3 * x + 1] * Rjb[3 + y] + Rb[3 * x + 2] * Rjb[6 + y]
        o0, o1, o2 = oj[1, 0], oj[1, 1], oj[1, 2]
        for side in range(2):
            b = LI[base + side]
            if b < 0:  # the fixed base: v = 0, a = -a_g
                for k in range(6):
                    sv[side, k] = 0.0
                    sa[side, k] = 0.0
                sa[side, 0] = -mf[0]
                sa[side, 1] = -mf[1]
                sa[side, 2] = -mf[2]
                continue
            Rb = Rw[b]
            d0, d1, d2 = o0 - pw[b, 0], o1 - pw[b, 1], o2 - pw[b, 2]
            for vec in range(2):
                src = v[b] if vec == 0 else a[b]
                dst = sv[side] if vec == 0 else sa[side]
                w0 = Rb[0] * src[0] + Rb[1] * src[1] + Rb[2] * src[2]
                w1 = Rb[3] * src[0] + Rb[4] * src[1] + Rb[5] * src[2]
                w2 = Rb[6] * src[0] + Rb[7] * src[1] + Rb[8] * src[2]
                l0 = Rb[0] * src[3] + Rb[1] * src[4] + Rb[2] * src[5]
                l1 = Rb[3] * src[3] + Rb[4] * src[4] + Rb[5] * src[5]
                l2 = Rb[6] * src[3] + Rb[7] * src[4] + Rb[8] * src[5]
                dst[0] = l0 + w1 * d2 - w2 * d1
                dst[1] = l1 + w2 * d0 - w0 * d2
                dst[2] = l2 + w0 * d1 - w1 * d0
                dst[3] = w0
                dst[4] = w1
                dst[5] = w2
        vs = sv[1]
        vp = sv[0]
        acc = np.empty(6)
        for k in range(6):
            acc[k] = sa[1, k] - sa[0, k]
        # + v_s x v_p (Eq. 8.47), linear first: [w_s x v_p + v_s x w_p; w_s x w_p]
        acc[0] += vs[4] * vp[2] - vs[5] * vp[1] + vs[1] * vp[5] - vs[2] * vp[4]
        acc[1] += vs[5] * vp[0] - vs[3] * vp[2] + vs[2] * vp[3] - vs[0] * vp[5]
        acc[2] += vs[3] * vp[1] - vs[4] * vp[0] + vs[0] * vp[4] - vs[1] * vp[3]
        acc[3] += vs[4] * vp[5] - vs[5] * vp[4]
        acc[4] += vs[5] * vp[3] - vs[3] * vp[5]
        acc[5] += vs[3] * vp[4] - vs[4] * vp[3]
        _delta_code(LI[base + 2], Rj[0], oj[0], Rj[1], oj[1], dl, LI[base + 4:base + 10], nc)
        for cc in range(nc):
            rr = row + cc
            ix = LI[base + 4 + cc]
            blk = 0 if ix < 3 else 3
            ax = ix - blk
            t0, t1, t2 = Rj[1, 0, ax], Rj[1, 1, ax], Rj[1, 2, ax]   # column of T_w
            for j in range(nv):
                K[rr, j] = 0.0
            # Table 8.4: i = p(k), j = s(k) stepped back to their nearest common ancestor
            bi = LI[base]
            bj = LI[base + 1]
            while bi != bj:
                if bi > bj:
                    b = bi
                    sgn = -1.0
                    bi = J[bi, 0]
                else:
                    b = bj
                    sgn = 1.0
                    bj = J[bj, 0]
                Rb = Rw[b]
                d0, d1, d2 = o0 - pw[b, 0], o1 - pw[b, 1], o2 - pw[b, 2]
                for dof in range(J[b, 3], J[b, 3] + J[b, 4]):
                    s6 = D[dof]
                    w0 = Rb[0] * s6[0] + Rb[1] * s6[1] + Rb[2] * s6[2]
                    w1 = Rb[3] * s6[0] + Rb[4] * s6[1] + Rb[5] * s6[2]
                    w2 = Rb[6] * s6[0] + Rb[7] * s6[1] + Rb[8] * s6[2]
                    if blk == 0:
                        l0 = Rb[0] * s6[3] + Rb[1] * s6[4] + Rb[2] * s6[5] + w1 * d2 - w2 * d1
                        l1 = Rb[3] * s6[3] + Rb[4] * s6[4] + Rb[5] * s6[5] + w2 * d0 - w0 * d2
                        l2 = Rb[6] * s6[3] + Rb[7] * s6[4] + Rb[8] * s6[5] + w0 * d1 - w1 * d0
                        K[rr, dof] = sgn * (t0 * l0 + t1 * l1 + t2 * l2)        # Eq. 8.20
                    else:
                        K[rr, dof] = sgn * (t0 * w0 + t1 * w1 + t2 * w2)
            kl = -(t0 * acc[blk] + t1 * acc[blk + 1] + t2 * acc[blk + 2])         # Eq. 8.47
            if alpha > 0.0:
                vJ = t0 * (vs[blk] - vp[blk]) + t1 * (vs[blk + 1] - vp[blk + 1]) + t2 * (vs[blk + 2] - vp[blk + 2])
                kl -= 2.0 * alpha * vJ + alpha * alpha * dl[cc]                    # Eq. 8.22
            kk[rr] = kl
            # constraint force basis for the wrench output (Eq. 8.30), kept in the wrench slots later
        row += nc
    sc = np.empty(nv + nv * m + 2 * m * m + 2 * m)
    rhs = sc[0:nv]
    for i in range(nv):
        rhs[i] = tau[i] - C[i]
    lamp = LI[3 + 10 * nl:3 + 10 * nl + nv]
    ks = _method2_sparse(H, lamp, LF[24 * nl], rhs, K, kk, qdd, lam, sc[nv:])
    if ks >= 0:
        bsing = 0
        for i in range(nb):
            if J[i, 3] <= ks:
                bsing = i
        return 300000000 + bsing
    # loop wrenches f_k = T_w lambda_k (Eq. 8.30); T_w's columns are the successor frame's axes
    row = 0
    for l in range(nl):
        base = 3 + 10 * l
        nc = LI[base + 3]
        b = LI[base + 1]
        Rjb = LF[24 * l + 15:24 * l + 24]
        for k in range(6):
            Wr[6 * l + k] = 0.0
        for cc in range(nc):
            ix = LI[base + 4 + cc]
            blk = 0 if ix < 3 else 3
            ax = ix - blk
            for x in range(3):
                if b < 0:
                    col = Rjb[3 * x + ax]
                else:
                    Rb = Rw[b]
                    col = Rb[3 * x] * Rjb[ax] + Rb[3 * x + 1] * Rjb[3 + ax] + Rb[3 * x + 2] * Rjb[6 + ax]
                Wr[6 * l + blk + x] += col * lam[row + cc]
        row += nc
    return 0


if _HAVE_KERNELS:  # explicit signature: other argument types raise TypeError (then converted)
    from numba import types as _nbt

    from ._common import F1 as _F1, I1 as _I1

    _fd_kernel = njit(_nbt.int64(_I1, _F1, _F1, _F1, _F1, _I1, _F1, _nbt.float64, _F1), cache=True)(_fd_kernel)

_PACK_CACHE: dict = {}


def _pack_loops(model):
    """Loop data for _fd_kernel (cached per model object): LI = [N_L, n^c, work size, then per loop
    body_p, body_s, type code, n_k^c, constrained indices (6)], LF = per loop the aligned joint frame
    (origin, rotation) in the predecessor and successor body coordinates."""
    key = id(model)
    hit = _PACK_CACHE.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    loops = _require_loops(model)
    n = len(loops)
    LI = np.zeros(3 + _LI * n + model.nv, dtype=np.int64)
    LF = np.zeros(_LF * n + 1)
    LI[3 + _LI * n:] = _dof_parents(model)          # expanded parent array (Featherstone §6.5)
    LF[_LF * n] = model.singular_tol
    m = 0
    for l, lj in enumerate(loops):
        base = 3 + _LI * l
        idx = _constrained_index(lj)
        LI[base + 2] = _TYPE_CODE[lj.type]
        LI[base + 3] = len(idx)
        LI[base + 4:base + 4 + len(idx)] = idx
        for side, (link, X) in enumerate(((lj.predecessor, lj.X_P), (lj.successor, lj.X_S))):
            k = model.link_index(link)
            LI[base + side] = int(model.link_body[k])
            Rl = np.asarray(model.link_R[9 * k:9 * k + 9]).reshape(3, 3)
            pl = np.asarray(model.link_p[3 * k:3 * k + 3])
            off = _LF * l + 12 * side
            LF[off:off + 3] = Rl @ X[:3, 3] + pl
            LF[off + 3:off + 12] = (Rl @ X[:3, :3] @ lj.R_align).reshape(9)
        m += len(idx)
    LI[0], LI[1], LI[2] = n, m, model.work_size
    nv = model.nv
    size = nv + 6 * n + nv * nv + nv + m * nv + 2 * m
    packed = (LI, LF, n, m, tuple(lj.name for lj in loops), size)
    if len(_PACK_CACHE) > 32:
        _PACK_CACHE.clear()
    _PACK_CACHE[key] = (model, packed)
    return packed


def _fast_ok(model):
    """The compiled path needs the core's kernels, no mimic joints (tree coordinates = user
    coordinates) and at least one loop."""
    return (_HAVE_KERNELS and getattr(model, "loops", ()) != () and not getattr(model, "has_mimic", True)
            and getattr(model, "nvt", -1) == model.nv)


def _fd_fast(model, q, qd, tau, alpha):
    LI, LF, n, m, names, size = _pack_loops(model)
    nv = model.nv
    buf = np.empty(size)
    try:
        status = _fd_kernel(model._kmi, model._kmf, q, qd, tau, LI, LF, alpha, buf)
    except TypeError:  # lists, other dtypes: convert (the core's slow path)
        q = _vec(model, q, model.nq, "q")
        qd = _vec(model, qd, model.nv, "qd")
        tau = _vec(model, tau, model.nv, "tau")
        status = _fd_kernel(model._kmi, model._kmf, q, qd, tau, LI, LF, alpha, buf)
    if status:
        _raise_status(model, status, what="closed-loop forward dynamics")
    W = buf[nv:nv + 6 * n]
    return buf[:nv], {name: W[6 * i:6 * i + 6] for i, name in enumerate(names)}


def closed_loop_forward_dynamics(model, q, qd, tau, stabilization_time=0.1, f_ext=None):
    """Forward dynamics of the closed-loop system (Featherstone §8.5, Method 2, Eqs. 8.34-8.41).

    Returns (qdd, loop_wrenches).  ``loop_wrenches`` maps every loop joint's name to the wrench
    (fx fy fz tx ty tz) its predecessor link exerts on its successor link, world axes, moments about
    the joint origin (Featherstone §8.4, f_k = T_k lambda_k, Eq. 8.30).  Constraint drift is
    stabilised by Baumgarte's method (Eq. 8.22) with alpha = beta = 1 / stabilization_time (None:
    no stabilisation).  A rank-deficient K (e.g. a planar loop closed by a spatial revolute joint) is
    handled with the pseudo-inverse of Eq. 8.41; the indeterminate constraint forces are then the
    minimum-norm ones.  ``f_ext`` as in dn.forward_dynamics.
    """
    st = 0.1 if stabilization_time == 0.1 else _check_stab(stabilization_time)
    if f_ext is None and _fast_ok(model):
        return _fd_fast(model, q, qd, tau, 0.0 if st is None else 1.0 / st)
    return _closed_loop_fd_generic(model, q, qd, tau, st, f_ext)


def _closed_loop_fd_generic(model, q, qd, tau, st, f_ext=None):
    """closed_loop_forward_dynamics through the core's public API (mimic joints, f_ext)."""
    dn = _core()
    q = _vec(model, q, model.nq, "q")
    qd = _vec(model, qd, model.nv, "qd")
    tau = _vec(model, tau, model.nv, "tau")
    loops = _require_loops(model)
    if not loops:
        return dn.forward_dynamics(model, q, qd, tau, f_ext), {}
    K, kk, kin = _assemble(model, q, qd, st)
    H = np.asarray(dn.mass_matrix(model, q), dtype=float)
    if f_ext is None:
        C = np.asarray(dn.bias_forces(model, q, qd), dtype=float)
    else:
        C = np.asarray(dn.inverse_dynamics(model, q, qd, np.zeros(model.nv), f_ext), dtype=float)
    qdd, lam = _solve_method2(H, tau - C, K, kk)
    return qdd, _wrenches(loops, kin, lam)


def _wrenches(loops, kin, lam):
    out = {}
    i = 0
    for lj, L in zip(loops, kin):
        nc = L["T_w"].shape[1]
        out[lj.name] = L["T_w"] @ lam[i:i + nc]  # Eq. 8.30, f_k = T_k lambda_k (world axes at o)
        i += nc
    return out


# ---------------------------------------------------------------------------------------------
# inverse dynamics (§8.12)


def _actuated_mask(model, actuated):
    if actuated is None:
        actuated = getattr(model, "actuated_joints", None) or model.joint_names
    mask = np.zeros(model.nv, dtype=bool)
    for j in _names(actuated):
        mask[model.v_slice(j)] = True
    return mask


def _describe_motion(model, m):
    labels = _v_labels(model)
    m = m / np.max(np.abs(m))
    parts = [f"{labels[i]} {m[i]:+.3g}" for i in range(len(m)) if abs(m[i]) > 1e-6]
    return "(" + ", ".join(parts) + ")"


def closed_loop_inverse_dynamics(model, q, qd, qdd, actuated=None, loop_wrenches=None):
    """Actuator efforts of a closed-loop system (Featherstone §8.12, Eqs. 8.61-8.63).

    Returns tau over model.joint_names (nv entries) with zeros on unactuated joints.  ``actuated``:
    joint names (default model.actuated_joints, from <transmission>, else all).  q, qd, qdd must
    satisfy the loop constraints (close_loops / close_loop_velocities / constraint_basis).

    * properly actuated: the unique u of G_u^T u = G^T tau_ID (Eq. 8.63);
    * redundantly actuated: the minimum-norm u (no criterion in the book; ours: least squares);
      or, with ``loop_wrenches`` {loop joint: (fx fy fz tx ty tz)} (predecessor on successor, world
      axes, about the joint origin; loops not named are free), the efforts that produce those
      loop-joint constraint forces: tau = tau_ID - K^T lambda (Eq. 8.61);
    * under-actuated (rank G_u < n - r): InputError naming the freedoms no actuator controls.
    """
    dn = _core()
    q = _vec(model, q, model.nq, "q")
    qd = _vec(model, qd, model.nv, "qd")
    qdd = _vec(model, qdd, model.nv, "qdd")
    mask = _actuated_mask(model, actuated)
    tau_id = np.asarray(dn.inverse_dynamics(model, q, qd, qdd), dtype=float)
    loops = _require_loops(model)
    if not loops:
        if not np.all(mask):
            bad = [j for j in model.joint_names if not np.all(mask[model.v_slice(j)])]
            raise InputError(f"under-actuated: no actuator on joint(s) {', '.join(bad)} of the kinematic tree")
        return tau_id
    K, _, kin = _assemble(model, q, None, None, need_bias=False)  # Eq. 8.62 needs G, i.e. K only
    return _actuator_efforts(model, K, kin, tau_id, mask, loop_wrenches)


def _actuator_efforts(model, K, kin, tau_id, mask, loop_wrenches):
    loops = _require_loops(model)
    G, _, _ = _basis_from_K(model, K, np.zeros(K.shape[0]), None)
    Gu = G[mask]
    nfree = G.shape[1]
    ru = _matrix_rank(Gu)
    if ru < nfree:
        # freedoms y with G_u y = 0: motions qd = G y no actuator can drive (Featherstone §8.12 case 1)
        _, s, Vt = np.linalg.svd(Gu if Gu.size else np.zeros((1, nfree)))
        null = Vt[ru:].T
        motions = [_describe_motion(model, G @ null[:, i]) for i in range(null.shape[1])]
        act = [j for j in model.joint_names if np.any(mask[model.v_slice(j)])]
        raise InputError(
            f"under-actuated: with actuators on {act or 'no joint'} the closed-loop system has "
            f"{nfree - ru} freedom(s) no actuator controls, moving the joints as "
            + "; ".join(motions) + " (Featherstone §8.12: rank(G_u) < n - r)")
    tau = np.zeros(model.nv)
    if loop_wrenches is None:
        rhs = G.T @ tau_id  # Eq. 8.62
        u, *_ = np.linalg.lstsq(Gu.T, rhs, rcond=None)  # Eq. 8.63; minimum norm if redundant
        tau[mask] = u
        return tau
    # requested loop-joint constraint forces: tau = tau_ID - K^T lambda (Eq. 8.61)
    unknown = dict(loop_wrenches)
    lam_fixed = np.zeros(K.shape[0])
    free_rows = np.zeros(K.shape[0], dtype=bool)
    i = 0
    for lj, L in zip(loops, kin):
        nc = L["T_w"].shape[1]
        if lj.name in unknown:
            f = np.asarray(unknown.pop(lj.name), dtype=float).reshape(-1)
            if f.shape != (6,) or not np.all(np.isfinite(f)):
                raise InputError(f"loop_wrenches['{lj.name}'] must be 6 finite numbers (fx fy fz tx ty tz)")
            lam = L["T_w"].T @ f  # T_w has orthonormal columns
            resid = f - L["T_w"] @ lam
            if np.linalg.norm(resid) > 1e-9 * (1.0 + np.linalg.norm(f)):
                raise InputError(f"loop_wrenches['{lj.name}'] has a component along the joint's free motion "
                                 f"({lj.type} joint): a constraint force cannot act there")
            lam_fixed[i:i + nc] = lam
        else:
            free_rows[i:i + nc] = True
        i += nc
    if unknown:
        raise InputError(f"loop_wrenches names unknown loop joint(s) {sorted(unknown)}; "
                         f"loop joints: {list(model.loop_joints)}")
    target = tau_id - K.T @ lam_fixed
    # unknowns: u (actuated) and lambda of the loops not named; Q[u; 0] - K_free^T lam_free = target
    Kf = K[free_rows]
    M = np.hstack([np.eye(model.nv)[:, mask], -Kf.T])
    sol, *_ = np.linalg.lstsq(M, target, rcond=None)
    if np.linalg.norm(M @ sol - target) > 1e-8 * (1.0 + np.linalg.norm(target)):
        raise InputError("the requested loop_wrenches cannot be produced by the actuated joints "
                         f"{[j for j in model.joint_names if np.any(mask[model.v_slice(j)])]}")
    tau[mask] = sol[:int(mask.sum())]
    return tau


def closed_loop_gravity(model, q, actuated=None):
    """Gravity compensation of a closed-loop robot: actuator efforts (on the actuated joints only)
    holding configuration q at rest (Featherstone §8.12 with qd = qdd = 0; Eq. 5.x gravity ID)."""
    return closed_loop_inverse_dynamics(model, q, np.zeros(model.nv), np.zeros(model.nv), actuated=actuated)


# ---------------------------------------------------------------------------------------------
# loop closure (§8.11: y -> q by Newton on delta)


def _dependent_mask(model, independent):
    dep = np.ones(model.nv, dtype=bool)
    for j in _names(independent):
        dep[model.v_slice(j)] = False
    if getattr(model, "floating_base", False):
        dep[:6] = False  # the floating base is kept
    return dep


def _q_of_v(model):
    """v index -> q index for joints whose coordinates add (every joint but a floating base)."""
    qv = np.full(model.nv, -1, dtype=np.int64)
    for j in model.joint_names:
        sq, sv = model.q_slice(j), model.v_slice(j)
        if sq.stop - sq.start == sv.stop - sv.start:
            qv[sv] = np.arange(sq.start, sq.stop)
    return qv


def close_loops(model, q, independent, tol=1e-12, max_iter=60):
    """Solve the dependent joint positions so every loop closes (delta = 0, Featherstone Table 8.1),
    keeping the positions of the joints named in ``independent`` (and a floating base).

    Damped Newton on delta with the loop constraint matrix K (restricted to the dependent joints) as
    Jacobian, least-squares steps (over-constrained loops have rank K < n^c).  Returns the new q:
    the closed configuration nearest the start (when the independent positions admit several, e.g.
    an elbow up and an elbow down, Featherstone §8.10 "configuration ambiguity", the start decides).
    Raises InputError naming the loop joint(s) that do not close (a loop that can never close at
    these independent positions, or a start too far from a closed configuration).
    """
    q = _vec(model, q, model.nq, "q").copy()
    dep = _dependent_mask(model, independent)
    qv = _q_of_v(model)
    if np.any(qv[dep] < 0):
        raise InputError("close_loops cannot move multi-coordinate joints (quaternions); name them independent")
    loops = _require_loops(model)
    if not loops:
        return q
    dq_idx = qv[dep]

    def err(qq):
        K, _, kin = _assemble(model, qq, None, None, need_bias=False)
        return np.concatenate([L["delta"] for L in kin]), K

    e, K = err(q)
    n0 = float(np.linalg.norm(e))
    for _ in range(max_iter):
        if np.max(np.abs(e)) < tol:
            return q
        J = K[:, dep]
        step, *_ = np.linalg.lstsq(J, -e, rcond=None)
        t = 1.0
        ne = np.linalg.norm(e)
        while t > 1e-4:
            q_try = q.copy()
            q_try[dq_idx] += t * step
            e_try, K_try = err(q_try)
            if np.linalg.norm(e_try) < ne or np.max(np.abs(e_try)) < tol:
                break
            t *= 0.5
        else:
            break  # no descent: stuck at a non-closing minimum
        q, e, K = q_try, e_try, K_try
    if np.max(np.abs(e)) < max(tol, 1e-9):
        return q
    # name the loop joint(s) that did not close
    bad = []
    i = 0
    for lj in loops:
        nc = lj.T.shape[1]
        en = float(np.linalg.norm(e[i:i + nc]))
        if en >= max(tol, 1e-9):
            bad.append(f"'{lj.name}' (error {en:.3g})")
        i += nc
    raise InputError(f"loop closure did not converge for loop joint(s) {', '.join(bad)} with independent "
                     f"joints {list(_names(independent))} (initial error {n0:.3g}): the loop cannot close "
                     "there, or the start is too far from a closed configuration")


def close_loop_velocities(model, q, qd, independent):
    """Dependent joint rates so that K qd = 0 (Featherstone Eq. 8.9), keeping the named joints' rates
    (and a floating base's).  Least squares; InputError if the kept rates violate the loops."""
    q = _vec(model, q, model.nq, "q")
    qd = _vec(model, qd, model.nv, "qd").copy()
    dep = _dependent_mask(model, independent)
    K, _, _ = _assemble(model, q, None, None, need_bias=False)
    if K.shape[0] == 0:
        return qd
    rhs = -K[:, ~dep] @ qd[~dep]
    x, *_ = np.linalg.lstsq(K[:, dep], rhs, rcond=None)
    qd[dep] = x
    res = K @ qd
    if np.linalg.norm(res) > 1e-8 * (1.0 + np.linalg.norm(qd)):
        raise InputError(f"the rates of the independent joints {list(_names(independent))} violate the loop "
                         f"constraints of {', '.join(model.loop_joints)} (residual {np.linalg.norm(res):.3g})")
    return qd
