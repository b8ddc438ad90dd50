"""dynamics_node.ros.conversions without ROS: joint orders, vectors, wrenches, joint states.

Message objects are duck-typed there, so plain namespaces stand in for them; nothing here needs
rclpy or a running node.
"""
from __future__ import annotations

import array
from types import SimpleNamespace as NS

import numpy as np
import pytest

import node_support as ns
from dynamics_node.errors import InputError
from dynamics_node.ros.conversions import Conversions, JointStateReader, all_finite, check_payload


@pytest.fixture(scope="module")
def arm():
    import dynamics_node as dn
    return Conversions(dn.load_model(str(ns.ARM7)))


@pytest.fixture(scope="module")
def floating():
    import dynamics_node as dn
    return Conversions(dn.load_model(str(ns.ARM7), floating_base=True))


def _wrench(link, v):
    return NS(header=NS(frame_id=link),
              wrench=NS(force=NS(x=v[0], y=v[1], z=v[2]), torque=NS(x=v[3], y=v[4], z=v[5])))


def test_all_finite_agrees_with_numpy():
    cases = [np.zeros(7), np.array([1e308, 1e308]), np.array([np.nan, 1.0]), np.array([np.inf, -np.inf]),
             np.ones(100), np.r_[np.ones(99), np.nan], np.full(100, 1e308), np.zeros(0), np.array([-0.0])]
    for a in cases:
        assert all_finite(a) == bool(np.isfinite(a).all()), a


def test_shuffled_order_round_trips(arm):
    names = ["joint4", "joint2", "joint7", "joint1", "joint3", "joint6", "joint5"]
    order = arm.order(names)
    assert not order.identity and arm.order(names) is order          # cached
    q_caller = array.array("d", [4.0, 2.0, 7.0, 1.0, 3.0, 6.0, 5.0])
    q = arm.q(q_caller, order)
    np.testing.assert_array_equal(q, [1, 2, 3, 4, 5, 6, 7])
    np.testing.assert_array_equal(arm.out_v(q, order), q_caller)
    H = np.arange(49.0).reshape(7, 7)
    Hc = np.asarray(arm.out_matrix(H, order)).reshape(7, 7)
    idx = [int(n[-1]) - 1 for n in names]
    np.testing.assert_array_equal(Hc, H[np.ix_(idx, idx)])
    J = np.arange(42.0).reshape(6, 7)
    np.testing.assert_array_equal(np.asarray(arm.out_matrix(J, order, rows=False)).reshape(6, 7), J[:, idx])
    assert arm.order([]).identity
    np.testing.assert_array_equal(arm.v([], arm.order([]), "velocity"), np.zeros(7))


@pytest.mark.parametrize("names, values, field, words", [
    (["joint1"] * 7, [0.0] * 7, "name", ["name[1]", "twice"]),
    (["joint1", "joint2"], [0.0] * 2, "name", ["missing", "joint3"]),
    (["joint%d" % i for i in range(1, 7)] + ["elbow"], [0.0] * 7, "name", ["name[6]", "unknown joint 'elbow'"]),
    ([], [0.0] * 6, "position", ["position", "expected 7", "got 6"]),
    ([], [0.0, 0.0, float("nan"), 0.0, 0.0, 0.0, 0.0], "position", ["position[2]", "joint3", "nan"]),
])
def test_bad_requests_name_the_field(arm, names, values, field, words):
    with pytest.raises(InputError) as e:
        arm.q(values, arm.order(names))
    for w in words:
        assert w in str(e.value), str(e.value)


def test_floating_base_layout(floating):
    names = ["joint7", "joint6", "joint5", "joint4", "joint3", "joint2", "joint1"]
    order = floating.order(names)
    q = floating.q([1, 2, 3, 0, 0, 0, 1] + [7, 6, 5, 4, 3, 2, 1], order)
    np.testing.assert_array_equal(q, [1, 2, 3, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7])
    with pytest.raises(InputError, match="7 root coordinates"):
        floating.q([0.0] * 7, order)
    with pytest.raises(InputError, match="6 root entries"):
        floating.v([0.0] * 7, order, "velocity")


def test_wrenches(arm):
    f = arm.wrenches([_wrench("tool0", [1, 2, 3, 4, 5, 6]), _wrench("tool0", [1, 0, 0, 0, 0, 1]),
                      _wrench("link3", [0, 0, -9, 0, 0, 0])])
    assert f == {"tool0": (2.0, 2.0, 3.0, 4.0, 5.0, 7.0), "link3": (0.0, 0.0, -9.0, 0.0, 0.0, 0.0)}
    assert arm.wrenches([]) is None
    with pytest.raises(InputError, match=r"external_wrenches\[1\].header.frame_id: unknown link 'hand'"):
        arm.wrenches([_wrench("tool0", [0] * 6), _wrench("hand", [0] * 6)])
    with pytest.raises(InputError, match=r"external_wrenches\[0\].wrench.torque.y"):
        arm.wrenches([_wrench("tool0", [0, 0, 0, 0, float("inf"), 0])])


def test_joint_state_reader(arm):
    r = JointStateReader(arm)
    msg = NS(name=["gripper", "joint3", "joint1", "joint2", "joint4", "joint5", "joint6", "joint7"],
             position=array.array("d", [9, 3, 1, 2, 4, 5, 6, 7]), velocity=array.array("d"))
    q, qd = r.read(msg, want_velocity=True)
    np.testing.assert_array_equal(q, [1, 2, 3, 4, 5, 6, 7])
    assert qd is None
    msg.velocity = array.array("d", [float("nan"), 0, 0, 0, 0, 0, 0, 0])   # NaN on an unknown joint
    np.testing.assert_array_equal(r.read(msg)[0], [1, 2, 3, 4, 5, 6, 7])
    msg.velocity = array.array("d", [0, float("inf"), 0, 0, 0, 0, 0, 0])
    with pytest.raises(InputError, match="velocity"):
        r.read(msg)
    with pytest.raises(InputError, match="joint7 missing"):
        r.read(NS(name=J6, position=array.array("d", [0] * 6), velocity=[]))
    with pytest.raises(InputError, match="7 names but 6 positions"):
        r.read(NS(name=J6 + ["joint7"], position=array.array("d", [0] * 6), velocity=[]))


J6 = [f"joint{i}" for i in range(1, 7)]


def test_payload_physicality_is_the_cores_one_rule(arm):
    """check_payload checks fields only; the inertia's physicality is Model.with_payload's rule."""
    check_payload("tool0", 1.0, (0, 0, 0), (1.0, 0, 0, 0.1, 0, 0.1))
    for i6 in ((1.0, 0, 0, 0.1, 0, 0.1), (-0.1, 0, 0, 0.1, 0, 0.1)):
        with pytest.raises(InputError, match="payload inertia .* is not physical"):
            arm.model.with_payload("tool0", 1.0, (0, 0, 0), i6)


def test_payload_checks():
    check_payload("tool0", 1.0, (0, 0, 0.1), (0.01, 0, 0, 0.01, 0, 0.01))
    check_payload("tool0", 2.0, (0, 0, 0), (0, 0, 0, 0, 0, 0))              # a point mass
    check_payload("tool0", 0.0, (0, 0, 0), (0, 0, 0, 0, 0, 0))              # removal
    for args, word in [((-1.0, (0, 0, 0), (0,) * 6), "mass"),
                       ((1.0, (0, float("nan"), 0), (0,) * 6), r"center_of_mass\[1\] \(y\) is nan"),
                       ((1.0, (0, 0, 0), (0.1, 0, 0)), "6 values")]:
        with pytest.raises(InputError, match=word):
            check_payload("tool0", *args)


def test_trajectory_conversion(arm):
    names = ["joint2", "joint1", "joint3", "joint4", "joint5", "joint6", "joint7"]
    pts = [NS(positions=array.array("d", [2, 1, 3, 4, 5, 6, 7]), velocities=[], accelerations=[0.5] * 7),
           NS(positions=[20.0, 10.0, 30.0, 40.0, 50.0, 60.0, 70.0], velocities=array.array("d", range(7)),
              accelerations=array.array("d"))]
    order, Q, QD, QDD = arm.trajectory(NS(joint_names=names, points=pts))
    np.testing.assert_array_equal(Q, [[1, 2, 3, 4, 5, 6, 7], [10, 20, 30, 40, 50, 60, 70]])
    np.testing.assert_array_equal(QD, [np.zeros(7), [1, 0, 2, 3, 4, 5, 6]])
    np.testing.assert_array_equal(QDD, [np.full(7, 0.5), np.zeros(7)])
    arm.fill_efforts(pts, Q * 10, order)
    assert list(pts[1].effort) == [200.0, 100.0, 300.0, 400.0, 500.0, 600.0, 700.0]
    assert isinstance(pts[0].effort, array.array) and pts[0].effort.typecode == "d"
    bad = [NS(positions=[0.0] * 7, velocities=[0.0] * 3, accelerations=[])]
    with pytest.raises(InputError, match=r"trajectory.points\[0\].velocities: expected 7 values"):
        arm.trajectory(NS(joint_names=[], points=bad))
    bad = [NS(positions=[0.0] * 7, velocities=[], accelerations=[]),
           NS(positions=[0.0] * 7, velocities=[], accelerations=[0.0] * 6 + [float("inf")])]
    with pytest.raises(InputError, match=r"trajectory.points\[1\].accelerations: value inf"):
        arm.trajectory(NS(joint_names=[], points=bad))
