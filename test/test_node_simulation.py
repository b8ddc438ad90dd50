"""The node as a simulated robot (`simulation: true`), as subprocesses.

- /clock starts at 0 and advances in steps of 1/simulation_rate at real_time_factor times the wall
  clock; /joint_states carries every joint, stamped with the same simulated time; by default both go
  out together every 10 ms of simulated time (simulation_publish_rate), the other tests asking for
  every step.
- Free motion (no floor) equals an independent integration: scipy's solve_ivp (RK45, tight
  tolerances) on Pinocchio's ABA. The simulator is semi-implicit Euler, first order: its error must
  be small and halve when the rate doubles (1 kHz against 2 kHz).
- Commands on a wheel spinning about a vertical axis (qdd = tau / izz exactly): Float64MultiArray,
  then JointState by name (the subscription follows its publishers' type), a command of the wrong
  length refused with a warning and not applied, one beyond the URDF limit clipped, the timeout.
- A near-balanced arm held by a dynamics node's gravity stream through the command topic; when that
  node stops, its last command times out and the arm falls.
- The arm dropped on the floor lands, its links come to rest, and nothing passes through the floor.
- SIGINT ends every node by itself: exit code 0, no traceback. Nothing non-finite is published.
No assertion here reads the wall clock against a threshold (the suite passes beside busy
processes): how fast the simulation runs and how fast the node stops are bench_sim's and bench_node's.
MuJoCo's resting pose of a dropped arm: test_node_sim_mujoco.py.
"""
from __future__ import annotations

import math
import os
import pathlib
import re
import signal
import time

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

Q0 = {"joint1": 0.3, "joint2": 0.7, "joint3": -0.4, "joint4": -1.2, "joint5": 0.5, "joint6": 0.9, "joint7": 0.2}
WHEEL = """<robot name="wheel">
  <link name="base_link"/>
  <link name="wheel"><inertial><mass value="2.0"/><origin xyz="0 0 0"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.5"/></inertial></link>
  <joint name="spin" type="revolute"><parent link="base_link"/><child link="wheel"/>
    <origin xyz="0 0 1"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="10" velocity="5"/></joint>
</robot>"""
IZZ = 0.5
HANG_S = 30.0   # a node that has not exited this long after SIGINT hangs (the stop time is bench_node's)


class Sim:
    """A simulated robot named `name`: its /clock remapped to /<name>/clock, its joint states on
    /<name>/joint_states; subscribed to both before it starts, so that nothing is missed. It publishes
    at every step (simulation_publish_rate 10 kHz, above any simulation_rate of these tests: they read
    the motion step by step) unless every_step is False (the default rate)."""

    def __init__(self, name, params, clock=False, every_step=True):
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        c = ns.ros()
        self.name = name
        self._kept = []  # states read by start(), for the next states()
        self.clock, self._s1 = c.subscribe(Clock, f"/{name}/clock" if clock else f"/{name}/unused", depth=10000)
        self.js, self._s2 = c.subscribe(JointState, f"/{name}/joint_states", depth=10000)
        params = {"simulation": True, "joint_states_topic": f"/{name}/joint_states",
                  **({"simulation_publish_rate": 10000.0} if every_step else {}), **params}
        self.proc = ns.NodeProcess(name, params, ros_args=("-r", f"/clock:=/{name}/clock"))
        from dynamics_interfaces.srv import InverseDynamics
        c.wait_for_service(InverseDynamics, self.proc.path("inverse_dynamics"), proc=self.proc)

    def start(self, n, timeout=60.0):
        """Release a simulation that waits for its first command: zero effort on its n joints (then
        no command: zero effort anyway), sent again until the simulated time moves (a best-effort
        reader drops what arrives before it has discovered the writer, and a late test process may
        send every copy in that window). The states read meanwhile are kept for states()."""
        from std_msgs.msg import Float64MultiArray
        c = ns.ros()
        pub = c.publisher(Float64MultiArray, f"/{self.name}/commands")
        c.wait_for_subscriber(pub)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                pub.publish(Float64MultiArray(data=[0.0] * n))
                got = self._read(0.05)
                if any(t > 0.0 for t, *_ in got):
                    return
            raise TimeoutError(f"{self.name}: the simulated time did not move within {timeout} s of "
                               "sending its first command\n" + self.proc.output()[-3000:])
        finally:
            c.node.destroy_publisher(pub)

    def _read(self, timeout):
        got = [(ns.stamp_ns(m) * 1e-9, np.array(m.position), np.array(m.velocity), list(m.name))
               for m in ns.drain(self.js, timeout=timeout)]
        self._kept.extend(got)
        return got

    def states(self, until_t, timeout=60.0):
        """Every joint state (t, position, velocity) received until the simulated time until_t. A
        simulation whose time does not move for `timeout` s of wall clock hangs (a waiting one that
        publishes the same instant again is not moving); one that advances, however slowly on a busy
        machine, is waited for."""
        out, self._kept = self._kept, []
        latest = max((s[0] for s in out), default=None)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if out and out[-1][0] >= until_t:
                return out
            got, self._kept = self._read(0.05), []
            out.extend(got)
            t = max((s[0] for s in got), default=None)
            if t is not None and (latest is None or t > latest):
                latest, deadline = t, time.monotonic() + timeout
        raise TimeoutError(f"simulated time {until_t} s not reached, none later than {latest} for {timeout} s\n"
                           + self.proc.output()[-3000:])

    def stop(self):
        """SIGINT: the node exits by itself, exit code 0, no traceback (asserted)."""
        rc, took = self.proc.stop(signal.SIGINT, timeout=HANG_S)
        out = self.proc.output()
        c = ns.ros()
        c.node.destroy_subscription(self._s1)
        c.node.destroy_subscription(self._s2)
        assert rc == 0, f"exit code {rc} after {took:.2f} s\n{out[-3000:]}"
        assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
        return out


def _all_finite(states):
    return all(np.isfinite(p).all() and np.isfinite(v).all() for _, p, v, _ in states)


# ----------------------------------------------------------------------------- clock and free motion
def _pin_free_motion(times, names):
    """q(t) of arm7 from Q0 at rest, no effort: solve_ivp on Pinocchio's ABA (test-only oracle)."""
    import pinocchio as pin
    from scipy.integrate import solve_ivp
    m = pin.buildModelFromUrdf(str(ns.ARM7))
    d = m.createData()
    iq = [m.joints[m.getJointId(n)].idx_q for n in names]
    q0 = np.zeros(m.nq)
    q0[iq] = [Q0[n] for n in names]

    def f(_t, y):
        q, v = y[:m.nq], y[m.nq:]
        return np.concatenate([v, pin.aba(m, d, q, v, np.zeros(m.nv))])

    sol = solve_ivp(f, (0.0, max(times)), np.concatenate([q0, np.zeros(m.nv)]), method="DOP853",
                    t_eval=np.asarray(times), rtol=1e-11, atol=1e-12)
    assert sol.success
    return sol.y[:m.nq][iq].T


def arm7_without_limits():
    """urdf/arm7.urdf with its joint limits out of reach (a file: the node takes it by path), for the tests
    of free motion (the simulated robot enforces joint limits)."""
    import tempfile
    path = pathlib.Path(tempfile.gettempdir()) / f"arm7_no_limits_{os.getpid()}.urdf"
    if not path.exists():
        path.write_text(re.sub(r'lower="[^"]*" upper="[^"]*"', 'lower="-100" upper="100"', open(ns.ARM7).read()))
    return str(path)


def _free_motion_error(name, rate, rtf, until=0.5):
    # arm7 with its joint limits out of reach: the reference integrates free motion (the simulated robot
    # enforces limits)
    sim = Sim(name, {"urdf_path": arm7_without_limits(), "simulation_floor": [], "simulation_rate": rate,
                     "real_time_factor": rtf, "simulation_initial_positions": [f"{k}={v}" for k, v in Q0.items()],
                     "simulation_wait_for_command": True, "effort_command_topic": f"/{name}/commands"},
              clock=True)
    try:
        sim.states(0.0)  # waiting, at t = 0
        time.sleep(0.3)
        sim.start(7)
        st = sim.states(until)
        clocks = [c.clock.sec * 10**9 + c.clock.nanosec for c in ns.drain(sim.clock)]
    finally:
        sim.stop()
    seen = set()
    st = [s for s in st if s[0] <= until and not (s[0] in seen or seen.add(s[0]))]  # one per stamp
    names = st[0][3]
    assert sorted(names) == sorted(Q0) and _all_finite(st)
    ref = _pin_free_motion([s[0] for s in st], names)
    err = max(float(np.abs(s[1] - r).max()) for s, r in zip(st, ref))
    return err, st, clocks, ref


@pytest.fixture(scope="module")
def free_1k():
    return _free_motion_error("sim_free_1k", 1000.0, 1.0)


def test_clock_starts_at_zero_in_steps_of_the_rate_and_joint_states_carry_it(free_1k):
    """The simulation waits for its first command here (simulation_wait_for_command): /clock says 0
    until then, then advances by exactly 1 ms per step."""
    _, st, clocks, _ = free_1k
    zeros = clocks.count(0)
    assert zeros > 100 and clocks[:zeros] == [0] * zeros, clocks[:3]  # 0.3 s at least, waiting
    steps = np.diff(clocks[zeros - 1:])
    assert (steps == 1_000_000).all(), sorted(set(steps.tolist()))[:10]
    stamps = [round(s[0] * 1e9) for s in st]
    assert set(stamps) <= set(clocks) and np.all(np.diff(stamps) > 0)


def test_by_default_clock_and_joint_states_go_out_together_every_10_ms_of_simulated_time():
    """simulation_publish_rate's default, 100 Hz, at real_time_factor 5: every stamp of /clock and of the
    joint states is the first step's (1 ms) or a multiple of 10 ms, the joint states' stamps are among
    /clock's, and over 1 s of simulated time at most 100 states go out (a reliable reader may still miss
    one that the writer's history dropped: gaps are whole periods)."""
    sim = Sim("sim_pub_default", {"urdf_path": str(ns.ARM7), "real_time_factor": 5.0}, clock=True,
              every_step=False)
    try:
        st = sim.states(0.0)  # from whenever this process has discovered the node
        t0 = st[0][0]
        st += sim.states(t0 + 1.0)
        time.sleep(0.5)
        clocks = [c.clock.sec * 1_000_000_000 + c.clock.nanosec for c in ns.drain(sim.clock)]
    finally:
        sim.stop()
    stamps = [round(s[0] * 1e9) for s in st]
    assert len(stamps) >= 2 and all(t == 1_000_000 or t % 10_000_000 == 0 for t in stamps + clocks), stamps[:5]
    assert np.all(np.diff(clocks) > 0) and np.all(np.diff(stamps) > 0)
    # the joint states' instants are /clock's: every stamp where this process received /clock's instants
    # on both sides one period apart is one of them (its /clock subscription may be discovered later
    # than the joint states', and a reliable reader may miss what the writer's history dropped)
    clk = np.array(clocks)
    k = np.searchsorted(clk, stamps)
    between = [(t, i) for t, i in zip(stamps, k) if 0 < i < len(clk) and clk[i] - clk[i - 1] <= 10_000_000]
    assert len(between) >= 20, (len(stamps), clocks[:3], clocks[-3:])
    assert all(t in (clk[i - 1], clk[i]) for t, i in between), [t for t, i in between if t not in (clk[i - 1], clk[i])]
    assert sum(t0 * 1e9 < t <= t0 * 1e9 + 1e9 for t in stamps) <= 100


@pytest.mark.parametrize("rtf", [1.0, 0.5])
def test_simulated_time_is_paced_by_the_real_time_factor(rtf):
    """The simulation paces itself: over 3 s of wall clock, simulated time never runs ahead of
    real_time_factor times the wall clock (30 % for this process's own reading lag), and it does
    advance. A busy machine can only slow the simulation down, so this holds beside any load; whether
    it keeps up with the factor is bench_sim's to measure (no timed lower bound in the tests). Every
    step is a whole number of 1 ms apart."""
    sim = Sim(f"sim_rtf_{int(rtf * 10)}", {"urdf_path": str(ns.ARM7), "real_time_factor": rtf}, clock=True)
    try:
        sim.states(0.2)
        ns.drain(sim.clock)
        w0 = time.monotonic()
        time.sleep(3.0)
        got = ns.drain(sim.clock)
        wall = time.monotonic() - w0
    finally:
        sim.stop()
    ns_ = np.array([c.clock.sec * 1_000_000_000 + c.clock.nanosec for c in got], dtype=np.int64)
    steps = np.diff(ns_)   # whole steps of 1 ms, in integer nanoseconds (a /clock message this process
    assert (steps >= 1_000_000).all() and (steps % 1_000_000 == 0).all(), sorted(set(steps.tolist()))[:10]
    t = ns_ * 1e-9         # read late may be overwritten: depth 10)
    assert len(got) > 1 and t[-1] > t[0], len(got)
    advance = (t[-1] - t[0]) / wall
    assert advance < 1.3 * rtf, advance
    assert len(got) / wall < 1.3 * 1000 * rtf, len(got) / wall


def test_free_motion_equals_an_independent_integration_to_first_order(free_1k):
    """Semi-implicit Euler against RK (DOP853, rtol 1e-11) on Pinocchio's ABA over 0.5 s of an arm
    falling freely (no floor; joint speeds reach 20 rad/s). A first-order method's error is C dt: it
    must halve at 2 kHz (ratio 1.8 to 2.2), and Richardson's extrapolation 2 q_2kHz - q_1kHz, which
    cancels the first-order term, must be ten times closer to the reference than q_1kHz. So the
    published motion converges to the independent solution at the integrator's order."""
    e1, st, _, ref = free_1k
    moved = float(np.abs(st[-1][1] - np.array([Q0[n] for n in st[-1][3]])).max())
    assert moved > 0.2, moved  # it did fall: the comparison is not of a still arm
    e2, st2, _, _ = _free_motion_error("sim_free_2k", 2000.0, 0.5)
    assert 1.8 < e1 / e2 < 2.2, (e1, e2)
    by_stamp = {round(s[0] * 1e9): s[1] for s in st2}
    rich = [2 * by_stamp[round(s[0] * 1e9)] - s[1] - r for s, r in zip(st, ref) if round(s[0] * 1e9) in by_stamp]
    assert len(rich) > 400
    e_rich = max(float(np.abs(x).max()) for x in rich)
    assert e_rich < e1 / 10 and e1 < 0.15, (e1, e2, e_rich)


def _accel_runs(st, t_from, accel, step_ns=1_000_000):
    """Of the joint states since the simulated time t_from: the wheel's acceleration over each pair of
    consecutive steps this process received (`seen`), whether it is `accel` (`hit`), and the number of
    steps of each run at `accel`, counted from the velocity: between two pairs of steps without
    acceleration it changed by accel dt for each step a command was in force, however many of the
    states in between this process lost (a run whose quiet steps on both sides were all lost counts
    with its neighbour, as one longer run)."""
    after = sorted({round(s[0] * 1e9): s for s in st if s[0] >= t_from}.items())
    t = np.array([k for k, _ in after], dtype=np.int64)
    v = np.array([s[2][0] for _, s in after])
    seen = np.diff(t) == step_ns
    acc = np.diff(v) / (step_ns * 1e-9)
    hit = seen & np.isclose(acc, accel, rtol=1e-9)
    quiet = np.flatnonzero(seen & (acc == 0.0))
    runs = [(v[b] - v[a + 1]) / (accel * step_ns * 1e-9) for a, b in zip(quiet[:-1], quiet[1:]) if v[b] != v[a + 1]]
    return acc[seen], hit[seen], runs, v


def _read_until_timed_out(sim, st, t_from, accel, quiet=100):
    """The joint states read on until a command heard since the simulated time t_from has been applied
    and has timed out (steps at `accel`, then `quiet` steps seen without it), or, when none is applied,
    for 20 s of wall clock (states collected, not windowed: this process may read late). The runs of
    steps at `accel` seen whole: none when this process lost a state inside each (the caller sends
    again). Also returns after 60 s of wall clock since the last step at `accel`, so it ends."""
    deadline = time.monotonic() + 20.0
    last_hits = 0
    while True:
        st = st + sim.states(st[-1][0] + 0.05)
        _, hit, runs, _ = _accel_runs(st, t_from, accel)
        if hit.sum() > last_hits:
            last_hits, deadline = int(hit.sum()), time.monotonic() + 60.0
        if (hit.any() and len(hit) - 1 - int(np.flatnonzero(hit)[-1]) >= quiet) or time.monotonic() > deadline:
            return st, runs


# ----------------------------------------------------------------------------- commands
def test_commands_as_float64multiarray_then_jointstate_refusals_clipping_and_timeout():
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    c = ns.ros()
    # the wheel's position limits out of reach (a slow test process leaves it spinning for minutes)
    wide = WHEEL.replace('lower="-3" upper="3"', 'lower="-1000" upper="1000"')
    sim = Sim("sim_wheel", {"robot_description": wide, "simulation_floor": [], "effort_command_topic":
                            "/sim_wheel/commands", "simulation_command_timeout": 0.05})
    try:
        pub = c.publisher(Float64MultiArray, "/sim_wheel/commands")
        c.wait_for_subscriber(pub)
        st = sim.states(0.3)
        assert st[-1][2][0] == 0.0  # no command: no effort
        # wrong length and NaN: refused, not applied. Sent until the refusal is logged: a best-effort
        # reader drops what arrives before it has discovered the writer (which may know the reader
        # sooner: wait_for_subscriber), and there is no resending
        deadline = time.monotonic() + 20.0
        while "effort command of 2 values refused" not in sim.proc.output() and time.monotonic() < deadline:
            pub.publish(Float64MultiArray(data=[1.0, 2.0]))
            pub.publish(Float64MultiArray(data=[math.nan]))
            time.sleep(0.2)
        time.sleep(0.3)
        st = sim.states(st[-1][0] + 0.3)
        assert st[-1][2][0] == 0.0
        # 1 N m: qdd = 2 rad/s^2 at every step while the last command heard is fresh (0.05 s). What is
        # checked is what the simulator did with the commands it heard, read from its joint states in
        # simulated time, however late this process sends or reads: the 20 commands (sent again while
        # none is heard: a busy machine may delay or drop them) and the timeout that ends each run.
        t_cmd, sent = st[-1][0], 0
        while sent < 100:
            for _ in range(20):
                pub.publish(Float64MultiArray(data=[1.0]))
                time.sleep(0.01)
            sent += 20
            st, runs = _read_until_timed_out(sim, st, t_cmd, accel=1.0 / IZZ)
            if runs:
                break
        assert runs, "no effort command was applied\n" + sim.proc.output()[-3000:]
        acc, hit, runs, v = _accel_runs(st, t_cmd, 1.0 / IZZ)
        assert set(np.round(acc[~hit], 9)) <= {0.0}, acc  # the command or, once timed out, nothing
        assert all(abs(n - round(n)) < 1e-6 for n in runs), runs  # whole steps at the commanded acceleration
        assert len(runs) <= sent and min(runs) >= 51 - 1e-6, runs  # each heard command held 0.05 s: 51 steps
        assert v[-1] == v[-2] > 0.0  # timed out: no effort any more
        c.node.destroy_publisher(pub)
        # a participant keeps a topic's type: JointState commands on another topic, set at run time
        assert c.set_parameters("sim_wheel", effort_command_topic="/sim_wheel/joint_commands") == [(True, "")]
        jpub = c.publisher(JointState, "/sim_wheel/joint_commands")
        c.wait_for_subscriber(jpub, timeout=120.0)  # the simulator subscribed with its publishers' type
        # clipped at the URDF limit: -10 N m -> qdd = -20 at every step while fresh; 5 commands 10 ms apart,
        # sent again while none is heard, read as above
        t_cmd, sent = st[-1][0], 0
        while sent < 25:
            for _ in range(5):
                jpub.publish(ns.joint_state(["other", "spin"], [0.0, 0.0], efforts=[5.0, -1e300]))
                time.sleep(0.01)
            sent += 5
            st, runs = _read_until_timed_out(sim, st, t_cmd, accel=-10.0 / IZZ)
            if runs:
                break
        assert runs, "JointState commands were never applied\n" + sim.proc.output()[-3000:]
        acc, hit, runs, _ = _accel_runs(st, t_cmd, -10.0 / IZZ)
        assert set(np.round(acc[~hit], 9)) <= {0.0}, acc  # the clipped command or, timed out, nothing
        assert all(abs(n - round(n)) < 1e-6 for n in runs), runs
        assert len(runs) <= sent and min(runs) >= 51 - 1e-6, runs
        c.node.destroy_publisher(jpub)
        assert _all_finite(st)
    finally:
        out = sim.stop()
    assert "effort command of 2 values refused: expected 1" in out, out[-3000:]
    # the NaN command's warning falls in the same 2 s throttle; its refusal shows in the velocity above


# ----------------------------------------------------------------------------- held, then falling
def test_a_near_balanced_arm_is_held_by_the_dynamics_nodes_gravity_stream_then_falls_without_it():
    """The simulated arm waits for its first command (simulation_wait_for_command), a dynamics node
    computes gravity torques from the simulated joint states and sends them on the command topic:
    over 2 s of simulated time the arm moves less than 1 mrad. Then the dynamics node is stopped:
    its last command times out (0.5 s) and the arm falls. The simulation runs at a quarter of real
    time: the loop closes through two processes and DDS, and on a busy machine a late torque is a
    late torque at any speed; what is checked is that the stream holds the arm, not how fast the
    machine is (the round trip's latency is bench_node's)."""
    near = {"joint2": 0.15, "joint4": -0.3, "joint6": 0.15}
    sim = Sim("sim_held", {"urdf_path": str(ns.ARM7), "effort_command_topic": "/sim_held/commands",
                           "real_time_factor": 0.25,
                           "simulation_wait_for_command": True,
                           "simulation_initial_positions": [f"{k}={v}" for k, v in near.items()]})
    dyn = ns.NodeProcess("held_dynamics", {"urdf_path": str(ns.ARM7), "joint_states_topic": "/sim_held/joint_states",
                                           "effort_command_topic": "/sim_held/commands"})
    try:
        st = sim.states(2.0, timeout=120.0)
        q0 = np.array([near.get(n, 0.0) for n in st[0][3]])
        moving = [s for s in st if s[0] > 0.0]
        while len(moving) <= 1000:  # this process may have read too late for the first ones (the
            st += sim.states(st[-1][0] + 0.5, timeout=120.0)  # writer keeps the last 1000)
            moving = [s for s in st if s[0] > 0.0]
        drift = max(float(np.abs(s[1] - q0).max()) for s in moving)
        assert drift < 1e-3, drift
        rc, _ = dyn.stop(signal.SIGINT, timeout=HANG_S)
        assert rc == 0, dyn.output()[-2000:]
        t_stop = st[-1][0]   # what this process has read: it may lag the simulation (a loaded machine)
        later = sim.states(t_stop + 3.0)
        fell = max(float(np.abs(s[1] - q0).max()) for s in later)
        while fell <= 0.05 and later[-1][0] < t_stop + 10.0:   # read on while the states are still the held ones
            later += sim.states(later[-1][0] + 0.5)
            fell = max(float(np.abs(s[1] - q0).max()) for s in later)
        assert fell > 0.05, fell
        assert _all_finite(st + later)
    finally:
        dyn.kill()
        sim.stop()


def test_the_dropped_arm_lands_and_its_links_come_to_rest_above_the_floor():
    """arm7 falls from near upright onto the floor z = 0 (contacts at every moving link's origin):
    no contact point ever goes deeper than the soft floor's landing dip (10 cm; a point passing through
    would hang 30 cm and more below), and after 6 s of simulated time every contact point is at rest
    (< 1 mm/s), those touching pressed into the soft floor by less than 5 cm (K = 1e4 N/m: the contact
    forces can exceed the arm's weight, the base joint holding a lever). The wrist roll (joint7) turns
    about an axis through tool0's origin: nothing in a rigid-body model without joint friction stops
    it, and it is left out."""
    import dynamics_node as dn
    links = [lk for lk in dn.load_model(str(ns.ARM7)).link_names if lk != "base_link"]
    sim = Sim("sim_drop", {"urdf_path": arm7_without_limits(), "simulation_initial_positions": ["joint2=0.3"],
                           # no limits, points at the link origins on the soft floor of 1e4 N/m
                           "simulation_contact_links": links, "simulation_contact_points": [0.0] * (3 * len(links)),
                           "simulation_stiffness": 1e4})
    try:
        st = sim.states(6.0, timeout=120.0)
    finally:
        sim.stop()
    m = dn.load_model(str(ns.ARM7))
    links = [lk for lk in m.link_names if lk != "base_link"]
    low = min(float(np.asarray(dn.link_pose(m, s[1], lk))[2, 3]) for s in st[::20] for lk in links)
    assert -0.1 < low < 0.0, low
    q, qd = st[-1][1], st[-1][2]
    heights = [float(np.asarray(dn.link_pose(m, q, lk))[2, 3]) for lk in links]
    speeds = [float(np.linalg.norm(np.asarray(dn.jacobian(m, q, lk))[:3] @ qd)) for lk in links]
    assert max(speeds) < 1e-3, speeds
    assert min(heights) > -0.05 and sum(h < 0 for h in heights) >= 2, heights
    assert _all_finite(st)


# ----------------------------------------------------------------------------- floating base, markers, modes
BOX = """<robot name="box"><link name="box"><inertial><mass value="4.0"/>
  <inertia ixx="0.05" ixy="0" ixz="0" iyy="0.05" iyz="0" izz="0.05"/></inertial></link></robot>"""


def test_a_floating_box_lands_on_its_corners_with_base_pose_markers_and_reset():
    """A free box (4 kg) dropped from 0.3 m: ~/base_pose comes to rest at the half height less the
    springs' sag m g / (4 K); ~/contact_markers shows its four corners touching (green) with upward
    forces summing to its weight; ~/reset_simulation puts it back up, at rest."""
    from geometry_msgs.msg import PoseStamped
    from std_srvs.srv import Trigger
    from visualization_msgs.msg import MarkerArray
    c = ns.ros()
    poses, s1 = c.subscribe(PoseStamped, "/sim_box/base_pose")
    marks, s2 = c.subscribe(MarkerArray, "/sim_box/contact_markers", depth=10)
    corners = [x for a in (-0.1, 0.1) for b in (-0.1, 0.1) for x in (a, b, -0.1)]
    sim = Sim("sim_box", {"robot_description": BOX, "floating_base": True, "markers_rate": 10.0,
                          "simulation_initial_positions": ["root.z=0.4"], "simulation_friction": 1.0,
                          "simulation_contact_links": ["box"] * 4, "simulation_contact_points": corners,
                          "simulation_stiffness": 1e4})
    try:
        st = sim.states(3.0)
        assert st[-1][3] == [] and len(st[-1][1]) == 0  # no joints: the base is on its own topics
        got = ns.drain(poses, timeout=1.0)
        z = [p.pose.position.z for p in got]
        assert got[-1].header.frame_id == "world" and abs(z[-1] - (0.1 - 4.0 * 9.81 / 4e4)) < 2e-4, z[-1]
        ns.drain(marks)
        m = ns.collect(marks, 1, 5.0)[-1]
        assert m.markers[0].action == m.markers[0].DELETEALL
        spheres = [k for k in m.markers if k.ns == "contact_points"]
        arrows = [k for k in m.markers if k.ns == "contact_forces"]
        assert len(spheres) == 4 and all(k.color.g > 0.8 for k in spheres)
        assert all(abs(k.pose.position.z) < 0.01 for k in spheres) and m.markers[0].header.frame_id == "box"
        f = [(a.points[1].z - a.points[0].z) / 0.002 for a in arrows]
        assert abs(sum(f) - 4.0 * 9.81) < 0.5, f
        # reset with simulation_wait_for_command: the box is put back at 0.4 m and stays there until a
        # command comes, so that a pose of it reaches this process however late it reads (a
        # falling one's 0.25 s above the floor can be lost on a busy machine). Reset again until the
        # parameter, applied by the simulation loop, has taken effect.
        assert c.set_parameters("sim_box", simulation_wait_for_command=True) == [(True, "")]
        z, deadline = [], time.monotonic() + 60.0
        while not (z and max(z) > 0.35) and time.monotonic() < deadline:
            r = c.call(Trigger, "/sim_box/reset_simulation", Trigger.Request())
            assert r.success, r.message
            z += [p.pose.position.z for p in ns.drain(poses, timeout=1.0)]
        assert z and max(z) > 0.35, max(z, default=None)
    finally:
        c.node.destroy_subscription(s1)
        c.node.destroy_subscription(s2)
        sim.stop()


def test_the_simulation_parameter_switches_the_stream_process_at_run_time():
    """A plain dynamics node set to simulation: true starts publishing simulated joint states;
    set back, it stops and computes gravity torques from joint states again."""
    from sensor_msgs.msg import JointState
    c = ns.ros()
    js, s1 = c.subscribe(JointState, "/sim_switch/joint_states")
    # waiting for a first command that never comes, the simulated arm stays at Q0 (its states all alike: the
    # service's position is compared with them, however late this process reads them)
    node = ns.NodeProcess("sim_switch", {"urdf_path": str(ns.ARM7), "joint_states_topic": "/sim_switch/joint_states",
                                         "simulation_wait_for_command": True,
                                         "simulation_initial_positions": [f"{k}={v}" for k, v in Q0.items()]},
                          ros_args=("-r", "/clock:=/sim_switch/clock"))
    try:
        from dynamics_interfaces.srv import InverseDynamics
        c.wait_for_service(InverseDynamics, node.path("inverse_dynamics"), proc=node)
        time.sleep(0.5)
        assert not ns.drain(js)
        assert c.set_parameters("sim_switch", simulation=True) == [(True, "")]
        got = ns.collect(js, 100, 30.0)
        assert len(got) >= 100 and list(got[0].name) == [f"joint{i}" for i in range(1, 8)]  # collect may overshoot
        from dynamics_interfaces.srv import GravityCompensation
        g = c.call(GravityCompensation, node.path("gravity_compensation"), GravityCompensation.Request())
        assert g.success, g.message  # "the latest joint state": the simulated one, shared with the node
        assert all(np.array_equal(m.position, got[0].position) for m in got)
        assert np.array_equal(g.position, got[0].position) and np.isfinite(g.effort).all()
        assert np.array_equal(got[0].position, [Q0[n] for n in got[0].name])
        assert c.set_parameters("sim_switch", simulation=False) == [(True, "")]
        deadline = time.monotonic() + HANG_S   # the simulation stops publishing: a quiet half second
        while ns.drain(js, timeout=0.5):        # comes, however busy the machine is
            assert time.monotonic() < deadline, "the simulation still publishes joint states"
        torques, s2 = c.subscribe(JointState, node.path("gravity_torques"))
        pub = c.publisher(JointState, "/sim_switch/joint_states")
        c.wait_for_subscriber(pub)
        deadline = time.monotonic() + 20.0
        while not ns.drain(torques, 0.05) and time.monotonic() < deadline:
            pub.publish(ns.joint_state([f"joint{i}" for i in range(1, 8)], [0.0] * 7))
        assert time.monotonic() < deadline, node.output()[-3000:]
        c.node.destroy_subscription(s2)
        c.node.destroy_publisher(pub)
    finally:
        c.node.destroy_subscription(s1)
        rc, _ = node.stop(signal.SIGINT, timeout=HANG_S)
        assert rc == 0, node.output()[-3000:]
        assert "Traceback" not in node.output()


def test_a_joint_trajectory_controllers_topic_drives_the_position_commanded_robot():
    """With simulation_command_interface position, the command topic's publishers sending
    trajectory_msgs/JointTrajectory (a joint_trajectory_controller's ~/joint_trajectory) make the
    simulated robot subscribe with that type and follow the trajectory in simulated time from its
    header.stamp: the wheel holds its position until the stamp and ends at the last point, 1.2 rad; a
    point beyond its limit (3 rad) is clipped and reported in /diagnostics. The message is stamped, so
    the copies sent until one is heard (best effort) all start at the same simulated time, however
    late this process sends them."""
    from builtin_interfaces.msg import Duration, Time
    from diagnostic_msgs.msg import DiagnosticArray
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    c = ns.ros()
    diag, s1 = c.subscribe(DiagnosticArray, "/diagnostics", depth=50)
    sim = Sim("sim_jtc", {"robot_description": WHEEL, "simulation_floor": [], "simulation_command_interface":
                          "position", "effort_command_topic": "/sim_jtc/joint_trajectory"})
    try:
        pub = c.publisher(JointTrajectory, "/sim_jtc/joint_trajectory")
        deadline = time.monotonic() + 30.0
        while "as trajectory_msgs/JointTrajectory" not in sim.proc.output() and time.monotonic() < deadline:
            time.sleep(0.2)
        try:
            c.wait_for_subscriber(pub)
        except TimeoutError as e:  # say what the simulation did meanwhile: its diagnostics, its log
            last = {s.name: {kv.key: kv.value for kv in s.values} for m in ns.drain(diag) for s in m.status}
            raise AssertionError(f"{e}; the simulation's last diagnostics: {last.get('sim_jtc: simulation')}; "
                                 f"the topic's subscriptions as this process sees them: "
                                 f"{c.node.get_subscriptions_info_by_topic('/sim_jtc/joint_trajectory')}\n"
                                 f"{sim.proc.output()[-3000:]}") from None
        st = sim.states(0.0)
        start = round(st[-1][0] * 1e9) + 1_000_000_000  # a second after the last state read
        msg = JointTrajectory(joint_names=["spin"], points=[
            JointTrajectoryPoint(positions=[0.6], time_from_start=Duration(sec=0, nanosec=500_000_000)),
            JointTrajectoryPoint(positions=[1.2], time_from_start=Duration(sec=1, nanosec=0))])
        msg.header.stamp = Time(sec=start // 10**9, nanosec=start % 10**9)
        deadline = time.monotonic() + 60.0
        while abs(st[-1][1][0]) < 1e-3 and time.monotonic() < deadline:  # until it has started moving
            pub.publish(msg)
            st += sim.states(st[-1][0] + 0.2)
        st += sim.states(start * 1e-9 + 3.0)
        before = [s[1][0] for s in st if s[0] < start * 1e-9]
        assert max(map(abs, before)) < 1e-6, max(map(abs, before))  # held at 0 until the stamp
        assert abs(st[-1][1][0] - 1.2) < 1e-3, st[-1]
        pub.publish(JointTrajectory(joint_names=["spin"], points=[
            JointTrajectoryPoint(positions=[5.0], time_from_start=Duration(sec=0, nanosec=100_000_000))]))
        end = time.monotonic() + 20.0
        seen = ""
        while "clipped" not in seen and time.monotonic() < end:
            pub.publish(JointTrajectory(joint_names=["spin"], points=[
                JointTrajectoryPoint(positions=[5.0], time_from_start=Duration(sec=0, nanosec=100_000_000))]))
            for m in ns.drain(diag, timeout=0.5):
                for s in m.status:
                    if s.name == "sim_jtc: simulation":
                        seen = {kv.key: kv.value for kv in s.values}.get("last_clip", "")
        assert "clipped" in seen and "'spin'" in seen, seen
    finally:
        c.node.destroy_subscription(s1)
        sim.stop()
