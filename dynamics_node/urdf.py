"""URDF (and its ``<loop_joint>`` annotations) to a :class:`~dynamics_node.model.Model`.

Reading (:mod:`dynamics_node.urdf_source`, :mod:`dynamics_node.urdf_xml`): the description is read defensively
(regular files up to 64 MB, ``package://``, ``*.xacro`` through xacro, XML text), then only what dynamics uses is
taken from the ElementTree: links' ``<inertial>``, joints, ``<mimic>``, ``<dynamics>``, ``<transmission>``,
``<loop_joint>``. Visual, collision, gazebo, ros2_control and unknown content is never looked at, so it cannot stop
a load. A problem that makes the model unusable raises :class:`~dynamics_node.errors.ModelError` naming the file and
the element, joint or link; a model that loads but is not physical (an inertia breaking the triangle inequality or
indefinite, a massless subtree on a movable joint) or whose description names unknown joints (``<transmission>``,
``<mimic>``) loads with a :class:`~dynamics_node.errors.ModelWarning` saying what and by how much; ``strict=True``
makes every such warning a ModelError.

Model building follows Featherstone Ch. 4: a depth-first walk from the root link (siblings in URDF order) numbers
the moving bodies regularly; fixed joints weld their child link to the current body (its inertia is merged, its
frame is kept so the link can still be named); each joint's origin becomes the tree transform X_T(i) (§4.2)
expressed from the parent *body* frame. Every step is linear in the size of the description (mimic chains are
resolved once per joint; the load-time check of H is the articulated-body pass of Table 7.1 at the neutral
configuration, 6x6 per body, no dense H).
"""
from __future__ import annotations

import math
import warnings
from types import SimpleNamespace

import numpy as np

from .errors import ModelError, ModelWarning, clip, clip_names
from .joints import FREE, PRISMATIC, REVOLUTE, joint_dims
from .layout import B_ET, B_ET_N, B_H, B_H_N, B_IBAR, B_IBAR_N, B_M, B_RT, B_RT_N, D_ARMATURE, D_S, D_S_N, J_NV, J_VI
from .packed import body_floats, body_ints, dof_floats
from .loop_joints import parse_loop_joints, parse_transmissions, validate_loop_bodies
from .model import LinkFrame, Model, TreeSpec
from .spatial import rbi_from_com, rpy_to_matrix, skew
from .urdf_source import MAX_BYTES, parse_xml, read_description  # noqa: F401
from .urdf_xml import PARAM_LIMIT, ignored_elements, link_inertia, misplaced, read_joints, read_links, unit_vector

ROOT_JOINT = "root_joint"


class Parsed(SimpleNamespace):
    """A description read and parsed once (read_urdf), which load_model takes as its source again and again."""


def read_urdf(source, xacro_args=None) -> Parsed:
    """The description of ``source`` (as load_model takes it) read, expanded (xacro) and parsed."""
    text, src = read_description(source, xacro_args)
    return Parsed(root=parse_xml(text, clip(src, 160)), text=text, src=clip(src, 160))


def load_model(source, *, floating_base: bool = False, gravity=(0.0, 0.0, -9.81), armature=None,
               friction=False, strict: bool = False, xacro_args=None) -> Model:
    """Load a URDF file path, ``package://`` URI, ``*.xacro`` file, URDF XML text or read_urdf's Parsed into a Model.

    floating_base: put a 6-DoF joint (``root_joint``) between the world and the root link.
    gravity: the gravitational acceleration in the world (root) frame, m/s^2.
    armature: reflected rotor inertia (Featherstone Example 9.5, Eq. 9.28), added to the diagonal of
        H: None, one float for every joint, or {joint: value}.
    friction: True makes the URDF <dynamics damping friction> act (viscous and sign() Coulomb friction);
        a dn.JointFriction turns friction on with the joint law's coefficients (joint_law.py:
        viscous, Coulomb, its velocity scale, Stribeck, offset), the URDF's where it names none.
    strict: raise ModelError where the model would load with a ModelWarning (non-physical inertia,
        singular H, a transmission or mimic naming an unknown joint).
    xacro_args: ``$(arg name)`` values for a ``*.xacro`` file.
    """
    model, report = load_with_report(source, floating_base=floating_base, gravity=gravity, armature=armature,
                                     friction=friction, strict=strict, xacro_args=xacro_args)
    for msg in report.warnings:
        warnings.warn(ModelWarning(msg), stacklevel=2)
    return model


def load_with_report(source, *, floating_base=False, gravity=(0.0, 0.0, -9.81), armature=None, friction=False,
                     strict=False, xacro_args=None):
    """(model, report) where the report lists what load_model warns about (``warnings``, and per link
    ``inertia``), the fixed joints merged (``merged``: (joint, link, into link)), the mimic and
    transmission entries ignored (``ignored``) and the elements dynamics does not read
    (``ignored_elements``: {tag: count}). With strict=True the first warning is raised as ModelError."""
    floating_base = _flag(floating_base, "floating_base")
    law = friction if type(friction).__name__ == "JointFriction" else None  # the joint law's coefficients
    friction = True if law is not None else _flag(friction, "friction")
    strict = _flag(strict, "strict")
    g = _gravity(gravity)
    parsed = source if isinstance(source, Parsed) else read_urdf(source, xacro_args)
    root, text, src = parsed.root, parsed.text, parsed.src
    report = SimpleNamespace(source=src, warnings=[], inertia={}, merged=[], ignored=[],
                             ignored_elements=ignored_elements(root))
    nested = misplaced(root, text, src)  # links and joints inside an unknown element (ModelError: all of them)
    if nested:
        report.warnings.append(f"{src}: {nested}")
    links = read_links(root, src)
    joints = read_joints(root, src)
    model = _build(root.get("name") or "robot", links, joints, root, src, floating_base, g, armature,
                   law or friction, report)
    if strict and report.warnings:
        more = len(report.warnings) - 1
        raise ModelError(f"{report.warnings[0]} (strict=True{f'; {more} more problems' if more else ''})")
    return model, report


def _flag(v, name):
    if not isinstance(v, (bool, np.bool_)):
        raise ModelError(f"option {name} must be True or False, got {clip(repr(v), 80)}")
    return bool(v)


def _gravity(gravity):
    try:
        if isinstance(gravity, (str, bytes)) or np.iscomplexobj(gravity):
            raise TypeError
        g = np.array(gravity, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        g = None
    if g is None or g.shape != (3,) or not np.all(np.isfinite(g)) or np.any(np.abs(g) > PARAM_LIMIT):
        raise ModelError(f"option gravity must be 3 finite numbers (m/s^2), got {clip(repr(gravity), 80)}")
    return g


def _number(v, what):
    try:
        if isinstance(v, (bool, np.bool_, str, bytes)) or np.iscomplexobj(v):
            raise TypeError
        x = float(v)
    except (TypeError, ValueError):
        raise ModelError(f"{what} must be a number, got {clip(repr(v), 80)}") from None
    if not (math.isfinite(x) and 0 <= x <= PARAM_LIMIT):  # as every number of the description (urdf_xml.py)
        raise ModelError(f"{what} must be a number from 0 to {PARAM_LIMIT:g} kg m^2 (kg on a prismatic joint: larger "
                         f"ones overflow the algorithms' products, and no rotor comes near), got {clip(repr(v), 80)}")
    return x


def _pose(rpy, xyz):
    return rpy_to_matrix(rpy), np.array(xyz, dtype=float)


def _unit_axis(j, src):
    return unit_vector(j.axis, src, f"joint '{clip(j.name, 80)}'")


def _plane_basis(a):
    """Right-handed (u, w, a) with a the plane normal: u is the joint frame's x axis projected into the
    plane (its y axis if a is along x), w = a x u. For the usual axis z, (u, w) = (x, y)."""
    t = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    u = t - np.dot(t, a) * a
    u /= np.linalg.norm(u)
    return u, np.cross(a, u)


def _build(name, links, joints, xml_root, src, floating_base, gravity, armature, friction, report) -> Model:
    if not links:
        raise ModelError(f"{src}: no <link> elements: no root link")
    parent_joint = {}
    for j in joints:
        jn = clip(j.name, 80)
        for role, ln in (("parent", j.parent), ("child", j.child)):
            if ln not in links:
                raise ModelError(f"{src}: joint '{jn}': unknown {role} link '{clip(ln, 80)}'")
        if j.parent == j.child:
            raise ModelError(f"{src}: joint '{jn}': parent and child are the same link '{clip(j.parent, 80)}'")
        if j.child in parent_joint:
            raise ModelError(f"{src}: link '{clip(j.child, 80)}' is the child of two joints, "
                             f"'{clip(parent_joint[j.child].name, 80)}' and '{jn}': a loop in the tree "
                             "(close loops with <loop_joint>)")
        parent_joint[j.child] = j
        if floating_base and j.name == ROOT_JOINT and j.type != "fixed":
            raise ModelError(f"{src}: joint '{ROOT_JOINT}' ({j.type}): with floating_base=True that name is the "
                             "floating base's joint; rename the URDF joint or load with floating_base=False")
    roots = [n for n in links if n not in parent_joint]
    if not roots:
        raise ModelError(f"{src}: no root link: every link is the child of a joint (the joints form a loop)")
    if len(roots) > 1:
        raise ModelError(f"{src}: {len(roots)} root links ({clip_names(roots)}): "
                         "a URDF must be one tree; connect them with joints")
    root_link = roots[0]
    children = {n: [] for n in links}
    for j in joints:
        children[j.parent].append(j)

    inertia = {n: link_inertia(links[n], src, report) for n in links}
    # ---- depth-first walk
    spec = dict(parent=[], jtype=[], axis=[], ET=[], rT=[], mass=[], h=[], Ibar=[], body_link=[],
                body_joint=[], body_label=[])
    link_frames = {}
    tree_joints = []  # (urdf joint, list of bodies) in DFS order

    def add_body(parent, jtype, axis, R, p, link, joint):
        spec["parent"].append(parent)
        spec["jtype"].append(jtype)
        spec["axis"].append(np.asarray(axis, dtype=float))
        spec["ET"].append(R.T.copy())
        spec["rT"].append(np.asarray(p, dtype=float).copy())
        spec["mass"].append(0.0)
        spec["h"].append(np.zeros(3))
        spec["Ibar"].append(np.zeros((3, 3)))
        spec["body_link"].append(link)
        spec["body_joint"].append(joint)
        spec["body_label"].append(f"link '{clip(link, 80)}' (joint '{clip(joint, 80)}')")
        return len(spec["parent"]) - 1

    def weld(link_name, body, R, p):
        link_frames[link_name] = LinkFrame(body, R, p)
        m, c, Ic = inertia[link_name]
        if body >= 0 and (m > 0 or np.any(Ic)):
            mm, hh, Ib = rbi_from_com(m, p + R @ c, R @ Ic @ R.T)
            spec["mass"][body] += mm
            spec["h"][body] = spec["h"][body] + hh
            spec["Ibar"][body] = spec["Ibar"][body] + Ib

    I3, z3 = np.eye(3), np.zeros(3)
    if floating_base:
        b0 = add_body(-1, FREE, z3, I3, z3, root_link, ROOT_JOINT)
        weld(root_link, b0, I3, z3)
        tree_joints.append((SimpleNamespace(name=ROOT_JOINT, type="floating", mimic=None, dynamics=None,
                                            limit=None), [b0]))
    else:
        weld(root_link, -1, I3, z3)

    visited = {root_link}
    _walk_children(root_link, children, link_frames, add_body, weld, tree_joints, visited, src, spec, report)
    unreached = [n for n in links if n not in link_frames]
    if unreached:
        raise ModelError(f"{src}: links {clip_names(unreached)} are not connected to the root "
                         f"link '{clip(root_link, 80)}' (their joints form a loop)")

    jtype = spec["jtype"]
    nqj, nvj = joint_dims(jtype)
    vi = np.concatenate([[0], np.cumsum(nvj)]).astype(int)
    qi = np.concatenate([[0], np.cumsum(nqj)]).astype(int)
    nvt, nqt = int(vi[-1]), int(qi[-1])
    mimic = _resolve_mimic(tree_joints, {j.name for j in joints}, src, report)

    q_src = np.zeros(nqt, dtype=int)
    q_mul = np.ones(nqt)
    q_off = np.zeros(nqt)
    v_src = np.zeros(nvt, dtype=int)
    v_mul = np.ones(nvt)
    q_slices, v_slices, joint_names, kinds = {}, {}, [], {}
    nq = nv = 0
    for j, bodies in tree_joints:
        if j.name in mimic:
            continue
        nqj_, nvj_ = sum(nqj[b] for b in bodies), sum(nvj[b] for b in bodies)
        if j.name != ROOT_JOINT or not floating_base:
            joint_names.append(j.name)
            kinds[j.name] = j.type
        q_slices[j.name] = slice(nq, nq + nqj_)
        v_slices[j.name] = slice(nv, nv + nvj_)
        tq = [k for b in bodies for k in range(qi[b], qi[b] + nqj[b])]
        tv = [k for b in bodies for k in range(vi[b], vi[b] + nvj[b])]
        q_src[tq] = np.arange(nq, nq + nqj_)
        v_src[tv] = np.arange(nv, nv + nvj_)
        nq += nqj_
        nv += nvj_
    for j, bodies in tree_joints:
        if j.name in mimic:
            master, mul, off = mimic[j.name]
            b = bodies[0]
            q_src[qi[b]] = q_slices[master].start
            q_mul[qi[b]] = mul
            q_off[qi[b]] = off
            v_src[vi[b]] = v_slices[master].start
            v_mul[vi[b]] = mul

    # ---- per-dof options
    arm, damp, coul = np.zeros(nvt), np.zeros(nvt), np.zeros(nvt)
    joint_by_name = {j.name: (j, bodies) for j, bodies in tree_joints}
    if armature is not None:
        if isinstance(armature, dict):
            items = armature.items()
        else:
            val = _number(armature, "option armature")
            items = [(n, val) for n in joint_by_name if not (floating_base and n == ROOT_JOINT)]
        for n, val in items:
            if not isinstance(n, str) or n not in joint_by_name:
                raise ModelError(f"{src}: option armature given for unknown joint {clip(repr(n), 80)}")
            val = _number(val, f"option armature of joint '{clip(n, 80)}'")
            for b in joint_by_name[n][1]:
                if jtype[b] != FREE:
                    arm[vi[b]:vi[b] + nvj[b]] = val
    if friction:
        for j, bodies in tree_joints:
            if j.dynamics is None:
                continue
            d, f = j.dynamics
            if d < 0 or f < 0:
                raise ModelError(f"{src}: joint '{clip(j.name, 80)}': <dynamics> damping and friction must be >= 0")
            for b in bodies:
                if jtype[b] != FREE:
                    damp[vi[b]], coul[vi[b]] = d, f
    from .joint_law import apply

    dofs = {j.name: np.array([vi[b] for b in bodies if jtype[b] != FREE], dtype=np.int64)
            for j, bodies in tree_joints if not (floating_base and j.name == ROOT_JOINT)}
    law = apply(friction, list(dofs), dofs, {"viscous": damp, "coulomb": coul}, src)

    limits = {j.name: j.limit for j, _ in tree_joints if j.limit is not None}
    tree_joint_names = {j.name for j, _ in tree_joints}
    loops, actuated = _loops_and_transmissions(xml_root, set(link_frames), tree_joint_names, joint_names, src, report)

    ts = TreeSpec(
        name=name, source=src, root_link=root_link, floating_base=floating_base,
        gravity=gravity, parent=spec["parent"], jtype=jtype, axis=spec["axis"], ET=spec["ET"], rT=spec["rT"],
        mass=spec["mass"], h=spec["h"], Ibar=spec["Ibar"], body_link=spec["body_link"],
        body_joint=spec["body_joint"], body_label=spec["body_label"], armature=arm, damping=law["viscous"],
        coulomb=law["coulomb"], link_frames=link_frames, link_inertia=inertia, joint_names=tuple(joint_names),
        q_src=q_src, q_mul=q_mul, q_off=q_off, v_src=v_src, v_mul=v_mul, mimic=mimic, joint_kinds=kinds,
        q_slices=q_slices, v_slices=v_slices, joint_limits=limits, loops=loops, actuated_joints=actuated,
        xml_root=xml_root, friction_law={k: law[k] for k in law if k not in ("viscous", "coulomb")},
    )
    model = Model(ts)
    if loops:
        validate_loop_bodies(loops, model.body_of, src)
    _check_mass_matrix(model, report)
    return model


def _resolve_mimic(tree_joints, all_joint_names, src, report):
    """{follower: (independent master, multiplier, offset)} of the mimic joints (explicit constraints,
    Featherstone §9.6), chains composed: q_f = m_f q_g + o_f with q_g = m_g q_h + o_g gives
    q_f = m_f m_g q_h + (m_f o_g + o_f). Each joint is resolved once (linear in the number of joints).
    A <mimic> naming an unknown joint is ignored with a warning (the joint stays independent)."""
    by_name = {j.name: j for j, _ in tree_joints}
    followers = [j for j, _ in tree_joints if j.mimic is not None]
    for j in followers:
        jn, master = clip(j.name, 80), j.mimic.joint
        if j.type not in ("revolute", "continuous", "prismatic"):
            raise ModelError(f"{src}: joint '{jn}': only revolute, continuous and prismatic joints can mimic")
        if master not in by_name:
            if master in all_joint_names:
                raise ModelError(f"{src}: joint '{jn}': mimics fixed joint '{clip(master, 80)}' (must be 1-DoF)")
            report.ignored.append(f"<mimic> of joint '{jn}': unknown joint '{clip(master, 80)}' "
                                  "(the joint is independent)")
            report.warnings.append(f"{src}: joint '{jn}': <mimic joint='{clip(master, 80)}'> names an unknown "
                                   "joint: the <mimic> is ignored, the joint is independent")
            j.mimic = None
            continue
        mj = by_name[master]
        if mj.type not in ("revolute", "continuous", "prismatic"):
            raise ModelError(f"{src}: joint '{jn}': mimics '{clip(master, 80)}' of type {mj.type} (must be 1-DoF)")
    resolved = {}
    for j in followers:
        if j.mimic is None or j.name in resolved:
            continue
        chain, on_chain, cur = [], set(), j
        while cur.mimic is not None and cur.name not in resolved:
            if cur.name in on_chain:
                names = [c.name for c in chain[[c.name for c in chain].index(cur.name):]] + [cur.name]
                raise ModelError(f"{src}: joint '{clip(j.name, 80)}': mimic joints form a cycle "
                                 f"({clip(' -> '.join(names))})")
            on_chain.add(cur.name)
            chain.append(cur)
            cur = by_name[cur.mimic.joint]
        master, mul, off = resolved.get(cur.name, (cur.name, 1.0, 0.0))
        for f in reversed(chain):
            mul, off = f.mimic.multiplier * mul, f.mimic.multiplier * off + f.mimic.offset
            if not (math.isfinite(mul) and math.isfinite(off) and abs(mul) <= PARAM_LIMIT and abs(off) <= PARAM_LIMIT):
                raise ModelError(f"{src}: joint '{clip(f.name, 80)}': the chained <mimic> multipliers and offsets "
                                 f"reach {mul:.3g}·q + {off:.3g} (magnitude over {PARAM_LIMIT:g}: they would overflow)")
            resolved[f.name] = (master, mul, off)
    return resolved


def _walk_children(lname, children, link_frames, add_body, weld, tree_joints, visited, src, spec, report):
    """Depth-first from link ``lname``, siblings in URDF order (an explicit stack: no recursion limit)."""
    stack = [(lname, iter(children[lname]))]
    while stack:
        cur, it = stack[-1]
        j = next(it, None)
        if j is None:
            stack.pop()
            continue
        if j.child in visited:
            raise ModelError(f"{src}: joint '{clip(j.name, 80)}' closes a loop at link '{clip(j.child, 80)}'")
        visited.add(j.child)
        pf = link_frames[cur]
        Rj, pj = _pose(j.rpy, j.xyz)
        R = pf.R @ Rj  # joint frame in the parent body's frame
        p = pf.p + pf.R @ pj
        b = pf.body
        if j.type == "fixed":
            weld(j.child, b, R, p)
            into = spec["body_link"][b] if b >= 0 else next(iter(link_frames))
            report.merged.append((j.name, j.child, into))
        elif j.type in ("revolute", "continuous", "prismatic"):
            a = _unit_axis(j, src)
            nb = add_body(b, PRISMATIC if j.type == "prismatic" else REVOLUTE, a, R, p, j.child, j.name)
            weld(j.child, nb, np.eye(3), np.zeros(3))
            tree_joints.append((j, [nb]))
        elif j.type == "planar":
            a = _unit_axis(j, src)
            u, w = _plane_basis(a)
            b1 = add_body(b, PRISMATIC, u, R, p, j.child, j.name)
            b2 = add_body(b1, PRISMATIC, w, np.eye(3), np.zeros(3), j.child, j.name)
            b3 = add_body(b2, REVOLUTE, a, np.eye(3), np.zeros(3), j.child, j.name)
            weld(j.child, b3, np.eye(3), np.zeros(3))
            tree_joints.append((j, [b1, b2, b3]))
        elif j.type == "floating":
            nb = add_body(b, FREE, np.zeros(3), R, p, j.child, j.name)
            weld(j.child, nb, np.eye(3), np.zeros(3))
            tree_joints.append((j, [nb]))
        stack.append((j.child, iter(children[j.child])))


def _loops_and_transmissions(xml_root, link_names, tree_joint_names, joint_names, src, report):
    has_loops = xml_root.find("loop_joint") is not None
    loops = tuple(parse_loop_joints(xml_root, link_names, tree_joint_names, src)) if has_loops else ()
    # transmissions may drive mimic followers or fixed joints (grippers): all joint names; actuated: independent
    all_joints = {el.get("name") for el in xml_root.findall("joint")}
    actuated = parse_transmissions(xml_root, all_joints, src, report)
    if actuated is None:
        return loops, tuple(joint_names)
    act = set(actuated)
    return loops, tuple(j for j in joint_names if j in act)


def _check_mass_matrix(model: Model, report):
    """Warn where H is singular or not positive definite at the neutral configuration, naming the body.

    The articulated-body inertias of Table 7.1 (pass 2) at q = neutral: D_i = S_i^T I^A_i S_i are the
    pivots of a factorisation of H, so H is positive definite iff every D_i is; the ABA and the L^T D L
    refuse (SingularMassMatrixError) exactly where a pivot is <= singular_tol. O(n): one 6x6 inertia per
    body, never a dense H. At q = 0 every joint transform is the identity, so ^iX_lambda(i) = X_T(i).
    Also refuses a model whose derived inertias overflow."""
    nb, nvt = model.nb, model.nvt
    if nb == 0:
        return
    mf, tol = model.mf, model.singular_tol
    B = body_floats(mf, nb)
    Dof = dof_floats(mf, nb, nvt)
    vi = body_ints(model.mi, nb)[:, J_VI]
    nvj = body_ints(model.mi, nb)[:, J_NV]
    parent = model.parent
    if not np.all(np.isfinite(B)):
        i = int(np.nonzero(~np.all(np.isfinite(B), axis=1))[0][0])
        raise ModelError(f"{model.source}: {model.body_label[i]}: its inertia or placement overflows")
    IA = np.zeros((nb, 6, 6))
    for i in range(nb):
        m, h, Ib = B[i, B_M], B[i, B_H:B_H + B_H_N], B[i, B_IBAR:B_IBAR + B_IBAR_N].reshape(3, 3)
        hx = skew(h)
        IA[i, :3, :3], IA[i, :3, 3:], IA[i, 3:, :3], IA[i, 3:, 3:] = Ib, hx, hx.T, m * np.eye(3)
    problems, last = [], list(range(nb))  # last[i]: last body of i's subtree (contiguous, regular numbering)
    for i in range(nb - 1, 0, -1):
        if parent[i] >= 0:
            last[parent[i]] = max(last[parent[i]], last[i])
    for i in range(nb - 1, -1, -1):
        Ii = IA[i]
        if not np.all(np.isfinite(Ii)):
            raise ModelError(f"{model.source}: {model.body_label[i]}: the inertia it carries overflows")
        S = Dof[vi[i]:vi[i] + nvj[i], D_S:D_S + D_S_N].T
        U = Ii @ S
        D = S.T @ U + np.diag(Dof[vi[i]:vi[i] + nvj[i], D_ARMATURE])
        dmin = float(np.linalg.eigvalsh(D)[0]) if nvj[i] > 1 else float(D[0, 0])
        ok = dmin > tol
        if not ok:
            problems.append((i, dmin))
        p = parent[i]
        if p < 0:
            continue
        Ia = Ii - U @ np.linalg.solve(D, U.T) if ok else Ii
        E, r = B[i, B_ET:B_ET + B_ET_N].reshape(3, 3), B[i, B_RT:B_RT + B_RT_N]
        X = np.zeros((6, 6))  # X_T(i) = rot(E) xlt(r) (Eq. 2.24): [[E, 0], [-E r x, E]]
        X[:3, :3], X[3:, 3:], X[3:, :3] = E, E, -E @ skew(r)
        IA[p] += X.T @ Ia @ X
    for i, d in reversed(problems):
        link = clip(model.body_link[i], 80)
        bad = [n for n in report.inertia if i <= model.link_frames[n].body <= last[i]]
        if d < -tol:
            why = (f"the mass matrix is not positive definite at {model.body_label[i]} (pivot {d:.3g}"
                   f"{', non-physical inertia of ' + clip_names(bad, 120) if bad else ''})")
        else:
            why = (f"{model.body_label[i]} and the links it carries have no inertia about its joint axis: "
                   "the mass matrix is singular")
        report.warnings.append(f"{model.source}: {why}: forward dynamics and anything that inverts H will refuse "
                               f"(SingularMassMatrixError naming link '{link}'); inverse dynamics and gravity work")
