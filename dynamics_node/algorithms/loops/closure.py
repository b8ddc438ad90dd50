"""Loop closure (Featherstone §8.11): the dependent joint positions that close every loop (Newton
on Table 8.1's delta), and the dependent joint rates with K qd = 0 (Eq. 8.9)."""
from __future__ import annotations

import numpy as np

from ...errors import InputError, RangeError
from .constraints import names, terms, vec


def _dependent_mask(model, independent):
    dep = np.ones(model.nv, dtype=bool)
    for j in names(independent):
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


def close_loops(model, q, independent, tol=1e-12, max_iter=60, _clustered=True):
    """Solve the dependent joint positions so every loop closes (delta = 0, Featherstone Table 8.1),
    keeping the positions of the joints named in ``independent`` (and a floating base).

    Damped Newton on delta with the loop constraint matrix K (restricted to the dependent joints) as
    Jacobian, least-squares steps (over-constrained loops have rank K < n^c).  Returns the new q:
    the closed configuration nearest the start (when the independent positions admit several, e.g.
    an elbow up and an elbow down, Featherstone §8.10 "configuration ambiguity", the start decides).
    Raises InputError naming the loop joint(s) that do not close (a loop that can never close at
    these independent positions, or a start too far from a closed configuration).

    Per loop cluster (Featherstone §8.9): a cluster's delta depends only on its own tree joints, so
    each cluster takes its own least-squares step on its block of K and its own step length (all
    clusters' trial errors come from one evaluation of delta); a closed cluster stops moving.
    """
    q = vec(model, q, model.nq, "q").copy()
    dep = _dependent_mask(model, independent)
    qv = _q_of_v(model)
    if np.any(qv[dep] < 0):
        raise InputError("close_loops cannot move multi-coordinate joints (quaternions); name them independent")
    ld = model.loop_data
    if ld is None:
        return q
    dq_idx = qv[dep]
    if _clustered:
        return _close_clustered(model, q, independent, dep, qv, tol, max_iter)

    def err(qq):
        K, _, delta, _ = terms(model, qq)
        return delta.copy(), K

    e, K = err(q)
    n0 = float(np.linalg.norm(e))
    for _ in range(max_iter):
        if np.max(np.abs(e)) < tol:
            return q
        step, *_ = np.linalg.lstsq(K[:, dep], -e, rcond=None)
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
    bad = [f"'{name}' (error {float(np.linalg.norm(e[rows])):.3g})" for name, rows in zip(ld.names, ld.rows)
           if float(np.linalg.norm(e[rows])) >= max(tol, 1e-9)]
    raise RangeError(f"loop closure did not converge for loop joint(s) {', '.join(bad)} with independent "
                     f"joints {list(names(independent))} (initial error {n0:.3g}): the loop cannot close "
                     "there, or the start is too far from a closed configuration",
                     symptom=f"loop closure did not converge (loop joint(s) {', '.join(bad)})")


def _not_closed(model, e, tol, independent, n0):
    ld = model.loop_data
    bad = [f"'{name}' (error {float(np.linalg.norm(e[rows])):.3g})" for name, rows in zip(ld.names, ld.rows)
           if float(np.linalg.norm(e[rows])) >= max(tol, 1e-9)]
    return RangeError(f"loop closure did not converge for loop joint(s) {', '.join(bad)} with independent "
                      f"joints {list(names(independent))} (initial error {n0:.3g}): the loop cannot close "
                      "there, or the start is too far from a closed configuration",
                      symptom=f"loop closure did not converge (loop joint(s) {', '.join(bad)})")


def _close_clustered(model, q, independent, dep, qv, tol, max_iter):
    """close_loops on the cluster blocks: per cluster c, the step solves K_c[:, dep] dq_c = -delta_c
    (least squares) and is halved until |delta_c| decreases."""
    cd = model.loop_data.clusters
    blocks = []
    for rows, cols in zip(cd.rows, cd.cols):
        dc = cols[dep[cols]]
        blocks.append((rows, dc, qv[dc]))
    K, _, e, _ = terms(model, q)
    e = e.copy()
    n0 = float(np.linalg.norm(e))
    live = [True] * len(blocks)
    for _ in range(max_iter):
        for c, (rows, _, _) in enumerate(blocks):
            if live[c] and np.max(np.abs(e[rows])) < tol:
                live[c] = False  # closed
        if not any(live):
            break
        steps = {}
        for c, (rows, dc, _) in enumerate(blocks):
            if live[c]:
                steps[c] = np.linalg.lstsq(K[np.ix_(rows, dc)], -e[rows], rcond=None)[0]
        t = dict.fromkeys(steps, 1.0)
        base = {c: float(np.linalg.norm(e[blocks[c][0]])) for c in steps}
        pending = set(steps)
        while pending:
            q_try = q.copy()
            for c in steps:
                q_try[blocks[c][2]] += t[c] * steps[c]
            _, _, e_try, _ = terms(model, q_try)
            for c in list(pending):
                ec = e_try[blocks[c][0]]
                if np.linalg.norm(ec) < base[c] or np.max(np.abs(ec)) < tol:
                    pending.discard(c)
                else:
                    t[c] *= 0.5
                    if t[c] <= 1e-4:  # no descent: this cluster is stuck at a non-closing minimum
                        pending.discard(c)
                        live[c] = False
                        t[c] = 0.0
        q_new = q.copy()
        for c in steps:
            q_new[blocks[c][2]] += t[c] * steps[c]
        q = q_new
        K, _, e, _ = terms(model, q)
        e = e.copy()
    if np.max(np.abs(e)) < max(tol, 1e-9):
        return q
    raise _not_closed(model, e, tol, independent, n0)


def close_loop_velocities(model, q, qd, independent):
    """Dependent joint rates so that K qd = 0 (Featherstone Eq. 8.9), keeping the named joints' rates
    (and a floating base's).  Least squares; InputError if the kept rates violate the loops."""
    q = vec(model, q, model.nq, "q")
    qd = vec(model, qd, model.nv, "qd").copy()
    dep = _dependent_mask(model, independent)
    K = terms(model, q)[0]
    if K.shape[0] == 0:
        return qd
    x, *_ = np.linalg.lstsq(K[:, dep], -K[:, ~dep] @ qd[~dep], rcond=None)
    qd[dep] = x
    res = K @ qd
    if np.linalg.norm(res) > 1e-8 * (1.0 + np.linalg.norm(qd)):
        raise RangeError(f"the rates of the independent joints {list(names(independent))} violate the loop "
                         f"constraints of {', '.join(model.loop_joints)} (residual {np.linalg.norm(res):.3g})",
                         symptom=f"the loop constraints' residual is {np.linalg.norm(res):.3g}")
    return qd
