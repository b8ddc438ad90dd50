"""The helical loop joint (Featherstone Table 4.1: S = [0 0 1 0 0 h]^T about / along the axis) against
the equivalent screw mechanism built from tree joints: a revolute joint followed by a prismatic joint
along the same axis with <mimic multiplier="h"> (§9.6), closed to the world by a fixed loop joint.

A generic spatial loop (six revolute joints with random axes and offsets, then the screw back to
the world; mobility 7 - 6 = 1) is modelled twice: A cuts the loop at the screw (helical loop joint),
B keeps the screw in the tree and cuts at a weld.  The state of B is derived from A by geometry
(link_pose), the accelerations of the six shared joints must agree.  The references are B's
closed-loop dynamics (revolute + prismatic + mimic + fixed loop joint, no helical code) and
link_pose, never the helical kernel itself."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dynamics_node as dn
import urdfgen as ug
from dynamics_node.algorithms import loops as L

N = 6


def _rpy(R):
    p = math.asin(max(-1.0, min(1.0, -R[2, 0])))
    return math.atan2(R[2, 1], R[2, 2]), p, math.atan2(R[1, 0], R[0, 0])


def _screw(theta, h):
    """Pose of a frame turned theta about its z axis and moved h theta along it."""
    c, s = math.cos(theta), math.sin(theta)
    X = np.eye(4)
    X[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    X[2, 3] = h * theta
    return X


def _origin(X):
    xyz = " ".join(repr(float(v)) for v in X[:3, 3])
    return f'<origin xyz="{xyz}" rpy="{" ".join(repr(v) for v in _rpy(X[:3, :3]))}"/>'


def _tree(seed):
    rng = np.random.default_rng(seed)
    out = [f'<robot name="screw{seed}"><link name="base"/>']
    for i in range(1, N + 1):
        mass = rng.uniform(0.5, 2.0)
        out.append(f'<link name="l{i}">' + ug.inertial_xml(mass, rng.uniform(-0.1, 0.1, 3), rng.uniform(-3, 3, 3),
                                                          ug.random_inertia(rng, mass)) + "</link>")
    for i in range(1, N + 1):
        parent = "base" if i == 1 else f"l{i - 1}"
        xyz = " ".join(f"{v:.5f}" for v in rng.uniform(-0.25, 0.25, 3))
        rpy = " ".join(f"{v:.5f}" for v in rng.uniform(-2, 2, 3))
        out.append(f'<joint name="j{i}" type="continuous"><parent link="{parent}"/><child link="l{i}"/>'
                   f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="0 0 1"/></joint>')
    return "".join(out), rng


def _mechanisms(seed, h, turns=0.0):
    """(A, B, q0): A with a helical loop joint (predecessor l6, successor the world), B with the same
    screw as tree joints + a fixed loop joint; at q0 A's screw is at angle 2 pi turns."""
    tree, rng = _tree(seed)
    q0 = rng.uniform(-1.5, 1.5, N)
    t = dn.load_model(tree + "</robot>")
    XP = np.eye(4)
    XP[:3, :3] = ug.rpy_to_R(*rng.uniform(-2, 2, 3))
    XP[:3, 3] = rng.uniform(-0.2, 0.2, 3)
    W = dn.link_pose(t, q0, f"l{N}") @ XP @ _screw(2 * math.pi * turns, h)  # the world side of the screw
    A = dn.load_model(
        tree + f'<loop_joint name="screw" type="helical" pitch="{h!r}"><predecessor link="l{N}">{_origin(XP)}'
        f'</predecessor><successor link="base">{_origin(W)}</successor><axis xyz="0 0 1"/></loop_joint></robot>')
    B = dn.load_model(
        tree + '<link name="nut_mid"/><link name="nut">' + ug.inertial_xml(0.7, [0.02, 0.01, 0.03], [0, 0, 0],
                                                                           np.diag([0.01, 0.02, 0.015]))
        + f'</link><joint name="turn" type="continuous"><parent link="l{N}"/><child link="nut_mid"/>{_origin(XP)}'
        '<axis xyz="0 0 1"/></joint><joint name="advance" type="prismatic"><parent link="nut_mid"/>'
        '<child link="nut"/><axis xyz="0 0 1"/><limit lower="-1e3" upper="1e3" effort="1" velocity="1"/>'
        f'<mimic joint="turn" multiplier="{h!r}"/></joint><loop_joint name="weld" type="fixed">'
        f'<predecessor link="nut"/><successor link="base">{_origin(W)}</successor></loop_joint></robot>')
    return A, B, q0, XP, W


def _screw_angle(A, q, XP, W, h):
    """The screw's angle at a closed configuration of A, by geometry: the world frame W seen from
    the l6 side XP is a screw(theta, h); theta from its advance along z (its turn agrees mod 2 pi)."""
    rel = np.linalg.inv(dn.link_pose(A, q, f"l{N}") @ XP) @ W
    theta = rel[2, 3] / h
    np.testing.assert_allclose(rel, _screw(theta, h), atol=1e-9)
    return theta


@pytest.mark.parametrize("seed,h,turns", [(1, 0.05, 0.0), (2, -0.02, 0.0), (3, 0.3, 1.0), (4, 1.5, 0.0)])
def test_helical_loop_joint_equals_the_screw_mechanism(seed, h, turns):
    A, B, q0, XP, W = _mechanisms(seed, h, turns)
    assert A.nv == N and B.nv == N + 1 and B.has_mimic
    assert L.loop_state(A, q0).max_error < 1e-12  # closed at q0, also a whole turn away (turns = 1)
    rng = np.random.default_rng(seed)
    qa = q0
    for step in range(3):
        # along the mechanism: a step on its null space, closed again by Newton with the joint that
        # moves most as the independent one
        g = L.constraint_basis(A, qa)[0][:, 0]
        ind = f"j{int(np.argmax(np.abs(g))) + 1}"
        qa = dn.close_loops(A, qa + 0.05 * g / np.linalg.norm(g), [ind])
        theta = _screw_angle(A, qa, XP, W, h)
        qb = np.r_[qa, theta]
        assert L.loop_state(B, qb).max_error < 1e-9
        qda = dn.close_loop_velocities(A, qa, rng.normal(size=N), [ind])
        qdb = dn.close_loop_velocities(B, qb, np.r_[qda, 0.0], [ind])
        np.testing.assert_allclose(qdb[:N], qda, rtol=1e-9, atol=1e-9 * np.abs(qda).max())
        tau = rng.normal(size=N)
        for st in (None, 0.1):
            aa, _ = dn.closed_loop_forward_dynamics(A, qa, qda, tau, stabilization_time=st)
            ab, _ = dn.closed_loop_forward_dynamics(B, qb, qdb, np.r_[tau, 0.0], stabilization_time=st)
            np.testing.assert_allclose(aa, ab[:N], rtol=1e-9, atol=1e-9 * max(1.0, np.abs(ab).max()))
        assert A.nv - np.linalg.matrix_rank(L.loop_constraints(A, qa, qda)[0]) == 1  # mobility 7 - 6


@pytest.mark.parametrize("turns", [0.0, 1.0, -2.0])
def test_helical_position_error_closed_form(turns):
    """A screw advanced by d along its axis without turning: only the screw row of delta is nonzero,
    and it is d / sqrt(1 + h^2) (the distance to the screw's path along T's unit screw direction),
    whole turns in or not (the turn is taken from the advance: one turn in, 2 pi h advanced, is
    closed, which a rotation angle alone in (-pi, pi] would call open by 2 pi h)."""
    h, d = 0.3, 0.01
    A, _, q0, XP, W = _mechanisms(3, h, turns)
    assert L.loop_state(A, q0).max_error < 1e-12
    tree, _ = _tree(3)
    Wd = W.copy()
    Wd[:3, 3] += W[:3, :3] @ np.array([0.0, 0.0, d])
    moved = dn.load_model(
        tree + f'<loop_joint name="screw" type="helical" pitch="{h!r}"><predecessor link="l{N}">{_origin(XP)}'
        f'</predecessor><successor link="base">{_origin(Wd)}</successor><axis xyz="0 0 1"/></loop_joint></robot>')
    err = L.loop_state(moved, q0)["screw"]["delta"]  # rows: T's columns (lin x, lin y, screw, ang x, ang y)
    np.testing.assert_allclose(err, [0, 0, d / math.hypot(1, h), 0, 0], atol=1e-12)


def test_closed_loops_doc_snippets_load_as_written():
    """docs/closed-loops.md's two XML snippets: the helical loop joint and the in-tree screw (revolute
    + prismatic mimic), each loaded into a robot with the links they name."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "closed-loops.md").read_text()
    blocks = re.findall(r"```xml\n(.*?)```", text, re.S)
    (loop,) = [b for b in blocks if 'type="helical"' in b]
    (tree,) = [b for b in blocks if '<mimic joint="turn"' in b]
    body = ug.inertial_xml(1.0, [0.01, 0.0, 0.02], [0, 0, 0], np.diag([0.01, 0.01, 0.01]))
    links = "".join(f'<link name="{n}">{body}</link>' for n in ("shaft", "carriage", "nut"))
    m = dn.load_model(f'<robot name="doc"><link name="base"/>{links}<link name="nut_mid"/>'
                      '<joint name="spin" type="continuous"><parent link="base"/><child link="shaft"/>'
                      '<axis xyz="0 0 1"/></joint><joint name="slide" type="prismatic"><parent link="base"/>'
                      '<child link="carriage"/><origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>'
                      f'<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>{tree}{loop}</robot>')
    (lj,) = m.loops
    assert (lj.name, lj.type, lj.pitch) == ("lead_screw", "helical", 0.0008)
    assert m.mimic["advance"] == ("turn", 0.0008, 0.0)
    # the lead screw: the carriage (successor) turns -1 rad/s relative to the shaft, so it advances
    # -0.8 mm/s along z relative to it; the nut on the in-tree screw is free (a second coordinate)
    q = dn.close_loops(m, np.zeros(m.nv), ["spin"])
    assert dn.mobility(m, q)[0] == 2  # the shaft-carriage screw and the free nut on the shaft
    qd = dn.close_loop_velocities(m, q, np.r_[1.0, np.zeros(m.nv - 1)], ["spin", "turn"])
    np.testing.assert_allclose(qd[list(m.joint_names).index("slide")], -0.0008, rtol=1e-9)
