"""Identities of rigid-body dynamics (no oracle needed): H symmetric positive definite,
ID(FD(tau)) = tau, C = ID(q, qd, 0), quadratic velocity terms, energy balance, momentum
conservation of a floating base, J qd = link velocity, finite-difference kinematics."""
import numpy as np
import pytest

import urdfgen as ug
from conftest import assert_close, get_case

IDENT_CASES = ["random_0", "random_1", "random_mimic_20", "random_floating_10", "random_floating_mimic_22",
               "panda_mimic", "kinova_continuous", "baxter_branched", "solo12_floating"]


@pytest.fixture(scope="module", params=IDENT_CASES)
def icase(request):
    return get_case(request.param)


def test_H_symmetric_positive_definite(icase, dn):
    for (q, _, _, _) in icase.states:
        H = np.asarray(dn.mass_matrix(icase.model, q))
        assert H.shape == (icase.model.nv, icase.model.nv)
        assert_close(H, H.T, what="H symmetric")
        assert np.linalg.eigvalsh(H).min() > 0, "H positive definite"


def test_ID_of_FD_is_tau(icase, dn):
    for (q, qd, _, tau) in icase.states:
        qdd = dn.forward_dynamics(icase.model, q, qd, tau)
        assert_close(dn.inverse_dynamics(icase.model, q, qd, qdd), tau, rtol=1e-8, what="ID(FD(tau))")


def test_FD_of_ID_is_qdd(icase, dn):
    for (q, qd, qdd, _) in icase.states:
        tau = dn.inverse_dynamics(icase.model, q, qd, qdd)
        assert_close(dn.forward_dynamics(icase.model, q, qd, tau), qdd, rtol=1e-8, what="FD(ID(qdd))")


def test_C_is_ID_with_zero_qdd_and_H_columns(icase, dn):
    m = icase.model
    for (q, qd, qdd, _) in icase.states[:2]:
        C = dn.bias_forces(m, q, qd)
        assert_close(C, dn.inverse_dynamics(m, q, qd, np.zeros(m.nv)), what="C = ID(q, qd, 0)")
        H = dn.mass_matrix(m, q)
        assert_close(dn.inverse_dynamics(m, q, qd, qdd), H @ qdd + C, what="ID = H qdd + C")
        assert_close(dn.gravity(m, q), dn.inverse_dynamics(m, q, np.zeros(m.nv), np.zeros(m.nv)),
                     what="gravity = ID(q,0,0)")


def test_velocity_terms_quadratic(icase, dn):
    m = icase.model
    for (q, qd, _, _) in icase.states:
        g = dn.gravity(m, q)
        c1 = np.asarray(dn.bias_forces(m, q, qd)) - g
        c2 = np.asarray(dn.bias_forces(m, q, 2 * qd)) - g
        cm = np.asarray(dn.bias_forces(m, q, -qd)) - g
        assert_close(c2, 4 * c1, rtol=1e-8, what="C(2qd) - g = 4 (C(qd) - g)")
        assert_close(cm, c1, rtol=1e-8, what="C(-qd) - g = C(qd) - g")


def test_link_velocity_is_J_qd(icase, dn):
    m = icase.model
    for (q, qd, _, _) in icase.states[:2]:
        for l in icase.links:
            assert_close(dn.link_velocity(m, q, qd, l), np.asarray(dn.jacobian(m, q, l)) @ qd, what=f"v = J qd ({l})")


def test_com_kinetic_energy_bounded_by_total(icase, dn):
    """Koenig: 0.5 M |v_com|^2 <= 0.5 qd' H qd (v_com by central differences of center_of_mass)."""
    m = icase.model
    if m.floating_base:
        pytest.skip("finite differences along qd need a quaternion exponential: see the momentum tests")
    q, qd, _, _ = icase.states[0]
    h = 1e-6
    dc = (np.asarray(dn.center_of_mass(m, q + h * qd)) - np.asarray(dn.center_of_mass(m, q - h * qd))) / (2 * h)
    KE = 0.5 * qd @ np.asarray(dn.mass_matrix(m, q)) @ qd
    assert 0.5 * m.total_mass() * dc @ dc <= KE * (1 + 1e-6)


# ------------------------------------------------------------------------------------------------
# finite differences (fixed base)
# ------------------------------------------------------------------------------------------------
FD_CASES = ["random_0", "random_2", "random_mimic_21", "kinova_continuous", "ur5", "baxter_branched"]


def _skew_inv(S):
    return np.array([S[2, 1] - S[1, 2], S[0, 2] - S[2, 0], S[1, 0] - S[0, 1]]) / 2


@pytest.mark.parametrize("name", FD_CASES)
def test_fd_pose_derivative_is_link_velocity(dn, name):
    c = get_case(name)
    m = c.model
    h = 1e-6
    for (q, qd, _, _) in c.states[:2]:
        for l in c.links:
            Tp = np.asarray(dn.link_pose(m, q + h * qd, l))
            Tm = np.asarray(dn.link_pose(m, q - h * qd, l))
            T = np.asarray(dn.link_pose(m, q, l))
            dT = (Tp - Tm) / (2 * h)
            v = dT[:3, 3]
            w = _skew_inv(dT[:3, :3] @ T[:3, :3].T)
            assert_close(dn.link_velocity(m, q, qd, l), np.r_[v, w], rtol=1e-6,
                         what=f"d/dt pose vs link_velocity ({l})")


@pytest.mark.parametrize("name", FD_CASES)
def test_fd_velocity_derivative_is_bias_plus_J_qdd(dn, name):
    c = get_case(name)
    m = c.model
    h = 1e-5
    for (q, qd, qdd, _) in c.states[:2]:
        for l in c.links:
            def vel(t):
                return np.asarray(dn.link_velocity(m, q + t * qd + 0.5 * t * t * qdd, qd + t * qdd, l))

            d = (vel(h) - vel(-h)) / (2 * h)
            expect = np.asarray(dn.bias_acceleration(m, q, qd, l)) + np.asarray(dn.jacobian(m, q, l)) @ qdd
            assert_close(expect, d, rtol=1e-6, what=f"d/dt(J qd) vs bias_acceleration + J qdd ({l})")


# ------------------------------------------------------------------------------------------------
# hybrid consistency
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["random_0", "random_mimic_20", "kinova_continuous"])
def test_hybrid_consistent_with_FD_and_ID(dn, name):
    c = get_case(name)
    m = c.model
    names = list(m.joint_names)
    fwd = names[1::2]
    fidx = np.concatenate([np.arange(m.nv)[m.v_slice(j)] for j in fwd])
    iidx = np.setdiff1d(np.arange(m.nv), fidx)
    for (q, qd, _, tau) in c.states:
        qdd_fd = np.asarray(dn.forward_dynamics(m, q, qd, tau))
        qdd_in = qdd_fd.copy()
        qdd_in[fidx] = 0.0
        tau_in = np.asarray(tau, float).copy()
        tau_in[iidx] = 0.0
        qdd_h, tau_h = dn.hybrid_dynamics(m, q, qd, qdd_in, tau_in, fwd)
        assert_close(qdd_h, qdd_fd, rtol=1e-8, what="hybrid qdd = FD qdd")
        assert_close(tau_h, tau, rtol=1e-8, what="hybrid tau = tau given to FD")
        assert_close(tau_h, dn.inverse_dynamics(m, q, qd, qdd_h), rtol=1e-8, what="hybrid tau = ID(qdd)")


# ------------------------------------------------------------------------------------------------
# energy and momentum over an integration (RK4)
# ------------------------------------------------------------------------------------------------
def _rk4_fixed(dn, m, q, qd, dt, steps, tau):
    for _ in range(steps):
        k1q, k1v = qd, dn.forward_dynamics(m, q, qd, tau)
        k2q, k2v = qd + 0.5 * dt * k1v, dn.forward_dynamics(m, q + 0.5 * dt * k1q, qd + 0.5 * dt * k1v, tau)
        k3q, k3v = qd + 0.5 * dt * k2v, dn.forward_dynamics(m, q + 0.5 * dt * k2q, qd + 0.5 * dt * k2v, tau)
        k4q, k4v = qd + dt * k3v, dn.forward_dynamics(m, q + dt * k3q, qd + dt * k3v, tau)
        q = q + dt / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
        qd = qd + dt / 6 * (np.asarray(k1v) + 2 * np.asarray(k2v) + 2 * np.asarray(k3v) + np.asarray(k4v))
    return q, qd


def _energy(dn, m, q, qd, gvec):
    KE = 0.5 * qd @ np.asarray(dn.mass_matrix(m, q)) @ qd
    PE = -m.total_mass() * np.dot(gvec, dn.center_of_mass(m, q))
    return KE, PE


@pytest.mark.parametrize("gravity", [(0.0, 0.0, 0.0), (0.0, 0.0, -9.81)])
def test_energy_conservation_rk4(dn, gravity):
    txt, _ = ug.random_urdf(50, 6, p_fixed=0.15, p_prismatic=0.2, p_continuous=0.2)
    m = dn.load_model(txt, gravity=gravity)
    rng = np.random.default_rng(1)
    q, qd, _, _ = ug.random_state(m, rng)
    tau = np.zeros(m.nv)
    KE0, PE0 = _energy(dn, m, q, qd, np.asarray(gravity))
    dt, T = 1e-3, 1.0
    q1, qd1 = _rk4_fixed(dn, m, q, qd, dt, int(round(T / dt)), tau)
    KE1, PE1 = _energy(dn, m, q1, qd1, np.asarray(gravity))
    scale = max(abs(KE0), abs(KE1), abs(PE1 - PE0), 1e-12)
    assert abs((KE1 + PE1) - (KE0 + PE0)) <= 1e-6 * scale, (KE0, PE0, KE1, PE1)
    assert np.linalg.norm(qd1 - qd) > 1e-3, "the system moved"


def _quat_mul(a, b):  # x y z w
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])


def _qdot_floating(q, qd):
    """Time derivative of q = [p, quat(xyzw), joints] for qd = [v_body, w_body, joint rates]."""
    R = ug.quat_xyzw_to_R(*q[3:7])
    dp = R @ qd[:3]
    dquat = 0.5 * _quat_mul(q[3:7], np.r_[qd[3:6], 0.0])
    return np.r_[dp, dquat, qd[6:]]


def _world_momentum(dn, m, q, qd):
    """World-frame spatial momentum [p; L about world origin] from H's base rows (Featherstone
    Eq. 9.13: the base rows of H qd are the system momentum in base coordinates, about the base
    origin)."""
    H = np.asarray(dn.mass_matrix(m, q))
    hb = H[:6] @ qd
    R = ug.quat_xyzw_to_R(*q[3:7])
    p = R @ hb[:3]
    L = R @ hb[3:] + np.cross(q[:3], p)
    return np.r_[p, L]


@pytest.mark.parametrize("name", ["random_floating_10", "random_floating_11"])
def test_floating_momentum_conservation(dn, name):
    c = get_case(name)
    m = c.model.with_gravity((0.0, 0.0, 0.0))
    rng = np.random.default_rng(4)
    q, qd, _, _ = ug.random_state(m, rng)
    tau = np.r_[np.zeros(6), rng.uniform(-1, 1, m.nv - 6)]  # internal joint torques are allowed

    def f(q, qd):
        qn = q.copy()
        qn[3:7] /= np.linalg.norm(qn[3:7])
        return _qdot_floating(qn, qd), np.asarray(dn.forward_dynamics(m, qn, qd, tau))

    h0 = _world_momentum(dn, m, q, qd)
    dt = 1e-3
    for _ in range(300):
        k1 = f(q, qd)
        k2 = f(q + 0.5 * dt * k1[0], qd + 0.5 * dt * k1[1])
        k3 = f(q + 0.5 * dt * k2[0], qd + 0.5 * dt * k2[1])
        k4 = f(q + dt * k3[0], qd + dt * k3[1])
        q = q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        qd = qd + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        q[3:7] /= np.linalg.norm(q[3:7])
    h1 = _world_momentum(dn, m, q, qd)
    assert_close(h1, h0, rtol=1e-6, what="world spatial momentum conserved")
    # linear momentum = total mass * CoM velocity (instantaneous, via finite difference of CoM)
    # and the CoM moves on a straight line at constant speed: covered by conservation above.


def test_floating_linear_momentum_is_mass_times_com_velocity(dn):
    c = get_case("random_floating_11")
    m = c.model
    q, qd, _, _ = c.states[0]
    p = _world_momentum(dn, m, q, qd)[:3]
    h = 1e-6

    def step(s):
        qq = q + s * _qdot_floating(q, qd)
        qq[3:7] /= np.linalg.norm(qq[3:7])
        return np.asarray(dn.center_of_mass(m, qq))

    vcom = (step(h) - step(-h)) / (2 * h)
    assert_close(p, m.total_mass() * vcom, rtol=1e-6, what="p = M v_com")
