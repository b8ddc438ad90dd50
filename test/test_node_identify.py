"""Payload identification at the ROS edge: the identify_payload handler in-process, the service through a real
node (with apply), and `dynamics_cli identify_payload --record` against a publisher of synthetic
joint states whose efforts are the inverse dynamics of the arm carrying a known payload."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

MASS, COM, I6 = 1.3, np.array([0.01, -0.02, 0.05]), (0.004, 0.0005, -0.0003, 0.005, 0.0002, 0.003)
SHUFFLED = ["joint3", "joint1", "joint2", "joint7", "joint5", "joint4", "joint6"]


def _sines(t):
    """Every joint of the arm a sum of three slow sines: q, qd, qdd at the times t (exact)."""
    rng = np.random.default_rng(1)
    A, w, ph = rng.uniform(0.3, 0.8, (7, 3)), rng.uniform(0.5, 1.5, (7, 3)), rng.uniform(0, 6, (7, 3))
    t = np.asarray(t, dtype=float)[:, None, None]
    return ((A * np.sin(w * t + ph)).sum(2), (A * w * np.cos(w * t + ph)).sum(2),
            (-A * w * w * np.sin(w * t + ph)).sum(2))


def _models():
    import dynamics_node as dn
    m = dn.load_model(str(ns.ARM7))
    return m, m.with_payload("tool0", MASS, COM, I6)


def _request(n=200, apply=False, drop=None):
    import dynamics_node as dn
    from dynamics_interfaces.srv import IdentifyPayload
    from trajectory_msgs.msg import JointTrajectoryPoint
    m, mp = _models()
    Q, QD, QDD = _sines(np.linspace(0, 20, n))
    TAU = dn.inverse_dynamics_batch(mp, Q, QD, QDD)
    idx = [m.v_slice(j).start for j in SHUFFLED]
    req = IdentifyPayload.Request(link="tool0", apply=apply)
    req.samples.joint_names = list(SHUFFLED)
    for k in range(n):
        pt = JointTrajectoryPoint(positions=list(Q[k, idx]), velocities=list(QD[k, idx]),
                                  accelerations=list(QDD[k, idx]), effort=list(TAU[k, idx]))
        if drop is not None and k == 3:
            setattr(pt, drop, [])
        req.samples.points.append(pt)
    return req


def _check(res, tol=1e-8):
    assert res.success, res.message
    assert res.mass == pytest.approx(MASS, rel=tol)
    np.testing.assert_allclose([res.center_of_mass.x, res.center_of_mass.y, res.center_of_mass.z], COM, atol=tol)
    np.testing.assert_allclose(list(res.inertia), I6, atol=tol)


# ------------------------------------------------------------------------------------ in-process
def _state():
    from dynamics_node.ros.model_state import build_state, load, payload_table
    from dynamics_node.ros.params.param_checks import validate
    c = validate({"urdf_path": str(ns.ARM7)})
    payloads, _ = payload_table(c, {})
    return build_state(load(c), c, payloads)


def _serve(req, ctx_calls):
    from dynamics_interfaces.srv import IdentifyPayload
    from dynamics_node.ros.services import SERVICES, serve
    st = _state()
    ctx = SimpleNamespace(state=st, log=SimpleNamespace(error=print),
                          set_payload=lambda *a: ctx_calls.append(a) or "payload attached")
    stats = SimpleNamespace(requests=Counter(), failures=Counter(), timing=SimpleNamespace(add=lambda t: None))
    return serve(ctx, "identify_payload", SERVICES["identify_payload"].handler, stats)(req, IdentifyPayload.Response())


def test_handler_identifies_with_joints_in_any_order_and_applies():
    calls = []
    res = _serve(_request(), calls)
    _check(res)
    assert res.residual_rms < 1e-9 and res.condition_number >= 1 and not calls
    assert "1.3 kg" in res.message and "200 samples" in res.message
    res = _serve(_request(apply=True), calls)
    _check(res)
    assert len(calls) == 1 and calls[0][0] == "tool0" and calls[0][1] == pytest.approx(MASS)
    np.testing.assert_allclose(calls[0][2], COM, atol=1e-8)
    np.testing.assert_allclose(calls[0][3], I6, atol=1e-8)
    assert "payload attached" in res.message


@pytest.mark.parametrize("mutate, words", [
    (lambda r: setattr(r, "link", "gripper"), ["link", "gripper"]),
    (lambda r: r.samples.joint_names.__setitem__(0, "nope"), ["samples.joint_names", "nope"]),
    (lambda r: setattr(r.samples, "points", r.samples.points[:1]), ["too few samples"]),
    (lambda r: r.samples.points[2].effort.__setitem__(1, float("nan")), ["samples.points[2].effort", "not finite"]),
])
def test_handler_refuses_by_field(mutate, words):
    req = _request(n=20)
    mutate(req)
    res = _serve(req, [])
    assert not res.success
    for w in words:
        assert w in res.message, res.message


@pytest.mark.parametrize("field", ["velocities", "accelerations", "effort"])
def test_every_point_needs_velocities_accelerations_and_effort(field):
    res = _serve(_request(n=20, drop=field), [])
    assert not res.success and f"samples.points[3].{field}: expected 7 values" in res.message, res.message


def test_motionless_samples_are_refused_and_nothing_is_applied():
    req = _request(n=20, apply=True)
    for p in req.samples.points:
        p.positions, p.velocities, p.accelerations = req.samples.points[0].positions, [0.0] * 7, [0.0] * 7
        p.effort = req.samples.points[0].effort
    calls = []
    res = _serve(req, calls)
    assert not res.success and "Ixx" in res.message and not calls


def test_the_recorder_differentiates_irregular_stamps():
    """trajectory_from_recording on jittered stamps with a split publisher: velocities and
    accelerations of the Savitzky-Golay differentiator against the exact ones."""
    from dynamics_node.cli.record import trajectory_from_recording
    rng = np.random.default_rng(2)
    t = np.cumsum(rng.uniform(0.004, 0.006, 2000))
    Q, QD, QDD = _sines(t)
    names = [f"joint{i}" for i in range(1, 8)]
    msgs = []
    for k in range(t.size):
        for part in (slice(0, 4), slice(4, 7)):  # two drivers, each with some of the joints
            msgs.append(ns.joint_state(names[part], Q[k, part], stamp_ns=int(t[k] * 1e9), efforts=Q[k, part] * 2))
    traj = trajectory_from_recording(msgs)
    assert traj.joint_names == names and 100 < len(traj.points) <= 2000
    tt = t[0] + np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in traj.points])
    ex = _sines(tt)
    np.testing.assert_allclose([p.positions for p in traj.points], ex[0], atol=1e-4)
    np.testing.assert_allclose([p.velocities for p in traj.points], ex[1], atol=2e-3)
    np.testing.assert_allclose([p.accelerations for p in traj.points], ex[2], atol=2e-2)
    np.testing.assert_allclose([p.effort for p in traj.points], 2 * ex[0], atol=2e-4)


def test_the_recorder_unwraps_continuous_joints_and_needs_efforts():
    from dynamics_node.errors import InputError
    from dynamics_node.cli.record import trajectory_from_recording
    t = np.arange(0.0, 4.0, 0.004)
    q = 0.9 * t + 2.5  # a continuous joint turning through +-pi, reported wrapped
    wrapped = np.angle(np.exp(1j * q))
    msgs = [ns.joint_state(["wheel"], [wrapped[k]], stamp_ns=int(round(t[k] * 1e9)), efforts=[1.0])
            for k in range(t.size)]
    traj = trajectory_from_recording(msgs)
    np.testing.assert_allclose([p.velocities[0] for p in traj.points], 0.9, atol=1e-6)
    np.testing.assert_allclose([p.accelerations[0] for p in traj.points], 0.0, atol=1e-4)
    no_effort = [ns.joint_state(["wheel"], [wrapped[k]], stamp_ns=int(round(t[k] * 1e9))) for k in range(t.size)]
    with pytest.raises(InputError, match="effort"):
        trajectory_from_recording(no_effort)
    with pytest.raises(InputError, match="too short a recording"):
        trajectory_from_recording(msgs[:20])


# ------------------------------------------------------------------------------------ real node
NAME = "ident_arm7"
TOPIC = "/ident_test/js"


@pytest.fixture(scope="module")
def node():
    yield from ns.serve_one(NAME, {"urdf_path": str(ns.ARM7), "joint_states_topic": TOPIC})


def test_service_through_the_node_and_apply(node):
    import dynamics_node as dn
    from dynamics_interfaces.srv import GravityCompensation, IdentifyPayload, SetPayload
    c = ns.ros()
    res = c.call(IdentifyPayload, node.path("identify_payload"), _request(apply=True))
    _check(res)
    q = [0.1, 0.7, -0.3, -1.1, 0.4, 0.9, -0.2]
    g = c.call(GravityCompensation, node.path("gravity_compensation"), GravityCompensation.Request(position=q))
    np.testing.assert_allclose(g.effort, dn.gravity(_models()[1], q), rtol=1e-7, atol=1e-8)
    assert c.call(SetPayload, node.path("set_payload"), SetPayload.Request(link="tool0", mass=0.0)).success
    bad = c.call(IdentifyPayload, node.path("identify_payload"), IdentifyPayload.Request(link="tool0"))
    assert not bad.success and "samples.points: empty" in bad.message, bad.message


def _publish_until(stop, rate=250.0):
    """Joint states of the payload-carrying arm on TOPIC, stamped with the motion's own clock."""
    import dynamics_node as dn
    _, mp = _models()
    c = ns.ros()
    pub = c.publisher(__import__("sensor_msgs.msg", fromlist=["JointState"]).JointState, TOPIC)
    names = [f"joint{i}" for i in range(1, 8)]
    t0 = time.monotonic()
    k = 0
    while not stop.is_set():
        t = k / rate
        q, qd, qdd = (x[0] for x in _sines([t]))
        tau = dn.inverse_dynamics(mp, q, qd, qdd)
        pub.publish(ns.joint_state(names, q, qd, stamp_ns=int(round(t * 1e9)), efforts=tau))
        k += 1
        time.sleep(max(0.0, t0 + k / rate - time.monotonic()))


def test_cli_records_identifies_and_applies(node):
    stop = threading.Event()
    th = threading.Thread(target=_publish_until, args=(stop,), daemon=True)
    th.start()
    try:
        p = subprocess.run([sys.executable, "-m", "dynamics_node.cli.dynamics_cli", "--node", f"/{NAME}",
                            "--timeout", "30",
                            "identify_payload", "--link", "tool0", "--record", "8", "--apply"],
                           cwd=str(ns.REPO), env=ns.node_env(), capture_output=True, text=True, timeout=120)
    finally:
        stop.set()
        th.join(5)
    print(p.stdout)  # the identified payload (shown with pytest -s)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "recording /ident_test/js" in p.stderr
    vals = {ln.split(":")[0]: ln.split(":", 1)[1].strip() for ln in p.stdout.splitlines() if ":" in ln}
    mass = float(vals["mass"])
    com = [float(x) for x in vals["center_of_mass"].strip("[]").split(",")]
    assert abs(mass - MASS) < 0.03 * MASS, p.stdout
    assert np.linalg.norm(np.subtract(com, COM)) < 0.005, p.stdout
    assert "attached to 'tool0'" in vals["message"], p.stdout
