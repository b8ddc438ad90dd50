"""The node's promises on a busy machine (issues 21.1, 21.2, 36.7): while two other processes keep
both cores busy, the momentum observer estimates from the first joint state after "serving" (its
kernels are loaded before that line, after the stream's first torques), merged joint states from a
reliable and a best-effort publisher are answered from their first messages (the subscription is
best effort: it hears both, with no switch to wait for), "serving" and the lines of a model from
robot_description come only once the stream answers, and a new model is answered whole. No timing
is asserted: what is counted is what was answered, the estimates are compared with the same
observer run here and the torques with Pinocchio's gravity."""
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


def _gaps(sent, got):
    """The runs of sent stamps not in got, as (first, last) indices: where the losses were."""
    have, runs = set(got), []
    for i, st in enumerate(sent):
        if st not in have:
            if runs and runs[-1][1] == i - 1:
                runs[-1][1] = i
            else:
                runs.append([i, i])
    return [tuple(r) for r in runs]


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
    from dynamics_node.algorithms.estimation import observer as obs
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
            grav_q, _ = c.subscribe(JointState, node.path("gravity_torques"))   # announced after those two
            pub = c.publisher(JointState, JS)
            c.wait_for_subscriber(pub)      # the stream subscribed (its torques start there) and
            _wait_line(node, "serving")     # the observer's kernels are in: estimates from here on
            # the node's side of the match: joint states without efforts (the observer does not run on
            # them) until their gravity torques arrive; the node learnt of our subscriptions in the
            # order they were made, so its observer's publishers have matched ours by then
            _handshake(grav_q, [(pub, range(7))], 8_000_000_000)
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
    assert len(ext) >= 0.99 * len(sim) and len(wr) >= 0.99 * len(sim), (
        len(ext), len(wr), len(sim), "missing estimates (indices of the joint states sent):",
        _gaps(stamps, [ns.stamp_ns(m) for m in ext]))
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
            _wait_line(node, "serving")
            # the stream's side of the match too: its subscription is there from its first torques,
            # seconds before "serving", and DDS discovery of our publishers (and of our subscription
            # by its torques' publisher) may lag behind ours
            _handshake(out, [(best_effort, range(4, 7)), (reliable, range(4))], 4_000_000_000)
            rng = np.random.default_rng(3)
            sent, got = [], []
            for k in range(200):                       # the arm from one driver, the wrist from another
                q = rng.uniform(-1, 1, 7)
                stamp = 5_000_000_000 + k * 10_000_000
                best_effort.publish(ns.joint_state(J[4:], q[4:], stamp_ns=stamp))
                reliable.publish(ns.joint_state(J[:4], q[:4], stamp_ns=stamp))
                sent.append((stamp, q))
                # the next pair once this one is answered (or after 5 s): what is counted is whether the
                # merge answers, not whether a starved process's queues keep up with a burst
                deadline = time.monotonic() + 5.0
                while stamp not in {ns.stamp_ns(m) for m in got[-8:]} and time.monotonic() < deadline:
                    got += ns.drain(out, timeout=0.05)
            got += ns.drain(out, timeout=0.5)
        finally:
            node.stop()
            node.kill()
    # every message that completes a merged state is answered: the wrist's (first) and the arm's;
    # the pair's second message carries both publishers' values of the same instant
    complete = {}
    for m in got:
        complete.setdefault(ns.stamp_ns(m), []).append(m)
    answered = [st for st, _ in sent if st in complete]
    assert sent[0][0] in complete and len(answered) >= 198, f"{len(answered)} of 200 merged states answered"
    for st, q in sent[-50:]:
        if st in complete:
            np.testing.assert_allclose(complete[st][-1].effort, dn.gravity(model, q), rtol=1e-9, atol=1e-9)


class _Sender:
    """Joint states of arm7 (all joints, stamps 1, 2, 3 ... ns past t0, random positions), about
    200 a second from a thread, from before the node starts; `last` is the stamp index sent last."""

    T0 = 3_000_000_000

    def __init__(self, pub):
        import threading
        self.pub, self.q, self.last = pub, {}, 0
        self.rng = np.random.default_rng(11)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        k = 0
        while not self.stop.is_set():
            k += 1
            q = self.rng.uniform(-1.5, 1.5, 7)
            self.q[k] = q
            self.pub.publish(ns.joint_state(J, q, stamp_ns=self.T0 + k))
            self.last = k
            time.sleep(0.005)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)

    def run_past(self, k, timeout=60.0):
        deadline = time.monotonic() + timeout
        while self.last <= k and time.monotonic() < deadline:
            time.sleep(0.01)


def _handshake(out, sends, stamp0, timeout=60.0):
    """Joint states without efforts, split over the publishers of `sends` [(publisher, joint
    indices)], one every 0.2 s until the gravity torques on `out` answer one with every position it
    sent: DDS discovery is done both ways (each publisher here by the stream's subscription, our
    subscription by the node's publisher), which seeing the other side from this process does not
    show. Stamps from stamp0 on, 1 ms apart: below the test's own."""
    rng = np.random.default_rng(99)
    deadline = time.monotonic() + timeout
    for k in range(10**6):
        q, stamp = rng.uniform(-1, 1, 7), stamp0 + k * 1_000_000
        for pub, idx in sends:
            pub.publish(ns.joint_state([J[i] for i in idx], q[list(idx)], stamp_ns=stamp))
        wait = time.monotonic() + 0.2
        while time.monotonic() < wait:
            for m in ns.drain(out, timeout=0.05):
                if ns.stamp_ns(m) == stamp and np.array_equal(m.position, q):
                    return
        assert time.monotonic() < deadline, f"no gravity torques for our joint states within {timeout} s"


def _wait_line(node, text, timeout=120.0):
    deadline = time.monotonic() + timeout
    while text not in node.output():
        assert node.alive(), node.output()[-3000:]
        assert time.monotonic() < deadline, f"no line {text!r}:\n{node.output()[-3000:]}"
        time.sleep(0.01)


def _answered(out, into, timeout=0.0):
    for m in ns.drain(out, timeout=timeout):
        into[ns.stamp_ns(m) - _Sender.T0] = m
    return into


def _first_answer(out, into, after=0, timeout=60.0):
    """The first stamp index above `after` answered (discovery of our publisher done by then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _answered(out, into, timeout=0.05)
        later = [k for k in into if k > after]
        if later:
            return min(later)
    raise AssertionError(f"no gravity torque for a joint state after {after}")


def _wait_heard(c, name, timeout=120.0):
    """Until the node's /diagnostics count joint states received by its stream (DDS discovery of
    our publisher done: with no robot yet, the stream counts and drops them)."""
    from diagnostic_msgs.msg import DiagnosticArray
    q, sub = c.subscribe(DiagnosticArray, "/diagnostics")
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for arr in ns.drain(q, timeout=0.2):
                for st in arr.status:
                    if st.name == f"{name}: joint states":
                        if int({kv.key: kv.value for kv in st.values}.get("received", "0")) > 0:
                            return
        raise AssertionError("the stream never heard our joint states")
    finally:
        c.node.destroy_subscription(sub)


def test_serving_is_logged_once_the_stream_answers_on_a_busy_machine():
    """A fresh start with both cores busy: every joint state sent after the node said "serving"
    (and after the first answer, which also waits for DDS discovery of this publisher) is answered,
    with arm7's gravity (Pinocchio). The stream answers before that line too, but no joint state
    after it waits for anything."""
    import dynamics_node as dn
    from sensor_msgs.msg import JointState
    from urdfgen import PinOracle
    pin = PinOracle(ns.ARM7.read_text(), dn.load_model(str(ns.ARM7)))
    name, js = "busy_start", "/busy_start/joint_states"
    c = ns.ros()
    out, _ = c.subscribe(JointState, f"/{name}/gravity_torques")
    got = {}
    with busy_cores(), _Sender(c.publisher(JointState, js)) as sender:
        node = ns.NodeProcess(name, {"urdf_path": str(ns.ARM7), "joint_states_topic": js})
        try:
            _wait_line(node, "serving: robot 'arm7'")
            seen = sender.last                     # sent before this process read the line
            first = _first_answer(out, got)
            sender.run_past(max(seen, first) + 200)
            end = sender.last
            deadline = time.monotonic() + 30       # counted, not timed: this process is starved too
            while end not in got and time.monotonic() < deadline:
                _answered(out, got, timeout=0.1)
        finally:
            node.stop()
            node.kill()
    after = [k for k in range(max(seen, first) + 1, end + 1)]
    missing = [k for k in after if k not in got]
    assert not missing, f"{len(missing)} of {len(after)} joint states after 'serving' unanswered: {missing[:10]}"
    for k, m in got.items():
        assert list(m.name) == J
        np.testing.assert_allclose(m.effort, pin.gravity(sender.q[k]), rtol=1e-9, atol=1e-9)


def test_new_models_are_answered_whole_from_their_lines_on_a_busy_machine(tmp_path):
    """With both cores busy, a node waiting for the topic (its stream hears our joint states already)
    gets arm7 on robot_description, then arm7 with every mass doubled (the same joints), then by the
    urdf_path parameter arm7 with every mass tripled, each with 1000 small bodies on its tool: each
    line ("model from the robot_description topic", "model reloaded") comes once the stream answers
    with that model, every joint state sent after it is answered with it, and every answer is one
    model's gravity at its joint state (Pinocchio), each model's until the next one's, never a mix."""
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from test_node_stream_start import _heavy_arm7
    from urdfgen import PinOracle
    import dynamics_node as dn
    # bodies fixed to the tool that make each description take a while to load (0.1 s alone), so
    # that a line logged before the stream has the model would meet joint states it cannot answer
    texts = {"a": _heavy_arm7(1.0, "arm7", pads=1000), "b": _heavy_arm7(2.0, "arm7_heavy", pads=1000),
             "c": _heavy_arm7(3.0, "arm7_x3", pads=1000)}
    pins = {k: PinOracle(t, dn.load_model(t)) for k, t in texts.items()}
    path = tmp_path / "arm7_x3.urdf"
    path.write_text(texts["c"])
    name, js = "busy_topic", "/busy_topic/joint_states"
    c = ns.ros()
    desc = c.node.create_publisher(String, f"/{name}/robot_description", QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    out, _ = c.subscribe(JointState, f"/{name}/gravity_torques")
    got, seen, sent = {}, {}, {}
    try:
        with busy_cores(), _Sender(c.publisher(JointState, js)) as sender:
            node = ns.NodeProcess(name, {"joint_states_topic": js},
                                  ros_args=("-r", f"robot_description:=/{name}/robot_description"))
            try:
                _wait_line(node, "serving: no robot yet")
                _wait_heard(c, name)
                for k, line in (("a", "from the robot_description topic: robot 'arm7' from"),
                                ("b", "from the robot_description topic: robot 'arm7_heavy'"),
                                ("c", "model reloaded: robot 'arm7_x3'")):
                    if k == "c":   # answered once the node has loaded it too (at services_nice: slow here)
                        res = c.call(SetParameters, f"/{name}/set_parameters", SetParameters.Request(
                            parameters=[Parameter("urdf_path", value=str(path)).to_parameter_msg()]),
                            timeout=120.0, retry=60.0)
                        assert [(r.successful, r.reason) for r in res.results] == [(True, "")]
                    else:
                        desc.publish(String(data=texts[k]))
                    _wait_line(node, line)
                    seen[k] = sender.last              # sent before this process read the line
                    sender.run_past(seen[k] + 100)
                    sent[k] = sender.last              # the last one sent before the next model
                deadline = time.monotonic() + 30       # counted, not timed
                while sent["c"] not in got and time.monotonic() < deadline:
                    _answered(out, got, timeout=0.1)
            finally:
                node.stop()
                node.kill()
    finally:
        c.node.destroy_publisher(desc)
    which = {}
    for k, m in got.items():
        assert list(m.name) == J
        tau = np.asarray(m.effort)
        match = [w for w, pin in pins.items() if np.allclose(tau, pin.gravity(sender.q[k]), rtol=1e-9, atol=1e-9)]
        assert len(match) == 1, f"joint state {k}: {tau} is not exactly one model's gravity ({match})"
        which[k] = match[0]
    order = [which[k] for k in sorted(which)]
    assert order == sorted(order), "an answer of a model after the next one's"
    for k in "abc":
        after = range(seen[k] + 1, sent[k] + 1)
        assert all(which.get(j) == k for j in after), (k, [j for j in after if which.get(j) != k][:10])
