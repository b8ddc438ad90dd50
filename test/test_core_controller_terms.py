"""The controllers' terms in the core: Coriolis matrix, Jacobians of any point in world or link axes, J̇, the
operational-space inertia, manipulability, singular values and the analytic Jacobian.

Oracles: Pinocchio (test-only; computeCoriolisMatrix, getFrameJacobian(TimeVariation) on a frame
added at the point, crba) on every case of conftest (real robots with floating bases and mimic
joints, random trees) at 1e-9 relative; and independent identities: C qd = bias - gravity,
dH/dt = C + C^T and dJ/dt by central differences along q(t) (the free joint integrated on SE(3)),
J̇ qd = bias_acceleration, Λ symmetric positive definite, manipulability = |det J| for a square J,
Euler-angle rates by differences of link_pose.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import urdfgen as ug
from conftest import assert_close, get_case

import dynamics_node as dn

pin = pytest.importorskip("pinocchio")
FD_TOL = 1e-6


# ------------------------------------------------------------------------------------------ helpers
def _pin_point_frame(o, link, point):
    """A copy of the oracle's Pinocchio model with an operational frame at ``point`` (link coordinates)
    of ``link``; returns (model, data, frame id)."""
    pm = pin.Model(o.m)
    fid = pm.getFrameId(link, pin.FrameType.BODY)
    fr = pm.frames[fid]
    placement = fr.placement * pin.SE3(np.eye(3), np.asarray(point, float))
    nf = pm.addFrame(pin.Frame("issue11_point", fr.parentJoint, fid, placement, pin.FrameType.OP_FRAME))
    return pm, pm.createData(), nf


def _integrate(model, q, qd, t):
    """q(t) for constant qd: joints move linearly, the free root on SE(3) (body-frame twist t qd[:6])."""
    q = np.array(q, float)
    if not model.floating_base:
        return q + t * qd
    out = q.copy()
    M = pin.XYZQUATToSE3(q[:7])
    out[:7] = pin.SE3ToXYZQUAT(M * pin.exp6(pin.Motion(t * qd[:3], t * qd[3:6])))
    out[7:] = q[7:] + t * qd[6:]
    return out


def _deep_links(case, k=3):
    """The k links with the most supporting dofs (plus the last link), for the per-link tests."""
    m = case.model
    q = case.states[0][0]
    depth = {l: np.count_nonzero(np.abs(dn.jacobian(m, q, l)).sum(0)) for l in case.links}
    return sorted(case.links, key=lambda l: -depth[l])[:k]


def _cases():
    from conftest import ALL_CASES
    return ALL_CASES


@pytest.fixture(scope="module", params=_cases())
def c(request):
    return get_case(request.param)


# ------------------------------------------------------------------------------------------ Coriolis
def test_coriolis_matches_pinocchio(c):
    o = c.oracle
    for q, qd, _, _ in c.states:
        Cp = o.G.T @ pin.computeCoriolisMatrix(o.m, o.d, o.q(q), o.v(qd)) @ o.G
        assert_close(dn.coriolis_matrix(c.model, q, qd), Cp, what=f"{c.name}: C vs computeCoriolisMatrix")


def test_coriolis_identities(c):
    m = c.model
    for q, qd, _, _ in c.states:
        C = dn.coriolis_matrix(m, q, qd)
        assert_close(C @ qd, dn.bias_forces(m, q, qd) - dn.gravity(m, q), what=f"{c.name}: C qd = bias - gravity")
        h = 1e-6
        Hd = (dn.mass_matrix(m, _integrate(m, q, qd, h)) - dn.mass_matrix(m, _integrate(m, q, qd, -h))) / (2 * h)
        assert_close(C + C.T, Hd, rtol=FD_TOL, what=f"{c.name}: dH/dt = C + C^T")


def test_coriolis_at_rest_is_zero_and_linear_in_qd(c):
    m = c.model
    q, qd, _, _ = c.states[1]
    assert np.all(dn.coriolis_matrix(m, q, np.zeros(m.nv)) == 0.0)
    assert_close(dn.coriolis_matrix(m, q, 2.5 * qd), 2.5 * dn.coriolis_matrix(m, q, qd), what="C linear in qd")


# ------------------------------------------------------------------------------------------ Jacobians
@pytest.mark.parametrize("axes,ref", [("world", "LOCAL_WORLD_ALIGNED"), ("link", "LOCAL")])
def test_jacobian_and_derivative_of_a_point_match_pinocchio(c, axes, ref):
    o = c.oracle
    rng = np.random.default_rng(11)
    for link in _deep_links(c):
        point = rng.uniform(-0.4, 0.4, 3)
        pm, pd, fid = _pin_point_frame(o, link, point)
        for q, qd, _, _ in c.states[:2]:
            pin.computeJointJacobiansTimeVariation(pm, pd, o.q(q), o.v(qd))
            pin.updateFramePlacements(pm, pd)
            rf = getattr(pin, ref)
            Jp = np.asarray(pin.getFrameJacobian(pm, pd, fid, rf)).reshape(6, pm.nv) @ o.G
            dJp = np.asarray(pin.getFrameJacobianTimeVariation(pm, pd, fid, rf)).reshape(6, pm.nv) @ o.G
            assert_close(dn.jacobian(c.model, q, link, point=point, axes=axes), Jp, what=f"{c.name} J {link} {axes}")
            assert_close(dn.jacobian_derivative(c.model, q, qd, link, point=point, axes=axes), dJp,
                         what=f"{c.name} dJ {link} {axes}")


def test_jacobian_defaults_are_the_world_jacobian_of_the_origin(c):
    q = c.states[0][0]
    for link in c.links[:4]:
        assert_close(dn.jacobian(c.model, q, link), c.oracle.jacobian(q, link), what=f"J {link}")
        assert np.array_equal(dn.jacobian(c.model, q, link), dn.jacobian(c.model, q, link, (0, 0, 0), "world"))


def test_jacobian_derivative_identities(c):
    m = c.model
    rng = np.random.default_rng(5)
    for link in _deep_links(c, 2):
        point = rng.uniform(-0.4, 0.4, 3)
        for q, qd, _, _ in c.states[:2]:
            dJ0 = dn.jacobian_derivative(m, q, qd, link)  # the short path of the default call ...
            assert np.array_equal(dJ0, dn.jacobian_derivative(m, list(q), qd, link, (0, 0, 0), "world"))  # ... = route
            assert_close(dJ0 @ qd, dn.bias_acceleration(m, q, qd, link), what=f"{c.name}: dJ qd = bias_acceleration")
            for axes in ("world", "link"):
                h = 1e-6
                Jf = dn.jacobian(m, _integrate(m, q, qd, h), link, point, axes)
                Jb = dn.jacobian(m, _integrate(m, q, qd, -h), link, point, axes)
                assert_close(dn.jacobian_derivative(m, q, qd, link, point, axes), (Jf - Jb) / (2 * h), rtol=FD_TOL,
                             what=f"{c.name}: dJ/dt ({axes}) by central differences")


def test_link_axes_rotate_the_world_rows(c):
    m = c.model
    q, qd, _, _ = c.states[2]
    link = _deep_links(c, 1)[0]
    R = dn.link_pose(m, q, link)[:3, :3]
    Jw = dn.jacobian(m, q, link, point=(0.1, -0.2, 0.3))
    Jl = dn.jacobian(m, q, link, point=(0.1, -0.2, 0.3), axes="link")
    assert_close(Jl, np.vstack([R.T @ Jw[:3], R.T @ Jw[3:]]), what="J_link = diag(R^T, R^T) J_world")
    # the point's velocity is the origin's plus omega x (R p)
    v0 = dn.link_velocity(m, q, qd, link)
    p = R @ np.array([0.1, -0.2, 0.3])
    assert_close(Jw @ qd, np.r_[v0[:3] + np.cross(v0[3:], p), v0[3:]], what="point velocity")


# ------------------------------------------------------------------------------------------ Λ
def test_operational_space_inertia_matches_dense_pinocchio(c):
    o = c.oracle
    rng = np.random.default_rng(3)
    for link in _deep_links(c, 2):
        point = rng.uniform(-0.3, 0.3, 3)
        pm, pd, fid = _pin_point_frame(o, link, point)
        for q, _, _, _ in c.states[:2]:
            H = o.crba(q)
            ev = np.linalg.eigvalsh(H)
            if ev[0] <= 1e-12 * ev[-1]:  # massless links (romeo's fingers): H singular
                with pytest.raises(dn.SingularMassMatrixError):
                    dn.operational_space_inertia(c.model, q, link, point=point)
                continue
            J = pin.computeFrameJacobian(pm, pd, o.q(q), fid, pin.LOCAL_WORLD_ALIGNED)
            J = np.asarray(J).reshape(6, pm.nv) @ o.G
            for rows, idx in ((None, range(6)), (("x", "y", "z"), range(3)), (("rz", "x"), (5, 0))):
                Js = J[list(idx)]
                M = Js @ np.linalg.solve(H, Js.T)
                s = np.linalg.svd(Js, compute_uv=False)
                if s.shape[0] < len(idx) or s[-1] < 1e-6 * s[0]:  # rank lost: refused, naming it
                    with pytest.raises(dn.InputError, match="loses rank"):
                        dn.operational_space_inertia(c.model, q, link, point=point, rows=rows)
                    continue
                L = dn.operational_space_inertia(c.model, q, link, point=point, rows=rows)
                assert_close(L, np.linalg.inv(M), rtol=1e-9 * max(1.0, np.linalg.cond(M) / 1e3),
                             what=f"{c.name} Λ {link} rows={rows}")
                assert_close(L, L.T, what="Λ symmetric")
                assert np.linalg.eigvalsh(L)[0] > 0, "Λ positive definite"


def test_operational_space_inertia_where_j_loses_rank():
    arm = get_case("arm7").model
    q = np.zeros(arm.nv)
    link = arm.link_names[-1]
    with pytest.raises(dn.InputError, match="loses rank") as e:  # a 2-dof chain has a 6-row Jacobian of rank 2
        dn.operational_space_inertia(arm, q, arm.link_names[2])
    assert "rows" in str(e.value)
    J = dn.jacobian(arm, q, link)
    if np.linalg.matrix_rank(J) < 6:
        with pytest.raises(dn.InputError, match="loses rank"):
            dn.operational_space_inertia(arm, q, link)


# ------------------------------------------------------------------------------------------ manipulability
def test_manipulability_and_singular_values(c):
    o = c.oracle
    for link in _deep_links(c, 2):
        for q, _, _, _ in c.states[:2]:
            J = o.jacobian(q, link)
            s = np.linalg.svd(J, compute_uv=False)
            assert_close(dn.jacobian_singular_values(c.model, q, link), s, what="singular values")
            w = dn.manipulability(c.model, q, link)
            assert isinstance(w, float)
            expected = math.sqrt(max(np.linalg.det(J @ J.T), 0.0)) if s.shape[0] == 6 and s[-1] > 1e-9 * s[0] else 0.0
            assert_close(w, expected, what="sqrt(det(J J^T))")


def test_manipulability_of_a_square_jacobian_is_abs_det():
    case = get_case("ur5")
    m = case.model
    assert m.nv == 6
    link = _deep_links(case, 1)[0]
    for q, _, _, _ in case.states:
        J = case.oracle.jacobian(q, link)
        assert_close(dn.manipulability(m, q, link), abs(np.linalg.det(J)), what="|det J|")
    q = np.zeros(6)  # ur5 at zero: wrist singular
    assert dn.manipulability(m, q, link) == 0.0 or np.linalg.matrix_rank(case.oracle.jacobian(q, link)) == 6


# ------------------------------------------------------------------------------------------ analytic
def _wrap(x):
    return (x + np.pi) % (2 * np.pi) - np.pi


@pytest.mark.parametrize("euler", ["zyx", "zyz"])
def test_analytic_jacobian_by_differences_of_euler_angles(c, euler):
    from dynamics_node.algorithms.tree.jacobians import euler_angles

    m = c.model
    for link in _deep_links(c, 2):
        for q, qd, _, _ in c.states[:2]:
            try:
                Ja = dn.analytic_jacobian(m, q, link, euler=euler)
            except dn.InputError as e:
                assert "singular" in str(e)
                continue
            h = 1e-6
            Tf, Tb = dn.link_pose(m, _integrate(m, q, qd, h), link), dn.link_pose(m, _integrate(m, q, qd, -h), link)
            dphi = _wrap(np.subtract(euler_angles(Tf[:3, :3], euler), euler_angles(Tb[:3, :3], euler))) / (2 * h)
            dp = (Tf[:3, 3] - Tb[:3, 3]) / (2 * h)
            assert_close(Ja @ qd, np.r_[dp, dphi], rtol=FD_TOL, what=f"{c.name} analytic {euler} {link}")


def test_euler_angle_conventions_rebuild_the_rotation():
    from dynamics_node.algorithms.tree.jacobians import euler_angles

    def Rz(a):
        return np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])

    def Ry(a):
        return np.array([[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]])

    def Rx(a):
        return np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])

    a, b, c = euler_angles(Rz(0.3) @ Ry(-0.7) @ Rx(1.1), "zyx")
    assert_close([a, b, c], [0.3, -0.7, 1.1], what="zyx")
    a, b, c = euler_angles(Rz(0.3) @ Ry(0.7) @ Rz(1.1), "zyz")
    assert_close([a, b, c], [0.3, 0.7, 1.1], what="zyz")


def test_analytic_jacobian_refuses_representation_singularities():
    txt, _ = ug.random_urdf(10, 5, dynamics=True)
    m = dn.load_model(txt, floating_base=True)
    root = m.root_link
    q = np.array(m.neutral(), float)  # identity: zyz has b = 0
    with pytest.raises(dn.InputError, match="zyz.*singular"):
        dn.analytic_jacobian(m, q, root, euler="zyz")
    assert dn.analytic_jacobian(m, q, root).shape == (6, m.nv)  # zyx is fine there
    q[3:7] = [0.0, math.sin(math.pi / 4), 0.0, math.cos(math.pi / 4)]  # Ry(pi/2): zyx has b = pi/2
    with pytest.raises(dn.InputError, match="zyx.*singular"):
        dn.analytic_jacobian(m, q, root, euler="zyx")
    assert dn.analytic_jacobian(m, q, root, euler="zyz").shape == (6, m.nv)


# ------------------------------------------------------------------------------------------ inputs
def _arm():
    return get_case("arm7").model


def test_bad_inputs_are_refused_by_name():
    m = _arm()
    q, qd = np.zeros(m.nv), np.ones(m.nv)
    link = m.link_names[-1]
    calls = {
        "jacobian": lambda **k: dn.jacobian(m, q, k.get("link", link), **{x: y for x, y in k.items() if x != "link"}),
        "jacobian_derivative": lambda **k: dn.jacobian_derivative(m, q, qd, k.get("link", link),
                                                                  **{x: y for x, y in k.items() if x != "link"}),
        "operational_space_inertia": lambda **k: dn.operational_space_inertia(
            m, q + 0.3, k.get("link", link), **{x: y for x, y in k.items() if x not in ("link", "axes")}),
    }
    for name, fn in calls.items():
        for bad in ("nope", None, 3, ["link7"]):
            with pytest.raises((dn.InputError, TypeError), match="link"):
                fn(link=bad)
        for bad in ((1, 2), (1, 2, 3, 4), "abc", None, [[1, 2, 3]], (1, 2, float("nan"))):
            with pytest.raises(dn.InputError, match="point"):
                fn(point=bad)
        if name != "operational_space_inertia":
            for bad in ("World", "local", None, 1):
                with pytest.raises(dn.InputError, match="axes"):
                    fn(axes=bad)
    for bad in ("X", ("x", "w"), (), ("x", "x"), 5, (1, 2)):
        with pytest.raises(dn.InputError, match="rows"):
            dn.operational_space_inertia(m, q + 0.3, link, rows=bad)
    for bad in ("xyz", "ZYX", None, 3):
        with pytest.raises(dn.InputError, match="euler"):
            dn.analytic_jacobian(m, q + 0.3, link, euler=bad)
    for fn in (dn.manipulability, dn.jacobian_singular_values, dn.analytic_jacobian):
        with pytest.raises(dn.InputError, match="link"):
            fn(m, q, "nope")
    with pytest.raises(dn.InputError, match="qd"):
        dn.coriolis_matrix(m, q, qd[:-1])
    with pytest.raises(dn.InputError, match="qd"):
        dn.jacobian_derivative(m, q, np.r_[qd[:-1], np.nan], link)
    with pytest.raises(dn.InputError, match="q"):
        dn.coriolis_matrix(m, q[:-1], qd)


def test_data_is_accepted_and_gives_the_same_result():
    m = _arm()
    q, qd = get_case("arm7").states[0][:2]
    link = m.link_names[-1]
    d = dn.Data(m)
    pairs = [
        (lambda **k: dn.coriolis_matrix(m, q, qd, **k)),
        (lambda **k: dn.jacobian(m, q, link, (0.1, 0, 0), "link", **k)),
        (lambda **k: dn.jacobian_derivative(m, q, qd, link, (0.1, 0, 0), "link", **k)),
        (lambda **k: dn.operational_space_inertia(m, q, link, rows=("x", "y", "z"), **k)),
        (lambda **k: dn.manipulability(m, q, link, **k)),
        (lambda **k: dn.jacobian_singular_values(m, q, link, **k)),
        (lambda **k: dn.analytic_jacobian(m, q, link, **k)),
    ]
    other = dn.load_model(ug.random_urdf(3, 11, dynamics=True)[0])
    for fn in pairs:
        assert np.array_equal(fn(data=d), fn())
        with pytest.raises(dn.InputError, match="data"):
            fn(data=dn.Data(other))
        with pytest.raises(dn.InputError, match="data"):
            fn(data=object())


def test_links_on_the_fixed_base_have_zero_jacobians():
    case = get_case("arm7")
    m = case.model
    q, qd = case.states[0][:2]
    base = m.root_link
    assert np.all(dn.jacobian(m, q, base, point=(1, 2, 3)) == 0)
    assert np.all(dn.jacobian_derivative(m, q, qd, base, axes="link") == 0)
    assert dn.manipulability(m, q, base) == 0.0
    with pytest.raises(dn.InputError, match="fixed"):
        dn.operational_space_inertia(m, q, base)
