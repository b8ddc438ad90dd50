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

``mi`` = [header H_*, then per body the J_* fields: parent, joint type, qi, vi, nv]
``mf`` = [header HF_* (gravity, singular tolerance), then per body the B_* fields (X_T(i) and
rbi(m, h, Ibar)), then per dof the D_* fields (S, armature, damping, Coulomb friction)]
with the fields, offsets and sizes of the tables in :mod:`dynamics_node.layout`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import InputError, clip, clip_names
from ._fast import AVAILABLE as SHIM_AVAILABLE
from .joints import FREE, joint_dims, motion_subspace

from .spatial import rbi_from_com
from .packed import body_floats, body_ints, dof_floats, sizes
from .layout import (B_ET, B_ET_N, B_H, B_H_N, B_IBAR, B_IBAR_N, B_M, B_RT, B_RT_N, D_ARMATURE,
                     D_S, D_S_N, LAW_COLUMNS, H_NB, H_NQT, H_NVT, H_NVU, MH_NQ, MH_NV, MIMIC_HEAD,
                     MIMIC_Q, MIMIC_V, MQ_MUL, MQ_OFF, MQ_SRC, MV_MUL, MV_SRC, HF_GRAVITY,
                     HF_GRAVITY_N, HF_TOL, J_DEND, J_NV, J_PARENT, J_QI, J_TYPE, J_VI, WORK_BODY, WORK_DOF, WORK_EXTRA,
                     W_A, W_A_N, W_E, W_E_N, W_F, W_F_N, W_R, W_R_N, W_V, W_V_N)


def _check_depth_first(parent, labels):
    """The kernels take a body's subtree as the bodies (and dofs) that follow it (depth-first order,
    Featherstone §6.5): every body's parent is the body before it or one of that body's ancestors."""
    for i in range(1, len(parent)):
        a = i - 1
        while a >= 0 and a != parent[i]:
            a = parent[a]
        if a != parent[i]:
            raise ValueError(f"bodies are not in depth-first order: {labels[i]!r} (body {i}) follows "
                             f"{labels[i - 1]!r}, which is not its parent {int(parent[i])} or a descendant of it")


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
    friction_law: dict = None  # per dof: coulomb_velocity, stribeck, stribeck_velocity, offset (None: zeros)


class Model:
    """An immutable kinematic-tree model with its packed arrays. See the module docstring."""

    __slots__ = (
        "_spec", "name", "source", "root_link", "floating_base", "gravity", "joint_names", "nq",
        "nv", "nb", "nqt", "nvt", "link_names", "mimic", "loops", "loop_joints", "actuated_joints",
        "xml_root", "payloads", "mi", "mf", "parent", "jtype", "body_label", "link_frames",
        "has_mimic", "G", "q_src", "q_mul", "q_off", "v_src", "v_mul", "work_size", "_frozen",
        "joint_limits", "joint_kinds", "_q_slices", "_v_slices", "body_link", "_link_index",
        "link_body", "link_R", "link_p", "singular_tol", "_kmi", "_kmf", "_direct", "loop_data",
        "_sparse",
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
        _check_depth_first(self.parent, spec.body_label)
        self.jtype = _ro(np.array(spec.jtype, dtype=np.int64))
        self.body_label = tuple(spec.body_label)
        self.body_link = tuple(spec.body_link)
        self.link_frames = dict(spec.link_frames)
        self.link_names = tuple(spec.link_frames)
        self._link_index = {n: k for k, n in enumerate(self.link_names)}
        self.link_body = _ro(np.array([f.body for f in spec.link_frames.values()], dtype=np.int64))
        self.link_R = _ro(np.array([f.R for f in spec.link_frames.values()]).reshape(-1, 9).ravel())
        self.link_p = _ro(np.array([f.p for f in spec.link_frames.values()]).reshape(-1, 3).ravel())

        nqj, nvj = joint_dims(spec.jtype)
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
        if self.has_mimic and self.nv >= self.nvt:   # the kernels tell a mimic model by nv < nvt (H_NVU)
            raise ValueError(f"mimic joints but {self.nv} user velocity coordinates of {self.nvt}")
        # user coordinates are the tree's and the C shim is built: calls may take the shortest route
        self._direct = SHIM_AVAILABLE and not self.has_mimic
        # G (Eq. 3.11, qd_t = G qd) is used only with mimic joints; without, it would be an nv x nv identity
        # (800 MB for a 10,000-joint chain), so it is None
        G = None
        if self.has_mimic:
            G = np.zeros((self.nvt, self.nv))
            G[np.arange(self.nvt), self.v_src] = self.v_mul
            G = _ro(G)
        self.G = G

        # ---- pack for the kernels
        ni, mimic_at = sizes(nb, self.nvt)   # the mimic section, if any, starts at mimic_at in mf
        mi = np.zeros(ni, dtype=np.int64)
        mi[H_NB], mi[H_NVT], mi[H_NQT], mi[H_NVU] = nb, self.nvt, self.nqt, self.nv
        J = body_ints(mi, nb)
        J[:, J_PARENT] = spec.parent
        J[:, J_TYPE] = spec.jtype
        J[:, J_QI] = qi
        J[:, J_VI] = vi
        J[:, J_NV] = nvj
        dend = np.asarray(vi, dtype=np.int64) + np.asarray(nvj, dtype=np.int64)
        for i in range(nb - 1, -1, -1):   # children follow their parents: a child's end is final here
            if spec.parent[i] >= 0:
                dend[spec.parent[i]] = max(dend[spec.parent[i]], dend[i])
        J[:, J_DEND] = dend
        mass = np.array(spec.mass, dtype=float)
        h = np.array(spec.h, dtype=float).reshape(nb, 3)
        Ib = np.array(spec.Ibar, dtype=float).reshape(nb, 9)
        for pl in spec.payloads.values():
            self._add_payload_inertia(pl, mass, h, Ib)
        mf = np.zeros(mimic_at + ((MIMIC_HEAD + MIMIC_Q * self.nqt + MIMIC_V * self.nvt) if self.has_mimic else 0))
        mf[HF_GRAVITY:HF_GRAVITY + HF_GRAVITY_N] = spec.gravity
        B = body_floats(mf, nb)
        B[:, B_ET:B_ET + B_ET_N] = np.array(spec.ET, dtype=float).reshape(nb, 9)
        B[:, B_RT:B_RT + B_RT_N] = np.array(spec.rT, dtype=float).reshape(nb, 3)
        B[:, B_M] = mass
        B[:, B_H:B_H + B_H_N] = h
        B[:, B_IBAR:B_IBAR + B_IBAR_N] = Ib
        D = dof_floats(mf, nb, self.nvt)
        if self.has_mimic:   # layout.MODEL_MIMIC_*: the map from user to tree coordinates (Eq. 3.19)
            mf[mimic_at + MH_NQ], mf[mimic_at + MH_NV] = self.nq, self.nv
            Mq = mf[mimic_at + MIMIC_HEAD:mimic_at + MIMIC_HEAD + MIMIC_Q * self.nqt].reshape(self.nqt, MIMIC_Q)
            Mq[:, MQ_SRC], Mq[:, MQ_MUL], Mq[:, MQ_OFF] = self.q_src, self.q_mul, self.q_off
            Mv = mf[mimic_at + MIMIC_HEAD + MIMIC_Q * self.nqt:].reshape(self.nvt, MIMIC_V)
            Mv[:, MV_SRC], Mv[:, MV_MUL] = self.v_src, self.v_mul
        for i in range(nb):
            S = motion_subspace(spec.jtype[i], np.asarray(spec.axis[i], dtype=float))
            D[vi[i]:vi[i] + nvj[i], D_S:D_S + D_S_N] = S.T
        D[:, D_ARMATURE] = spec.armature
        law = {"viscous": spec.damping, "coulomb": spec.coulomb, **(spec.friction_law or {})}
        for key, col in LAW_COLUMNS:
            D[:, col] = law.get(key, 0.0)
        # H is declared singular when a pivot falls below this (scaled by the model's inertia size)
        scale = 1.0 + float(np.sum(mass)) + float(np.sum(np.abs(Ib)))
        self.singular_tol = 1e-11 * scale
        mf[HF_TOL] = self.singular_tol
        # The kernels get private writable copies: numba dispatches read-only arrays through a slower
        # path. Nothing writes them; the public views are read-only.
        self._kmi = mi
        self._kmf = mf
        self.mi = _ro(mi.view())
        self.mf = _ro(mf.view())
        self.work_size = WORK_BODY * nb + WORK_DOF * self.nvt + WORK_EXTRA
        # the loop joints' constants packed for the kernels (loop_data.py), None without
        self.loop_data = _pack_loops(self) if self.loops else None
        # the sparse-matrix method's pattern and ordering (algorithms/loops/sparse.py), made at its
        # first call and kept: {include loop joints: SparsePattern}
        self._sparse = {}
        self._frozen = True

    # ------------------------------------------------------------------ immutability
    def __setattr__(self, key, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(f"Model is immutable: cannot set '{key}' (use with_gravity / with_payload)")
        object.__setattr__(self, key, value)

    # ------------------------------------------------------------------ queries
    @property
    def loop_clusters(self) -> tuple:
        """The minimal loop clusters (Featherstone §8.9): a tuple of tuples of loop-joint names.  Two
        loops are coupled when they share a tree joint; a cluster is a connected component of that
        relation.  Loop joints keep model.loop_joints' order within a cluster, clusters are ordered by
        their first loop joint; () without loop joints."""
        return self.loop_data.clusters.names if self.loop_data is not None else ()

    def q_slice(self, joint: str) -> slice:
        """Where the named joint's position coordinates sit in q."""
        try:
            return self._q_slices[joint]
        except KeyError:
            raise InputError(f"unknown joint {_name(joint)} (model joints: {clip_names(self.joint_names)})") from None

    def v_slice(self, joint: str) -> slice:
        """Where the named joint's velocity coordinates sit in qd, qdd and tau."""
        try:
            return self._v_slices[joint]
        except KeyError:
            raise InputError(f"unknown joint {_name(joint)} (model joints: {clip_names(self.joint_names)})") from None

    def link_index(self, link: str) -> int:
        try:
            return self._link_index[link]
        except (KeyError, TypeError):
            raise InputError(f"unknown link {_name(link)} (model links: {clip_names(self.link_names)})") from None

    def body_of(self, link: str) -> int:
        """Index of the body the link is welded to (-1: the fixed base)."""
        return self.link_frames[self.link_names[self.link_index(link)]].body

    def neutral(self) -> np.ndarray:
        """The zero configuration (identity quaternion for a floating base and every floating joint)."""
        q = np.zeros(self.nq)
        qi = body_ints(self.mi, self.nb)[:, J_QI]
        for i in np.nonzero(self.jtype == FREE)[0]:  # every free joint (the base and floating joints)
            q[self.q_src[qi[i] + 6]] = 1.0
        return q

    def total_mass(self) -> float:
        """Mass of every link (those welded to the fixed base included) plus payloads."""
        moving = float(np.sum(body_floats(self.mf, self.nb)[:, B_M]))
        fixed = sum(self._spec.link_inertia[n][0] for n, f in self.link_frames.items() if f.body < 0)
        fixed += sum(p.mass for p in self.payloads.values() if self.link_frames[p.link].body < 0)
        return moving + fixed

    def body_inertia(self, i: int):
        """rbi(m, h, Ibar) of body i in its own frame (payloads included)."""
        B = body_floats(self.mf, self.nb)[i]
        return float(B[B_M]), B[B_H:B_H + B_H_N].copy(), B[B_IBAR:B_IBAR + B_IBAR_N].reshape(3, 3).copy()

    def summary(self) -> str:
        lines = [
            f"model '{self.name}' from {self.source}",
            f"  {len(self.joint_names)} joints, nq = {self.nq}, nv = {self.nv}, {self.nb} moving bodies, "
            f"{len(self.link_names)} links, total mass {self.total_mass():.4g} kg",
            f"  root link '{self.root_link}'" + (" (floating base)" if self.floating_base else " (fixed base)"),
            f"  gravity {tuple(float(g) for g in self.gravity)}",
        ]
        for j in self.joint_names:
            kind = self.joint_kinds.get(j, "?")
            lines.append(f"  q[{_sl(self._q_slices[j])}] qd[{_sl(self._v_slices[j])}]  {j} ({kind})")
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
        g = _numbers(gravity, 3, "gravity")
        spec = _copy_spec(self._spec, gravity=g)
        return Model(spec)

    def with_payload(self, link: str, mass: float, com_xyz=(0.0, 0.0, 0.0), inertia6=(0.0,) * 6) -> "Model":
        """A new model with a payload rigidly attached to ``link`` (replacing any payload there).
        ``mass`` 0 removes it. ``inertia6`` = (ixx ixy ixz iyy iyz izz) about the CoM, link axes."""
        self.link_index(link)
        mass = float(_numbers(mass, 1, "mass")[0])
        com_xyz = tuple(_numbers(com_xyz, 3, "com_xyz"))
        inertia6 = tuple(_numbers(inertia6, 6, "inertia6"))
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
    """The work array of one model's computations (Pinocchio's Data): pass ``data=`` to a core
    function and it computes in this buffer instead of the calling thread's own, leaving named
    quantities readable afterwards (body coordinates, spatial vectors angular-first, Featherstone
    Table 5.1's notation): ``E``, ``r`` (^iX_λ(i) = rot(E) xlt(r), Eq. 2.24), ``v``, ``a`` (body
    velocities and accelerations, Eqs. 5.14-5.15) and ``f`` (body forces, Eq. 5.16) after
    inverse_dynamics / bias_forces; ``E``, ``r``, ``a``, ``f`` after gravity (v is then not
    computed). A Data serves the model it was made for and every model of the same tree
    (with_payload / with_gravity); any other is refused at entry (dispatch.check_data). Not
    thread-safe: one per thread."""

    __slots__ = ("work", "model")

    def __init__(self, model: Model):
        if type(model) is not Model:
            from .errors import InputError

            raise InputError(f"Data(model) needs a dn.Model, got {type(model).__name__}")
        self.model = model
        self.work = np.zeros(model.work_size)

    def _block(self, start: int, width: int) -> np.ndarray:
        nb = self.model.nb
        return self.work[start * nb:(start + width) * nb].reshape(nb, width)

    # the work array's per-body blocks, by layout.py's names (W_<NAME> offset, W_<NAME>_N width)
    E = property(lambda self: self._block(W_E, W_E_N).reshape(-1, 3, 3), doc="(nb, 3, 3) rotations E_i of ^iX_λ(i)")
    r = property(lambda self: self._block(W_R, W_R_N), doc="(nb, 3) translations r_i of ^iX_λ(i), parent axes")
    v = property(lambda self: self._block(W_V, W_V_N), doc="(nb, 6) body velocities [ω; v_O], body axes")
    a = property(lambda self: self._block(W_A, W_A_N), doc="(nb, 6) body accelerations (gravity as a_0 = -a_g)")
    f = property(lambda self: self._block(W_F, W_F_N), doc="(nb, 6) net body forces I a + v x* I v - f^x")

    def __repr__(self):
        return f"Data(model '{self.model.name}', {self.work.size} doubles)"


def _pack_loops(model: Model):
    from .loop_data import pack  # imported here: the loop package imports this module
    from .topology import dof_parents

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


def _name(x) -> str:
    """A name as messages echo it: quoted, cut to MESSAGE_CLIP characters with its length said."""
    return repr(clip(x)) if isinstance(x, str) else f"{clip(repr(x))} (a {type(x).__name__}, not a name)"


def _numbers(x, n, what) -> np.ndarray:
    """x as n finite floats, or InputError naming ``what`` (wrong type, length or a non-finite value)."""
    if isinstance(x, (str, bytes)):
        raise InputError(f"{what} must be {n} number{'s' if n > 1 else ''}, got {type(x).__name__} {clip(repr(x))}")
    try:
        a = np.asarray(x, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be {n} number{'s' if n > 1 else ''}, got {type(x).__name__} "
                         f"{clip(repr(x))}") from None
    if a.shape != (n,):
        raise InputError(f"{what} must be {n} number{'s' if n > 1 else ''}, got {a.size}")
    if not np.all(np.isfinite(a)):
        k = int(np.flatnonzero(~np.isfinite(a))[0])
        raise InputError(f"{what}[{k}] is {a[k]}: every value must be finite")
    return a

