"""What the simulated robot publishes, and when (simulation_publish_rate; dynamics_node/ros/simulation.py):
Simulation's step in-process, its publishers replaced by recorders, over N steps of simulated time. Every
step is simulated (the states published are those of a world stepped alone, published or not); /clock and
the joint states go out together, with the same stamps, at the first step at or after each multiple of
1/rate s (every step at or above simulation_rate), and while the simulated time stands still (waiting for
the first command) once every period's worth of steps. How fast a client sees /clock advance is
bench/bench_clock.py's to measure; nothing here reads the wall clock."""
from __future__ import annotations

import math

import numpy as np
import pytest

import node_support as ns
from test_sim_world import WHEEL, world

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

BOX = """<robot name="box"><link name="box"><inertial><mass value="4.0"/>
  <inertia ixx="0.05" ixy="0" ixz="0" iyy="0.05" iyz="0" izz="0.05"/></inertial></link></robot>"""


class Recorder:
    """A publisher that keeps what it is given as it would go out: serialized at the publish (a message
    object given may be changed afterwards), read back by rclpy's deserialization."""

    def __init__(self, msg_type):
        self.type, self.got = msg_type, []

    def publish(self, m):
        from rclpy.serialization import deserialize_message, serialize_message
        self.got.append(deserialize_message(m if isinstance(m, bytes) else serialize_message(m), self.type))

    def get_subscription_count(self):
        return 0


@pytest.fixture(scope="module")
def node():
    import rclpy
    from rclpy.context import Context
    from rclpy.signals import SignalHandlerOptions
    c = Context()
    rclpy.init(context=c, domain_id=ns.DOMAIN_ID, signal_handler_options=SignalHandlerOptions.NO)
    try:
        n = rclpy.create_node("sim_publish", context=c)
        yield n
        n.destroy_node()
    finally:
        rclpy.try_shutdown(context=c)


def simulated(node, w):
    """A Simulation on node of a world built as w is (its own: sim.world), its /clock, joint states, pose
    and twist publishers recorders."""
    from geometry_msgs.msg import PoseStamped, TwistStamped
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState

    from dynamics_node.ros.simulation import Simulation
    sim = Simulation(node, lambda name: "/sim_publish/" + name.lstrip("~/"), node.get_logger())
    sim.configure(w.st, w.cfg, {"joint_states_topic"}, now=True)
    assert sim.world is not None and sim.world.t_ns == 0
    sim.pub_clock, sim.pub_js = Recorder(Clock), Recorder(JointState)
    sim.pub_pose, sim.pub_twist = Recorder(PoseStamped), Recorder(TwistStamped)
    return sim


def stamps(msgs):
    return [(m.clock if hasattr(m, "clock") else m.header.stamp) for m in msgs]


def ns_of(times):
    return [t.sec * 1_000_000_000 + t.nanosec for t in times]


def expected(dt_ns, n, rate):
    """The rule, restated: of the steps' times dt, 2 dt, ... n dt, the first, then the first at or after
    each later multiple of the period (so every step when the period is at most the step)."""
    period = round(1e9 / rate)
    times = [k * dt_ns for k in range(1, n + 1)]
    out = [times[0]]
    for t in times[1:]:
        if t >= (out[-1] // period + 1) * period:
            out.append(t)
    return out


@pytest.mark.parametrize("sim_rate, pub_rate, n", [
    (1000.0, 100.0, 1000),     # the defaults: every 10th step
    (1000.0, 1000.0, 300),     # every step
    (1000.0, 10000.0, 300),    # above the step's rate: every step
    (1000.0, 300.0, 600),      # a period of 3.33 ms: the first step at or after each multiple
    (2000.0, 1000.0, 600),     # every other step
    (500.0, 30.0, 500),
])
def test_the_state_goes_out_at_the_publish_rate_of_simulated_time_and_every_step_is_simulated(
        node, sim_rate, pub_rate, n):
    values = {"simulation_floor": [], "simulation_initial_positions": ["joint2=0.5", "joint4=-0.3"],
              "simulation_rate": sim_rate}
    if pub_rate != 100.0:
        values["simulation_publish_rate"] = pub_rate
    else:
        assert world(**values).cfg.simulation_publish_rate == 100.0  # the default
    alone = world(**values)
    sim = simulated(node, alone)
    w = sim.world
    truth = {}
    for k in range(n):
        sim._tick(w, k)
        alone.step()
        truth[alone.t_ns] = (alone.q.copy(), alone.qd.copy())
    assert w.steps == alone.steps == n and w.t_ns == alone.t_ns
    clock = ns_of(stamps(sim.pub_clock.got))
    assert clock == expected(w.dt_ns, n, pub_rate), clock[:12]
    js = sim.pub_js.got
    assert ns_of(stamps(js)) == clock and sim.published == len(clock)
    for m, t in zip(js, clock):  # the state of that step, exactly
        assert list(m.name) == w.names
        assert np.array_equal(m.position, truth[t][0][w.jq]) and np.array_equal(m.velocity, truth[t][1][w.jv])
    if pub_rate >= sim_rate:
        assert len(clock) == n
    else:
        assert len(clock) == 1 + math.floor(n * w.dt_ns / round(1e9 / pub_rate))
    rep = sim.report()["simulation"]
    assert rep["publish_rate_hz"] == pub_rate and rep["published"] == len(clock) and rep["steps"] == n


def test_while_waiting_for_the_first_command_the_state_goes_out_once_a_period_of_steps_then_on_the_grid(node):
    """The clock stands still at 0 while the robot waits for its first command: the state is published at
    the first step, then every 10th step (100 Hz at 1 kHz), so that a controller that starts later hears
    it. Released, the first state published is that at 10 ms, then every 10 ms: the commanded 1 N m shows
    as qd = t / izz in each (every step applied it)."""
    sim = simulated(node, world(WHEEL, simulation_floor=[], simulation_wait_for_command=True,
                                effort_command_topic="/c"))
    w = sim.world
    for k in range(95):
        sim._tick(w, k)
    assert w.t_ns == 0 and ns_of(stamps(sim.pub_clock.got)) == [0] * 10  # steps 1, 11, ..., 91
    assert w.command_array([1.0]) == ""
    for k in range(100):
        sim._tick(w, 95 + k)
    clock = ns_of(stamps(sim.pub_clock.got))[10:]
    assert clock == [10_000_000 * k for k in range(1, 11)], clock
    qd = [m.velocity[0] for m in sim.pub_js.got[10:]]
    assert qd == pytest.approx([t * 1e-9 * 1.0 / 0.5 for t in clock], rel=1e-12)
    assert ns_of(stamps(sim.pub_js.got)) == [0] * 10 + clock


def test_a_floating_bases_pose_and_twist_go_out_with_the_joint_states(node):
    sim = simulated(node, world(BOX, floating_base=True, simulation_initial_positions=["root.z=0.4"],
                                simulation_contact_links=["box"], simulation_contact_points=[0.0, 0.0, -0.1],
                                simulation_stiffness=1e4))
    w = sim.world
    for k in range(250):
        sim._tick(w, k)
    clock = ns_of(stamps(sim.pub_clock.got))
    assert clock == expected(w.dt_ns, 250, 100.0)
    assert ns_of(stamps(sim.pub_pose.got)) == ns_of(stamps(sim.pub_twist.got)) == ns_of(stamps(sim.pub_js.got)) \
        == clock
    assert sim.pub_pose.got[-1].pose.position.z < 0.4  # falling


@pytest.mark.parametrize("value", [0.5, 0.0, -10.0, 20000.0, math.nan])
def test_a_publish_rate_out_of_range_is_refused_by_name(value):
    from dynamics_node.errors import ConfigError
    from dynamics_node.ros.params.param_checks import validate
    with pytest.raises(ConfigError, match="simulation_publish_rate"):
        validate({"urdf_path": str(ns.ARM7), "simulation": True, "simulation_publish_rate": value})


def test_a_rate_changed_while_running_takes_effect_after_the_next_publication(node):
    """simulation_publish_rate set from 100 Hz to 1 kHz at 25 ms of simulated time (the node's parameter
    change: a new world continuing the motion): the state at 30 ms, due under the old rate, is the next
    published, then every step."""
    from dynamics_node.ros.params.param_checks import validate
    sim = simulated(node, world(simulation_floor=[], simulation_initial_positions=["joint2=0.5"]))
    for k in range(25):
        sim._tick(sim.world, k)
    w = sim.world
    cfg = validate({"urdf_path": str(ns.ARM7), "simulation": True, "simulation_floor": [],
                    "simulation_initial_positions": ["joint2=0.5"], "simulation_publish_rate": 1000.0})
    sim.configure(w.st, cfg, {"simulation_publish_rate"}, now=True)
    assert sim.world is not w and sim.world.t_ns == 25_000_000 and np.array_equal(sim.world.q, w.q)
    for k in range(10):
        sim._tick(sim.world, 25 + k)
    assert ns_of(stamps(sim.pub_clock.got)) == [1_000_000, 10_000_000, 20_000_000, 30_000_000, 31_000_000,
                                                32_000_000, 33_000_000, 34_000_000, 35_000_000]
