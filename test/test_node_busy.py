"""The node's promises on a busy machine (issue 21.1, 21.2): while two other processes keep both
cores busy, the momentum observer estimates from the first joint state after the node's
subscription is there (its kernels are loaded before it subscribes), and merged joint states from
a reliable and a best-effort publisher are answered from their first messages (the subscription is
best effort: it hears both, with no switch to wait for). No timing is asserted: what is counted is
what was answered, and the estimates are compared with the same observer run here."""
from __future__ import annotations

import contextlib
import subprocess
import sys
import time

import numpy as np
import pytest

import node_support as ns

pytestmark = [
    pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not installed"),
    pytest.mark.skipif(not ns.core_available(), reason="the dynamics core is not importable"),
]

NAME = "busy_arm7"
JS = "/busy_test/joint_states"
J = [f"joint{i}" for i in range(1, 8)]
K = 200.0
BURN = "import time\nend = time.monotonic() + 120\nwhile time.monotonic() < end: pass\n"


@contextlib.contextmanager
def busy_cores(n=2):
    procs = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait(10)


def test_observer_estimates_every_joint_state_from_the_first_on_a_busy_machine():
    import dynamics_node as dn
    import test_observer_core as core
    from dynamics_node import observer as obs
    from geometry_msgs.msg import WrenchStamped
    from sensor_msgs.msg import JointState

    model = dn.load_model(str(ns.ARM7))
    sim = core.simulate(model, seconds=1.0, window=(0.3, 2.0))   # pushed from 0.3 s on
    with busy_cores():
        procs = ns.start_nodes({NAME: {"urdf_path": str(ns.ARM7), "joint_states_topic": JS, "observer_gain": K,
                                       "wrench_link": "link7", "joint_state_timeout": 1.0}})
        node = procs[NAME]
        try:
            c = ns.ros()
            ext_q, ext_sub = c.subscribe(JointState, node.path("external_torques"))
            wr_q, wr_sub = c.subscribe(WrenchStamped, node.path("external_wrench"))
            pub = c.publisher(JointState, JS)
            c.wait_for_subscriber(pub)      # the node subscribed: it says so only once its kernels are in
            deadline = time.monotonic() + 20
            while min(ext_sub.get_publisher_count(), wr_sub.get_publisher_count()) < 1 and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.1)                 # both sides of our subscriptions matched
            t0 = 9_000_000_000
            stamps = [t0 + round(t * 1e9) for t, *_ in sim]
            start = time.perf_counter()
            for k, ((t, q, qd, tau, _), st) in enumerate(zip(sim, stamps)):
                pub.publish(ns.joint_state(J, q, qd, stamp_ns=st, efforts=tau))
                time.sleep(max(0.0, start + (k + 1) * 1e-3 - time.perf_counter()))
            ext = ns.collect(ext_q, len(sim), timeout=30.0)   # this process is starved too: counted, not timed
            wr = ns.collect(wr_q, len(sim), timeout=10.0)
        finally:
            node.stop()
            node.kill()
    assert len(ext) >= 0.99 * len(sim) and len(wr) >= 0.99 * len(sim), (len(ext), len(wr), len(sim))
    # the first estimate is that of the first joint state: r = 0 there, and every later one equals
    # the same observer fed every sample from the first (a late start would differ all along)
    assert ns.stamp_ns(ext[0]) == stamps[0] and np.array_equal(ext[0].effort, np.zeros(7))
    ref = obs.MomentumObserver(model, K, timeout=1.0)
    by_stamp = {ns.stamp_ns(m): m for m in ext}
    for (t, q, qd, tau, jtf), st in zip(sim, stamps):
        r = ref.update((st - stamps[0]) * 1e-9, q, qd, tau)
        if st in by_stamp:
            np.testing.assert_allclose(by_stamp[st].effort, r, rtol=1e-9, atol=1e-9)
    # and what it estimates is the push: within 3 % of the true external torques at the end
    t, q, qd, tau, jtf = sim[-1]
    err = np.abs(np.asarray(by_stamp[stamps[-1]].effort) - jtf).max() / np.abs(jtf).max()
    assert err < 0.03, f"external torque off by {100 * err:.1f} % of its peak"


def test_reliable_and_best_effort_publishers_are_merged_from_their_first_messages_on_a_busy_machine():
    import dynamics_node as dn
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    model = dn.load_model(str(ns.ARM7))
    with busy_cores():
        procs = ns.start_nodes({NAME: {"urdf_path": str(ns.ARM7), "joint_states_topic": JS, "observer_gain": 0.0}})
        node = procs[NAME]
        try:
            c = ns.ros()
            out, sub = c.subscribe(JointState, node.path("gravity_torques"))
            reliable = c.publisher(JointState, JS)
            best_effort = c.node.create_publisher(JointState, JS, QoSProfile(
                depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
            c.wait_for_subscriber(reliable)
            c.wait_for_subscriber(best_effort)
            deadline = time.monotonic() + 20
            while sub.get_publisher_count() < 1 and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.1)
            rng = np.random.default_rng(3)
            sent = []
            for k in range(200):                       # the arm from one driver, the wrist from another
                q = rng.uniform(-1, 1, 7)
                stamp = 5_000_000_000 + k * 10_000_000
                best_effort.publish(ns.joint_state(J[4:], q[4:], stamp_ns=stamp))
                reliable.publish(ns.joint_state(J[:4], q[:4], stamp_ns=stamp))
                sent.append((stamp, q))
                time.sleep(0.005)
            got = ns.collect(out, 399, timeout=20.0)   # counted, not timed: this process is starved too
        finally:
            node.stop()
            node.kill()
    # every message that completes a merged state is answered: the wrist's (first) and the arm's;
    # the pair's second message carries both publishers' values of the same instant
    complete = {}
    for m in got:
        complete.setdefault(ns.stamp_ns(m), []).append(m)
    answered = [st for st, _ in sent if st in complete]
    assert len(answered) >= 197, f"{len(answered)} of 200 merged states answered"
    for st, q in sent[-50:]:
        if st in complete:
            np.testing.assert_allclose(complete[st][-1].effort, dn.gravity(model, q), rtol=1e-9, atol=1e-9)
