"""Loop constraints of a closed-loop system (Featherstone, *Rigid Body Dynamics Algorithms*, Ch. 8):
the loop-joint geometry, Table 8.1's position error delta, Table 8.4's K and k (Eqs. 8.17-8.22, 8.47)
with Baumgarte's k_stab, G and g of §8.8, and the mobility of §8.10.  The other loop modules
(loop_forward, loop_inverse, loop_closure) build on :func:`_assemble` and the helpers here.

Conventions (the rest of dynamics_node and ROS order 6-vectors linear first):

* Every spatial quantity of the loop modules is written in *world axes at a fixed reference point o*,
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
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import DynamicsError, InputError


def _core():
    # imported lazily: the core package imports the loop modules (through loops.py) for its exports
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
    try:
        st = float(stabilization_time)
    except (TypeError, ValueError):
        st = float("nan")
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
    variables it is the partial-pivoting variant the section mentions).  Returns (G, g, dep, indep,
    pivot_rows) where dep are the pivot columns (x_1 of Eq. 8.50), indep the rest (y = x_2, Eq. 8.51)
    and pivot_rows the rows of K that were used as pivots (the others are redundant)."""
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
