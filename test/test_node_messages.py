"""Refusals at the ROS edge, in-process: a 100,000-character name in any request field
comes back clipped with its length, whatever service is asked; parameters that echo values do the
same; a joint state that names no joint of the model (empty, or other robots' joints only) is
dropped and counted, and no torque is published for it."""
from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

LONG = "j" * 100_000
LIMIT = 2500
J = [f"joint{i}" for i in range(1, 8)]


def _state(path=ns.ARM7):
    from dynamics_node.ros.model_state import build_state, load, payload_table
    from dynamics_node.ros.params.param_checks import validate
    c = validate({"urdf_path": str(path)})
    return build_state(load(c), c, payload_table(c, {})[0])


def _call(leaf, req):
    import dynamics_interfaces.srv as srv
    from dynamics_node.ros.diagnostics import Stats
    from dynamics_node.ros.services import SERVICES, serve
    s = SERVICES[leaf]
    ctx = SimpleNamespace(state=_state(), log=SimpleNamespace(error=print), latest_q=lambda st: np.zeros(7),
                          set_payload=lambda *a: "ok")
    return serve(ctx, leaf, s.handler, Stats())(req, getattr(srv, s.type_name).Response())


def _requests():
    import dynamics_interfaces.srv as srv
    from geometry_msgs.msg import Point, WrenchStamped
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
    q = [0.0] * 7
    w = WrenchStamped()
    w.header.frame_id = LONG
    named = [LONG] + J[1:]
    traj = JointTrajectory(joint_names=named, points=[JointTrajectoryPoint(positions=q, velocities=q,
                                                                           accelerations=q, effort=q)])
    return {
        "inverse_dynamics name": ("inverse_dynamics", srv.InverseDynamics.Request(name=named, position=q)),
        "inverse_dynamics wrench frame": ("inverse_dynamics", srv.InverseDynamics.Request(position=q,
                                                                                          external_wrenches=[w])),
        "forward_dynamics name": ("forward_dynamics", srv.ForwardDynamics.Request(name=named, position=q)),
        "hybrid forward_joints": ("hybrid_dynamics", srv.HybridDynamics.Request(position=q, forward_joints=[LONG])),
        "gravity_compensation name": ("gravity_compensation", srv.GravityCompensation.Request(name=named, position=q)),
        "mass_matrix name": ("mass_matrix", srv.MassMatrix.Request(name=named, position=q)),
        "jacobian link": ("jacobian", srv.Jacobian.Request(position=q, link=LONG)),
        "jacobian axes": ("jacobian", srv.Jacobian.Request(position=q, link="tool0", axes=LONG)),
        "set_payload link": ("set_payload", srv.SetPayload.Request(link=LONG, mass=1.0)),
        "trajectory joint_names": ("trajectory_inverse_dynamics",
                                   srv.TrajectoryInverseDynamics.Request(trajectory=traj)),
        "identify_payload link": ("identify_payload", srv.IdentifyPayload.Request(link=LONG, samples=traj)),
        "model_terms links": ("model_terms", srv.ModelTerms.Request(position=q, links=[LONG], points=[Point()])),
        "contact_dynamics contact link": ("contact_dynamics", srv.ContactDynamics.Request(position=q,
                                                                                          contacts=[_contact()])),
        "impact contact link": ("impact", srv.Impact.Request(position=q, contacts=[_contact()])),
    }


def _contact():
    from dynamics_interfaces.msg import Contact
    return Contact(link=LONG)


@pytest.mark.parametrize("what", ["inverse_dynamics name", "inverse_dynamics wrench frame", "forward_dynamics name",
                                  "hybrid forward_joints", "gravity_compensation name", "mass_matrix name",
                                  "jacobian link", "jacobian axes", "set_payload link", "trajectory joint_names",
                                  "identify_payload link", "model_terms links", "contact_dynamics contact link",
                                  "impact contact link"])
def test_a_long_name_in_a_request_comes_back_clipped(what):
    leaf, req = _requests()[what]
    res = _call(leaf, req)
    assert not res.success
    assert len(res.message) < LIMIT, f"{what}: {len(res.message)} characters"
    assert re.search(r"\(1000\d\d characters", res.message), res.message


@pytest.mark.parametrize("values", [
    {"urdf_path": LONG}, {"joint_states_topic": LONG}, {"effort_command_topic": "/a/" + LONG},
    {"wrench_link": LONG}, {"payload.link": LONG, "payload.mass": 1.0}, {"xacro_args": [LONG]},
    {"model_terms_links": [LONG]}, {"simulation": True, "simulation_contact_links": [LONG]},
    {"simulation": True, "simulation_initial_positions": [LONG + "=1.0"]},
    {"simulation": True, "simulation_initial_positions": [LONG]}])
def test_a_long_parameter_value_is_clipped_in_the_refusal(values):
    from dynamics_node.ros.model_state import build_state, load, payload_table
    from dynamics_node.errors import ConfigError
    from dynamics_node.ros.params.param_checks import validate
    with pytest.raises(ConfigError) as e:
        c = validate({"urdf_path": str(ns.ARM7), **values})
        build_state(load(c), c, payload_table(c, {})[0])
    assert len(str(e.value)) < LIMIT and re.search(r"\(1000\d\d characters", str(e.value)), str(e.value)[:300]


def test_a_joint_state_naming_no_model_joint_is_dropped_and_counted():
    import test_node_observer_inprocess as ip
    s, node, log, st, c = ip.make()
    msg = ns.joint_state(J, np.zeros(7), np.zeros(7), stamp_ns=1_000_000_000)
    s.on_joint_state(msg)                                  # a full state: answered
    assert len(node.of("~/gravity_torques")) == 1
    for names in ([], ["other_robot_joint"], [LONG, "x"]):
        s.on_joint_state(ns.joint_state(names, np.zeros(len(names)), stamp_ns=1_001_000_000))
    assert len(node.of("~/gravity_torques")) == 1          # nothing answered for them
    rep = s.report()
    assert rep["without_model_joints"] == 3 and rep["dropped"] == 3, rep
    assert "naming no joint of the model" in rep["last_problem"] and len(rep["last_problem"]) < 500
    s.on_joint_state(ns.joint_state(J[:3], np.zeros(3), stamp_ns=1_002_000_000))   # some joints: answered
    assert len(node.of("~/gravity_torques")) == 2
