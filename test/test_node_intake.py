"""The robot from /robot_description and joint states as drivers publish them (a running node):
a latched description is the only source, joint states are split over a reliable and a best-effort
publisher, a second description replaces the first, a bad one is refused; the stream survives
topic changes under load; implausible parameters are refused; effort commands are saturated."""
from __future__ import annotations

import time

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

UR5 = ns.erd("ur_description/urdf/ur5_robot.urdf")
PANDA = ns.erd("panda_description/urdf/panda.urdf")
NAME = "intake_node"
JS = "/intake/joint_states"


def _latched_publisher(topic="/robot_description"):
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    return ns.ros().node.create_publisher(String, topic, qos), String


def _wait_for_model(node, joint_names, timeout=60.0):
    from dynamics_interfaces.srv import MassMatrix
    c = ns.ros()
    deadline = time.monotonic() + timeout
    res = None
    while time.monotonic() < deadline:
        req = MassMatrix.Request(position=[0.0] * len(joint_names))  # these robots: one q per joint
        res = c.call(MassMatrix, node.path("mass_matrix"), req)
        if res.success and list(res.name) == list(joint_names):
            return res
        time.sleep(0.1)
    raise AssertionError(f"the node did not take the model with joints {joint_names}: {res}\n{node.output()}")


@pytest.fixture(scope="module")
def desc():
    pub, String = _latched_publisher()
    yield pub, String
    ns.ros().node.destroy_publisher(pub)


@pytest.fixture(scope="module")
def node(desc):
    pub, String = desc
    pub.publish(String(data=UR5.read_text()))      # latched before the node exists
    yield from ns.serve_one(NAME, {"joint_states_topic": JS, "joint_state_timeout": 1.0})


def test_model_from_latched_topic_split_joint_states_and_replacement(node, desc):
    import dynamics_node as dn
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from conftest import assert_close
    from urdfgen import PinOracle
    pub_desc, String = desc
    c = ns.ros()
    ur5 = dn.load_model(str(UR5))
    _wait_for_model(node, ur5.joint_names)
    deadline = time.monotonic() + 10   # the node logs what it loaded just after taking it
    while "robot 'ur5' from topic /robot_description" not in node.output() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "robot 'ur5' from topic /robot_description" in node.output()

    # joint states split: shoulder/elbow from a reliable driver, the wrist from a best-effort one
    reliable = c.publisher(JointState, JS)
    best_effort = c.node.create_publisher(JointState, JS,
                                          QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
    out, _ = c.subscribe(JointState, node.path("gravity_torques"))
    c.wait_for_subscriber(reliable)
    c.wait_for_subscriber(best_effort)
    names = list(ur5.joint_names)
    q = np.array([0.3, -1.1, 1.4, -0.6, 0.8, 0.2])
    deadline = time.monotonic() + 20
    got = []
    while time.monotonic() < deadline and not got:
        best_effort.publish(ns.joint_state(names[3:], q[3:]))
        reliable.publish(ns.joint_state(names[:3] + ["gripper_not_in_model"], list(q[:3]) + [0.01]))
        got = ns.drain(out, timeout=0.1)
    assert got, "no gravity torque from split joint states"
    msg = got[-1]
    assert list(msg.name) == names
    assert_close(np.asarray(msg.effort), PinOracle(UR5.read_text(), ur5).gravity(q), what="ur5 gravity")

    # only one publisher: the other's joints go stale, no torque, diagnostics name them
    from diagnostic_msgs.msg import DiagnosticArray
    diags, _ = c.subscribe(DiagnosticArray, "/diagnostics")
    time.sleep(1.2)
    ns.drain(out)
    for _ in range(20):
        reliable.publish(ns.joint_state(names[:3], q[:3]))
        time.sleep(0.02)
    assert ns.drain(out, timeout=0.3) == []
    deadline = time.monotonic() + 5
    text = ""
    while time.monotonic() < deadline and "wrist_1_joint" not in text:
        for arr in ns.drain(diags, timeout=0.2):
            for s in arr.status:
                if s.name == f"{NAME}: joint states":
                    text = s.message
    assert "missing or stale" in text and "wrist_1_joint, wrist_2_joint, wrist_3_joint" in text, text

    # a second description replaces the first; a bad one is refused and the model stays
    panda = dn.load_model(str(PANDA))
    pub_desc.publish(String(data=PANDA.read_text()))
    _wait_for_model(node, panda.joint_names)
    pub_desc.publish(String(data="<robot name='broken'><link name='a'/><joint name='j' type='revolute'>"))
    deadline = time.monotonic() + 10
    while "robot_description topic: refused" not in node.output() and time.monotonic() < deadline:
        time.sleep(0.1)
    _wait_for_model(node, panda.joint_names, timeout=5)
    assert "robot_description topic: refused" in node.output()
    assert node.alive()


def test_no_model_yet_is_answered_with_the_reason():
    """A node with no robot at all serves, and says it waits for the topic."""
    from dynamics_interfaces.srv import InverseDynamics
    procs = ns.start_nodes({"intake_waiting": {}}, ros_args=("-r", "robot_description:=/nobody_publishes_this"))
    p = procs["intake_waiting"]
    try:
        res = ns.ros().call(InverseDynamics, p.path("inverse_dynamics"), InverseDynamics.Request())
        assert not res.success and "no model yet" in res.message and "robot_description" in res.message
    finally:
        p.stop()
        p.kill()


def test_stream_survives_topic_changes_under_load_and_implausible_values_are_refused():
    """Parameters changed while joint states stream: the stream thread goes on."""
    import dynamics_node as dn
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    name = "intake_topics"
    procs = ns.start_nodes({name: {"urdf_path": str(PANDA), "joint_states_topic": "/it/js_a",
                                   "effort_command_topic": "/it/cmd_a", "effort_limit_scale": 0.01}})
    p = procs[name]
    c = ns.ros()
    panda = dn.load_model(str(PANDA))
    names = list(panda.joint_names)
    q = [0.0, 0.3, 0.0, -1.5, 0.0, 1.8, 0.7, 0.02]
    pubs = {t: c.publisher(JointState, t) for t in ("/it/js_a", "/it/js_b")}
    out, _ = c.subscribe(JointState, p.path("gravity_torques"))
    cmds = {t: c.subscribe(Float64MultiArray, t)[0] for t in ("/it/cmd_a", "/it/cmd_b")}
    try:
        topic = ["/it/js_a"]
        stop = [False]
        import threading

        def stream():
            while not stop[0]:
                for t in pubs:
                    pubs[t].publish(ns.joint_state(names, q))
                time.sleep(0.001)
        th = threading.Thread(target=stream, daemon=True)
        th.start()
        for k in range(20):
            js = "/it/js_b" if k % 2 == 0 else "/it/js_a"
            cmd = "/it/cmd_b" if k % 2 == 0 else "/it/cmd_a"
            assert c.set_parameters(name, joint_states_topic=js, effort_command_topic=cmd) == [(True, ""), (True, "")]
            topic[0] = js
            time.sleep(0.05)
        # the last subscription is matched with its publisher by DDS discovery (after 40 entities
        # made and destroyed in two seconds, that can take a second or two): wait for the stream
        ns.drain(out)
        got, deadline = [], time.monotonic() + 20
        while len(got) <= 10 and time.monotonic() < deadline:
            got += ns.drain(out, timeout=0.2)
        assert len(got) > 10, "the stream stopped after topic changes"
        ns.drain(cmds["/it/cmd_a"])
        last_cmd = ns.drain(cmds["/it/cmd_a"], timeout=1.0)
        assert last_cmd, "no effort command after the changes"
        # saturation: 1% of the URDF limits, far below the gravity torques; gravity_torques unsaturated
        torque = np.asarray(ns.drain(out, timeout=1.0)[-1].effort)
        limits = np.array([panda.joint_limits[j][2] for j in names]) * 0.01
        np.testing.assert_array_equal(np.asarray(last_cmd[-1].data), np.clip(torque, -limits, limits))
        assert np.any(np.abs(torque) > limits)
        assert "saturated" in p.output()
        stop[0] = True
        th.join()
        # implausible or unusable values are refused with the reason and change nothing
        for key, value, word in (("markers_rate", 1e-12, "0.01"), ("gravity", [0.0, 0.0, -1e308], "100"),
                                 ("payload.center_of_mass", [1e200, 0.0, 0.0], "10 m")):
            ok, reason = c.set_parameters(name, **{key: value})[0]
            assert not ok and word in reason, (key, reason)
        assert c.get_parameter(name, "markers_rate") == 2.0
        assert p.alive()
    finally:
        stop[0] = True
        p.stop()
        p.kill()


_HUGE_CLIENT = r"""
import sys
import rclpy
from dynamics_interfaces.srv import TrajectoryInverseDynamics
from trajectory_msgs.msg import JointTrajectoryPoint
rclpy.init()
n = rclpy.create_node("huge_client")
req = TrajectoryInverseDynamics.Request()
req.trajectory.joint_names = [f"joint{i}" for i in range(1, 8)]
pt = JointTrajectoryPoint(positions=[0.1] * 7, velocities=[0.2] * 7, accelerations=[0.3] * 7)
req.trajectory.points = [pt] * int(sys.argv[2])
cli = n.create_client(TrajectoryInverseDynamics, sys.argv[1])
cli.wait_for_service(timeout_sec=30.0)
print("calling", flush=True)
f = cli.call_async(req)
rclpy.spin_until_future_complete(n, f, timeout_sec=120.0)
r = f.result()
print("done", r is not None and r.success and len(r.trajectory.points), flush=True)
"""


def test_a_huge_service_request_loses_no_joint_state():
    """One 100,000-point trajectory_inverse_dynamics request used to hold the stream
    back for ~100 ms (one interpreter, one GIL) and lose joint states. The stream has a process of
    its own now: every joint state sent at 1 kHz while another process's request is served gets
    its torque (the request comes from a process of its own, so this one publishes evenly)."""
    import subprocess
    import sys

    from sensor_msgs.msg import JointState
    name = "intake_isolated"
    procs = ns.start_nodes({name: {"urdf_path": str(ns.ARM7), "joint_states_topic": "/iso/js"}})
    p = procs[name]
    c = ns.ros()
    J = [f"joint{i}" for i in range(1, 8)]
    pub = c.publisher(JointState, "/iso/js")
    out, _ = c.subscribe(JointState, p.path("gravity_torques"), depth=5000)
    client = None
    try:
        c.wait_for_subscriber(pub)
        while not ns.drain(out, timeout=0.05):          # matched both ways
            pub.publish(ns.joint_state(J, [0.0] * 7))
        time.sleep(0.3)
        ns.drain(out)
        client = subprocess.Popen([sys.executable, "-c", _HUGE_CLIENT, p.path("trajectory_inverse_dynamics"),
                                   "100000"], env=ns.node_env(), stdout=subprocess.PIPE, text=True)
        assert client.stdout.readline().strip() == "calling"
        sent = []
        t0 = time.perf_counter()
        for k in range(3000):
            stamp = 2_000_000_000 + k * 1_000_000
            pub.publish(ns.joint_state(J, [0.01 * (k % 100)] * 7, stamp_ns=stamp))
            sent.append(stamp)
            time.sleep(max(0.0, t0 + (k + 1) * 1e-3 - time.perf_counter()))
        done = client.communicate(timeout=150)[0]
        got = []
        deadline = time.monotonic() + 20
        while len(got) < len(sent) and time.monotonic() < deadline:
            got += [ns.stamp_ns(m) for m in ns.drain(out, timeout=0.1)]
        assert "done 100000" in done, done
        missing = sorted(set(sent) - set(got))
        assert not missing, f"{len(missing)} of {len(sent)} joint states got no torque, e.g. {missing[:5]}"
    finally:
        if client is not None and client.poll() is None:
            client.kill()
        p.stop()
        p.kill()
