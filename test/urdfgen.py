"""Test helpers: seeded random URDF generator, chain/tree generators, and a Pinocchio oracle.

Nothing here imports the code under test except through the public API of docs/API.md
(model.joint_names, model.q_slice, model.v_slice, model.floating_base, ...). Every expected
value used by the tests comes from Pinocchio (test-only), closed forms or identities.
"""
from __future__ import annotations

import math
import os
import pathlib
import xml.etree.ElementTree as ET

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE / "data"
REPO = HERE.parent


def _erd_robots() -> pathlib.Path:
    """Directory of example-robot-data's robots (installed as a cmeel package in the venv)."""
    try:
        import example_robot_data  # noqa: F401
        import cmeel  # noqa: F401
    except Exception:  # pragma: no cover
        pass
    import sys

    for p in sys.path:
        cand = pathlib.Path(p) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
        if cand.is_dir():
            return cand
    raise FileNotFoundError("example-robot-data robots not found (pip install example-robot-data)")


def erd(rel: str) -> pathlib.Path:
    return _erd_robots() / rel


# --------------------------------------------------------------------------------------------
# Formatting helpers
# --------------------------------------------------------------------------------------------
def _f(x: float) -> str:
    return repr(float(x))


def _v(v) -> str:
    return " ".join(_f(x) for x in v)


def rpy_to_R(r, p, y):
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


def quat_xyzw_to_R(qx, qy, qz, qw):
    n = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
    qx, qy, qz, qw = qx / n, qy / n, qz / n, qw / n
    return np.array([
        [1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qz * qw), 2 * (qx * qz + qy * qw)],
        [2 * (qx * qy + qz * qw), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qx * qw)],
        [2 * (qx * qz - qy * qw), 2 * (qy * qz + qx * qw), 1 - 2 * (qx * qx + qy * qy)],
    ])


def random_inertia(rng, mass):
    """A physically valid rotational inertia about the CoM (built from point masses: always
    positive definite and satisfies the triangle inequality strictly)."""
    I = np.zeros((3, 3))
    pts = rng.normal(size=(4, 3)) * rng.uniform(0.03, 0.2)
    w = rng.uniform(0.1, 1.0, size=4)
    w *= mass / w.sum()
    for wk, r in zip(w, pts):
        I += wk * (r @ r * np.eye(3) - np.outer(r, r))
    I += np.eye(3) * mass * 1e-3
    return I


def inertial_xml(mass, com, rpy, I):
    return (
        f'    <inertial>\n      <origin xyz="{_v(com)}" rpy="{_v(rpy)}"/>\n      <mass value="{_f(mass)}"/>\n'
        f'      <inertia ixx="{_f(I[0, 0])}" ixy="{_f(I[0, 1])}" ixz="{_f(I[0, 2])}" '
        f'iyy="{_f(I[1, 1])}" iyz="{_f(I[1, 2])}" izz="{_f(I[2, 2])}"/>\n    </inertial>\n'
    )


# --------------------------------------------------------------------------------------------
# Random URDF generator
# --------------------------------------------------------------------------------------------
def random_urdf(seed, n_links=8, *, p_fixed=0.15, p_prismatic=0.2, p_continuous=0.15, branching=0.4,
                n_mimic=0, dynamics=False, normalize_axes=True, massless_fixed=True, name=None):
    """Seeded random tree URDF.

    Returns (xml_text, info) with info = {"joints": [(name, type, parent, child, axis)],
    "damping": {joint: d}, "friction": {joint: f}, "mimic": {follower: (master, mult, off)},
    "links": [...]}.  Joint types: revolute, continuous, prismatic, fixed; random axes (unit or
    scaled by a random factor if normalize_axes is False, same direction), random rpy origins,
    random valid inertias with random inertial origins (xyz and rpy).
    """
    rng = np.random.default_rng(seed)
    name = name or f"random_tree_{seed}"
    links = ["L0"]
    lines = [f'<?xml version="1.0"?>\n<robot name="{name}">\n']
    link_xml = {}
    joints = []
    damping, friction, mimic = {}, {}, {}

    def link_block(lname, with_mass=True):
        if not with_mass:
            return f'  <link name="{lname}"/>\n'
        m = rng.uniform(0.5, 3.0)
        I = random_inertia(rng, m)
        com = rng.uniform(-0.15, 0.15, 3)
        rpy = rng.uniform(-math.pi, math.pi, 3)
        return f'  <link name="{lname}">\n' + inertial_xml(m, com, rpy, I) + "  </link>\n"

    link_xml["L0"] = link_block("L0")
    joint_xml = []
    for i in range(1, n_links):
        if i == 1 or rng.uniform() > branching:
            parent = links[-1]
        else:
            parent = links[int(rng.integers(0, len(links)))]
        u = rng.uniform()
        if u < p_fixed:
            jt = "fixed"
        elif u < p_fixed + p_prismatic:
            jt = "prismatic"
        elif u < p_fixed + p_prismatic + p_continuous:
            jt = "continuous"
        else:
            jt = "revolute"
        child = f"L{i}"
        links.append(child)
        link_xml[child] = link_block(child, with_mass=(jt != "fixed" or not massless_fixed or rng.uniform() < 0.5))
        if rng.uniform() < 0.6:
            axis = rng.normal(size=3)
            axis /= np.linalg.norm(axis)
        else:
            axis = np.zeros(3)
            axis[int(rng.integers(0, 3))] = rng.choice([-1.0, 1.0])
        axis_scale = rng.uniform(0.3, 3.0)  # always drawn: same tree for both settings
        axis_written = axis if normalize_axes else axis * axis_scale
        xyz = rng.uniform(-0.4, 0.4, 3)
        rpy = rng.uniform(-math.pi, math.pi, 3)
        jname = f"J{i}"
        s = f'  <joint name="{jname}" type="{jt}">\n    <parent link="{parent}"/>\n    <child link="{child}"/>\n'
        s += f'    <origin xyz="{_v(xyz)}" rpy="{_v(rpy)}"/>\n'
        if jt != "fixed":
            s += f'    <axis xyz="{_v(axis_written)}"/>\n'
        if jt == "revolute":
            s += '    <limit lower="-3.0" upper="3.0" effort="100" velocity="10"/>\n'
        elif jt == "prismatic":
            s += '    <limit lower="-1.0" upper="1.0" effort="100" velocity="10"/>\n'
        if dynamics and jt != "fixed":
            d, fr = rng.uniform(0.05, 1.0), rng.uniform(0.05, 0.5)
            damping[jname], friction[jname] = d, fr
            s += f'    <dynamics damping="{_f(d)}" friction="{_f(fr)}"/>\n'
        s += "  </joint>\n"
        joint_xml.append([jname, jt, s])
        joints.append((jname, jt, parent, child, axis))

    # mimic followers: pick movable joints (not the first movable one) and make them follow an
    # earlier independent movable joint of a compatible kind.
    movable = [j for j in joints if j[1] != "fixed"]
    followers = set()
    if n_mimic:
        cands = [j for j in movable[1:]]
        rng.shuffle(cands)
        for j in cands:
            if len(followers) >= n_mimic:
                break
            masters = [m for m in movable if m[0] not in followers and m[0] != j[0]
                       and int(m[0][1:]) < int(j[0][1:]) and m[0] not in mimic]
            if not masters:
                continue
            master = masters[int(rng.integers(0, len(masters)))]
            mult = float(rng.choice([-1.0, 1.0]) * rng.uniform(0.3, 2.0))
            off = float(rng.uniform(-0.3, 0.3))
            mimic[j[0]] = (master[0], mult, off)
            followers.add(j[0])
        for jx in joint_xml:
            if jx[0] in mimic:
                m, mult, off = mimic[jx[0]]
                jx[2] = jx[2].replace("  </joint>\n", f'    <mimic joint="{m}" multiplier="{_f(mult)}" '
                                      f'offset="{_f(off)}"/>\n  </joint>\n')

    for l in links:
        lines.append(link_xml[l])
    for jx in joint_xml:
        lines.append(jx[2])
    lines.append("</robot>\n")
    info = {"joints": joints, "damping": damping, "friction": friction, "mimic": mimic, "links": links}
    return "".join(lines), info


def chain_urdf(n_joints, seed=0, name=None):
    """Serial chain of n revolute joints with alternating axes (benchmark scaling)."""
    rng = np.random.default_rng(seed)
    name = name or f"chain_{n_joints}"
    out = [f'<?xml version="1.0"?>\n<robot name="{name}">\n']
    for i in range(n_joints + 1):
        m = 1.0 + 0.1 * i
        out.append(f'  <link name="l{i}">\n' + inertial_xml(m, [0, 0, 0.1], [0, 0, 0], random_inertia(rng, m))
                   + "  </link>\n")
    axes = ["0 0 1", "0 1 0", "1 0 0"]
    for i in range(n_joints):
        out.append(
            f'  <joint name="j{i + 1}" type="revolute">\n    <parent link="l{i}"/>\n    <child link="l{i + 1}"/>\n'
            f'    <origin xyz="0 0 0.2" rpy="0 0 0"/>\n    <axis xyz="{axes[i % 3]}"/>\n'
            '    <limit lower="-3" upper="3" effort="100" velocity="10"/>\n  </joint>\n')
    out.append("</robot>\n")
    return "".join(out)


def branched_urdf(n_branches, depth, seed=0, name=None):
    """A torso with n_branches serial branches of `depth` revolute joints each."""
    rng = np.random.default_rng(seed)
    name = name or f"tree_{n_branches}x{depth}"
    out = [f'<?xml version="1.0"?>\n<robot name="{name}">\n']
    out.append('  <link name="torso">\n' + inertial_xml(5.0, [0, 0, 0], [0, 0, 0], random_inertia(rng, 5.0))
               + "  </link>\n")
    axes = ["0 0 1", "0 1 0", "1 0 0"]
    k = 0
    for b in range(n_branches):
        parent = "torso"
        ang = 2 * math.pi * b / n_branches
        for d in range(depth):
            k += 1
            child = f"b{b}_l{d}"
            out.append(f'  <link name="{child}">\n'
                       + inertial_xml(1.0, [0, 0, 0.1], [0, 0, 0], random_inertia(rng, 1.0)) + "  </link>\n")
            xyz = f"{0.2 * math.cos(ang)} {0.2 * math.sin(ang)} 0" if d == 0 else "0 0 0.2"
            out.append(
                f'  <joint name="b{b}_j{d}" type="revolute">\n    <parent link="{parent}"/>\n'
                f'    <child link="{child}"/>\n'
                f'    <origin xyz="{xyz}" rpy="0 0 0"/>\n    <axis xyz="{axes[(d + b) % 3]}"/>\n'
                '    <limit lower="-3" upper="3" effort="100" velocity="10"/>\n  </joint>\n')
            parent = child
    out.append("</robot>\n")
    return "".join(out)


def strip_mimic(xml_text):
    """Same URDF with every <mimic> element removed (followers become independent joints)."""
    root = ET.fromstring(xml_text)
    for j in root.findall("joint"):
        for m in j.findall("mimic"):
            j.remove(m)
    return ET.tostring(root, encoding="unicode")


# --------------------------------------------------------------------------------------------
# Independent reading of the URDF (for name checks)
# --------------------------------------------------------------------------------------------
def urdf_structure(xml_text):
    """(links, joints, mimic, expected_joint_order) read directly from the XML.

    expected_joint_order: movable, non-mimic joints, depth-first from the root, siblings in URDF order.
    """
    root = ET.fromstring(xml_text)
    links = [l.get("name") for l in root.findall("link")]
    joints = []
    mimic = {}
    for j in root.findall("joint"):
        jt = j.get("type")
        joints.append((j.get("name"), jt, j.find("parent").get("link"), j.find("child").get("link")))
        m = j.find("mimic")
        if m is not None and jt != "fixed":
            mimic[j.get("name")] = (m.get("joint"), float(m.get("multiplier", 1.0)), float(m.get("offset", 0.0)))
    children = {}
    childset = set()
    for (n, jt, p, c) in joints:
        children.setdefault(p, []).append((n, jt, c))
        childset.add(c)
    roots = [l for l in links if l not in childset]
    order = []

    def dfs(l):
        for (n, jt, c) in children.get(l, []):
            if jt not in ("fixed",) and n not in mimic:
                order.append(n)
            dfs(c)

    dfs(roots[0])
    return links, joints, mimic, order


# --------------------------------------------------------------------------------------------
# Pinocchio oracle
# --------------------------------------------------------------------------------------------
class PinOracle:
    """Pinocchio (test-only) evaluated in OUR coordinates.

    Joints are matched by name. Mimic followers (which are independent joints in this Pinocchio
    model, built without mimic) are driven through the linear map qd_pin = G qd_ours:
    tau_ours = G^T tau_pin, H_ours = G^T H_pin G (Featherstone §9.6, Eq. 9.27).
    Continuous joints: Pinocchio stores (cos, sin). Free flyer: same coordinates as ours.
    """

    def __init__(self, xml_text, ours, *, floating=False, gravity=None, armature=None):
        import pinocchio as pin

        self.pin = pin
        self.ours = ours
        self.xml = xml_text
        if floating:
            self.m = pin.buildModelFromXML(xml_text, pin.JointModelFreeFlyer())
        else:
            self.m = pin.buildModelFromXML(xml_text)
        if gravity is not None:
            self.m.gravity = pin.Motion(np.r_[np.asarray(gravity, float), 0, 0, 0])
        self.d = self.m.createData()
        self.floating = floating
        _, _, self.mimic, _ = urdf_structure(xml_text)
        m = self.m
        nv_o = ours.nv
        self.G = np.zeros((m.nv, nv_o))
        self.entries = []  # (pin idx_q, nq_pin, our q index, mult, off, continuous)
        start = 1
        if floating:
            self.G[:6, :6] = np.eye(6)
            start = 2
        names = list(ours.joint_names)
        for jid in range(start, m.njoints):
            jn = m.names[jid]
            jm = m.joints[jid]
            cont = jm.nq == 2 and jm.nv == 1
            if jn in names:
                qs = ours.q_slice(jn)
                vs = ours.v_slice(jn)
                qi = range(qs.start, qs.stop)[0]
                vi = range(vs.start, vs.stop)[0]
                self.G[jm.idx_v, vi] = 1.0
                self.entries.append((jm.idx_q, jm.nq, qi, 1.0, 0.0, cont))
            elif jn in self.mimic:
                master, mult, off = self.mimic[jn]
                qs = ours.q_slice(master)
                vs = ours.v_slice(master)
                qi = range(qs.start, qs.stop)[0]
                vi = range(vs.start, vs.stop)[0]
                self.G[jm.idx_v, vi] = mult
                self.entries.append((jm.idx_q, jm.nq, qi, mult, off, cont))
            else:
                raise KeyError(f"Pinocchio joint {jn!r} is neither in our joint_names nor a mimic follower")
        self.is_perm = not self.mimic
        if armature is not None:
            arm = np.zeros(m.nv)
            for jn, val in armature.items():
                jid = m.getJointId(jn)
                arm[m.joints[jid].idx_v] = val
            m.armature = arm

    # --- coordinates -------------------------------------------------------------------------
    def q(self, q):
        q = np.asarray(q, float)
        qp = np.zeros(self.m.nq)
        if self.floating:
            qp[:7] = q[:7]
        for (iq, nq, qi, mult, off, cont) in self.entries:
            a = mult * q[qi] + off
            if cont:
                qp[iq], qp[iq + 1] = math.cos(a), math.sin(a)
            else:
                qp[iq] = a
        return qp

    def v(self, v):
        return self.G @ np.asarray(v, float)

    def frame(self, link):
        return self.m.getFrameId(link, self.pin.FrameType.BODY)

    def fext(self, f_ext):
        pin = self.pin
        fs = [pin.Force.Zero() for _ in range(self.m.njoints)]
        for link, w in (f_ext or {}).items():
            fr = self.m.frames[self.frame(link)]
            w = np.asarray(w, float)
            F = fr.placement.act(pin.Force(w[:3], w[3:]))
            fs[fr.parentJoint] = fs[fr.parentJoint] + F
        return fs

    # --- dynamics ----------------------------------------------------------------------------
    def rnea(self, q, v, a, f_ext=None):
        pin = self.pin
        if f_ext:
            t = pin.rnea(self.m, self.d, self.q(q), self.v(v), self.v(a), self.fext(f_ext))
        else:
            t = pin.rnea(self.m, self.d, self.q(q), self.v(v), self.v(a))
        return self.G.T @ t

    def gravity(self, q):
        return self.G.T @ self.pin.computeGeneralizedGravity(self.m, self.d, self.q(q))

    def nle(self, q, v):
        return self.G.T @ self.pin.nonLinearEffects(self.m, self.d, self.q(q), self.v(v))

    def crba(self, q):
        H = self.pin.crba(self.m, self.d, self.q(q)).copy()
        H = np.triu(H) + np.triu(H, 1).T
        return self.G.T @ H @ self.G

    def aba(self, q, v, tau, f_ext=None):
        pin = self.pin
        if self.is_perm:
            P = self.G  # permutation: our index -> pin index
            tp = P @ np.asarray(tau, float)
            if f_ext:
                a = pin.aba(self.m, self.d, self.q(q), self.v(v), tp, self.fext(f_ext))
            else:
                a = pin.aba(self.m, self.d, self.q(q), self.v(v), tp)
            return P.T @ a
        H = self.crba(q)
        c = self.rnea(q, v, np.zeros(self.ours.nv), f_ext)
        return np.linalg.solve(H, np.asarray(tau, float) - c)

    # --- kinematics --------------------------------------------------------------------------
    def pose(self, q, link):
        pin = self.pin
        pin.framesForwardKinematics(self.m, self.d, self.q(q))
        return self.d.oMf[self.frame(link)].homogeneous.copy()

    def jacobian(self, q, link):
        pin = self.pin
        fid = self.frame(link)
        J = pin.computeFrameJacobian(self.m, self.d, self.q(q), fid, pin.LOCAL_WORLD_ALIGNED)
        J = np.asarray(J).reshape(6, self.m.nv)  # the binding squeezes a 6x1 Jacobian to shape (6,)
        return J @ self.G

    def velocity(self, q, v, link):
        pin = self.pin
        pin.forwardKinematics(self.m, self.d, self.q(q), self.v(v))
        pin.updateFramePlacements(self.m, self.d)
        return pin.getFrameVelocity(self.m, self.d, self.frame(link), pin.LOCAL_WORLD_ALIGNED).vector.copy()

    def bias_acc(self, q, v, link):
        pin = self.pin
        pin.forwardKinematics(self.m, self.d, self.q(q), self.v(v), np.zeros(self.m.nv))
        pin.updateFramePlacements(self.m, self.d)
        return pin.getFrameClassicalAcceleration(self.m, self.d, self.frame(link),
                                                 pin.LOCAL_WORLD_ALIGNED).vector.copy()

    def com(self, q):
        """Whole-robot CoM INCLUDING a fixed root link (Pinocchio keeps that link's inertia on the
        universe joint 0, which pin.centerOfMass leaves out)."""
        self.pin.forwardKinematics(self.m, self.d, self.q(q))
        s = np.zeros(3)
        for i in range(self.m.njoints):
            I = self.m.inertias[i]
            s += I.mass * self.d.oMi[i].act(I.lever)
        return s / self.total_mass()

    def total_mass(self):
        return float(sum(I.mass for I in self.m.inertias))


def random_state(model, rng, scale=1.0):
    """(q, qd, qdd, tau) in OUR coordinates: joints uniform in [-1, 1], unit quaternion for a
    floating base."""
    q = rng.uniform(-1.0, 1.0, model.nq) * scale
    if model.floating_base:
        q[:3] = rng.uniform(-1, 1, 3)
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
    qd = rng.uniform(-1.0, 1.0, model.nv)
    qdd = rng.uniform(-1.0, 1.0, model.nv)
    tau = rng.uniform(-1.0, 1.0, model.nv)
    return q, qd, qdd, tau


def write(path, text):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


if __name__ == "__main__":  # write a sample for inspection
    txt, info = random_urdf(0, 10, n_mimic=1, dynamics=True)
    print(txt)
    print(info["mimic"])
    _ = os
