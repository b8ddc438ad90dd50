"""URDF (and its ``<loop_joint>`` annotations) to a :class:`~dynamics_node.model.Model`.

Parsing uses ``urdf_parser_py`` (the ROS project's maintained module, from the ``urdfdom-py``
wheel) for links and joints, and ElementTree for what it does not know: numeric sanity of every
attribute (so an error can name the element), ``<transmission>`` and ``<loop_joint>``. Each problem
raises :class:`~dynamics_node.errors.ModelError` naming the file and the element, joint or link.

Model building follows Featherstone Ch. 4: a depth-first walk from the root link (siblings in URDF
order) numbers the moving bodies regularly; fixed joints weld their child link to the current body
(its inertia is merged, its frame is kept so the link can still be named); each joint's origin
becomes the tree transform X_T(i) (§4.2) expressed from the parent *body* frame.
"""
from __future__ import annotations

import math
import os
import pathlib
import threading
import warnings
from types import SimpleNamespace
import xml.etree.ElementTree as ET

import numpy as np

from .errors import ModelError
from .joints import FREE, PRISMATIC, REVOLUTE
from .layout import BODY_I, HEADER_I, J_QI, J_VI
from .loop_joints import parse_loop_joints, parse_transmissions, validate_loop_bodies
from .model import LinkFrame, Model, TreeSpec
from .spatial import rbi_from_com, rpy_to_matrix

# numeric attributes of URDF elements, checked before parsing so that errors can name the element
_NUMERIC_ATTRS = {"xyz", "rpy", "value", "ixx", "ixy", "ixz", "iyy", "iyz", "izz", "lower", "upper",
                  "effort", "velocity", "damping", "friction", "multiplier", "offset", "mechanicalReduction"}
_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
ROOT_JOINT = "root_joint"


def load_model(source, *, floating_base: bool = False, gravity=(0.0, 0.0, -9.81), armature=None,
               friction: bool = False) -> Model:
    """Load a URDF file path or URDF XML text (the ``robot_description`` string) into a Model.

    floating_base: put a 6-DoF joint (``root_joint``) between the world and the root link.
    gravity: the gravitational acceleration in the world (root) frame, m/s^2.
    armature: reflected rotor inertia (Featherstone Example 9.5, Eq. 9.28), added to the diagonal of
        H: None, one float for every joint, or {joint: value}.
    friction: make the URDF <dynamics damping friction> act (viscous and Coulomb friction).
    """
    text, src = _read_source(source)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise ModelError(f"{src}: not valid XML ({e})") from None
    if root.tag != "robot":
        raise ModelError(f"{src}: the root element is <{root.tag}>, expected <robot>")
    _check_numbers(root, src)
    g = np.asarray(gravity, dtype=float).reshape(-1)
    if g.shape != (3,) or not np.all(np.isfinite(g)):
        raise ModelError(f"{src}: gravity must be 3 finite numbers, got {gravity!r}")
    robot = _parse_with_urdf_parser(root, src)
    return _build(robot, root, src, bool(floating_base), g, armature, bool(friction))


# ---------------------------------------------------------------------------------------------
def _read_source(source):
    if isinstance(source, (bytes, bytearray)):
        source = source.decode("utf-8", errors="replace")
    if isinstance(source, str) and source.lstrip().startswith("<"):
        return source, "<robot_description>"
    if not isinstance(source, (str, os.PathLike)):
        raise ModelError(f"URDF source must be a file path or XML text, got {type(source).__name__}")
    path = pathlib.Path(source)
    if not str(source).strip():
        raise ModelError("URDF source is empty (give a file path or the robot_description XML)")
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except FileNotFoundError:
        raise ModelError(f"URDF file '{path}' not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ModelError(f"URDF file '{path}' cannot be read: {e}") from None


def _element_path(parents: list) -> str:
    parts = []
    for el in parents:
        name = el.get("name") or el.get("link")
        parts.append(f"<{el.tag} name='{name}'>" if name else f"<{el.tag}>")
    return " ".join(parts)


def _check_numbers(root, src):
    """Every numeric attribute must parse as finite numbers: the error names the element."""

    def walk(el, trail):
        trail = trail + [el]
        for key, val in el.attrib.items():
            if key not in _NUMERIC_ATTRS:
                continue
            try:
                nums = [float(x) for x in val.split()]
            except ValueError:
                raise ModelError(f"{src}: {_element_path(trail)}: attribute {key}='{val}' is not a number") from None
            if not all(math.isfinite(x) for x in nums):
                raise ModelError(f"{src}: {_element_path(trail)}: attribute {key}='{val}' is not finite (NaN or inf)")
            if key in ("xyz", "rpy") and len(nums) != 3:
                raise ModelError(f"{src}: {_element_path(trail)}: attribute {key}='{val}' needs 3 numbers")
        for ch in el:
            walk(ch, trail)

    walk(root, [])


_PARSER_LOCK = threading.Lock()  # urdf_parser_py reports through a module-level handler we swap


def _parse_with_urdf_parser(root, src):
    from urdf_parser_py import urdf as up
    from urdf_parser_py.xml_reflection import core

    reduced = ET.Element("robot", root.attrib)
    for ch in root:
        if ch.tag in ("link", "joint", "material"):
            reduced.append(ch)
    if not reduced.get("name"):
        reduced.set("name", "robot")
    with _PARSER_LOCK:
        old = core.on_error
        core.on_error = lambda message: None  # unknown tags are ours to read; errors raise below
        try:
            return up.URDF.from_xml_string(ET.tostring(reduced, encoding="unicode"))
        except Exception as e:  # ParseError carries the element path
            msg = " ".join(str(e).split())
            raise ModelError(f"{src}: {msg}") from None
        finally:
            core.on_error = old


def _pose(origin):
    if origin is None:
        return np.eye(3), np.zeros(3)
    xyz = origin.xyz if origin.xyz is not None else [0.0, 0.0, 0.0]
    rpy = origin.rpy if origin.rpy is not None else [0.0, 0.0, 0.0]
    return rpy_to_matrix(rpy), np.array(xyz, dtype=float)


def _link_inertia(link, src):
    """(mass, com (3,), I about the CoM in link axes) of a URDF link, validated."""
    ine = link.inertial
    if ine is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    m = float(ine.mass) if ine.mass is not None else 0.0
    if m < 0:
        raise ModelError(f"{src}: link '{link.name}': negative mass {m}")
    R, c = _pose(ine.origin)
    i = ine.inertia
    if i is None:
        I = np.zeros((3, 3))
    else:
        I = np.array([[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]], dtype=float)
    ev = np.linalg.eigvalsh(I)
    tol = 1e-9 * max(1e-12, float(np.abs(ev).max()))
    if ev.min() < -tol:
        raise ModelError(f"{src}: link '{link.name}': inertia is not positive semi-definite "
                         f"(principal moments {np.round(ev, 12).tolist()})")
    if ev[0] + ev[1] < ev[2] - tol:
        raise ModelError(f"{src}: link '{link.name}': inertia violates the triangle inequality "
                         f"(principal moments {np.round(ev, 12).tolist()}: the largest exceeds the sum of the others)")
    return m, c, R @ I @ R.T


def _unit_axis(j, src):
    a = np.array(j.axis if j.axis is not None else [1.0, 0.0, 0.0], dtype=float)
    n = float(np.linalg.norm(a))
    if n < 1e-12:
        raise ModelError(f"{src}: joint '{j.name}': zero axis {a.tolist()}")
    return a / n


def _plane_basis(a):
    """Right-handed (u, w, a) with a the plane normal: u is the joint frame's x axis projected into the
    plane (its y axis if a is along x), w = a x u. For the usual axis z, (u, w) = (x, y)."""
    t = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    u = t - np.dot(t, a) * a
    u /= np.linalg.norm(u)
    return u, np.cross(a, u)


def _build(robot, xml_root, src, floating_base, gravity, armature, friction) -> Model:
    links = {}
    for link in robot.links:
        if link.name in links:
            raise ModelError(f"{src}: two links named '{link.name}'")
        links[link.name] = link
    if not links:
        raise ModelError(f"{src}: no <link> elements: no root link")
    joints = []
    seen = set()
    for j in robot.joints:
        if j.name in seen:
            raise ModelError(f"{src}: two joints named '{j.name}'")
        seen.add(j.name)
        if j.type not in _JOINT_TYPES:
            raise ModelError(f"{src}: joint '{j.name}': unknown type '{j.type}'")
        if not j.parent:
            raise ModelError(f"{src}: joint '{j.name}': missing <parent link=...>")
        if not j.child:
            raise ModelError(f"{src}: joint '{j.name}': missing <child link=...>")
        if j.parent not in links:
            raise ModelError(f"{src}: joint '{j.name}': unknown parent link '{j.parent}'")
        if j.child not in links:
            raise ModelError(f"{src}: joint '{j.name}': unknown child link '{j.child}'")
        if j.parent == j.child:
            raise ModelError(f"{src}: joint '{j.name}': parent and child are the same link '{j.parent}'")
        joints.append(j)

    parent_joint = {}
    for j in joints:
        if j.child in parent_joint:
            raise ModelError(f"{src}: link '{j.child}' is the child of two joints, '{parent_joint[j.child].name}' and "
                             f"'{j.name}': a loop in the tree (close loops with <loop_joint>)")
        parent_joint[j.child] = j
    roots = [n for n in links if n not in parent_joint]
    if not roots:
        raise ModelError(f"{src}: no root link: every link is the child of a joint (the joints form a loop)")
    if len(roots) > 1:
        raise ModelError(f"{src}: {len(roots)} root links ({', '.join(repr(r) for r in roots)}): "
                         "a URDF must be one tree; connect them with joints")
    root_link = roots[0]
    children = {n: [] for n in links}
    for j in joints:
        children[j.parent].append(j)

    inertia = {n: _link_inertia(links[n], src) for n in links}

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
        spec["body_label"].append(f"link '{link}' (joint '{joint}')")
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
    _walk_children(root_link, children, link_frames, add_body, weld, tree_joints, visited, src)
    unreached = [n for n in links if n not in link_frames]
    if unreached:
        raise ModelError(f"{src}: links {', '.join(repr(n) for n in unreached)} are not connected to the root "
                         f"link '{root_link}' (their joints form a loop)")

    jtype = spec["jtype"]
    nvj = [6 if t == FREE else 1 for t in jtype]
    nqj = [7 if t == FREE else 1 for t in jtype]
    vi = np.concatenate([[0], np.cumsum(nvj)]).astype(int)
    qi = np.concatenate([[0], np.cumsum(nqj)]).astype(int)
    nvt, nqt = int(vi[-1]), int(qi[-1])

    # ---- mimic joints (explicit constraints, Featherstone §9.6)
    by_name = {j.name: (j, bodies) for j, bodies in tree_joints}
    mimic = {}
    for j, bodies in tree_joints:
        if j.mimic is None:
            continue
        if j.type not in ("revolute", "continuous", "prismatic"):
            raise ModelError(f"{src}: joint '{j.name}': only revolute, continuous and prismatic joints can mimic")
        mul = float(j.mimic.multiplier) if j.mimic.multiplier is not None else 1.0
        off = float(j.mimic.offset) if j.mimic.offset is not None else 0.0
        master = j.mimic.joint
        chain = [j.name]
        while True:
            if master not in by_name:
                raise ModelError(f"{src}: joint '{j.name}': mimics unknown or fixed joint '{master}'")
            mj = by_name[master][0]
            if mj.type not in ("revolute", "continuous", "prismatic"):
                raise ModelError(f"{src}: joint '{j.name}': mimics '{master}' of type {mj.type} (must be 1-DoF)")
            if mj.mimic is None:
                break
            if master in chain:
                raise ModelError(f"{src}: joint '{j.name}': mimic joints form a cycle ({' -> '.join(chain + [master])})")
            chain.append(master)
            m2 = float(mj.mimic.multiplier) if mj.mimic.multiplier is not None else 1.0
            o2 = float(mj.mimic.offset) if mj.mimic.offset is not None else 0.0
            mul, off = mul * m2, mul * o2 + off
            master = mj.mimic.joint
        mimic[j.name] = (master, mul, off)

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
        if j.name != ROOT_JOINT:
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
    arm = np.zeros(nvt)
    damp = np.zeros(nvt)
    coul = np.zeros(nvt)
    joint_by_name = {j.name: (j, bodies) for j, bodies in tree_joints}
    if armature is not None:
        if isinstance(armature, dict):
            items = armature.items()
        else:
            items = [(n, armature) for n, _ in joint_by_name.items() if n != ROOT_JOINT]
        for n, val in items:
            if n not in joint_by_name:
                raise ModelError(f"{src}: armature given for unknown joint '{n}'")
            val = float(val)
            if not math.isfinite(val) or val < 0:
                raise ModelError(f"{src}: armature of joint '{n}' must be a finite number >= 0, got {val}")
            for b in joint_by_name[n][1]:
                if jtype[b] != FREE:
                    arm[vi[b]:vi[b] + nvj[b]] = val
    if friction:
        for j, bodies in tree_joints:
            if j.dynamics is None:
                continue
            for b in bodies:
                if jtype[b] == FREE:
                    continue
                d = j.dynamics.damping
                f = j.dynamics.friction
                damp[vi[b]] = float(d) if d is not None else 0.0
                coul[vi[b]] = float(f) if f is not None else 0.0
                if damp[vi[b]] < 0 or coul[vi[b]] < 0:
                    raise ModelError(f"{src}: joint '{j.name}': <dynamics> damping and friction must be >= 0")

    limits = {}
    for j, _ in tree_joints:
        if j.name == ROOT_JOINT or j.limit is None:
            continue
        limits[j.name] = tuple(float(x) if x is not None else float("nan")
                               for x in (j.limit.lower, j.limit.upper, j.limit.effort, j.limit.velocity))

    tree_joint_names = {j.name for j, _ in tree_joints}
    loops, actuated = _loops_and_transmissions(xml_root, set(link_frames), tree_joint_names, joint_names, src)

    ts = TreeSpec(
        name=robot.name or "robot", source=src, root_link=root_link, floating_base=floating_base,
        gravity=gravity, parent=spec["parent"], jtype=jtype, axis=spec["axis"], ET=spec["ET"], rT=spec["rT"],
        mass=spec["mass"], h=spec["h"], Ibar=spec["Ibar"], body_link=spec["body_link"],
        body_joint=spec["body_joint"], body_label=spec["body_label"], armature=arm, damping=damp, coulomb=coul,
        link_frames=link_frames, link_inertia=inertia, joint_names=tuple(joint_names), q_src=q_src, q_mul=q_mul,
        q_off=q_off, v_src=v_src, v_mul=v_mul, mimic=mimic, joint_kinds=kinds, q_slices=q_slices,
        v_slices=v_slices, joint_limits=limits, loops=loops, actuated_joints=actuated, xml_root=xml_root,
    )
    model = Model(ts)
    if loops:
        validate_loop_bodies(loops, model.body_of, src)
    _warn_singular(model)
    return model


def _walk_children(lname, children, link_frames, add_body, weld, tree_joints, visited, src):
    """Depth-first from link ``lname`` (already placed at ``fr``), siblings in URDF order."""
    # explicit stack of iterators keeps the depth-first, siblings-in-order walk without recursion limits
    stack = [(lname, iter(children[lname]))]
    while stack:
        cur, it = stack[-1]
        j = next(it, None)
        if j is None:
            stack.pop()
            continue
        if j.child in visited:
            raise ModelError(f"{src}: joint '{j.name}' closes a loop at link '{j.child}'")
        visited.add(j.child)
        pf = link_frames[cur]
        Rj, pj = _pose(j.origin)
        R = pf.R @ Rj  # joint frame in the parent body's frame
        p = pf.p + pf.R @ pj
        b = pf.body
        if j.type == "fixed":
            weld(j.child, b, R, p)
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


def _loops_and_transmissions(xml_root, link_names, tree_joint_names, joint_names, src):
    has_loops = xml_root.find("loop_joint") is not None
    loops = tuple(parse_loop_joints(xml_root, link_names, tree_joint_names, src)) if has_loops else ()
    # transmissions may drive mimic followers or fixed joints (grippers): accept every URDF joint name,
    # keep the independent ones as the actuated set
    all_joints = {el.get("name") for el in xml_root.findall("joint")}
    actuated = parse_transmissions(xml_root, all_joints, src)
    if actuated is None:
        return loops, tuple(joint_names)
    return loops, tuple(j for j in joint_names if j in set(actuated))


def _warn_singular(model: Model):
    """A body whose subtree has no inertia about/along its joint makes H singular: warn, naming it."""
    from .algorithms.crba import mass_matrix_tree

    if model.nvt == 0:
        return
    H = mass_matrix_tree(model, np.zeros(model.nqt) if not model.floating_base else _neutral_tree(model))
    vi = model.mi[HEADER_I + J_VI::BODY_I]
    for i in range(model.nb):
        d = H[vi[i], vi[i]]
        if d <= model.singular_tol:
            warnings.warn(f"{model.source}: {model.body_label[i]} and the links it carries have no inertia "
                          "about its joint axis: the mass matrix is singular, so forward dynamics will refuse "
                          "(inverse dynamics and gravity still work)", stacklevel=3)


def _neutral_tree(model):
    q = np.zeros(model.nqt)
    qi = model.mi[HEADER_I + J_QI::BODY_I]
    for i in range(model.nb):
        if model.jtype[i] == FREE:
            q[qi[i] + 6] = 1.0
    return q
