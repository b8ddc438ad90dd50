"""The simulated robot's world in-process (dynamics_node/sim/world.py, no ROS context): parameters,
the environment it builds, commands (Float64MultiArray order, JointState names, refusals, timeout in
simulated time, clipping at the URDF limits), waiting for the first command, continuity across a
change, halting instead of a non-finite state. The node as a subprocess: test_node_simulation.py."""
from __future__ import annotations

import math

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

WHEEL = """<robot name="wheel">
  <link name="base_link"/>
  <link name="wheel"><inertial><mass value="2.0"/><origin xyz="0 0 0"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.5"/></inertial></link>
  <joint name="spin" type="revolute"><parent link="base_link"/><child link="wheel"/>
    <origin xyz="0 0 1"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="10" velocity="5"/></joint>
</robot>"""
IZZ = 0.5


def world(urdf=None, **values):
    from dynamics_node.ros.model_state import build_state, load
    from dynamics_node.ros.params.param_checks import validate
    from dynamics_node.sim.world import World
    src = {"robot_description": urdf} if urdf else {"urdf_path": str(ns.ARM7)}
    c = validate({**src, "simulation": True, **values})
    return World(build_state(load(c), c, {}), c)


@pytest.mark.parametrize("values, words", [
    ({"simulation_rate": 0.5}, ["simulation_rate"]),
    ({"real_time_factor": 0.0}, ["real_time_factor"]),
    ({"simulation_initial_positions": ["joint2 0.5"]}, ["simulation_initial_positions[0]", "joint:=value"]),
    ({"simulation_initial_positions": ["joint2:=nan"]}, ["simulation_initial_positions[0]", "finite"]),
    ({"simulation_initial_positions": ["joint2:=1", "joint2:=2"]}, ["simulation_initial_positions[1]", "twice"]),
    ({"simulation_floor": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]}, ["simulation_floor", "non-zero normal"]),
    ({"simulation_floor": [0.0, 0.0, 1.0]}, ["simulation_floor", "6 values"]),
    ({"simulation_contact_links": ["link2"], "simulation_contact_points": [0.0, 0.0]},
     ["simulation_contact_points", "expected 0 or 3"]),
    ({"simulation_friction": -1.0}, ["simulation_friction"]),
    ({"simulation_stiffness": 0.0}, ["simulation_stiffness"]),
])
def test_bad_simulation_parameters_are_refused_by_name(values, words):
    from dynamics_node.errors import ConfigError
    from dynamics_node.ros.params.param_checks import validate
    with pytest.raises(ConfigError) as e:
        validate({"simulation": True, **values})
    for w in words:
        assert w in str(e.value), str(e.value)


@pytest.mark.parametrize("values, words", [
    ({"simulation_initial_positions": ["elbow:=1.0"]}, ["simulation_initial_positions[0]", "no joint 'elbow'"]),
    ({"simulation_contact_links": ["link2", "hand"]}, ["simulation_contact_links[1]", "no link 'hand'"]),
    ({"simulation_contact_links": ["base_link"]}, ["simulation_contact_links[0]", "fixed to the world"]),
])
def test_simulation_parameters_are_checked_against_the_model_only_with_simulation_on(values, words):
    from dynamics_node.errors import ConfigError
    with pytest.raises(ConfigError) as e:
        world(**values)
    for w in words:
        assert w in str(e.value), str(e.value)
    from dynamics_node.ros.model_state import build_state, load
    from dynamics_node.ros.params.param_checks import validate
    c = validate({"urdf_path": str(ns.ARM7), **values})  # simulation off: acts on nothing, not checked
    build_state(load(c), c, {})


def test_the_default_environment_is_the_floor_z0_with_the_collision_shapes_else_the_link_origins():
    """arm7: every moving link has a <collision> cylinder, so each brings its 16 rim points;
    a robot without <collision> has a point at each moving link's origin, as before."""
    import dynamics_node as dn
    from dynamics_node.sim.shapes import cylinder_rims
    w = world()
    moving = [lk for lk in w.model.link_names if lk != "base_link"]
    assert w.env.point_link == [lk for lk in moving for _ in range(16)]
    assert np.allclose(w.env.point_local[:16], cylinder_rims(0.07, 0.19) + [0, 0, 0.095])  # link1's
    assert np.array_equal(w.q, np.zeros(7)) and np.array_equal(w.qd, np.zeros(7))
    no_shapes = WHEEL.replace("</robot>", '<link name="arm"/><joint name="a" type="fixed"><parent link="wheel"/>'
                              '<child link="arm"/><origin xyz="0.3 0 0"/></joint></robot>')
    o = world(no_shapes, simulation_initial_positions=["spin=0.5"], simulation_floor=[0, 0, 1, 0, 0, 1])
    assert o.env.point_link == ["wheel", "arm"] and not o.env.point_local.any()
    o.env.select(o.q)
    c = o.contacts[1]
    assert c.link == "arm" and np.array_equal(c.normal, [0, 0, 1]) and np.array_equal(c.surface_point, [0, 0, 1])
    assert c.friction == 0.5 and c.stiffness == 1e7 and c.damping == 100.0
    assert np.allclose(o.contact_points()[1], np.asarray(dn.link_pose(o.model, o.q, "arm"))[:3, 3])
    w2 = world(simulation_floor=[], simulation_initial_positions=["joint4:=-1.2", "joint2=0.5"])
    assert not w2.env.active() and np.array_equal(w2.q, [0, 0.5, 0, -1.2, 0, 0, 0])
    w4 = world(command_joints=["nojoint"])  # no command topic: command_joints act on nothing, not checked
    assert w4.command_names == [] and w4.command_array([]) == ""
    w3 = world(simulation_contact_links=["link4", "tool0"], simulation_contact_points=[0, 0, 0.1, 0, 0, 0.05],
               simulation_floor=[0, 0, -0.2, 0, 0, 2], simulation_friction=0.0)
    assert w3.env.point_link == ["link4", "tool0"] and w3.env.point_local[1][2] == 0.05
    assert w3.env.floor[0][2] == -0.2 and w3.env.kw["friction"] == 0.0


def test_commands_by_order_by_name_refusals_timeout_and_clipping():
    """On a wheel spinning about a vertical axis (gravity does nothing): qdd = tau / izz exactly."""
    w = world(WHEEL, simulation_floor=[], simulation_command_timeout=0.01, effort_command_topic="/c")
    assert w.command_array([1.0, 2.0]).startswith("effort command of 2 values refused: expected 1")
    assert "data[0] ('spin') is nan" in w.command_array([math.nan])
    assert "names no joint" in w.command_named(["other"], [1.0])
    assert "2 names but 1 efforts" in w.command_named(["spin", "x"], [1.0])
    assert "effort[0] ('spin') is inf" in w.command_named(["spin"], [math.inf])
    for _ in range(5):
        w.step()
    assert w.qd[0] == 0.0  # nothing taken: no effort
    assert w.command_array([1.0]) == ""
    for _ in range(10):  # 10 ms, the command's age reaches the timeout at the last step
        w.step()
    assert w.qd[0] == pytest.approx(10 * 0.001 * 1.0 / IZZ, rel=1e-12)
    w.step()  # 11 ms old: zero effort
    w.step()
    assert w.qd[0] == pytest.approx(11 * 0.001 * 1.0 / IZZ, rel=1e-12)
    assert w.command_named(["x", "spin"], [7.0, -1e300]) == ""  # clipped at the URDF limit, 10
    v0 = w.qd[0]
    w.step()
    assert w.qd[0] - v0 == pytest.approx(-0.001 * 10 / IZZ, rel=1e-12)
    assert np.isfinite(w.q).all() and w.t_ns == 18_000_000


def test_waiting_for_the_first_command_holds_the_state_and_the_clock():
    w = world(WHEEL, simulation_floor=[], simulation_wait_for_command=True, effort_command_topic="/c",
              simulation_initial_positions=["spin:=0.25"])
    for _ in range(3):
        assert w.step() is False
    assert w.t_ns == 0 and w.q[0] == 0.25
    w.command_array([0.0])
    assert w.step() is True and w.t_ns == 1_000_000


def test_a_change_continues_the_motion_unless_the_start_changed():
    from dynamics_node.sim.world import World
    w = world(simulation_initial_positions=["joint2:=0.5"])
    for _ in range(50):
        w.step()
    same = world(simulation_initial_positions=["joint2:=0.5"], gravity=[0.0, 0.0, -1.62]).take_over(w)
    assert np.array_equal(same.q, w.q) and same.t_ns == w.t_ns == 50_000_000
    other = world(simulation_initial_positions=["joint2:=0.6"]).take_over(w)
    assert other.q[1] == 0.6 and not other.qd.any() and other.t_ns == w.t_ns
    assert isinstance(other, World)


def test_a_step_that_would_not_be_finite_halts_the_world_at_its_last_finite_state():
    w = world(WHEEL.replace('effort="10"', 'effort="0"'), simulation_floor=[], effort_command_topic="/c")
    w.command_array([1e308])  # no URDF limit to clip it: the velocity overflows
    for _ in range(5):
        w.step()
    assert w.halted and "not finite" in w.halted
    assert np.isfinite(w.q).all() and np.isfinite(w.qd).all()
    t = w.t_ns
    assert w.step() is False and w.t_ns == t
    w.reset()
    assert not w.halted and w.q[0] == 0.0


def test_a_floating_base_starts_where_root_coordinates_say_and_lands_on_the_floor():
    """A free box dropped from 0.3 m on its four bottom corners comes to rest on them: the floor's
    spring carries its weight (sinking m g / (4 K)) and nothing passes through: the deepest point stays
    within what the four springs alone would take to stop it, v sqrt(m / (4 K)) at the landing speed."""
    box = """<robot name="box"><link name="box"><inertial><mass value="4.0"/>
      <inertia ixx="0.05" ixy="0" ixz="0" iyy="0.05" iyz="0" izz="0.05"/></inertial></link></robot>"""
    corners = [c for x in (-0.1, 0.1) for y in (-0.1, 0.1) for c in (x, y, -0.1)]
    w = world(box, floating_base=True, simulation_initial_positions=["root.z:=0.4", "root.qw:=2.0"],
              simulation_contact_links=["box"] * 4, simulation_contact_points=corners, simulation_friction=1.0,
              simulation_stiffness=1e4)
    assert np.array_equal(w.q, [0, 0, 0.4, 0, 0, 0, 1])
    low = math.inf
    for _ in range(3000):
        w.step()
        low = min(low, float(w.contact_points()[:, 2].min()))
    assert -math.sqrt(2 * 9.81 * 0.3) * math.sqrt(4.0 / 4e4) < low < -0.001
    sink = 4.0 * 9.81 / (4 * 1e4)
    assert w.q[2] == pytest.approx(0.1 - sink, abs=1e-4) and np.abs(w.qd).max() < 1e-3
    assert w.touching() == 4 and w.forces[:, 2].sum() == pytest.approx(4.0 * 9.81, rel=1e-3)


def test_the_loop_steps_at_its_rate_and_ends_when_the_executor_is_stopped_from_another_thread():
    """Simulation.run in-process with a real rcl context (no subscriber): it steps, and the stream
    process's stop (StreamExecutor.stop from the pipe thread) ends it at once."""
    import threading
    import time

    import rclpy
    from rclpy.context import Context
    from rclpy.signals import SignalHandlerOptions

    from dynamics_node.ros.simulation import Simulation
    from dynamics_node.ros.stream_executor import StreamExecutor
    c = Context()
    rclpy.init(context=c, domain_id=ns.DOMAIN_ID, signal_handler_options=SignalHandlerOptions.NO)
    try:
        node = rclpy.create_node("sim_inprocess", context=c)
        w = world(simulation_floor=[], simulation_initial_positions=["joint2=0.5"])
        sim = Simulation(node, lambda name: "/sim_inprocess/" + name.lstrip("~/"), node.get_logger())
        sim.configure(w.st, w.cfg, {"joint_states_topic"}, now=True)
        ex = StreamExecutor(node)
        t = threading.Thread(target=sim.run, args=(ex,), daemon=True)
        t0 = time.monotonic()
        t.start()
        while sim.world.steps < 200 and time.monotonic() - t0 < 60.0:
            time.sleep(0.01)
        rate = sim.world.steps / (time.monotonic() - t0)
        ex.stop()
        t.join(1.0)
        assert not t.is_alive(), (sim.errors, sim.last_error, sim.world.steps)
        assert sim.world.steps >= 200 and rate < 1100, rate  # paced, not free-running
        rep = sim.report()["simulation"]
        assert rep["steps"] == sim.world.steps and rep["contacts"] == 0 and rep["running"]
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=c)


def _compiled_and_python_steps(w, n):
    """n steps of w, each taken from the same state by the compiled kernel (step) and by sim.env.select
    with dn.simulate_step (step_python); the world goes on from the compiled one. Yields both states."""
    for _ in range(n):
        s0 = (w.q.copy(), w.qd.copy(), w.env.state.copy(), w.t_ns, w.steps)
        assert w.step(), w.halted
        a = (w.q, w.qd, w.env.state.copy(), w.forces, w.limit_tau, list(w.env.keys))
        w.q, w.qd, w.t_ns, w.steps = s0[0].copy(), s0[1].copy(), s0[3], s0[4]
        w.env.state[:] = s0[2]
        assert w.step_python(), w.halted
        b = (w.q, w.qd, w.env.state.copy(), w.forces, w.limit_tau, list(w.env.keys))
        yield a, b
        w.q, w.qd, w.forces = a[0], a[1], a[3]
        w.env.state[:] = a[2]


@pytest.mark.parametrize("robot", ["arm7 shapes+table", "two links with a tip sphere"])
def test_the_compiled_world_step_equals_the_python_one(robot):
    """The simulated robot's step in one compiled call (the pairs selected in compiled code, sim/select.py)
    against the Python world (sim.env.select and dn.simulate_step's Python step), from the same state at
    each of 2000 steps: arm7 with its cylinders, limits and a table falling onto it (the bench's robot),
    and a two-link arm with cylinders and a tip sphere landing on a table with friction and restitution.
    Same pairs in the same order; q, qd, the surface states and the limits' torques within 1e-12 of their
    scale; the forces too, beyond the stiffness times 1e-16 m (a sphere's lowest point is rounded
    differently on the two routes, and a 1e7 N/m spring turns that into 1e-9 N)."""
    from test_node_sim_mujoco import ARM_ON_TABLE, TABLE

    if robot.startswith("arm7"):
        w = world(simulation_initial_positions=["joint2=1.2", "joint4=0.6"], simulation_default_damping=0.1,
                  simulation_obstacles=[0.8, 0.0, 0.15, 0.6, 1.0, 0.3])
    else:
        w = world(ARM_ON_TABLE, friction=True, simulation_friction=0.5, simulation_obstacles=list(TABLE),
                  simulation_limit_restitution=0.5)
    assert w._kernel is not None
    pairs = touched = 0
    for a, b in _compiled_and_python_steps(w, 2000):
        assert a[5] == b[5]
        for x, y, slack in zip(a[:5], b[:5], (0, 0, 0, 1e-16 * w.cfg.simulation_stiffness, 0)):
            if y.size:
                assert np.max(np.abs(x - y)) <= 1e-12 * max(1.0, np.max(np.abs(y))) + slack
        pairs, touched = max(pairs, len(a[5])), max(touched, int(np.count_nonzero(np.any(a[3] != 0, axis=1))))
    assert touched >= 1 and pairs >= touched


@pytest.mark.parametrize("n", [7, 0])
def test_the_simulated_robot_publishes_bytes_that_read_back_as_its_state(n):
    """simulation.Patched (a JointState and /clock published as serialized bytes with the stamp, positions
    and velocities written in): rclpy's own deserialization of what would be published gives the names
    and exactly the values written, for 7 joints and for none (a floating base alone)."""
    from rclpy.serialization import deserialize_message
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState

    from dynamics_node.ros.simulation import Patched

    class Pub:  # what publish() is given
        def publish(self, b):
            self.sent = b

    t0 = JointState()
    t0.name = [f"joint{i}" for i in range(n)]
    h = t0.header.stamp
    js = Patched(t0, {"sec": (h, "sec", None), "nanosec": (h, "nanosec", None), "position": (t0, "position", n),
                      "velocity": (t0, "velocity", n)})
    c0 = Clock()
    clock = Patched(c0, {"sec": (c0.clock, "sec", None), "nanosec": (c0.clock, "nanosec", None)})
    assert js.ok and clock.ok
    rng = np.random.default_rng(4)
    pub = Pub()
    for _ in range(3):
        q, qd = rng.normal(size=n) * 10, rng.normal(size=n)
        sec, ns_ = int(rng.integers(0, 2**31)), int(rng.integers(0, 10**9))
        js.publish(pub, None, sec=sec, nanosec=ns_, position=q, velocity=qd)
        m = deserialize_message(pub.sent, JointState)
        assert list(m.name) == t0.name and (m.header.stamp.sec, m.header.stamp.nanosec) == (sec, ns_)
        assert np.array_equal(m.position, q) and np.array_equal(m.velocity, qd) and len(m.effort) == 0
        clock.publish(pub, None, sec=sec, nanosec=ns_)
        m = deserialize_message(pub.sent, Clock)
        assert (m.clock.sec, m.clock.nanosec) == (sec, ns_)
