"""The part of a URDF that dynamics uses, read from the ElementTree (no other URDF parser).

Read: ``<robot name>``; each ``<link>``'s name and first ``<inertial>`` (origin, mass, inertia); each
``<joint>``'s name, type, parent, child, origin, axis, limit, dynamics and mimic. ``<transmission>`` and
``<loop_joint>`` are read by :mod:`dynamics_node.loop_joints`. Nothing else is looked at: ``<visual>``,
``<collision>``, ``<material>``, ``<gazebo>``, ``<ros2_control>`` and unknown elements cannot stop a
load (they are counted for ``dynamics_summary --check``). :func:`link_inertia` turns a link's
``<inertial>`` into its mass, centre of mass and inertia, and reports one that is not physical.

Numbers: every attribute dynamics reads must be finite, and lengths, masses, inertias, mimic
multipliers and offsets, damping and friction must have a magnitude of at most :data:`PARAM_LIMIT`
(1e30 in SI units: no robot comes near, and it keeps every product the algorithms form far from
overflowing). Errors name the file and the element.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from .errors import ModelError, clip
from .spatial import rpy_to_matrix

PARAM_LIMIT = 1e30
JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
DYNAMICS_TAGS = {"link", "joint", "transmission", "loop_joint"}


def element_path(*parts) -> str:
    out = []
    for el in parts:
        if isinstance(el, str):
            out.append(f"<{el}>")
            continue
        name = el.get("name") or el.get("link") or el.get("joint")
        out.append(f"<{clip(el.tag, 40)} name='{clip(name, 80)}'>" if name else f"<{clip(el.tag, 40)}>")
    return " ".join(out)


def numbers(val, n, src, where, key, bounded=True):
    """Parse ``val`` (attribute ``key`` of element ``where``) as n finite numbers (n=None: any count)."""
    try:
        nums = [float(x) for x in val.split()]
    except (ValueError, AttributeError):
        raise ModelError(f"{src}: {where}: attribute {key}='{clip(val, 80)}' is not a number") from None
    if n is not None and len(nums) != n:
        raise ModelError(f"{src}: {where}: attribute {key}='{clip(val, 80)}' needs {n} number{'s' * (n > 1)}")
    if not all(math.isfinite(x) for x in nums):
        raise ModelError(f"{src}: {where}: attribute {key}='{clip(val, 80)}' is not finite (NaN or inf)")
    if bounded and any(abs(x) > PARAM_LIMIT for x in nums):
        raise ModelError(f"{src}: {where}: attribute {key}='{clip(val, 80)}' is out of range (magnitude over "
                         f"{PARAM_LIMIT:g}: its products would overflow)")
    return nums


def _attr(el, key, default, src, where, bounded=True):
    val = el.get(key)
    if val is None:
        return default
    return numbers(val, 1, src, where, key, bounded)[0]


def origin(el, src, where):
    """(rpy, xyz) of an optional <origin> child of ``el``."""
    o = el.find("origin")
    if o is None:
        return (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
    w = f"{where} <origin>"
    xyz = numbers(o.get("xyz"), 3, src, w, "xyz") if o.get("xyz") is not None else (0.0, 0.0, 0.0)
    rpy = numbers(o.get("rpy"), 3, src, w, "rpy", bounded=False) if o.get("rpy") is not None else (0.0, 0.0, 0.0)
    return tuple(rpy), tuple(xyz)


def unit_vector(vals, src, where, what="axis"):
    """vals / |vals|, computed without overflow or underflow (scaled by the largest component first)."""
    a = np.asarray(vals, dtype=float)
    big = float(np.max(np.abs(a)))
    if not big > 1e-12:
        raise ModelError(f"{src}: {where}: zero {what} {a.tolist()}")
    a = a / big
    return a / float(np.linalg.norm(a))


def read_links(root, src):
    links = {}
    for el in root.findall("link"):
        name = el.get("name")
        if not name:
            raise ModelError(f"{src}: a <link> without a name")
        if name in links:
            raise ModelError(f"{src}: two links named '{clip(name, 80)}'")
        where = element_path(el)
        ine = el.find("inertial")
        rec = SimpleNamespace(name=name, inertial=None)
        if ine is not None:
            w = f"{where} <inertial>"
            rpy, xyz = origin(ine, src, w)
            m_el = ine.find("mass")
            if m_el is None or m_el.get("value") is None:
                raise ModelError(f"{src}: {w}: missing <mass value=...>")
            mass = _attr(m_el, "value", 0.0, src, f"{w} <mass>")
            if mass < 0:
                raise ModelError(f"{src}: link '{clip(name, 80)}': negative mass {mass}")
            i_el = ine.find("inertia")
            if i_el is None:
                raise ModelError(f"{src}: {w}: missing <inertia ixx=... izz=...>")
            vals = []
            for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"):
                if i_el.get(k) is None:
                    raise ModelError(f"{src}: {w} <inertia>: missing attribute {k}")
                vals.append(_attr(i_el, k, 0.0, src, f"{w} <inertia>"))
            rec.inertial = SimpleNamespace(mass=mass, rpy=rpy, xyz=xyz, inertia=tuple(vals))
        links[name] = rec
    return links


def read_joints(root, src):
    joints, seen = [], set()
    for el in root.findall("joint"):
        name = el.get("name")
        if not name:
            raise ModelError(f"{src}: a <joint> without a name")
        if name in seen:
            raise ModelError(f"{src}: two joints named '{clip(name, 80)}'")
        seen.add(name)
        where = element_path(el)
        jn = clip(name, 80)
        jt = el.get("type")
        if jt not in JOINT_TYPES:
            raise ModelError(f"{src}: joint '{jn}': unknown type '{clip(jt, 40)}' (one of {', '.join(JOINT_TYPES)})"
                             if jt else f"{src}: joint '{jn}': missing attribute type")
        ends = {}
        for role in ("parent", "child"):
            e = el.find(role)
            if e is None or not e.get("link"):
                raise ModelError(f"{src}: joint '{jn}': missing <{role} link=...>")
            ends[role] = e.get("link")
        rpy, xyz = origin(el, src, where)
        axis = (1.0, 0.0, 0.0)
        a_el = el.find("axis")
        if a_el is not None and a_el.get("xyz") is not None and jt not in ("fixed", "floating"):
            axis = tuple(numbers(a_el.get("xyz"), 3, src, f"{where} <axis>", "xyz"))
        limit = None
        l_el = el.find("limit")
        if l_el is not None:
            w = f"{where} <limit>"
            limit = tuple(_attr(l_el, k, math.nan, src, w, bounded=False)
                          for k in ("lower", "upper", "effort", "velocity"))
        dyn = None
        d_el = el.find("dynamics")
        if d_el is not None:
            w = f"{where} <dynamics>"
            dyn = (_attr(d_el, "damping", 0.0, src, w), _attr(d_el, "friction", 0.0, src, w))
        mimic = None
        m_el = el.find("mimic")
        if m_el is not None:
            w = f"{where} <mimic>"
            if not m_el.get("joint"):
                raise ModelError(f"{src}: {w}: missing attribute joint")
            mimic = SimpleNamespace(joint=m_el.get("joint"), multiplier=_attr(m_el, "multiplier", 1.0, src, w),
                                    offset=_attr(m_el, "offset", 0.0, src, w))
        joints.append(SimpleNamespace(name=name, type=jt, parent=ends["parent"], child=ends["child"], rpy=rpy,
                                      xyz=xyz, axis=axis, limit=limit, dynamics=dyn, mimic=mimic))
    return joints


def ignored_elements(root) -> dict:
    """{tag: count} of the top-level elements dynamics does not read, and of <visual>/<collision>
    inside links (for dynamics_summary --check)."""
    out = {}
    for el in root:
        tag = el.tag if isinstance(el.tag, str) else "comment"
        if tag == "comment":
            continue
        if tag not in DYNAMICS_TAGS:
            out[tag] = out.get(tag, 0) + 1
        elif tag == "link":
            for ch in el:
                if isinstance(ch.tag, str) and ch.tag != "inertial":
                    out[f"link/{ch.tag}"] = out.get(f"link/{ch.tag}", 0) + 1
    return out


def _urdf_like(tag, get):
    """A <link name=...> or a <joint name=... type=...>: what URDF reads as a link or a joint (the <joint
    name> of a <transmission> or <ros2_control> has no type, a plugin's <link>text</link> no name)."""
    return (tag == "link" and get("name") is not None) or (tag == "joint" and get("name") is not None
                                                          and get("type") is not None)


def misplaced(root, text, src):
    """Links and joints that are not children of <robot> (inside an unknown element, at any depth), which
    URDF does not read: None when there are none, else a one-line description naming the first one, its
    line and depth and the element it sits in, with how many there are. ModelError when the robot would
    vanish with them: no link, or no joint, is a child of <robot> while some are nested."""
    nested = {}
    for tag in ("link", "joint"):
        n_all = sum(1 for el in root.iter(tag) if _urdf_like(tag, el.get))
        nested[tag] = n_all - sum(1 for el in root.findall(tag) if _urdf_like(tag, el.get))
    if not (nested["link"] or nested["joint"]):
        return None
    first = _locate(text)
    where = "" if first is None else (
        f": the first, <{first[0]} name='{clip(first[1], 80)}'> at line {first[2]}, is nested {first[3]} level(s) "
        f"deep in <{clip(first[4], 40)}> (line {first[5]}, a child of <robot>)")
    what = f"{nested['link']} <link> and {nested['joint']} <joint> element(s) are not children of <robot>{where}"
    if not root.findall("link") or (nested["joint"] and not any(_urdf_like("joint", el.get)
                                                                  for el in root.findall("joint"))):
        raise ModelError(f"{src}: {what}; URDF reads links and joints only as children of <robot>, so the robot "
                         "would lose its joints: move them out of that element")
    return f"{what}; they are not read (URDF reads links and joints only as children of <robot>)"


def _locate(text):
    """(tag, name, line, depth, enclosing top-level tag, its line) of the first nested link or joint of the
    XML text (expat: line numbers; run only when there is one)."""
    import xml.parsers.expat as expat

    parser = expat.ParserCreate()
    stack = []

    class Found(Exception):
        pass

    def start(tag, attrs):
        if len(stack) >= 2 and _urdf_like(tag, attrs.get):
            raise Found((tag, attrs.get("name"), parser.CurrentLineNumber, len(stack) - 1, *stack[1]))
        stack.append((tag, parser.CurrentLineNumber))

    parser.StartElementHandler = start
    parser.EndElementHandler = lambda tag: stack.pop()
    try:
        parser.Parse(text, True)
    except Found as f:
        return f.args[0]
    except expat.ExpatError:
        return None
    return None


def link_inertia(link, src, report):
    """(mass, com (3,), I about the CoM in link axes) of a URDF link. Non-physical rotational inertia
    (indefinite, or principal moments breaking the triangle inequality) goes to the report."""
    ine = link.inertial
    if ine is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    R, c = rpy_to_matrix(ine.rpy), np.array(ine.xyz, dtype=float)
    ixx, ixy, ixz, iyy, iyz, izz = ine.inertia
    I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]], dtype=float)
    ev = np.linalg.eigvalsh(I)
    # round-off of eigvalsh, and anything below a radius of gyration of 1 micrometre, is no problem
    tol = max(1e-9 * float(np.abs(ev).max()), 1e-12 * ine.mass)
    moments = "[" + ", ".join(f"{e:.4g}" for e in ev) + "]"
    msg = None
    if ev[0] < -tol:
        msg = (f"inertia is not positive semi-definite: principal moments {moments} kg·m², the smallest "
               f"negative by {-ev[0]:.3g} kg·m²")
    elif ev[0] + ev[1] < ev[2] - tol:
        msg = (f"principal moments {moments} kg·m² break the triangle inequality by "
               f"{ev[2] - ev[0] - ev[1]:.3g} kg·m² (the largest exceeds the sum of the others)")
    if msg:
        report.inertia[link.name] = msg
        report.warnings.append(f"{src}: link '{clip(link.name, 80)}': {msg}")
    return ine.mass, c, R @ I @ R.T
