"""The simulated robot as a controller test bench, in-process (sim.world.World, no ROS
context): joint limits (hard constraints in joint space, restitution), collision shapes, box obstacles,
default damping, position / velocity / trajectory commands; each against a closed form or an
independent reference (MuJoCo: test_node_sim_mujoco.py). The node as a subprocess:
test_node_simulation.py."""
from __future__ import annotations

import math

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

G = 9.81
# a pendulum: a rod of 1 kg with its centre of mass 0.5 m from the pivot, axis -y, so that with q = 0
# horizontal along x its centre of mass is at height z = r sin(q) and it falls toward negative q
PEND = """<robot name="pendulum"><link name="base_link"/>
  <link name="rod"><inertial><origin xyz="0.5 0 0"/><mass value="1.0"/>
    <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial></link>
  <joint name="hinge" type="revolute"><parent link="base_link"/><child link="rod"/><origin xyz="0 0 2"/>
    <axis xyz="0 -1 0"/><limit lower="LOWER" upper="1.5" effort="50" velocity="20"/>
    <safety_controller soft_lower_limit="-0.9" soft_upper_limit="1.4" k_position="10" k_velocity="1"/></joint>
</robot>"""
I_PEND = 0.02 + 1.0 * 0.5 ** 2  # about the pivot
WHEEL = """<robot name="wheel"><link name="base_link"/>
  <link name="wheel"><inertial><mass value="2.0"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.5"/></inertial></link>
  <joint name="spin" type="JTYPE"><parent link="base_link"/><child link="wheel"/>
    <origin xyz="0 0 1"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="100" velocity="5"/></joint>
</robot>"""
IZZ = 0.5


def world(urdf=None, **values):
    from dynamics_node.ros.model_state import build_state, load
    from dynamics_node.ros.params.param_checks import validate
    from dynamics_node.sim.world import World
    src = {"robot_description": urdf} if urdf else {"urdf_path": str(ns.ARM7)}
    c = validate({**src, "simulation": True, **values})
    return World(build_state(load(c), c, {}), c)


def run(w, seconds, each=None):
    for _ in range(int(round(seconds / w.dt))):
        assert w.step(), w.halted
        if each is not None:
            each(w)


# ----------------------------------------------------------------------------- joint limits
def test_a_pendulum_dropped_onto_its_lower_limit_stops_there():
    """Released horizontal, the rod swings down onto its stop at -1 rad and stays there (restitution 0):
    never beyond it by more than 1 mrad, at rest on it, the stop carrying the gravity torque m g r cos q."""
    w = world(PEND.replace("LOWER", "-1.0"), simulation_floor=[])
    low = []
    run(w, 1.5, lambda w: low.append(w.q[0]))
    assert min(low) > -1.0 - 1e-3 and abs(w.q[0] + 1.0) < 1e-3 and abs(w.qd[0]) < 1e-6
    assert w.limit_tau[0] == pytest.approx(1.0 * G * 0.5 * math.cos(1.0), rel=1e-6)
    assert w.commands.over_velocity(np.array([25.0])) == ["hinge"] and w.over_velocity() == []
    assert any("<safety_controller> is read and ignored" in n for n in w.notes)


@pytest.mark.parametrize("e", [0.3, 0.7])
def test_the_pendulum_rebounds_from_its_limit_as_restitution_says(e):
    """Energy: I w^2 / 2 = m g r (sin q0 - sin qL) at the stop; it leaves at e w, so it rises to the
    apex qa of sin qa = sin qL + e^2 (sin q0 - sin qL) (closed form; 10 kHz steps)."""
    qL = -1.2
    w = world(PEND.replace("LOWER", str(qL)), simulation_floor=[], simulation_limit_restitution=e,
              simulation_rate=10000.0)
    trace = []
    run(w, 1.2, lambda w: trace.append((w.q[0], w.qd[0])))
    q = np.array([x for x, _ in trace])
    v = np.array([x for _, x in trace])
    hit = int(np.argmax(v > 0))                           # the first step moving up again: the bounce
    w_in = math.sqrt(2 * G * 0.5 * (0 - math.sin(qL)) / I_PEND)
    assert v[hit] == pytest.approx(e * w_in, rel=5e-3)
    apex = q[hit + int(np.argmax(v[hit:] < 0))]
    assert math.sin(apex) == pytest.approx(math.sin(qL) + e * e * (0 - math.sin(qL)), abs=2e-3)
    assert q.min() > qL - 1e-3


def test_continuous_joints_have_no_limits_and_commands_are_clipped_to_the_limits_and_reported():
    w = world(WHEEL.replace("JTYPE", "continuous"), simulation_floor=[])
    assert w.limits is None
    w = world(WHEEL.replace("JTYPE", "revolute"), simulation_floor=[], effort_command_topic="/c",
              simulation_command_interface="position", simulation_pd_gains=[50.0, 10.0])
    assert w.command_array([4.0]) == "" and w.commands.cmd[0] == 3.0 and w.commands.clipped == 1
    assert "position 4 for 'spin' clipped to 3" in w.commands.last_clip
    run(w, 3.0)
    assert abs(w.q[0] - 3.0) < 1e-3 and w.q[0] <= 3.0 + 1e-9
    v = world(WHEEL.replace("JTYPE", "revolute"), simulation_floor=[], effort_command_topic="/c",
              simulation_command_interface="velocity")
    assert v.command_named(["spin"], [-9.0]) == "" and v.commands.cmd[0] == -5.0 and v.commands.clipped == 1


# ----------------------------------------------------------------------------- damping, PD
def test_default_damping_makes_a_spinning_joint_decay_as_exp_of_minus_b_t_over_i():
    """simulation_default_damping b on a joint without <dynamics>: after the effort stops, qd(t) =
    qd0 exp(-b t / I) (closed form; the URDF has no damping, so without it the wheel spins on)."""
    b = 0.25
    w = world(WHEEL.replace("JTYPE", "continuous"), simulation_floor=[], effort_command_topic="/c",
              simulation_default_damping=b, simulation_command_timeout=0.1, friction=True)
    w.command_array([10.0])
    run(w, 0.105)  # the command is taken for 0.1 s and one step (its age reaches the timeout at the last)
    v0, t0 = w.qd[0], w.t_ns
    run(w, 2.0)
    t = (w.t_ns - t0) * 1e-9
    assert w.qd[0] == pytest.approx(v0 * math.exp(-b * t / IZZ), rel=2e-3)
    free = world(WHEEL.replace("JTYPE", "continuous"), simulation_floor=[], effort_command_topic="/c",
                 simulation_command_timeout=0.1)
    free.command_array([10.0])
    run(free, 2.105)
    assert free.qd[0] == pytest.approx(10.0 * 0.101 / IZZ, rel=1e-9) and v0 < free.qd[0]


def test_a_position_command_converges_as_the_pd_closed_form():
    """I q'' + kd q' + kp q = kp r (no gravity on the vertical wheel): q(t) = r (1 - e^{-z w t} (cos wd t +
    z w / wd sin wd t)), w = sqrt(kp / I), z = kd / (2 sqrt(kp I)) (10 kHz steps)."""
    kp, kd, r = 200.0, 6.0, 0.4  # kp r below the effort limit (100 N m), which would saturate it
    w = world(WHEEL.replace("JTYPE", "revolute"), simulation_floor=[], effort_command_topic="/c",
              simulation_command_interface="position", simulation_pd_gains=[kp, kd], simulation_rate=10000.0)
    assert w.command_named(["spin"], [r]) == ""
    om, z = math.sqrt(kp / IZZ), kd / (2 * math.sqrt(kp * IZZ))
    wd = om * math.sqrt(1 - z * z)
    err = 0.0
    for _ in range(20000):
        w.step()
        t = w.t_ns * 1e-9
        ref = r * (1 - math.exp(-z * om * t) * (math.cos(wd * t) + z * om / wd * math.sin(wd * t)))
        err = max(err, abs(w.q[0] - ref))
    assert err < 2e-3 and abs(w.q[0] - r) < 1e-4


def test_a_trajectory_is_followed_in_simulated_time():
    """A joint_trajectory_controller's message: 0 -> 1 rad in 1 s -> 1.5 rad at 2 s; the stiff PD
    follows the linear interpolation within what its lag allows."""
    w = world(WHEEL.replace("JTYPE", "revolute"), simulation_floor=[], effort_command_topic="/c",
              simulation_command_interface="position")
    assert "refused" in w.command_trajectory(["nope"], [(1.0, [1.0], [])])
    assert w.command_trajectory(["spin"], [(0.0, [0.0], []), (1.0, [1.0], []), (2.0, [1.5], [])]) == ""
    run(w, 0.5)
    assert w.q[0] == pytest.approx(0.5, abs=0.03)
    run(w, 2.5)
    assert w.q[0] == pytest.approx(1.5, abs=1e-3)


def test_a_stamped_trajectory_starts_at_its_stamp_and_a_copy_sent_again_changes_nothing():
    """header.stamp in simulated time, as a joint_trajectory_controller reads it: before the stamp the
    wheel holds where it was when the message arrived; from the stamp it follows the points as an
    unstamped message taken at that step would; a copy of it arriving mid-way changes nothing."""
    def wheel():
        w = world(WHEEL.replace("JTYPE", "revolute"), simulation_floor=[], effort_command_topic="/c",
                  simulation_command_interface="position")
        assert w.command_named(["spin"], [0.3]) == ""
        run(w, 2.0)  # at rest at 0.3
        return w
    pts = [(0.0, [0.0], []), (1.0, [1.0], [])]
    w, once, now = wheel(), wheel(), wheel()
    start = w.t_ns + 300_000_000  # 0.3 s ahead
    assert w.command_trajectory(["spin"], pts, start) == "" and once.command_trajectory(["spin"], pts, start) == ""
    held = []
    run(w, 0.3, lambda w: held.append(w.q[0]))
    run(once, 0.3)
    run(now, 0.3)
    assert held == pytest.approx([0.3] * len(held), abs=1e-6) and now.t_ns == start
    assert now.command_trajectory(["spin"], pts) == ""  # unstamped, taken at the stamp's step
    seen = []
    for k in range(1500):
        if k == 400:  # a copy of the stamped message, late
            assert w.command_trajectory(["spin"], pts, start) == ""
        for x in (w, once, now):
            run(x, x.dt)
        seen.append((w.q[0], once.q[0], now.q[0]))
    seen = np.array(seen)
    assert (seen[:, 0] == seen[:, 1]).all()  # the copy: bit for bit the same motion
    assert np.abs(seen[:, 0] - seen[:, 2]).max() < 1e-6 and abs(seen[:, 0]).max() > 0.1  # started at the stamp
    assert w.q[0] == pytest.approx(1.0, abs=1e-3)
    wall = 1_795_000_000 * 10**9  # a stamp of the wall clock (a node without use_sim_time): refused, by name
    why = w.command_trajectory(["spin"], pts, wall)
    assert why.startswith("trajectory refused: header.stamp 1795000000.000 s") and "use_sim_time" in why, why


# ----------------------------------------------------------------------------- shapes and obstacles
BOX = """<robot name="box"><link name="box"><inertial><mass value="4.0"/>
  <inertia ixx="0.05" ixy="0" ixz="0" iyy="0.05" iyz="0" izz="0.05"/></inertial>
  <collision><origin xyz="0 0 0.05"/><geometry><box size="0.3 0.2 0.1"/></geometry></collision></link></robot>"""


def test_a_box_link_rests_on_its_four_corners_each_carrying_a_quarter_of_its_weight():
    w = world(BOX, floating_base=True, simulation_initial_positions=["root.z:=0.05"], simulation_friction=1.0)
    assert w.env.npoints == 8
    run(w, 2.0)
    F = w.forces[np.any(w.forces != 0, axis=1)]
    assert len(F) == 4
    assert F[:, 2] == pytest.approx(np.full(4, 4.0 * G / 4), rel=1e-3)
    bottom = w.env.world_points[np.any(w.forces != 0, axis=1)]
    assert sorted(np.round(bottom[:, :2], 6).tolist()) == [[-0.15, -0.1], [-0.15, 0.1], [0.15, -0.1], [0.15, 0.1]]
    assert abs(w.q[2]) < 1e-5 and np.abs(w.qd).max() < 1e-4  # 4 N per 1e7 N/m: a micrometre


SPHERE = """<robot name="ball"><link name="ball"><inertial><mass value="1.0"/>
  <inertia ixx="0.004" ixy="0" ixz="0" iyy="0.004" iyz="0" izz="0.004"/></inertial>
  <collision><geometry><sphere radius="0.1"/></geometry></collision></link></robot>"""


def test_a_sphere_rolls_along_a_table_and_falls_off_its_edge():
    """A solid sphere (I = 2/5 m r^2) on a table (top z = 0.5, edge at x = 0.5) with gravity tilted
    along x by gx = 1: rolling without slipping, x = 5/7 gx t^2 / 2; its centre passes the edge at t_e =
    sqrt(2 * 0.5 / (5/7 gx)) and from there it falls freely (no edge rounding is modelled), z = 0.6 -
    g (t - t_e)^2 / 2, until the floor."""
    gx = 1.0
    w = world(SPHERE, floating_base=True, gravity=[gx, 0.0, -G], simulation_friction=1.0,
              simulation_obstacles=[0.0, 0.0, 0.25, 1.0, 1.0, 0.5], simulation_initial_positions=["root.z:=0.6"])
    a = 5 / 7 * gx
    te = math.sqrt(2 * 0.5 / a)
    seen = []
    run(w, te + 0.25, lambda w: seen.append((w.t_ns * 1e-9, w.q[0], w.q[2])))
    seen = np.array(seen)
    on = seen[seen[:, 0] < te - 0.05]
    assert on[:, 1] == pytest.approx(a * on[:, 0] ** 2 / 2, abs=2e-3)
    assert np.abs(on[:, 2] - 0.6).max() < 1e-4
    off = seen[seen[:, 0] > te + 0.05]
    assert off[:, 2] == pytest.approx(0.6 - G * (off[:, 0] - te) ** 2 / 2, abs=0.01)
    run(w, 1.0)
    assert w.q[2] == pytest.approx(0.1, abs=1e-4)  # on the floor


def damped_arm7(q0, tau=0.2):
    """arm7's URDF with <dynamics damping> per joint of H_ii(q0) / tau (every joint's own motion decays in
    about tau) instead of its damping and Coulomb friction: one damping for all would leave the heavy
    joints swinging or the light wrist creeping for minutes (documented in docs/simulate.md)."""
    import re

    import dynamics_node as dn
    text = open(ns.ARM7).read()
    b = iter(np.diag(np.asarray(dn.mass_matrix(dn.load_model(text), q0))) / tau)
    return re.sub(r'<dynamics damping="[^"]*" friction="[^"]*"/>', lambda _: f'<dynamics damping="{next(b):.4g}"/>',
                  text)


def test_the_arm_released_at_rest_passes_through_nothing_and_comes_to_rest():
    """arm7 (every link a cylinder) released above a table: in 10 s no joint beyond its limit by 1 mrad,
    no collision point deeper than 2 mm in the floor or the table, and at the end at rest (every joint
    slower than 1e-3 rad/s), lying on the table."""
    q0 = np.array([0.0, 1.2, 0.0, 0.6, 0.0, 0.0, 0.0])
    w = world(damped_arm7(q0), friction=True, simulation_obstacles=[0.8, 0.0, 0.15, 0.6, 1.0, 0.3],
              simulation_initial_positions=["joint2=1.2", "joint4=0.6"])
    lo, hi = w.limits[w.jv, 0], w.limits[w.jv, 1]
    worst = {"limit": 0.0, "deep": 0.0}

    def check(w):
        qj = w.q[w.jq]
        worst["limit"] = max(worst["limit"], float(np.max(np.maximum(lo - qj, qj - hi))))
        worst["deep"] = max(worst["deep"], w.env.penetration(w.q))
    run(w, 10.0, check)
    assert worst["limit"] < 1e-3 and worst["deep"] < 2e-3, worst
    assert np.abs(w.qd).max() < 1e-3 and w.touching() >= 1
    assert all(k[0] == "b" for k, f in zip(w.env.keys, w.forces) if f.any())  # on the table, not the floor


def test_bad_test_bench_parameters_are_refused_by_name():
    from dynamics_node.errors import ConfigError
    from dynamics_node.ros.params.param_checks import validate
    for values, words in [({"simulation_obstacles": [0, 0, 0, 1, 1]}, "6 values per box"),
                          ({"simulation_obstacles": [0, 0, 0, 1, 0, 1]}, "must be > 0"),
                          ({"simulation_command_interface": "torque"}, "not effort, position or velocity"),
                          ({"simulation_pd_gains": [1.0]}, "kp kd pairs"),
                          ({"simulation_limit_restitution": 2.0}, "simulation_limit_restitution")]:
        with pytest.raises(ConfigError) as e:
            validate({"simulation": True, **values})
        assert words in str(e.value)
    with pytest.raises(ConfigError) as e:
        world(simulation_pd_gains=[1.0, 2.0, 3.0, 4.0])
    assert "expected 0, 2 or 14 values" in str(e.value)


def test_meshes_are_their_bounding_boxes_and_a_missing_mesh_falls_back_to_the_link_origin(tmp_path):
    """A binary STL of two triangles (vertices written by hand) scaled by 2 becomes the eight corners of
    its axis-aligned bounding box, with a note naming the link; a mesh file that is not there is said
    and its link has its origin as its one point; a capsule (cylinder + two spheres) has 16 rim points
    and two spheres."""
    import struct
    tris = [((0, 0, 0), (0.1, 0, 0), (0, 0.2, 0)), ((0, 0, -0.05), (0.1, 0.2, 0.3), (0, 0, 0))]
    data = b"\0" * 80 + struct.pack("<I", len(tris))
    for t in tris:
        data += struct.pack("<3f", 0, 0, 1) + b"".join(struct.pack("<3f", *v) for v in t) + b"\0\0"
    (tmp_path / "part.stl").write_bytes(data)
    link = ('<link name="{n}"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" '
            'izz="0.01"/></inertial>{c}</link><joint name="j{n}" type="revolute"><parent link="base_link"/>'
            '<child link="{n}"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>')
    mesh = '<collision><geometry><mesh filename="{f}" scale="2 2 2"/></geometry></collision>'
    cap = ('<collision><geometry><cylinder radius="0.05" length="0.2"/></geometry></collision>'
           '<collision><origin xyz="0 0 0.1"/><geometry><sphere radius="0.05"/></geometry></collision>'
           '<collision><origin xyz="0 0 -0.1"/><geometry><sphere radius="0.05"/></geometry></collision>')
    urdf = ('<robot name="m"><link name="base_link"/>' + link.format(n="a", c=mesh.format(f=tmp_path / "part.stl"))
            + link.format(n="b", c=mesh.format(f=tmp_path / "gone.stl")) + link.format(n="c", c=cap) + "</robot>")
    w = world(urdf)
    a = w.env.point_local[[k for k, n in enumerate(w.env.point_link) if n == "a"]]
    assert sorted(map(tuple, np.round(a, 6))) == sorted((x, y, z) for x in (0, 0.2) for y in (0, 0.4)
                                                         for z in (-0.1, 0.6))
    assert any("link 'a'" in n and "bounding box" in n for n in w.notes)
    assert any("link 'b'" in n and "gone.stl" in n and "cannot be read" in n for n in w.notes)
    b = w.env.point_local[[k for k, n in enumerate(w.env.point_link) if n == "b"]]
    assert b.tolist() == [[0.0, 0.0, 0.0]]
    assert w.env.point_link.count("c") == 16 and [s.link for s in w.env.spheres] == ["c", "c"]
    assert sorted(s.center[2] for s in w.env.spheres) == [-0.1, 0.1]


def test_arm7_position_commanded_reaches_its_targets_and_a_target_beyond_a_limit_stops_at_it():
    """Position interface on arm7 with the default gains (critically damped at 10 Hz) and gravity fed
    forward: after 3 s every joint is within 1 mrad of its commanded position (the loaded shoulder too); a target
    beyond joint4's limit is clipped to it, reported, and the joint rests there."""
    w = world(simulation_floor=[], effort_command_topic="/c", simulation_command_interface="position")
    target = np.array([0.5, 0.8, -0.4, -2.5, 0.3, 1.0, 0.2])
    assert w.command_array(target) == "" and "joint4" in w.commands.last_clip
    run(w, 3.0)
    lim4 = w.limits[w.index["joint4"]]
    expect = target.copy()
    expect[3] = lim4[0]
    assert np.abs(w.q[w.jq] - expect).max() < 1e-3 and np.abs(w.qd).max() < 1e-3


def test_diagnostics_warn_of_a_joint_over_its_velocity_limit_and_list_the_clipped_commands():
    """/diagnostics' `<name>: simulation` status (diagnostics.simulation_status) from a report of the
    simulated robot whose wheel spins over its <limit velocity> (5 rad/s): WARN naming it."""
    from diagnostic_msgs.msg import DiagnosticStatus

    from dynamics_node.ros.diagnostics import simulation_status

    class Stream:
        error, restarts = "", 0

        def alive(self):
            return True

    w = world(WHEEL.replace("JTYPE", "continuous"), simulation_floor=[], effort_command_topic="/c")
    w.command_array([100.0])
    run(w, 0.05)  # 100 N m / 0.5 kg m^2 for 50 ms: 10 rad/s
    assert w.qd[0] > 5.0 and w.over_velocity() == ["spin"]
    sim = {"running": True, "time": w.t_ns * 1e-9, "over_velocity_limit": ", ".join(w.over_velocity()),
           "last_clip": w.commands.last_clip, "clipped": w.commands.clipped}
    s = simulation_status("n", "hw", {"simulation": sim, "errors": 0}, Stream(), DiagnosticStatus)
    values = {kv.key: kv.value for kv in s.values}
    assert s.level == DiagnosticStatus.WARN and "spin" in s.message and values["over_velocity_limit"] == "spin"
    sim["over_velocity_limit"] = ""
    assert simulation_status("n", "hw", {"simulation": sim, "errors": 0}, Stream(), DiagnosticStatus).level == \
        DiagnosticStatus.OK
