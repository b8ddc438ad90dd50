"""Loop-closing joints and transmissions of a URDF (Featherstone Ch. 4 and 8).

URDF describes a spanning tree.  A closed kinematic loop is closed by a ``<loop_joint>`` element, a
child of ``<robot>``::

    <loop_joint name="j5" type="revolute">
      <predecessor link="B3"><origin xyz="0 0 0" rpy="0 0 0"/></predecessor>
      <successor link="B1"><origin xyz="0.4 0 0" rpy="0 0 0"/></successor>
      <axis xyz="0 0 1"/>
    </loop_joint>

The two origins place the joint frame on each link: they are Featherstone's X_P(l) and X_S(l) of
§4.2 (here as 4x4 homogeneous transforms: pose of the joint frame in the link frame).  ``axis`` is in
the joint frame.  When the loop is closed the predecessor and successor joint frames coincide up to
the joint's own motion.  A ``type="helical"`` loop joint (a screw, Table 4.1) also takes
``pitch="h"`` (m/rad: the successor advances h along the axis per radian turned about it).  In-tree
helical motion needs no new joint: a revolute joint followed by a prismatic joint along the same axis
with ``<mimic joint="the revolute" multiplier="h"/>`` is the same screw (§9.6 constraints).

Vector convention.  The rest of dynamics_node (and ROS) orders 6-vectors linear first:
motion [v; omega], force [f; n].  Featherstone orders them angular first ([omega; v], [n; f]).  The
``S`` and ``T`` stored here are Featherstone's Table 4.1 matrices re-ordered to the linear-first
convention and rotated so that the joint axis is the URDF ``axis`` (Featherstone's joints move
about/along local z; ``R_align`` is the rotation whose third column is ``axis``, so
S = blockdiag(R_align, R_align) S_Table4.1 with the rows swapped to linear first).  T is the
constraint-force subspace: T^T S = 0 and [S T] is orthonormal (Featherstone Eq. 3.33 ff.), except
for the helical joint, whose S is Table 4.1's [0 0 1 0 0 h] (norm sqrt(1 + h^2)); its T is
orthonormal all the same (its fifth column is Table 4.1's [0 0 -h 0 0 1] / sqrt(1 + h^2)).

``parse_transmissions`` reads the standard ``<transmission>`` elements (ros_control syntax, old and
new) and returns the names of the actuated tree joints.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

from .errors import ModelError, clip
from .spatial import rpy_to_matrix
from .urdf_xml import PARAM_LIMIT, unit_vector

__all__ = ["LoopJoint", "LOOP_JOINT_TYPES", "parse_loop_joints", "parse_transmissions", "validate_loop_bodies",
           "motion_subspace"]

#: joint type -> number of degrees of freedom it allows (its constraint count is 6 - dof)
LOOP_JOINT_TYPES = {
    "fixed": 0,
    "revolute": 1,
    "continuous": 1,
    "prismatic": 1,
    "cylindrical": 2,
    "spherical": 3,
    "planar": 3,
    "helical": 1,
}
_NEEDS_AXIS = {"revolute", "continuous", "prismatic", "cylindrical", "planar", "helical"}


def _align_z(axis: np.ndarray) -> np.ndarray:
    """A rotation R whose third column is ``axis`` (unit): maps Featherstone's local-z joint frame
    onto the URDF joint frame.  Deterministic, continuous away from axis = -z."""
    z = axis / np.linalg.norm(axis)
    # pick the coordinate axis least aligned with z as a helper
    helper = np.eye(3)[int(np.argmin(np.abs(z)))]
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    if np.allclose(z, [0.0, 0.0, 1.0]):
        return np.eye(3)
    return np.column_stack([x, y, z])


def motion_subspace(jtype: str, R_align: np.ndarray, pitch: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(S, T) of a loop joint in its joint frame, linear-first 6-vectors (Featherstone Table 4.1).

    Table 4.1 (angular first, joint about/along local z):
      revolute S = e3;  prismatic S = e6;  cylindrical S = [e3 e6];  spherical S = [e1 e2 e3];
      planar S = [e3 e4 e5] (rotation about z, translation along x and y);  fixed: no S, T = 1;
      helical (pitch h, m/rad) S = [0 0 1 0 0 h]^T, T = [e1 e2 (e6 - h e3)/sqrt(1 + h^2) e4 e5].
    T is the orthonormal complement (T^T S = 0).  Here rows are re-ordered to [linear; angular] and
    rotated by blockdiag(R_align, R_align) so that local z is the URDF axis.
    """
    # linear-first unit vectors: lin_x..z = 0..2, ang_x..z = 3..5
    free = {
        "fixed": [],
        "revolute": [5],
        "continuous": [5],
        "prismatic": [2],
        "cylindrical": [5, 2],
        "spherical": [3, 4, 5],
        "planar": [5, 0, 1],
        "helical": [5],
    }[jtype]
    constrained = [i for i in range(6) if i not in free]
    rot = np.zeros((6, 6))
    rot[:3, :3] = R_align
    rot[3:, 3:] = R_align
    eye = np.eye(6)
    S = rot @ eye[:, free]
    T = rot @ eye[:, constrained]
    if jtype == "helical":  # linear first: S = [0 0 h 0 0 1]; the screw column of T replaces e_z (linear)
        S = rot @ np.array([0.0, 0.0, pitch, 0.0, 0.0, 1.0])[:, None]
        T = T.copy()
        T[:, constrained.index(2)] = rot @ np.array([0.0, 0.0, 1.0, 0.0, 0.0, -pitch]) / np.hypot(1.0, pitch)
    return S, T


def _frozen(a) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class LoopJoint:
    """One loop-closing joint (Featherstone §4.2 loop arrays p(k), s(k), jtype(k), X_P(l), X_S(l)).

    Attributes
    ----------
    name, type : str
    predecessor, successor : link names p(k), s(k)
    X_P, X_S : 4x4 pose of the joint frame in the predecessor / successor link frame
               (Featherstone X_P(l), X_S(l) of §4.2, as homogeneous transforms)
    axis : unit 3-vector in the joint frame (the plane normal for planar; (0, 0, 1) for fixed and
           spherical, where it is unused)
    pitch : helical joints: m/rad along the axis per turn about it (0 for every other type)
    R_align : 3x3 rotation, third column = axis; joint frame * R_align is Featherstone's local-z frame
    S : 6 x dof motion subspace, linear first, joint-frame coordinates (Table 4.1)
    T : 6 x (6 - dof) constraint-force subspace, linear first, joint-frame coordinates
    source : file the element came from (for messages)
    """

    name: str
    type: str
    predecessor: str
    successor: str
    X_P: np.ndarray
    X_S: np.ndarray
    axis: np.ndarray
    R_align: np.ndarray
    S: np.ndarray
    T: np.ndarray
    source: str = field(default="<robot_description>")
    pitch: float = 0.0

    @property
    def dof(self) -> int:
        """Freedoms allowed by the joint."""
        return LOOP_JOINT_TYPES[self.type]

    @property
    def n_constraints(self) -> int:
        """n_k^c of Featherstone Eq. 8.1: constraints the joint imposes."""
        return 6 - self.dof

    @property
    def origin_P(self) -> tuple[np.ndarray, np.ndarray]:
        """(R, p) of X_P."""
        return self.X_P[:3, :3], self.X_P[:3, 3]

    @property
    def origin_S(self) -> tuple[np.ndarray, np.ndarray]:
        """(R, p) of X_S."""
        return self.X_S[:3, :3], self.X_S[:3, 3]

    def __repr__(self) -> str:  # arrays make the default repr unreadable
        return (f"LoopJoint(name={self.name!r}, type={self.type!r}, predecessor={self.predecessor!r}, "
                f"successor={self.successor!r}, axis={self.axis.tolist()})")


# --------------------------------------------------------------------------------------------
# parsing helpers
# --------------------------------------------------------------------------------------------

def _err(source: str, what: str, msg: str) -> ModelError:
    return ModelError(f"{source}: {what}: {msg}")


def _floats(text: str | None, n: int, source: str, what: str, attr: str, bounded: bool = True) -> np.ndarray:
    if text is None:
        raise _err(source, what, f"missing attribute {attr!r}")
    shown = clip(repr(text), 80)
    parts = text.replace(",", " ").split()
    if len(parts) != n:
        raise _err(source, what, f"{attr}={shown} must have {n} numbers")
    try:
        vals = np.array([float(p) for p in parts])
    except ValueError:
        raise _err(source, what, f"{attr}={shown} is not a list of numbers") from None
    if not np.all(np.isfinite(vals)):
        raise _err(source, what, f"{attr}={shown} contains NaN or inf")
    if bounded and np.any(np.abs(vals) > PARAM_LIMIT):
        raise _err(source, what, f"{attr}={shown} is out of range (magnitude over {PARAM_LIMIT:g}: its products "
                   "would overflow)")
    return vals


def _origin(el: ET.Element | None, source: str, what: str) -> np.ndarray:
    X = np.eye(4)
    if el is None:
        return X
    xyz = el.get("xyz")
    rpy = el.get("rpy")
    if xyz is not None:
        X[:3, 3] = _floats(xyz, 3, source, what + " <origin>", "xyz")
    if rpy is not None:
        X[:3, :3] = rpy_to_matrix(_floats(rpy, 3, source, what + " <origin>", "rpy", bounded=False))
    return X


def parse_loop_joints(robot: ET.Element, link_names: set[str], tree_joint_names: set[str],
                      source: str) -> tuple[LoopJoint, ...]:
    """Parse every ``<loop_joint>`` child of ``robot`` (file order).

    Raises ModelError naming ``source``, the element and the loop joint for: missing name, duplicate
    name (also against tree joints), missing or unknown type, missing predecessor/successor, unknown
    link, both ends on the same link, missing/zero/NaN axis where the type needs one, NaN in origins,
    a helical joint's missing or bad pitch (and a pitch on another type).
    (Both ends on two links merged by fixed joints is checked by the model loader, which knows the
    bodies.)  A loop whose frames do not meet at the loaded configuration is accepted: that is a state.
    """
    out: list[LoopJoint] = []
    seen: set[str] = set()
    for idx, el in enumerate(robot.findall("loop_joint")):
        name = el.get("name")
        if not name:
            raise _err(source, f"<loop_joint> #{idx + 1}", "has no name attribute")
        what = f"<loop_joint name={clip(repr(name), 80)}>"
        if name in seen:
            raise _err(source, what, "duplicate loop joint name")
        if name in tree_joint_names:
            raise _err(source, what, "name already used by a tree <joint>")
        seen.add(name)
        jtype = el.get("type")
        if jtype is None:
            raise _err(source, what, "missing attribute 'type' "
                       f"(one of {', '.join(LOOP_JOINT_TYPES)})")
        if jtype not in LOOP_JOINT_TYPES:
            raise _err(source, what, f"unknown type {jtype!r} (one of {', '.join(LOOP_JOINT_TYPES)})")
        ends = {}
        for role in ("predecessor", "successor"):
            sub = el.find(role)
            if sub is None:
                raise _err(source, what, f"missing <{role}> element")
            link = sub.get("link")
            if not link:
                raise _err(source, what, f"<{role}> has no 'link' attribute")
            if link not in link_names:
                raise _err(source, what, f"<{role} link={link!r}>: unknown link")
            ends[role] = (link, _origin(sub.find("origin"), source, f"{what} <{role}>"))
        if ends["predecessor"][0] == ends["successor"][0]:
            raise _err(source, what, f"predecessor and successor are the same link "
                       f"{ends['predecessor'][0]!r}: both ends on the same body")
        ax_el = el.find("axis")
        if jtype in _NEEDS_AXIS:
            if ax_el is None:
                raise _err(source, what, f"type {jtype!r} needs an <axis xyz=...> element")
        if ax_el is not None:
            axis = unit_vector(_floats(ax_el.get("xyz"), 3, source, what + " <axis>", "xyz"), source,
                               what + " <axis>", "vector")
        else:
            axis = np.array([0.0, 0.0, 1.0])
        R_align = _align_z(axis)
        pitch = _pitch(el, jtype, source, what)
        S, T = motion_subspace(jtype, R_align, pitch)
        out.append(LoopJoint(
            name=name, type=jtype,
            predecessor=ends["predecessor"][0], successor=ends["successor"][0],
            X_P=_frozen(ends["predecessor"][1]), X_S=_frozen(ends["successor"][1]),
            axis=_frozen(axis), R_align=_frozen(R_align), S=_frozen(S), T=_frozen(T),
            source=source, pitch=pitch,
        ))
    return tuple(out)


def _pitch(el: ET.Element, jtype: str, source: str, what: str) -> float:
    """The ``pitch`` of a helical loop joint (m/rad, finite, |h| <= 1e6; 0 makes it a revolute
    joint); refused by name when missing, not a number, or on another type."""
    text = el.get("pitch")
    if jtype != "helical":
        if text is not None:
            raise _err(source, what, f"pitch={clip(repr(text), 80)} belongs to a helical joint, not a {jtype} one")
        return 0.0
    if text is None:
        raise _err(source, what, "type 'helical' needs a pitch attribute (m/rad along the axis per radian)")
    try:
        h = float(text)
    except ValueError:
        raise _err(source, what, f"pitch={clip(repr(text), 80)} is not a number") from None
    if not np.isfinite(h) or abs(h) > 1e6:
        raise _err(source, what, f"pitch={clip(repr(text), 80)} must be finite and at most 1e6 m/rad in magnitude")
    return h


def parse_transmissions(robot: ET.Element, joint_names: set[str], source: str, report=None) -> tuple[str, ...] | None:
    """Actuated tree joints from the ``<transmission>`` elements (file order, no duplicates).

    Accepts the ros_control syntax ``<transmission name=..><joint name="j1">..</joint>..`` (new) and
    ``<transmission type=..><joint name="j1"/>..`` (old).  Returns None when the robot has no
    transmission naming a known joint (then every joint is actuated).  What cannot be read is
    ignored, listed in ``report.ignored`` and warned of by name in ``report.warnings`` (load_model
    turns these into ModelWarnings, ``strict=True`` into a ModelError), because each can silently
    change which joints count as actuated (no transmission read at all: every joint is):

    * a ``<joint>`` naming a joint the URDF does not have;
    * a transmission with no ``<joint>`` element (e.g. PR2's WristTransmission, whose
      ``<flexJoint>`` / ``<rollJoint>`` dynamics does not read);
    * a ``<joint>`` without a ``name``;
    * a ``mechanicalReduction`` (element or attribute, anywhere in the transmission) that is not a
      finite number; the joints of that transmission stay actuated (dynamics does not use the
      reduction), the transmission is reported as malformed.
    """
    trans = robot.findall("transmission")
    if not trans:
        return None

    def warn(what, msg):
        if report is not None:
            report.ignored.append(f"{what}: {msg}")
            report.warnings.append(f"{source}: {what}: {msg}")

    out: dict[str, None] = {}
    for idx, t in enumerate(trans):
        tname = clip(t.get("name") or f"#{idx + 1}", 80)
        what = f"<transmission name={tname!r}>"
        joints = t.findall("joint")
        if not joints:
            warn(what, "has no <joint> element: dynamics cannot tell which joint it drives, so it is ignored "
                 "(a transmission type dynamics does not read?)")
        for red in _reductions(t):
            warn(what, f"mechanicalReduction {red} is not a finite number")
        for k, j in enumerate(joints):
            jn = j.get("name")
            if not jn:
                warn(what, f"<joint> #{k + 1} has no name attribute: that <joint> entry is ignored")
                continue
            if jn not in joint_names:
                warn(what, f"names joint '{clip(jn, 80)}', which the URDF does not have: that <joint> entry is "
                     "ignored")
                continue
            out[jn] = None
    return tuple(out) if out else None


def _reductions(t: ET.Element) -> list[str]:
    """The mechanicalReduction values of a transmission (elements and attributes) that are not finite
    numbers, each quoted with the element that carries it."""
    bad = []
    for el in t.iter():
        vals = []
        if el.tag == "mechanicalReduction":
            vals.append(("", el.text))
        if "mechanicalReduction" in el.attrib:
            vals.append((f" of <{el.tag} name={clip(el.get('name') or '', 80)!r}>", el.get("mechanicalReduction")))
        for where, text in vals:
            try:
                ok = np.isfinite(float(text))
            except (TypeError, ValueError):
                ok = False
            if not ok:
                bad.append(f"{clip(repr((text or '').strip()), 80)}{where}")
    return bad


def validate_loop_bodies(loops, body_of, source: str) -> None:
    """Reject a loop joint whose two ends are on the same body: the same link, or two links welded by
    fixed joints (``body_of(link)`` -> body index, as Model.body_of).  Such a joint constrains
    nothing.  The model loader calls this once the bodies are known."""
    for lj in loops:
        bp, bs = body_of(lj.predecessor), body_of(lj.successor)
        if bp == bs:
            raise _err(source, f"<loop_joint name={lj.name!r}>",
                       f"predecessor {lj.predecessor!r} and successor {lj.successor!r} are welded to the "
                       "same body (fixed joints): both ends on the same body")
