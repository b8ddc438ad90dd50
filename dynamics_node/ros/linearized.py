"""The LinearizedDynamics service and the batch refusals' field names over ROS.

A and B of dn.linearize for the request's state and, optionally, each point of its horizon, in the
request's joint order (rows and columns of dq and of dqd permuted alike), flattened row-major state
after state. A batch refusal of the core names 'QD[3, 2]' (batch_errors); ``request_field`` rewrites it
as the request's own field, as the single-state services name theirs (velocity[2]).
"""
from __future__ import annotations

import re

import numpy as np

import dynamics_node as dn
from ..errors import DynamicsError, InputError
from .conversions import to_float64_array

_BATCH_FIELD = re.compile(r"\b(Q|QD|QDD|TAU)\[(\d+), (\d+)\]")
_POINT_ATTR = {"Q": "positions", "QD": "velocities", "QDD": "accelerations", "TAU": "effort"}


def request_field(message: str, order, field_of) -> str:
    """message with each 'QD[k, i]' (model column i of state k) as field_of(k, name, c), c the index
    in the request's order (order.q_index / v_index: model index per request entry)."""
    def sub(m):
        name, k, i = m.group(1), int(m.group(2)), int(m.group(3))
        index = order.q_index if name == "Q" else order.v_index
        hits = np.flatnonzero(np.asarray(index) == i)
        c = int(hits[0]) if hits.size else i
        return field_of(k, name, c)
    return _BATCH_FIELD.sub(sub, message)


def trajectory_field(field="trajectory"):
    return lambda k, name, c: f"{field}.points[{k}].{_POINT_ATTR[name]}[{c}]"


def _horizon(c, traj):
    """The horizon's states (model order): N x nq, N x nv, N x nv; its fields named on refusal."""
    pts = traj.points
    if not pts:
        return np.empty((0, c.nq)), np.empty((0, c.nv)), np.empty((0, c.nv)), None
    order = c.order(list(traj.joint_names), "horizon.joint_names")
    Q, QD, TAU = (np.empty((len(pts), n)) for n in (c.nq, c.nv, c.nv))
    for k, p in enumerate(pts):
        Q[k] = c.q(p.positions, order, f"horizon.points[{k}].positions")
        QD[k] = c.v(p.velocities, order, f"horizon.points[{k}].velocities")
        TAU[k] = c.v(p.effort, order, f"horizon.points[{k}].effort")
    return Q, QD, TAU, order


def linearized_dynamics(ctx, st, req, res):
    from ..algorithms.derivatives.linearize import CONVENTION  # here: the derivative kernels load on first use

    c = st.conv
    order = c.order(req.name)
    q, qd, tau = c.q(req.position, order), c.v(req.velocity, order, "velocity"), c.v(req.effort, order, "effort")
    dt = float(req.dt)
    HQ, HQD, HTAU, horder = _horizon(c, req.horizon)
    Q, QD, TAU = np.vstack([q[None], HQ]), np.vstack([qd[None], HQD]), np.vstack([tau[None], HTAU])
    first = {"Q": "position", "QD": "velocity", "TAU": "effort"}

    def field_of(k, name, col):
        if k == 0:
            return f"{first[name]}[{col}]"
        return f"horizon.points[{k - 1}].{_POINT_ATTR[name]}[{col}]"

    try:
        A, B = dn.linearize_batch(st.model, Q, QD, TAU, dt) if len(Q) > 1 else \
            (x[None] for x in dn.linearize(st.model, q, qd, tau, dt))
    except (InputError, DynamicsError) as e:
        def rename(k, name, col):  # the model's column -> the index in that state's own request order
            o = order if k == 0 else horder
            index = o.q_index if name == "Q" else o.v_index
            hits = np.flatnonzero(np.asarray(index) == col)
            return field_of(k, name, int(hits[0]) if hits.size else col)
        raise type(e)(_BATCH_FIELD.sub(lambda m: rename(int(m.group(2)), m.group(1), int(m.group(3))),
                                       str(e))) from None
    A, B = np.asarray(A), np.asarray(B)
    if not (np.isfinite(A).all() and np.isfinite(B).all()):
        raise DynamicsError("a, b: the result is not finite")
    nv = st.model.nv
    if not order.identity:
        idx = np.r_[order.v_index, nv + np.asarray(order.v_index)]
        A = A[:, idx][:, :, idx]
        B = B[:, idx][:, :, order.v_index]
    res.name = order.names
    res.nv = nv
    res.states = len(Q)
    res.a = to_float64_array(np.ascontiguousarray(A).ravel())
    res.b = to_float64_array(np.ascontiguousarray(B).ravel())
    res.convention = CONVENTION
    if st.loops:   # as services._tree_note says it
        res.message = ("note: the model has closed loops; this is the spanning tree's result (use "
                       "the closed_loop_* services)")


# ---------------------------------------------------------------------------------------------- CLI
def cli_arguments(sp, state_args):
    state_args(sp, eff=True)
    sp.add_argument("--dt", type=float, required=True, help="the step, seconds")


def cli_lines(res, vec):
    """The response as YAML-like lines: per state, A (2nv rows) and B (2nv rows)."""
    n, s = int(res.nv), int(res.states)
    a, b = list(res.a), list(res.b)
    lines = [f"nv: {n}", f"states: {s}", f"convention: {res.convention!r}"]
    for k in range(s):
        lines.append(f"a[{k}]:  # {2 * n} x {2 * n}, row-major")
        lines += ["  - " + vec(a[(k * 2 * n + r) * 2 * n:(k * 2 * n + r + 1) * 2 * n]) for r in range(2 * n)]
        lines.append(f"b[{k}]:  # {2 * n} x {n}, row-major")
        lines += ["  - " + vec(b[(k * 2 * n + r) * n:(k * 2 * n + r + 1) * n]) for r in range(2 * n)]
    return lines
