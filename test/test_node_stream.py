"""Joint states in, gravity torques out: one for one, edge cases, effort command, payload,
diagnostics and markers of a running dynamics_node."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

import node_support as ns

pytestmark = [
    pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not installed"),
    pytest.mark.skipif(not ns.core_available(), reason="the dynamics core is not importable"),
]

NAME = "stream_arm7"
JS_TOPIC = "/stream_test/joint_states"
CMD_TOPIC = "/stream_test/effort_commands"
J = [f"joint{i}" for i in range(1, 8)]
CMD_JOINTS = ["joint7", "joint6", "joint5", "joint4", "joint3", "joint2", "joint1"]
TOL = dict(rtol=1e-12, atol=1e-12)
STALE = 1.0  # joint_state_timeout [s] of the node under test


@pytest.fixture(scope="module")
def node():
    yield from ns.serve_one(NAME, {"urdf_path": str(ns.ARM7), "joint_states_topic": JS_TOPIC,
                                   "effort_command_topic": CMD_TOPIC, "command_joints": CMD_JOINTS,
                                   "joint_state_timeout": STALE, "markers_rate": 10.0})


@pytest.fixture(scope="module")
def io(node):
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    c = ns.ros()
    pub = c.publisher(JointState, JS_TOPIC)
    torques, _ = c.subscribe(JointState, node.path("gravity_torques"))
    commands, _ = c.subscribe(Float64MultiArray, CMD_TOPIC)
    c.wait_for_subscriber(pub)
    # wait until the node's publishers are matched with our subscriptions, then flush
    deadline = time.monotonic() + 20
    k = 0
    while time.monotonic() < deadline:
        k += 1
        pub.publish(ns.joint_state(J, np.zeros(7), stamp_ns=k))
        if not torques.empty():
            break
        time.sleep(0.05)
    time.sleep(0.3)
    ns.drain(torques), ns.drain(commands)
    return pub, torques, commands


@pytest.fixture(scope="module")
def model():
    import dynamics_node as dn
    return dn.load_model(str(ns.ARM7))


def test_one_torque_message_per_joint_state(node, io, model):
    import dynamics_node as dn
    pub, torques, commands = io
    rng = np.random.default_rng(11)
    N = 300
    sent = {}
    t0 = time.perf_counter()
    for k in range(N):
        q = rng.uniform(-1.5, 1.5, 7)
        stamp = 1_000_000_000 + k * 1_000_000
        sent[stamp] = q
        pub.publish(ns.joint_state(J, q, velocities=rng.uniform(-1, 1, 7), stamp_ns=stamp))
        # pace at about 1 kHz (sleeping: a busy loop would starve the receiving thread of the GIL)
        time.sleep(max(0.0, t0 + (k + 1) * 1e-3 - time.perf_counter()))
    got = ns.collect(torques, N, timeout=10.0)
    cmds = ns.collect(commands, N, timeout=5.0)
    time.sleep(0.2)
    got += ns.drain(torques)
    cmds += ns.drain(commands)
    # answers to the fixture's warm-up messages may still trickle in: keep this test's stamps
    stamps = [ns.stamp_ns(m) for m in got if ns.stamp_ns(m) in sent]
    extra = [ns.stamp_ns(m) for m in got if ns.stamp_ns(m) not in sent and ns.stamp_ns(m) >= 1_000_000_000]
    assert not extra, f"torques for stamps never sent: {extra[:5]}"
    assert stamps == sorted(sent), (f"{len(stamps)} torque messages for {N} joint states; missing "
                                    f"{sorted(set(sent) - set(stamps))[:5]}")
    got = [m for m in got if ns.stamp_ns(m) in sent]
    cmds = cmds[-N:]
    for m in got:
        q = sent[ns.stamp_ns(m)]
        assert list(m.name) == J
        np.testing.assert_array_equal(np.asarray(m.position), q)
        np.testing.assert_allclose(m.effort, dn.gravity(model, q), **TOL)
    assert len(cmds) == N
    for m, c in zip(got, cmds):
        np.testing.assert_array_equal(np.asarray(c.data), np.asarray(m.effort)[[J.index(j) for j in CMD_JOINTS]])


def test_joint_state_edge_cases(node, io, model):
    """Extra unknown joints are ignored, any order works, velocity may be missing. Joint states are
    merged by name: a NaN position or a missing joint leaves that joint at its last value, which is
    still fresh here (so a torque is published); an inf velocity is dropped without blocking gravity;
    inconsistent arrays refuse the whole message (nothing published)."""
    import dynamics_node as dn
    pub, torques, _ = io
    ns.drain(torques)
    q = np.array([0.2, -0.5, 0.3, -1.4, 0.1, 0.6, 0.0])
    perm = [3, 0, 6, 2, 5, 1, 4]
    names = [J[i] for i in perm]
    cases = [  # (stamp, msg, expect_published)
        (1, ns.joint_state(names, q[perm]), True),                                   # reordered, no velocity
        (2, ns.joint_state(["gripper"] + names + ["wheel"], [9.0, *q[perm], -9.0],
                           velocities=[0.0] * 9), True),                             # extra joints
        (3, ns.joint_state(J, [*q[:3], float("nan"), *q[4:]]), True),                # NaN position
        (4, ns.joint_state(J[:6], q[:6]), True),                                     # missing joint7
        (5, ns.joint_state(J, q, velocities=[0, 0, float("inf"), 0, 0, 0, 0]), True),   # inf velocity
        (6, ns.joint_state(J, q[:6]), False),                                        # 7 names, 6 positions
        (7, ns.joint_state(["gripper"] + J, [float("nan"), *q]), True),             # NaN on an unknown joint
        (8, ns.joint_state(J, q, velocities=q), True),
    ]
    for stamp, msg, _ in cases:
        msg.header.stamp.sec, msg.header.stamp.nanosec = 7, stamp
        pub.publish(msg)
        time.sleep(0.003)
    expected = [s for s, _, ok in cases if ok]
    got = ns.collect(torques, len(expected), timeout=5.0)
    time.sleep(0.3)
    got += ns.drain(torques)
    assert [m.header.stamp.nanosec for m in got] == expected
    for m in got:
        assert list(m.name) == J
        np.testing.assert_allclose(m.effort, dn.gravity(model, q), **TOL)
    assert node.alive()


def test_only_the_stream_subscribes_to_the_joint_states_best_effort(node, io):
    """The joint states have one subscriber in the node, its stream process, best effort
    (it hears reliable and best-effort publishers from their first message); the node's own process no
    longer takes every joint state a second time (it reads the stream's merge: ros/latest.py)."""
    from rclpy.qos import ReliabilityPolicy
    c = ns.ros()
    deadline = time.monotonic() + 10
    subs = []
    while time.monotonic() < deadline:
        subs = [i for i in c.node.get_subscriptions_info_by_topic(JS_TOPIC) if i.node_name.startswith(NAME)]
        if subs:
            break
        time.sleep(0.1)
    assert [i.node_name for i in subs] == [f"{NAME}_stream"], [i.node_name for i in subs]
    assert subs[0].qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT   # (depth is not in discovery)


def test_gravity_compensation_uses_latest_joint_state(node, io, model):
    import dynamics_node as dn
    from dynamics_interfaces.srv import GravityCompensation
    pub, torques, _ = io
    q = np.array([0.4, 0.3, -0.2, -0.9, 0.5, 0.2, 0.1])
    c = ns.ros()
    # fresh however long this process takes to call on a busy machine; then stale after STALE again
    assert c.set_parameters(NAME, joint_state_timeout=3600.0) == [(True, "")]
    try:
        pub.publish(ns.joint_state(J[::-1], q[::-1], stamp_ns=42))
        assert ns.collect(torques, 1, 60.0)
        r = c.call(GravityCompensation, node.path("gravity_compensation"), GravityCompensation.Request(name=J[::-1]))
    finally:
        assert c.set_parameters(NAME, joint_state_timeout=STALE) == [(True, "")]
    assert r.success, r.message
    np.testing.assert_array_equal(np.asarray(r.position), q[::-1])
    np.testing.assert_allclose(r.effort, dn.gravity(model, q)[::-1], **TOL)
    pub.publish(ns.joint_state(J[::-1], q[::-1], stamp_ns=43))  # taken with joint_state_timeout STALE
    assert ns.collect(torques, 1, 60.0)
    time.sleep(STALE + 0.2)  # older than joint_state_timeout: refused
    r = ns.ros().call(GravityCompensation, node.path("gravity_compensation"), GravityCompensation.Request())
    assert not r.success and "old" in r.message and "position" in r.message


def test_diagnostics_report_model_rate_requests_and_staleness(node, io):
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    pub, torques, _ = io
    diag, sub = ns.ros().subscribe(DiagnosticArray, "/diagnostics")

    def next_status(timeout=4.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for arr in ns.drain(diag, timeout=0.1):
                st = {s.name: s for s in arr.status if s.name.startswith(NAME + ":")}
                if st:
                    return st
        raise TimeoutError("no /diagnostics from the node")

    # fresh joint states (published for > 1 s, and on until a status comes that says OK with a rate, as
    # this process may itself stall on a busy machine, longer than the timeout or through the window a
    # rate is counted over): OK with a rate
    t_min, deadline = time.monotonic() + 1.6, time.monotonic() + 60.0
    k = 0
    st = None
    while time.monotonic() < deadline:
        k += 1
        pub.publish(ns.joint_state(J, np.zeros(7), stamp_ns=5_000_000_000 + k))
        time.sleep(0.01)
        for arr in ns.drain(diag):
            s = {x.name: x for x in arr.status if x.name.startswith(NAME + ":")}
            st = s or st
        js = st and st[f"{NAME}: joint states"]
        if (time.monotonic() > t_min and js and js.level == DiagnosticStatus.OK
                and float({x.key: x.value for x in js.values}["rate_hz"]) > 10):
            break
    st = st or next_status()
    js = st[f"{NAME}: joint states"]
    kv = {x.key: x.value for x in js.values}
    assert js.level == DiagnosticStatus.OK, js.message
    assert float(kv["rate_hz"]) > 10
    model_kv = {x.key: x.value for x in st[f"{NAME}: model"].values}
    assert model_kv["robot"] == "arm7" and model_kv["joints"] == "7"
    comp = {x.key: x.value for x in st[f"{NAME}: computation"].values}
    assert {"requests_served", "joint_state_time_us.p50", "joint_state_time_us.p99"} <= set(comp)
    # every joint state since start (the bench's soak reads these): counted, percentiles ordered
    assert int(comp["joint_state_time_us.all.count"]) >= int(kv["gravity_torques_published"]) - 1
    p50, p99, mx = (float(comp[f"joint_state_time_us.all.{k}"]) for k in ("p50", "p99", "max"))
    assert 0 < p50 <= p99 <= mx
    ns.drain(torques)
    # stale after joint_state_timeout without joint states
    time.sleep(STALE + 0.2)
    ns.drain(diag)
    deadline = time.monotonic() + 30.0  # a status sent before the timeout may still be on its way
    js = next_status(30.0)[f"{NAME}: joint states"]
    while js.level == DiagnosticStatus.OK and time.monotonic() < deadline:
        js = next_status(30.0)[f"{NAME}: joint states"]
    assert js.level == DiagnosticStatus.WARN and "stale" in js.message
    ns.ros().node.destroy_subscription(sub)


def test_set_payload_changes_every_later_result_and_markers(node, io, model):
    import dynamics_node as dn
    from dynamics_interfaces.srv import InverseDynamics, SetPayload
    from geometry_msgs.msg import Point
    from visualization_msgs.msg import MarkerArray
    pub, torques, _ = io
    c = ns.ros()
    q = np.array([0.1, 0.9, 0.0, -1.0, 0.0, 0.7, 0.0])
    qd = np.linspace(-0.3, 0.3, 7)
    qdd = np.linspace(0.5, -0.5, 7)
    inertia = [0.003, 0.0001, 0.0, 0.004, 0.0, 0.002]
    r = c.call(SetPayload, node.path("set_payload"),
               SetPayload.Request(link="tool0", mass=3.0, center_of_mass=Point(x=0.01, y=0.0, z=0.08),
                                  inertia=inertia))
    assert r.success, r.message
    loaded = model.with_payload("tool0", 3.0, (0.01, 0.0, 0.08), tuple(inertia))
    markers, msub = c.subscribe(MarkerArray, node.path("markers"))
    # the joint state below stays the latest, not stale, however long this process waits on a busy machine
    assert c.set_parameters(NAME, joint_state_timeout=3600.0) == [(True, "")]
    try:
        res = c.call(InverseDynamics, node.path("inverse_dynamics"),
                     InverseDynamics.Request(position=list(q), velocity=list(qd), acceleration=list(qdd)))
        np.testing.assert_allclose(res.effort, dn.inverse_dynamics(loaded, q, qd, qdd), **TOL)
        ns.drain(torques)
        pub.publish(ns.joint_state(J, q, stamp_ns=77))
        got = ns.collect(torques, 1, 60.0)
        answered = time.time()  # the node has q as its latest joint state from here on
        np.testing.assert_allclose(got[0].effort, dn.gravity(loaded, q), **TOL)
        # markers: the robot's centre of mass at the latest joint state, and the payload: those stamped
        # after the answer (set_payload published some for the previous state, which may come late)
        deadline = time.monotonic() + 60.0
        found = None
        while time.monotonic() < deadline and found is None:
            for arr in ns.drain(markers, timeout=0.1):
                byns = {(m.ns, m.id): m for m in arr.markers}
                if ("payload", 0) in byns and ("center_of_mass", 0) in byns and \
                        ns.stamp_ns(byns[("center_of_mass", 0)]) * 1e-9 > answered:
                    found = byns
        assert found is not None, "no MarkerArray with the centre of mass and the payload"
        com = found[("center_of_mass", 0)].pose.position
        np.testing.assert_allclose([com.x, com.y, com.z], dn.center_of_mass(loaded, q), **TOL)
        pl = found[("payload", 0)]
        assert pl.header.frame_id == "tool0"
        np.testing.assert_allclose([pl.pose.position.x, pl.pose.position.y, pl.pose.position.z],
                                   [0.01, 0.0, 0.08])
    finally:
        r = c.call(SetPayload, node.path("set_payload"), SetPayload.Request(link="tool0", mass=0.0))
        c.node.destroy_subscription(msub)
        assert c.set_parameters(NAME, joint_state_timeout=STALE) == [(True, "")]
    assert r.success, r.message
    res = c.call(InverseDynamics, node.path("inverse_dynamics"),
                 InverseDynamics.Request(position=list(q), velocity=list(qd), acceleration=list(qdd)))
    np.testing.assert_allclose(res.effort, dn.inverse_dynamics(model, q, qd, qdd), **TOL)


def test_joint_states_topic_can_change_at_runtime(node, io, model):
    """The subscription moves to the new topic (the stream runs in its own executor thread)."""
    import dynamics_node as dn
    from sensor_msgs.msg import JointState
    _, torques, _ = io
    c = ns.ros()
    other = "/stream_test/other_joint_states"
    pub2 = c.publisher(JointState, other)
    try:
        assert c.set_parameters(NAME, joint_states_topic=other) == [(True, "")]
        c.wait_for_subscriber(pub2)
        ns.drain(torques)
        q = np.array([0.3, 0.2, 0.1, -0.4, 0.5, 0.6, 0.7])
        got = []
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            pub2.publish(ns.joint_state(J, q, stamp_ns=99))
            got = ns.drain(torques, timeout=0.2)
        assert got, "no torques for joint states on the new topic"
        np.testing.assert_allclose(got[0].effort, dn.gravity(model, q), **TOL)
    finally:
        assert c.set_parameters(NAME, joint_states_topic=JS_TOPIC) == [(True, "")]
        c.node.destroy_publisher(pub2)
    pub, _, _ = io
    c.wait_for_subscriber(pub)
    deadline = time.monotonic() + 10
    got = []
    while not got and time.monotonic() < deadline:
        pub.publish(ns.joint_state(J, np.zeros(7), stamp_ns=100))
        got = ns.drain(torques, timeout=0.2)
    assert got and node.alive()


def _family(pid):
    """pid and its descendants (the node runs its joint-state stream in a child process)."""
    out = [pid]
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            continue
        for k in kids:
            out += _family(k)
    return out


def _policies(pid):
    """{process: [(policy, rt_priority, OS thread name) of each of its threads]} of pid and its
    children (/proc/<p>/task/<tid>/stat fields 41 and 40, comm)."""
    out = {}
    for p in _family(pid):
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()  # fields[0] is field 3
            out.setdefault(p, []).append((int(fields[38]), int(fields[37]), name))
    return out


def _realtime_threads(pid):
    """What runs at real-time priority: [(policy, priority)] once per process of pid's family whose
    every thread runs that way but those scheduling.ORDINARY_THREADS names, which must be ordinary
    (they load models and warm kernels up); ('mixed', its threads) for a process that breaks this
    and has a real-time thread; nothing for one without."""
    from dynamics_node.ros.scheduling import ORDINARY_THREADS
    out = []
    for p, threads in sorted(_policies(pid).items()):
        rt = sorted({(pol, prio) for pol, prio, _ in threads if pol != 0})
        if not rt:
            continue
        rest = {(pol, prio) for pol, prio, name in threads if name not in ORDINARY_THREADS}
        ordinary = all(pol == 0 for pol, _, name in threads if name in ORDINARY_THREADS)
        out.append(rt[0] if ordinary and rest == set(rt[:1]) else ("mixed", sorted(set(threads))))
    return out


def _may_use_fifo():
    """Whether a thread of this machine's processes may take SCHED_FIFO (then gives it back)."""
    got = []

    def probe():
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            got.append(True)
        except (OSError, AttributeError):
            got.append(False)
    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return got[0]


def _wait_until(read, pid, expected, timeout=5.0):
    """read(pid) once it equals expected, or its last value after timeout seconds."""
    deadline = time.monotonic() + timeout
    while read(pid) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return read(pid)


def _wait_realtime(pid, expected):
    return _wait_until(_realtime_threads, pid, expected)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_joint_state_thread_runs_at_the_real_time_priority_asked_for(node, io, model):
    """stream_thread_priority (default 50): the stream process, every thread of it (its executor,
    Fast DDS's receive threads, the reports: scheduling.set_process_priority) but the one that loads
    models (scheduling.ORDINARY_THREADS), and nothing else runs SCHED_FIFO; the parameter changes it at
    run time, 0 gives ordinary scheduling back; where the machine does not allow real-time
    scheduling, the node says so and keeps working."""
    pid = node.proc.pid
    if not _may_use_fifo():
        deadline = time.monotonic() + 10   # the stream process says so once it runs
        while "cannot set SCHED_FIFO priority 50" not in node.output() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "cannot set SCHED_FIFO priority 50" in node.output()
        assert _realtime_threads(pid) == []
        return
    # the stream process (a child of the node) takes its priority once it runs
    assert _wait_realtime(pid, [(os.SCHED_FIFO, 50)]) == [(os.SCHED_FIFO, 50)]
    c = ns.ros()
    try:
        assert c.set_parameters(NAME, stream_thread_priority=7) == [(True, "")]
        assert _wait_realtime(pid, [(os.SCHED_FIFO, 7)]) == [(os.SCHED_FIFO, 7)]
        assert c.set_parameters(NAME, stream_thread_priority=0) == [(True, "")]
        assert _wait_realtime(pid, []) == []
        (ok, reason), = c.set_parameters(NAME, stream_thread_priority=100)
        assert not ok and "stream_thread_priority" in reason
    finally:
        c.set_parameters(NAME, stream_thread_priority=50)
    assert _wait_realtime(pid, [(os.SCHED_FIFO, 50)]) == [(os.SCHED_FIFO, 50)]
    # and the stream still answers
    pub, torques, _ = io
    ns.drain(torques)
    q = np.linspace(0.1, 0.7, 7)
    pub.publish(ns.joint_state(J, q, stamp_ns=424242))
    deadline = time.monotonic() + 5
    got = None
    while got is None and time.monotonic() < deadline:
        for m in ns.drain(torques, timeout=0.1):
            if ns.stamp_ns(m) == 424242:
                got = m
    assert got is not None
    import dynamics_node as dn
    np.testing.assert_allclose(got.effort, dn.gravity(model, q), **TOL)


def test_timings_histogram_percentiles_cover_every_duration():
    """The node's cumulative stream-time histogram (1 us bins, overflow beyond 10 ms) gives the
    percentiles of every duration since start to within a bin, unlike the last-2000 window."""
    from dynamics_node.ros.diagnostics import Timings
    rng = np.random.default_rng(5)
    d = np.concatenate([rng.exponential(120e-6, 20000), [0.05, 0.2]])  # two beyond the last bin
    t = Timings(n=2000)
    for x in d:
        t.add(float(x))
    n, (p50, p99, p999), mx = t.totals_us()
    assert n == d.size and len(t.d) == 2000
    for got, p in ((p50, 50), (p99, 99), (p999, 99.9)):
        want = np.percentile(d * 1e6, p, method="inverted_cdf")
        assert want <= got <= want + Timings.BIN_US
    assert mx == pytest.approx(0.2e6)
    assert Timings().totals_us() is None


def _nice_values(pid):
    """{nice value (/proc/<pid>/task/<tid>/stat field 19)} of pid's threads."""
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        out.add(int(stat[stat.rindex(")") + 2:].split()[16]))
    return out


def _wait_nice(pid, expected):
    return _wait_until(_nice_values, pid, expected)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_services_nice_lowers_the_main_process_only(node, io):
    """services_nice (default 10): every thread of the node's main process (the services) at that
    nice value, and its autogroup too (the test starts the node in a session of its own); the
    stream process keeps nice 0. Changed at run time; lowering it works where allowed (root here,
    else a warning); out of [0, 19] refused by name. The node here starts at 0 (node_support says
    why); the README's route (test_node_your_robot) starts one with the default."""
    from dynamics_node.ros.params.node_params import PARAMETERS
    assert PARAMETERS["services_nice"].default == 10
    pid = node.proc.pid
    stream = [p for p in _family(pid) if p != pid]
    assert stream and _wait_nice(pid, {0}) == {0}
    c = ns.ros()
    assert c.set_parameters(NAME, services_nice=10) == [(True, "")]
    assert _wait_nice(pid, {10}) == {10}
    assert all(_nice_values(p) == {0} for p in stream), [_nice_values(p) for p in stream]

    def autogroup():
        try:
            with open(f"/proc/{pid}/autogroup") as f:
                return f.read().split()[-1]
        except OSError:
            return None   # a kernel without autogroup
    assert autogroup() in (None, "10")
    try:
        assert c.set_parameters(NAME, services_nice=15) == [(True, "")]
        assert _wait_nice(pid, {15}) == {15} and autogroup() in (None, "15")
        assert c.set_parameters(NAME, services_nice=3) == [(True, "")]
        if os.geteuid() == 0:
            assert _wait_nice(pid, {3}) == {3} and autogroup() in (None, "3")
        else:
            deadline = time.monotonic() + 5
            while "services_nice: cannot set 3" not in node.output() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert "services_nice: cannot set 3" in node.output()
        for bad in (20, -1):
            (ok, reason), = c.set_parameters(NAME, services_nice=bad)
            assert not ok and "services_nice" in reason, reason
    finally:
        c.set_parameters(NAME, services_nice=0)
    assert all(_nice_values(p) == {0} for p in stream)
    pub, torques, _ = io  # and the stream still answers
    ns.drain(torques)
    pub.publish(ns.joint_state(J, np.linspace(0.1, 0.7, 7), stamp_ns=434343))
    deadline = time.monotonic() + 5
    got = False
    while not got and time.monotonic() < deadline:
        got = any(ns.stamp_ns(m) == 434343 for m in ns.drain(torques, timeout=0.1))
    assert got
