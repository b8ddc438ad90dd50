"""The contact services: `~/contact_dynamics` (dn.contact_forward_dynamics) and `~/impact`
(dn.impact), with the request's contacts (dynamics_interfaces/msg/Contact) turned into dn.Contact.

Conventions as every service of services.py: `name` lists the joints in the caller's order (empty =
the model's), the reply names its joints in that order and its contacts by link in the request's
order; forces and impulses are world vectors, the environment on the robot. A bad contact is refused
naming the field: `contacts[1].link: unknown link 'x' (...)`, `contacts[0].normal: ...`,
`contacts[2].friction: ...`. No rclpy here (message objects are duck-typed).
"""
from __future__ import annotations

import math

import numpy as np

import dynamics_node as dn
from ..errors import InputError
from .conversions import finite_or_raise

AXES = ("x", "y", "z")


def contacts_from_msgs(st, msgs, field="contacts"):
    """dynamics_interfaces/Contact[] -> [dn.Contact] on st's model; InputError naming the field."""
    out = []
    for i, m in enumerate(msgs):
        f = f"{field}[{i}]"
        link = st.conv.link(m.link, f"{f}.link")
        if st.model.link_body[st.model.link_index(link)] < 0:
            raise InputError(f"{f}.link: link '{link}' is fixed to the world: a contact on it can neither move "
                             "nor be pushed")
        p = np.array([m.point.x, m.point.y, m.point.z], dtype=float)
        finite_or_raise(p, f"{f}.point", AXES, kind=None)
        n = np.array([m.normal.x, m.normal.y, m.normal.z], dtype=float)
        finite_or_raise(n, f"{f}.normal", AXES, kind=None)
        if not n.any():
            n = np.array([0.0, 0.0, 1.0])  # unset: the floor's normal (Contact.msg)
        mu = float(m.friction)
        if math.isnan(mu) or mu < 0.0:
            raise InputError(f"{f}.friction: {mu} must be >= 0 (0 = frictionless, inf = no slip)")
        try:
            out.append(dn.Contact(link, point=p, normal=n, friction=mu))
        except InputError as e:  # "normal must be a non-zero vector", a point out of range
            raise InputError(f"{f}.{e}") from None
    return out


def _vectors(rows, what):
    from geometry_msgs.msg import Vector3

    a = np.asarray(rows, dtype=float).reshape(-1, 3)
    if not np.isfinite(a).all():
        raise dn.DynamicsError(f"{what}: the result is not finite")
    return [Vector3(x=float(r[0]), y=float(r[1]), z=float(r[2])) for r in a]


def _finite(a, field):
    a = np.asarray(a, dtype=float)
    if not np.isfinite(a).all():
        raise dn.DynamicsError(f"{field}: the result is not finite (singular configuration or model?)")
    return a


def contact_dynamics(ctx, st, req, res):
    c = st.conv
    order = c.order(req.name)
    q, qd, tau = c.q(req.position, order), c.v(req.velocity, order, "velocity"), c.v(req.effort, order, "effort")
    f_ext = c.wrenches(req.external_wrenches, "external_wrenches")
    contacts = contacts_from_msgs(st, req.contacts)
    r = dn.contact_forward_dynamics(st.model, q, qd, tau, contacts, f_ext=f_ext)
    res.name = order.names
    res.acceleration = c.out_v(_finite(r.qdd, "acceleration"), order)
    res.contact_links = [k.link for k in contacts]
    res.contact_forces = _vectors(r.forces, "contact_forces")
    res.contact_states = [str(s) for s in r.states]


def impact(ctx, st, req, res):
    c = st.conv
    order = c.order(req.name)
    q, qd = c.q(req.position, order), c.v(req.velocity, order, "velocity")
    e = float(req.restitution)
    if not (0.0 <= e <= 1.0):  # NaN fails too
        raise InputError(f"restitution: {e} must be in [0, 1] (0 = plastic, 1 = elastic)")
    contacts = contacts_from_msgs(st, req.contacts)
    r = dn.impact(st.model, q, qd, contacts, restitution=e)
    res.name = order.names
    res.velocity = c.out_v(_finite(r.qd, "velocity"), order)
    res.contact_links = [k.link for k in contacts]
    res.contact_impulses = _vectors(r.impulses, "contact_impulses")
    res.contact_states = [str(s) for s in r.states]
