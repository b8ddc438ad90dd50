"""A core refusal over ROS names the request's own field (conversions.request_fields): a velocity entry out
of range is 'velocity[c]' with c its index in the request's joint order, never the library's 'qd[i]'; effort,
acceleration and an external wrench likewise. In-process through services.serve (the node's callback); the
entry, its index and joint are the ones each test puts out of range."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

SHUFFLED = ["joint3", "joint1", "joint6", "joint2", "joint7", "joint5", "joint4"]
Q = [0.3, -0.7, 0.4, -1.3, 0.5, 0.9, -0.6]
CORE_NAMES = re.compile(r"\b(q|qd|qdd|tau|f_ext)\[")


@pytest.fixture(scope="module")
def st():
    from dynamics_node.ros.model_state import build_state, load, payload_table
    from dynamics_node.ros.params.param_checks import validate
    c = validate({"urdf_path": str(ns.ARM7)})
    return build_state(load(c), c, payload_table(c, {})[0])


def call(st, leaf, req):
    from dynamics_node.ros.diagnostics import Stats
    from dynamics_node.ros.services import SERVICES, serve
    ctx = SimpleNamespace(state=st, log=SimpleNamespace(error=print))
    res = type(req).__qualname__.split(".")[0]
    import dynamics_interfaces.srv as srv
    return serve(ctx, leaf, SERVICES[leaf].handler, Stats())(req, getattr(srv, res.replace("_Request", "")).Response())


def big(c, x, n=7):
    v = [0.1] * n
    v[c] = x
    return v


@pytest.mark.parametrize("leaf, field, c, x", [
    ("forward_dynamics", "velocity", 5, 1e160), ("forward_dynamics", "effort", 5, 1.7e308),
    ("inverse_dynamics", "velocity", 5, 1e160), ("inverse_dynamics", "acceleration", 3, 1.7e308),
    ("hybrid_dynamics", "velocity", 5, 1e160), ("linearized_dynamics", "velocity", 5, 1e160),
    ("linearized_dynamics", "effort", 5, 1.7e308),
])
def test_refusal_names_the_request_field(st, leaf, field, c, x):
    """c: the entry's index in the request (SHUFFLED order); an acceleration overflows on a heavy joint."""
    import dynamics_interfaces.srv as srv
    kind = {"forward_dynamics": "ForwardDynamics", "inverse_dynamics": "InverseDynamics",
            "hybrid_dynamics": "HybridDynamics", "linearized_dynamics": "LinearizedDynamics"}[leaf]
    req = getattr(srv, kind).Request(name=SHUFFLED, position=Q)
    setattr(req, field, big(c, x))
    if leaf == "hybrid_dynamics":
        req.forward_joints = ["joint2"]
    if leaf == "linearized_dynamics":
        req.dt = 0.01
    res = call(st, leaf, req)
    assert not res.success
    assert f"{field}[{c}] (joint '{SHUFFLED[c]}') = {x:.3g} is out of range" in res.message, res.message
    assert not CORE_NAMES.search(res.message), res.message


def test_external_wrench_is_named_as_sent(st):
    from dynamics_interfaces.srv import InverseDynamics
    from geometry_msgs.msg import WrenchStamped
    w0, w1 = WrenchStamped(), WrenchStamped()
    w0.header.frame_id, w1.header.frame_id = "link3", "tool0"
    w1.wrench.force.x = w1.wrench.force.z = 1.7e308   # times the lever arms: beyond float64
    res = call(st, "inverse_dynamics", InverseDynamics.Request(position=Q, external_wrenches=[w0, w1]))
    assert not res.success
    assert "external_wrenches[1].wrench.force.x = 1.7e+308 is out of range" in res.message, res.message


def test_request_fields_maps_only_what_the_request_has(st):
    """A Jacobian's point[1] is point.y; a request without that field keeps the library's name; q[0:4]
    (a quaternion's slice) and a refusal naming no entry pass unchanged."""
    from dynamics_interfaces.srv import Jacobian, MassMatrix
    from dynamics_node.ros.conversions import request_fields
    msg = "jacobian: point[1] = 1e+200 is out of range: x"
    assert request_fields(msg, st.conv, Jacobian.Request()) == "jacobian: point.y = 1e+200 is out of range: x"
    assert request_fields(msg, st.conv, MassMatrix.Request()) == msg
    assert request_fields("q[3] (joint 'joint4') = 1e+20", st.conv, MassMatrix.Request(name=SHUFFLED)) \
        == "position[6] (joint 'joint4') = 1e+20"
    for same in ("q[0:4] (joint 'root_joint') is zero", "no entry named here"):
        assert request_fields(same, st.conv, MassMatrix.Request()) == same
