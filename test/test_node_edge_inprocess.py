"""The ROS edge's pieces in-process, without a node: parameters, model state, joint-state merging,
command saturation, service handlers (dynamics_node/ros/)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

PANDA = ns.erd("panda_description/urdf/panda.urdf")
UR5 = ns.erd("ur_description/urdf/ur5_robot.urdf")
FOURBAR = ns.REPO / "urdf" / "fourbar.urdf"


def cfg(**values):
    from dynamics_node.ros.params.param_checks import validate
    return validate(values)


# ------------------------------------------------------------------------------------ params
def test_defaults_validate_and_every_parameter_has_a_descriptor_with_its_range():
    from dynamics_node.ros.params.node_params import PARAMETERS, defaults, descriptor
    from dynamics_node.ros.params.param_checks import validate
    c = validate(defaults())
    assert c.gravity == (0.0, 0.0, -9.81) and c.command_joints == () and c.effort_limit_scale == 1.0
    for name, p in PARAMETERS.items():
        d = descriptor(name)
        assert d.name == name and d.description
        if p.range is not None and p.type == "double":
            r = d.floating_point_range[0]
            assert (r.from_value, r.to_value) == p.range


@pytest.mark.parametrize("values, words", [
    ({"gravity": [0.0, 0.0, -1e308]}, ["gravity", "100"]),
    ({"gravity": [0.0, 0.0]}, ["gravity", "3 values"]),
    ({"markers_rate": 1e-12}, ["markers_rate", "0.01"]),
    ({"markers_rate": 101.0}, ["markers_rate"]),
    ({"effort_limit_scale": 0.0}, ["effort_limit_scale"]),
    ({"effort_limit_scale": 1.5}, ["effort_limit_scale"]),
    ({"payload.center_of_mass": [1e200, 0.0, 0.0]}, ["payload.center_of_mass", "10 m"]),
    ({"payload.mass": -1.0}, ["payload.mass"]),
    ({"payload.inertia": [1e9, 0, 0, 1, 0, 1]}, ["payload.inertia"]),
    ({"armature": [-0.1]}, ["armature"]),
    ({"stream_thread_priority": 100}, ["stream_thread_priority"]),
    ({"joint_states_topic": "bad topic!"}, ["joint_states_topic"]),
    ({"xacro_args": ["prefix"]}, ["xacro_args[0]", "name:=value"]),
    ({"command_joints": ["a", "b", "a"]}, ["command_joints[2]", "twice"]),
    ({"robot_description": "robot.urdf"}, ["robot_description", "urdf_path"]),
])
def test_implausible_or_malformed_values_are_refused_by_name(values, words):
    from dynamics_node.errors import ConfigError
    with pytest.raises(ConfigError) as e:
        cfg(**values)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_xacro_args_become_a_dict():
    assert cfg(xacro_args=["prefix:=left_", "hand:=true"]).xacro_args == {"prefix": "left_", "hand": "true"}


# ------------------------------------------------------------------------------------ model state
def state(path, **values):
    from dynamics_node.ros.model_state import build_state, load, payload_table
    c = cfg(urdf_path=str(path), **values)
    payloads, _ = payload_table(c, {})
    return build_state(load(c), c, payloads), c


def test_inert_settings_are_not_checked_against_the_model():
    # a payload of mass 0 names no link that must exist; command_joints matter only with a topic
    st, _ = state(PANDA, **{"payload.link": "tool0", "payload.mass": 0.0},
                  command_joints=["joint1", "joint2"])
    assert st.payloads == {} and st.command_names == ()


def test_live_settings_are_checked_and_say_what_to_do():
    from dynamics_node.errors import ConfigError
    with pytest.raises(ConfigError,
                       match=r"payload.link: the model 'panda' has no link 'tool0'.*set payload.mass to 0"):
        state(PANDA, **{"payload.link": "tool0", "payload.mass": 1.0})
    with pytest.raises(ConfigError, match=r"command_joints\[0\]: 'joint1' is not one of the joints"):
        state(PANDA, effort_command_topic="/cmd", command_joints=["joint1"])


def test_empty_command_joints_mean_every_torque_joint_in_model_order_with_urdf_limits():
    import dynamics_node as dn
    st, c = state(PANDA, effort_command_topic="/effort_controller/commands", effort_limit_scale=0.5)
    m = dn.load_model(str(PANDA))
    assert st.command_names == m.joint_names == st.torque_names
    # the <limit effort> of each joint, read from the XML here (87 N m on joints 1-4, 12 on 5-7, 100 N
    # on the finger; the mimic follower is no coordinate of the model, so not in the command)
    import xml.etree.ElementTree as ET
    effort = {j.get("name"): float(j.find("limit").get("effort"))
              for j in ET.parse(PANDA).getroot().iter("joint") if j.find("limit") is not None}
    for k, j in enumerate(st.command_names):
        assert st.command_limit[k] == pytest.approx(0.5 * effort[j]), j
    assert effort["panda_joint1"] == 87.0 and effort["panda_joint7"] == 12.0


def test_start_summary_names_robot_joints_mass_and_order():
    from dynamics_node.ros.model_state import summary_lines
    st, c = state(UR5)
    text = "\n".join(summary_lines(st, c))
    assert "robot 'ur5'" in text and "6 joints" in text and "fixed base" in text and "root link 'world'" in text
    assert "shoulder_pan_joint, shoulder_lift_joint, elbow_joint, wrist_1_joint, wrist_2_joint, wrist_3_joint" in text
    assert f"{st.model.total_mass():.3f} kg" in text


def test_no_source_means_wait_for_the_topic():
    from dynamics_node.ros.model_state import load
    c = cfg()
    assert load(c) is None
    m = load(c, topic_text=UR5.read_text(), topic_name="/robot_description").model
    assert m.name == "ur5"


# ------------------------------------------------------------------------------------ merging
class Msg(SimpleNamespace):
    pass


def js(names, pos, vel=(), eff=()):
    return Msg(name=list(names), position=[float(x) for x in pos], velocity=[float(x) for x in vel],
               effort=[float(x) for x in eff])


def test_split_joint_states_are_merged_by_name_and_need_every_joint_fresh():
    from dynamics_node.ros.joint_states import JointStateMerger
    st, _ = state(PANDA)
    mg = JointStateMerger(st)
    arm = [f"panda_joint{i}" for i in range(1, 8)]
    q_arm = np.linspace(-0.5, 0.5, 7)
    assert mg.update(js(arm + ["not_in_model"], list(q_arm) + [9.0]), now=10.0) == []
    assert mg.configuration(10.0, 0.5) is None              # the finger is missing
    assert mg.stale(10.0, 0.5) == ["panda_finger_joint1"]
    mg.update(js(["panda_finger_joint1"], [0.02]), now=10.1)
    q = mg.configuration(10.2, 0.5)
    expected = np.r_[q_arm, 0.02]
    np.testing.assert_array_equal(q[[st.model.q_slice(j).start for j in arm + ["panda_finger_joint1"]]], expected)
    assert mg.configuration(10.55, 0.5) is None              # the arm's values are now too old
    assert mg.stale(10.55, 0.5) == arm


def test_a_joint_listed_twice_is_refused_and_a_bad_effort_length_reported():
    from dynamics_node.errors import InputError
    from dynamics_node.ros.joint_states import JointStateMerger
    st, _ = state(UR5)
    mg = JointStateMerger(st)
    names = list(st.model.joint_names)
    with pytest.raises(InputError, match="'elbow_joint' is listed twice"):
        mg.update(js(names + ["elbow_joint"], [0.0] * 6 + [1.0]), now=1.0)
    assert mg.configuration(1.0, 0.5) is None               # nothing of it was used
    problems = mg.update(js(names, [0.1] * 6, eff=[1.0] * 3), now=1.0)
    assert problems and "6 names but 3 efforts" in problems[0] and mg.effort_length_errors == 1
    assert mg.configuration(1.0, 0.5) is not None            # positions still used


def test_a_nan_drops_only_what_it_would_corrupt():
    from dynamics_node.ros.joint_states import JointStateMerger
    st, _ = state(UR5)
    mg = JointStateMerger(st)
    names = list(st.model.joint_names)
    mg.update(js(names, [0.1] * 6), now=1.0)
    p = mg.update(js(names, [0.2] * 6, vel=[math.nan] + [0.0] * 5), now=2.0)
    assert "velocity of shoulder_pan_joint" in p[0]
    assert mg.configuration(2.0, 0.5) is not None            # a NaN velocity: gravity still computed
    p = mg.update(js(names, [math.nan] + [0.3] * 5), now=3.0)
    assert "position of shoulder_pan_joint" in p[0]
    assert mg.configuration(3.0, 0.5) is None                # that joint is now stale, the rest fresh
    assert mg.stale(3.0, 0.5) == ["shoulder_pan_joint"]


def test_closed_loop_joint_states_with_only_the_actuated_joints_are_completed():
    """The four-bar reports its crank only: the coupler and rocker are solved from the closure,
    the first time from the neutral pose, then from the last solution."""
    import dynamics_node as dn
    from dynamics_node.ros.joint_states import JointStateMerger
    from dynamics_node.ros.stream import gravity_effort
    st, _ = state(FOURBAR)
    m = st.model
    assert st.loops and st.torque_names == ("crank_joint",)
    mg = JointStateMerger(st)
    z = np.zeros(m.nv)
    q_prev = None
    for t, crank in enumerate((0.7, 0.75, 0.8)):
        start = np.asarray(m.neutral(), float)
        start[m.q_slice("crank_joint")] = crank
        q_ref = dn.close_loops(m, start, ["crank_joint"])
        mg.update(js(["crank_joint"], [crank]), now=float(t))
        q = mg.configuration(float(t), 0.5)
        assert q is not None and mg.closure_residual < 1e-9
        assert q[m.q_slice("crank_joint")][0] == crank
        assert np.abs(dn.algorithms.loops.loop_position_errors(m, q)).max() < 1e-9   # closed
        if t == 0:  # from the neutral pose: the solution close_loops finds from there (up to turns)
            np.testing.assert_allclose(np.remainder(q - q_ref + np.pi, 2 * np.pi) - np.pi, 0.0, atol=1e-8)
        else:  # from the last solution: the same branch, within a small step (no jumps of turns)
            assert np.all(np.abs(q - q_prev) < 0.5), (q, q_prev)
        q_prev = q.copy()
        _, tau = gravity_effort(st, q)
        ref = np.asarray(dn.closed_loop_inverse_dynamics(m, q, z, z))[[m.v_slice("crank_joint").start]]
        np.testing.assert_allclose(tau, ref, rtol=1e-7, atol=1e-9)


# ------------------------------------------------------------------------------------ saturation
def test_effort_commands_are_saturated_at_the_limits_once_per_episode():
    from dynamics_node.ros.stream import Saturation
    st = SimpleNamespace(command_names=("a", "b"), command_limit=np.array([10.0, math.inf]))
    logged = []
    log = SimpleNamespace(warning=logged.append)
    s = Saturation(st)
    np.testing.assert_array_equal(s.apply(np.array([5.0, 1e6]), log), [5.0, 1e6])
    np.testing.assert_array_equal(s.apply(np.array([-25.0, 3.0]), log), [-10.0, 3.0])
    np.testing.assert_array_equal(s.apply(np.array([-30.0, 3.0]), log), [-10.0, 3.0])
    assert len(logged) == 1 and "'a'" in logged[0] and "-25" in logged[0] and "-10" in logged[0]
    assert s.active == {"a"} and s.last["a"] == (-30.0, -10.0)
    s.apply(np.array([1.0, 0.0]), log)
    assert s.active == set()
    s.apply(np.array([11.0, 0.0]), log)                      # a new episode: said again
    assert len(logged) == 2


# ------------------------------------------------------------------------------------ services
def test_closed_loop_inverse_dynamics_labels_efforts_by_name_in_the_callers_order():
    """Every joint actuated, named in an order other than the model's: each effort must come back
    under its own joint's name (the old node labelled model-order efforts with the caller's names)."""
    import dynamics_node as dn
    from dynamics_interfaces.srv import ClosedLoopInverseDynamics
    from dynamics_node.ros.services import closed_loop_inverse_dynamics
    st, _ = state(FOURBAR)
    m = st.model
    start = np.asarray(m.neutral(), float)
    start[m.q_slice("crank_joint")] = 0.7
    q = dn.close_loops(m, start, ["crank_joint"])
    req = ClosedLoopInverseDynamics.Request()
    req.position = list(q)
    req.actuated = list(reversed(m.joint_names))
    req.acceleration = [0.3, -0.2, 0.1]  # any: the efforts are what makes it; their labels are checked
    res = ClosedLoopInverseDynamics.Response()
    closed_loop_inverse_dynamics(None, st, req, res)
    z = np.zeros(m.nv)
    tau = np.asarray(dn.closed_loop_inverse_dynamics(m, q, z, np.array(req.acceleration), actuated=list(m.joint_names)))
    assert list(res.name) == req.actuated and len(set(np.round(tau, 9))) == 3
    for name, e in zip(res.name, res.effort):
        assert e == pytest.approx(tau[m.v_slice(name).start], abs=1e-12), name


def test_positions_beyond_the_urdf_limits_are_named():
    import xml.etree.ElementTree as ET

    from dynamics_node.ros.diagnostics import LIMIT_TOLERANCE, outside_limits
    st, _ = state(PANDA)
    m = st.model
    lim = {j.get("name"): (float(j.find("limit").get("lower")), float(j.find("limit").get("upper")))
           for j in ET.parse(PANDA).getroot().iter("joint") if j.find("limit") is not None}
    q = np.array([np.mean(lim[j]) for j in m.joint_names])
    assert outside_limits(st, q) == []
    k4, k7 = m.q_slice("panda_joint4").start, m.q_slice("panda_joint7").start
    q[k4] = lim["panda_joint4"][1] + 0.5 * LIMIT_TOLERANCE        # within the tolerance: fine
    q[k7] = lim["panda_joint7"][0] - 0.1
    out = outside_limits(st, q)
    assert len(out) == 1 and out[0].startswith("panda_joint7:") and "-2.8973" in out[0]
