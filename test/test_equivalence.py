"""Dynamic equivalence (Featherstone §9.7, Table 9.7): dn.simplify_inertias keeps the equation of
motion (H, C, g, inverse and forward dynamics) on every URDF of example-robot-data, fixed and floating
base, with fewer nonzero inertial parameters; on generic revolute chains the parameters it leaves are
exactly a set of base parameters of the regressor (the rank of the regressor at random states, an
independent numerical analysis, and identification's base-parameter map). The references are the
original model's dynamics and its regressor, never the simplified model's own numbers."""
from __future__ import annotations

import pathlib
import warnings
import zlib

import numpy as np
import pytest

import dynamics_node as dn
import urdfgen as ug
from dynamics_node.algorithms.tree.equivalence import nonzero_parameters

ROBOTS = ug.erd(".")
FILES = sorted(str(p.relative_to(ROBOTS)) for p in ROBOTS.rglob("*.urdf"))
REPO = pathlib.Path(__file__).resolve().parent.parent
RTOL = 1e-12


def _rel_err(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert np.all(np.isfinite(b))
    return float(np.max(np.abs(a - b), initial=0.0)) / max(float(np.max(np.abs(a), initial=0.0)), 1e-300)


def _same_dynamics(m, s, rng, n_states=2, what=""):
    """H, C, g, ID and FD of s equal those of m (1e-12 relative; FD to cond(H) x 1e-15 where H is
    ill-conditioned, the rounding any two factorisations of the same H differ by)."""
    for _ in range(n_states):
        q, qd, qdd, tau = ug.random_state(m, rng)
        H = dn.mass_matrix(m, q)
        for name, f in (("H", lambda M: dn.mass_matrix(M, q)), ("C", lambda M: dn.bias_forces(M, q, qd)),
                        ("g", lambda M: dn.gravity(M, q)), ("ID", lambda M: dn.inverse_dynamics(M, q, qd, qdd))):
            a, b = f(m), f(s)
            if np.abs(a).max(initial=0.0) > 0:
                assert _rel_err(a, b) <= RTOL, (what, name, _rel_err(a, b))
            else:
                assert np.abs(b).max(initial=0.0) <= 1e-14, (what, name)
        if m.nv:
            cond = np.linalg.cond(H)
            if cond < 1e10:
                a, b = dn.forward_dynamics(m, q, qd, tau), dn.forward_dynamics(s, q, qd, tau)
                assert _rel_err(a, b) <= max(RTOL, cond * 1e-15), (what, "FD", _rel_err(a, b), cond)


def _load(path, floating):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dn.ModelWarning)
        return dn.load_model(path, floating_base=floating)


def _reducible(m):
    """Whether some joint has a child body §9.7 can take something from: a revolute/prismatic body
    with a nonzero parameter."""
    pi = dn.inertial_parameters(m).reshape(-1, 10)
    return any(int(m.jtype[i]) != 2 and np.any(pi[i] != 0) for i in range(m.nb))


@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "floating"])
@pytest.mark.parametrize("rel", FILES)
def test_erd_dynamics_unchanged_fewer_parameters(rel, floating):
    path = ROBOTS / rel
    try:
        m = _load(path, floating)
    except dn.ModelError:  # e.g. ur3.urdf: no <link>; test_core_loader_wild checks which files refuse
        import pinocchio as pin

        with pytest.raises(Exception):
            pin.buildModelFromUrdf(str(path))
        return
    s = dn.simplify_inertias(m)
    assert s is not m and (s.nq, s.nv, s.nb, s.joint_names) == (m.nq, m.nv, m.nb, m.joint_names)
    _same_dynamics(m, s, np.random.default_rng(zlib.crc32(f"{rel}{floating}".encode())), what=rel)
    before, after = nonzero_parameters(m), nonzero_parameters(s)
    if _reducible(m):
        assert after < before, (rel, before, after)
    else:
        assert after == before


def test_erd_collection_is_there():
    assert len(FILES) >= 60


def test_arm7_count_of_the_docstring():
    m = dn.load_model(REPO / "urdf" / "arm7.urdf")
    s = dn.simplify_inertias(m)
    assert (nonzero_parameters(m), nonzero_parameters(s)) == (63, 40)
    assert "63 of 70" in dn.simplify_inertias.__doc__ and "40 after" in dn.simplify_inertias.__doc__
    _same_dynamics(m, s, np.random.default_rng(7), n_states=4)


def _chain(n, seed, *, parallel=False, prismatic=(), random_axes=False):
    """A serial chain with random full inertias (all ten parameters nonzero), coordinate joint axes
    (signed) in randomly turned joint frames (generic: no two consecutive axes parallel) unless
    ``parallel``."""
    rng = np.random.default_rng(seed)
    out = [f'<robot name="chain{seed}">']
    for i in range(n + 1):
        mass = rng.uniform(0.5, 3.0)
        out.append(f'<link name="l{i}">' + ug.inertial_xml(mass, rng.uniform(-0.1, 0.1, 3), rng.uniform(-3, 3, 3),
                                                          ug.random_inertia(rng, mass)) + "</link>")
    axes = ("0 0 1", "0 1 0", "1 0 0", "0 0 -1", "-1 0 0")
    for i in range(n):
        rpy = "0 0 0" if parallel else " ".join(f"{v:.6f}" for v in rng.uniform(-3, 3, 3))
        ax = "0 0 1" if parallel else axes[int(rng.integers(len(axes)))]
        if random_axes:  # a unit vector in no coordinate plane: every component nonzero
            u = rng.normal(size=3)
            u = np.sign(u) * np.maximum(np.abs(u), 0.1)
            ax = " ".join(repr(float(v)) for v in u / np.linalg.norm(u))
        kind = "prismatic" if i in prismatic else "revolute"
        out.append(f'<joint name="j{i + 1}" type="{kind}"><parent link="l{i}"/><child link="l{i + 1}"/>'
                   f'<origin xyz="{" ".join(f"{v:.6f}" for v in rng.uniform(-0.3, 0.3, 3))}" rpy="{rpy}"/>'
                   f'<axis xyz="{ax}"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')
    return "".join(out) + "</robot>"


def _regressor_stack(m, n=80, seed=1):
    rng = np.random.default_rng(seed)
    return np.vstack([dn.regressor(m, *rng.uniform(-2, 2, size=(3, m.nv))) for _ in range(n)])


@pytest.mark.parametrize("n,seed", [(3, 11), (5, 12), (7, 13)])
def test_revolute_chain_keeps_the_base_parameters(n, seed):
    """On a generic revolute chain (fixed base, gravity not along joint 1) the nonzero parameters
    left are a basis of the identifiable combinations: as many as the rank of the regressor, their
    columns independent, and the base parameters of identification (p_base = B p, Gautier's QR)
    the same for both models."""
    from dynamics_node.identify.fit_params import setup

    m = dn.load_model(_chain(n, seed))
    s = dn.simplify_inertias(m)
    assert nonzero_parameters(m) == 10 * n
    Y = _regressor_stack(m)
    tol = 1e-9 * np.abs(Y).max()
    rank = np.linalg.matrix_rank(Y, tol=tol)
    kept = np.flatnonzero(dn.inertial_parameters(s))
    assert kept.size == rank == 3 + 7 * (n - 1)  # Khalil's count: ZZ1 MX1 MY1, then 7 per link
    assert np.linalg.matrix_rank(Y[:, kept], tol=tol) == kept.size
    par = setup(m, dn.load_model(_chain(n, seed), friction=True))
    B = par.base_map()[:, :10 * n]
    assert par.base_idx.size - 2 * n == rank  # identification's count (plus viscous and Coulomb per joint)
    bp, bs = B @ dn.inertial_parameters(m), B @ dn.inertial_parameters(s)
    np.testing.assert_allclose(bs, bp, rtol=1e-10, atol=1e-10 * np.abs(bp).max())
    # per link: 3 on the base joint's body (Izz about the axis, h across it), then 7 (Table 9.7 zeroes 3)
    per = (dn.inertial_parameters(s).reshape(n, 10) != 0).sum(axis=1)
    assert per.tolist() == [3] + [7] * (n - 1)


def _pinocchio_rank(xml, n=120, seed=2):
    """Rank of Pinocchio's joint-torque regressor (the original model's), stacked over random states:
    an independent count of the identifiable inertial combinations."""
    import pinocchio as pin

    pm = pin.buildModelFromXML(xml) if xml.lstrip().startswith("<") else pin.buildModelFromUrdf(xml)
    pd = pm.createData()
    rng = np.random.default_rng(seed)
    Y = np.vstack([pin.computeJointTorqueRegressor(pm, pd, pin.randomConfiguration(pm), rng.uniform(-2, 2, pm.nv),
                                                   rng.uniform(-2, 2, pm.nv)) for _ in range(n)])
    return np.linalg.matrix_rank(Y, tol=1e-9 * np.abs(Y).max())


@pytest.mark.parametrize("n,seed", [(3, 51), (6, 52), (7, 53), (7, 54)])
def test_random_axes_reach_the_rank(n, seed):
    """Joint axes that are no coordinate axis of their bodies (every component nonzero): the parameters
    §9.7 leaves are as many as the rank of the regressor (ours and Pinocchio's, over random states),
    their columns independent, body 1 keeps three (a^T Ibar a and the first moment across the axis),
    and the dynamics are the original's."""
    pytest.importorskip("pinocchio")
    xml = _chain(n, seed, random_axes=True)
    m = dn.load_model(xml)
    assert all(np.count_nonzero(np.abs(np.asarray(m._spec.axis[i])) < 1e-3) == 0 for i in range(n))
    s = dn.simplify_inertias(m)
    Y = _regressor_stack(m)
    tol = 1e-9 * np.abs(Y).max()
    rank = np.linalg.matrix_rank(Y, tol=tol)
    assert rank == _pinocchio_rank(xml) == 3 + 7 * (n - 1)  # 45 for 7R
    kept = np.flatnonzero(dn.inertial_parameters(s))
    assert kept.size == rank, (kept.size, rank)
    assert np.linalg.matrix_rank(Y[:, kept], tol=tol) == rank
    per = (dn.inertial_parameters(s).reshape(n, 10) != 0).sum(axis=1)
    assert per.tolist() == [3] + [7] * (n - 1)
    _same_dynamics(m, s, np.random.default_rng(seed), n_states=4)
    # inverse dynamics at random states, against the original model's (and Pinocchio's, on the original)
    import pinocchio as pin

    pm = pin.buildModelFromXML(xml)
    pd = pm.createData()
    rng = np.random.default_rng(seed + 1)
    for _ in range(10):
        q, qd, qdd = rng.uniform(-3, 3, (3, n))
        ref = pin.rnea(pm, pd, q, qd, qdd)
        assert np.max(np.abs(dn.inverse_dynamics(s, q, qd, qdd) - ref)) <= 1e-9 * np.abs(ref).max()


def _generic_inertias(xml, seed):
    """The URDF with every link's inertial replaced by a random full one (no zero entry): the robot's
    kinematics with generic inertias, so that counts of nonzero parameters are structural."""
    import xml.etree.ElementTree as ET

    rng = np.random.default_rng(seed)
    root = ET.fromstring(xml)
    for link in root.findall("link"):
        old = link.find("inertial")
        if old is not None:
            link.remove(old)
        mass = rng.uniform(0.5, 3.0)
        link.append(ET.fromstring(ug.inertial_xml(mass, rng.uniform(-0.1, 0.1, 3), rng.uniform(-3, 3, 3),
                                                  ug.random_inertia(rng, mass))))
    return ET.tostring(root, encoding="unicode")


@pytest.mark.parametrize("rel", ["panda_description/urdf/panda.urdf", "ur_description/urdf/ur5_robot.urdf",
                                 "kinova_description/robots/kinova.urdf", "xarm_description/urdf/xarm7.urdf",
                                 "z1_description/urdf/z1.urdf", "so_arm_description/urdf/so101.urdf"])
def test_real_arms_against_the_rank(rel):
    """Real arms' kinematics (parallel axes, gravity along joint 1: not generic; mimic tags removed,
    which Pinocchio's URDF reader does not model), with their own inertias and with generic ones:
    the rank of our regressor equals Pinocchio's; with generic inertias §9.7 leaves at least as many
    parameters as the rank and their columns span the whole regressor (nothing the torques need is
    lost); the dynamics are the original's either way."""
    pytest.importorskip("pinocchio")
    path = ROBOTS / rel
    if not path.exists():
        pytest.skip(f"{rel} not in this example-robot-data")
    own = ug.strip_mimic(path.read_text())
    for xml in (own, _generic_inertias(own, zlib.crc32(rel.encode()))):
        m = _load(xml, False)
        s = dn.simplify_inertias(m)
        _same_dynamics(m, s, np.random.default_rng(17), n_states=4, what=rel)
        Y = _regressor_stack(m)
        tol = 1e-9 * np.abs(Y).max()
        rank = np.linalg.matrix_rank(Y, tol=tol)
        assert rank == _pinocchio_rank(xml), rel
        assert nonzero_parameters(s) < nonzero_parameters(m)
    assert rank <= nonzero_parameters(s)
    assert np.linalg.matrix_rank(Y[:, np.flatnonzero(dn.inertial_parameters(s))], tol=tol) == rank


def test_parallel_axes_stop_short_of_the_base_parameters():
    """Eq. 9.30 asks I_Delta to work for any motion of the parent; with parallel axes (a planar chain)
    the parent's motion is restricted and the regressor finds more dependencies than §9.7 removes."""
    m = dn.load_model(_chain(3, 5, parallel=True))
    s = dn.simplify_inertias(m)
    Y = _regressor_stack(m)
    rank = np.linalg.matrix_rank(Y, tol=1e-9 * np.abs(Y).max())
    assert rank < nonzero_parameters(s) < nonzero_parameters(m)
    _same_dynamics(m, s, np.random.default_rng(3))


def test_prismatic_moves_the_rotational_inertia():
    m = dn.load_model(_chain(3, 21, prismatic=(1,)))
    s = dn.simplify_inertias(m)
    pi = dn.inertial_parameters(s).reshape(3, 10)
    assert np.all(pi[1, 4:] == 0) and np.all(pi[1, :4] != 0)  # Table 9.7: Ibar moves, m and h stay
    _same_dynamics(m, s, np.random.default_rng(4))


def test_revolute_about_z_zeroes_m_mcz_iyy():
    """Table 9.7's revolute I_Delta for an axis along z: the child keeps Ixx - Iyy, Ixy, Ixz, Iyz,
    Izz, m cx, m cy (Khalil's grouping); checked on a body of a chain with a z axis and no turn."""
    xml = _chain(2, 31, parallel=True)
    m = dn.load_model(xml)
    s = dn.simplify_inertias(m)
    p, ps = dn.inertial_parameters(m).reshape(2, 10)[1], dn.inertial_parameters(s).reshape(2, 10)[1]
    names = ("m", "hx", "hy", "hz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
    assert {n for n, v in zip(names, ps) if v == 0} == {"m", "hz", "Iyy"}
    np.testing.assert_allclose(ps[[1, 2, 5, 7, 8, 9]], p[[1, 2, 5, 7, 8, 9]], rtol=1e-15)
    np.testing.assert_allclose(ps[4], p[4] - p[6], rtol=1e-14)


def test_floating_base_keeps_the_base_body_and_closed_loops():
    """The 6-DoF joint admits no I_Delta: the floating body keeps its ten parameters (plus what its
    children give it); a closed-loop model keeps its closed-loop forward dynamics (K, k are
    kinematics)."""
    m = dn.load_model(_chain(4, 41), floating_base=True)
    s = dn.simplify_inertias(m)
    per = (dn.inertial_parameters(s).reshape(5, 10) != 0).sum(axis=1)
    assert per.tolist() == [10, 7, 7, 7, 7]
    _same_dynamics(m, s, np.random.default_rng(5))
    fb = dn.load_model(REPO / "urdf" / "fourbar.urdf")
    fs = dn.simplify_inertias(fb)
    assert nonzero_parameters(fs) < nonzero_parameters(fb)
    q = dn.close_loops(fb, np.array([0.9, -0.5, -1.2]), ["crank_joint"])
    qd = dn.close_loop_velocities(fb, q, np.array([0.7, 0.0, 0.0]), ["crank_joint"])
    tau = np.array([0.3, -0.2, 0.1])
    a1, w1 = dn.closed_loop_forward_dynamics(fb, q, qd, tau)
    a2, w2 = dn.closed_loop_forward_dynamics(fs, q, qd, tau)
    assert _rel_err(a1, a2) <= RTOL
    for k in w1:
        assert _rel_err(w1[k], w2[k]) <= 1e-10


def test_payload_stays_replaceable_and_gravity_changeable():
    arm = dn.load_model(REPO / "urdf" / "arm7.urdf")
    m = arm.with_payload("link7", 1.5, (0.01, 0.02, 0.1), (0.01, 0, 0, 0.02, 0, 0.03))
    s = dn.simplify_inertias(m)
    rng = np.random.default_rng(6)
    _same_dynamics(m, s, rng)
    _same_dynamics(m.with_payload("link7", 0.0), s.with_payload("link7", 0.0), rng)
    _same_dynamics(m.with_gravity([3.0, -2.0, 1.0]), s.with_gravity([3.0, -2.0, 1.0]), rng)


def test_mimic_and_planar_joints():
    """Mimic followers are kernel joints of the tree (G^T H_t G unchanged); a planar joint gives up
    J (1 - n n^T) only and its two massless intermediate bodies stay massless."""
    xml, _ = ug.random_urdf(5, n_links=7, n_mimic=2)
    m = _load(xml, False)
    assert m.has_mimic
    _same_dynamics(m, dn.simplify_inertias(m), np.random.default_rng(8))
    body = ug.inertial_xml(2.0, [0.1, -0.05, 0.2], [0.3, 0.2, 0.1], ug.random_inertia(np.random.default_rng(2), 2.0))
    planar = ('<robot name="p"><link name="a"/><link name="b">' + body + '</link><joint name="pj" type="planar">'
              '<parent link="a"/><child link="b"/><origin xyz="0 0 0.1" rpy="0.2 0 0"/><axis xyz="0 0 1"/></joint>'
              '</robot>')
    m = dn.load_model(planar)
    s = dn.simplify_inertias(m)
    assert m.nb == 3
    assert np.all(dn.inertial_parameters(s)[:20] == 0)  # the intermediate bodies stay empty
    assert nonzero_parameters(s) == nonzero_parameters(m) - 1
    _same_dynamics(m, s, np.random.default_rng(9))


def test_refuses_what_is_not_a_model():
    with pytest.raises(dn.InputError, match="Model"):
        dn.simplify_inertias("urdf/arm7.urdf")


def test_library_doc_example_runs_as_written(capsys, monkeypatch):
    """docs/library.md's example, executed as written from the repository root."""
    import re

    text = (REPO / "docs" / "library.md").read_text()
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "simplify_inertias" in b]
    monkeypatch.chdir(REPO)
    exec(compile(code, "docs/library.md", "exec"), {})
    assert capsys.readouterr().out.strip() == "63 -> 40"
