"""The model terms over ROS: the ModelTerms service's handler and the streamed ~/model_terms topic.

One round trip (or one message per usable joint state) gives a controller what it needs at one
state: H(q) (Featherstone Table 6.2), the Coriolis matrix C(q, qd) of the Christoffel factorisation
(dH/dt = C + C^T), g(q), the bias C qd + g, and per requested link the world-axes Jacobian J of a
point, its derivative dJ/dt and the operational-space inertia Lambda = (J H^-1 J^T)^-1.

Layout (dynamics_interfaces/srv/ModelTerms.srv and msg/ModelTerms.msg): matrices row-major, rows
and columns in the joint order of `name` (the request's, as the other services do; the topic: the
model's); per link a 6 x n block of J (rows [linear; angular]) and of dJ/dt, concatenated in link
order, and 36 values of Lambda. Where a link's J loses rank Lambda does not exist: the service
refuses the request naming the link; the topic publishes the other terms with no Lambda and says
why in `message`.

The topic runs in the stream process (stream.py) after the torque message of the same joint state
has been published, so the terms never hold back that torque; they need a fresh velocity of every
joint (a joint state without velocities gives torques but no terms). No rclpy at import.
"""
from __future__ import annotations

import math
import time

import numpy as np

import dynamics_node as dn
from ..errors import DynamicsError, InputError
from .conversions import to_float64_array

AXES = ("world", "link")


def _finite(a, field):
    a = np.asarray(a, dtype=float)
    if not np.isfinite(a).all():
        raise DynamicsError(f"{field}: the result is not finite (singular configuration or model?)")
    return a


def point_of(p, field) -> tuple:
    """geometry_msgs/Point -> (x, y, z); InputError naming field.x/.y/.z when not finite."""
    xyz = (float(p.x), float(p.y), float(p.z))
    for c, v in zip("xyz", xyz):
        if not math.isfinite(v):
            raise InputError(f"{field}.{c} is {v}: every value must be finite")
    return xyz


def axes_of(axes: str, field: str = "axes") -> str:
    a = axes or "world"
    if a not in AXES:
        raise InputError(f"{field}: '{axes}' is not one of '' (= world), 'world', 'link'")
    return a


def compute(model, q, qd, links, points):
    """The terms at (q, qd), model order: dict of H, C, g, bias and the per-link lists J, Jd, L.
    L[k] is None, and lam_error says why, when link k's J loses rank (no Lambda there)."""
    # the core returns finite values or raises (docs/library.md: "finite in, finite out"); only the
    # product C qd, made here, is checked
    H = dn.mass_matrix(model, q)
    C = dn.coriolis_matrix(model, q, qd)
    g = dn.gravity(model, q)
    bias = _finite(C @ qd + g, "bias")
    J, Jd, L = [], [], []
    lam_error = ""
    for k, (link, p) in enumerate(zip(links, points)):
        J.append(dn.jacobian(model, q, link, point=p))
        Jd.append(dn.jacobian_derivative(model, q, qd, link, point=p))
        try:
            L.append(dn.operational_space_inertia(model, q, link, point=p))
        except InputError as e:
            L.append(None)
            why = str(e).split("; pass rows=")[0]  # the core's rows= option has no field here
            lam_error = lam_error or f"links[{k}] ('{link}'): no operational-space inertia at this state: {why}"
    return {"H": H, "C": C, "g": g, "bias": bias, "J": J, "Jd": Jd, "L": L, "lam_error": lam_error}


def _blocks(mats, cols):
    """6 x nv blocks (model order) -> one flat array, columns picked by cols (None = as they are)."""
    if not mats:
        return to_float64_array(np.zeros(0))
    stacked = np.concatenate([m if cols is None else m[:, cols] for m in mats], axis=0)
    return to_float64_array(stacked)


def fill(out, t, order, conv):
    """Write the terms t (model order) into a response or message in `order`'s joint order."""
    cols = None if order.identity else order.v_index
    out.name = list(order.names)
    out.mass_matrix = conv.out_matrix(t["H"], order, rows=True)
    out.coriolis_matrix = conv.out_matrix(t["C"], order, rows=True)
    out.gravity = conv.out_v(t["g"], order)
    out.bias = conv.out_v(t["bias"], order)
    out.jacobians = _blocks(t["J"], cols)
    out.jacobian_derivatives = _blocks(t["Jd"], cols)
    lam = t["L"]
    out.operational_space_inertias = (to_float64_array(np.concatenate([m.ravel() for m in lam]))
                                      if lam and all(m is not None for m in lam) else to_float64_array([]))


def request_points(points, links, field="points"):
    """The request's points: empty = every link's origin, else one finite point per link."""
    if len(points) == 0:
        return [(0.0, 0.0, 0.0)] * len(links)
    if len(points) != len(links):
        raise InputError(f"{field}: expected 0 or {len(links)} points (one per entry of links), "
                         f"got {len(points)}")
    return [point_of(p, f"{field}[{k}]") for k, p in enumerate(points)]


def model_terms(ctx, st, req, res):
    """The ModelTerms service (see the module docstring)."""
    c = st.conv
    order = c.order(req.name)
    q, qd = c.q(req.position, order), c.v(req.velocity, order, "velocity")
    links = [c.link(link, f"links[{k}]") for k, link in enumerate(req.links)]
    points = request_points(req.points, links)
    t = compute(st.model, q, qd, links, points)
    if t["lam_error"]:
        raise InputError(t["lam_error"] + " (ask without this link, or at another state or point)")
    fill(res, t, order, c)
    if st.loops:
        res.message = ("note: the model has closed loops; these are the spanning tree's terms")


def jacobian_options(req):
    """(point, axes) of a Jacobian request: the link origin and world axes when left empty."""
    return point_of(req.point, "point"), axes_of(req.axes)


def format_terms(res, n, vec):
    """dynamics_cli's printing of a ModelTerms response: matrices as rows, per link 6 rows."""
    lines = []
    for field in ("mass_matrix", "coriolis_matrix"):
        m = list(getattr(res, field))
        lines.append(f"{field}:  # {n} x {n}, row-major")
        lines += ["  - " + vec(m[r * n:(r + 1) * n]) for r in range(n)]
    lines.append(f"gravity: {vec(res.gravity)}")
    lines.append(f"bias: {vec(res.bias)}")
    for field, w in (("jacobians", n), ("jacobian_derivatives", n), ("operational_space_inertias", 6)):
        m = list(getattr(res, field))
        lines.append(f"{field}:  # per link 6 x {w}, rows vx vy vz wx wy wz, world axes")
        for b in range(len(m) // (6 * w) if w else 0):
            lines.append(f"  - # link {b}")
            lines += ["    - " + vec(m[(6 * b + r) * w:(6 * b + r + 1) * w]) for r in range(6)]
    return lines


# ------------------------------------------------------------------------------------ the topic
class TermsStream:
    """~/model_terms in the stream process: a publisher while model_terms_links is set."""

    def __init__(self, node, resolve, logger):
        self.node, self.resolve, self.log = node, resolve, logger
        self.pub = None
        self.links, self.points, self.jv = (), (), None
        self.published = self.skipped = self.errors = 0
        self.last_problem = ""
        self.timing = None   # diagnostics.Timings of the terms (after the torque), when set

    @property
    def active(self):
        return self.pub is not None

    def configure(self, st, cfg):
        """Create, keep or destroy the publisher; remember the links and points of cfg."""
        links = tuple(getattr(cfg, "model_terms_links", ()) or ()) if cfg is not None else ()
        flat = tuple(getattr(cfg, "model_terms_points", ()) or ()) if cfg is not None else ()
        want = bool(links) and st is not None
        if want and self.pub is None:
            from dynamics_interfaces.msg import ModelTerms
            from rclpy.qos import QoSProfile, ReliabilityPolicy
            self.Msg = ModelTerms
            from .stream_executor import output_events
            self.pub = self.node.create_publisher(
                ModelTerms, self.resolve("~/model_terms"), QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
                event_callbacks=output_events())
        elif not want and self.pub is not None:
            old, self.pub = self.pub, None
            self.node.destroy_publisher(old)
        self.links = links
        self.points = (tuple(tuple(flat[3 * k:3 * k + 3]) for k in range(len(links))) if flat
                       else ((0.0, 0.0, 0.0),) * len(links))
        if st is not None:
            conv = st.conv
            self.jv = np.asarray([conv._v_of[j][0] for j in conv.joint_names], dtype=np.intp)
        if want:  # the constant fields of every message, made once
            from geometry_msgs.msg import Point
            self.links_msg = list(links)
            self.points_msg = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in self.points]

    def publish(self, st, merger, header, q, now, timeout):
        """Compute and publish the terms of the joint state just turned into torques. Never raises."""
        t0 = time.perf_counter()
        try:
            fresh = merger.t_vel >= now - timeout
            if not fresh.all():
                self.skipped += 1
                missing = [merger.names[k] for k in np.flatnonzero(~fresh)[:5]]
                self.last_problem = f"no fresh velocity of {', '.join(missing)}: model_terms not published"
                self.log.warning(f"model_terms: {self.last_problem}", throttle_duration_sec=5.0)
                return
            qd = np.zeros(st.model.nv)
            qd[self.jv] = merger.vel
            t = compute(st.model, q, qd, self.links, self.points)
            msg = self.Msg()
            msg.header = header
            msg.message = t["lam_error"]
            conv = st.conv
            order = conv.model_order
            msg.position = conv.out_q(q, order)
            msg.velocity = conv.out_v(qd, order)
            msg.links = self.links_msg
            msg.points = self.points_msg
            fill(msg, t, order, conv)
            self.pub.publish(msg)
            self.published += 1
        except Exception as e:  # noqa: BLE001 - never the end of the stream thread
            self.errors += 1
            self.last_problem = f"{type(e).__name__}: {e}"
            self.log.warning(f"model_terms: {self.last_problem}", throttle_duration_sec=5.0)
        if self.timing is not None:
            self.timing.add(time.perf_counter() - t0)

    def report(self) -> dict:
        return {"published": self.published, "skipped": self.skipped, "errors": self.errors,
                "last_problem": self.last_problem,
                "percentiles_us": self.timing.percentiles_us() if self.timing else None}


def warm(st, cfg):
    """The terms' kernels once, in the stream process, before the first joint state needs them."""
    links = tuple(getattr(cfg, "model_terms_links", ()) or ())
    if st is None or not links:
        return
    m = st.model
    q, z = np.asarray(m.neutral(), dtype=float), np.zeros(m.nv)
    try:
        compute(m, q, z, links[:1], [(0.0, 0.0, 0.0)])
    except Exception:  # noqa: BLE001 - a neutral pose may be singular; the kernels are loaded anyway
        pass
