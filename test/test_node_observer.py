"""The momentum observer through a running dynamics_node: joint states with efforts from the
simulation of test_observer_core in, ~/external_torques, ~/external_wrench, ~/collision out,
~/reset_observer, and the observer's /diagnostics status."""
from __future__ import annotations

import time

import numpy as np
import pytest

import node_support as ns

pytestmark = [
    pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not installed"),
    pytest.mark.skipif(not ns.core_available(), reason="the dynamics core is not importable"),
]

NAME = "observer_arm7"
JS_TOPIC = "/observer_test/joint_states"
J = [f"joint{i}" for i in range(1, 8)]
K = 200.0
T0_NS = 7_000_000_000


@pytest.fixture(scope="module")
def node():
    yield from ns.serve_one(NAME, {"urdf_path": str(ns.ARM7), "joint_states_topic": JS_TOPIC,
                                   "observer_gain": K, "wrench_link": "link7",
                                   "collision_threshold": [2.0], "joint_state_timeout": 1.0})


def test_external_torques_wrench_collision_and_reset_through_the_node(node):
    import dynamics_node as dn
    import test_observer_core as core
    from diagnostic_msgs.msg import DiagnosticArray
    from dynamics_node.algorithms.estimation import observer as obs
    from geometry_msgs.msg import WrenchStamped
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Bool
    from std_srvs.srv import Trigger

    model = dn.load_model(str(ns.ARM7))
    sim = core.simulate(model, seconds=0.8, window=(0.3, 1.0))   # free motion, then pushed from 0.3 s
    c = ns.ros()
    pub = c.publisher(JointState, JS_TOPIC)
    torques, _ = c.subscribe(JointState, node.path("gravity_torques"))
    ext_q, _ = c.subscribe(JointState, node.path("external_torques"))
    wrench_q, _ = c.subscribe(WrenchStamped, node.path("external_wrench"))
    coll_q, _ = c.subscribe(Bool, node.path("collision"), qos=QoSProfile(
        depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    diag_q, _ = c.subscribe(DiagnosticArray, "/diagnostics")
    c.wait_for_subscriber(pub)
    # the node's publishers matched with ours: joint states without effort until a torque comes back
    deadline = time.monotonic() + 20
    while torques.empty() and time.monotonic() < deadline:
        pub.publish(ns.joint_state(J, np.zeros(7), stamp_ns=1))
        time.sleep(0.05)
    # and until the observer runs (its kernels load in a thread of the stream process): stamps from
    # 1 s on, so that the simulation's (from 7 s) come after a gap that restarts it
    k = 0
    deadline = time.monotonic() + 60
    while (ext_q.empty() or wrench_q.empty()) and time.monotonic() < deadline:  # the wrench: once the
        # stream's once-a-second check has seen our subscription
        k += 1
        pub.publish(ns.joint_state(J, np.zeros(7), np.zeros(7), stamp_ns=1_000_000_000 + k * 1_000_000,
                                   efforts=np.zeros(7)))
        time.sleep(0.02)
    assert not ext_q.empty() and not wrench_q.empty(), "the observer never answered"
    time.sleep(0.3)
    ns.drain(torques), ns.drain(ext_q), ns.drain(wrench_q)

    stamps = [T0_NS + round(t * 1e9) for t, *_ in sim]
    t_start = time.perf_counter()
    for k, ((t, q, qd, tau, _), st) in enumerate(zip(sim, stamps)):
        pub.publish(ns.joint_state(J, q, qd, stamp_ns=st, efforts=tau))
        time.sleep(max(0.0, t_start + (k + 1) * 1e-3 - time.perf_counter()))
    ext = ns.collect(ext_q, len(sim), timeout=15.0)
    wr = ns.collect(wrench_q, len(sim), timeout=5.0)
    assert [ns.stamp_ns(m) for m in ext] == stamps, f"{len(ext)} external torques for {len(sim)} joint states"

    # the same observer in this process, on the same samples (the stream passes its gravity torques)
    from dynamics_node.ros.stream_observer import default_wrench_link  # noqa: F401 - importable edge
    ref = obs.MomentumObserver(model, K, timeout=1.0)
    for (t, q, qd, tau, jtf), st, m, w in zip(sim, stamps, ext, wr):
        r = ref.update((st - stamps[0]) * 1e-9, q, qd, tau)
        assert list(m.name) == J
        np.testing.assert_allclose(m.effort, r, rtol=1e-9, atol=1e-9)
        est = obs.external_wrench(model, q, "link7", r).wrench
        got = [w.wrench.force.x, w.wrench.force.y, w.wrench.force.z, w.wrench.torque.x, w.wrench.torque.y,
               w.wrench.torque.z]
        assert w.header.frame_id == "link7" and ns.stamp_ns(w) == st
        np.testing.assert_allclose(got, est, rtol=1e-7, atol=1e-7)
    # and what it estimates is the push (the accuracy itself is test_observer_core's): J^T F at the
    # end within 5 % (the arm moves fast there: r lags J^T F by about its rate / K), the force within 10 %
    np.testing.assert_allclose(ext[-1].effort, sim[-1][4], atol=0.05 * np.abs(sim[-1][4]).max())
    F = np.array([wr[-1].wrench.force.x, wr[-1].wrench.force.y, wr[-1].wrench.force.z])
    assert np.linalg.norm(F - core.F_PUSH[:3]) < 0.1 * np.linalg.norm(core.F_PUSH[:3])
    flags = [m.data for m in ns.collect(coll_q, 1, timeout=5.0)]
    assert flags[:1] == [True]

    res = c.call(Trigger, node.path("reset_observer"), Trigger.Request())
    assert res.success, res.message
    t, q, qd, tau, _ = sim[-1]
    pub.publish(ns.joint_state(J, q, qd, stamp_ns=stamps[-1] + 1_000_000, efforts=tau))
    after = ns.collect(ext_q, 1, timeout=5.0)
    assert after and np.array_equal(after[0].effort, np.zeros(7))

    deadline = time.monotonic() + 10   # the stream reports twice a second, diagnostics go out once
    status = None
    while time.monotonic() < deadline and not (status and int(status["samples"]) > len(sim)):
        for arr in ns.drain(diag_q, timeout=0.5):
            for s in arr.status:
                if s.name == f"{NAME}: observer":
                    status = {kv.key: kv.value for kv in s.values}
    assert status is not None and int(status["samples"]) > len(sim) and status["wrench_link"] == "link7"
    assert status["wrench_jacobian_rank"] == "6"
