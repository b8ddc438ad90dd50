"""The derivatives with the whole joint law (armature, viscous, tanh Coulomb, Stribeck,
offset), against central finite differences of the functions they differentiate: inverse dynamics in qd, and
forward dynamics in qd and tau. The law enters only through the velocity (its slope is diagonal); the offset is
a constant and must leave every derivative unchanged."""
import pathlib

import numpy as np
import pytest

import dynamics_node as dn

ARM7 = str(pathlib.Path(__file__).resolve().parent.parent / "urdf" / "arm7.urdf")
LAW = dict(viscous=0.3, coulomb=2.0, coulomb_velocity=0.05, stribeck={"joint2": 1.5, "joint4": -0.8},
           stribeck_velocity=0.1, offset={"joint1": -0.3, "joint6": 0.7})


def _model(**law):
    return dn.load_model(ARM7, armature={"joint1": 0.12, "joint5": 0.05}, friction=dn.JointFriction(**law))


def _central(f, x, h=1e-6):
    cols = []
    for k in range(len(x)):
        e = np.zeros_like(x)
        e[k] = h
        cols.append((f(x + e) - f(x - e)) / (2 * h))
    return np.array(cols).T


@pytest.fixture(scope="module")
def state():
    rng = np.random.default_rng(27)
    q = rng.uniform(-1, 1, 7)
    qd = rng.choice([-1, 1], 7) * rng.uniform(0.03, 0.3, 7)   # inside the tanh's and Stribeck's curved range
    return q, qd, rng.normal(size=7), rng.normal(size=7) * 5


def test_inverse_dynamics_derivative_in_qd_follows_the_law(state):
    model = _model(**LAW)
    q, qd, qdd, _ = state
    _, dtau_dqd = dn.inverse_dynamics_derivatives(model, q, qd, qdd)
    fd = _central(lambda v: dn.inverse_dynamics(model, q, v, qdd), qd)
    np.testing.assert_allclose(dtau_dqd, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())
    # the law's slope is really in there: without it the two differ by far more than the tolerance
    plain = dn.inverse_dynamics_derivatives(_model(), q, qd, qdd)[1]
    assert np.abs(np.diag(dtau_dqd - plain)).max() > 1.0


def test_forward_dynamics_derivatives_follow_the_law(state):
    model = _model(**LAW)
    q, qd, _, tau = state
    _, dqdd_dqd, dqdd_dtau = dn.forward_dynamics_derivatives(model, q, qd, tau)
    fd_qd = _central(lambda v: dn.forward_dynamics(model, q, v, tau), qd)
    fd_tau = _central(lambda t: dn.forward_dynamics(model, q, qd, t), tau)
    np.testing.assert_allclose(dqdd_dqd, fd_qd, rtol=1e-6, atol=1e-6 * np.abs(fd_qd).max())
    np.testing.assert_allclose(dqdd_dtau, fd_tau, rtol=1e-6, atol=1e-6 * np.abs(fd_tau).max())


def test_the_offset_changes_no_derivative(state):
    q, qd, qdd, _ = state
    with_offset = dn.inverse_dynamics_derivatives(_model(**LAW), q, qd, qdd)
    law = dict(LAW, offset=None)
    without = dn.inverse_dynamics_derivatives(_model(**law), q, qd, qdd)
    for a, b in zip(with_offset, without):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
