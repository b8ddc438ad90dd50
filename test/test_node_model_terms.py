"""The model terms over ROS: the ModelTerms service, the Jacobian service's
point and axes, the model_terms topic and dynamics_cli model_terms, checked against Pinocchio
(test-only) on urdf/arm7.urdf: H = crba, C = computeCoriolisMatrix, g = computeGeneralizedGravity,
J and dJ/dt of a point = getFrameJacobian / getFrameJacobianTimeVariation of a frame added at that
point (LOCAL_WORLD_ALIGNED, or LOCAL for link axes), Lambda = (J H^-1 J^T)^-1 from those."""
from __future__ import annotations

import math
import re
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

pin = pytest.importorskip("pinocchio")

ARM7 = ns.ARM7
TOL = dict(rtol=1e-9, atol=1e-9)
SHUFFLED = ["joint3", "joint1", "joint6", "joint2", "joint7", "joint5", "joint4"]
Q = np.array([0.3, -0.7, 0.4, -1.3, 0.5, 0.9, -0.6])       # away from singularities
QD = np.array([0.8, -1.1, 0.6, 1.4, -0.9, 0.7, 1.2])
LINKS = ["tool0", "link6"]
POINTS = [(0.02, -0.03, 0.11), (0.0, 0.05, -0.04)]


# ------------------------------------------------------------------------------------ references
class Pin:
    """Pinocchio on arm7, with one OP_FRAME per (link, point) asked for."""

    def __init__(self, path=ARM7):
        self.model = pin.buildModelFromUrdf(str(path))
        self.names = [self.model.names[i] for i in range(1, self.model.njoints)]

    def v_index(self, names):
        """Pinocchio's v index of each joint of names."""
        return [self.model.joints[self.model.getJointId(j)].idx_v for j in names]

    def frame(self, link, point):
        m = self.model
        name = f"{link}@{point}"
        if m.existFrame(name):
            return m.getFrameId(name)
        f = m.frames[m.getFrameId(link)]
        placement = f.placement * pin.SE3(np.eye(3), np.asarray(point, dtype=float))
        return m.addFrame(pin.Frame(name, f.parentJoint, m.getFrameId(link), placement, pin.FrameType.OP_FRAME))

    def terms(self, q, qd, links=(), points=None, axes="world"):
        """Everything in Pinocchio's joint order (arm7: the model's order, checked by the caller)."""
        points = points or [(0.0, 0.0, 0.0)] * len(links)
        fids = [self.frame(link, p) for link, p in zip(links, points)]
        m = self.model
        d = m.createData()
        H = pin.crba(m, d, q).copy()
        H = np.triu(H) + np.triu(H, 1).T
        C = pin.computeCoriolisMatrix(m, d, q, qd).copy()
        g = pin.computeGeneralizedGravity(m, d, q).copy()
        nle = pin.nonLinearEffects(m, d, q, qd).copy()
        ref = pin.LOCAL_WORLD_ALIGNED if axes == "world" else pin.LOCAL
        pin.computeJointJacobians(m, d, q)
        pin.updateFramePlacements(m, d)
        J = [pin.getFrameJacobian(m, d, f, ref).copy() for f in fids]
        pin.computeJointJacobiansTimeVariation(m, d, q, qd)
        pin.updateFramePlacements(m, d)
        Jd = [pin.getFrameJacobianTimeVariation(m, d, f, ref).copy() for f in fids]
        Hinv = np.linalg.inv(H)
        L = [np.linalg.inv(j @ Hinv @ j.T) if np.linalg.matrix_rank(j) == 6 else None for j in J]
        return SimpleNamespace(H=H, C=C, g=g, nle=nle, J=J, Jd=Jd, L=L)


@pytest.fixture(scope="module")
def ref():
    r = Pin()
    assert r.names == [f"joint{i}" for i in range(1, 8)]
    return r


def state(path=ARM7, **values):
    from dynamics_node.ros.model_state import build_state, load, payload_table
    from dynamics_node.ros.params.param_checks import validate
    c = validate({"urdf_path": str(path), **values})
    payloads, _ = payload_table(c, {})
    return build_state(load(c), c, payloads)


def point(p):
    from geometry_msgs.msg import Point
    return Point(x=float(p[0]), y=float(p[1]), z=float(p[2]))


def terms_request(names=SHUFFLED, q=Q, qd=QD, links=LINKS, points=POINTS):
    from dynamics_interfaces.srv import ModelTerms
    idx = [int(n[-1]) - 1 for n in names] if names else list(range(7))
    req = ModelTerms.Request()
    req.name = list(names)
    req.position = [float(x) for x in np.asarray(q)[idx]]
    req.velocity = [float(x) for x in np.asarray(qd)[idx]] if qd is not None else []
    req.links = list(links)
    req.points = [point(p) for p in points]
    return req


def call(handler, req, res_type, st=None):
    """A handler through services.serve, as the node runs it: (response)."""
    from dynamics_node.ros.diagnostics import Stats
    from dynamics_node.ros.services import serve
    ctx = SimpleNamespace(state=st or state(), log=SimpleNamespace(error=print))
    return serve(ctx, "test", handler, Stats())(req, res_type.Response())


def check_terms(res, r, names, n_links, lam=True):
    """A ModelTerms response (or message) in the joint order `names` against Pinocchio's r."""
    perm = [int(j[-1]) - 1 for j in names]
    n = len(perm)
    assert list(res.name) == list(names)
    np.testing.assert_allclose(np.reshape(res.mass_matrix, (n, n)), r.H[np.ix_(perm, perm)], **TOL)
    np.testing.assert_allclose(np.reshape(res.coriolis_matrix, (n, n)), r.C[np.ix_(perm, perm)], **TOL)
    np.testing.assert_allclose(res.gravity, r.g[perm], **TOL)
    np.testing.assert_allclose(res.bias, r.nle[perm], **TOL)        # C qd + g = Pinocchio's nle
    J = np.reshape(res.jacobians, (n_links * 6, n))
    Jd = np.reshape(res.jacobian_derivatives, (n_links * 6, n))
    for k in range(n_links):
        np.testing.assert_allclose(J[6 * k:6 * k + 6], r.J[k][:, perm], **TOL)
        np.testing.assert_allclose(Jd[6 * k:6 * k + 6], r.Jd[k][:, perm], **TOL)
    if lam:
        L = np.reshape(res.operational_space_inertias, (n_links, 6, 6))
        for k in range(n_links):
            np.testing.assert_allclose(L[k], r.L[k], rtol=1e-9, atol=1e-9 * np.abs(r.L[k]).max())


# ------------------------------------------------------------------------------------ the service, in-process
@pytest.mark.parametrize("names", [SHUFFLED, []])
def test_model_terms_match_pinocchio_in_the_requests_joint_order(ref, names):
    from dynamics_interfaces.srv import ModelTerms
    from dynamics_node.ros.model_terms import model_terms
    res = call(model_terms, terms_request(names=names), ModelTerms)
    assert res.success, res.message
    check_terms(res, ref.terms(Q, QD, LINKS, POINTS), names or [f"joint{i}" for i in range(1, 8)], 2)
    assert len(res.operational_space_inertias) == 2 * 36


def test_model_terms_defaults_empty_velocity_zero_and_no_points_the_link_origins(ref):
    from dynamics_interfaces.srv import ModelTerms
    from dynamics_node.ros.model_terms import model_terms
    res = call(model_terms, terms_request(qd=None, points=[]), ModelTerms)
    assert res.success, res.message
    r = ref.terms(Q, np.zeros(7), LINKS, None)
    check_terms(res, r, SHUFFLED, 2)
    assert not np.any(res.coriolis_matrix) and not np.any(res.jacobian_derivatives)
    res = call(model_terms, terms_request(links=[], points=[]), ModelTerms)   # no links: H, C, g only
    assert res.success and len(res.jacobians) == len(res.operational_space_inertias) == 0
    check_terms(res, ref.terms(Q, QD), SHUFFLED, 0)


def test_lambda_where_j_loses_rank_is_refused_naming_the_link(ref):
    from dynamics_interfaces.srv import ModelTerms
    from dynamics_node.ros.model_terms import model_terms
    # link2 moves with two joints: its 6 x 7 Jacobian has rank 2, so J H^-1 J^T is singular
    assert np.linalg.matrix_rank(ref.terms(Q, QD, ["link2"]).J[0]) == 2
    res = call(model_terms, terms_request(links=["tool0", "link2"], points=[]), ModelTerms)
    assert not res.success
    assert "links[1] ('link2')" in res.message and "rank" in res.message, res.message
    assert len(res.mass_matrix) == 0     # no partial results


@pytest.mark.parametrize("change, words", [
    ({"links": ["tool0", "gripper"], "points": []}, ["links[1]", "unknown link 'gripper'"]),
    ({"links": ["tool0", ""], "points": []}, ["links[1]", "empty link name"]),
    ({"points": [(0, 0, 0)]}, ["points", "expected 0 or 2 points", "got 1"]),
    ({"points": [(0, 0, 0), (0, float("nan"), 0)]}, ["points[1].y", "nan"]),
    ({"q": np.r_[Q[:3], np.inf, Q[4:]]}, ["position[", "joint 'joint4'", "inf"]),
    ({"qd": np.r_[QD[:5], np.nan, QD[6:]]}, ["velocity[", "joint 'joint6'", "nan"]),
    ({"names": SHUFFLED[:6]}, ["name", "missing"]),
])
def test_bad_model_terms_requests_are_refused_naming_the_field(change, words):
    from dynamics_interfaces.srv import ModelTerms
    from dynamics_node.ros.model_terms import model_terms
    kw = dict(change)
    req = terms_request(**kw)
    res = call(model_terms, req, ModelTerms)
    assert not res.success
    for w in words:
        assert w in res.message, res.message


# ------------------------------------------------------------------------------------ jacobian: point, axes
@pytest.mark.parametrize("axes", ["", "world", "link"])
def test_jacobian_service_point_and_axes(ref, axes):
    from dynamics_interfaces.srv import Jacobian
    from dynamics_node.ros.services import jacobian
    perm = [int(n[-1]) - 1 for n in SHUFFLED]
    p = POINTS[0]
    req = Jacobian.Request(name=SHUFFLED, position=[float(x) for x in Q[perm]], link="tool0", point=point(p),
                           axes=axes)
    res = call(jacobian, req, Jacobian)
    assert res.success, res.message
    expected = ref.terms(Q, QD, ["tool0"], [p], axes=axes or "world").J[0]
    np.testing.assert_allclose(np.reshape(res.jacobian, (6, 7)), expected[:, perm], **TOL)


def test_jacobian_service_left_empty_is_the_link_origin_in_world_axes(ref):
    from dynamics_interfaces.srv import Jacobian
    from dynamics_node.ros.services import jacobian
    res = call(jacobian, Jacobian.Request(position=list(Q), link="link6"), Jacobian)
    assert res.success, res.message
    np.testing.assert_allclose(np.reshape(res.jacobian, (6, 7)), ref.terms(Q, QD, ["link6"]).J[0], **TOL)


@pytest.mark.parametrize("change, words", [
    ({"axes": "body"}, ["axes", "'body'", "world", "link"]),
    ({"point": (0, math.inf, 0)}, ["point.y", "inf"]),
])
def test_bad_jacobian_options_are_refused_naming_the_field(change, words):
    from dynamics_interfaces.srv import Jacobian
    from dynamics_node.ros.services import jacobian
    req = Jacobian.Request(position=list(Q), link="tool0")
    if "axes" in change:
        req.axes = change["axes"]
    if "point" in change:
        req.point = point(change["point"])
    res = call(jacobian, req, Jacobian)
    assert not res.success
    for w in words:
        assert w in res.message, res.message


# ------------------------------------------------------------------------------------ parameters
@pytest.mark.parametrize("values, words", [
    ({"model_terms_links": ["tool0"], "model_terms_points": [0.0, 0.1]},
     ["model_terms_points", "expected 0 or 3 values", "got 2"]),
    ({"model_terms_links": ["tool0"], "model_terms_points": [0.0, 0.0, 50.0]}, ["model_terms_points", "10 m"]),
    ({"model_terms_links": ["tool0"], "model_terms_points": [0.0, 0.0, math.nan]}, ["model_terms_points[2]"]),
    ({"model_terms_links": [""]}, ["model_terms_links[0]", "empty"]),
])
def test_model_terms_parameters_are_checked(values, words):
    from dynamics_node.errors import ConfigError
    from dynamics_node.ros.params.param_checks import validate
    with pytest.raises(ConfigError) as e:
        validate(values)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_model_terms_links_are_checked_against_the_model_only_when_set():
    from dynamics_node.errors import ConfigError
    assert state().model.link_names  # default: empty, nothing checked
    st = state(model_terms_links=["tool0", "link3"], model_terms_points=[0.0, 0.0, 0.1, 0.0, 0.0, 0.0])
    assert st is not None
    with pytest.raises(ConfigError, match=r"model_terms_links\[1\]: the model has no link 'gripper'"):
        state(model_terms_links=["tool0", "gripper"])


# ------------------------------------------------------------------------------------ the stream hook
class Recorder:
    def __init__(self, log, tag):
        self.log, self.tag = log, tag

    def publish(self, msg):
        self.log.append((self.tag, msg))


@pytest.fixture(scope="module")
def rcl_node():
    import rclpy
    from rclpy.context import Context
    ctx = Context()
    rclpy.init(context=ctx, domain_id=ns.DOMAIN_ID)
    node = rclpy.create_node(f"terms_inprocess_{id(ctx)}", context=ctx)
    yield node
    node.destroy_node()
    rclpy.try_shutdown(context=ctx)


def test_stream_publishes_the_terms_after_the_torques_of_the_same_joint_state(ref, rcl_node):
    from dynamics_node.ros.params.param_checks import validate
    from dynamics_node.ros.stream import Stream
    values = {"urdf_path": str(ARM7), "joint_states_topic": "/terms_inprocess/js", "joint_state_timeout": 600.0,
              "model_terms_links": LINKS, "model_terms_points": [x for p in POINTS for x in p]}
    st, cfg = state(**values), validate(values)
    stream = Stream(rcl_node, lambda n: n, rcl_node.get_logger())
    stream.configure(st, cfg, {"joint_states_topic"}, now=True)
    assert stream.terms.active
    out = []
    stream.pub_gravity, stream.terms.pub = Recorder(out, "torque"), Recorder(out, "terms")
    names = SHUFFLED
    perm = [int(n[-1]) - 1 for n in names]
    stream.on_joint_state(ns.joint_state(names, Q[perm], QD[perm], stamp_ns=123456789))
    assert [t for t, _ in out] == ["torque", "terms"], stream.last_error or stream.terms.last_problem
    msg = out[1][1]
    assert ns.stamp_ns(msg) == 123456789 and msg.message == ""
    np.testing.assert_allclose(msg.position, Q, **TOL)
    np.testing.assert_allclose(msg.velocity, QD, **TOL)
    assert list(msg.links) == LINKS and [(p.x, p.y, p.z) for p in msg.points] == POINTS
    check_terms(msg, ref.terms(Q, QD, LINKS, POINTS), [f"joint{i}" for i in range(1, 8)], 2)

    # a joint state without velocities: the merged velocities of the previous one are still fresh
    del out[:]
    stream.on_joint_state(ns.joint_state(names, Q[perm], stamp_ns=2))
    assert [t for t, _ in out] == ["torque", "terms"]
    # no fresh velocity: torques, and no terms (C and the bias need qd)
    del out[:]
    stream.merger.t_vel[:] = -math.inf
    stream.on_joint_state(ns.joint_state(names, Q[perm], stamp_ns=3))
    assert [t for t, _ in out] == ["torque"] and "velocity" in stream.terms.last_problem
    assert stream.report()["model_terms"]["skipped"] == 1

    # a link whose J loses rank: the other terms are published, Lambda is not, and message says why
    v2 = dict(values, model_terms_links=["tool0", "link2"], model_terms_points=[])
    stream.configure(state(**v2), validate(v2), set(), now=True)
    stream.pub_gravity, stream.terms.pub = Recorder(out, "torque"), Recorder(out, "terms")
    del out[:]
    stream.on_joint_state(ns.joint_state(names, Q[perm], QD[perm], stamp_ns=4))
    assert [t for t, _ in out] == ["torque", "terms"], stream.last_error or stream.terms.last_problem
    msg = out[1][1]
    assert "links[1] ('link2')" in msg.message and "rank" in msg.message, msg.message
    assert len(msg.operational_space_inertias) == 0
    r = ref.terms(Q, QD, ["tool0", "link2"])
    check_terms(msg, r, [f"joint{i}" for i in range(1, 8)], 2, lam=False)

    # model_terms_links emptied: the publisher goes, the torques stay
    cfg2 = validate({k: v for k, v in values.items() if not k.startswith("model_terms")})
    stream.configure(state(**{k: v for k, v in values.items() if not k.startswith("model_terms")}), cfg2,
                     set(), now=True)
    assert not stream.terms.active and stream.report()["model_terms"] is None


# ------------------------------------------------------------------------------------ a running node
NAME = "terms_arm7"
JS_TOPIC = "/terms_test/joint_states"


@pytest.fixture(scope="module")
def node():
    yield from ns.serve_one(NAME, {"urdf_path": str(ARM7), "joint_states_topic": JS_TOPIC,
                                   "model_terms_links": LINKS,
                                   "model_terms_points": [x for p in POINTS for x in p]})


def test_model_terms_service_of_a_running_node(ref, node):
    from dynamics_interfaces.srv import ModelTerms
    # the first call may wait for the node's warm-up thread to load the kernels
    res = ns.ros().call(ModelTerms, node.path("model_terms"), terms_request(), timeout=90.0)
    assert res.success, res.message
    check_terms(res, ref.terms(Q, QD, LINKS, POINTS), SHUFFLED, 2)


def test_model_terms_topic_of_a_running_node(ref, node):
    from dynamics_interfaces.msg import ModelTerms
    from sensor_msgs.msg import JointState
    c = ns.ros()
    pub = c.publisher(JointState, JS_TOPIC)
    terms, _ = c.subscribe(ModelTerms, node.path("model_terms"))
    torques, _ = c.subscribe(JointState, node.path("gravity_torques"))
    c.wait_for_subscriber(pub)
    perm = [int(n[-1]) - 1 for n in SHUFFLED]
    deadline = time.monotonic() + 30
    k, got = 0, []
    while time.monotonic() < deadline and not got:
        k += 1
        pub.publish(ns.joint_state(SHUFFLED, Q[perm], QD[perm], stamp_ns=1000 + k))
        got = ns.drain(terms, timeout=0.2)
    assert got, "no model_terms message"
    msg = got[-1]
    assert 1000 < ns.stamp_ns(msg) <= 1000 + k and msg.message == ""
    check_terms(msg, ref.terms(Q, QD, LINKS, POINTS), [f"joint{i}" for i in range(1, 8)], 2)
    stamps = {ns.stamp_ns(m) for m in ns.drain(torques, timeout=1.0)}
    assert ns.stamp_ns(msg) in stamps     # the torque of that joint state was published too


def cli(*args, timeout=120):
    """dynamics_cli with --timeout 60 (its default 10 s is a user's, on an idle machine)."""
    p = subprocess.run([sys.executable, "-m", "dynamics_node.cli.dynamics_cli", "--node", f"/{NAME}", "--timeout", "60",
                        *map(str, args)],
                       cwd=str(ns.REPO), env=ns.node_env(), capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def _rows(out, field, n_rows):
    """The n_rows printed under `field:` (lines '  - [...]' or '    - [...]')."""
    lines = out.splitlines()
    k = next(i for i, s in enumerate(lines) if s.startswith(f"{field}:"))
    rows = [s for s in lines[k + 1:] if re.match(r"^\s+- \[", s)][:n_rows]
    return np.array([[float(x) for x in s.split("[", 1)[1].rstrip("]").split(",")] for s in rows])


def test_cli_model_terms_and_jacobian_options(ref, node):
    perm = [int(n[-1]) - 1 for n in SHUFFLED]
    rc, out, err = cli("model_terms", "-n", *SHUFFLED, "-q", *Q[perm], "-v", *QD[perm],
                       "--links", *LINKS, "--point", *POINTS[0], "--point", *POINTS[1])
    assert rc == 0 and "success: true" in out, out + err
    r = ref.terms(Q, QD, LINKS, POINTS)
    np.testing.assert_allclose(_rows(out, "coriolis_matrix", 7), r.C[np.ix_(perm, perm)], rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(_rows(out, "jacobian_derivatives", 12)[6:], r.Jd[1][:, perm], rtol=1e-11, atol=1e-11)
    L = _rows(out, "operational_space_inertias", 12)
    np.testing.assert_allclose(L[:6], r.L[0], rtol=1e-9, atol=1e-9 * np.abs(r.L[0]).max())

    rc, out, err = cli("jacobian", "-q", *Q, "--link", "tool0", "--point", *POINTS[0], "--axes", "link")
    assert rc == 0, out + err
    np.testing.assert_allclose(_rows(out, "jacobian", 6), ref.terms(Q, QD, ["tool0"], [POINTS[0]], "link").J[0],
                               rtol=1e-11, atol=1e-11)
    rc, out, err = cli("model_terms", "-q", *Q, "--links", "tool0", "link6", "--point", 0, 0, 0)
    assert rc == 1 and "points" in out and "expected 0 or 2" in out, out + err


def test_stream_outputs_carry_no_qos_event_handlers(rcl_node):
    """Each QoS-event handler is an entity in every wait of an rclpy executor (about 17 us per joint
    state each), and the stream's own executor (ros/stream_executor) serves none: the stream's
    publishers have none (output_events), nor has its joint-state subscription (best effort and
    volatile: no publisher can be incompatible with it). (rclpy's own /parameter_events publisher
    keeps its handlers: they are never served there, and only count events.)"""
    from dynamics_node.ros.params.param_checks import validate
    from dynamics_node.ros.stream import Stream
    values = {"urdf_path": str(ARM7), "joint_states_topic": "/terms_events/js", "model_terms_links": ["tool0"],
              "effort_command_topic": "/terms_events/cmd"}
    stream = Stream(rcl_node, lambda n: n, rcl_node.get_logger())
    stream.configure(state(**values), validate(values), {"joint_states_topic", "effort_command_topic"}, now=True)
    pubs = {"gravity_torques": stream.pub_gravity, "command": stream.pub_cmd, "model_terms": stream.terms.pub,
            "external_torques": stream.observer_pubs.torques, "external_wrench": stream.observer_pubs.wrench,
            "collision": stream.observer_pubs._collision}
    assert all(p is not None for p in pubs.values()), pubs
    assert {k: len(p.event_handlers) for k, p in pubs.items()} == dict.fromkeys(pubs, 0)
    assert not stream.sub.event_handlers
