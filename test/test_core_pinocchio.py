"""Every function of docs/API.md against Pinocchio (test-only oracle), relative error <= 1e-9.

Cases (conftest.ALL_CASES): the project's arm7, panda (mimic finger), ur5, kinova (continuous
joints), baxter (branched), z1, romeo (floating, branched, mimic fingers), talos full v2 floating (mimic
grippers), solo12 floating base, and seeded random trees (mixed arbitrary axes, revolute,
continuous, prismatic, fixed joints, branches, random rpy origins and inertias; some floating, some
with mimic joints, one with unnormalised axes). Joints are matched by NAME.
"""
import numpy as np
import pytest

import urdfgen as ug
from conftest import ALL_CASES, assert_close, get_case


@pytest.fixture
def case_by_name():
    return get_case


# ------------------------------------------------------------------------------------------------
# structure
# ------------------------------------------------------------------------------------------------
def test_sizes_and_names(case):
    m = case.model
    links, joints, mimic, order = ug.urdf_structure(case.pin_xml)
    assert tuple(m.joint_names) == tuple(order), "joint_names: depth-first, siblings in URDF order, no fixed, no mimic"
    assert set(m.link_names) == set(links)
    assert len(m.link_names) == len(links)
    nv = len(order) + (6 if case.floating else 0)
    assert m.nv == nv
    assert m.nq == nv + (1 if case.floating else 0)
    assert bool(m.floating_base) == case.floating
    assert set(m.mimic) == set(mimic)
    for f, (master, mult, off) in mimic.items():
        got = m.mimic[f]
        assert got[0] == master and abs(got[1] - mult) < 1e-15 and abs(got[2] - off) < 1e-15
    qs = sorted((m.v_slice(j).start, j) for j in m.joint_names)
    assert [s for s, _ in qs] == list(range(6 if case.floating else 0, m.nv))


def test_total_mass(case):
    assert_close(case.model.total_mass(), case.oracle.total_mass(), what="total_mass")


def test_neutral(case):
    q0 = np.asarray(case.model.neutral(), float)
    assert q0.shape == (case.model.nq,)
    if case.floating:
        assert_close(q0[:7], [0, 0, 0, 0, 0, 0, 1], what="neutral free flyer")
        assert_close(q0[7:], np.zeros(case.model.nq - 7), what="neutral joints")
    else:
        assert_close(q0, np.zeros(case.model.nq), what="neutral")


# ------------------------------------------------------------------------------------------------
# dynamics
# ------------------------------------------------------------------------------------------------
def test_inverse_dynamics(case, dn):
    for (q, qd, qdd, _) in case.states:
        assert_close(dn.inverse_dynamics(case.model, q, qd, qdd), case.oracle.rnea(q, qd, qdd), what="ID")


def test_inverse_dynamics_lists_accepted(case, dn):
    q, qd, qdd, _ = case.states[0]
    assert_close(dn.inverse_dynamics(case.model, list(q), list(qd), list(qdd)), case.oracle.rnea(q, qd, qdd),
                 what="ID lists")


def _random_fext(case, k=3):
    """Wrenches on k random links, plus the root link and one link attached by a fixed joint."""
    rng = np.random.default_rng(7)
    links = list(case.model.link_names)
    pick = [links[i] for i in rng.choice(len(links), min(k, len(links)), replace=False)]
    _, joints, _, _ = ug.urdf_structure(case.pin_xml)
    fixed_children = [c for (_, jt, _, c) in joints if jt == "fixed"]
    if fixed_children:
        pick.append(fixed_children[int(rng.integers(0, len(fixed_children)))])
    pick.append(case.model.root_link)
    return {l: rng.uniform(-5, 5, 6) for l in dict.fromkeys(pick)}


def test_inverse_dynamics_f_ext(case, dn):
    fext = _random_fext(case)
    for (q, qd, qdd, _) in case.states:
        assert_close(dn.inverse_dynamics(case.model, q, qd, qdd, f_ext=fext), case.oracle.rnea(q, qd, qdd, fext),
                     what=f"ID f_ext on {list(fext)}")


def test_gravity(case, dn):
    for (q, _, _, _) in case.states:
        assert_close(dn.gravity(case.model, q), case.oracle.gravity(q), what="gravity")


def test_bias_forces(case, dn):
    for (q, qd, _, _) in case.states:
        assert_close(dn.bias_forces(case.model, q, qd), case.oracle.nle(q, qd), what="bias_forces")


def test_mass_matrix(case, dn):
    for (q, _, _, _) in case.states:
        assert_close(dn.mass_matrix(case.model, q), case.oracle.crba(q), what="mass_matrix")


def _singular(case, q):
    """Per Pinocchio's H (in our coordinates): is H singular? (romeo: massless finger links)"""
    ev = np.linalg.eigvalsh(case.oracle.crba(q))
    return ev.min() <= 1e-12 * ev.max()


def _expect_singular(case, dn, call):
    with pytest.raises(dn.SingularMassMatrixError) as ei:
        call()
    assert any(l in str(ei.value) for l in case.model.link_names), f"message names no link: {ei.value}"


def test_forward_dynamics(case, dn):
    for (q, qd, _, tau) in case.states:
        if _singular(case, q):
            _expect_singular(case, dn, lambda: dn.forward_dynamics(case.model, q, qd, tau))
            continue
        assert_close(dn.forward_dynamics(case.model, q, qd, tau), case.oracle.aba(q, qd, tau), what="FD")


def test_forward_dynamics_f_ext(case, dn):
    fext = _random_fext(case)
    for (q, qd, _, tau) in case.states:
        if _singular(case, q):
            _expect_singular(case, dn, lambda: dn.forward_dynamics(case.model, q, qd, tau, f_ext=fext))
            continue
        assert_close(dn.forward_dynamics(case.model, q, qd, tau, f_ext=fext), case.oracle.aba(q, qd, tau, fext),
                     what=f"FD f_ext on {list(fext)}")


def _hybrid_split(case):
    names = list(case.model.joint_names)
    fwd = names[::2]
    fidx = np.concatenate([np.arange(case.model.nv)[case.model.v_slice(j)] for j in fwd])
    iidx = np.setdiff1d(np.arange(case.model.nv), fidx)
    return fwd, fidx, iidx


def _hybrid_expected(case, q, qd, qdd_in, tau_in, fidx, iidx):
    H = case.oracle.crba(q)
    C = case.oracle.nle(q, qd)
    qdd = np.array(qdd_in, float)
    tau = np.array(tau_in, float)
    rhs = tau[fidx] - C[fidx] - H[np.ix_(fidx, iidx)] @ qdd[iidx]
    qdd[fidx] = np.linalg.solve(H[np.ix_(fidx, fidx)], rhs)
    tau = H @ qdd + C
    return qdd, tau


def test_hybrid_dynamics(fixed_case, dn):
    case = fixed_case
    fwd, fidx, iidx = _hybrid_split(case)
    for (q, qd, qdd, tau) in case.states:
        qdd_in = qdd.copy()
        qdd_in[fidx] = 0.0
        tau_in = tau.copy()
        tau_in[iidx] = 0.0
        eq, et = _hybrid_expected(case, q, qd, qdd_in, tau_in, fidx, iidx)
        got_qdd, got_tau = dn.hybrid_dynamics(case.model, q, qd, qdd_in, tau_in, fwd)
        assert_close(got_qdd, eq, what=f"hybrid qdd (forward joints {fwd})")
        assert_close(got_tau, et, what=f"hybrid tau (forward joints {fwd})")


def test_hybrid_dynamics_ignores_unknown_entries(fixed_case, dn):
    """qdd entries of forward joints and tau entries of inverse joints are the unknowns: their
    input values must not matter."""
    case = fixed_case
    fwd, fidx, iidx = _hybrid_split(case)
    q, qd, qdd, tau = case.states[0]
    qdd_a, tau_a = qdd.copy(), tau.copy()
    qdd_a[fidx] = 0.0
    tau_a[iidx] = 0.0
    qdd_b, tau_b = qdd.copy(), tau.copy()
    qdd_b[fidx] = 123.0
    tau_b[iidx] = -77.0
    ra = dn.hybrid_dynamics(case.model, q, qd, qdd_a, tau_a, fwd)
    rb = dn.hybrid_dynamics(case.model, q, qd, qdd_b, tau_b, fwd)
    assert_close(rb[0], ra[0], what="hybrid qdd")
    assert_close(rb[1], ra[1], what="hybrid tau")


def test_hybrid_all_forward_is_fd_all_inverse_is_id(fixed_case, dn):
    case = fixed_case
    names = list(case.model.joint_names)
    q, qd, qdd, tau = case.states[1]
    got_qdd, got_tau = dn.hybrid_dynamics(case.model, q, qd, np.zeros(case.model.nv), tau, names)
    assert_close(got_qdd, case.oracle.aba(q, qd, tau), what="hybrid all forward = FD")
    assert_close(got_tau, tau, what="hybrid all forward returns tau")
    got_qdd, got_tau = dn.hybrid_dynamics(case.model, q, qd, qdd, np.zeros(case.model.nv), [])
    assert_close(got_tau, case.oracle.rnea(q, qd, qdd), what="hybrid all inverse = ID")
    assert_close(got_qdd, qdd, what="hybrid all inverse returns qdd")


def test_batch(case, dn):
    """The batch functions compute rnea_batch.LANES states side by side: 70 states are two full
    groups and a partial one (padded), each row checked against the oracle."""
    rng = np.random.default_rng(11)
    states = case.states + [ug.random_state(case.model, rng) for _ in range(67)]
    Q = np.array([s[0] for s in states])
    QD = np.array([s[1] for s in states])
    QDD = np.array([s[2] for s in states])
    TAU = dn.inverse_dynamics_batch(case.model, Q, QD, QDD)
    G = dn.gravity_batch(case.model, Q)
    assert np.shape(TAU) == (len(Q), case.model.nv)
    assert np.shape(G) == (len(Q), case.model.nv)
    for k in range(len(Q)):
        assert_close(TAU[k], case.oracle.rnea(Q[k], QD[k], QDD[k]), what=f"inverse_dynamics_batch row {k}")
        assert_close(G[k], case.oracle.gravity(Q[k]), what=f"gravity_batch row {k}")


@pytest.mark.parametrize("n", [1, 31, 32, 33])
def test_batch_sizes_around_a_group(dn, n):
    c = get_case("random_floating_10")
    rng = np.random.default_rng(n)
    states = [ug.random_state(c.model, rng) for _ in range(n)]
    Q, QD, QDD = (np.array([s[j] for s in states]) for j in range(3))
    TAU = dn.inverse_dynamics_batch(c.model, Q, QD, QDD)
    assert TAU.shape == (n, c.model.nv)
    for k in range(n):
        assert_close(TAU[k], c.oracle.rnea(Q[k], QD[k], QDD[k]), what=f"row {k} of {n}")
    assert dn.inverse_dynamics_batch(c.model, Q[:0], QD[:0], QDD[:0]).shape == (0, c.model.nv)


# ------------------------------------------------------------------------------------------------
# kinematics
# ------------------------------------------------------------------------------------------------
def test_link_pose(case, dn):
    for (q, _, _, _) in case.states[:2]:
        for l in case.links:
            assert_close(dn.link_pose(case.model, q, l), case.oracle.pose(q, l), what=f"link_pose {l}")


def test_jacobian(case, dn):
    for (q, _, _, _) in case.states[:2]:
        for l in case.links:
            assert_close(dn.jacobian(case.model, q, l), case.oracle.jacobian(q, l), what=f"jacobian {l}")


def test_link_velocity(case, dn):
    for (q, qd, _, _) in case.states[:2]:
        for l in case.links:
            assert_close(dn.link_velocity(case.model, q, qd, l), case.oracle.velocity(q, qd, l),
                         what=f"link_velocity {l}")


def test_bias_acceleration(case, dn):
    for (q, qd, _, _) in case.states[:2]:
        for l in case.links:
            assert_close(dn.bias_acceleration(case.model, q, qd, l), case.oracle.bias_acc(q, qd, l),
                         what=f"bias_acceleration {l}")


def test_center_of_mass(case, dn):
    for (q, _, _, _) in case.states:
        assert_close(dn.center_of_mass(case.model, q), case.oracle.com(q), what="center_of_mass")


# ------------------------------------------------------------------------------------------------
# options: gravity, armature, friction/damping, payload
# ------------------------------------------------------------------------------------------------
G_ODD = (0.7, -1.3, -9.5)


@pytest.mark.parametrize("name", ["random_1", "random_floating_10", "ur5"])
def test_custom_gravity(dn, name):
    c = get_case(name)
    m = dn.load_model(c.source, floating_base=c.floating, gravity=G_ODD)
    m2 = c.model.with_gravity(G_ODD)
    o = ug.PinOracle(c.pin_xml, m, floating=c.floating, gravity=G_ODD)
    assert_close(m.gravity, G_ODD, what="model.gravity")
    assert_close(m2.gravity, G_ODD, what="with_gravity().gravity")
    assert_close(c.model.gravity, (0, 0, -9.81), what="original model keeps its gravity")
    for (q, qd, qdd, tau) in c.states:
        for mm in (m, m2):
            assert_close(dn.gravity(mm, q), o.gravity(q), what="gravity g_odd")
            assert_close(dn.inverse_dynamics(mm, q, qd, qdd), o.rnea(q, qd, qdd), what="ID g_odd")
            assert_close(dn.forward_dynamics(mm, q, qd, tau), o.aba(q, qd, tau), what="FD g_odd")


@pytest.mark.parametrize("name", ["random_2", "ur5", "random_floating_11"])
def test_armature(dn, name):
    c = get_case(name)
    rng = np.random.default_rng(3)
    arm = {j: float(rng.uniform(0.01, 0.5)) for j in c.model.joint_names}
    for spec in (arm, 0.25):
        armd = spec if isinstance(spec, dict) else {j: spec for j in c.model.joint_names}
        m = dn.load_model(c.source, floating_base=c.floating, armature=spec)
        o = ug.PinOracle(c.pin_xml, m, floating=c.floating, armature=armd)
        for (q, qd, qdd, tau) in c.states:
            assert_close(dn.mass_matrix(m, q), o.crba(q), what=f"H armature={spec}")
            assert_close(dn.inverse_dynamics(m, q, qd, qdd), o.rnea(q, qd, qdd), what=f"ID armature={spec}")
            assert_close(dn.forward_dynamics(m, q, qd, tau), o.aba(q, qd, tau), what=f"FD armature={spec}")
            assert_close(dn.gravity(m, q), o.gravity(q), what="gravity unaffected by armature")
        Q, QD, QDD = (np.array([s[j] for s in c.states]) for j in range(3))
        for k, tau in enumerate(dn.inverse_dynamics_batch(m, Q, QD, QDD)):
            assert_close(tau, o.rnea(Q[k], QD[k], QDD[k]), what=f"batch ID armature={spec}")


def test_friction_damping(dn):
    txt, info = ug.random_urdf(40, 9, dynamics=True)
    m = dn.load_model(txt, friction=True)
    m0 = dn.load_model(txt)
    o = ug.PinOracle(txt, m)
    names = list(m.joint_names)
    d = np.zeros(m.nv)
    fr = np.zeros(m.nv)
    for j in names:
        d[m.v_slice(j)] = info["damping"][j]
        fr[m.v_slice(j)] = info["friction"][j]
    rng = np.random.default_rng(5)
    rows = []
    for _ in range(3):
        q, qd, qdd, tau = ug.random_state(m, rng)
        qd[0] = 0.0  # sign(0) = 0: no Coulomb force at rest
        extra = d * qd + fr * np.sign(qd)
        rows.append((q, qd, qdd, o.rnea(q, qd, qdd) + extra))
        assert_close(dn.inverse_dynamics(m, q, qd, qdd), o.rnea(q, qd, qdd) + extra, what="ID with friction")
        assert_close(dn.inverse_dynamics(m0, q, qd, qdd), o.rnea(q, qd, qdd),
                     what="ID friction=False ignores <dynamics>")
        assert_close(dn.bias_forces(m, q, qd), o.nle(q, qd) + extra, what="bias_forces with friction")
        assert_close(dn.gravity(m, q), o.gravity(q), what="gravity with friction (qd = 0)")
        assert_close(dn.mass_matrix(m, q), o.crba(q), what="H with friction")
        assert_close(dn.forward_dynamics(m, q, qd, tau), o.aba(q, qd, tau - extra), what="FD with friction")
    Q, QD, QDD, want = (np.array([r[j] for r in rows]) for j in range(4))
    got = dn.inverse_dynamics_batch(m, Q, QD, QDD)
    for k in range(len(rows)):
        assert_close(got[k], want[k], what=f"batch ID with friction, row {k}")


def _fixed_child(c):
    _, joints, _, _ = ug.urdf_structure(c.pin_xml)
    return [ch for (_, jt, _, ch) in joints if jt == "fixed"][0]


@pytest.mark.parametrize("name,which", [("random_0", "last"), ("random_floating_10", "last"),
                                        ("random_0", "fixed"), ("random_floating_10", "root")])
def test_with_payload(dn, name, which):
    import pinocchio as pin

    c = get_case(name)
    link = {"last": lambda: c.model.link_names[-1], "fixed": lambda: _fixed_child(c),
            "root": lambda: c.model.root_link}[which]()
    mass, com = 1.7, np.array([0.05, -0.02, 0.1])
    i6 = (0.02, 0.001, -0.002, 0.03, 0.0015, 0.025)
    Ic = np.array([[i6[0], i6[1], i6[2]], [i6[1], i6[3], i6[4]], [i6[2], i6[4], i6[5]]])
    m = c.model.with_payload(link, mass, com, i6)
    o = ug.PinOracle(c.pin_xml, m, floating=c.floating)
    fr = o.m.frames[o.frame(link)]
    o.m.inertias[fr.parentJoint] = o.m.inertias[fr.parentJoint] + fr.placement.act(pin.Inertia(mass, com, Ic))
    o.d = o.m.createData()
    assert_close(m.total_mass(), c.model.total_mass() + mass, what="mass with payload")
    for (q, qd, qdd, tau) in c.states:
        assert_close(dn.inverse_dynamics(m, q, qd, qdd), o.rnea(q, qd, qdd), what=f"ID payload on {link}")
        assert_close(dn.mass_matrix(m, q), o.crba(q), what=f"H payload on {link}")
        assert_close(dn.forward_dynamics(m, q, qd, tau), o.aba(q, qd, tau), what=f"FD payload on {link}")
        assert_close(dn.center_of_mass(m, q), o.com(q), what=f"CoM payload on {link}")
    # the original model is immutable; mass 0 removes the payload
    q, qd, qdd, _ = c.states[0]
    assert_close(dn.inverse_dynamics(c.model, q, qd, qdd), c.oracle.rnea(q, qd, qdd), what="original unchanged")
    m0 = m.with_payload(link, 0.0, com, i6)
    assert_close(dn.inverse_dynamics(m0, q, qd, qdd), c.oracle.rnea(q, qd, qdd), what="payload removed")


def test_source_text_equals_file(dn, tmp_path):
    """The robot_description string and the file give the same model."""
    c = get_case("random_3")
    p = ug.write(tmp_path / "r3.urdf", c.source)
    mf = dn.load_model(p)
    ms = dn.load_model(str(p))
    assert mf.source.endswith("r3.urdf") and ms.source.endswith("r3.urdf")
    assert c.model.source == "<robot_description>"
    q, qd, qdd, _ = c.states[0]
    assert_close(dn.inverse_dynamics(mf, q, qd, qdd), c.oracle.rnea(q, qd, qdd), what="ID from file")


def test_oracle_mimic_projection_matches_pinocchio_mimic():
    """Self-check of the test oracle: G-projection of the mimic-free Pinocchio model equals
    Pinocchio's own mimic support (rnea, crba) on panda."""
    import pinocchio as pin

    xml = ug.erd("panda_description/urdf/panda.urdf").read_text()
    _, _, _, order = ug.urdf_structure(xml)

    class Fake:
        joint_names = tuple(order)
        nq = nv = len(order)
        floating_base = False

        def q_slice(self, j):
            i = order.index(j)
            return slice(i, i + 1)

        v_slice = q_slice

    o = ug.PinOracle(xml, Fake())
    mm = pin.buildModelFromXML(xml, mimic=True)
    dd = mm.createData()
    assert [mm.names[i] for i in range(1, 9)] == order
    rng = np.random.default_rng(0)
    q, v, a = rng.uniform(-1, 1, (3, 8))
    assert_close(o.rnea(q, v, a), pin.rnea(mm, dd, q, v, a), what="oracle rnea")
    assert_close(o.crba(q), np.triu(pin.crba(mm, dd, q)) + np.triu(pin.crba(mm, dd, q), 1).T, what="oracle crba")


def test_all_cases_listed():
    assert len(ALL_CASES) == len(set(ALL_CASES))


@pytest.mark.parametrize("seed", range(100, 124))
def test_many_random_trees(dn, seed):
    """Property sweep: 24 more seeded trees, floating every 3rd, mimic every 4th, 3..14 links."""
    rng = np.random.default_rng(seed)
    floating = seed % 3 == 0
    txt, _ = ug.random_urdf(seed, int(rng.integers(3, 15)), n_mimic=1 if seed % 4 == 0 else 0,
                            p_fixed=0.25, branching=0.5)
    m = dn.load_model(txt, floating_base=floating)
    o = ug.PinOracle(txt, m, floating=floating)
    q, qd, qdd, tau = ug.random_state(m, rng, scale=3.0)  # angles up to +-3 rad (continuous: beyond)
    if floating:
        q[3:7] = rng.normal(size=4)
        q[3:7] /= np.linalg.norm(q[3:7])
    assert_close(dn.inverse_dynamics(m, q, qd, qdd), o.rnea(q, qd, qdd), what="ID")
    assert_close(dn.mass_matrix(m, q), o.crba(q), what="H")
    assert_close(dn.forward_dynamics(m, q, qd, tau), o.aba(q, qd, tau), what="FD")
    assert_close(dn.center_of_mass(m, q), o.com(q), what="CoM")
    for l in m.link_names:
        assert_close(dn.jacobian(m, q, l), o.jacobian(q, l), what=f"J {l}")
        assert_close(dn.link_pose(m, q, l), o.pose(q, l), what=f"pose {l}")
        assert_close(dn.bias_acceleration(m, q, qd, l), o.bias_acc(q, qd, l), what=f"bias acc {l}")


@pytest.mark.parametrize("name", ["kinova_continuous", "random_0"])
def test_large_angles(case_by_name, dn, name):
    """Angles far outside [-pi, pi] (continuous joints wrap; Pinocchio stores cos/sin)."""
    c = case_by_name(name)
    rng = np.random.default_rng(12)
    q = rng.uniform(-12, 12, c.model.nq)
    qd, qdd, tau = rng.uniform(-1, 1, (3, c.model.nv))
    assert_close(dn.inverse_dynamics(c.model, q, qd, qdd), c.oracle.rnea(q, qd, qdd), what="ID large angles")
    assert_close(dn.forward_dynamics(c.model, q, qd, tau), c.oracle.aba(q, qd, tau), what="FD large angles")


def test_model_is_immutable(dn):
    m = get_case("random_0").model
    with pytest.raises((AttributeError, TypeError)):
        m.nv = 3
    with pytest.raises((AttributeError, TypeError)):
        m.joint_names = ("a",)
    g = m.gravity
    try:
        g[2] = 0.0
    except (ValueError, TypeError):
        pass
    assert_close(m.gravity, (0.0, 0.0, -9.81), what="gravity cannot be changed in place")
    q, qd, qdd, _ = get_case("random_0").states[0]
    assert_close(dn.gravity(m, q), get_case("random_0").oracle.gravity(q), what="gravity unchanged")


FLOATING_CASES = [c for c in ALL_CASES if "floating" in c]


@pytest.mark.parametrize("name", FLOATING_CASES)
@pytest.mark.parametrize("split", ["base_only", "base_and_half"])
def test_hybrid_dynamics_floating(dn, name, split):
    """Floating base in the forward set under its joint name dn.ROOT_JOINT (the core's name, not yet
    in API.md). base_only with zero base wrench is floating-base inverse dynamics (Featherstone
    Table 9.6)."""
    c = get_case(name)
    m = c.model
    root = getattr(dn, "ROOT_JOINT", "root_joint")
    fwd = [root] + (list(m.joint_names)[::2] if split == "base_and_half" else [])
    fidx = np.r_[np.arange(6), [i for j in fwd[1:] for i in np.arange(m.nv)[m.v_slice(j)]]].astype(int)
    iidx = np.setdiff1d(np.arange(m.nv), fidx)
    for (q, qd, qdd, tau) in c.states:
        qdd_in = qdd.copy()
        qdd_in[fidx] = 0.0
        tau_in = tau.copy()
        tau_in[iidx] = 0.0
        if split == "base_only":
            tau_in[:6] = 0.0
        H = c.oracle.crba(q)
        HF = H[np.ix_(fidx, fidx)]
        ev = np.linalg.eigvalsh(HF)
        if ev.min() <= 1e-12 * ev.max():
            with pytest.raises(dn.SingularMassMatrixError):
                dn.hybrid_dynamics(m, q, qd, qdd_in, tau_in, fwd)
            continue
        eq, et = _hybrid_expected(c, q, qd, qdd_in, tau_in, fidx, iidx)
        got_qdd, got_tau = dn.hybrid_dynamics(m, q, qd, qdd_in, tau_in, fwd)
        assert_close(got_qdd, eq, what=f"floating hybrid qdd ({split})")
        assert_close(got_tau, et, what=f"floating hybrid tau ({split})")


def test_panda_mimic_direct_vs_pinocchio_mimic(dn):
    """Ours vs Pinocchio's own mimic support (buildModelFromXML(..., mimic=True)): rnea, gravity,
    crba, Jacobian of the mimicking finger. Pinocchio's mimic model has one coordinate per
    independent joint, matched here by name."""
    import pinocchio as pin

    c = get_case("panda_mimic")
    m = c.model
    pm = pin.buildModelFromXML(c.pin_xml, mimic=True)
    pd = pm.createData()
    perm = np.zeros((pm.nv, m.nv))
    for jid in range(1, pm.njoints):
        jm = pm.joints[jid]
        if jm.nv == 0 or pm.names[jid] not in m.joint_names:
            continue  # mimic follower: no own coordinate
        perm[jm.idx_v, m.v_slice(pm.names[jid]).start] = 1.0
    assert pm.nv == m.nv and np.allclose(perm.sum(axis=1), 1.0)
    for (q, qd, qdd, _) in c.states:
        pq, pv, pa = perm @ q, perm @ qd, perm @ qdd
        assert_close(dn.inverse_dynamics(m, q, qd, qdd), perm.T @ pin.rnea(pm, pd, pq, pv, pa), what="ID vs pin mimic")
        assert_close(dn.gravity(m, q), perm.T @ pin.computeGeneralizedGravity(pm, pd, pq), what="g vs pin mimic")
        H = pin.crba(pm, pd, pq)
        H = np.triu(H) + np.triu(H, 1).T
        assert_close(dn.mass_matrix(m, q), perm.T @ H @ perm, what="H vs pin mimic")
        fid = pm.getFrameId("panda_rightfinger", pin.BODY)
        J = np.asarray(pin.computeFrameJacobian(pm, pd, pq, fid, pin.LOCAL_WORLD_ALIGNED)).reshape(6, pm.nv)
        assert_close(dn.jacobian(m, q, "panda_rightfinger"), J @ perm, what="J of the mimicking finger vs pin mimic")
