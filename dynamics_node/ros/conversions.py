"""Conversions between ROS 2 messages and the core's numpy arrays, with the node's input validation.

This module never imports rclpy (message objects are duck-typed: anything with the fields works), so
it is testable without a ROS context. Every error is a `dn.InputError` whose message names the
request field at fault (``name``, ``position``, ``velocity[3]``, ``external_wrenches[0].header.frame_id``).

Conventions of the ROS edge (documented for the services in dynamics_interfaces/srv):

* ``name`` lists the joints the arrays refer to, in the caller's order; empty = the model's joint
  order (``model.joint_names``). A non-empty ``name`` must list every model joint exactly once.
* Floating-base models: ``position`` starts with the 7 root coordinates ``[x y z qx qy qz qw]``,
  velocity/acceleration/effort with the 6 root entries ``[v_lin; omega]`` in the root frame (the
  core's convention); ``name`` lists only the joints that follow.
* Empty velocity/acceleration/effort arrays mean zeros.
* Wrenches: ``geometry_msgs/Wrench`` is linear-first (force, then torque) like the core's 6-vectors.
  A ``WrenchStamped`` acts on the link named by ``header.frame_id``; force and torque are expressed
  in that link's frame and the torque is taken about the link frame's origin (not its centre of
  mass), which is exactly the core's ``f_ext`` convention, so the numbers pass through unchanged.
  Several wrenches on one link add up.
* Results are returned as ``array.array('d')``, the storage type of generated float64[] fields.
"""
from __future__ import annotations

import array
import math
import re
from typing import Optional, Sequence

import numpy as np

from ..errors import InputError, clip

__all__ = [
    "JointOrder", "Conversions", "JointStateReader", "to_float64_array", "finite_or_raise", "all_finite",
    "check_payload", "wrench_to_tuple",
]


def to_float64_array(values) -> array.array:
    """A 1-D float64 sequence as array.array('d') (fast path of generated float64[] setters)."""
    a = np.ascontiguousarray(values, dtype=np.float64).ravel()
    return array.array("d", a.tobytes())


def _as_float_vector(values) -> np.ndarray:
    if isinstance(values, array.array) and values.typecode == "d":
        return np.frombuffer(values, dtype=np.float64) if len(values) else np.zeros(0)
    return np.asarray(values, dtype=np.float64).ravel()


def all_finite(values: np.ndarray) -> bool:
    """True when every entry is finite. Fast path for the short vectors of a request: the sum of
    finite values is finite unless it overflows, and only then is every entry checked."""
    if len(values) <= 64 and math.isfinite(sum(values.tolist())):
        return True
    return bool(np.isfinite(values).all())


def finite_or_raise(values: np.ndarray, field: str, labels: Optional[Sequence[str]] = None,
                    kind: Optional[str] = "joint") -> None:
    """Raise InputError naming field[i] (and its label: "joint 'joint3'", or "ixy" when kind is
    None) for the first NaN/inf entry."""
    ok = np.isfinite(values)
    if ok.all():
        return
    i = int(np.flatnonzero(~ok)[0])
    what = ""
    if labels is not None and i < len(labels) and labels[i]:
        what = f" ({kind} '{labels[i]}')" if kind else f" ({labels[i]})"
    raise InputError(f"{field}[{i}]{what} is {values.flat[i]}: every value must be finite")


def wrench_to_tuple(w) -> tuple:
    """geometry_msgs/Wrench -> (fx, fy, fz, tx, ty, tz): linear first, like the core's 6-vectors."""
    return (float(w.force.x), float(w.force.y), float(w.force.z),
            float(w.torque.x), float(w.torque.y), float(w.torque.z))


class JointOrder:
    """How a request's ``name`` list maps onto the model's coordinates.

    q_index[k] / v_index[k]: index in the model's q / qd of the k-th caller entry (root coordinates
    first for a floating base). ``identity`` is True when the caller uses the model's own order.
    """

    __slots__ = ("names", "q_index", "v_index", "q_labels", "v_labels", "identity")

    def __init__(self, names, q_index, v_index, q_labels, v_labels, identity):
        self.names = list(names)
        self.q_index = q_index
        self.v_index = v_index
        self.q_labels = q_labels
        self.v_labels = v_labels
        self.identity = identity


def _slice_indices(s) -> list:
    if isinstance(s, slice):
        return list(range(s.start, s.stop))
    return [int(i) for i in np.atleast_1d(s)]


class Conversions:
    """Message <-> array conversions bound to one (immutable) model; caches joint orders."""

    ROOT_Q = ("root.x", "root.y", "root.z", "root.qx", "root.qy", "root.qz", "root.qw")
    ROOT_V = ("root.vx", "root.vy", "root.vz", "root.wx", "root.wy", "root.wz")

    def __init__(self, model):
        self.model = model
        self.joint_names = tuple(model.joint_names)
        self._joint_set = frozenset(self.joint_names)
        self.floating = bool(model.floating_base)
        self.nq = int(model.nq)
        self.nv = int(model.nv)
        self.link_set = frozenset(model.link_names)
        self.mimic = dict(getattr(model, "mimic", {}) or {})
        self._q_of = {j: _slice_indices(model.q_slice(j)) for j in self.joint_names}
        self._v_of = {j: _slice_indices(model.v_slice(j)) for j in self.joint_names}
        self._cache: dict = {}
        self.model_order = self._build(self.joint_names, identity=True)

    # ---------------------------------------------------------------- joint orders
    def _build(self, names, identity=False) -> JointOrder:
        q_idx, v_idx, q_lab, v_lab = [], [], [], []
        if self.floating:
            q_idx += list(range(7))
            v_idx += list(range(6))
            q_lab += list(self.ROOT_Q)
            v_lab += list(self.ROOT_V)
        for j in names:
            qi, vi = self._q_of[j], self._v_of[j]
            q_idx += qi
            v_idx += vi
            q_lab += [j] * len(qi)
            v_lab += [j] * len(vi)
        q_idx = np.asarray(q_idx, dtype=np.intp)
        v_idx = np.asarray(v_idx, dtype=np.intp)
        if not identity:
            identity = (np.array_equal(q_idx, np.arange(self.nq))
                        and np.array_equal(v_idx, np.arange(self.nv)))
        return JointOrder(names, q_idx, v_idx, q_lab, v_lab, identity)

    def order(self, names: Sequence[str], field: str = "name") -> JointOrder:
        """The JointOrder of a request's name list; InputError for unknown/duplicate/missing joints."""
        if not names:
            return self.model_order
        key = tuple(names)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        self._check_names(key, field, require_all=True)
        jo = self._build(key)
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[key] = jo
        return jo

    def _unknown_joint(self, j, field, i) -> InputError:
        if j in self.mimic:
            master = self.mimic[j][0]
            return InputError(f"{field}[{i}]: joint '{j}' is a mimic joint (it follows '{master}'); "
                              f"give '{master}' instead")
        known = ", ".join(self.joint_names[:12]) + (", ..." if len(self.joint_names) > 12 else "")
        return InputError(f"{field}[{i}]: unknown joint '{clip(j)}' (the model's joints: {known})")

    def _check_names(self, names, field, require_all):
        seen = set()
        for i, j in enumerate(names):
            if j not in self._joint_set:
                raise self._unknown_joint(j, field, i)
            if j in seen:
                raise InputError(f"{field}[{i}]: joint '{clip(j)}' is listed twice")
            seen.add(j)
        if require_all and len(seen) != len(self.joint_names):
            missing = [j for j in self.joint_names if j not in seen]
            raise InputError(f"{field}: joint(s) {', '.join(repr(m) for m in missing)} missing "
                             f"(name must list every model joint, or be empty for the model's order)")

    def joint_subset(self, names: Sequence[str], field: str) -> list:
        """Validate a list of model joints that need not be complete (forward_joints, command_joints)."""
        names = list(names)
        self._check_names(names, field, require_all=False)
        return names

    def link(self, link: str, field: str = "link") -> str:
        if not link:
            raise InputError(f"{field}: empty link name")
        if link not in self.link_set:
            known = ", ".join(list(self.model.link_names)[:12])
            raise InputError(f"{field}: unknown link '{clip(link)}' (the model's links: {known}"
                             f"{', ...' if len(self.model.link_names) > 12 else ''})")
        return link

    # ---------------------------------------------------------------- arrays in
    def _vector(self, values, index, labels, field, size_text, empty_zero, n_model, identity):
        n = len(values)
        if n == 0 and empty_zero:
            return np.zeros(n_model)
        if n != index.size:
            raise InputError(f"{field}: expected {index.size} values ({size_text}), got {n}")
        v = _as_float_vector(values)
        if not all_finite(v):
            finite_or_raise(v, field, labels)
        if identity:
            return np.array(v, dtype=np.float64)
        out = np.empty(n_model)
        out[index] = v
        return out

    def _size_text(self, kind):
        if not self.floating:
            return "one per joint in name"
        return ("7 root coordinates, then one per joint in name" if kind == "q"
                else "6 root entries, then one per joint in name")

    def q(self, values, order: JointOrder, field: str = "position") -> np.ndarray:
        """Request positions (caller order) -> model-order q. Required (empty is an error)."""
        return self._vector(values, order.q_index, order.q_labels, field, self._size_text("q"),
                            False, self.nq, order.identity)

    def v(self, values, order: JointOrder, field: str, empty_zero: bool = True) -> np.ndarray:
        """Request velocity/acceleration/effort (caller order) -> model-order vector (empty = zeros)."""
        return self._vector(values, order.v_index, order.v_labels, field, self._size_text("v"),
                            empty_zero, self.nv, order.identity)

    # ---------------------------------------------------------------- arrays out
    @staticmethod
    def out_v(vec: np.ndarray, order: JointOrder) -> array.array:
        """Model-order nv-vector -> caller order, as array.array('d')."""
        return to_float64_array(vec if order.identity else np.asarray(vec)[order.v_index])

    @staticmethod
    def out_q(vec: np.ndarray, order: JointOrder) -> array.array:
        return to_float64_array(vec if order.identity else np.asarray(vec)[order.q_index])

    @staticmethod
    def out_matrix(mat: np.ndarray, order: JointOrder, rows: bool = True) -> array.array:
        """Row-major flattening with columns (and rows, if rows=True) permuted to the caller's order."""
        m = np.asarray(mat)
        if not order.identity:
            m = m[np.ix_(order.v_index, order.v_index)] if rows else m[:, order.v_index]
        return to_float64_array(m)

    # ---------------------------------------------------------------- wrenches
    def wrenches(self, wrench_list, field: str = "external_wrenches"):
        """WrenchStamped[] -> core f_ext {link: (fx, fy, fz, tx, ty, tz)} or None when empty.

        header.frame_id names the link; force and torque are in that link's frame, the torque about
        the link frame's origin. Wrenches on the same link are summed.
        """
        if not wrench_list:
            return None
        f_ext = {}
        for i, ws in enumerate(wrench_list):
            link = ws.header.frame_id
            self.link(link, f"{field}[{i}].header.frame_id")
            w = np.array(wrench_to_tuple(ws.wrench))
            ok = np.isfinite(w)
            if not ok.all():
                k = int(np.flatnonzero(~ok)[0])
                comp = ("force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z")[k]
                raise InputError(f"{field}[{i}].wrench.{comp} is {w[k]}: every value must be finite")
            f_ext[link] = f_ext[link] + w if link in f_ext else w
        return {k: tuple(float(x) for x in v) for k, v in f_ext.items()}

    # ---------------------------------------------------------------- trajectories
    def trajectory(self, traj, field: str = "trajectory"):
        """JointTrajectory -> (order, Q, QD, QDD) in model order (N x nq, N x nv, N x nv).

        The points' arrays are joined as raw bytes and reordered once for the whole trajectory
        (a per-point loop of numpy calls cost more than the dynamics)."""
        order = self.order(list(traj.joint_names), f"{field}.joint_names")
        pts = traj.points
        n = len(pts)
        if n == 0:
            raise InputError(f"{field}.points: empty trajectory")
        nq_c, nv_c = order.q_index.size, order.v_index.size

        def stacked(attr, width, optional):
            arrays = [getattr(p, attr) for p in pts]
            zeros = bytes(8 * width)
            chunks = []
            for k, a in enumerate(arrays):
                m = len(a)
                if m == width:
                    chunks.append(a.tobytes() if isinstance(a, array.array) and a.typecode == "d"
                                  else np.asarray(a, dtype=np.float64).tobytes())
                elif m == 0 and optional:
                    chunks.append(zeros)
                else:
                    text = self._size_text("q") if attr == "positions" else "or none"
                    raise InputError(f"{field}.points[{k}].{attr}: expected {width} values ({text}), "
                                     f"got {m}")
            out = np.frombuffer(b"".join(chunks), dtype=np.float64).reshape(n, width)
            if not all_finite(out.ravel()):
                k, i = (int(x) for x in np.argwhere(~np.isfinite(out))[0])
                raise InputError(f"{field}.points[{k}].{attr}: value {out[k, i]} is not finite")
            return out

        P = stacked("positions", nq_c, False)
        V = stacked("velocities", nv_c, True)
        A = stacked("accelerations", nv_c, True)
        if order.identity:
            return order, P.copy(), V.copy(), A.copy()
        Q = np.empty((n, self.nq))
        QD = np.empty((n, self.nv))
        QDD = np.empty((n, self.nv))
        Q[:, order.q_index] = P
        QD[:, order.v_index] = V
        QDD[:, order.v_index] = A
        return order, Q, QD, QDD

    @staticmethod
    def fill_efforts(points, TAU: np.ndarray, order: JointOrder) -> None:
        """Set every point's effort to its row of TAU (model order), in the caller's order."""
        T = np.ascontiguousarray(TAU if order.identity else TAU[:, order.v_index], dtype=np.float64)
        raw = memoryview(T.tobytes())
        step = T.shape[1] * 8
        for k, p in enumerate(points):
            a = array.array("d")
            a.frombytes(raw[k * step:(k + 1) * step])
            p.effort = a


class JointStateReader:
    """sensor_msgs/JointState -> model-order q (and qd), tolerant of order, extras, missing velocity.

    Unknown joints are ignored; every model joint must be present with a finite position (and a
    finite velocity, when velocities are given); otherwise InputError says why (for a throttled
    warning). For a floating base the root sits at its neutral pose (joint states carry no root pose).
    """

    def __init__(self, conv: Conversions):
        self.conv = conv
        self._cache: dict = {}
        self._neutral = np.asarray(conv.model.neutral(), dtype=np.float64)
        self._joint_q = np.asarray([conv._q_of[j][0] for j in conv.joint_names], dtype=np.intp)
        self._joint_v = np.asarray([conv._v_of[j][0] for j in conv.joint_names], dtype=np.intp)
        self._single_dof = all(len(conv._q_of[j]) == 1 and len(conv._v_of[j]) == 1
                               for j in conv.joint_names)

    def _plan(self, names: tuple):
        plan = self._cache.get(names)
        if plan is None:
            pos = {n: i for i, n in enumerate(names)}
            missing = [j for j in self.conv.joint_names if j not in pos]
            if missing:
                plan = ("missing", missing)
            else:
                plan = ("ok", np.asarray([pos[j] for j in self.conv.joint_names], dtype=np.intp),
                        len(names))
            if len(self._cache) > 32:
                self._cache.clear()
            self._cache[names] = plan
        return plan

    def read(self, msg, want_velocity: bool = False):
        """Return (q, qd or None); raise InputError when the message cannot be used."""
        if not self._single_dof:
            raise InputError("joint_states: the model has multi-coordinate joints, which "
                             "sensor_msgs/JointState cannot describe")
        plan = self._plan(tuple(msg.name))
        if plan[0] == "missing":
            m = plan[1]
            raise InputError(f"joint_states: model joint(s) {', '.join(m[:5])}"
                             f"{' ...' if len(m) > 5 else ''} missing from the message")
        idx, n = plan[1], plan[2]
        pos = _as_float_vector(msg.position)
        if pos.size != n:
            raise InputError(f"joint_states: {n} names but {pos.size} positions")
        qj = pos[idx]
        if not all_finite(qj):
            finite_or_raise(qj, "joint_states.position", self.conv.joint_names)
        vel = _as_float_vector(msg.velocity)
        qd = None
        if vel.size:
            if vel.size != n:
                raise InputError(f"joint_states: {n} names but {vel.size} velocities")
            vj = vel[idx]
            if not all_finite(vj):
                finite_or_raise(vj, "joint_states.velocity", self.conv.joint_names)
            if want_velocity:
                qd = np.zeros(self.conv.nv)
                qd[self._joint_v] = vj
        q = self._neutral.copy()
        q[self._joint_q] = qj
        return q, qd


def check_payload(link: str, mass: float, com, inertia) -> None:
    """Validate a SetPayload request's fields (finite, lengths, mass >= 0), naming the field. The
    link is checked against the model, and the inertia's physicality by the core's
    Model.with_payload (one rule, one tolerance)."""
    if not math.isfinite(mass) or mass < 0.0:
        raise InputError(f"mass: {mass} is not a finite value >= 0")
    c = np.asarray(com, dtype=float)
    finite_or_raise(c, "center_of_mass", ("x", "y", "z"), kind=None)
    i6 = np.asarray(inertia, dtype=float)
    if i6.size != 6:
        raise InputError(f"inertia: expected 6 values (ixx ixy ixz iyy iyz izz), got {i6.size}")
    finite_or_raise(i6, "inertia", ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"), kind=None)


# ---------------------------------------------------------------------------------------------------
# A core refusal in the request's words
_CORE_ENTRY = re.compile(r"\b(q|qd|qdd|tau|qd_minus|point)\[(\d+)\]"
                         r"|\bf_ext\[(['\"])(.*?)\3\]\[(\d)\](?: \((?:f|t)[xyz]\))?")
CORE_FIELDS = {"q": "position", "qd": "velocity", "qd_minus": "velocity", "qdd": "acceleration", "tau": "effort"}
_WRENCH_FIELDS = ("force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z")


def request_fields(message: str, conv, req) -> str:
    """``message`` of a core function called on a request's arrays, its argument entries renamed as the
    request's fields: q[i] -> position[c], qd[i] -> velocity[c], qdd[i] -> acceleration[c], tau[i] ->
    effort[c] (c: the entry's index in the request's joint order, ``name``), point[i] -> point.x (a
    Jacobian's) and f_ext['link'][i] ->
    external_wrenches[k].wrench.force.x ... (k: the first wrench on that link). Entries whose field the
    request does not have are left as they are."""
    if "[" not in message:
        return message
    try:
        order = conv.order(list(getattr(req, "name", None) or []))
    except Exception:  # noqa: BLE001 - a name list the handler refused already: keep the message
        return message

    def sub(m):
        if m.group(1) == "point":   # a Jacobian's geometry_msgs/Point
            return f"point.{'xyz'[int(m.group(2))]}" if hasattr(req, "point") and int(m.group(2)) < 3 else m.group(0)
        if m.group(1):
            field = CORE_FIELDS[m.group(1)]
            if not hasattr(req, field):
                return m.group(0)
            i = int(m.group(2))
            index = np.asarray(order.q_index if m.group(1) == "q" else order.v_index)
            hits = np.flatnonzero(index == i)
            return f"{field}[{int(hits[0]) if hits.size else i}]"
        ws = list(getattr(req, "external_wrenches", None) or [])
        on = [k for k, w in enumerate(ws) if w.header.frame_id == m.group(4)]
        if not on:
            return m.group(0)
        more = f" (with the {len(on) - 1} other(s) on '{m.group(4)}')" if len(on) > 1 else ""
        return f"external_wrenches[{on[0]}].wrench.{_WRENCH_FIELDS[int(m.group(5))]}{more}"
    return _CORE_ENTRY.sub(sub, message)

