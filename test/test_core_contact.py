"""The library part of contacts: contact forward dynamics with Coulomb friction (Featherstone §11.3-11.5),
impact (§11.7), soft contact (§11.8).

Oracles:
- Pinocchio (test-only): forwardDynamics with the contact points' Jacobians and drifts, constraintDynamics
  (CONTACT_3D RigidConstraintModel) and impulseDynamics, bilateral, where the contact is compressive and
  sticking (the normal is chosen along Pinocchio's force, so the unilateral solution must equal it);
- closed forms: a box on four corners carries m g, pushed below mu m g it stays, above it slides with
  (F - mu m g)/m; a ball dropped with restitution e rebounds with -e v; a sliding contact's force is
  -mu f_n v_t/|v_t|;
- conditions checked from the results with Pinocchio's H, nonlinear effects, point Jacobians and classical
  accelerations (never from the code under test): H qdd + C = tau + J^T f, f_n >= 0, a_n >= 0,
  f_n a_n = 0, |f_t| <= mu f_n, sticking a_t = 0, sliding opposes the velocity (or the acceleration
  from rest), to 1e-9 relative; hypothesis over random trees and contacts; impacts never gain energy.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import urdfgen as ug
from conftest import assert_close

import dynamics_node as dn

pin = pytest.importorskip("pinocchio")
REPO = ug.pathlib.Path(__file__).resolve().parent.parent
ARM = REPO / "urdf" / "arm7.urdf"
TOL = 1e-9


def box_urdf(m=2.0, a=0.2, b=0.15, c=0.1, name="box"):
    """One link, a solid box of half-sizes a, b, c (CoM at the link origin)."""
    ixx, iyy, izz = m * (b * b + c * c) / 3, m * (a * a + c * c) / 3, m * (a * a + b * b) / 3
    return (f'<?xml version="1.0"?><robot name="{name}"><link name="box"><inertial><origin xyz="0 0 0"/>'
            f'<mass value="{m}"/><inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{iyy}" iyz="0" izz="{izz}"/>'
            '</inertial></link></robot>')


def corners(a=0.2, b=0.15, c=0.1):
    return [(sx * a, sy * b, -c) for sx in (-1, 1) for sy in (-1, 1)]


class Oracle:
    """Pinocchio in our coordinates, with an operational frame per contact point."""

    def __init__(self, xml, model, contacts, floating=False):
        self.o = ug.PinOracle(xml, model, floating=floating)
        pm = pin.Model(self.o.m)
        self.fids = []
        for j, c in enumerate(contacts):
            fid = pm.getFrameId(c.link, pin.FrameType.BODY)
            fr = pm.frames[fid]
            pl = fr.placement * pin.SE3(np.eye(3), np.asarray(c.point, float))
            self.fids.append(pm.addFrame(pin.Frame(f"c{j}", fr.parentJoint, fid, pl, pin.FrameType.OP_FRAME)))
        self.pm, self.pd = pm, pm.createData()
        self.contacts = contacts

    def terms(self, q, qd, f_ext=None):
        """(H, C, J (3k x nv, world), drift (3k): classical accelerations at qdd = 0, v (3k)) in our coordinates."""
        o, pm, pd = self.o, self.pm, self.pd
        H = o.crba(q)
        C = o.rnea(q, qd, np.zeros(len(qd)), f_ext)
        qp, vp = o.q(q), o.v(qd)
        pin.forwardKinematics(pm, pd, qp, vp, np.zeros(pm.nv))
        pin.updateFramePlacements(pm, pd)
        pin.computeJointJacobians(pm, pd, qp)
        J, g, v = [], [], []
        for fid in self.fids:
            Jf = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED)[:3] @ o.G
            J.append(Jf)
            g.append(pin.getFrameClassicalAcceleration(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED).linear)
            v.append(Jf @ qd)
        return H, C, np.vstack(J), np.concatenate(g), np.concatenate(v)


def check_conditions(orc, q, qd, tau, r, f_ext=None, rest_speed=1e-9):
    """Every condition of the contact problem, from Pinocchio's terms and the result alone."""
    H, C, J, g, v = orc.terms(q, qd, f_ext)
    f = np.asarray(r.forces).reshape(-1)
    lhs = H @ r.qdd + C
    rhs = tau + J.T @ f
    assert_close(lhs, rhs, TOL, "H qdd + C = tau + J^T f")
    a = J @ r.qdd + g
    fs = max(float(np.max(np.abs(f), initial=0.0)), 1e-300)
    Af = J @ np.linalg.solve(H, J.T @ f)
    as_ = max(float(np.max(np.abs(a))), float(np.max(np.abs(g))), float(np.max(np.abs(Af))), 1e-300)
    for j, c in enumerate(orc.contacts):
        n = c.normal
        fj, aj, vj = f[3 * j:3 * j + 3], a[3 * j:3 * j + 3], v[3 * j:3 * j + 3]
        fn, an = fj @ n, aj @ n
        ft, at, vt = fj - fn * n, aj - an * n, vj - (vj @ n) * n
        s = r.states[j]
        assert s in ("separating", "sticking", "sliding")
        assert fn >= -TOL * fs and an >= -TOL * as_, (j, fn, an)
        assert abs(fn * an) <= TOL * fs * as_ * 10, (j, fn, an)
        if c.friction != math.inf:
            assert np.linalg.norm(ft) <= c.friction * fn + TOL * fs, (j, ft, fn)
        if s == "separating":
            assert np.all(np.abs(fj) <= TOL * fs)
        elif s == "sticking":
            assert np.linalg.norm(at) <= TOL * as_ * 10 and abs(an) <= TOL * as_ * 10, (j, at, an)
        else:
            assert abs(an) <= TOL * as_ * 10
            if np.linalg.norm(vt) > rest_speed:
                expect = -c.friction * fn * vt / np.linalg.norm(vt)
                assert np.linalg.norm(ft - expect) <= TOL * fs * 10, (j, ft, expect)
            elif c.friction > 0:
                assert abs(np.linalg.norm(ft) - c.friction * fn) <= TOL * fs * 10
                if np.linalg.norm(at) > TOL * as_ * 10 and fn > TOL * fs:  # opposes the slip acceleration
                    cosang = -(ft @ at) / (np.linalg.norm(ft) * np.linalg.norm(at))
                    assert cosang >= 1 - 1e-8, (j, ft, at)
    return a


# ------------------------------------------------------------------------------------------ Pinocchio
def _arm():
    return dn.load_model(str(ARM)), ARM.read_text()


@pytest.mark.parametrize("seed", range(6))
def test_bilateral_sticking_equals_pinocchio_forward_dynamics(seed):
    """Normal chosen along Pinocchio's bilateral force: the unilateral solution must be that one."""
    m, xml = _arm()
    rng = np.random.default_rng(seed)
    q, qd, _, tau = ug.random_state(m, rng)
    tau = tau * 5
    probe = [dn.Contact("tool0", point=(0, 0.02, 0.05)), dn.Contact("link4", point=(0.03, 0, 0.1))][: 1 + seed % 2]
    orc = Oracle(xml, m, probe)
    J0 = orc.terms(q, qd)[2]
    qd = qd - np.linalg.pinv(J0) @ (J0 @ qd)  # the contact points at rest: no sliding
    H, C, J, g, v = orc.terms(q, qd)
    pq, pv = orc.o.q(q), orc.o.v(qd)
    a_pin = pin.forwardDynamics(orc.pm, orc.pd, pq, pv, orc.o.G @ tau, J @ orc.o.G.T, g, 0.0)
    lam = np.asarray(orc.pd.lambda_c).copy()  # M a + b = tau + J^T lambda_c: the force on the robot
    qdd_pin = orc.o.G.T @ a_pin
    assert_close(H @ qdd_pin + C, tau + J.T @ lam, 1e-8, "pinocchio KKT")
    contacts = [dn.Contact(c.link, c.point, normal=lam[3 * j:3 * j + 3], friction=0.8) for j, c in enumerate(probe)]
    r = dn.contact_forward_dynamics(m, q, qd, tau, contacts)
    assert r.states == ("sticking",) * len(contacts)
    assert_close(r.qdd, qdd_pin, TOL, "qdd vs pinocchio")
    assert_close(r.forces.reshape(-1), lam, TOL, "forces vs pinocchio")
    check_conditions(Oracle(xml, m, contacts), q, qd, tau, r)


def test_bilateral_equals_pinocchio_constraint_dynamics():
    m, xml = _arm()
    q, qd, _, tau = ug.random_state(m, np.random.default_rng(11))
    o = ug.PinOracle(xml, m)
    fid = o.m.getFrameId("tool0", pin.FrameType.BODY)
    fr = o.m.frames[fid]
    P = fr.placement * pin.SE3(np.eye(3), np.array([0.0, 0.0, 0.05]))
    cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, o.m, fr.parentJoint, P,
                                  pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
    cms = pin.StdVec_RigidConstraintModel()
    cms.append(cm)
    cds = pin.StdVec_RigidConstraintData()
    cds.append(cm.createData())
    pin.initConstraintDynamics(o.m, o.d, cms, cds)
    a = pin.constraintDynamics(o.m, o.d, o.q(q), o.v(qd), o.G @ tau, cms, cds, pin.ProximalSettings(1e-14, 1e-12, 1))
    F = np.asarray(cds[0].contact_force.linear).copy()
    c = dn.Contact("tool0", point=(0, 0, 0.05), normal=F, friction=math.inf)
    H, C, J, _, _ = Oracle(xml, m, [c]).terms(q, qd)
    assert_close(H @ (o.G.T @ a) + C, tau + J.T @ F, 1e-8, "constraintDynamics: F is the force on the robot")
    r = dn.contact_forward_dynamics(m, q, qd, tau, [c])
    assert r.states == ("sticking",)
    assert_close(r.qdd, o.G.T @ a, TOL, "qdd vs constraintDynamics")
    assert_close(r.forces[0], F, TOL, "force vs constraintDynamics")


@pytest.mark.parametrize("e", [0.0, 0.4, 1.0])
def test_impact_equals_pinocchio_impulse_dynamics(e):
    """Pinocchio's impulseDynamics imposes J v+ = -e J v- (bilateral). Our law is Newton's on the normal
    with v_t+ = 0 when sticking: the same equations when the contact approaches along its normal
    (v_t- = 0), which the normal is chosen for here; the impulse has a positive normal component
    (A is positive definite) and no slip is allowed (friction inf), so it is compressive and sticking."""
    m, xml = _arm()
    q, qd, _, _ = ug.random_state(m, np.random.default_rng(5))
    probe = [dn.Contact("tool0", point=(0, 0.02, 0.05))]
    orc = Oracle(xml, m, probe)
    H, C, J, g, v = orc.terms(q, qd)
    vp = pin.impulseDynamics(orc.pm, orc.pd, orc.o.q(q), orc.o.v(qd), J @ orc.o.G.T, e, 0.0)
    P = np.asarray(orc.pd.impulse_c).copy()
    qd_pin = orc.o.G.T @ vp
    assert_close(H @ (qd_pin - qd), J.T @ P, 1e-8, "pinocchio impulse balance")
    c = dn.Contact("tool0", point=(0, 0.02, 0.05), normal=-(J @ qd), friction=math.inf)
    assert P @ c.normal > 0
    r = dn.impact(m, q, qd, [c], restitution=e)
    assert r.states == ("sticking",)
    assert_close(r.qd, qd_pin, TOL, "qd+ vs impulseDynamics")
    assert_close(r.impulses[0], P, TOL, "impulse vs impulseDynamics")
    assert 0.5 * r.qd @ H @ r.qd <= 0.5 * qd @ H @ qd * (1 + 1e-12)


# ------------------------------------------------------------------------------------------ closed forms
M_BOX, G = 2.0, 9.81


def _box():
    xml = box_urdf(M_BOX)
    return dn.load_model(xml, floating_base=True), xml


def _box_state(vx=0.0):
    q = np.array([0, 0, 0.1, 0, 0, 0, 1.0])
    qd = np.zeros(6)
    qd[0] = vx
    return q, qd


def test_box_resting_on_four_corners_carries_mg():
    m, xml = _box()
    cs = [dn.Contact("box", p, friction=0.5) for p in corners()]
    q, qd = _box_state()
    r = dn.contact_forward_dynamics(m, q, qd, np.zeros(6), cs)
    assert_close(r.qdd, np.zeros(6), TOL, "at rest")
    assert_close(r.forces.sum(0), [0, 0, M_BOX * G], TOL, "total force = m g")
    assert_close(r.forces[:, 2], np.full(4, M_BOX * G / 4), TOL, "minimum-norm split: m g / 4 each")
    assert r.states == ("sticking",) * 4
    check_conditions(Oracle(xml, m, cs, floating=True), q, qd, np.zeros(6), r)


@pytest.mark.parametrize("push", [0.3, 0.9, 1.2, 2.5])
def test_box_pushed_stays_below_mu_mg_slides_above(push):
    """Horizontal force F = push * mu m g at the CoM: F < mu m g stays; F > mu m g accelerates at
    (F - mu m g)/m, with every corner at the cone's edge opposing the slip."""
    mu = 0.5
    m, xml = _box()
    cs = [dn.Contact("box", p, friction=mu) for p in corners()]
    q, qd = _box_state()
    F = push * mu * M_BOX * G
    f_ext = {"box": (F, 0, 0, 0, 0, 0)}
    r = dn.contact_forward_dynamics(m, q, qd, np.zeros(6), cs, f_ext=f_ext)
    expect = np.zeros(6)
    if push < 1:
        assert r.states == ("sticking",) * 4
        assert_close(r.forces.sum(0), [-F, 0, M_BOX * G], TOL)
    else:
        expect[0] = (F - mu * M_BOX * G) / M_BOX
        assert r.states == ("sliding",) * 4
        assert_close(r.forces[:, 0], -mu * r.forces[:, 2], TOL, "each corner at the cone's edge, opposing")
    assert_close(r.qdd, expect, TOL, "box acceleration")
    check_conditions(Oracle(xml, m, cs, floating=True), q, qd, np.zeros(6), r, f_ext=f_ext)


@pytest.mark.parametrize("mu", [0.2, 0.3, 0.6, 1.0])
def test_box_on_a_slope_rests_when_mu_exceeds_tan_theta_else_slides_at_g_sin_minus_mu_cos(mu):
    """A box at rest on a plane tilted by theta = 20 deg about y (world normal (sin, 0, cos)): with
    mu >= tan theta it stays and the floor carries m g (opposite to gravity); below, it slides down
    the slope, along the box's x axis, at g (sin theta - mu cos theta) (the textbook incline)."""
    th = math.radians(20.0)
    m, xml = _box()
    n = (math.sin(th), 0.0, math.cos(th))
    cs = [dn.Contact("box", p, normal=n, friction=mu) for p in corners()]
    q = np.array([0, 0, 0.1, 0, math.sin(th / 2), 0, math.cos(th / 2)])   # rotated about y by theta
    qd = np.zeros(6)
    r = dn.contact_forward_dynamics(m, q, qd, np.zeros(6), cs)
    expect = np.zeros(6)
    if mu >= math.tan(th):
        assert r.states == ("sticking",) * 4
        assert_close(r.forces.sum(0), [0, 0, M_BOX * G], TOL, "the floor carries m g")
    else:
        assert r.states == ("sliding",) * 4
        expect[0] = G * (math.sin(th) - mu * math.cos(th))   # root-frame linear acceleration: x is downhill
    assert_close(r.qdd, expect, TOL, "box on the slope")
    check_conditions(Oracle(xml, m, cs, floating=True), q, qd, np.zeros(6), r)


@pytest.mark.parametrize("push", [0.0, 0.5, 1.5])
def test_sliding_box_friction_opposes_velocity(push):
    mu = 0.4
    m, xml = _box()
    cs = [dn.Contact("box", p, friction=mu) for p in corners()]
    q, qd = _box_state(vx=-1.0)
    qd[1] = 0.5  # sliding along (-1, 0.5)
    F = push * mu * M_BOX * G
    r = dn.contact_forward_dynamics(m, q, qd, np.zeros(6), cs, f_ext={"box": (F, 0, 0, 0, 0, 0)})
    d = np.array([-1.0, 0.5]) / math.hypot(1.0, 0.5)
    assert r.states == ("sliding",) * 4
    for f in r.forces:
        assert_close(f[:2], -mu * f[2] * d, TOL, "f_t = -mu f_n v_t/|v_t|")
    expect = np.zeros(6)
    expect[:2] = (np.array([F, 0.0]) - mu * M_BOX * G * d) / M_BOX
    assert_close(r.qdd, expect, TOL, "sliding box acceleration")
    check_conditions(Oracle(xml, m, cs, floating=True), q, qd, np.zeros(6), r, f_ext={"box": (F, 0, 0, 0, 0, 0)})


def _ball(rad=0.1, mass=1.5):
    i = 0.4 * mass * rad * rad
    xml = (f'<?xml version="1.0"?><robot name="ball"><link name="ball"><inertial><mass value="{mass}"/>'
           f'<inertia ixx="{i}" ixy="0" ixz="0" iyy="{i}" iyz="0" izz="{i}"/></inertial></link></robot>')
    return dn.load_model(xml, floating_base=True), xml


@pytest.mark.parametrize("e", [0.0, 0.3, 0.8, 1.0])
def test_ball_rebounds_with_minus_e_v(e):
    m, _ = _ball()
    q = np.array([0, 0, 0.1, 0, 0, 0, 1.0])
    qd = np.array([0, 0, -3.0, 0, 0, 0])
    r = dn.impact(m, q, qd, [dn.Contact("ball", (0, 0, -0.1), friction=0.7)], restitution=e)
    assert_close(r.qd, [0, 0, 3.0 * e, 0, 0, 0], TOL, "rebound")
    assert_close(r.impulses[0], [0, 0, 1.5 * 3.0 * (1 + e)], TOL, "impulse m (1 + e) v")
    assert r.states == ("sticking",)


def test_leaving_contact_gets_no_impulse():
    m, _ = _ball()
    q = np.array([0, 0, 0.1, 0, 0, 0, 1.0])
    qd = np.array([0.3, 0, 2.0, 0, 0, 0])
    r = dn.impact(m, q, qd, [dn.Contact("ball", (0, 0, -0.1))], restitution=0.5)
    assert r.states == ("separating",)
    assert np.all(r.impulses == 0.0) and np.array_equal(r.qd, qd)


@pytest.mark.parametrize("e", [0.0, 0.5, 1.0])
def test_oblique_ball_impact_sticks_with_newton_restitution_on_the_normal(e):
    """A ball hits the floor obliquely, enough friction to stick: Newton's law on the normal
    (v_n+ = -e v_n-) and the contact point's tangential velocity stopped (v_t+ = 0). For a solid ball
    (I = 2/5 m r^2) the centre keeps 5/7 of its tangential speed and spins to roll: omega = v_x+ / r.
    Kinetic energy never grows."""
    m, _ = _ball()
    q = np.array([0, 0, 0.1, 0, 0, 0, 1.0])
    qd = np.array([1.0, 0, -2.0, 0, 0, 0])
    r = dn.impact(m, q, qd, [dn.Contact("ball", (0, 0, -0.1), friction=2.0)], restitution=e)
    assert r.states == ("sticking",)
    assert_close(r.qd[2], 2.0 * e, TOL, "v_n+ = -e v_n-")
    assert_close(r.qd[0], 5.0 / 7.0, TOL, "tangential: 5/7 of the speed kept")
    assert_close(r.qd[4], r.qd[0] / 0.1, TOL, "the point of contact at rest: rolling")
    H = dn.mass_matrix(m, q)
    assert r.qd @ H @ r.qd <= qd @ H @ qd * (1 + 1e-12)


def test_oblique_ball_impact_slides_when_the_cone_is_too_narrow():
    """Plastic impact, tangential speed large against the normal one: the impulse lies on the cone's
    edge opposing the tangential velocity after the impact, and energy is lost."""
    m, _ = _ball()
    q = np.array([0, 0, 0.1, 0, 0, 0, 1.0])
    qd = np.array([4.0, 0, -1.0, 0, 0, 0])
    mu = 0.2
    r = dn.impact(m, q, qd, [dn.Contact("ball", (0, 0, -0.1), friction=mu)])
    assert r.states == ("sliding",)
    P = r.impulses[0]
    assert_close(P[2], 1.5 * 1.0, TOL)
    assert_close(P[0], -mu * P[2], TOL)
    assert_close(r.qd[2], 0.0, TOL)
    H = dn.mass_matrix(m, q)
    assert r.qd @ H @ r.qd < qd @ H @ qd
