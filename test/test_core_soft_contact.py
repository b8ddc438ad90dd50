"""Soft contact with Coulomb friction (Featherstone §11.8, Eqs. 11.73-11.79) and the
simulation step built on it.

Oracles: the book's equations evaluated by hand on known positions and velocities (the contact point's
position and velocity from Pinocchio), closed forms of the simulation (a box dropped on the floor at
1 kHz comes to rest carrying m g, each corner sunk m g / (4 K); pushed below mu m g it stays, above it
slides with (F - mu m g)/m), energy (never above the initial), and a free body's motion without
contact against the analytic ballistic flight.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import assert_close
from test_core_contact import M_BOX, G, Oracle, box_urdf, corners

import dynamics_node as dn

pin = pytest.importorskip("pinocchio")
K, D = 1e4, 100.0


def _box():
    xml = box_urdf(M_BOX)
    return dn.load_model(xml, floating_base=True), xml


def test_soft_forces_follow_the_book():
    """Eqs. 11.75-11.79 at a penetrated, moving pose: normal max(0, -K p - D pdot), friction the
    sticking force clipped to the circular cone, rates Eqs. 11.76-11.77."""
    m, xml = _box()
    mu = 0.4
    cs = [dn.Contact("box", p, friction=mu, stiffness=K, damping=D) for p in corners()]
    q = np.array([0.01, 0.0, 0.1 - 0.003, 0.02, -0.01, 0.0, 1.0])
    q[3:] /= np.linalg.norm(q[3:])
    qd = np.array([0.05, -0.02, -0.01, 0.1, 0.2, -0.05])
    state = np.array([[1e-4, 0, 0], [0, 0, 0], [-2e-3, 5e-4, 0], [0, 0, 0]])
    r = dn.soft_contact_forces(m, q, qd, cs, state=state)
    orc = Oracle(xml, m, cs, floating=True)
    _, _, J, _, v = orc.terms(q, qd)
    orc_pos = [orc.pd.oMf[f].translation.copy() for f in orc.fids]
    for j, c in enumerate(cs):
        p = orc_pos[j][2]
        pdot = v[3 * j + 2]
        R = c.frame
        vt = R.T @ v[3 * j:3 * j + 3]
        assert_close(r.distance[j], p, 1e-12)
        if p > state[j, 2]:  # apart
            assert np.all(r.forces[j] == 0) and not r.touching[j]
            assert_close(r.state_rate[j], -K / D * state[j], 1e-12)
            continue
        assert r.touching[j]
        fn = max(0.0, -K * p - D * pdot)
        fs = -K * state[j, :2] - D * vt[:2]
        ft = fs if np.linalg.norm(fs) <= mu * fn else mu * fn * fs / np.linalg.norm(fs)
        assert_close(r.forces[j], R @ np.r_[ft, fn], 1e-9, f"contact {j}")
        assert_close(r.state_rate[j, :2], -(K * state[j, :2] + ft) / D, 1e-9)
        assert_close(r.state_rate[j, 2], pdot if fn > 0 else -K * p / D, 1e-9)
    assert r.touching.sum() >= 2
    assert_close(r.tau, J.T @ r.forces.reshape(-1), 1e-9, "tau = J^T f")


def test_apart_no_force_and_the_surface_recovers():
    m, _ = _box()
    cs = [dn.Contact("box", p, stiffness=K, damping=D) for p in corners()]
    q = np.array([0, 0, 0.2, 0, 0, 0, 1.0])
    state = np.full((4, 3), -1e-3)
    r = dn.soft_contact_forces(m, q, np.zeros(6), cs, state=state)
    assert np.all(r.forces == 0) and not r.touching.any()
    assert_close(r.state_rate, -K / D * state, 1e-12)


def _run(m, cs, q, qd, steps, dt=1e-3, f_ext=None):
    state = None
    traj = []
    for _ in range(steps):
        s = dn.simulate_step(m, q, qd, np.zeros(m.nv), cs, dt, state=state, f_ext=f_ext)
        q, qd, state = s.q, s.qd, s.state
        traj.append((q, qd, s.forces))
    return q, qd, state, traj


def test_box_dropped_at_1khz_comes_to_rest_carrying_mg():
    m, _ = _box()
    cs = [dn.Contact("box", p, friction=0.8) for p in corners()]  # default K = 1e4, D = 100
    q = np.array([0, 0, 0.15, 0, 0, 0, 1.0])  # 5 cm above the floor
    qd = np.zeros(6)
    E0 = M_BOX * G * q[2]
    q, qd, state, traj = _run(m, cs, q, qd, 1500)
    v_hit = math.sqrt(2 * G * 0.05)
    slack = 4 * 0.5 * K * (v_hit * 1e-3) ** 2  # a contact is found up to v dt inside: its spring's energy
    for qq, vv, _ in traj:  # energy never above the initial beyond that (the damping only takes)
        H = dn.mass_matrix(m, qq)
        E = 0.5 * vv @ H @ vv + M_BOX * G * qq[2]
        assert E <= E0 + slack
    F = traj[-1][2]
    assert_close(F.sum(0), [0, 0, M_BOX * G], 1e-6, "carries m g")
    assert_close(q[2], 0.1 - M_BOX * G / (4 * K), 1e-6, "sinks m g / (4 K)")
    assert np.max(np.abs(qd)) < 1e-6


@pytest.mark.parametrize("push", [0.5, 2.0])
def test_box_pushed_on_the_soft_floor(push):
    mu = 0.5
    m, _ = _box()
    cs = [dn.Contact("box", p, friction=mu) for p in corners()]
    q = np.array([0, 0, 0.1 - M_BOX * G / (4 * K), 0, 0, 0, 1.0])
    q, qd, state, _ = _run(m, cs, q, np.zeros(6), 300)  # settle
    F = push * mu * M_BOX * G
    x0, v0 = q[0], qd[0]
    T = 0.5
    q, qd, state, traj = _run(m, cs, q, qd, int(T / 1e-3), f_ext={"box": (F, 0, 0, 0, 0, 0)})
    if push < 1:
        assert abs(q[0] - x0) < 1e-3 and abs(qd[0]) < 1e-3  # held by the friction springs: F / (4 K) ~ 1e-4 m
    else:
        a = (F - mu * M_BOX * G) / M_BOX
        assert_close((qd[0] - v0) / T, a, 0.02, "sliding: (F - mu m g)/m")


def test_free_flight_is_ballistic():
    m, _ = _box()
    q = np.array([0, 0, 1.0, 0, 0, 0, 1.0])
    qd = np.array([1.0, 0, 2.0, 0, 0, 0])
    dt, n = 1e-3, 200
    q1, qd1, _, _ = _run(m, [], q, qd, n, dt)
    t = n * dt
    assert_close(qd1[:3], [1.0, 0, 2.0 - G * t], 1e-12)
    # semi-implicit Euler: z_n = z0 + v0 t - g dt^2 n (n + 1) / 2
    assert_close(q1[:3], [t, 0, 1.0 + 2.0 * t - G * dt * dt * n * (n + 1) / 2], 1e-12)


def test_arm_collapsing_on_the_floor_stays_stable():
    """arm7 with only joint damping (tau = -qd) falls onto the floor z = 0 with a contact at each moving
    link's origin (the later simulated robot's setup): at 1 kHz nothing diverges, the arm's energy never
    rises above its start (beyond the integrator's error), it settles (|qd| < 0.5 rad/s after 3 s: the
    wrist turns slowly on its axis for longer), and no link origin sinks more than a few centimetres.
    (Undamped, the wrist keeps swinging as a pendulum: its CoM is off its axis.)"""
    m = dn.load_model("urdf/arm7.urdf")
    links = [l for l in m.link_names if m.body_of(l) >= 0]
    cs = [dn.Contact(l, friction=0.8) for l in links]
    q = np.array([0.0, 1.2, 0.0, 0.5, 0.0, 0.3, 0.0])
    qd = np.zeros(7)
    com0 = dn.center_of_mass(m, q)
    E0 = m.total_mass() * G * com0[2]
    state = None
    for step in range(3000):
        s = dn.simulate_step(m, q, qd, -qd, cs, 1e-3, state=state)
        q, qd, state = s.q, s.qd, s.state
        if step % 50 == 0:
            H = dn.mass_matrix(m, q)
            E = 0.5 * qd @ H @ qd + m.total_mass() * G * dn.center_of_mass(m, q)[2]
            assert E <= E0 * (1 + 1e-3)  # semi-implicit Euler's own error in the fall: O(m g^2 dt t)
    assert np.all(np.isfinite(q)) and np.max(np.abs(qd)) < 0.5
    for l in links:
        assert dn.link_pose(m, q, l)[2, 3] > -0.05


@pytest.mark.parametrize("floating,n_mimic", [(False, 0), (True, 0), (True, 1)])
def test_step_obeys_the_equation_of_motion_on_random_trees(floating, n_mimic):
    """simulate_step on random trees (floating bases, mimic joints), every link's origin below a
    plane: its qdd satisfies H qdd + C = tau + J^T f with its own forces
    (Pinocchio's H, C and point Jacobians), each force lies in its cone and pushes, and qd, q follow
    by semi-implicit Euler."""
    import urdfgen as ug

    xml, _ = ug.random_urdf(40 + n_mimic, n_links=6, n_mimic=n_mimic)
    m = dn.load_model(xml, floating_base=floating)
    rng = np.random.default_rng(3)
    links = [l for l in m.link_names if m.body_of(l) >= 0]
    cs = [dn.Contact(l, normal=(0.1, 0.0, 1.0), friction=0.6, surface_point=(0, 0, 3.0)) for l in links]
    orc = Oracle(xml, m, cs, floating=floating)
    for step in range(5):
        q, qd, _, tau = ug.random_state(m, rng)
        s = dn.simulate_step(m, q, qd, tau, cs, 1e-3)
        H, C, J, _, _ = orc.terms(q, qd)
        assert_close(H @ s.qdd + C, tau + J.T @ s.forces.reshape(-1), 1e-9, "H qdd + C = tau + J^T f")
        assert_close(s.qd, qd + 1e-3 * s.qdd, 1e-12)
        for c, F in zip(cs, s.forces):
            fn = F @ c.normal
            assert fn >= 0 and np.linalg.norm(F - fn * c.normal) <= c.friction * fn * (1 + 1e-9) + 1e-12
        assert np.any(np.linalg.norm(s.forces, axis=1) > 0)


# ----------------------------------------------------------------------------- joint limits
@pytest.mark.parametrize("floating,n_mimic", [(False, 0), (True, 0), (True, 1)])
def test_core_step_with_limits_obeys_the_equation_of_motion(floating, n_mimic):
    """simulate_step with joint limits around the current positions, every joint moving into one of
    them (random trees with floating bases and mimic joints, contacts below a plane too): H qdd + C =
    tau + J^T f + limit_tau (Pinocchio's H, C, Jacobians), every joint ends the step within its limits,
    each limit force pushes away from its limit (>= 0 at a lower, <= 0 at an upper) and acts only on a
    joint that ends the step at that limit (complementarity)."""
    import urdfgen as ug

    xml, _ = ug.random_urdf(60 + n_mimic, n_links=6, n_mimic=n_mimic)
    m = dn.load_model(xml, floating_base=floating)
    rng = np.random.default_rng(5)
    links = [lk for lk in m.link_names if m.body_of(lk) >= 0]
    cs = [dn.Contact(lk, normal=(0.1, 0.0, 1.0), friction=0.6, surface_point=(0, 0, 3.0)) for lk in links]
    orc = Oracle(xml, m, cs, floating=floating)
    dt = 1e-3
    joints = [j for j in m.joint_names if m.q_slice(j).stop - m.q_slice(j).start == 1]
    active = 0
    for _ in range(6):
        q, qd, _, tau = ug.random_state(m, rng)
        lim = np.column_stack((np.full(m.nv, -np.inf), np.full(m.nv, np.inf)))
        for j in joints:
            i, v = m.q_slice(j).start, m.v_slice(j).start
            gap = rng.uniform(0.0, 0.5) * abs(qd[v]) * dt  # reached within this step at the present speed
            lim[v] = (q[i] - gap, np.inf) if qd[v] < 0 else (-np.inf, q[i] + gap)
        s = dn.simulate_step(m, q, qd, tau, cs, dt, limits=lim, speculative=True)
        H, C, J, _, _ = orc.terms(q, qd)
        assert_close(H @ s.qdd + C, tau + J.T @ s.forces.reshape(-1) + s.limit_tau, 1e-8, "with the limits")
        for j in joints:
            i, v = m.q_slice(j).start, m.v_slice(j).start
            lo, hi = lim[v]
            assert lo - 1e-9 <= s.q[i] <= hi + 1e-9, (j, s.q[i], lim[v])
            t = s.limit_tau[v]
            assert (t >= -1e-9) if np.isfinite(lo) else (t <= 1e-9)
            if abs(t) > 1e-6:
                assert abs(s.q[i] - (lo if np.isfinite(lo) else hi)) < 1e-9
        active += int(np.count_nonzero(s.limit_tau))
    assert active >= 3  # limits did act (the others' joints were turned away by the random efforts)


def test_core_limits_are_refused_by_name():
    from dynamics_node.errors import InputError

    m, _ = _box()
    q = np.array([0, 0, 1.0, 0, 0, 0, 1.0])
    z = np.zeros(6)
    lim = np.column_stack((np.full(6, -np.inf), np.full(6, np.inf)))
    for bad, words in [(lim[:5], "nv x 2"), (np.where(np.eye(6, 2, dtype=bool), np.nan, lim), "NaN"),
                       (np.column_stack((np.ones(6), np.zeros(6))), "lower <= upper"),
                       (np.column_stack((np.full(6, -1.0), np.full(6, 1.0))), "floating base")]:
        with pytest.raises(InputError) as e:
            dn.simulate_step(m, q, z, z, [], 1e-3, limits=bad)
        assert words in str(e.value), str(e.value)
    with pytest.raises(InputError, match="restitution must be in"):
        dn.simulate_step(m, q, z, z, [], 1e-3, limits=lim, restitution=1.5)


# ----------------------------------------------------------------------------- the compiled step
def _agree(fast, ref, tol, where):
    """Every field of two SimulationSteps within tol of the field's scale (max(1, its largest entry))."""
    for name, a, b in zip(ref._fields, fast, ref):
        assert a.shape == b.shape, (where, name)
        if b.size:
            scale = max(1.0, float(np.max(np.abs(b))))
            assert float(np.max(np.abs(a - b))) <= tol * scale, (where, name, float(np.max(np.abs(a - b))))


@pytest.mark.parametrize("floating", [False, True])
def test_the_compiled_step_equals_the_python_step_on_random_trees(floating):
    """dn.simulate_step (one compiled kernel through its C front, sim/step.py) against
    contact.soft.reference_step (the step in Python over the kernels of its parts, as it was before),
    from the same state: contacts with surface states, speculative or not, joint limits about to be
    hit with and without restitution, external forces (the Python side's route to the kernel), all
    within 1e-12 of each field's scale."""
    import urdfgen as ug

    from dynamics_node.algorithms.contact.soft import reference_step

    xml, _ = ug.random_urdf(40, n_links=6, n_mimic=0)
    m = dn.load_model(xml, floating_base=floating)
    rng = np.random.default_rng(11)
    links = [lk for lk in m.link_names if m.body_of(lk) >= 0]
    cs = [dn.Contact(lk, normal=(0.1, 0.0, 1.0), friction=0.6, surface_point=(0, 0, 3.0)) for lk in links]
    joints = [j for j in m.joint_names if m.q_slice(j).stop - m.q_slice(j).start == 1]
    limited = 0
    for step in range(10):
        q, qd, _, tau = ug.random_state(m, rng)
        state = rng.normal(size=(len(cs), 3)) * 1e-3
        lim = np.column_stack((np.full(m.nv, -np.inf), np.full(m.nv, np.inf)))
        for j in joints:
            i, v = m.q_slice(j).start, m.v_slice(j).start
            gap = rng.uniform(0.0, 0.5) * abs(qd[v]) * 1e-3
            lim[v] = (q[i] - gap, np.inf) if qd[v] < 0 else (-np.inf, q[i] + gap)
        for kw in ({"state": state}, {"state": state, "speculative": True},
                   {"limits": lim, "speculative": True}, {"limits": lim, "restitution": 0.5},
                   {"f_ext": {links[-1]: (3.0, -2.0, 1.0, 0.1, 0.2, -0.3)}, "state": state}):
            for c in (cs, []):
                kw = {**kw, "state": None} if not c and "state" in kw else kw
                fast = dn.simulate_step(m, q, qd, tau, c, 1e-3, **kw)
                _agree(fast, reference_step(m, q, qd, tau, c, 1e-3, **kw), 1e-12, (step, kw.keys(), len(c)))
                limited += int(np.count_nonzero(fast.limit_tau))
    assert limited > 10  # the limits acted


def test_the_compiled_step_equals_the_python_step_along_a_fall_onto_the_floor():
    """arm7 collapsing onto the floor (the contacts land, slide, stick and rest, each pressed surface
    following its point exactly): at each of 3000 steps the compiled step and the Python step, from the
    same state, agree within 1e-12 of each field's scale."""
    from dynamics_node.algorithms.contact.soft import reference_step

    m = dn.load_model("urdf/arm7.urdf")
    cs = [dn.Contact(lk, friction=0.8) for lk in m.link_names if m.body_of(lk) >= 0]
    q, qd, state = np.array([0.0, 1.2, 0.0, 0.5, 0.0, 0.3, 0.0]), np.zeros(7), None
    touched = 0
    for step in range(3000):
        s = dn.simulate_step(m, q, qd, -qd, cs, 1e-3, state=state, speculative=step % 2 == 0)
        _agree(s, reference_step(m, q, qd, -qd, cs, 1e-3, state=state, speculative=step % 2 == 0), 1e-12, step)
        q, qd, state = s.q, s.qd, s.state
        touched = max(touched, int(np.count_nonzero(np.any(s.forces != 0, axis=1))))
    assert touched >= 4


def test_the_step_takes_any_layout_as_its_contiguous_copy():
    """The C front's plain call and the Python side (lists, float32, a read-only or strided array) give
    the same step."""
    m = dn.load_model("urdf/arm7.urdf")
    cs = [dn.Contact("link4", friction=0.8), dn.Contact("tool0", friction=0.3)]
    q = np.array([0.0, 1.2, 0.0, 0.5, 0.0, 0.3, 0.0], dtype=np.float32).astype(float)
    qd, tau = np.linspace(-1, 1, 7), np.linspace(3, -3, 7)
    ref = dn.simulate_step(m, q, qd, tau, cs, 1e-3, state=np.full((2, 3), -1e-3))
    wide = np.zeros((7, 2))
    wide[:, 0] = qd
    for args in ((list(q), list(qd), tuple(tau), tuple(cs), 0.001, [[-1e-3] * 3] * 2),
                 (q.astype(np.float32), wide[:, 0], tau, cs, np.float64(1e-3), np.full((2, 3), -1e-3, order="F"))):
        _agree(dn.simulate_step(m, *args[:5], state=args[5]), ref, 0.0, type(args[0]))


BIG_CASES = [  # (what, arguments beyond the model, the words the refusal must hold)
    ("qd = 1e154", dict(qd=1e154), "qd[0] (joint 'joint1') = 1e+154 is out of range"),
    ("tau = 1e308", dict(tau=1e308), "tau[0] (joint 'joint1') = 1e+308 is out of range"),
    ("dt = 1e300", dict(dt=1e300), "dt = 1e+300 is out of range"),
    ("friction, qd = 1e200", dict(qd=1e200, friction=True), "qd[0] (joint 'joint1') = 1e+200 is out of range"),
    ("a huge friction law", dict(qd=1e10, law=True), "qd[0] (joint 'joint1') = 1e+10 is out of range"),
]


@pytest.mark.parametrize("what,case,words", BIG_CASES, ids=[c[0] for c in BIG_CASES])
@pytest.mark.parametrize("extra", ["plain", "limits", "contacts"])
def test_a_step_that_would_not_be_finite_is_refused_naming_the_input(what, case, words, extra):
    """Finite inputs whose step overflows (forward_dynamics refuses the same state) are
    refused with one line naming the input and its index (and the model's friction law when it is
    at fault), with limits and contacts too; nothing non-finite is returned."""
    from dynamics_node.errors import InputError

    friction = dn.JointFriction(viscous=1e300, coulomb=1e300) if case.get("law") else case.get("friction", False)
    m = dn.load_model("urdf/arm7.urdf", friction=friction)
    q = np.full(7, 0.3)
    qd, tau = np.full(7, case.get("qd", 0.0)), np.full(7, case.get("tau", 0.0))
    kw = {"limits": np.column_stack((np.full(7, -1.0), np.full(7, 1.0)))} if extra == "limits" else {}
    cs = [dn.Contact("link4"), dn.Contact("tool0")] if extra == "contacts" else []
    with pytest.raises(InputError) as e:
        dn.simulate_step(m, q, qd, tau, cs, case.get("dt", 0.001), **kw)
    msg = str(e.value)
    assert words in msg and "not finite" in msg and "\n" not in msg, msg
    assert ("the model's joint friction law (coefficients up to 1e+300)" in msg) == bool(case.get("law")), msg
    if "dt" not in case:  # the same state is refused by forward dynamics too: not a step of its own making
        with pytest.raises(InputError):
            dn.forward_dynamics(m, q, qd, tau)


def test_huge_inputs_give_a_finite_step_or_a_refusal():
    """Hypothesis: magnitudes from 1 to 1e300 in q, qd, tau, dt and the surface states of two contacts,
    with limits: every step returned is finite; every refusal is an InputError."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from dynamics_node.errors import InputError

    m = dn.load_model("urdf/arm7.urdf", friction=True)
    cs = [dn.Contact("link4", friction=0.8), dn.Contact("tool0", friction=0.3)]
    lim = np.column_stack((np.full(7, -2.0), np.full(7, 2.0)))
    mag = st.sampled_from([0.0, 1.0, 1e3, 1e8, 1e20, 1e100, 1e154, 1e200, 1e300])

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(mag, min_size=5, max_size=5), st.integers(0, 6), st.booleans())
    def check(m5, i, use_lim):
        q, qd, tau, st_ = np.full(7, 0.3), np.zeros(7), np.zeros(7), np.zeros((2, 3))
        q[i] += m5[0]
        qd[i], tau[(i + 3) % 7], st_[1, 2] = m5[1], -m5[2], -m5[3]
        try:
            s = dn.simulate_step(m, q, qd, tau, cs, 1e-3 + m5[4], state=st_, limits=lim if use_lim else None,
                                 speculative=True)
        except InputError:
            return
        assert all(np.isfinite(x).all() for x in s)

    check()


def test_the_c_front_reads_the_step_info_where_layout_puts_it():
    """What _step_route.c assumes of layout.py (its INFO_N and INFO_NF) and of sim/step.py (SCRATCH, written
    out in the C source as SCRATCH_STATUS)."""
    import pathlib
    import re

    import dynamics_node
    from dynamics_node import layout as L
    from dynamics_node.sim import step as sim_step

    assert (L.SIM_INFO_N, L.SI_NF, L.SI_NSEL) == (2, 1, 0)
    c = (pathlib.Path(dynamics_node.__file__).parent / "_step_route.c").read_text(encoding="utf-8")
    m = re.search(r"^#define SCRATCH_STATUS \(?(-?\d+)\)?", c, re.M)
    assert m, "_step_route.c no longer defines SCRATCH_STATUS"
    assert int(m.group(1)) == sim_step.SCRATCH


def test_without_the_c_shim_the_step_is_the_same(monkeypatch):
    """The route of an install without a C compiler (sim.route._slow on numba's dispatcher of the same
    kernel) gives the C front's step exactly: arm7 lying on the floor, two joints at a limit."""
    from dynamics_node import _fast
    from dynamics_node.sim import route as sim_route

    m = dn.load_model("urdf/arm7.urdf")
    cs = [dn.Contact(lk, friction=0.8) for lk in m.link_names if m.body_of(lk) >= 0]
    q, qd, state = np.array([0.0, 1.2, 0.0, 0.5, 0.0, 0.3, 0.0]), np.zeros(7), None
    for _ in range(1500):
        s = dn.simulate_step(m, q, qd, -qd, cs, 1e-3, state=state)
        q, qd, state = s.q, s.qd, s.state
    lim = np.column_stack((np.full(7, -np.inf), np.full(7, np.inf)))
    lim[[0, 2], 1] = q[[0, 2]] + 1e-6 * np.sign(qd[[0, 2]])
    lim[[0, 2], 0] = np.minimum(lim[[0, 2], 1], q[[0, 2]]) - 1.0
    args = (m, q, qd, np.full(7, 3.0), cs, 1e-3, state, None, lim, 0.3, True)
    fast = dn.simulate_step(*args[:6], state=state, limits=lim, restitution=0.3, speculative=True)
    monkeypatch.setattr(_fast, "AVAILABLE", False)
    _agree(sim_route._slow(*args), fast, 0.0, "numba")
    assert np.count_nonzero(fast.limit_tau) and np.count_nonzero(fast.forces)
