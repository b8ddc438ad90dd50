"""The small robots on which the kernel build calls every public function (``entries``), as URDF
text: ``tree_urdf`` (revolute, prismatic, continuous and planar joints, a branch, a fixed joint and a
mimic joint), ``BOX_URDF`` (one floating body), ``fourbar_urdf`` (four-bars closed by revolute
``<loop_joint>`` elements) and ``dual_urdf`` (two six-joint arms holding an object through a
spherical loop joint, Unseren's model).
"""
from __future__ import annotations

import numpy as np

_INERTIA = '<inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0" izz="0.025"/>'


def _link(name, mass=1.0, com="0.02 0.01 0.05"):
    return (f'<link name="{name}"><inertial><origin xyz="{com}"/><mass value="{mass}"/>{_INERTIA}'
            '</inertial></link>')


def _joint(name, kind, parent, child, xyz="0 0 0.2", axis="0 0 1", extra=""):
    limit = '<limit lower="-2" upper="2" effort="50" velocity="3"/>' if kind in ("revolute", "prismatic") else ""
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="0.1 0 0.2"/><axis xyz="{axis}"/>{limit}'
            f'<dynamics damping="0.3" friction="0.2"/>{extra}</joint>')


def tree_urdf(mimic=True):
    """Revolute, prismatic, continuous and planar joints, a branch, a fixed tool and (mimic) a mimic joint."""
    parts = ['<robot name="warm_tree">', _link("base", 2.0),
             _link("l1"), _joint("j1", "revolute", "base", "l1"),
             _link("l2"), _joint("j2", "prismatic", "l1", "l2", axis="1 0 0"),
             _link("l3"), _joint("j3", "continuous", "l2", "l3", axis="0 1 0"),
             _link("l4"), _joint("j4", "revolute", "l3", "l4", axis="1 0 0"),
             _link("tool", 0.3), '<joint name="tool_joint" type="fixed"><parent link="l4"/><child link="tool"/>'
             '<origin xyz="0 0 0.1"/></joint>',
             _link("b1"), _joint("b1_joint", "revolute", "base", "b1", xyz="0.2 0 0.1", axis="0 1 0"),
             _link("p1"), _joint("p1_joint", "planar", "b1", "p1", xyz="0 0 0.1", axis="0 0 1")]
    if mimic:
        parts += [_link("m1", 0.5), _joint("m1_joint", "revolute", "l4", "m1", xyz="0 0.1 0.1", axis="0 0 1",
                                           extra='<mimic joint="j1" multiplier="0.5" offset="0.1"/>')]
    return "".join(parts) + "</robot>"


BOX_URDF = ('<robot name="warm_box"><link name="box"><inertial><mass value="2"/>'
            '<inertia ixx="0.02" ixy="0" ixz="0" iyy="0.03" iyz="0" izz="0.04"/></inertial></link></robot>')


def fourbar_urdf(n=1, mimic=False):
    """n planar four-bars side by side (a crank of 0.2, a coupler of 0.6, a rocker of 0.45 between
    pivots 0.5 apart), each closed at the coupler-rocker pin by a revolute <loop_joint>, its crank
    actuated; mimic: a flag on the ground that mimics the first crank."""
    parts = ['<robot name="warm_four">', '<link name="ground"/>']
    for i in range(n):
        y = f"{0.3 * i}"
        parts += [_link(f"crank{i}", 0.8, "0.1 0 0"), _link(f"coupler{i}", 1.2, "0.3 0 0.02"),
                  _link(f"rocker{i}", 1.0, "0.225 0 0"),
                  f'<joint name="crank{i}_joint" type="continuous"><parent link="ground"/><child link="crank{i}"/>'
                  f'<origin xyz="0 {y} 0"/><axis xyz="0 1 0"/></joint>',
                  f'<joint name="coupler{i}_joint" type="continuous"><parent link="crank{i}"/>'
                  f'<child link="coupler{i}"/><origin xyz="0.2 0 0"/><axis xyz="0 1 0"/></joint>',
                  f'<joint name="rocker{i}_joint" type="continuous"><parent link="ground"/><child link="rocker{i}"/>'
                  f'<origin xyz="0.5 {y} 0"/><axis xyz="0 1 0"/></joint>',
                  f'<loop_joint name="pin{i}" type="revolute"><predecessor link="coupler{i}"><origin xyz="0.6 0 0"/>'
                  f'</predecessor><successor link="rocker{i}"><origin xyz="0.45 0 0"/></successor>'
                  '<axis xyz="0 1 0"/></loop_joint>']
    if mimic:
        parts += [_link("flag", 0.5), _joint("flag_joint", "revolute", "ground", "flag", xyz="0 -0.3 0",
                                             axis="0 1 0", extra='<mimic joint="crank0_joint" multiplier="1"/>')]
    parts += [f'<transmission name="t{i}"><type>transmission_interface/SimpleTransmission</type>'
              f'<joint name="crank{i}_joint"><hardwareInterface>EffortJointInterface</hardwareInterface></joint>'
              f'<actuator name="m{i}"><mechanicalReduction>1</mechanicalReduction></actuator></transmission>'
              for i in range(n)]
    return "".join(parts) + "</robot>"


def _arm(k, y):
    """One six-joint arm on its own base at y, holding the object half h{k}."""
    axes = ("0 0 1", "0 1 0", "0 1 0", "0 0 1", "0 1 0", "0 0 1")
    xyz = ("0 0 0.3", "0 0 0.12", "0 0 0.5", "0 0 0.45", "0 0 0.1", "0 0 0.1")
    parts = [f'<joint name="base{k}_joint" type="fixed"><parent link="world"/><child link="a{k}_0"/>'
             f'<origin xyz="0 {y} 0"/></joint>', _link(f"a{k}_0", 8.0)]
    for i in range(6):
        parts += [_link(f"a{k}_{i + 1}", 2.0), _joint(f"a{k}_j{i + 1}", "revolute", f"a{k}_{i}", f"a{k}_{i + 1}",
                                                       xyz=xyz[i], axis=axes[i])]
    parts += [_link(f"h{k}", 1.0), f'<joint name="grasp{k}" type="fixed"><parent link="a{k}_6"/><child link="h{k}"/>'
              '<origin xyz="0 0 0.1"/></joint>']
    return parts


DUAL_Q = (0.4, 0.3, 1.6, 1.2, 1.1, -0.2, 2.7, 0.4, 1.5, -1.3, 1.2, 0.3)


def dual_urdf(dn):
    """Two arms whose object halves are joined by a spherical <loop_joint>, placed where the halves
    meet at DUAL_Q (the loop is closed there exactly)."""
    body = ['<robot name="warm_dual"><link name="world"/>', *_arm(1, -0.6), *_arm(2, 0.6)]
    tree = dn.load_model("".join(body) + "</robot>")
    q = np.array(DUAL_Q)
    T1, T2 = dn.link_pose(tree, q, "h1"), dn.link_pose(tree, q, "h2")
    centre = T1[:3, :3] @ np.array([0.0, 0.0, 0.1]) + T1[:3, 3]
    s = T2[:3, :3].T @ (centre - T2[:3, 3])
    body.append('<loop_joint name="sphere" type="spherical"><predecessor link="h1"><origin xyz="0 0 0.1"/>'
                f'</predecessor><successor link="h2"><origin xyz="{float(s[0])!r} {float(s[1])!r} {float(s[2])!r}"/>'
                '</successor></loop_joint>')
    return "".join(body) + "</robot>"
