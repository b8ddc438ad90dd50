"""Loop clusters (Featherstone §8.9): model.loop_clusters against the clusters written down from each
mechanism's construction (test/data/loops/linkages.py: which loop joints share a tree joint), the
block-diagonal K and G, and the clustered routes against the former ones (the whole K: Method 2 for
forward dynamics, the SVD basis for inverse dynamics, global Newton for closure; kept behind
_clustered=False) to 1e-12 relative, and against the public-API augmented system (api_oracle)."""
from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import dynamics_node as dn
from dynamics_node.algorithms import loops as L

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE / "data" / "loops"))
import api_oracle  # noqa: E402
import linkages  # noqa: E402

FOURBAR = REPO / "urdf" / "fourbar.urdf"
FIG83 = HERE / "data" / "loops" / "fig8_3.urdf"
DUAL = REPO / "urdf" / "dual_arm_object.urdf"
MIMIC_EXTRA = ('<link name="flag"><inertial><origin xyz="0.05 0 0"/><mass value="0.3"/><inertia ixx="0.001" '
               'ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.002"/></inertial></link>'
               '<joint name="flag_joint" type="revolute"><parent link="crank"/><child link="flag"/>'
               '<origin xyz="0.1 0 0"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/>'
               '<mimic joint="rocker_joint" multiplier="0.5" offset="0.1"/></joint></robot>')


def _models():
    """(label, model, expected clusters) of every loop model of the loop tests."""
    out = [("fourbar", dn.load_model(FOURBAR), (("pin",),)),
           ("fig8_3", dn.load_model(FIG83), (("j5",),)),
           ("dual_arm", dn.load_model(DUAL), (("object_sphere",),)),
           ("fourbar_floating", dn.load_model(FOURBAR, floating_base=True), (("pin",),)),
           ("fourbar_mimic", dn.load_model(FOURBAR.read_text().replace("</robot>", MIMIC_EXTRA)), (("pin",),))]
    for label, (text, exp) in (("chain4", linkages.chain_with_fourbars(4)), ("coupled", linkages.coupled_linkages()),
                               ("ladder", linkages.ladder(6))):
        out.append((label, dn.load_model(text), exp))
    return out


MODELS = _models()
IDS = [m[0] for m in MODELS]


def _rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


@pytest.mark.parametrize("label,model,expected", MODELS, ids=IDS)
def test_clusters_match_construction(label, model, expected):
    assert model.loop_clusters == expected
    cd = model.loop_data.clusters
    assert sorted(np.concatenate(cd.loops).tolist()) == list(range(len(model.loops)))
    assert sorted(cd.order.tolist()) == list(range(model.nv))  # the consecutive numbering is a permutation


def test_clusters_of_more_shapes():
    """Independent, coupled and chained loops: k four-bars give k singleton clusters; a ladder is one
    cluster; a model without loop joints has none."""
    for k in (1, 2, 5):
        text, exp = linkages.chain_with_fourbars(k)
        assert dn.load_model(text).loop_clusters == exp == tuple((f"pin_{i}",) for i in range(k))
    text, exp = linkages.ladder(9)
    assert dn.load_model(text).loop_clusters == exp and len(exp) == 1 and len(exp[0]) == 8
    assert dn.load_model(REPO / "urdf" / "arm7.urdf").loop_clusters == ()


@pytest.mark.parametrize("label,model,expected", MODELS, ids=IDS)
def test_K_is_block_diagonal(label, model, expected):
    """Outside its cluster's rows and columns K is exactly zero (§8.9), at a random state."""
    rng = np.random.default_rng(3)
    K, _ = L.loop_constraints(model, rng.normal(scale=0.5, size=model.nq), rng.normal(size=model.nv))
    cd = model.loop_data.clusters
    mask = np.zeros(K.shape, dtype=bool)
    for r, c in zip(cd.rows, cd.cols):
        mask[np.ix_(r, c)] = True
    assert np.all(K[~mask] == 0.0)
    assert np.all(K[:, cd.free] == 0.0)


@pytest.fixture
def blocks_always(monkeypatch):
    """The block route for every model with two clusters or more (by default only from
    CLUSTER_MIN_NC loop constraints, where it is the faster one)."""
    from dynamics_node.algorithms.loops import forward

    monkeypatch.setattr(forward, "CLUSTER_MIN_NC", 0)


@pytest.mark.parametrize("label,model,expected", MODELS, ids=IDS)
def test_clustered_routes_equal_former(label, model, expected, blocks_always):
    rng = np.random.default_rng(11)
    for st in (0.1, None):
        q = rng.normal(scale=0.4, size=model.nq)
        if model.floating_base:
            q[3:7] /= np.linalg.norm(q[3:7])
        qd, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
        a1, w1 = dn.closed_loop_forward_dynamics(model, q, qd, tau, stabilization_time=st)
        a0, w0 = dn.closed_loop_forward_dynamics(model, q, qd, tau, stabilization_time=st, _clustered=False)
        assert _rel(a1, a0) <= 1e-12
        for n in w0:
            assert np.linalg.norm(w1[n] - w0[n]) <= 1e-12 * max(np.linalg.norm(w0[n]), np.linalg.norm(tau))
        G1, g1, y1 = L.constraint_basis(model, q, qd, stabilization_time=st)
        G0, g0, y0 = L.constraint_basis(model, q, qd, stabilization_time=st, _clustered=False)
        assert y1 == y0 and _rel(G1, G0) <= 1e-12 and _rel(g1, g0) <= 1e-12


@pytest.mark.parametrize("label", ["chain4", "coupled", "fourbar", "fig8_3", "dual_arm"])
def test_clustered_inverse_dynamics_closure_gravity(label, blocks_always):
    model = dict((m[0], m[1]) for m in MODELS)[label]
    rng = np.random.default_rng(5)
    keep = [j for j in model.joint_names if j.startswith(("chain", "g1", "g2", "crank", "arm1", "q1"))]
    keep = keep or [model.joint_names[0]]
    if label == "dual_arm":  # its closed configuration (test_dual_arm's)
        keep = ["arm1_joint1", "arm1_joint2", "arm1_joint3", "arm1_joint4", "arm1_joint5", "arm1_joint6",
                "arm2_joint4", "arm2_joint5", "arm2_joint6"]
        d = json.loads((HERE / "data" / "loops" / "dual_arm_q0.json").read_text())["q0"]
        q0 = np.array([d[n] for n in model.joint_names]) + rng.normal(scale=0.02, size=model.nq)
    else:
        q0 = rng.normal(scale=0.05, size=model.nq) + (0.3 if label in ("chain4", "coupled") else 0.0)
    q0 = dn.close_loops(model, q0, keep, _clustered=False)
    q1 = dn.close_loops(model, q0 + 1e-3, keep)
    q2 = dn.close_loops(model, q0 + 1e-3, keep, _clustered=False)
    assert L.loop_state(model, q1).max_error < 1e-12
    assert np.linalg.norm(q1 - q2) <= 1e-10 * max(1.0, np.linalg.norm(q2))
    G, _, _ = L.constraint_basis(model, q1)
    qd = G @ rng.normal(size=G.shape[1])
    G, g, _ = L.constraint_basis(model, q1, qd)
    qdd = G @ rng.normal(size=G.shape[1]) + g
    act = list(model.joint_names)
    t1 = dn.closed_loop_inverse_dynamics(model, q1, qd, qdd, actuated=act)
    t0 = dn.closed_loop_inverse_dynamics(model, q1, qd, qdd, actuated=act, _clustered=False)
    assert _rel(t1, t0) <= 1e-12
    g1 = dn.closed_loop_gravity(model, q1, actuated=act)
    g0 = dn.closed_loop_gravity(model, q1, actuated=act, _clustered=False)
    assert np.linalg.norm(g1 - g0) <= 1e-12 * max(np.linalg.norm(g0), 1.0)
    # the efforts drive the commanded motion: forward dynamics of tau gives qdd back
    a, _ = dn.closed_loop_forward_dynamics(model, q1, qd, t1, stabilization_time=None)
    np.testing.assert_allclose(a, qdd, atol=1e-8 * max(1.0, np.abs(qdd).max()))


@pytest.mark.parametrize("label", ["chain4", "coupled"])
def test_clustered_forward_against_public_api_oracle(label, blocks_always):
    """Several clusters (the block route forced, and by default from 48 constraints: a chain with
    ten four-bars): the block route against the augmented system of Eq. 8.6 built from the
    public API (least squares), independent of both routes."""
    model = dict((m[0], m[1]) for m in MODELS)[label]
    assert len(model.loop_clusters) > 1
    _oracle_check(model)


def test_block_route_by_default_from_48_constraints():
    model = dn.load_model(linkages.chain_with_fourbars(10)[0])
    assert model.loop_data.n_c == 50 and len(model.loop_clusters) == 10
    _oracle_check(model)


def _oracle_check(model):
    rng = np.random.default_rng(8)
    for st in (0.1, None):
        q, qd, tau = rng.normal(scale=0.4, size=model.nq), rng.normal(size=model.nv), rng.normal(size=model.nv)
        a1, w1 = dn.closed_loop_forward_dynamics(model, q, qd, tau, stabilization_time=st)
        a2, w2 = api_oracle.forward(model, q, qd, tau, st)
        assert _rel(a1, a2) <= 1e-9
        for n in w2:
            assert np.linalg.norm(w1[n] - w2[n]) <= 1e-8 * max(1.0, np.linalg.norm(w2[n]))
        K, k = L.loop_constraints(model, q, qd, stabilization_time=st)
        np.testing.assert_allclose(K @ a1, k, atol=1e-9 * max(1.0, np.abs(k).max()))


def test_cluster_close_loops_names_the_loop_that_cannot_close():
    """A cluster that cannot close is named; the others close."""
    text, _ = linkages.chain_with_fourbars(2)
    text = text.replace('<origin xyz="0.45 0 0"/></successor>', '<origin xyz="1.45 0 0"/></successor>', 1)
    m = dn.load_model(text)
    with pytest.raises(dn.InputError, match="pin_0") as e:
        dn.close_loops(m, np.full(m.nq, 0.3), [j for j in m.joint_names if j.startswith(("chain", "crank"))])
    assert "pin_1" not in str(e.value)


def test_docs_closed_loops_examples_run(monkeypatch):
    """The Python blocks of docs/closed-loops.md, run as written (in order, one namespace, from the
    repository root)."""
    import re

    text = (REPO / "docs" / "closed-loops.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    monkeypatch.chdir(REPO)
    ns: dict = {}
    for b in blocks:
        exec(compile(b, "docs/closed-loops.md", "exec"), ns)
    assert ns["model"].loop_clusters == (("pin_0",), ("pin_1",), ("pin_2",))
    assert np.allclose(ns["qdd_s"], ns["qdd_t"])
