"""The contact services: ~/contact_dynamics and ~/impact.

In-process (the handlers with real request messages, through services.serve as the node calls
them): the answers satisfy the physics they claim, checked with other functions of the library
(mass matrix, bias forces, Jacobians and their derivatives: not the contact solver), in the
caller's joint order; every bad contact field is refused naming it. Then the node as a subprocess:
both services answer, and a bad request leaves the node serving.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

Q = np.array([0.3, 0.9, -0.2, -1.4, 0.4, 0.8, 0.1])
ORDER = [6, 2, 0, 5, 1, 4, 3]  # the caller's joint order: a permutation of the model's


@pytest.fixture(scope="module")
def st():
    from dynamics_node.ros.model_state import build_state, load
    from dynamics_node.ros.params.param_checks import validate
    c = validate({"urdf_path": str(ns.ARM7)})
    return build_state(load(c), c, {})


def _contact(link, point=(0.0, 0.0, 0.0), normal=(0.0, 0.0, 0.0), mu=0.0):
    from dynamics_interfaces.msg import Contact
    c = Contact(link=link, friction=float(mu))
    c.point.x, c.point.y, c.point.z = (float(x) for x in point)
    c.normal.x, c.normal.y, c.normal.z = (float(x) for x in normal)
    return c


def _call(st, leaf, req):
    from dynamics_node.ros.diagnostics import Stats
    from dynamics_node.ros.services import SERVICES, serve
    from types import SimpleNamespace
    import dynamics_interfaces.srv as srv
    ctx = SimpleNamespace(state=st, log=None)
    s = SERVICES[leaf]
    return serve(ctx, leaf, s.handler, Stats())(req, getattr(srv, s.type_name).Response())


def _model_order(st, values):
    """Caller-order values (ORDER) back in the model's order."""
    out = np.empty(len(values))
    out[ORDER] = values
    return out


def _point_terms(m, q, qd, link, point):
    import dynamics_node as dn
    J = np.asarray(dn.jacobian(m, q, link, point=point))
    Jd = np.asarray(dn.jacobian_derivative(m, q, qd, link, point=point))
    return J, Jd


def test_contact_dynamics_answer_satisfies_the_equations_of_motion_and_the_contact(st):
    """Two sticking contacts (mu = inf): H qdd + C = tau + sum J_i^T f_i, and each point's classical
    acceleration J qdd + dJ/dt qd (+ omega x v, in jacobian_derivative's world-point form) is zero; the
    forces push (f . n >= 0). In the caller's joint order."""
    import dynamics_node as dn
    from dynamics_interfaces.srv import ContactDynamics
    m = st.model
    names = [m.joint_names[i] for i in ORDER]
    qd = np.array([0.2, -0.1, 0.3, 0.0, 0.1, -0.2, 0.05])
    tau = np.array([1.0, -2.0, 0.5, 3.0, 0.0, 0.2, -0.1])
    pts = {"link4": (0.0, 0.0, 0.05), "tool0": (0.0, 0.0, 0.0)}
    req = ContactDynamics.Request(name=names, position=Q[ORDER].tolist(), velocity=qd[ORDER].tolist(),
                                  effort=tau[ORDER].tolist(),
                                  contacts=[_contact(k, p, (0.0, 0.0, 1.0), math.inf) for k, p in pts.items()])
    res = _call(st, "contact_dynamics", req)
    assert res.success, res.message
    assert list(res.name) == names and list(res.contact_links) == list(pts)
    assert list(res.contact_states) == ["sticking", "sticking"]
    qdd = _model_order(st, res.acceleration)
    F = np.array([[v.x, v.y, v.z] for v in res.contact_forces])
    H = np.asarray(dn.mass_matrix(m, Q))
    C = np.asarray(dn.inverse_dynamics(m, Q, qd, np.zeros(7)))
    lhs = H @ qdd + C
    rhs = tau.copy()
    for (link, p), f in zip(pts.items(), F):
        J, Jd = _point_terms(m, Q, qd, link, p)
        rhs += J[:3].T @ f
        a = J[:3] @ qdd + Jd[:3] @ qd
        assert np.abs(a).max() < 1e-8 * (1 + np.abs(J[:3] @ qdd).max()), a
    assert np.allclose(lhs, rhs, rtol=1e-9, atol=1e-8 * np.abs(lhs).max())


def test_impact_answer_stops_the_point_and_changes_momentum_by_the_impulse(st):
    """A plastic impact (e = 0) of a sticking contact: the point's velocity after it is zero and
    H (qd+ - qd-) = J^T impulse; with e = 1 the normal velocity is reversed."""
    import dynamics_node as dn
    from dynamics_interfaces.srv import Impact
    m = st.model
    names = [m.joint_names[i] for i in ORDER]
    J, _ = _point_terms(m, Q, np.zeros(7), "tool0", (0.0, 0.0, 0.0))
    qd = -np.linalg.pinv(J[:3]) @ np.array([0.1, 0.0, 0.5])  # the tool moving down (and sideways)
    assert (J[:3] @ qd)[2] < -0.4
    H = np.asarray(dn.mass_matrix(m, Q))
    for e in (0.0, 1.0):
        req = Impact.Request(
            name=names, position=Q[ORDER].tolist(), velocity=qd[ORDER].tolist(),
            contacts=[_contact("tool0", normal=(0.0, 0.0, 2.0), mu=math.inf)], restitution=e)
        res = _call(st, "impact", req)
        assert res.success, res.message
        assert list(res.name) == names and list(res.contact_links) == ["tool0"]
        qp = _model_order(st, res.velocity)
        p = np.array([[v.x, v.y, v.z] for v in res.contact_impulses])[0]
        assert np.allclose(H @ (qp - qd), J[:3].T @ p, rtol=1e-9, atol=1e-10)
        v_after, v_before = J[:3] @ qp, J[:3] @ qd
        assert abs(v_after[2] + e * v_before[2]) < 1e-9, (e, v_after, v_before)  # Newton on the normal
        # sticking (mu = inf): the tangential velocity stops (Newton), or is reversed times e where that
        # would gain energy (Moreau's law, dn.impact's docstring)
        assert (np.allclose(v_after[:2], 0.0, atol=1e-9) or np.allclose(v_after[:2], -e * v_before[:2], atol=1e-9))
        assert p[2] > 0.0


@pytest.mark.parametrize("leaf", ["contact_dynamics", "impact"])
@pytest.mark.parametrize("contact, words", [
    (("link4", "nolink"), ["contacts[1].link", "unknown link 'nolink'"]),
    (("base_link",), ["contacts[0].link", "fixed to the world"]),
    (("",), ["contacts[0].link", "empty link name"]),
    ((("link4", (0.0, math.nan, 0.0)),), ["contacts[0].point[1] (y)", "finite"]),
    ((("link4", (0.0, 0.0, 0.0), (0.0, 0.0, math.inf)),), ["contacts[0].normal[2] (z)", "finite"]),
    ((("link4", (0.0, 0.0, 0.0), (1e-300, 0.0, 0.0)),), ["contacts[0].normal", "non-zero"]),
    ((("link4", (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), -0.5),), ["contacts[0].friction", ">= 0"]),
    ((("link4", (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), math.nan),), ["contacts[0].friction"]),
])
def test_bad_contacts_are_refused_naming_the_field(st, leaf, contact, words):
    import dynamics_interfaces.srv as srv
    cs = [_contact(*(c if isinstance(c, tuple) else (c,))) for c in contact]
    req = getattr(srv, "ContactDynamics" if leaf == "contact_dynamics" else "Impact").Request(
        position=Q.tolist(), contacts=cs)
    res = _call(st, leaf, req)
    assert not res.success
    for w in words:
        assert w in res.message, res.message
    assert len(res.name) == 0 and len(res.contact_states) == 0  # no partial answer


@pytest.mark.parametrize("e", [-0.1, 1.5, math.nan])
def test_restitution_outside_0_1_is_refused(st, e):
    from dynamics_interfaces.srv import Impact
    res = _call(st, "impact", Impact.Request(position=Q.tolist(), contacts=[_contact("tool0")], restitution=e))
    assert not res.success and "restitution" in res.message, res.message


def test_no_contacts_is_plain_forward_dynamics_and_joint_errors_name_the_field(st):
    import dynamics_node as dn
    from dynamics_interfaces.srv import ContactDynamics
    res = _call(st, "contact_dynamics", ContactDynamics.Request(position=Q.tolist()))
    assert res.success and len(res.contact_forces) == 0
    assert np.allclose(res.acceleration, dn.forward_dynamics(st.model, Q, np.zeros(7), np.zeros(7)), rtol=1e-9)
    res = _call(st, "contact_dynamics", ContactDynamics.Request(position=Q[:5].tolist()))
    assert not res.success and res.message.startswith("position: expected 7 values"), res.message


# ------------------------------------------------------------------------------------ the node
@pytest.fixture(scope="module")
def node():
    yield from ns.serve_one("contact_srv", {"urdf_path": str(ns.ARM7)})


def test_the_node_serves_both_and_keeps_serving_after_a_bad_request(node):
    from dynamics_interfaces.srv import ContactDynamics, Impact
    c = ns.ros()
    bad = c.call(ContactDynamics, node.path("contact_dynamics"),
                 ContactDynamics.Request(position=Q.tolist(), contacts=[_contact("tool0"), _contact("x")]))
    assert not bad.success and bad.message.startswith("contacts[1].link: unknown link 'x'"), bad.message
    good = c.call(ContactDynamics, node.path("contact_dynamics"),
                  ContactDynamics.Request(position=Q.tolist(), contacts=[_contact("tool0", mu=0.5)]))
    assert good.success, good.message
    assert list(good.contact_links) == ["tool0"] and good.contact_states[0] in ("sticking", "sliding", "separating")
    imp = c.call(Impact, node.path("impact"), Impact.Request(position=Q.tolist(), velocity=[0.0, 0.5] + [0.0] * 5,
                                                             contacts=[_contact("tool0", mu=0.5)]))
    assert imp.success and len(imp.velocity) == 7, imp.message
    assert node.alive()


def test_dynamics_cli_calls_both_as_the_readme_shows(node):
    import subprocess
    import sys

    def cli(*args):
        p = subprocess.run([sys.executable, "-m", "dynamics_node.cli.dynamics_cli", "--node", "/contact_srv",
                            "--timeout", "60", *args],  # its default 10 s is a user's, on an idle machine
                           cwd=str(ns.REPO), env=ns.node_env(), capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout + p.stderr

    q = [str(x) for x in Q]
    rc, out = cli("contact_dynamics", "-q", *q, "-c", "tool0", "0", "0", "0", "0", "0", "1", "inf")
    assert rc == 0 and "contact_forces:" in out and "- tool0, sticking: [" in out, out
    rc, out = cli("impact", "-q", *q, "-v", "0", "0.5", "0", "0", "0", "0", "0", "--restitution", "0.5",
                  "-c", "tool0", "0", "0", "0", "0", "0", "1", "0.8")
    assert rc == 0 and "velocity: [" in out and "contact_impulses:" in out, out
    rc, out = cli("impact", "-q", *q, "-c", "nolink", "0", "0", "0", "0", "0", "1", "0.8")
    assert rc == 1 and "contacts[0].link: unknown link 'nolink'" in out, out
