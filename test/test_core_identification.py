"""The inertial-parameter regressor and payload identification.

* Y(q, qd, qdd) pi == inverse dynamics, and Y and pi equal Pinocchio's computeJointTorqueRegressor
  and Inertia.toDynamicParameters (body by body, matched by joint name) on the oracle robots and
  random trees (floating bases, mimic joints: G^T Y).
* The link regressor against the difference of two inverse dynamics (with and without a payload on
  a link whose frame is offset from its body).
* Identification: exact on noise-free data made by Model.with_payload, and on data made by a
  Newton-Euler of the payload alone from the kinematics (Jacobian, J-dot qd: no RNEA, no Pinocchio);
  within 3 % mass and 5 mm CoM with 0.05 N m noise; refusals naming what is wrong.
"""
from __future__ import annotations

import numpy as np
import pytest

import urdfgen as ug
from conftest import ALL_CASES, assert_close, get_case

import dynamics_node as dn

ARM7 = ug.REPO / "urdf" / "arm7.urdf"
MASS, COM, I6 = 1.3, np.array([0.01, -0.02, 0.05]), (0.004, 0.0005, -0.0003, 0.005, 0.0002, 0.003)


def _I(i6):
    return np.array([[i6[0], i6[1], i6[2]], [i6[1], i6[3], i6[4]], [i6[2], i6[4], i6[5]]])


def _skew(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


# ------------------------------------------------------------------------------------ regressor
def _pin_regressor(case, q, qd, qdd):
    """Pinocchio's Y in our coordinates and body order: G^T Y_pin, column blocks by joint name."""
    import pinocchio as pin

    o = case.oracle
    Yp = pin.computeJointTorqueRegressor(o.m, o.d, o.q(q), o.v(qd), o.v(qdd))
    names = case.model._spec.body_joint
    cols = np.concatenate([np.arange(10) + 10 * (o.m.getJointId(n) - 1) for n in names]) if names else []
    return o.G.T @ Yp[:, cols]


def _pin_parameters(case):
    o = case.oracle
    return np.concatenate([o.m.inertias[o.m.getJointId(n)].toDynamicParameters() for n in case.model._spec.body_joint])


@pytest.mark.parametrize("name", ALL_CASES)
def test_regressor_equals_pinocchio_and_reproduces_inverse_dynamics(name):
    case = get_case(name)
    m = case.model
    pi = dn.inertial_parameters(m)
    assert pi.shape == (10 * m.nb,)
    assert_close(pi, _pin_parameters(case), what="inertial parameters vs Inertia.toDynamicParameters")
    for (q, qd, qdd, _) in case.states:
        Y = dn.regressor(m, q, qd, qdd)
        assert Y.shape == (m.nv, 10 * m.nb)
        assert_close(Y, _pin_regressor(case, q, qd, qdd), what="Y vs computeJointTorqueRegressor")
        assert_close(Y @ pi, case.oracle.rnea(q, qd, qdd), what="Y pi vs Pinocchio's RNEA")
        assert_close(Y @ pi, dn.inverse_dynamics(m, q, qd, qdd), what="Y pi vs ID")


@pytest.mark.parametrize("name", ALL_CASES)
def test_regressor_batch_equals_pinocchio_state_by_state(name):
    """The batch kernel (ancestors' S carried outward, closed-form body force columns) gives
    Pinocchio's computeJointTorqueRegressor for every row, mimic joints through G^T too."""
    case = get_case(name)
    m = case.model
    states = case.states
    Q = np.array([s[0] for s in states])
    QD = np.array([s[1] for s in states])
    QDD = np.array([s[2] for s in states])
    Y = dn.regressor_batch(m, Q, QD, QDD)
    assert Y.shape == (len(states), m.nv, 10 * m.nb)
    for k, (q, qd, qdd, _) in enumerate(states):
        assert_close(Y[k], _pin_regressor(case, q, qd, qdd), what=f"batch Y[{k}] vs computeJointTorqueRegressor")


def test_regressor_batch_refuses_bad_rows():
    m = dn.load_model(str(ARM7))
    Q = np.zeros((3, m.nq))
    Q[1, 2] = np.nan
    with pytest.raises(dn.InputError, match=r"Q\[1, 2\]"):
        dn.regressor_batch(m, Q, np.zeros((3, m.nv)), np.zeros((3, m.nv)))
    with pytest.raises(dn.InputError):
        dn.regressor_batch(m, np.zeros((3, m.nq)), np.zeros((2, m.nv)), np.zeros((3, m.nv)))


@pytest.mark.parametrize("seed", range(200, 208))
def test_regressor_identity_on_random_trees(seed):
    rng = np.random.default_rng(seed)
    floating = seed % 2 == 0
    txt, _ = ug.random_urdf(seed, int(rng.integers(3, 14)), n_mimic=1 if seed % 3 == 0 else 0, p_fixed=0.25,
                            branching=0.5)
    m = dn.load_model(txt, floating_base=floating)
    o = ug.PinOracle(txt, m, floating=floating)
    q, qd, qdd, _ = ug.random_state(m, rng, scale=3.0)
    Y = dn.regressor(m, q, qd, qdd)
    assert_close(Y @ dn.inertial_parameters(m), o.rnea(q, qd, qdd), what="Y pi vs Pinocchio's RNEA")


def test_regressor_leaves_out_armature_and_friction_and_honours_data():
    m = dn.load_model(ARM7, friction=True, armature=0.2)
    rng = np.random.default_rng(3)
    q, qd, qdd = rng.uniform(-1, 1, (3, 7))
    rigid = dn.load_model(ARM7)
    data = dn.Data(m)
    Y = dn.regressor(m, q, qd, qdd, data=data)
    assert_close(Y @ dn.inertial_parameters(m), dn.inverse_dynamics(rigid, q, qd, qdd), what="rigid part")
    ref = dn.Data(m)
    dn.inverse_dynamics(m, q, qd, qdd, data=ref)  # the Data holds the outward pass: v_i, a_i of this state
    assert np.abs(data.v).max() > 0
    assert_close(data.v, ref.v, what="data.v")
    assert_close(data.a, ref.a, what="data.a")


def test_parameters_include_payloads_and_order_is_pinocchios():
    m = dn.load_model(ARM7)
    mp = m.with_payload("tool0", MASS, COM, I6)
    b = mp.body_of("tool0")
    d = dn.inertial_parameters(mp) - dn.inertial_parameters(m)
    assert np.count_nonzero(d) and not np.any(np.delete(d, np.arange(10 * b, 10 * b + 10)))
    assert d[10 * b] == pytest.approx(MASS)


@pytest.mark.parametrize("link", ["tool0", "link7", "link3"])
def test_link_regressor_is_the_payload_torque(link):
    """Y_L pi_L (link frame, inertia about the link origin) == ID(with payload) - ID(without); tool0 is
    offset and rotated from its body (a fixed joint)."""
    m = dn.load_model(ARM7)
    mp = m.with_payload(link, MASS, COM, I6)
    pi_L = np.r_[MASS, MASS * COM, 0, 0, 0, 0, 0, 0]
    Ib = _I(I6) - MASS * _skew(COM) @ _skew(COM)  # Eq. 2.63 about the link origin
    pi_L[4:] = Ib[0, 0], Ib[0, 1], Ib[1, 1], Ib[0, 2], Ib[1, 2], Ib[2, 2]
    rng = np.random.default_rng(5)
    for _ in range(3):
        q, qd, qdd = rng.uniform(-2, 2, (3, 7))
        YL = dn.link_regressor(m, q, qd, qdd, link)
        assert YL.shape == (7, 10)
        assert_close(YL @ pi_L, dn.inverse_dynamics(mp, q, qd, qdd) - dn.inverse_dynamics(m, q, qd, qdd),
                     what=f"payload torque on {link}")


def test_link_regressor_on_the_fixed_base_is_zero_and_unknown_links_are_refused():
    m = dn.load_model(ARM7)
    assert not dn.link_regressor(m, np.zeros(7), np.zeros(7), np.zeros(7), m.root_link).any()
    with pytest.raises(dn.InputError, match="unknown link 'nope'"):
        dn.link_regressor(m, np.zeros(7), np.zeros(7), np.zeros(7), "nope")
    with pytest.raises(dn.InputError, match="qd has length 6"):
        dn.link_regressor(m, np.zeros(7), np.zeros(6), np.zeros(7), "tool0")


# ------------------------------------------------------------------------------------ identification
def sum_of_sines(model, seconds=20.0, n=400, seed=1):
    """Every joint a sum of three sines (0.05-0.25 Hz, 0.3-0.8 rad): positions and exact derivatives."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, seconds, n)[:, None, None]
    nj = model.nv
    A, w, ph = rng.uniform(0.3, 0.8, (nj, 3)), rng.uniform(0.3, 1.5, (nj, 3)), rng.uniform(0, 6, (nj, 3))
    Q = (A * np.sin(w * t + ph)).sum(axis=2)
    QD = (A * w * np.cos(w * t + ph)).sum(axis=2)
    QDD = (-A * w * w * np.sin(w * t + ph)).sum(axis=2)
    return Q, QD, QDD


def test_exact_on_noise_free_data_from_with_payload():
    m = dn.load_model(ARM7)
    Q, QD, QDD = sum_of_sines(m)
    TAU = dn.inverse_dynamics_batch(m.with_payload("tool0", MASS, COM, I6), Q, QD, QDD)
    p = dn.identify_payload(m, "tool0", Q, QD, QDD, TAU)
    assert isinstance(p, dn.Payload) and p.consistent and not p.warnings and p.samples == len(Q)
    np.testing.assert_allclose(p.mass, MASS, rtol=1e-8)
    np.testing.assert_allclose(p.center_of_mass, COM, atol=1e-8)
    np.testing.assert_allclose(p.inertia, I6, atol=1e-8)
    assert p.residual_rms < 1e-9 and 1 <= p.condition_number < 100


def _newton_euler_payload(m, link, q, qd, qdd, mass, com, Ic):
    """tau of a rigid body on ``link`` by Newton-Euler at its CoM in world axes, from the kinematics
    only: tau = J_c^T [m (a_c - g); I_w alpha + w x I_w w], J_c the CoM point's Jacobian."""
    T = dn.link_pose(m, q, link)
    R, r = T[:3, :3], T[:3, :3] @ com
    J = dn.jacobian(m, q, link)                       # [v_O; w] of the link origin, world axes
    Jc = np.vstack([J[:3] - _skew(r) @ J[3:], J[3:]])
    tw = J @ qd
    w = tw[3:]
    acc = J @ qdd + dn.bias_acceleration(m, q, qd, link)  # classical [a_O; alpha]
    a_c = acc[:3] + np.cross(acc[3:], r) + np.cross(w, np.cross(w, r))
    Iw = R @ Ic @ R.T
    F = np.r_[mass * (a_c - m.gravity), Iw @ acc[3:] + np.cross(w, Iw @ w)]
    return Jc.T @ F


def test_exact_on_data_from_an_independent_newton_euler():
    """TAU = ID(arm) + the payload's torque by a Newton-Euler of the payload alone from the Jacobian
    and J-dot qd: neither the RNEA's payload path nor Pinocchio."""
    m = dn.load_model(ARM7)
    Q, QD, QDD = sum_of_sines(m, n=60, seed=4)
    Ic = _I(I6)
    TAU = dn.inverse_dynamics_batch(m, Q, QD, QDD) + np.array(
        [_newton_euler_payload(m, "tool0", *s, MASS, COM, Ic) for s in zip(Q, QD, QDD)])
    p = dn.identify_payload(m, "tool0", Q, QD, QDD, TAU)
    np.testing.assert_allclose(p.mass, MASS, rtol=1e-8)
    np.testing.assert_allclose(p.center_of_mass, COM, atol=1e-8)
    np.testing.assert_allclose(p.inertia, I6, atol=1e-8)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_within_3_percent_and_5_mm_with_noise(seed):
    m = dn.load_model(ARM7)
    Q, QD, QDD = sum_of_sines(m, seconds=30.0, n=1500, seed=seed)
    TAU = dn.inverse_dynamics_batch(m.with_payload("tool0", MASS, COM, I6), Q, QD, QDD)
    TAU += np.random.default_rng(seed).normal(0.0, 0.05, TAU.shape)
    p = dn.identify_payload(m, "tool0", Q, QD, QDD, TAU)
    assert abs(p.mass - MASS) < 0.03 * MASS, p
    assert np.linalg.norm(np.subtract(p.center_of_mass, COM)) < 0.005, p
    assert 0.04 < p.residual_rms < 0.06  # the noise, nothing of the payload left


def test_the_model_payload_on_the_link_is_replaced_not_added():
    m = dn.load_model(ARM7).with_payload("tool0", 5.0, (0, 0, 0.1), (0.01, 0, 0, 0.01, 0, 0.01))
    Q, QD, QDD = sum_of_sines(m, n=100)
    TAU = dn.inverse_dynamics_batch(m.with_payload("tool0", MASS, COM, I6), Q, QD, QDD)
    assert dn.identify_payload(m, "tool0", Q, QD, QDD, TAU).mass == pytest.approx(MASS, rel=1e-8)


def test_motionless_data_is_refused_naming_the_unobservable_parameters():
    m = dn.load_model(ARM7)
    mp = m.with_payload("tool0", MASS, COM, I6)
    q = np.array([0.1, 0.7, -0.3, -1.1, 0.4, 0.9, -0.2])
    Q, Z = np.tile(q, (50, 1)), np.zeros((50, 7))
    with pytest.raises(dn.InputError) as e:
        dn.identify_payload(m, "tool0", Q, Z, Z, dn.gravity_batch(mp, Q))
    msg = str(e.value)
    assert "rank 3 of 10" in msg
    for name in ("Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz"):  # no rotation: no inertia
        assert name in msg
    assert "undetermined combinations" in msg and "m*c" in msg  # one lever along gravity
    assert "determine m," not in msg  # the mass is determined


def test_other_refusals_name_the_problem():
    m = dn.load_model(ARM7)
    Q, QD, QDD = sum_of_sines(m, n=20)
    TAU = dn.inverse_dynamics_batch(m, Q, QD, QDD)
    with pytest.raises(dn.InputError, match=r"too few samples: 1 given, at least 2 needed"):
        dn.identify_payload(m, "tool0", Q[:1], QD[:1], QDD[:1], TAU[:1])
    with pytest.raises(dn.InputError, match="welded to the fixed base"):
        dn.identify_payload(m, m.root_link, Q, QD, QDD, TAU)
    with pytest.raises(dn.InputError, match="unknown link"):
        dn.identify_payload(m, "gripper", Q, QD, QDD, TAU)
    with pytest.raises(dn.InputError, match="same number of rows"):
        dn.identify_payload(m, "tool0", Q, QD[:5], QDD, TAU)
    with pytest.raises(dn.InputError, match=r"TAU must be an N x 7"):
        dn.identify_payload(m, "tool0", Q, QD, QDD, TAU[:, :6])
    bad = TAU.copy()
    bad[4, 2] = np.nan
    with pytest.raises(dn.InputError, match=r"TAU\[4, 2\] is not finite"):
        dn.identify_payload(m, "tool0", Q, QD, QDD, bad)
    # link1 is carried by joint1 alone: one torque per sample, 10 samples at least
    with pytest.raises(dn.InputError, match=r"at least 10 needed .*1 joint torque"):
        dn.identify_payload(m, "link1", Q[:9], QD[:9], QDD[:9], TAU[:9])


def test_inconsistent_results_are_flagged():
    """Torques of a 'payload' of negative mass (no body has it): returned, flagged, with reasons."""
    m = dn.load_model(ARM7)
    Q, QD, QDD = sum_of_sines(m, n=100)
    TAU = 2 * dn.inverse_dynamics_batch(m, Q, QD, QDD) - dn.inverse_dynamics_batch(
        m.with_payload("tool0", MASS, COM, I6), Q, QD, QDD)
    p = dn.identify_payload(m, "tool0", Q, QD, QDD, TAU)
    assert p.mass == pytest.approx(-MASS) and not p.consistent
    assert any("mass" in w and "not positive" in w for w in p.warnings)
    # a point mass's inertia is zero: consistent (semi-definite), at the limit
    TAU = dn.inverse_dynamics_batch(m.with_payload("tool0", MASS, COM, (0,) * 6), Q, QD, QDD)
    assert dn.identify_payload(m, "tool0", Q, QD, QDD, TAU).consistent


def test_triangle_inequality_breach_is_flagged():
    from dynamics_node.algorithms.estimation.payload import _physical
    assert _physical(1.0, np.diag([1.0, 1.0, 3.0])) and "triangle" in _physical(1.0, np.diag([1.0, 1.0, 3.0]))[0]
    assert "semi-definite" in _physical(1.0, np.diag([1.0, -1.0, 1.0]))[0]
    assert _physical(1.0, np.diag([1.0, 1.0, 2.0])) == []


def test_mimic_and_floating_base_models():
    """Identification on a floating base with mimic joints (the slow route of the regressor)."""
    txt, _ = ug.random_urdf(22, 9, n_mimic=2)
    m = dn.load_model(txt, floating_base=True)
    link = m.link_names[-1]
    rng = np.random.default_rng(0)
    rows = [ug.random_state(m, rng) for _ in range(40)]
    Q, QD, QDD = (np.array([r[k] for r in rows]) for k in range(3))
    TAU = dn.inverse_dynamics_batch(m.with_payload(link, MASS, COM, I6), Q, QD, QDD)
    p = dn.identify_payload(m, link, Q, QD, QDD, TAU)
    np.testing.assert_allclose([p.mass, *p.center_of_mass, *p.inertia], [MASS, *COM, *I6], atol=1e-7)
