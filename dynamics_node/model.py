"""The system model (Featherstone Ch. 4, Table 4.3) and its per-call work arrays.

A :class:`Model` is built once (by :func:`dynamics_node.load_model`) and is immutable afterwards:
its numeric arrays are read-only and every "change" (gravity, payload) returns a new Model. The
arrays a computation writes live apart from it, in a :class:`Data` (Pinocchio's Model/Data split);
the functional API allocates one per call unless you pass your own.

Layout. The kinematic tree has ``nb`` bodies numbered regularly (parent(i) < i, §4.1.2), in the
order of a depth-first walk from the root link with siblings in URDF order. Body i is moved by one
*kernel* joint (see :mod:`dynamics_node.joints`) and carries the inertia of every link welded to it
by fixed joints. ``parent[i] == -1`` means the fixed base (the world, whose frame is the URDF root
link's frame). Tree coordinates q_t (size nqt) and velocities (size nvt) hold every kernel joint;
the user's coordinates q (size nq) leave out mimic followers, which are explicit constraints
q_t = G q + offset (Featherstone §9.6, Eq. 3.11 "explicit constraints").

For the compiled kernels the model is packed into two flat arrays (one int, one float), because a
numba call costs per argument (and several times more for a 2-D array than a 1-D one):

``mi`` = [nb, nvt, nqt, 0, then per body: parent, jtype, qi, vi, nv]
``mf`` = [gx, gy, gz, singular_tol, then per body BODY_STRIDE floats, then per dof DOF_STRIDE floats]
  body: E_T (9, row-major), r_T (3), m (1), h (3), Ibar (9)        -- X_T(i) and rbi(m, h, Ibar)
  dof:  S (6), armature, damping, coulomb
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import InputError
from ._fast import AVAILABLE as SHIM_AVAILABLE
from .joints import FREE, motion_subspace

from .spatial import rbi_from_com
from .layout import BODY_STRIDE, DOF_STRIDE, HEADER_F, HEADER_I, WORK_BODY, WORK_DOF, WORK_EXTRA  # noqa: F401


@dataclass(frozen=True)
class LinkFrame:
    """Where a link's frame sits: on body ``body`` (-1 = the fixed base) at pose (R, p) in that
    body's frame (R: the link's axes in body coordinates, p: its origin)."""

    body: int
    R: np.ndarray
    p: np.ndarray


@dataclass(frozen=True)
class Payload:
    link: str
    mass: float
    com: tuple
    inertia: tuple  # ixx ixy ixz iyy iyz izz about the CoM, link axes


@dataclass
class TreeSpec:
    """Everything that defines a Model, as plain Python values (the builder's output)."""

    name: str
    source: str
    root_link: str
    floating_base: bool
    gravity: np.ndarray
    # per body
    parent: list
    jtype: list
    axis: list  # unit axis (3,) for revolute/prismatic, zeros for free
    ET: list  # (3,3) each
    rT: list  # (3,) each
    mass: list
    h: list
    Ibar: list  # (3,3)
    body_link: list  # name of the link whose frame is the body frame
    body_joint: list  # name of the URDF joint that moves the body
    body_label: list  # description used in messages ("joint 'j1' (link 'l1')")
    # per tree joint (URDF name) -> list of bodies
    # per dof
    armature: list
    damping: list
    coulomb: list
    # links
    link_frames: dict  # link -> LinkFrame
    link_inertia: dict  # link -> (mass, com (3,), I_com (3,3)) in link frame, for summaries
    # user coordinates
    joint_names: tuple
    q_src: np.ndarray  # tree q slot -> user q slot
    q_mul: np.ndarray
    q_off: np.ndarray
    v_src: np.ndarray
    v_mul: np.ndarray
    mimic: dict
    joint_kinds: dict  # joint -> URDF type
    q_slices: dict
    v_slices: dict
    joint_limits: dict  # joint -> (lower, upper, effort, velocity) or None
    loops: tuple = ()
    actuated_joints: tuple = ()
    xml_root: object = None
    payloads: dict = field(default_factory=dict)
    warnings: tuple = ()


class Model:
    """An immutable kinematic-tree model with its packed arrays. See the module docstring."""

    __slots__ = (
        "_spec", "name", "source", "root_link", "floating_base", "gravity", "joint_names", "nq",
        "nv", "nb", "nqt", "nvt", "link_names", "mimic", "loops", "loop_joints", "actuated_joints",
        "xml_root", "payloads", "mi", "mf", "parent", "jtype", "body_label", "link_frames",
        "has_mimic", "G", "q_src", "q_mul", "q_off", "v_src", "v_mul", "work_size", "_frozen",
        "joint_limits", "joint_kinds", "_q_slices", "_v_slices", "body_link", "_link_index",
        "link_body", "link_R", "link_p", "singular_tol", "_kmi", "_kmf", "_direct", "loop_data",
    )

    def __init__(self, spec: TreeSpec):
        object.__setattr__(self, "_frozen", False)
        self._spec = spec
        self.name = spec.name
        self.source = spec.source
        self.root_link = spec.root_link
        self.floating_base = spec.floating_base
        self.gravity = _ro(np.array(spec.gravity, dtype=float))
        self.joint_names = tuple(spec.joint_names)
        self.mimic = dict(spec.mimic)
        self.loops = tuple(spec.loops)
        self.loop_joints = tuple(lj.name for lj in spec.loops)
        self.actuated_joints = tuple(spec.actuated_joints)
        self.xml_root = spec.xml_root
        self.payloads = dict(spec.payloads)
        self.joint_limits = dict(spec.joint_limits)
        self.joint_kinds = dict(spec.joint_kinds)
        self._q_slices = dict(spec.q_slices)
        self._v_slices = dict(spec.v_slices)
        nb = len(spec.parent)
        self.nb = nb
        self.parent = _ro(np.array(spec.parent, dtype=np.int64))
        self.jtype = _ro(np.array(spec.jtype, dtype=np.int64))
        self.body_label = tuple(spec.body_label)
        self.body_link = tuple(spec.body_link)
        self.link_frames = dict(spec.link_frames)
        self.link_names = tuple(spec.link_frames)
        self._link_index = {n: k for k, n in enumerate(self.link_names)}
        self.link_body = _ro(np.array([f.body for f in spec.link_frames.values()], dtype=np.int64))
        self.link_R = _ro(np.array([f.R for f in spec.link_frames.values()]).reshape(-1, 9).ravel())
        self.link_p = _ro(np.array([f.p for f in spec.link_frames.values()]).reshape(-1, 3).ravel())

        nvj = [6 if t == FREE else 1 for t in spec.jtype]
        nqj = [7 if t == FREE else 1 for t in spec.jtype]
        qi = np.concatenate([[0], np.cumsum(nqj)[:-1]]).astype(np.int64) if nb else np.zeros(0, np.int64)
        vi = np.concatenate([[0], np.cumsum(nvj)[:-1]]).astype(np.int64) if nb else np.zeros(0, np.int64)
        self.nqt = int(sum(nqj))
        self.nvt = int(sum(nvj))
        self.q_src = _ro(np.asarray(spec.q_src, dtype=np.int64))
        self.q_mul = _ro(np.asarray(spec.q_mul, dtype=float))
        self.q_off = _ro(np.asarray(spec.q_off, dtype=float))
        self.v_src = _ro(np.asarray(spec.v_src, dtype=np.int64))
        self.v_mul = _ro(np.asarray(spec.v_mul, dtype=float))
        self.nq = int(self.q_src.max() + 1) if self.nqt else 0
        self.nv = int(self.v_src.max() + 1) if self.nvt else 0
        self.has_mimic = bool(spec.mimic)
        # user coordinates are the tree's and the C shim is built: calls may take the shortest route
        self._direct = SHIM_AVAILABLE and not self.has_mimic
        G = np.zeros((self.nvt, self.nv))
        G[np.arange(self.nvt), self.v_src] = self.v_mul
        self.G = _ro(G)

        # ---- pack for the kernels
        mi = np.zeros(HEADER_I + 5 * nb, dtype=np.int64)
        mi[0], mi[1], mi[2] = nb, self.nvt, self.nqt
        body = mi[HEADER_I:].reshape(nb, 5)
        body[:, 0] = spec.parent
        body[:, 1] = spec.jtype
        body[:, 2] = qi
        body[:, 3] = vi
        body[:, 4] = nvj
        mass = np.array(spec.mass, dtype=float)
        h = np.array(spec.h, dtype=float).reshape(nb, 3)
        Ib = np.array(spec.Ibar, dtype=float).reshape(nb, 9)
        for pl in spec.payloads.values():
            self._add_payload_inertia(pl, mass, h, Ib)
        mf = np.zeros(HEADER_F + BODY_STRIDE * nb + DOF_STRIDE * self.nvt)
        mf[0:3] = spec.gravity
        B = mf[HEADER_F:HEADER_F + BODY_STRIDE * nb].reshape(nb, BODY_STRIDE)
        B[:, 0:9] = np.array(spec.ET, dtype=float).reshape(nb, 9)
        B[:, 9:12] = np.array(spec.rT, dtype=float).reshape(nb, 3)
        B[:, 12] = mass
        B[:, 13:16] = h
        B[:, 16:25] = Ib
        D = mf[HEADER_F + BODY_STRIDE * nb:].reshape(self.nvt, DOF_STRIDE)
        for i in range(nb):
            S = motion_subspace(spec.jtype[i], np.asarray(spec.axis[i], dtype=float))
            D[vi[i]:vi[i] + nvj[i], 0:6] = S.T
        D[:, 6] = spec.armature
        D[:, 7] = spec.damping
        D[:, 8] = spec.coulomb
        # H is declared singular when a pivot falls below this (scaled by the model's inertia size)
        scale = 1.0 + float(np.sum(mass)) + float(np.sum(np.abs(Ib)))
        self.singular_tol = 1e-11 * scale
        mf[3] = self.singular_tol
        # The kernels get private writable copies: numba dispatches read-only arrays through a slow
        # path (measured +0.25 us per call). Nothing writes them; the public views are read-only.
        self._kmi = mi
        self._kmf = mf
        self.mi = _ro(mi.view())
        self.mf = _ro(mf.view())
        self.work_size = WORK_BODY * nb + WORK_DOF * self.nvt + WORK_EXTRA
        # the loop joints' constants packed for the kernels (algorithms/loops/data.py), None without
        self.loop_data = _pack_loops(self) if self.loops else None
        self._frozen = True

    # ------------------------------------------------------------------ immutability
    def __setattr__(self, key, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(f"Model is immutable: cannot set '{key}' (use with_gravity / with_payload)")
        object.__setattr__(self, key, value)

    # ------------------------------------------------------------------ queries
    def q_slice(self, joint: str) -> slice:
        """Where the named joint's position coordinates sit in q."""
        try:
            return self._q_slices[joint]
        except KeyError:
            raise InputError(f"unknown joint '{joint}' (model joints: {', '.join(self.joint_names)})") from None

    def v_slice(self, joint: str) -> slice:
        """Where the named joint's velocity coordinates sit in qd, qdd and tau."""
        try:
            return self._v_slices[joint]
        except KeyError:
            raise InputError(f"unknown joint '{joint}' (model joints: {', '.join(self.joint_names)})") from None

    def link_index(self, link: str) -> int:
        try:
            return self._link_index[link]
        except (KeyError, TypeError):
            raise InputError(f"unknown link '{link}' (model links: {', '.join(self.link_names)})") from None

    def body_of(self, link: str) -> int:
        """Index of the body the link is welded to (-1: the fixed base)."""
        return self.link_frames[self.link_names[self.link_index(link)]].body

    def neutral(self) -> np.ndarray:
        """The zero configuration (identity quaternion for a floating base)."""
        q = np.zeros(self.nq)
        if self.floating_base:
            q[6] = 1.0
        return q

    def total_mass(self) -> float:
        """Mass of every link (those welded to the fixed base included) plus payloads."""
        moving = float(np.sum(self.mf[HEADER_F + 12:HEADER_F + BODY_STRIDE * self.nb:BODY_STRIDE]))
        fixed = sum(self._spec.link_inertia[n][0] for n, f in self.link_frames.items() if f.body < 0)
        fixed += sum(p.mass for p in self.payloads.values() if self.link_frames[p.link].body < 0)
        return moving + fixed

    def body_inertia(self, i: int):
        """rbi(m, h, Ibar) of body i in its own frame (payloads included)."""
        B = self.mf[HEADER_F + BODY_STRIDE * i:HEADER_F + BODY_STRIDE * (i + 1)]
        return float(B[12]), B[13:16].copy(), B[16:25].reshape(3, 3).copy()

    def summary(self) -> str:
        lines = [
            f"model '{self.name}' from {self.source}",
            f"  {len(self.joint_names)} joints, nq = {self.nq}, nv = {self.nv}, {self.nb} moving bodies, "
            f"{len(self.link_names)} links, total mass {self.total_mass():.4g} kg",
            f"  root link '{self.root_link}'" + (" (floating base)" if self.floating_base else " (fixed base)"),
            f"  gravity {tuple(float(g) for g in self.gravity)}",
        ]
        for j in self.joint_names:
            lines.append(f"  q[{_sl(self._q_slices[j])}] qd[{_sl(self._v_slices[j])}]  {j} ({self.joint_kinds.get(j, '?')})")
        for f, (m, mul, off) in self.mimic.items():
            lines.append(f"  mimic: {f} = {mul:g} * {m} + {off:g}")
        if self.loop_joints:
            lines.append(f"  loop joints: {', '.join(self.loop_joints)}")
        for p in self.payloads.values():
            lines.append(f"  payload {p.mass:g} kg on '{p.link}'")
        return "\n".join(lines)

    def __repr__(self):
        return f"<dynamics_node.Model '{self.name}' nq={self.nq} nv={self.nv} joints={len(self.joint_names)}>"

    # ------------------------------------------------------------------ derived models
    def with_gravity(self, gravity) -> "Model":
        g = np.asarray(gravity, dtype=float).reshape(-1)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise InputError(f"gravity must be 3 finite numbers, got {gravity!r}")
        spec = _copy_spec(self._spec, gravity=g)
        return Model(spec)

    def with_payload(self, link: str, mass: float, com_xyz=(0.0, 0.0, 0.0), inertia6=(0.0,) * 6) -> "Model":
        """A new model with a payload rigidly attached to ``link`` (replacing any payload there).
        ``mass`` 0 removes it. ``inertia6`` = (ixx ixy ixz iyy iyz izz) about the CoM, link axes."""
        self.link_index(link)
        vals = [float(mass), *map(float, com_xyz), *map(float, inertia6)]
        if len(vals) != 10 or not np.all(np.isfinite(vals)):
            raise InputError("payload needs a finite mass, 3 centre-of-mass numbers and 6 inertia numbers")
        if mass < 0:
            raise InputError(f"payload mass must be >= 0, got {mass}")
        I = _inertia_matrix(inertia6)
        ev = np.linalg.eigvalsh(I)
        if ev.min() < -1e-12 * max(1.0, ev.max()) or (ev.sum() - 2 * ev.max()) < -1e-9 * max(1.0, ev.max()):
            raise InputError(f"payload inertia {tuple(inertia6)} is not physical (must be positive semi-definite "
                             "and satisfy the triangle inequality)")
        payloads = dict(self._spec.payloads)
        payloads.pop(link, None)
        if mass > 0:
            payloads[link] = Payload(link, float(mass), tuple(map(float, com_xyz)), tuple(map(float, inertia6)))
        return Model(_copy_spec(self._spec, payloads=payloads))

    def _add_payload_inertia(self, pl: Payload, mass, h, Ib):
        fr = self._spec.link_frames[pl.link]
        if fr.body < 0:
            return  # welded to the fixed base: no effect on the dynamics
        c = fr.R @ np.asarray(pl.com) + fr.p
        Ic = fr.R @ _inertia_matrix(pl.inertia) @ fr.R.T
        m, hh, Ibar = rbi_from_com(pl.mass, c, Ic)
        mass[fr.body] += m
        h[fr.body] += hh
        Ib[fr.body] += Ibar.reshape(9)


class Data:
    """Per-call work arrays of a model (Pinocchio's Data). Not thread-safe: one per thread."""

    __slots__ = ("work", "model")

    def __init__(self, model: Model):
        self.model = model
        self.work = np.empty(model.work_size)


def _pack_loops(model: Model):
    from .algorithms.loops.data import pack  # imported here: the loop package imports this module
    from .algorithms.ltdl import dof_parents

    return pack(model, dof_parents(model))


def _inertia_matrix(i6) -> np.ndarray:
    ixx, ixy, ixz, iyy, iyz, izz = (float(v) for v in i6)
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def _copy_spec(spec: TreeSpec, **changes) -> TreeSpec:
    d = dict(spec.__dict__)
    d.update(changes)
    return TreeSpec(**d)


def _ro(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _sl(s: slice) -> str:
    return f"{s.start}" if s.stop - s.start == 1 else f"{s.start}:{s.stop}"
