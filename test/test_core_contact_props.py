"""Property tests of contact forward dynamics and impact on random trees (test/urdfgen.py:
fixed and floating bases, prismatic and continuous joints, mimic joints), random contacts (links,
points, normals, mu in {0, 0.3, 1, inf}) and random states, some with the contact points at rest.

Every result is checked against Pinocchio's terms (test_core_contact.check_conditions): the equation of
motion, complementarity, the cone, sticking and sliding, to 1e-9 relative. Random normals often make
problems with no solution (Painlevé; over-constrained points whose J̇q̇ leaves the range of J): an
InputError is allowed there, and two independent oracles say when it is not: frictionless problems
(an LCP with A positive semidefinite) are solvable exactly when they are feasible (Cottle et al.;
scipy's linprog decides), and a frictional problem at rest whose bilateral solution (minimum-norm, from
Pinocchio's terms) lies strictly inside every cone has a solution, so it must be solved.
Impacts: the conditions on the velocities after, and the kinetic energy never grows for e in [0, 1].
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import urdfgen as ug
from conftest import assert_close
from test_core_contact import TOL, Oracle, check_conditions

import dynamics_node as dn

pin = pytest.importorskip("pinocchio")
MUS = (0.0, 0.3, 1.0, math.inf)


def _case(seed, floating, n_mimic=0):
    xml, _ = ug.random_urdf(seed, n_links=6, n_mimic=n_mimic)
    m = dn.load_model(xml, floating_base=floating)
    return m, xml


def _contacts(m, rng, k):
    movable = [l for l in m.link_names if m.body_of(l) >= 0]
    out = []
    for _ in range(k):
        n = rng.normal(size=3)
        out.append(dn.Contact(movable[int(rng.integers(len(movable)))], point=rng.uniform(-0.2, 0.2, 3), normal=n,
                              friction=MUS[int(rng.integers(len(MUS)))]))
    return out


def _state(m, rng, orc, at_rest):
    q, qd, _, tau = ug.random_state(m, rng)
    tau = tau * 3
    if at_rest:  # the contact points at rest: the sticking / starting-to-slip cases
        J = orc.terms(q, qd)[2]
        qd = qd - np.linalg.pinv(J) @ (J @ qd)
    return q, qd, tau


def _run_fd(seed, floating, n_mimic, k, at_rest):
    rng = np.random.default_rng(seed)
    m, xml = _case(seed % 17, floating, n_mimic)
    cs = _contacts(m, rng, k)
    orc = Oracle(xml, m, cs, floating=floating)
    q, qd, tau = _state(m, rng, orc, at_rest)
    f_ext = {cs[0].link: rng.normal(size=6)} if seed % 3 == 0 else None
    try:
        r = dn.contact_forward_dynamics(m, q, qd, tau, cs, f_ext=f_ext)
    except dn.InputError as e:
        assert "no contact forces satisfy" in str(e)
        return False
    check_conditions(orc, q, qd, tau, r, f_ext=f_ext)
    return True


@pytest.mark.parametrize("floating,n_mimic", [(False, 0), (True, 0), (False, 1)])
def test_random_trees_conditions_hold(floating, n_mimic):
    solved = sum(_run_fd(1000 + seed, floating, n_mimic, 1 + seed % 5, at_rest=seed % 2 == 0) for seed in range(40))
    assert solved >= 20, f"only {solved} of 40 random contact problems solved"  # most are (26-36 seen)


def test_frictionless_solved_exactly_when_feasible():
    """Cottle et al.: an LCP with A positive semidefinite has a solution iff {f >= 0, A f + b >= 0} is
    non-empty. The normal rows of A and b come from Pinocchio; scipy's linprog decides feasibility."""
    from scipy.optimize import linprog

    both = 0
    for seed in range(120):
        rng = np.random.default_rng(5000 + seed)
        floating = seed % 2 == 1
        m, xml = _case(seed % 17, floating)
        k = 1 + seed % 6
        cs = [dn.Contact(c.link, c.point, c.normal, friction=0.0) for c in _contacts(m, rng, k)]
        orc = Oracle(xml, m, cs, floating=floating)
        q, qd, _, tau = ug.random_state(m, rng)
        H, C, J, g, _ = orc.terms(q, qd)
        N = J.reshape(k, 3, -1)
        Jn = np.einsum("kij,ki->kj", N, np.array([c.normal for c in cs]))
        gn = np.einsum("ki,ki->k", g.reshape(k, 3), np.array([c.normal for c in cs]))
        A = Jn @ np.linalg.solve(H, Jn.T)
        b = Jn @ np.linalg.solve(H, tau - C) + gn
        feasible = linprog(np.zeros(k), A_ub=-A, b_ub=b, bounds=[(0, None)] * k, method="highs").status == 0
        try:
            r = dn.contact_forward_dynamics(m, q, qd, tau, cs)
            solved = True
        except dn.InputError:
            solved = False
        assert solved == feasible, (seed, solved, feasible)
        if solved:
            check_conditions(orc, q, qd, tau, r)
            both += 1
    assert both >= 40


def test_frictional_with_bilateral_solution_inside_the_cones_is_solved():
    tried = 0
    for seed in range(150):
        rng = np.random.default_rng(3000 + seed)
        floating = seed % 2 == 1
        m, xml = _case(seed % 17, floating)
        k = 1 + seed % 6
        cs = _contacts(m, rng, k)
        orc = Oracle(xml, m, cs, floating=floating)
        q, qd, tau = _state(m, rng, orc, True)
        H, C, J, g, _ = orc.terms(q, qd)
        A = J @ np.linalg.solve(H, J.T)
        b = J @ np.linalg.solve(H, tau - C) + g
        f = -np.linalg.pinv(A, rcond=1e-12) @ b
        if np.linalg.norm(A @ f + b) > 1e-8 * (1 + np.linalg.norm(b)):
            continue  # no bilateral solution (over-constrained)
        cs2 = []
        for j, c in enumerate(cs):  # normals along the force where it is not compressive
            F = f[3 * j:3 * j + 3]
            n = c.normal if F @ c.normal > 1e-6 * np.abs(f).max() else F / np.linalg.norm(F)
            cs2.append(dn.Contact(c.link, c.point, normal=n, friction=c.friction if c.friction > 0 else 1.0))
        inside = all((f[3 * j:3 * j + 3] @ c.normal) * c.friction * 0.999 >
                     np.linalg.norm(f[3 * j:3 * j + 3] - (f[3 * j:3 * j + 3] @ c.normal) * c.normal)
                     for j, c in enumerate(cs2))
        if not inside:
            continue
        tried += 1
        r = dn.contact_forward_dynamics(m, q, qd, tau, cs2)
        check_conditions(Oracle(xml, m, cs2, floating=floating), q, qd, tau, r)
    assert tried >= 30


@pytest.mark.parametrize("mu", [0.3, 1.0, 3.0, 8.0])
@pytest.mark.parametrize("direction", [1.0, -1.0])
def test_painleve_rod(mu, direction):
    """A tilted rod sliding on its lower end (Painlevé): one sliding contact has no solution exactly
    when b_n < 0 and m = A_nn - mu A_nt d <= 0 (SEP needs b_n >= 0, SLIDE f_n = -b_n/m >= 0); A and b
    from Pinocchio's terms. Otherwise the returned solution satisfies every condition."""
    m_, L, th = 1.0, 0.5, 0.6
    ixx = m_ * (4 * L * L) / 12
    xml = (f'<?xml version="1.0"?><robot name="rod"><link name="rod"><inertial><mass value="{m_}"/>'
           f'<inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{ixx}" iyz="0" izz="1e-4"/></inertial></link></robot>')
    model = dn.load_model(xml, floating_base=True)
    c = dn.Contact("rod", point=(0, 0, -L), friction=mu)  # lower end of a rod along its z axis
    qy = math.sin(th / 2)  # tilted about y
    q = np.array([-L * math.sin(th), 0, L * math.cos(th), 0, qy, 0, math.cos(th / 2)])
    R = np.array([[math.cos(th), 0, math.sin(th)], [0, 1, 0], [-math.sin(th), 0, math.cos(th)]])
    qd = np.zeros(6)
    qd[:3] = R.T @ np.array([direction, 0, 0])  # the rod translates: the end slides along x
    orc = Oracle(xml, model, [c], floating=True)
    H, C, J, g, v = orc.terms(q, qd)
    assert abs(v[2]) < 1e-12 and abs(abs(v[0]) - 1) < 1e-12
    A = J @ np.linalg.solve(H, J.T)
    b = J @ np.linalg.solve(H, -C) + g
    d = np.sign(v[0])
    m_eff = A[2, 2] - mu * A[2, 0] * d
    none = b[2] < 0 and m_eff <= 0
    if none:
        with pytest.raises(dn.InputError, match="Painlev"):
            dn.contact_forward_dynamics(model, q, qd, np.zeros(6), [c])
    else:
        r = dn.contact_forward_dynamics(model, q, qd, np.zeros(6), [c])
        check_conditions(orc, q, qd, np.zeros(6), r)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), floating=st.booleans(), k=st.integers(1, 4), at_rest=st.booleans())
def test_hypothesis_contact_conditions(seed, floating, k, at_rest):
    _run_fd(seed, floating, 0, k, at_rest)


def _kinetic(orc, q, qd):
    H = orc.terms(q, qd)[0]
    return 0.5 * qd @ H @ qd


def check_impact_law(cs, P, v0, v1, e, states, ps, vs, moreau):
    """The impact conditions of impact.py on (P, xi), xi = v+ + e v- on the normal and v+ (Newton) or
    v+ + e v- (Moreau) on the tangent; a contact leaving before the impact takes restitution 0."""
    for j, c in enumerate(cs):
        n = c.normal
        pj, vm, vp = P[3 * j:3 * j + 3], v0[3 * j:3 * j + 3], v1[3 * j:3 * j + 3]
        pn = pj @ n
        if pn < -TOL * ps or vp @ n < -TOL * vs * 10:
            return False
        if c.friction != math.inf and np.linalg.norm(pj - pn * n) > c.friction * pn + TOL * ps:
            return False
        if states[j] == "separating":
            if not np.all(pj == 0.0):
                return False
            continue
        ej = e if vm @ n <= 0 else 0.0
        xn = (vp + ej * vm) @ n
        xt = (vp - (vp @ n) * n) + (ej * (vm - (vm @ n) * n) if moreau else 0.0)
        if xn < -TOL * vs * 10 or abs(pn * xn) > TOL * ps * vs * 10:
            return False
        if states[j] == "sticking":
            if np.linalg.norm(xt) > TOL * vs * 10:
                return False
        else:  # sliding: the impulse on the cone's edge, opposing xi_t
            pt = pj - pn * n
            if abs(np.linalg.norm(pt) - c.friction * pn) > TOL * ps * 10:
                return False
            if np.linalg.norm(xt) > TOL * vs * 10 and np.linalg.norm(pt) > 1e-6 * ps:
                if -(pt @ xt) / (np.linalg.norm(pt) * np.linalg.norm(xt)) < 1 - 1e-8:
                    return False
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), floating=st.booleans(), k=st.integers(1, 4),
       e=st.sampled_from([0.0, 0.2, 0.7, 1.0]))
def test_hypothesis_impact_conditions_and_energy(seed, floating, k, e):
    rng = np.random.default_rng(seed)
    m, xml = _case(seed % 17, floating)
    cs = _contacts(m, rng, k)
    orc = Oracle(xml, m, cs, floating=floating)
    q, qd, _, _ = ug.random_state(m, rng)
    try:
        r = dn.impact(m, q, qd, cs, restitution=e)
    except dn.InputError as err:
        assert "no contact forces satisfy" in str(err)
        return
    H, _, J, _, v0 = orc.terms(q, qd)
    assert_close(H @ (r.qd - qd), J.T @ r.impulses.reshape(-1), TOL, "H dqd = J^T iota (Eq. 11.57)")
    v1 = J @ r.qd
    P = r.impulses.reshape(-1)
    ps = max(float(np.max(np.abs(P))), 1e-300)
    vs = max(float(np.max(np.abs(v0))), float(np.max(np.abs(v1))), 1e-300)
    joined = any(P[3 * j:3 * j + 3] @ c.normal > TOL * ps and v0[3 * j:3 * j + 3] @ c.normal > 0
                 for j, c in enumerate(cs))  # a contact leaving before that the others' impulses pushed in
    # Newton's law (e on the normal, v_t+ sticking), or Moreau's (e on every component) where Newton's
    # would raise the kinetic energy (impact.py): the result satisfies the one or the other
    laws = [check_impact_law(cs, P, v0, v1, e, r.states, ps, vs, moreau) for moreau in (False, True)]
    assert laws[0] or laws[1], "neither Newton's nor Moreau's law holds"
    T0, T1 = 0.5 * qd @ H @ qd, 0.5 * r.qd @ H @ r.qd
    if not laws[0]:
        assert e > 0.0, "at e = 0 the law is Newton's (the plastic impact)"
    if e == 0.0 or not joined:  # docs/API.md: the guarantee of Moreau's law with one e for every contact
        assert T1 <= T0 * (1 + 1e-9) + 1e-12, (T0, T1)
