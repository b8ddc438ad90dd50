"""The resting pose of a dropped arm: the node's simulated robot against MuJoCo (test-only).

A two-link arm (shoulder and elbow about y, links of 0.4 m, shoulder 0.5 m above the floor, joint
damping 1.5 N m s from the URDF's <dynamics>, which the model's `friction` option turns on) starts
straight out, falls, and its tip lands on a frictionless floor. Where it comes to rest is decided by
statics alone (the minimum of the potential energy with the tip on the floor: the upper link straight
down, the lower one leaning on its tip), not by the path, so two simulators with different contact
models must agree: MuJoCo loads the same URDF (a 1 mm sphere on the tip, a plane, condim 1 with zero
friction: frictionless) and runs 120 s; the node runs with simulation: true, the tip as its only
contact, friction 0, for 15 s of simulated time, and its last joint state is compared. Both soft
floors let the tip sink by a millimetre or so; the angles must agree to 5 mrad. Nothing passes through
the floor meanwhile (the tip never sinks more than 1 cm, landing included).
"""
from __future__ import annotations

import tempfile

import numpy as np
import pytest

import node_support as ns
from test_node_simulation import Sim

mujoco = pytest.importorskip("mujoco")

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

URDF = """<robot name="two_link">
  <link name="base_link"/>
  <link name="upper"><inertial><origin xyz="0.2 0 0"/><mass value="1.0"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.0143" iyz="0" izz="0.0143"/></inertial></link>
  <link name="lower"><inertial><origin xyz="0.2 0 0"/><mass value="0.8"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.0114" iyz="0" izz="0.0114"/></inertial></link>
  <link name="tip"><collision><geometry><sphere radius="0.001"/></geometry></collision></link>
  <joint name="shoulder" type="revolute"><parent link="base_link"/><child link="upper"/>
    <origin xyz="0 0 0.5"/><axis xyz="0 1 0"/><limit lower="-10" upper="10" effort="100" velocity="10"/>
    <dynamics damping="1.5"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="lower"/>
    <origin xyz="0.4 0 0"/><axis xyz="0 1 0"/><limit lower="-10" upper="10" effort="100" velocity="10"/>
    <dynamics damping="1.5"/></joint>
  <joint name="tip_joint" type="fixed"><parent link="lower"/><child link="tip"/><origin xyz="0.4 0 0"/></joint>
</robot>"""


def _mujoco_rest():
    m = mujoco.MjModel.from_xml_string(URDF.replace("<robot name=\"two_link\">", "<robot name=\"two_link\"><mujoco>"
                                                    "<compiler discardvisual=\"true\" fusestatic=\"false\"/></mujoco>"))
    with tempfile.NamedTemporaryFile(suffix=".xml") as f:
        mujoco.mj_saveLastXML(f.name, m)
        xml = open(f.name).read()
    xml = xml.replace("<worldbody>", '<worldbody><geom name="floor" type="plane" size="5 5 0.1" condim="1" '
                      'friction="0 0 0"/>', 1)
    m = mujoco.MjModel.from_xml_string(xml)
    m.opt.timestep = 0.0005
    m.jnt_limited[:] = 0
    assert np.allclose(m.dof_damping, 1.5)  # MuJoCo read the URDF's damping as ours does
    d = mujoco.MjData(m)
    names = [m.joint(i).name for i in range(m.njnt)]
    while d.time < 120.0:
        mujoco.mj_step(m, d)
    assert np.abs(d.qvel).max() < 1e-4 and d.ncon == 1
    return dict(zip(names, d.qpos.copy()))


def test_the_dropped_arm_comes_to_rest_where_mujoco_puts_it():
    import dynamics_node as dn
    ref = _mujoco_rest()
    sim = Sim("sim_mj", {"robot_description": URDF, "friction": True, "simulation_contact_links": ["tip"],
                         "simulation_friction": 0.0, "real_time_factor": 3.0})
    try:
        st = sim.states(15.0, timeout=120.0)
    finally:
        sim.stop()
    names, q = st[-1][3], st[-1][1]
    ours = dict(zip(names, q))
    m = dn.load_model(URDF)
    tip = [float(np.asarray(dn.link_pose(m, s[1], "tip"))[2, 3]) for s in st[::5]]
    assert min(tip) > -0.01, min(tip)
    assert abs(ref["shoulder"] - np.pi / 2) < 0.01 and ref["elbow"] < -1.0  # resting on the tip, not hanging
    for j in ("shoulder", "elbow"):
        assert abs(ours[j] - ref[j]) < 5e-3, (ours, ref)
    assert np.abs(st[-1][2]).max() < 1e-3


# ----------------------------------------------------------------------------- shapes on a table
ARM_ON_TABLE = """<robot name="two_link_shapes">
  <link name="base_link"/>
  <link name="upper"><inertial><origin xyz="0.2 0 0"/><mass value="1.0"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.0143" iyz="0" izz="0.0143"/></inertial>
    <collision><origin xyz="0.2 0 0" rpy="0 1.5707963267948966 0"/>
      <geometry><cylinder radius="0.02" length="0.36"/></geometry></collision></link>
  <link name="lower"><inertial><origin xyz="0.2 0 0"/><mass value="0.8"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.0114" iyz="0" izz="0.0114"/></inertial>
    <collision><origin xyz="0.2 0 0" rpy="0 1.5707963267948966 0"/>
      <geometry><cylinder radius="0.02" length="0.3"/></geometry></collision></link>
  <link name="tip"><collision><geometry><sphere radius="0.03"/></geometry></collision></link>
  <joint name="shoulder" type="revolute"><parent link="base_link"/><child link="upper"/>
    <origin xyz="0 0 0.5"/><axis xyz="0 1 0"/><limit lower="-10" upper="10" effort="100" velocity="10"/>
    <dynamics damping="1.5"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="lower"/>
    <origin xyz="0.4 0 0"/><axis xyz="0 1 0"/><limit lower="-10" upper="10" effort="100" velocity="10"/>
    <dynamics damping="1.5"/></joint>
  <joint name="tip_joint" type="fixed"><parent link="lower"/><child link="tip"/><origin xyz="0.4 0 0"/></joint>
</robot>"""
TABLE = (0.6, 0.0, 0.025, 0.9, 1.0, 0.05)  # top at z = 0.05, from x = 0.15: clear of the hanging upper link


def _mujoco_rest_on_table():
    m = mujoco.MjModel.from_xml_string(ARM_ON_TABLE.replace(
        '<robot name="two_link_shapes">', '<robot name="two_link_shapes"><mujoco><compiler discardvisual="true" '
        'fusestatic="false"/></mujoco>'))
    with tempfile.NamedTemporaryFile(suffix=".xml") as f:
        mujoco.mj_saveLastXML(f.name, m)
        xml = open(f.name).read()
    x, y, z, sx, sy, sz = TABLE
    xml = xml.replace("<worldbody>", f'<worldbody><geom name="table" type="box" pos="{x} {y} {z}" '
                      f'size="{sx / 2} {sy / 2} {sz / 2}"/><geom name="floor" type="plane" size="5 5 0.1"/>', 1)
    m = mujoco.MjModel.from_xml_string(xml)
    m.opt.timestep = 0.0005
    m.jnt_limited[:] = 0
    m.geom_condim[:] = 1          # frictionless everywhere: the rest pose is the statics' alone
    m.geom_friction[:, 0] = 0.0
    m.geom_solref[:, 0] = 0.002   # a stiff contact (sinking well under a millimetre)
    kinds = sorted(int(t) for t in m.geom_type)
    assert kinds.count(int(mujoco.mjtGeom.mjGEOM_CYLINDER)) == 2 and kinds.count(int(mujoco.mjtGeom.mjGEOM_SPHERE)) == 1
    d = mujoco.MjData(m)
    names = [m.joint(i).name for i in range(m.njnt)]
    while d.time < 60.0:
        mujoco.mj_step(m, d)
    assert np.abs(d.qvel).max() < 1e-4
    touching = {m.geom(d.contact[i].geom1).name or m.geom(d.contact[i].geom2).name for i in range(d.ncon)}
    return dict(zip(names, d.qpos.copy())), d.ncon, touching


def test_an_arm_with_collision_shapes_dropped_on_a_table_rests_where_mujoco_puts_it():
    """The same two-link arm with cylinder links and a sphere at its tip, released straight out
    above a table (a box obstacle, top at 5 cm): frictionless contacts and joint damping, so the rest
    pose is decided by statics (the upper link hanging, the lower one leaning on its tip sphere on the
    table). MuJoCo collides the URDF's own cylinder and sphere geoms with a box; the simulated robot
    its rim points and the sphere's lowest point with simulation_obstacles. Same pose within 5 mrad;
    no collision point ever deeper than 2 mm."""
    from test_sim_bench import world
    ref, ncon, _ = _mujoco_rest_on_table()
    assert abs(ref["shoulder"] - np.pi / 2) < 0.05 and ref["elbow"] < -1.0 and ncon == 1
    w = world(ARM_ON_TABLE, friction=True, simulation_friction=0.0, simulation_obstacles=list(TABLE))
    assert w.env.npoints == 2 * 16 + 1
    deep = 0.0
    for _ in range(20000):
        assert w.step(), w.halted
        deep = max(deep, w.env.penetration(w.q))
    ours = dict(zip(w.names, w.q[w.jq]))
    for j in ("shoulder", "elbow"):
        assert abs(ours[j] - ref[j]) < 5e-3, (ours, ref)
    assert deep < 2e-3 and np.abs(w.qd).max() < 1e-3
