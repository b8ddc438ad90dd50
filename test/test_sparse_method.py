"""The sparse-matrix method (Featherstone §8.13, Eq. 8.64): accelerations and loop wrenches equal to
the spanning-tree route (<= 1e-9 relative) on the four-bar, Fig. 8.3, the dual arm with its object,
ladders (Fig. 8.4) and several-cluster linkages; on random trees equal to the articulated-body
algorithm; against the public-API augmented system (api_oracle); Baumgarte with the same alpha, beta;
the over-constrained four-bar (rank-deficient matrix) with the spanning-tree route's minimum-norm
wrench; an inconsistent mechanism refused by name; the pattern and ordering made once per model."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import dynamics_node as dn
from dynamics_node.algorithms import loops as L

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE / "data" / "loops"))
sys.path.insert(0, str(HERE))
import api_oracle  # noqa: E402
import linkages  # noqa: E402
import urdfgen as ug  # noqa: E402

FOURBAR = REPO / "urdf" / "fourbar.urdf"
FIG83 = HERE / "data" / "loops" / "fig8_3.urdf"
DUAL = REPO / "urdf" / "dual_arm_object.urdf"


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(b), 1e-300))


LOOP_MODELS = {
    "fourbar": lambda: dn.load_model(FOURBAR),
    "fig8_3": lambda: dn.load_model(FIG83),
    "dual_arm": lambda: dn.load_model(DUAL),
    "fourbar_floating": lambda: dn.load_model(FOURBAR, floating_base=True),
    "ladder4": lambda: dn.load_model(linkages.ladder(4)[0]),
    "ladder12": lambda: dn.load_model(linkages.ladder(12)[0]),
    "chain3": lambda: dn.load_model(linkages.chain_with_fourbars(3)[0]),
    "coupled": lambda: dn.load_model(linkages.coupled_linkages()[0]),
}


@pytest.mark.parametrize("label", sorted(LOOP_MODELS))
def test_sparse_equals_spanning_tree(label):
    m = LOOP_MODELS[label]()
    rng = np.random.default_rng(4)
    for st in (0.1, 0.03, None):
        q = rng.normal(scale=0.4, size=m.nq)  # not closed: delta and K qd enter through Baumgarte
        if m.floating_base:
            q[3:7] /= np.linalg.norm(q[3:7])
        qd, tau = rng.normal(size=m.nv), rng.normal(size=m.nv) * 3
        a0, w0 = dn.closed_loop_forward_dynamics(m, q, qd, tau, stabilization_time=st)
        a1, w1 = dn.closed_loop_forward_dynamics(m, q, qd, tau, stabilization_time=st, method="sparse")
        assert _rel(a1, a0) <= 1e-9
        assert set(w1) == set(w0)
        for n in w0:
            assert np.linalg.norm(w1[n] - w0[n]) <= 1e-9 * max(np.linalg.norm(w0[n]), 1e-3 * np.linalg.norm(tau))


@pytest.mark.parametrize("label", ["fourbar", "dual_arm", "ladder4"])
def test_sparse_against_public_api_oracle(label):
    """Against the augmented system of Eq. 8.6 built from the public API (least squares, minimum-norm
    lambda), which shares no code with Eq. 8.64's assembly."""
    m = LOOP_MODELS[label]()
    rng = np.random.default_rng(6)
    for st in (0.1, None):
        q, qd, tau = rng.normal(scale=0.4, size=m.nq), rng.normal(size=m.nv), rng.normal(size=m.nv)
        a1, w1 = dn.closed_loop_forward_dynamics(m, q, qd, tau, stabilization_time=st, method="sparse")
        a2, w2 = api_oracle.forward(m, q, qd, tau, st)
        assert _rel(a1, a2) <= 1e-9
        for n in w2:
            assert np.linalg.norm(w1[n] - w2[n]) <= 1e-8 * max(1.0, np.linalg.norm(w2[n]))


def test_overconstrained_fourbar_minimum_norm_wrench():
    """The planar four-bar closed by a spatial revolute (n^c = 5, rank 2): the exact Eq. 8.64 matrix
    is singular; the method returns the in-plane pin force and zeros for the indeterminate components,
    as the spanning-tree route's minimum-norm lambda does."""
    m = dn.load_model(FOURBAR)
    q = dn.close_loops(m, np.array([0.9, -0.5, -1.2]), ["crank_joint"])
    G, _, _ = L.constraint_basis(m, q)
    qd = G[:, 0] * 1.3
    a, w = dn.closed_loop_forward_dynamics(m, q, qd, np.array([2.0, 0.0, 0.0]), method="sparse")
    np.testing.assert_allclose(w["pin"][[1, 3, 4, 5]], 0.0, atol=1e-12)
    assert np.linalg.norm(w["pin"][[0, 2]]) > 1.0
    K, k = L.loop_constraints(m, q, qd, stabilization_time=0.1)
    np.testing.assert_allclose(K @ a, k, atol=1e-9)


def test_inconsistent_constraints_are_refused():
    """Two one-joint pendulums joined by a spherical loop joint that is not closed: three constraints
    on two freedoms, with Baumgarte's position term they cannot all hold; the sparse method names
    the problem (the spanning-tree route returns its least-squares answer)."""
    text = """<robot name="bad"><link name="base"/>
      <link name="p1"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/>
      </inertial></link>
      <link name="p2"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/>
      </inertial></link>
      <joint name="j1" type="continuous"><parent link="base"/><child link="p1"/><axis xyz="0 1 0"/></joint>
      <joint name="j2" type="continuous"><parent link="base"/><child link="p2"/><origin xyz="1 0 0"/>
        <axis xyz="1 0 0"/></joint>
      <loop_joint name="s" type="spherical"><predecessor link="p1"><origin xyz="0.6 0.2 -0.3"/></predecessor>
        <successor link="p2"><origin xyz="0 0.1 -0.4"/></successor></loop_joint></robot>"""
    m = dn.load_model(text)
    q, qd, tau = np.array([0.3, -0.2]), np.zeros(2), np.zeros(2)
    a0, _ = dn.closed_loop_forward_dynamics(m, q, qd, tau)
    assert np.all(np.isfinite(a0))
    with pytest.raises(dn.InputError, match="inconsistent"):
        dn.closed_loop_forward_dynamics(m, q, qd, tau, method="sparse")


@pytest.mark.parametrize("seed", range(6))
def test_sparse_tree_equals_aba(seed):
    """Random trees (revolute, prismatic, continuous, fixed joints, branching, damping and friction),
    fixed and floating base, with an external force: Eq. 8.64 without loop joints against Table 7.1."""
    text, _ = ug.random_urdf(seed, n_links=7 + seed, dynamics=True)
    for fb in (False, True):
        m = dn.load_model(text, floating_base=fb)
        rng = np.random.default_rng(seed)
        q = m.neutral() + 0.0
        q += rng.normal(scale=0.5, size=m.nq)
        if fb:
            q[3:7] /= np.linalg.norm(q[3:7])
        qd, tau = rng.normal(size=m.nv), rng.normal(size=m.nv) * 2
        fext = {m.link_names[-1]: rng.normal(size=6)}
        a0 = dn.forward_dynamics(m, q, qd, tau, f_ext=fext)
        a1 = dn.forward_dynamics(m, q, qd, tau, f_ext=fext, method="sparse")
        assert _rel(a1, a0) <= 1e-9


def test_tree_model_through_closed_loop_call():
    m = dn.load_model(REPO / "urdf" / "arm7.urdf")
    rng = np.random.default_rng(1)
    q, qd, tau = rng.normal(size=m.nq), rng.normal(size=m.nv), rng.normal(size=m.nv)
    a, w = dn.closed_loop_forward_dynamics(m, q, qd, tau, method="sparse")
    assert w == {} and _rel(a, dn.forward_dynamics(m, q, qd, tau)) <= 1e-9


def test_pattern_and_ordering_kept_per_model():
    m = LOOP_MODELS["ladder4"]()
    rng = np.random.default_rng(2)
    args = (rng.normal(scale=0.3, size=m.nq), rng.normal(size=m.nv), rng.normal(size=m.nv))
    dn.closed_loop_forward_dynamics(m, *args, method="sparse")
    pat = m._sparse[True]
    solver = pat.solver
    dn.closed_loop_forward_dynamics(m, *args, method="sparse")
    assert m._sparse[True] is pat and pat.solver is solver
    # the pattern has the block structure of Eq. 8.64: 36 entries per body (21 in the upper triangle),
    # 6 per constraint row and body it touches, one diagonal entry per constraint row
    assert pat.n == 6 * m.nb + (pat.m0 - 6 * m.nb) + m.loop_data.n_c
    assert m.with_gravity([0, 0, -1.0])._sparse == {}  # a derived model analyses its own


def test_bad_method_and_mimic_are_refused():
    m = dn.load_model(FOURBAR)
    z = np.zeros(m.nv)
    with pytest.raises(dn.InputError, match="method"):
        dn.closed_loop_forward_dynamics(m, z, z, z, method="dense")
    with pytest.raises(dn.InputError, match="method"):
        dn.forward_dynamics(m, z, z, z, method="sparce")
    extra = ('<link name="flag"><inertial><mass value="0.3"/><inertia ixx="0.001" ixy="0" ixz="0" iyy="0.002" '
             'iyz="0" izz="0.002"/></inertial></link><joint name="flag_joint" type="revolute"><parent link="crank"/>'
             '<child link="flag"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/>'
             '<mimic joint="rocker_joint" multiplier="0.5"/></joint></robot>')
    mm = dn.load_model(FOURBAR.read_text().replace("</robot>", extra))
    z = np.zeros(mm.nv)
    with pytest.raises(dn.InputError, match="mimic"):
        dn.closed_loop_forward_dynamics(mm, z, z, z, method="sparse")


@pytest.mark.parametrize("seed,h", [(1, 0.05), (3, 0.3), (4, -1.5)])
def test_sparse_helical_loop_joint_equals_spanning_tree(seed, h):
    """A helical loop joint (Table 4.1: its fifth constraint is the screw direction (e6 - h e3) / sqrt(1 + h^2),
    not a unit vector) through Eq. 8.64, against the spanning-tree route, closed and not closed."""
    import test_helical
    A, _, q0, _, _ = test_helical._mechanisms(seed, h)
    rng = np.random.default_rng(seed)
    for q in (q0, q0 + rng.normal(scale=0.05, size=A.nq)):
        qd, tau = rng.normal(size=A.nv), rng.normal(size=A.nv)
        for st in (0.1, None):
            a0, w0 = dn.closed_loop_forward_dynamics(A, q, qd, tau, stabilization_time=st)
            a1, w1 = dn.closed_loop_forward_dynamics(A, q, qd, tau, stabilization_time=st, method="sparse")
            assert _rel(a1, a0) <= 1e-9
            assert _rel(w1["screw"], w0["screw"]) <= 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_sparse_tree_follows_the_joint_law(seed):
    """The joint law (viscous, tanh Coulomb, Stribeck, offset) in Eq. 8.64's right-hand side, against
    the articulated-body route (itself tested against the law written out: test_core_friction)."""
    text, _ = ug.random_urdf(seed, n_links=6 + seed, dynamics=True)
    law = dn.JointFriction(coulomb_velocity=0.05, stribeck=0.8, stribeck_velocity=0.1, offset=0.3)
    m = dn.load_model(text, friction=law)
    rng = np.random.default_rng(seed)
    q = m.neutral() + rng.normal(scale=0.5, size=m.nq)
    qd, tau = rng.normal(scale=0.2, size=m.nv), rng.normal(size=m.nv) * 2
    a0 = dn.forward_dynamics(m, q, qd, tau)
    a1 = dn.forward_dynamics(m, q, qd, tau, method="sparse")
    assert _rel(a1, a0) <= 1e-9
    assert _rel(a0, dn.forward_dynamics(dn.load_model(text), q, qd, tau)) > 1e-3  # the law is really in there
