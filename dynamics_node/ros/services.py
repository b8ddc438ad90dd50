"""The node's services: one table, shared with dynamics_cli, and one small handler per service.

A handler is `handler(ctx, st, req, res)`: `st` is the model state the request started with
(model_state.ModelState), `ctx` what a handler may ask of the node (`latest_q(st)` for the latest
joint state, `set_payload(...)`). It converts the request (conversions.py, which names the field at
fault), calls the core, fills the response, and raises `InputError` for a bad request; `serve`
turns that into `success: false` with the message, and keeps the node serving whatever happens.
No rclpy here: handlers are testable in-process with plain message objects.
"""
from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

import dynamics_node as dn
from ..errors import ConfigError, DynamicsError, InputError, clip
from .conversions import finite_or_raise, request_fields, to_float64_array, wrench_to_tuple
from .model_state import WAITING
from .linearized import request_field, trajectory_field
from .model_terms import jacobian_options, model_terms


class Service(NamedTuple):
    type_name: str     # dynamics_interfaces/srv/<type_name>
    handler: object
    help: str


def _finite(values, field):
    a = np.asarray(values, dtype=float)
    if not np.isfinite(a).all():
        raise DynamicsError(f"{field}: the result is not finite (singular configuration or model?)")
    return a


def _tree_note(st, res):
    if st.loops:
        res.message = ("note: the model has closed loops; this is the spanning tree's result (use "
                       "the closed_loop_* services)")


def inverse_dynamics(ctx, st, req, res):
    c = st.conv
    order = c.order(req.name)
    q, qd = c.q(req.position, order), c.v(req.velocity, order, "velocity")
    qdd = c.v(req.acceleration, order, "acceleration")
    f_ext = c.wrenches(req.external_wrenches, "external_wrenches")
    res.name = order.names
    res.effort = c.out_v(_finite(dn.inverse_dynamics(st.model, q, qd, qdd, f_ext), "effort"), order)
    _tree_note(st, res)


def forward_dynamics(ctx, st, req, res):
    c = st.conv
    order = c.order(req.name)
    q, qd, tau = c.q(req.position, order), c.v(req.velocity, order, "velocity"), c.v(req.effort, order, "effort")
    f_ext = c.wrenches(req.external_wrenches, "external_wrenches")
    res.name = order.names
    res.acceleration = c.out_v(_finite(dn.forward_dynamics(st.model, q, qd, tau, f_ext), "acceleration"), order)
    _tree_note(st, res)


def hybrid_dynamics(ctx, st, req, res):
    c = st.conv
    order = c.order(req.name)
    q, qd = c.q(req.position, order), c.v(req.velocity, order, "velocity")
    qdd_in, tau_in = c.v(req.acceleration, order, "acceleration"), c.v(req.effort, order, "effort")
    fwd = list(req.forward_joints)
    if not st.model.floating_base:
        c.joint_subset(fwd, "forward_joints")
    qdd, tau = dn.hybrid_dynamics(st.model, q, qd, qdd_in, tau_in, fwd)
    res.name = order.names
    res.acceleration = c.out_v(_finite(qdd, "acceleration"), order)
    res.effort = c.out_v(_finite(tau, "effort"), order)
    _tree_note(st, res)


def gravity_compensation(ctx, st, req, res):
    c = st.conv
    order = c.order(req.name)
    q = ctx.latest_q(st) if len(req.position) == 0 else c.q(req.position, order)
    if st.loops:
        from .stream import gravity_effort
        pos, tau = gravity_effort(st, q)
        res.name = list(st.torque_names)
        res.position = to_float64_array(pos)
        res.effort = to_float64_array(_finite(tau, "effort"))
        return
    res.name = order.names
    res.position = c.out_q(q, order)
    res.effort = c.out_v(_finite(dn.gravity(st.model, q), "effort"), order)


def mass_matrix(ctx, st, req, res):
    c = st.conv
    order = c.order(req.name)
    res.name = order.names
    res.mass_matrix = c.out_matrix(_finite(dn.mass_matrix(st.model, c.q(req.position, order)), "mass_matrix"),
                                   order, rows=True)
    _tree_note(st, res)


def jacobian(ctx, st, req, res):
    c = st.conv
    order = c.order(req.name)
    q = c.q(req.position, order)
    link = c.link(req.link, "link")
    point, axes = jacobian_options(req)  # model_terms.py: empty = the link origin, world axes
    if point == (0.0, 0.0, 0.0) and axes == "world":
        J = _finite(dn.jacobian(st.model, q, link), "jacobian")
    else:
        J = _finite(dn.jacobian(st.model, q, link, point=point, axes=axes), "jacobian")
    res.name = order.names
    res.jacobian = c.out_matrix(J, order, rows=False)


def set_payload(ctx, st, req, res):
    link = st.conv.link(req.link, "link")
    com = (req.center_of_mass.x, req.center_of_mass.y, req.center_of_mass.z)
    res.message = ctx.set_payload(link, float(req.mass), com, tuple(float(x) for x in req.inertia))


def closed_loop_forward_dynamics(ctx, st, req, res):
    c = st.conv
    order = c.order(req.name)
    q, qd, tau = c.q(req.position, order), c.v(req.velocity, order, "velocity"), c.v(req.effort, order, "effort")
    stab = float(req.stabilization_time)
    if not math.isfinite(stab) or stab < 0:
        raise InputError(f"stabilization_time: {stab} must be finite and >= 0 (0 = default)")
    kw = {"stabilization_time": stab} if stab > 0 else {}
    qdd, wrenches = dn.closed_loop_forward_dynamics(st.model, q, qd, tau, **kw)
    res.name = order.names
    res.acceleration = c.out_v(_finite(qdd, "acceleration"), order)
    res.loop_wrenches = _loop_wrenches_to_msgs(wrenches)


def closed_loop_inverse_dynamics(ctx, st, req, res):
    c = st.conv
    order = c.order(req.name)
    q, qd = c.q(req.position, order), c.v(req.velocity, order, "velocity")
    qdd = c.v(req.acceleration, order, "acceleration")
    actuated = c.joint_subset(req.actuated, "actuated") if len(req.actuated) else None
    lw = None
    if len(req.loop_wrenches):
        loops = set(st.model.loop_joints)
        lw = {}
        for i, ws in enumerate(req.loop_wrenches):
            j = ws.header.frame_id
            if j not in loops:
                raise InputError(f"loop_wrenches[{i}].header.frame_id: unknown loop joint '{j}' "
                                 f"(the model's loop joints: {', '.join(sorted(loops)) or 'none'})")
            w = np.array(wrench_to_tuple(ws.wrench))
            finite_or_raise(w, f"loop_wrenches[{i}].wrench",
                            ("force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z"), kind=None)
            lw[j] = lw[j] + w if j in lw else w
        lw = {k: tuple(float(x) for x in v) for k, v in lw.items()}
    tau = np.asarray(dn.closed_loop_inverse_dynamics(st.model, q, qd, qdd, actuated=actuated, loop_wrenches=lw))
    # the core returns tau over model.joint_names (nv entries): pick the actuated joints by name
    names = list(actuated) if actuated is not None else list(st.model.actuated_joints)
    res.name = names
    res.effort = to_float64_array(_finite(tau[[st.model.v_slice(j).start for j in names]], "effort"))


def trajectory_inverse_dynamics(ctx, st, req, res):
    t0 = time.perf_counter()
    c = st.conv
    order, Q, QD, QDD = c.trajectory(req.trajectory)
    try:
        TAU = _finite(dn.inverse_dynamics_batch(st.model, Q, QD, QDD), "effort")
    except InputError as e:  # 'QD[3, 2]' of the core: the request's trajectory.points[3].velocities[2]
        raise InputError(request_field(str(e), order, trajectory_field())) from None
    traj = req.trajectory
    c.fill_efforts(traj.points, TAU, order)
    res.trajectory = traj
    res.compute_time = time.perf_counter() - t0
    _tree_note(st, res)


def _loop_wrenches_to_msgs(wrenches: dict):
    """The core's loop wrenches {loop joint: (fx fy fz tx ty tz)} as geometry_msgs/WrenchStamped."""
    from geometry_msgs.msg import WrenchStamped

    out = []
    for name, w in wrenches.items():
        w = _finite(np.asarray(w, dtype=float).ravel(), f"loop wrench of '{name}'")
        ws = WrenchStamped()
        ws.header.frame_id = str(name)
        (ws.wrench.force.x, ws.wrench.force.y, ws.wrench.force.z,
         ws.wrench.torque.x, ws.wrench.torque.y, ws.wrench.torque.z) = (float(x) for x in w)
        out.append(ws)
    return out


SERVICES = {
    "inverse_dynamics": Service("InverseDynamics", inverse_dynamics, "efforts for given accelerations (RNEA)"),
    "forward_dynamics": Service("ForwardDynamics", forward_dynamics, "accelerations for given efforts (ABA)"),
    "hybrid_dynamics": Service("HybridDynamics", hybrid_dynamics,
                               "effort on --forward-joints, acceleration on the others"),
    "gravity_compensation": Service("GravityCompensation", gravity_compensation, "efforts that hold the robot still"),
    "mass_matrix": Service("MassMatrix", mass_matrix, "joint-space inertia matrix H(q)"),
    "jacobian": Service("Jacobian", jacobian, "6 x n geometric Jacobian of a link point (world or link axes)"),
    "set_payload": Service("SetPayload", set_payload, "attach a payload to a link (mass 0 removes it)"),
    "closed_loop_forward_dynamics": Service("ClosedLoopForwardDynamics", closed_loop_forward_dynamics,
                                            "forward dynamics with loop closures"),
    "closed_loop_inverse_dynamics": Service("ClosedLoopInverseDynamics", closed_loop_inverse_dynamics,
                                            "actuated efforts with loop closures"),
    "trajectory_inverse_dynamics": Service("TrajectoryInverseDynamics", trajectory_inverse_dynamics,
                                           "efforts along a JointTrajectory"),
}
# payload identification (its handler and the CLI's recorder live in payload_services.py)
from .payload_services import identify_payload  # noqa: E402

SERVICES["identify_payload"] = Service("IdentifyPayload", identify_payload,
                                       "identify the payload on --link from recorded joint torques")
SERVICES["model_terms"] = Service("ModelTerms", model_terms,
                                  "H, C, g, C qd + g and per link J, dJ/dt, Lambda at one state")
# contacts (their handlers and the Contact.msg conversion live in contact_services.py)
from .contact_services import contact_dynamics, impact  # noqa: E402

SERVICES["contact_dynamics"] = Service("ContactDynamics", contact_dynamics,
                                       "forward dynamics with point contacts: accelerations and contact forces")
SERVICES["impact"] = Service("Impact", impact, "velocities after an impact at point contacts, and the impulses")
# A and B of the linearised step (the handler and its CLI lines live in linearized.py)
from .linearized import linearized_dynamics  # noqa: E402

SERVICES["linearized_dynamics"] = Service("LinearizedDynamics", linearized_dynamics,
                                          "A and B of the linearised semi-implicit Euler step (MPC)")


def clear_response(res):
    """Leave only success/message in a failed response (no partial results)."""
    for name in res.get_fields_and_field_types():
        if name in ("success", "message"):
            continue
        value = getattr(res, name)
        if type(value).__name__ == "array":
            setattr(res, name, type(value)(value.typecode))
        elif isinstance(value, (list, tuple)):
            setattr(res, name, type(value)())


MESSAGE_MAX = 2000   # characters of a refusal's message


def serve(ctx, leaf, handler, stats):
    """The service callback of `handler`: never raises, counts requests and failures, times them."""
    def callback(req, res):
        t0 = time.perf_counter()
        stats.requests[leaf] += 1
        try:
            st = ctx.state
            if st is None:
                raise InputError(f"no model yet: {WAITING}")
            handler(ctx, st, req, res)
            res.success = True
        except (InputError, ConfigError) as e:   # a core refusal names the request's fields (velocity[2])
            res.success, res.message = False, request_fields(str(e), st.conv, req) if st is not None else str(e)
        except DynamicsError as e:
            res.success, res.message = False, f"{type(e).__name__}: {e}"
        except Exception as e:  # noqa: BLE001 - a request must never stop the node
            res.success, res.message = False, f"internal error: {type(e).__name__}: {e}"
            ctx.log.error(f"{leaf}: {res.message}")
        if not res.success:
            stats.failures[leaf] += 1
            clear_response(res)
            res.message = clip(res.message, MESSAGE_MAX)  # the messages clip what they echo; this bounds any
        stats.timing.add(time.perf_counter() - t0)
        return res
    return callback
