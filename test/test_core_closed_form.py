"""Closed-form mechanisms and the numbers printed in Featherstone's book (INVENTORY.md §6)."""
import math

import numpy as np
import pytest

import urdfgen as ug
from conftest import assert_close

G = 9.81


def a(*x):
    """1-D float array (lists are tested separately in test_core_pinocchio/test_core_errors)."""
    return np.array(x, dtype=float)


def _link(name, mass, com, ixx, iyy, izz):
    return (f'  <link name="{name}"><inertial><origin xyz="{ug._v(com)}" rpy="0 0 0"/><mass value="{mass!r}"/>'
            f'<inertia ixx="{ixx!r}" ixy="0" ixz="0" iyy="{iyy!r}" iyz="0" izz="{izz!r}"/></inertial></link>\n')


def _joint(name, jt, parent, child, xyz="0 0 0", axis="0 0 1", limits=True):
    s = (f'  <joint name="{name}" type="{jt}"><parent link="{parent}"/><child link="{child}"/>'
         f'<origin xyz="{xyz}" rpy="0 0 0"/><axis xyz="{axis}"/>')
    if limits and jt in ("revolute", "prismatic"):
        s += '<limit lower="-10" upper="10" effort="100" velocity="10"/>'
    return s + "</joint>\n"


def _robot(body):
    return '<?xml version="1.0"?>\n<robot name="closed_form">\n  <link name="world_base"/>\n' + body + "</robot>\n"


STATES = [(0.3, -0.7, 1.1), (-2.0, 1.5, -0.4), (2.9, 0.0, 0.0), (0.0, 0.0, 0.0)]


# ------------------------------------------------------------------------------------------------
def test_point_mass_pendulum(dn):
    m, l = 1.7, 0.8
    xml = _robot(_link("bob", m, (0, 0, -l), 0.0, 0.0, 0.0)
                 + _joint("hinge", "revolute", "world_base", "bob", axis="0 1 0"))
    model = dn.load_model(xml)
    for (q, qd, qdd) in STATES:
        assert_close(dn.mass_matrix(model, a(q)), [[m * l * l]], what="H pendulum")
        assert_close(dn.gravity(model, a(q)), [m * G * l * math.sin(q)], what="gravity pendulum")
        assert_close(dn.inverse_dynamics(model, a(q), a(qd), a(qdd)), [m * l * l * qdd + m * G * l * math.sin(q)],
                     what="ID")
        assert_close(dn.bias_forces(model, a(q), a(qd)), [m * G * l * math.sin(q)], what="C pendulum")
        tau = 0.37
        assert_close(dn.forward_dynamics(model, a(q), a(qd), a(tau)), [(tau - m * G * l * math.sin(q)) / (m * l * l)],
                     what="FD")
        assert_close(dn.center_of_mass(model, a(q)), [-l * math.sin(q), 0.0, -l * math.cos(q)], what="CoM pendulum")


def test_rod_pendulum(dn):
    m, L = 2.2, 1.3
    I = m * L * L / 12
    xml = _robot(_link("rod", m, (0, 0, -L / 2), I, I, 0.0)
                 + _joint("hinge", "revolute", "world_base", "rod", axis="0 1 0"))
    model = dn.load_model(xml)
    for (q, qd, qdd) in STATES:
        expect = m * L * L / 3 * qdd + m * G * L / 2 * math.sin(q)
        assert_close(dn.inverse_dynamics(model, a(q), a(qd), a(qdd)), [expect], what="ID rod")
        assert_close(dn.mass_matrix(model, a(q)), [[m * L * L / 3]], what="H rod")
        assert_close(dn.forward_dynamics(model, a(q), a(qd), [expect]), a(qdd), what="FD rod")


# ------------------------------------------------------------------------------------------------
TL = dict(m1=2.3, m2=1.4, l1=1.1, l2=0.8, lc1=0.45, lc2=0.35, I1=0.21, I2=0.09)


def _two_link_model(dn):
    p = TL
    xml = _robot(
        _link("upper", p["m1"], (p["lc1"], 0, 0), 0.01, p["I1"], p["I1"])
        + _link("fore", p["m2"], (p["lc2"], 0, 0), 0.01, p["I2"], p["I2"])
        + _joint("shoulder", "revolute", "world_base", "upper")
        + _joint("elbow", "revolute", "upper", "fore", xyz=f"{p['l1']!r} 0 0"))
    return dn.load_model(xml, gravity=(0.0, -G, 0.0))


def _two_link_closed_form(q, qd):
    p = TL
    m1, m2, l1, lc1, lc2, I1, I2 = p["m1"], p["m2"], p["l1"], p["lc1"], p["lc2"], p["I1"], p["I2"]
    c2, s2 = math.cos(q[1]), math.sin(q[1])
    c1, c12 = math.cos(q[0]), math.cos(q[0] + q[1])
    H = np.array([
        [m1 * lc1 ** 2 + m2 * (l1 ** 2 + lc2 ** 2 + 2 * l1 * lc2 * c2) + I1 + I2, m2 * (lc2 ** 2 + l1 * lc2 * c2) + I2],
        [m2 * (lc2 ** 2 + l1 * lc2 * c2) + I2, m2 * lc2 ** 2 + I2]])
    h = m2 * l1 * lc2 * s2
    Cq = np.array([-h * (2 * qd[0] * qd[1] + qd[1] ** 2), h * qd[0] ** 2])
    g = np.array([(m1 * lc1 + m2 * l1) * G * c1 + m2 * lc2 * G * c12, m2 * lc2 * G * c12])
    return H, Cq, g


def test_two_link_planar_arm(dn):
    model = _two_link_model(dn)
    assert model.joint_names == ("shoulder", "elbow")
    rng = np.random.default_rng(11)
    for _ in range(4):
        q, qd, qdd = rng.uniform(-2, 2, (3, 2))
        H, Cq, g = _two_link_closed_form(q, qd)
        assert_close(dn.mass_matrix(model, q), H, what="two-link H")
        assert_close(dn.gravity(model, q), g, what="two-link g")
        assert_close(dn.bias_forces(model, q, qd), Cq + g, what="two-link C")
        assert_close(dn.inverse_dynamics(model, q, qd, qdd), H @ qdd + Cq + g, what="two-link ID")
        tau = rng.uniform(-5, 5, 2)
        assert_close(dn.forward_dynamics(model, q, qd, tau), np.linalg.solve(H, tau - Cq - g), what="two-link FD")
        # tip position: forward kinematics of the elbow frame
        T = dn.link_pose(model, q, "fore")
        assert_close(T[:3, 3], [TL["l1"] * math.cos(q[0]), TL["l1"] * math.sin(q[0]), 0.0], what="elbow position")


# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis,sign", [("0 0 1", 1.0), ("0 0 -2.5", -1.0)])
def test_prismatic_along_gravity(dn, axis, sign):
    m = 3.3
    xml = _robot(_link("slider", m, (0.1, -0.2, 0.3), 0.02, 0.03, 0.04)
                 + _joint("lift", "prismatic", "world_base", "slider", xyz="0.2 0.1 0.5", axis=axis))
    model = dn.load_model(xml)
    for (q, qd, qdd) in STATES:
        assert_close(dn.gravity(model, a(q)), [sign * m * G], what="prismatic gravity = m g")
        assert_close(dn.inverse_dynamics(model, a(q), a(qd), a(qdd)), [m * qdd + sign * m * G], what="prismatic ID")
        assert_close(dn.mass_matrix(model, a(q)), [[m]], what="prismatic H")
        assert_close(dn.forward_dynamics(model, a(q), a(qd), a(0.0)), [-sign * G], what="prismatic free fall")
        assert_close(dn.link_pose(model, a(q), "slider")[:3, 3], [0.2, 0.1, 0.5 + sign * q], what="prismatic pose")


def _planar_block(dn, gravity):
    m, Izz = 2.5, 0.12
    xml = _robot(_link("block", m, (0, 0, 0), 0.05, 0.07, Izz)
                 + _joint("slide", "planar", "world_base", "block", axis="0 0 1", limits=False))
    return dn.load_model(xml, gravity=gravity), m, Izz


def test_planar_block_sizes(dn):
    model, _, _ = _planar_block(dn, (0, 0, -G))
    assert model.nv == 3
    assert model.nq == 3
    assert model.joint_names == ("slide",)


def test_planar_block_horizontal(dn):
    """Block on a horizontal plane (normal z, gravity -z): H = diag(m, m, Izz) at every angle,
    no gravity load, rotation-only or translation-only motion has no bias force (CoM at origin)."""
    model, m, Izz = _planar_block(dn, (0, 0, -G))
    for th in (0.0, 0.7, -2.4):
        q = a(0.3, -0.2, th)
        assert_close(dn.mass_matrix(model, q), np.diag([m, m, Izz]), what="planar H")
        assert_close(dn.gravity(model, q), np.zeros(3), what="planar gravity (horizontal)")
        assert_close(dn.bias_forces(model, q, a(0, 0, 1.3)), np.zeros(3), what="planar C spinning")
        assert_close(dn.bias_forces(model, q, a(0.4, -0.9, 0.0)), np.zeros(3), what="planar C translating")
        tau = np.array([1.0, -2.0, 0.3])
        assert_close(dn.forward_dynamics(model, q, np.zeros(3), tau), tau / [m, m, Izz], what="planar FD at rest")


def test_planar_block_in_plane_gravity(dn):
    """Plane xy with gravity along -y, at angle 0: holding force m g along y; free slide falls at g."""
    model, m, Izz = _planar_block(dn, (0, -G, 0))
    q = a(0.5, 0.25, 0.0)
    assert_close(dn.gravity(model, q), [0.0, m * G, 0.0], what="planar in-plane gravity")
    assert_close(dn.forward_dynamics(model, q, np.zeros(3), np.zeros(3)), [0.0, -G, 0.0], what="planar free fall")
    assert_close(dn.link_pose(model, q, "block")[:3, 3], [0.5, 0.25, 0.0], what="planar pose")


def test_free_body_newton_euler(dn):
    """Single free body (floating base), CoM at the body origin: body-frame Newton-Euler."""
    m = 4.0
    Ib = np.diag([0.3, 0.5, 0.7])
    xml = ('<?xml version="1.0"?>\n<robot name="free"><link name="body"><inertial>'
           '<origin xyz="0 0 0" rpy="0 0 0"/><mass value="4.0"/>'
           '<inertia ixx="0.3" ixy="0" ixz="0" iyy="0.5" iyz="0" izz="0.7"/></inertial></link></robot>')
    model = dn.load_model(xml, floating_base=True)
    assert model.nq == 7 and model.nv == 6
    rng = np.random.default_rng(2)
    for _ in range(3):
        quat = rng.normal(size=4)
        quat /= np.linalg.norm(quat)
        q = np.r_[rng.uniform(-1, 1, 3), quat]
        R = ug.quat_xyzw_to_R(*quat)
        v, w = rng.uniform(-1, 1, (2, 3))
        a, dw = rng.uniform(-1, 1, (2, 3))
        gb = R.T @ np.array([0, 0, -G])
        f = m * (a + np.cross(w, v)) - m * gb
        n = Ib @ dw + np.cross(w, Ib @ w)
        tau = dn.inverse_dynamics(model, q, np.r_[v, w], np.r_[a, dw])
        assert_close(tau, np.r_[f, n], what="free body ID")
        assert_close(dn.forward_dynamics(model, q, np.r_[v, w], np.r_[f, n]), np.r_[a, dw], what="free body FD")
        T = dn.link_pose(model, q, "body")
        assert_close(T[:3, :3], R, what="free body orientation (x y z w quaternion)")
        assert_close(T[:3, 3], q[:3], what="free body position")
        assert_close(dn.link_velocity(model, q, np.r_[v, w], "body"), np.r_[R @ v, R @ w],
                     what="free body velocity (world axes)")


# ------------------------------------------------------------------------------------------------
# Featherstone §10.2 and §6.5
# ------------------------------------------------------------------------------------------------
BOOK_TAU_D = [126.4936, 97.4663, 69.9762, 43.7998, 21.9371, 6.1646]


@pytest.mark.parametrize("q1", [75.0, 0.0])
def test_book_sixlink_tau_d_and_cond(dn, q1):
    model = dn.load_model(ug.DATA / "sixlink.urdf", gravity=(0.0, 0.0, 0.0))
    q = np.deg2rad([q1, -75, 75, -75, 75, -75])
    H = np.asarray(dn.mass_matrix(model, q))
    tau_d = H @ np.ones(6)
    # the book prints these truncated (not rounded) to 4 decimals: 0 <= tau_d - printed < 1e-4
    diff = tau_d - np.asarray(BOOK_TAU_D)
    assert np.all(diff >= -1e-12) and np.all(diff < 1e-4), f"tau_d = H 1 = {tau_d}, book {BOOK_TAU_D}"
    assert round(float(np.linalg.cond(H))) == 725
    assert abs(np.linalg.cond(H) - 725.4) < 0.05
    # tau_d is also inverse dynamics at rest with unit accelerations (no gravity)
    tau_id = np.asarray(dn.inverse_dynamics(model, q, np.zeros(6), np.ones(6)))
    diff = tau_id - np.asarray(BOOK_TAU_D)
    assert np.all(diff >= -1e-12) and np.all(diff < 1e-4), f"ID(q, 0, 1) = {tau_id}, book {BOOK_TAU_D}"
    np.testing.assert_allclose(dn.forward_dynamics(model, q, np.zeros(6), tau_d), np.ones(6), rtol=1e-9)


def test_book_expanded_parent_array():
    from dynamics_node.algorithms.tree.ltdl import expanded_parent_array

    got = expanded_parent_array((0, 1, 1, 2, 2, 3), (1, 3, 1, 1, 1, 1))
    assert [int(x) for x in got] == [0, 1, 2, 3, 1, 4, 4, 5]
    # all single-DoF: unchanged
    assert [int(x) for x in expanded_parent_array((0, 1, 1, 2, 2, 3), (1, 1, 1, 1, 1, 1))] == [0, 1, 1, 2, 2, 3]
    # a 6-DoF floating base at the root of a chain of two: 0,1,2,3,4,5 then 6,7
    assert [int(x) for x in expanded_parent_array((0, 1, 2), (6, 1, 1))] == [0, 1, 2, 3, 4, 5, 6, 7]


PLANAR_ARM = '''<?xml version="1.0"?>
<robot name="planar_arm"><link name="base"/>
  <link name="block"><inertial><origin xyz="0.1 0.2 0.05" rpy="0.1 0.2 0.3"/><mass value="2.5"/>
    <inertia ixx="0.05" ixy="0.001" ixz="0" iyy="0.07" iyz="0" izz="0.1"/></inertial></link>
  <link name="arm"><inertial><origin xyz="0.3 0 0" rpy="0 0 0"/><mass value="1.0"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial></link>
  <joint name="slide" type="planar"><parent link="base"/><child link="block"/>
    <origin xyz="0.3 -0.2 0.1" rpy="0.2 0.1 0.4"/><axis xyz="0 0 1"/></joint>
  <joint name="hinge" type="revolute"><parent link="block"/><child link="arm"/><origin xyz="0.2 0 0" rpy="0 0 0"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
</robot>
'''


def test_planar_joint_against_pinocchio(dn):
    """Planar joint (axis z) under a tilted origin, carrying an arm, against Pinocchio's
    JointModelPlanar. Ours: q = (x, y, theta), qd = dq/dt. Pinocchio: q = (x, y, cos, sin),
    v = (R(theta)^T (xd, yd), thetad) in the moving frame. So v_pin = G qd, a_pin = G qdd + Gdot qd,
    tau_ours = G^T tau_pin, H_ours = G^T H_pin G."""
    import pinocchio as pin

    m = dn.load_model(PLANAR_ARM)
    assert m.joint_names == ("slide", "hinge") and m.nq == 4 and m.nv == 4
    pm = pin.buildModelFromXML(PLANAR_ARM)
    pd = pm.createData()
    rng = np.random.default_rng(8)
    for _ in range(3):
        q, qd, qdd, tau = rng.uniform(-1.5, 1.5, (4, 4))
        c, s = math.cos(q[2]), math.sin(q[2])
        Gm = np.eye(4)
        Gm[:2, :2] = [[c, s], [-s, c]]
        Gd = np.zeros((4, 4))
        Gd[:2, :2] = np.array([[-s, c], [-c, -s]]) * qd[2]
        pq = np.r_[q[0], q[1], c, s, q[3]]
        H = pin.crba(pm, pd, pq)
        H = np.triu(H) + np.triu(H, 1).T
        Ho = Gm.T @ H @ Gm
        tau_id = Gm.T @ pin.rnea(pm, pd, pq, Gm @ qd, Gm @ qdd + Gd @ qd)
        C = Gm.T @ pin.rnea(pm, pd, pq, Gm @ qd, Gd @ qd)
        assert_close(dn.inverse_dynamics(m, q, qd, qdd), tau_id, what="planar ID")
        assert_close(dn.mass_matrix(m, q), Ho, what="planar H")
        assert_close(dn.bias_forces(m, q, qd), C, what="planar C")
        assert_close(dn.gravity(m, q), Gm.T @ pin.computeGeneralizedGravity(pm, pd, pq), what="planar gravity")
        assert_close(dn.forward_dynamics(m, q, qd, tau), np.linalg.solve(Ho, tau - C), what="planar FD")
        pin.framesForwardKinematics(pm, pd, pq)
        for link in ("block", "arm"):
            assert_close(dn.link_pose(m, q, link), pd.oMf[pm.getFrameId(link, pin.BODY)].homogeneous,
                         what=f"planar pose {link}")
            J = pin.computeFrameJacobian(pm, pd, pq, pm.getFrameId(link, pin.BODY), pin.LOCAL_WORLD_ALIGNED)
            assert_close(dn.jacobian(m, q, link), J @ Gm, what=f"planar jacobian {link}")
