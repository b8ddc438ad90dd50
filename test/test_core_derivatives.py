"""The analytic derivatives of the dynamics against independent references:

* Pinocchio (test-only): computeRNEADerivatives, computeABADerivatives, computeGeneralizedGravityDerivatives
  and their f_ext variants, on the conftest cases (real robots fixed and floating, random trees, mimic
  joints through PinOracle's G) and on every example-robot-data file, fixed and floating: 1e-9 relative.
  Pinocchio's model of a mimic robot has independent followers, so its derivatives are projected as
  ours are defined (G^T D G; the forward dynamics' as -(G^T H G)^-1 G^T D G);
* central finite differences through dn.integrate (q ⊕ dq), where Pinocchio has no counterpart (armature,
  viscous and Coulomb friction, mimic offsets): 1e-6 relative;
* dn.linearize against central differences of the semi-implicit Euler step it linearises: 1e-6;
* dn.integrate / dn.difference against Pinocchio's integrate / difference (free flyer on SE(3)).
"""
import pathlib
import warnings
import zlib

import numpy as np
import pytest

import urdfgen as ug
from conftest import assert_close, get_case


def _pin_rnea_derivatives(o, q, qd, qdd, f_ext=None):
    pin = o.pin
    args = (o.m, o.d, o.q(q), o.v(qd), o.v(qdd))
    if f_ext:
        pin.computeRNEADerivatives(*args, o.fext(f_ext))
    else:
        pin.computeRNEADerivatives(*args)
    G = o.G
    M = np.triu(o.d.M) + np.triu(o.d.M, 1).T
    return G.T @ o.d.dtau_dq @ G, G.T @ o.d.dtau_dv @ G, G.T @ M @ G


def _pin_aba_derivatives(o, q, qd, tau, f_ext=None):
    """Pinocchio's computeABADerivatives when our coordinates are its own (no mimic); with mimic
    followers, implicit differentiation of its projected RNEA derivatives at its projected FD."""
    pin = o.pin
    if o.is_perm:
        P = o.G
        args = (o.m, o.d, o.q(q), o.v(qd), P @ np.asarray(tau, float))
        if f_ext:
            pin.computeABADerivatives(*args, o.fext(f_ext))
        else:
            pin.computeABADerivatives(*args)
        Minv = np.triu(o.d.Minv) + np.triu(o.d.Minv, 1).T
        return P.T @ o.d.ddq_dq @ P, P.T @ o.d.ddq_dv @ P, P.T @ Minv @ P
    qdd = o.aba(q, qd, tau, f_ext)
    dq, dv, H = _pin_rnea_derivatives(o, q, qd, qdd, f_ext)
    Hi = np.linalg.inv(H)
    return -Hi @ dq, -Hi @ dv, Hi


def _fext(case):
    rng = np.random.default_rng(11)
    links = list(case.model.link_names)
    pick = [links[i] for i in rng.choice(len(links), min(3, len(links)), replace=False)] + [case.model.root_link]
    return {l: rng.uniform(-5, 5, 6) for l in dict.fromkeys(pick)}


def _singular(o, q):
    ev = np.linalg.eigvalsh(o.crba(q))
    return ev.min() <= 1e-8 * ev.max()


# ------------------------------------------------------------------------------------------------
# Pinocchio
# ------------------------------------------------------------------------------------------------
def test_inverse_dynamics_derivatives_vs_pinocchio(case, dn):
    fext = _fext(case)
    for (q, qd, qdd, _) in case.states:
        for fx in (None, fext):
            dq, dv = dn.inverse_dynamics_derivatives(case.model, q, qd, qdd, f_ext=fx)
            pq, pv, _ = _pin_rnea_derivatives(case.oracle, q, qd, qdd, fx)
            assert_close(dq, pq, what=f"{case.name} dtau/dq f_ext={fx is not None}")
            assert_close(dv, pv, what=f"{case.name} dtau/dqd f_ext={fx is not None}")


def test_gravity_derivatives_vs_pinocchio(case, dn):
    o = case.oracle
    for (q, _, _, _) in case.states:
        want = o.G.T @ o.pin.computeGeneralizedGravityDerivatives(o.m, o.d, o.q(q)) @ o.G
        assert_close(dn.gravity_derivatives(case.model, q), want, what=f"{case.name} dg/dq")


def test_forward_dynamics_derivatives_vs_pinocchio(case, dn):
    fext = _fext(case)
    for (q, qd, _, tau) in case.states:
        if _singular(case.oracle, q):
            with pytest.raises(dn.SingularMassMatrixError):
                dn.forward_dynamics_derivatives(case.model, q, qd, tau)
            continue
        for fx in (None, fext):
            got = dn.forward_dynamics_derivatives(case.model, q, qd, tau, f_ext=fx)
            want = _pin_aba_derivatives(case.oracle, q, qd, tau, fx)
            for g, w, nm in zip(got, want, ("dqdd/dq", "dqdd/dqd", "dqdd/dtau")):
                assert_close(g, w, what=f"{case.name} {nm} f_ext={fx is not None}")


ROBOTS = ug.erd(".")
FILES = sorted(str(p.relative_to(ROBOTS)) for p in ROBOTS.rglob("*.urdf"))


@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "floating"])
@pytest.mark.parametrize("rel", FILES)
def test_every_example_robot_vs_pinocchio(rel, floating, dn):
    import pinocchio as pin

    path = ROBOTS / rel
    try:
        pin.buildModelFromUrdf(str(path))
    except Exception:  # e.g. ur3.urdf: no <link> at all; we refuse it too (test_core_loader_wild)
        with pytest.raises(dn.ModelError):
            dn.load_model(path, floating_base=floating)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dn.ModelWarning)
        m = dn.load_model(path, floating_base=floating)
    o = ug.PinOracle(pathlib.Path(path).read_text(), m, floating=floating)
    rng = np.random.default_rng(zlib.crc32(f"{rel}{floating}".encode()))
    q, qd, qdd, tau = ug.random_state(m, rng)
    dq, dv = dn.inverse_dynamics_derivatives(m, q, qd, qdd)
    pq, pv, _ = _pin_rnea_derivatives(o, q, qd, qdd)
    assert_close(dq, pq, what=f"{rel}: dtau/dq")
    assert_close(dv, pv, what=f"{rel}: dtau/dqd")
    assert_close(dn.gravity_derivatives(m, q), o.G.T @ pin.computeGeneralizedGravityDerivatives(o.m, o.d, o.q(q)) @ o.G,
                 what=f"{rel}: dg/dq")
    if m.nv and np.linalg.cond(o.crba(q)) < 1e8:
        for g, w in zip(dn.forward_dynamics_derivatives(m, q, qd, tau), _pin_aba_derivatives(o, q, qd, tau)):
            assert_close(g, w, rtol=1e-9, what=f"{rel}: FD derivatives")


# ------------------------------------------------------------------------------------------------
# finite differences through dn.integrate
# ------------------------------------------------------------------------------------------------
EPS = 1e-6


def _fd_q(dn, m, f, q):
    cols = []
    for j in range(m.nv):
        e = np.zeros(m.nv)
        e[j] = EPS
        cols.append((np.asarray(f(dn.integrate(m, q, e))) - np.asarray(f(dn.integrate(m, q, -e)))) / (2 * EPS))
    return np.stack(cols, axis=-1)


def _fd_v(m, f, x):
    cols = []
    for j in range(x.shape[0]):
        e = np.zeros(x.shape[0])
        e[j] = EPS
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * EPS))
    return np.stack(cols, axis=-1)


def _friction_model(dn, floating, n_mimic=2):
    txt, _ = ug.random_urdf(41, 8, dynamics=True, n_mimic=n_mimic)
    rng = np.random.default_rng(4)
    return dn.load_model(txt, floating_base=floating, friction=True, armature=float(rng.uniform(0.05, 0.3)))


@pytest.mark.parametrize("n_mimic", [2, 0], ids=["mimic", "no_mimic"])
@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "floating"])
def test_finite_differences_armature_friction_mimic(dn, floating, n_mimic):
    """Armature, viscous and Coulomb friction (qd kept away from 0, where sign() jumps) and mimic offsets:
    no Pinocchio counterpart, so central differences through dn.integrate. Without mimic joints the
    forward dynamics' derivatives take the one compiled call (aba_derivatives.py), with them numpy's."""
    m = _friction_model(dn, floating, n_mimic)
    assert m.has_mimic == bool(n_mimic)
    rng = np.random.default_rng(8)
    for _ in range(2):
        q, qd, qdd, tau = ug.random_state(m, rng)
        qd = np.sign(qd) * (0.2 + np.abs(qd))
        dq, dv = dn.inverse_dynamics_derivatives(m, q, qd, qdd)
        assert_close(dq, _fd_q(dn, m, lambda x: dn.inverse_dynamics(m, x, qd, qdd), q), rtol=1e-6, what="dtau/dq")
        assert_close(dv, _fd_v(m, lambda x: dn.inverse_dynamics(m, q, x, qdd), qd), rtol=1e-6, what="dtau/dqd")
        assert_close(dn.gravity_derivatives(m, q), _fd_q(dn, m, lambda x: dn.gravity(m, x), q), rtol=1e-6,
                     what="dg/dq")
        fq, fv, ft = dn.forward_dynamics_derivatives(m, q, qd, tau)
        assert_close(fq, _fd_q(dn, m, lambda x: dn.forward_dynamics(m, x, qd, tau), q), rtol=1e-6, what="dqdd/dq")
        assert_close(fv, _fd_v(m, lambda x: dn.forward_dynamics(m, q, x, tau), qd), rtol=1e-6, what="dqdd/dqd")
        assert_close(ft, _fd_v(m, lambda x: dn.forward_dynamics(m, q, qd, x), tau), rtol=1e-6, what="dqdd/dtau")


def test_armature_and_friction_enter_the_derivatives(dn):
    """The armature is on H's diagonal (dqdd/dtau changes), the viscous coefficient on dtau/dqd's."""
    txt, info = ug.random_urdf(40, 9, dynamics=True)
    m0 = dn.load_model(txt)
    m = dn.load_model(txt, friction=True)
    rng = np.random.default_rng(2)
    q, qd, qdd, tau = ug.random_state(m, rng)
    d = np.zeros(m.nv)
    for j in m.joint_names:
        d[m.v_slice(j)] = info["damping"][j]
    assert np.any(d > 0)
    dq0, dv0 = dn.inverse_dynamics_derivatives(m0, q, qd, qdd)
    dq1, dv1 = dn.inverse_dynamics_derivatives(m, q, qd, qdd)
    assert_close(dq1, dq0, what="friction does not depend on q")
    assert_close(dv1, dv0 + np.diag(d), what="viscous friction on the diagonal of dtau/dqd")


# ------------------------------------------------------------------------------------------------
# linearize
# ------------------------------------------------------------------------------------------------
def _step(dn, m, q, qd, tau, dt):
    qd1 = qd + dt * dn.forward_dynamics(m, q, qd, tau)
    return dn.integrate(m, q, dt * qd1), qd1


@pytest.mark.parametrize("name", ["arm7", "solo12_floating", "random_floating_mimic_22", "friction"])
def test_linearize_vs_finite_differences_of_the_step(dn, name):
    m = _friction_model(dn, True) if name == "friction" else get_case(name).model
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    q, qd, _, tau = ug.random_state(m, rng)
    qd = np.sign(qd) * (0.2 + np.abs(qd))
    dt = 0.05
    A, B = dn.linearize(m, q, qd, tau, dt)
    n = m.nv
    assert A.shape == (2 * n, 2 * n) and B.shape == (2 * n, n)
    q1, qd1 = _step(dn, m, q, qd, tau, dt)

    def dx(qa, qda):  # deviation of a next state from the nominal one, in the tangent space at q1
        return np.r_[dn.difference(m, q1, qa), qda - qd1]

    cols = []
    for j in range(2 * n):
        e = np.zeros(2 * n)
        e[j] = EPS
        plus = _step(dn, m, dn.integrate(m, q, e[:n]), qd + e[n:], tau, dt)
        minus = _step(dn, m, dn.integrate(m, q, -e[:n]), qd - e[n:], tau, dt)
        cols.append((dx(*plus) - dx(*minus)) / (2 * EPS))
    assert_close(A, np.stack(cols, axis=1), rtol=1e-6, what=f"{name}: A")
    assert_close(B, _fd_v(m, lambda t: dx(*_step(dn, m, q, qd, t, dt)), tau), rtol=1e-6, what=f"{name}: B")


def test_linearize_batch_is_linearize_per_state(dn):
    m = get_case("solo12_floating").model
    rng = np.random.default_rng(5)
    S = [ug.random_state(m, rng) for _ in range(4)]
    Q, QD, TAU = (np.array([s[k] for s in S]) for k in (0, 1, 3))
    A, B = dn.linearize_batch(m, Q, QD, TAU, 0.01)
    for k in range(4):
        a, b = dn.linearize(m, Q[k], QD[k], TAU[k], 0.01)
        assert np.array_equal(A[k], a) and np.array_equal(B[k], b)


def test_inverse_dynamics_derivatives_batch_is_per_state(dn):
    m = get_case("talos_floating_mimic").model
    rng = np.random.default_rng(6)
    S = [ug.random_state(m, rng) for _ in range(3)]
    Q, QD, QDD = (np.array([s[k] for s in S]) for k in range(3))
    DQ, DV = dn.inverse_dynamics_derivatives_batch(m, Q, QD, QDD)
    assert DQ.shape == DV.shape == (3, m.nv, m.nv)
    for k in range(3):   # to rounding: the single call takes the C front (user coordinates in compiled code,
        # derivatives_c.py, AOT machine code), the batch numba's JIT and numpy's G^T D G
        dq, dv = dn.inverse_dynamics_derivatives(m, Q[k], QD[k], QDD[k])
        for got, want in ((DQ[k], dq), (DV[k], dv)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(want).max()))


# ------------------------------------------------------------------------------------------------
# integrate / difference
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["solo12_floating", "random_floating_10", "kinova_continuous"])
def test_integrate_difference_vs_pinocchio(dn, name):
    c = get_case(name)
    m, o = c.model, c.oracle
    rng = np.random.default_rng(1)
    for scale in (1e-3, 0.5, 2.5):
        q, _, _, _ = ug.random_state(m, rng)
        v = rng.uniform(-1, 1, m.nv) * scale
        q1 = dn.integrate(m, q, v)
        want = o.pin.integrate(o.m, o.q(q), o.v(v))
        assert_close(_same_rotation(o.q(q1), want) if m.floating_base else o.q(q1), want, what=f"{name}: integrate")
        assert_close(dn.difference(m, q, q1), v, rtol=1e-9, what=f"{name}: difference inverts integrate")
        assert_close(o.G @ dn.difference(m, q, q1), o.pin.difference(o.m, o.q(q), want), what=f"{name}: difference")


def _same_rotation(a, b):
    """a with its free-flyer quaternion's sign matched to b's (q and -q are one rotation)."""
    a = a.copy()
    if np.dot(a[3:7], b[3:7]) < 0:
        a[3:7] = -a[3:7]
    return a


# ------------------------------------------------------------------------------------------------
# the contract: finite in, finite out, refusals by name
# ------------------------------------------------------------------------------------------------
def test_refusals_name_the_input(dn):
    m = get_case("arm7").model
    q, qd, qdd = np.zeros(7), np.zeros(7), np.zeros(7)
    bad = qd.copy()
    bad[2] = np.nan
    with pytest.raises(dn.InputError, match=r"qd\[2\]"):
        dn.inverse_dynamics_derivatives(m, q, bad, qdd)
    with pytest.raises(dn.InputError, match=r"tau has length 6"):
        dn.forward_dynamics_derivatives(m, q, qd, np.zeros(6))
    with pytest.raises(dn.InputError, match=r"q must be"):
        dn.gravity_derivatives(m, "q")
    for dt in (0.0, -1.0, float("inf"), "0.1"):
        with pytest.raises(dn.InputError, match="dt"):
            dn.linearize(m, q, qd, qdd, dt)
    with pytest.raises(dn.InputError, match="f_ext"):
        dn.inverse_dynamics_derivatives(m, q, qd, qdd, f_ext=[1, 2])


def test_batch_refusals_name_sample_and_field(dn):
    m = get_case("arm7").model
    Q, QD, QDD = np.zeros((5, 7)), np.zeros((5, 7)), np.zeros((5, 7))
    QD[3, 2] = 1e308   # finite, but the result overflows
    for call in (lambda: dn.inverse_dynamics_derivatives_batch(m, Q, QD, QDD),
                 lambda: dn.linearize_batch(m, Q, QD, QDD, 0.01),
                 lambda: dn.inverse_dynamics_batch(m, Q, QD, QDD)):
        with pytest.raises(dn.InputError, match=r"QD\[3, 2\] \(joint '[^']+'\)"):
            call()
    QD[3, 2] = 0.0
    QDD[1, 4] = np.nan
    with pytest.raises(dn.InputError, match=r"QDD\[1, 4\]"):
        dn.inverse_dynamics_derivatives_batch(m, Q, QD, QDD)
    QDD[1, 4] = 0.0
    with pytest.raises(dn.InputError, match="same number of rows"):
        dn.inverse_dynamics_derivatives_batch(m, Q, QD[:3], QDD)


def test_overflow_refused_not_returned(dn):
    m = get_case("arm7").model
    q, qd = np.zeros(7), np.zeros(7)
    qd[1] = 1e200
    with pytest.raises(dn.InputError, match=r"qd\[1\] \(joint 'joint2'\) = 1e\+200 is out of range"):
        dn.inverse_dynamics_derivatives(m, q, qd, np.zeros(7))
    with pytest.raises(dn.InputError, match="out of range"):
        dn.linearize(m, q, qd, np.zeros(7), 0.01)


def test_docs_library_blocks_run():
    """docs/library.md's derivatives section: its Python blocks run as written (from the repository root)."""
    import os
    import re

    repo = pathlib.Path(__file__).resolve().parent.parent
    text = (repo / "docs" / "library.md").read_text()
    section = text.split("## Derivatives of the dynamics", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        env = {}
        for b in blocks:
            exec(compile(b, "docs/library.md", "exec"), env)
    finally:
        os.chdir(cwd)
    assert env["A"].shape == (14, 14) and env["B"].shape == (14, 7)


@pytest.mark.parametrize("name", ["panda_mimic", "talos_floating_mimic", "random_mimic_20", "random_floating_mimic_22"])
def test_mimic_models_compiled_route_equals_the_numpy_route(dn, name, monkeypatch):
    """A model with mimic joints: the controllers' call (f_ext None) runs user coordinates in compiled code
    (derivatives_c.py: the map to the tree, G^T D G by one pass, the reduced H's Cholesky); an f_ext of {} takes
    the Python side (numpy's G^T D G, forward dynamics by the CRBA route, numpy's Cholesky). Two independent
    computations of the same numbers."""
    m = get_case(name).model
    assert m.has_mimic and m.nv < m.nvt
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for _ in range(3):
        q, qd, qdd, tau = ug.random_state(m, rng)
        pairs = [(dn.inverse_dynamics_derivatives(m, q, qd, qdd), dn.inverse_dynamics_derivatives(m, q, qd, qdd, {})),
                 (dn.forward_dynamics_derivatives(m, q, qd, tau), dn.forward_dynamics_derivatives(m, q, qd, tau, {})),
                 ((dn.gravity_derivatives(m, q),), (dn.gravity_derivatives(m, list(q)),))]   # a list: Python side
        for fast, slow in pairs:
            assert len(fast) == len(slow)
            for a, b in zip(fast, slow):
                assert a.shape == (m.nv, m.nv)
                assert_close(a, b, rtol=1e-10, what=name)
    # the first of each pair never reached the Python side: with it refusing every call, they still answer
    import dynamics_node.dispatch as D

    def refuse(model):
        raise AssertionError("the Python side was called")

    monkeypatch.setattr(D, "check_model", refuse)
    dn.inverse_dynamics_derivatives(m, q, qd, qdd)
    dn.forward_dynamics_derivatives(m, q, qd, tau)
    dn.gravity_derivatives(m, q)
    with pytest.raises(AssertionError, match="Python side"):
        dn.gravity_derivatives(m, list(q))
