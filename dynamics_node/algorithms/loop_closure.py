"""Loop closure (Featherstone §8.11): the dependent joint positions that close every loop (Newton
on Table 8.1's delta), and the dependent joint rates with K qd = 0 (Eq. 8.9)."""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from .loop_constraints import _assemble, _names, _require_loops, _vec


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
