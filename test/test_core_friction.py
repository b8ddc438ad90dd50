"""The joint law (dynamics_node/joint_law.py) in the core: inverse, forward and
hybrid dynamics, the batch and trajectory forms, the momentum observer, against the law written out
independently here (numpy) on top of Pinocchio's RNEA / CRBA (not the core), and its refusals."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dynamics_node as dn
import identify_sim as sim
import node_support as ns
from dynamics_node.errors import InputError, ModelError

NAMES = [f"joint{k}" for k in range(1, 8)]
LAW = dict(
    viscous={n: 0.1 + 0.2 * k for k, n in enumerate(NAMES)},
    coulomb={n: 1.0 + 0.5 * k for k, n in enumerate(NAMES)},
    coulomb_velocity={n: [0.0, 0.01, 0.05, 0.0, 0.2, 0.02, 0.03][k] for k, n in enumerate(NAMES)},
    stribeck={n: [0.5, -0.4, 1.0, 0.0, 0.3, 2.0, -1.0][k] for k, n in enumerate(NAMES)},
    stribeck_velocity={n: [0.1, 0.05, 0.0, 0.2, 0.1, 0.03, 0.3][k] for k, n in enumerate(NAMES)},
    offset={n: [0.3, -0.2, 0.0, 1.5, -1.0, 0.05, 0.4][k] for k, n in enumerate(NAMES)})
ARM = {n: 0.01 * (k + 1) for k, n in enumerate(NAMES)}


def numpy_law(QD, QDD=None):
    """The issue's formula, written here: Ia qdd + b qd + (fc + fs exp(-(qd/vs)^2)) s(qd) + o."""
    law = {n: dict(Ia=ARM[n], b=LAW["viscous"][n], fc=LAW["coulomb"][n], vc=LAW["coulomb_velocity"][n],
                   fs=LAW["stribeck"][n], vs=LAW["stribeck_velocity"][n], o=LAW["offset"][n]) for n in NAMES}
    return sim.law_torque(law, np.atleast_2d(QD), np.zeros_like(np.atleast_2d(QD)) if QDD is None
                          else np.atleast_2d(QDD), NAMES)


@pytest.fixture(scope="module")
def models():
    m0 = dn.load_model(str(ns.ARM7))
    m = dn.load_model(str(ns.ARM7), armature=ARM, friction=dn.JointFriction(**LAW))
    return m0, m


def _states(n, seed=0):
    rng = np.random.default_rng(seed)
    Q = rng.uniform(-2, 2, (n, 7))
    QD = rng.normal(size=(n, 7)) * rng.choice([0.01, 0.1, 1.0], size=(n, 7))
    QD[0, :] = 0.0  # at rest: sign(0) = tanh(0) = 0, the offset alone
    return Q, QD, rng.normal(size=(n, 7))


def test_inverse_dynamics_is_rigid_body_plus_the_law(models):
    import pinocchio as pin

    m0, m = models
    pm = pin.buildModelFromUrdf(str(ns.ARM7))
    pdata = pm.createData()
    Q, QD, QDD = _states(40)
    law = numpy_law(QD, QDD)
    T = dn.inverse_dynamics_batch(m, Q, QD, QDD)
    for k in range(Q.shape[0]):
        ref = pin.rnea(pm, pdata, Q[k], QD[k], QDD[k]) + law[k]
        np.testing.assert_allclose(dn.inverse_dynamics(m, Q[k], QD[k], QDD[k]), ref, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(T[k], ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dn.joint_friction(m, QD), numpy_law(QD), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dn.joint_friction(m, QD[3]), numpy_law(QD[3])[0], rtol=1e-12, atol=1e-12)
    assert np.all(dn.joint_friction(m0, QD) == 0.0)
    # gravity stays gravity only: no offset, no friction
    np.testing.assert_allclose(dn.gravity(m, Q[1]), dn.gravity(m0, Q[1]), rtol=0, atol=1e-12)


def test_forward_and_hybrid_dynamics_solve_the_law(models):
    """(H + diag(Ia)) qdd = tau - C - g - tau_f(qd), H and C + g from Pinocchio."""
    import pinocchio as pin

    _, m = models
    pm = pin.buildModelFromUrdf(str(ns.ARM7))
    pdata = pm.createData()
    Q, QD, _ = _states(10, seed=1)
    tau = np.random.default_rng(2).normal(size=(10, 7)) * 5
    arm = np.array([ARM[n] for n in NAMES])
    for k in range(10):
        H = pin.crba(pm, pdata, Q[k])
        H = np.triu(H) + np.triu(H, 1).T + np.diag(arm)
        ref = np.linalg.solve(H, tau[k] - pin.nonLinearEffects(pm, pdata, Q[k], QD[k]) - numpy_law(QD[k])[0])
        np.testing.assert_allclose(dn.forward_dynamics(m, Q[k], QD[k], tau[k]), ref, rtol=1e-9, atol=1e-9)
        # hybrid: joints 2 and 5 given accelerations, the rest given torques; its torques and
        # accelerations satisfy the law's inverse dynamics
        qdd_in = np.random.default_rng(k).normal(size=7)
        known = np.array([False, True, False, False, True, False, False])
        fwd = [n for n, kn in zip(NAMES, known) if not kn]
        qdd, t_out = dn.hybrid_dynamics(m, Q[k], QD[k], np.where(known, qdd_in, 0.0), np.where(known, 0.0, tau[k]),
                                        fwd)
        np.testing.assert_allclose(qdd[known], qdd_in[known], atol=1e-12)
        full_tau = np.where(known, t_out, tau[k])
        np.testing.assert_allclose(pin.rnea(pm, pdata, Q[k], QD[k], qdd) + arm * qdd + numpy_law(QD[k])[0],
                                   full_tau, rtol=1e-9, atol=1e-9)


def test_slope_is_the_derivative(models):
    _, m = models
    _, QD, _ = _states(30, seed=3)
    QD[np.abs(QD) < 1e-3] = 0.3  # away from sign()'s jump
    h = 1e-7
    fd = (dn.joint_friction(m, QD + h) - dn.joint_friction(m, QD - h)) / (2 * h)
    np.testing.assert_allclose(dn.joint_friction_slope(m, QD), fd, rtol=1e-5, atol=1e-5)


def test_urdf_only_is_todays_behaviour():
    """friction=True alone: b and fc from <dynamics>, sign Coulomb, no offset."""
    text = ns.ARM7.read_text().replace('<joint name="joint2" type="revolute">',
                                       '<joint name="joint2" type="revolute"><dynamics damping="0.5" friction="2"/>')
    m = dn.load_model(text, friction=True)
    qd = np.array([0.0, 0.3, 0, 0, 0, 0, 0])
    assert dn.joint_friction(m, qd)[1] == pytest.approx(0.5 * 0.3 + 2.0)
    assert dn.joint_friction(m, np.zeros(7))[1] == 0.0
    # a JointFriction naming only the offset keeps the URDF's b and fc
    m2 = dn.load_model(text, friction=dn.JointFriction(offset={"joint2": 0.25}))
    assert dn.joint_friction(m2, qd)[1] == pytest.approx(0.5 * 0.3 + 2.0 + 0.25)


@pytest.mark.parametrize("law, words", [
    (dict(viscous={"joint9": 1.0}), ["friction.viscous", "unknown joint", "joint9"]),
    (dict(coulomb={"joint1": -1.0}), ["friction.coulomb", "joint1", ">= 0"]),
    (dict(coulomb_velocity=-0.1), ["friction.coulomb_velocity", ">= 0"]),
    (dict(stribeck_velocity={"joint3": math.nan}), ["friction.stribeck_velocity", "joint3", "finite"]),
    (dict(offset={"joint2": "1"}), ["friction.offset", "joint2", "number"]),
    (dict(coulomb={"joint4": 1.0}, stribeck={"joint4": -2.0}), ["joint4", "coulomb + stribeck"]),
])
def test_bad_coefficients_are_refused_by_name(law, words):
    with pytest.raises(ModelError) as e:
        dn.load_model(str(ns.ARM7), friction=dn.JointFriction(**law))
    for w in words:
        assert w in str(e.value), str(e.value)


def test_bad_velocities_are_refused(models):
    _, m = models
    with pytest.raises(InputError, match="qd"):
        dn.joint_friction(m, np.zeros(6))
    with pytest.raises(InputError, match=r"qd\[2\]"):
        dn.joint_friction(m, np.array([0, 0, np.nan, 0, 0, 0, 0.0]))
    with pytest.raises(ModelError, match="option friction"):
        dn.load_model(str(ns.ARM7), friction="yes")


def test_observer_takes_the_law_off_the_measured_torque(models):
    """A free motion (no external torque) measured with the law's torques: the observer's residual stays
    near zero; the same data on a model without the law shows tau_f as an 'external' torque."""
    m0, m = models
    t = np.arange(0, 2.0, 1e-3)
    Q, QD, QDD = sim.fourier_trajectory(m, t, np.random.default_rng(4), period=2.0)
    TAU = dn.inverse_dynamics_batch(m, Q, QD, QDD)
    ob, ob0 = dn.MomentumObserver(m, 100.0), dn.MomentumObserver(m0, 100.0)
    big = 0.0
    for k in range(t.size):
        r = ob.update(t[k], Q[k], QD[k], TAU[k])
        r0 = ob0.update(t[k], Q[k], QD[k], TAU[k])
        if k > 500:
            big = max(big, float(np.abs(r).max()))
            last0 = r0
    assert big < 0.02 * np.abs(TAU).max(), big
    # without the law (and its armature) the residual is what the model lacks: H qdd + C qd + g = tau +
    # tau_ext with tau = rigid + law gives tau_ext = -law
    np.testing.assert_allclose(last0, -numpy_law(QD[-1], QDD[-1])[0], atol=0.05 * np.abs(TAU).max())
