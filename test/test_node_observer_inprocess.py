"""The observer on the joint-state stream, in-process: stream.Stream with stand-in publishers and
services (no DDS), fed joint states with efforts from the simulation of test_observer_core."""
from __future__ import annotations

import copy
import math
import time

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

J = [f"joint{i}" for i in range(1, 8)]


class Pub:
    def __init__(self, log, topic):
        self.log, self.topic = log, topic
        self.subscribers = 1

    def get_subscription_count(self):
        return self.subscribers

    def publish(self, m):
        # a copy, as rclpy serializes the message when it is published: the stream reuses its
        # output messages (one per model state) and sets their fields anew for each joint state
        self.log.append((self.topic, copy.deepcopy(m)))


class Node:
    """What Stream asks of an rclpy node; every message published goes to one ordered list."""

    def __init__(self):
        self.out, self.services = [], {}

    def create_publisher(self, _type, topic, _qos, **_kw):
        return Pub(self.out, topic)

    def create_service(self, _type, name, cb):
        self.services[name] = cb
        return cb

    def create_guard_condition(self, cb):
        return type("GC", (), {"trigger": staticmethod(cb)})()

    def create_timer(self, *_a):
        return None

    def create_subscription(self, *_a):
        return object()

    def destroy_subscription(self, _s):
        pass

    def get_publishers_info_by_topic(self, _t):
        return []

    def of(self, topic):
        return [m for t, m in self.out if t == topic]


class Log:
    def __init__(self):
        self.lines = []

    def _add(self, level, text, **_kw):
        self.lines.append((level, text))

    def info(self, t, **kw):
        self._add("info", t, **kw)

    def warning(self, t, **kw):
        self._add("warning", t, **kw)

    def error(self, t, **kw):
        self._add("error", t, **kw)


def make(path=ns.ARM7, **values):
    from dynamics_node.ros.model_state import build_state, load, payload_table
    from dynamics_node.ros.params.param_checks import validate
    from dynamics_node.ros.stream import Stream
    c = validate({"urdf_path": str(path), **values})
    payloads, _ = payload_table(c, {})
    st = build_state(load(c), c, payloads)
    node, log = Node(), Log()
    s = Stream(node, lambda n: n, log)
    from dynamics_node.ros.stream_process import warm
    warm(st, c)   # as the stream process does before a state reaches its stream
    s.configure(st, c, {"joint_states_topic"}, now=True)
    return s, node, log, st, c


@pytest.fixture(scope="module")
def sim():
    import dynamics_node as dn
    import test_observer_core as core
    return core.simulate(dn.load_model(str(ns.ARM7)), seconds=0.4, push=False)


def feed(s, samples, t0_ns=5_000_000_000, effort=True):
    for t, q, qd, tau, _ in samples:
        s.on_joint_state(ns.joint_state(J, q, qd, stamp_ns=t0_ns + round(t * 1e9),
                                        efforts=tau if effort else None))


def test_external_torques_follow_each_gravity_torque_and_equal_the_core_observer(sim):
    import dynamics_node as dn
    from dynamics_node.algorithms.estimation import observer as obs
    s, node, _, st, c = make(observer_gain=200.0)
    feed(s, sim)
    grav, ext = node.of("~/gravity_torques"), node.of("~/external_torques")
    assert len(grav) == len(ext) == len(sim)
    topics = [t for t, _ in node.out if t in ("~/gravity_torques", "~/external_torques")]
    assert topics == ["~/gravity_torques", "~/external_torques"] * len(sim)  # torques first, always
    ref = obs.MomentumObserver(st.model, 200.0, timeout=c.joint_state_timeout)
    for (t, q, qd, tau, _), g, e in zip(sim, grav, ext):
        assert e.header == g.header and list(e.name) == J
        np.testing.assert_allclose(e.effort, ref.update(t, q, qd, tau, g=dn.gravity(st.model, q)),
                                   rtol=1e-9, atol=1e-9)
    assert np.abs(np.asarray(ext[-1].effort)).max() < 0.2   # free motion
    w = node.of("~/external_wrench")
    assert len(w) == len(sim) and w[-1].header.frame_id == "tool0" and w[-1].header.stamp == ext[-1].header.stamp
    rep = s.report()["observer"]
    assert rep["samples"] == len(sim) and rep["rank"] == 6 and rep["link"] == "tool0"


def test_no_effort_no_output_and_gravity_unchanged(sim):
    s, node, _, _, _ = make()
    feed(s, sim[:20], effort=False)
    assert len(node.of("~/gravity_torques")) == 20
    assert not node.of("~/external_torques") and not node.of("~/external_wrench")
    t, q, qd, tau, _ = sim[20]   # efforts of the wrong length: reported, not used
    s.on_joint_state(ns.joint_state(J, q, qd, stamp_ns=6_000_000_000, efforts=tau[:3]))
    assert len(node.of("~/gravity_torques")) == 21 and not node.of("~/external_torques")
    assert s.observer.report()["skipped"] == 1


def test_a_gap_longer_than_the_timeout_and_a_model_change_restart_the_observer(sim):
    s, node, _, st, c = make(observer_gain=200.0, joint_state_timeout=0.5)
    held = [(t, q, qd, tau - 3.0, e) for t, q, qd, tau, e in sim[:100]]   # 3 N m pushes on every joint
    feed(s, held)
    r = np.asarray(node.of("~/external_torques")[-1].effort)
    assert np.abs(r - 3.0).max() < 0.1
    feed(s, held[:1], t0_ns=5_000_000_000 + 700_000_000 + 100_000_000)   # 0.701 s after the last stamp
    ob = s.observer
    assert np.array_equal(node.of("~/external_torques")[-1].effort, np.zeros(7))
    assert "gap of 0.701 s" in ob.obs.last_reset and ob.report()["resets"] == 1
    feed(s, held[1:50], t0_ns=5_000_000_000 + 800_000_000)
    assert np.abs(np.asarray(node.of("~/external_torques")[-1].effort) - 3.0).max() < 0.1
    # a model change (a payload: a new model state) gives a new observer: r starts from 0 again
    from dynamics_node.ros.model_state import build_state, load
    st2 = build_state(load(c), c, {"tool0": (1.0, (0.0, 0.0, 0.05), (0.001, 0.0, 0.0, 0.001, 0.0, 0.001))})
    s.configure(st2, c, set(), now=True)
    assert s.observer is not ob
    feed(s, held[50:51], t0_ns=5_000_000_000 + 800_000_000)
    assert np.array_equal(node.of("~/external_torques")[-1].effort, np.zeros(7))


def test_the_reset_service_and_non_finite_results(sim):
    from std_srvs.srv import Trigger
    s, node, _, _, _ = make(observer_gain=200.0)
    held = [(t, q, qd, tau - 3.0, e) for t, q, qd, tau, e in sim[:60]]
    feed(s, held)
    res = node.services["~/reset_observer"](Trigger.Request(), Trigger.Response())
    assert res.success and "reset" in res.message
    feed(s, held[60:61] or [held[-1]], t0_ns=5_000_000_000 + 1_000_000)
    assert np.array_equal(node.of("~/external_torques")[-1].effort, np.zeros(7))
    n = len(node.of("~/external_torques"))
    t, q, qd, tau, _ = sim[61]
    bad = np.array(tau)
    bad[2] = math.inf   # dropped by the merge: the joint's previous effort (still fresh) is used
    s.on_joint_state(ns.joint_state(J, q, qd, stamp_ns=5_000_000_000 + 2_000_000, efforts=bad))
    assert len(node.of("~/external_torques")) == n + 1
    bad[2] = 1e308      # finite, but C^T qd overflows with these rates: nothing published, counted
    s.on_joint_state(ns.joint_state(J, q, qd * 1e200, stamp_ns=5_000_000_000 + 3_000_000, efforts=bad))
    ext = node.of("~/external_torques")
    assert all(np.isfinite(m.effort).all() for m in ext)
    assert all(np.isfinite([w.wrench.force.x, w.wrench.torque.z]).all() for w in node.of("~/external_wrench"))
    rep = s.observer.report()
    assert len(ext) == n + 1 and rep["failed"] == 1 and "overflowed" in rep["last_problem"]
    assert len(node.of("~/gravity_torques")) == n + 2   # the torque output never waits for the observer
    # off: the service says so
    s2, node2, _, _, _ = make(observer_gain=0.0)
    res = node2.services["~/reset_observer"](Trigger.Request(), Trigger.Response())
    assert not res.success and "observer_gain 0" in res.message
    feed(s2, sim[:5])
    assert not node2.of("~/external_torques")


def test_collision_is_published_on_change_and_logged_once(sim):
    s, node, log, _, _ = make(observer_gain=200.0, collision_threshold=[1.0])
    pushed = [(t, q, qd, tau - (2.0 if 0.1 <= t < 0.2 else 0.0), e) for t, q, qd, tau, e in sim]
    feed(s, pushed)
    flags = [m.data for m in node.of("~/collision")]
    assert flags == [True, False]
    assert sum("collision: external torque above" in t for _, t in log.lines) == 1


def test_observer_parameters_are_checked():
    from dynamics_node.errors import ConfigError
    from dynamics_node.ros.params.param_checks import validate
    for values, words in (({"observer_gain": -1.0}, "observer_gain"), ({"observer_gain": 1e5}, "observer_gain"),
                          ({"collision_threshold": [1.0, -2.0]}, "collision_threshold"),
                          ({"collision_threshold": [math.nan]}, "collision_threshold")):
        with pytest.raises(ConfigError, match=words):
            validate(values)
    with pytest.raises(ConfigError, match="wrench_link: the model 'arm7' has no link 'gripper'"):
        make(wrench_link="gripper")
    with pytest.raises(ConfigError, match="collision_threshold: expected 0, 1 or 7 values"):
        make(collision_threshold=[1.0, 2.0])
    s, *_ = make(observer_gain=0.0, wrench_link="gripper")   # off: not looked at
    assert s.observer.obs is None


def test_default_wrench_link_is_the_tip_of_the_longest_chain():
    import dynamics_node as dn
    from dynamics_node.ros.stream_observer import default_wrench_link
    assert default_wrench_link(dn.load_model(str(ns.ARM7))) == "tool0"
    ur5 = dn.load_model(str(ns.erd("ur_description/urdf/ur5_robot.urdf")))
    assert default_wrench_link(ur5) in ("tool0", "ee_link")


def test_no_wrench_without_a_subscriber(sim):
    s, node, _, _, _ = make(observer_gain=200.0)
    s.observer_pubs.wrench.subscribers = 0
    feed(s, sim[:20])
    assert len(node.of("~/external_torques")) == 20 and not node.of("~/external_wrench")
    assert s.observer.report()["rank"] is None


def test_no_external_torques_without_a_subscriber_but_the_observer_runs(sim):
    """Nobody subscribes to ~/external_torques: they are not published (about 60 us a joint state
    saved), the observer still runs (the collision flag and diagnostics rest on it)."""
    s, node, _, _, _ = make(observer_gain=200.0, collision_threshold=[1e-9] * 7)
    s.observer_pubs.torques.subscribers = 0
    feed(s, sim[:20])
    assert len(node.of("~/gravity_torques")) == 20 and not node.of("~/external_torques")
    assert node.of("~/collision") and s.observer.report()["samples"] == 20
    # a subscriber appears: counted again at most SUBSCRIBERS_CHECK later, from the next joint state
    from dynamics_node.ros.stream import SUBSCRIBERS_CHECK
    s.observer_pubs.torques.subscribers = 1
    time.sleep(SUBSCRIBERS_CHECK * 1.2)
    feed(s, sim[20:25], t0_ns=5_000_000_000 + round(sim[19][0] * 1e9) + 1_000_000 - round(sim[20][0] * 1e9))
    assert len(node.of("~/external_torques")) == 5


def test_the_first_joint_state_gets_an_estimate_when_the_state_arrives_warm(sim):
    """The stream process loads the observer's kernels with the model state (stream_process.warm),
    before the stream has it: the first joint state with effort is estimated, none is skipped."""
    s, node, _, _, _ = make(observer_gain=200.0)
    feed(s, sim[:1])
    assert len(node.of("~/external_torques")) == 1 and len(node.of("~/external_wrench")) == 1
    rep = s.observer.report()
    assert rep["samples"] == 1 and rep["skipped"] == 0


def test_the_merge_is_shared_in_one_file_while_its_joints_stay_the_same(sim):
    """A payload change is a new model state of the same joints: the stream keeps writing the shared
    file the node reads (ros/latest.py), so the node sees the next joint state without waiting for a
    new path; a model of other joints gets a new file, and the old one is unlinked."""
    import os

    from dynamics_node.ros.latest import LatestReader
    from dynamics_node.ros.model_state import build_state, load, payload_table
    from dynamics_node.ros.params.param_checks import validate
    s, _, _, st, c = make()
    paths = []
    s.on_latest = paths.append
    payload = (1.0, (0.0, 0.0, 0.05), (0.001, 0.0, 0.0, 0.001, 0.0, 0.001))
    s.configure(build_state(load(c), c, {"tool0": payload}), c, set(), now=True)
    assert len(paths) == 1
    reader = LatestReader(paths[0])
    s.configure(build_state(load(c), c, {"tool0": (2.0, *payload[1:])}), c, set(), now=True)
    assert len(paths) == 1, "a payload change made a new shared file"
    q = sim[3][1]
    feed(s, [sim[3]])
    got = reader.read(J)
    assert got is not None and np.array_equal(got[0], q)
    c2 = validate({"urdf_path": str(ns.erd("ur_description/urdf/ur5_robot.urdf"))})
    s.configure(build_state(load(c2), c2, payload_table(c2, {})[0]), c2, {"urdf_path"}, now=True)
    assert len(paths) == 2 and not os.path.exists(paths[0])
    assert reader.read(J) is not None   # the old file, still mapped, keeps its last merge for the old joints
    s.latest_writer.close()
