"""The LinearizedDynamics service and dynamics_cli linearized_dynamics against the library,
as docs/node.md states it: in one process the service (its handler through services.serve, with a horizon:
dn.linearize_batch) is dn.linearize bit for bit; a running node, another process, agrees to 1e-12 (it may
run other machine code for the same kernels). And the refusals over ROS naming the request's field
(velocity[2], trajectory.points[3].velocities[2])."""
from __future__ import annotations

import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

ARM7 = ns.ARM7
NAME = "linearized_node"
SHUFFLED = ["joint3", "joint1", "joint6", "joint2", "joint7", "joint5", "joint4"]
PERM = [int(n[-1]) - 1 for n in SHUFFLED]
Q = np.array([0.3, -0.7, 0.4, -1.3, 0.5, 0.9, -0.6])
QD = np.array([0.8, -1.1, 0.6, 1.4, -0.9, 0.7, 1.2])
TAU = np.array([1.0, -2.0, 0.5, 3.0, -0.4, 0.2, 0.1])
DT = 0.01


def state(path=ARM7, **values):
    from dynamics_node.ros.model_state import build_state, load, payload_table
    from dynamics_node.ros.params.param_checks import validate
    c = validate({"urdf_path": str(path), **values})
    payloads, _ = payload_table(c, {})
    return build_state(load(c), c, payloads)


def call(handler, req, res_type, st=None):
    from dynamics_node.ros.diagnostics import Stats
    from dynamics_node.ros.services import serve
    ctx = SimpleNamespace(state=st or state(), log=SimpleNamespace(error=print))
    return serve(ctx, "test", handler, Stats())(req, res_type.Response())


def request(names=(), q=Q, qd=QD, tau=TAU, horizon=()):
    from dynamics_interfaces.srv import LinearizedDynamics
    from trajectory_msgs.msg import JointTrajectoryPoint
    idx = [int(n[-1]) - 1 for n in names] if names else list(range(7))
    req = LinearizedDynamics.Request()
    req.name = list(names)
    req.position, req.velocity, req.effort = ([float(x) for x in np.asarray(a)[idx]] for a in (q, qd, tau))
    req.dt = DT
    req.horizon.joint_names = list(names)
    for (hq, hqd, htau) in horizon:
        p = JointTrajectoryPoint()
        p.positions, p.velocities, p.effort = ([float(x) for x in np.asarray(a)[idx]] for a in (hq, hqd, htau))
        req.horizon.points.append(p)
    return req


def library(q, qd, tau, perm=None):
    import dynamics_node as dn
    A, B = dn.linearize(dn.load_model(str(ARM7)), q, qd, tau, DT)
    if perm is not None:
        idx = np.r_[perm, 7 + np.asarray(perm)]
        A, B = A[np.ix_(idx, idx)], B[np.ix_(idx, perm)]
    return A, B


def split(res):
    n, s = res.nv, res.states
    return (np.array(res.a).reshape(s, 2 * n, 2 * n), np.array(res.b).reshape(s, 2 * n, n))


@pytest.mark.parametrize("names", [(), SHUFFLED], ids=["model_order", "shuffled"])
def test_service_is_the_library_bit_for_bit(names):
    from dynamics_interfaces.srv import LinearizedDynamics
    from dynamics_node.ros.linearized import linearized_dynamics
    rng = np.random.default_rng(3)
    horizon = [(rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7)) for _ in range(2)]
    res = call(linearized_dynamics, request(names, horizon=horizon), LinearizedDynamics)
    assert res.success, res.message
    assert res.nv == 7 and res.states == 3 and "semi-implicit Euler" in res.convention
    A, B = split(res)
    perm = PERM if names else None
    for k, (q, qd, tau) in enumerate([(Q, QD, TAU)] + horizon):
        a, b = library(q, qd, tau, perm)
        assert np.array_equal(A[k], a) and np.array_equal(B[k], b), f"state {k}"


def test_service_floating_base_counts_the_base():
    from dynamics_interfaces.srv import LinearizedDynamics
    from dynamics_node.ros.linearized import linearized_dynamics
    import dynamics_node as dn
    st = state(floating_base=True)
    req = LinearizedDynamics.Request()
    q = np.r_[0.1, 0.2, 0.3, 0.0, 0.0, np.sin(0.2), np.cos(0.2), Q]
    req.position = [float(x) for x in q]
    req.velocity = [0.1] * 13
    req.dt = DT
    res = call(linearized_dynamics, req, LinearizedDynamics, st)
    assert res.success, res.message
    assert res.nv == 13 and res.states == 1
    A, B = split(res)
    a, b = dn.linearize(st.model, q, np.full(13, 0.1), np.zeros(13), DT)
    assert np.array_equal(A[0], a) and np.array_equal(B[0], b)


@pytest.mark.parametrize("change, words", [
    ({"dt": 0.0}, ["dt", "> 0"]),
    ({"velocity": [1.0] * 6}, ["velocity", "expected 7"]),
    ({"horizon_velocity": (1, 2, 1e308)}, [r"horizon.points[1].velocities[2]"]),
    ({"velocity_big": (2, 1e308)}, ["velocity[2]", "out of range"]),
])
def test_refusals_name_the_request_field(change, words):
    from dynamics_interfaces.srv import LinearizedDynamics
    from dynamics_node.ros.linearized import linearized_dynamics
    horizon = [(Q, QD, TAU), (Q, QD.copy(), TAU)]
    qd = QD.copy()
    if "horizon_velocity" in change:
        k, i, x = change["horizon_velocity"]
        horizon[k][1][i] = x
    if "velocity_big" in change:
        i, x = change["velocity_big"]
        qd[i] = x
    req = request(qd=qd, horizon=horizon)
    if "dt" in change:
        req.dt = change["dt"]
    if "velocity" in change:
        req.velocity = change["velocity"]
    res = call(linearized_dynamics, req, LinearizedDynamics)
    assert not res.success
    for w in words:
        assert w in res.message, res.message
    assert len(res.a) == 0


def test_trajectory_inverse_dynamics_refusal_names_point_and_field():
    """A velocity of 1e308 at point 3: 'trajectory.points[3].velocities[c]', c in the request's order."""
    from dynamics_interfaces.srv import TrajectoryInverseDynamics
    from trajectory_msgs.msg import JointTrajectoryPoint
    from dynamics_node.ros.services import trajectory_inverse_dynamics
    req = TrajectoryInverseDynamics.Request()
    req.trajectory.joint_names = SHUFFLED
    for k in range(5):
        p = JointTrajectoryPoint()
        p.positions = [float(x) for x in Q[PERM]]
        v = np.zeros(7)
        if k == 3:
            v[2] = 1e308      # request index 2 = joint6
        p.velocities = [float(x) for x in v]
        req.trajectory.points.append(p)
    res = call(trajectory_inverse_dynamics, req, TrajectoryInverseDynamics)
    assert not res.success
    assert "trajectory.points[3].velocities[2]" in res.message and "joint6" in res.message, res.message


# ------------------------------------------------------------------------------ on a running node
@pytest.fixture(scope="module")
def node():
    from dynamics_interfaces.srv import LinearizedDynamics
    for proc in ns.serve_one(NAME, {"urdf_path": str(ARM7)}):
        # the first request may compile the derivative kernels (no ahead-of-time library holds njit kernels)
        ns.ros().call(LinearizedDynamics, proc.path("linearized_dynamics"), request(), timeout=300)
        yield proc


def cli(*args, timeout=120):
    """dynamics_cli with --timeout 60 (its default 10 s is a user's, on an idle machine)."""
    p = subprocess.run([sys.executable, "-m", "dynamics_node.cli.dynamics_cli", "--node", f"/{NAME}", "--timeout", "60",
                        *map(str, args)],
                       cwd=str(ns.REPO), env=ns.node_env(), capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def test_node_serves_linearized_dynamics(node):
    from dynamics_interfaces.srv import LinearizedDynamics
    res = ns.ros().call(LinearizedDynamics, node.path("linearized_dynamics"), request(SHUFFLED))
    assert res.success, res.message
    A, B = split(res)
    a, b = library(Q, QD, TAU, PERM)
    # another process: it may run the ahead-of-time library's code where this one runs numba's JIT (LLVM fuses
    # multiply-adds differently, 1e-15 .. 1e-13); in one process the service is the library bit for bit
    # (test_service_is_the_library_bit_for_bit)
    np.testing.assert_allclose(A[0], a, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(B[0], b, rtol=1e-12, atol=1e-12)


def _rows(out, field, n_rows):
    lines = out.splitlines()
    k = next(i for i, s in enumerate(lines) if s.startswith(f"{field}:"))
    rows = [s for s in lines[k + 1:] if re.match(r"^\s+- \[", s)][:n_rows]
    return np.array([[float(x) for x in s.split("[", 1)[1].rstrip("]").split(",")] for s in rows])


def test_cli_linearized_dynamics(node):
    rc, out, err = cli("linearized_dynamics", "-q", *Q, "-v", *QD, "-e", *TAU, "--dt", DT)
    assert rc == 0 and "success: true" in out, out + err
    a, b = library(Q, QD, TAU)
    np.testing.assert_allclose(_rows(out, "a[0]", 14), a, rtol=1e-11, atol=1e-11)   # printed to 12 digits
    np.testing.assert_allclose(_rows(out, "b[0]", 14), b, rtol=1e-11, atol=1e-11)
    rc, out, err = cli("linearized_dynamics", "-q", *Q, "--dt", 0)
    assert rc == 1 and "dt" in out, out + err


def test_docs_node_command_runs_as_written(node):
    """docs/node.md's dynamics_cli linearized_dynamics command, as written, answers the library's A and B."""
    import shlex
    text = (ns.REPO / "docs" / "node.md").read_text()
    line = next(s.strip() for s in text.splitlines() if s.strip().startswith("dynamics_cli linearized_dynamics"))
    args = shlex.split(line)[1:]
    rc, out, err = cli(*args)
    assert rc == 0 and "success: true" in out, out + err
    q = np.array([0, 0.5, 0, -1.2, 0, 0.8, 0.0])
    a, b = library(q, np.r_[0.1, np.zeros(6)], np.r_[0.0, 1.0, np.zeros(5)])
    np.testing.assert_allclose(_rows(out, "a[0]", 14), a, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(_rows(out, "b[0]", 14), b, rtol=1e-11, atol=1e-11)
