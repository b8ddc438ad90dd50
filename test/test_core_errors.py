"""Bad URDFs (ModelError naming the culprit), a massless leaf (warning, singular H refused with
SingularMassMatrixError naming the link, never inf/NaN) and bad arguments (InputError)."""
import math

import numpy as np
import pytest

import urdfgen as ug


def A(*x):
    return np.array(x, dtype=float)


Z2 = np.zeros(2)

INERTIAL = ('<inertial><origin xyz="0 0 0.1" rpy="0 0 0"/><mass value="1.0"/>'
            '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>')


def link(name, inertial=INERTIAL):
    return f'<link name="{name}">{inertial}</link>\n'


def joint(name, parent, child, jt="revolute", axis="0 0 1", xyz="0 0 0.2", extra=""):
    lim = '<limit lower="-3" upper="3" effort="10" velocity="1"/>' if jt in ("revolute", "prismatic") else ""
    ax = f'<axis xyz="{axis}"/>' if jt != "fixed" else ""
    return (f'<joint name="{name}" type="{jt}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="0 0 0"/>{ax}{lim}{extra}</joint>\n')


def robot(*parts):
    return '<?xml version="1.0"?>\n<robot name="bad">\n' + "".join(parts) + "</robot>\n"


GOOD = robot(link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"), joint("j2", "l1", "l2"))


def _model_error(dn, source, *names):
    with pytest.raises(dn.ModelError) as ei:
        dn.load_model(source)
    msg = str(ei.value)
    assert any(n in msg for n in names), f"ModelError message {msg!r} names none of {names}"
    return msg


def test_good_reference_loads(dn):
    m = dn.load_model(GOOD)
    assert m.joint_names == ("j1", "j2")


def test_not_xml_text(dn):
    with pytest.raises(dn.ModelError):
        dn.load_model("<robot name='x'><link name='a'></robot")


def test_not_xml_file_named(dn, tmp_path):
    p = ug.write(tmp_path / "broken_robot.urdf", "this is not XML at all {")
    _model_error(dn, p, "broken_robot.urdf")


def test_missing_file_named(dn, tmp_path):
    with pytest.raises((dn.ModelError, FileNotFoundError)) as ei:
        dn.load_model(tmp_path / "no_such_robot.urdf")
    assert "no_such_robot.urdf" in str(ei.value)


def test_no_root(dn):
    src = robot(link("a"), link("b"), joint("ja", "a", "b"), joint("jb", "b", "a"))
    with pytest.raises(dn.ModelError) as ei:
        dn.load_model(src)
    msg = str(ei.value).lower()
    assert "root" in msg or "loop" in msg or "cycle" in msg, msg


def test_no_links(dn):
    with pytest.raises(dn.ModelError):
        dn.load_model(robot())


def test_two_roots(dn):
    src = robot(link("base"), link("l1"), link("stray_root"), joint("j1", "base", "l1"))
    _model_error(dn, src, "stray_root")


def test_two_roots_two_trees(dn):
    src = robot(link("rootA"), link("a1"), link("rootB"), link("b1"),
                joint("ja", "rootA", "a1"), joint("jb", "rootB", "b1"))
    _model_error(dn, src, "rootA", "rootB")


def test_loop_in_tree(dn):
    # root 'base' -> l1 is fine; c1 -> c2 -> c3 -> c1 is a cycle detached from the root
    src = robot(link("base"), link("l1"), link("c1"), link("c2"), link("c3"), joint("j1", "base", "l1"),
                joint("jc1", "c1", "c2"), joint("jc2", "c2", "c3"), joint("jc3", "c3", "c1"))
    _model_error(dn, src, "c1", "c2", "c3", "jc1", "jc2", "jc3")


def test_link_with_two_parents(dn):
    src = robot(link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"), joint("j2", "base", "l2"),
                joint("j3", "l1", "l2"))
    _model_error(dn, src, "l2", "j3")


def test_unknown_parent_link(dn):
    src = robot(link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"), joint("j2", "ghost_link", "l2"))
    _model_error(dn, src, "ghost_link")


def test_unknown_child_link(dn):
    src = robot(link("base"), link("l1"), joint("j1", "base", "l1"), joint("j2", "l1", "phantom_child"))
    _model_error(dn, src, "phantom_child")


def test_zero_axis(dn):
    src = robot(link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"),
                joint("zero_axis_joint", "l1", "l2", axis="0 0 0"))
    _model_error(dn, src, "zero_axis_joint")


def test_negative_mass(dn):
    bad = ('<inertial><origin xyz="0 0 0" rpy="0 0 0"/><mass value="-1.5"/>'
           '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>')
    src = robot(link("base"), link("l1"), link("neg_mass_link", bad),
                joint("j1", "base", "l1"), joint("j2", "l1", "neg_mass_link"))
    _model_error(dn, src, "neg_mass_link")


def _model_warning(dn, source, *names):
    """Loads with a ModelWarning naming one of ``names``; strict=True raises it as a ModelError."""
    with pytest.warns(dn.ModelWarning) as rec:
        m = dn.load_model(source)
    msgs = " | ".join(str(r.message) for r in rec if issubclass(r.category, dn.ModelWarning))
    assert any(n in msgs for n in names), f"ModelWarnings {msgs!r} name none of {names}"
    with pytest.raises(dn.ModelError) as ei:
        dn.load_model(source, strict=True)
    assert any(n in str(ei.value) for n in names), str(ei.value)
    return m, msgs


def test_inertia_triangle_inequality(dn):
    """A triangle-inequality violation (CAD exports) loads with a warning saying by how much
    (0.05 - 0.01 - 0.01 = 0.03 kg m^2); strict=True refuses it (a warning, not an error: CAD exports are common)."""
    bad = ('<inertial><origin xyz="0 0 0" rpy="0 0 0"/><mass value="1.0"/>'
           '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.05"/></inertial>')
    src = robot(link("base"), link("l1"), link("triangle_link", bad),
                joint("j1", "base", "l1"), joint("j2", "l1", "triangle_link"))
    m, msg = _model_warning(dn, src, "triangle_link")
    assert "triangle inequality by 0.03 kg" in msg and "<robot_description>" in msg, msg
    assert m.joint_names == ("j1", "j2")
    assert np.all(np.isfinite(dn.forward_dynamics(m, Z2, Z2, Z2)))  # H stays positive definite here


def test_inertia_not_positive(dn):
    """An indefinite inertia loads with a warning; where it makes H indefinite, whatever factors H
    refuses with SingularMassMatrixError naming the link, inverse dynamics and gravity still work."""
    bad = ('<inertial><origin xyz="0 0 0" rpy="0 0 0"/><mass value="1.0"/>'
           '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="-0.01"/></inertial>')
    src = robot(link("base"), link("l1"), link("negI_link", bad),
                joint("j1", "base", "l1"), joint("j2", "l1", "negI_link"))
    m, msg = _model_warning(dn, src, "negI_link")
    assert "not positive semi-definite" in msg and "not positive definite" in msg, msg
    q = np.array([0.3, -0.2])
    # H[1,1] = izz of negI_link = -0.01 (axis z through its origin): H is indefinite (checked with numpy)
    H = dn.mass_matrix(m, q)
    assert np.linalg.eigvalsh(H)[0] < 0 and abs(H[1, 1] + 0.01) < 1e-12
    assert np.all(np.isfinite(dn.gravity(m, q))) and np.all(np.isfinite(dn.inverse_dynamics(m, q, Z2, Z2)))
    for method in ("aba", "crba"):
        with pytest.raises(dn.SingularMassMatrixError, match="negI_link"):
            dn.forward_dynamics(m, q, Z2, Z2, method=method)


def test_nan_in_joint_origin(dn):
    src = robot(link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"),
                joint("nan_origin_joint", "l1", "l2", xyz="0 nan 0.2"))
    _model_error(dn, src, "nan_origin_joint")


def test_nan_in_mass(dn):
    bad = ('<inertial><origin xyz="0 0 0" rpy="0 0 0"/><mass value="NaN"/>'
           '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>')
    src = robot(link("base"), link("l1"), link("nan_mass_link", bad),
                joint("j1", "base", "l1"), joint("j2", "l1", "nan_mass_link"))
    _model_error(dn, src, "nan_mass_link")


def test_nan_in_axis(dn):
    src = robot(link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"),
                joint("nan_axis_joint", "l1", "l2", axis="0 nan 1"))
    _model_error(dn, src, "nan_axis_joint")


def test_inf_in_inertia(dn):
    bad = ('<inertial><origin xyz="0 0 0" rpy="0 0 0"/><mass value="1"/>'
           '<inertia ixx="inf" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>')
    src = robot(link("base"), link("l1"), link("inf_link", bad),
                joint("j1", "base", "l1"), joint("j2", "l1", "inf_link"))
    _model_error(dn, src, "inf_link")


def test_garbage_number(dn):
    src = robot(link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"),
                joint("garbage_joint", "l1", "l2", xyz="0 abc 0.2"))
    _model_error(dn, src, "garbage_joint")


def test_unknown_mimic_master(dn):
    """A <mimic> naming an unknown joint is ignored with a warning naming both joints."""
    src = robot(link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"),
                joint("follower_j", "l1", "l2", extra='<mimic joint="no_such_master" multiplier="1" offset="0"/>'))
    m, msg = _model_warning(dn, src, "no_such_master")
    assert "follower_j" in msg and "no_such_master" in msg
    assert m.joint_names == ("j1", "follower_j") and not m.mimic


def test_duplicate_link_name(dn):
    src = robot(link("base"), link("l1"), link("l1"), joint("j1", "base", "l1"))
    _model_error(dn, src, "l1")


def test_errors_hierarchy(dn):
    assert issubclass(dn.ModelError, dn.DynamicsError)
    assert issubclass(dn.InputError, dn.DynamicsError) and issubclass(dn.InputError, ValueError)
    assert issubclass(dn.SingularMassMatrixError, dn.InputError)


# ------------------------------------------------------------------------------------------------
# massless leaf on a movable joint
# ------------------------------------------------------------------------------------------------
MASSLESS = robot(link("base"), link("l1"), '<link name="ghost_tip"/>\n', joint("j1", "base", "l1", axis="0 1 0"),
                 joint("tip_joint", "l1", "ghost_tip", axis="1 0 0"))


@pytest.fixture(scope="module")
def massless_model():
    import dynamics_node as dn

    with pytest.warns(Warning, match="ghost_tip"):
        m = dn.load_model(MASSLESS)
    return m


def test_massless_leaf_loads_with_warning(massless_model):
    assert massless_model.joint_names == ("j1", "tip_joint")


def test_massless_leaf_id_and_gravity_work(massless_model, dn):
    q, qd, qdd = np.array([0.4, -0.3]), np.array([0.5, 1.0]), np.array([0.2, -0.7])
    tau = np.asarray(dn.inverse_dynamics(massless_model, q, qd, qdd))
    g = np.asarray(dn.gravity(massless_model, q))
    assert np.all(np.isfinite(tau)) and np.all(np.isfinite(g))
    # closed form: l1 (mass 1, CoM 0.1 above the y-axis joint, I = 0.01 about the CoM) carries everything
    m, lc, I = 1.0, 0.1, 0.01
    np.testing.assert_allclose(tau, [(I + m * lc * lc) * qdd[0] - m * 9.81 * lc * math.sin(q[0]), 0.0],
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(g, [-m * 9.81 * lc * math.sin(q[0]), 0.0], rtol=1e-9, atol=1e-12)
    H = np.asarray(dn.mass_matrix(massless_model, q))
    assert np.all(np.isfinite(H))


def test_massless_leaf_forward_dynamics_refused(massless_model, dn):
    with pytest.raises(dn.SingularMassMatrixError) as ei:
        dn.forward_dynamics(massless_model, A(0.4, -0.3), A(0.5, 1.0), A(1.0, 0.0))
    assert "ghost_tip" in str(ei.value)
    assert isinstance(ei.value, dn.InputError)


def test_massless_leaf_hybrid_refused(massless_model, dn):
    with pytest.raises(dn.SingularMassMatrixError) as ei:
        dn.hybrid_dynamics(massless_model, A(0.4, -0.3), A(0.5, 1.0), A(0.3, 0.0), A(0.0, 0.0), ["tip_joint"])
    assert "ghost_tip" in str(ei.value)


def test_massless_leaf_hybrid_inverse_at_massless_joint_ok(massless_model, dn):
    """If the massless joint's acceleration is given (inverse joint), nothing singular is inverted."""
    qdd, tau = dn.hybrid_dynamics(massless_model, A(0.4, -0.3), A(0.5, 1.0), A(0.0, 0.3), A(1.0, 0.0), ["j1"])
    assert np.all(np.isfinite(qdd)) and np.all(np.isfinite(tau))


def test_massless_fixed_leaf_is_fine(dn):
    src = robot(link("base"), link("l1"), '<link name="tool_frame"/>\n', joint("j1", "base", "l1"),
                joint("tool_fixed", "l1", "tool_frame", jt="fixed"))
    m = dn.load_model(src)
    qdd = dn.forward_dynamics(m, A(0.1), A(0.0), A(1.0))
    assert np.all(np.isfinite(qdd))
    assert "tool_frame" in m.link_names


# ------------------------------------------------------------------------------------------------
# bad arguments
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def good():
    import dynamics_node as dn

    return dn.load_model(GOOD)


@pytest.mark.parametrize("fn", ["inverse_dynamics", "forward_dynamics", "bias_forces", "gravity", "mass_matrix",
                                "jacobian", "link_pose", "link_velocity", "bias_acceleration", "center_of_mass"])
@pytest.mark.parametrize("bad", ["short", "long", "nan", "inf"])
def test_bad_q(dn, good, fn, bad):
    q = A(*{"short": [0.1], "long": [0.1, 0.2, 0.3], "nan": [0.1, float("nan")], "inf": [float("inf"), 0.1]}[bad])
    z = A(0.0, 0.0)
    calls = {
        "inverse_dynamics": lambda: dn.inverse_dynamics(good, q, z, z),
        "forward_dynamics": lambda: dn.forward_dynamics(good, q, z, z),
        "bias_forces": lambda: dn.bias_forces(good, q, z),
        "gravity": lambda: dn.gravity(good, q),
        "mass_matrix": lambda: dn.mass_matrix(good, q),
        "jacobian": lambda: dn.jacobian(good, q, "l2"),
        "link_pose": lambda: dn.link_pose(good, q, "l2"),
        "link_velocity": lambda: dn.link_velocity(good, q, z, "l2"),
        "bias_acceleration": lambda: dn.bias_acceleration(good, q, z, "l2"),
        "center_of_mass": lambda: dn.center_of_mass(good, q),
    }
    with pytest.raises(dn.InputError):
        calls[fn]()


@pytest.mark.parametrize("which", ["qd", "qdd", "tau"])
@pytest.mark.parametrize("bad", ["short", "nan", "inf"])
def test_bad_other_vectors(dn, good, which, bad):
    v = A(*{"short": [0.1], "nan": [0.1, float("nan")], "inf": [float("-inf"), 0.1]}[bad])
    q = A(0.1, 0.2)
    z = A(0.0, 0.0)
    with pytest.raises(dn.InputError):
        if which == "qd":
            dn.inverse_dynamics(good, q, v, z)
        elif which == "qdd":
            dn.inverse_dynamics(good, q, z, v)
        else:
            dn.forward_dynamics(good, q, z, v)


@pytest.mark.parametrize("fn", ["jacobian", "link_pose", "link_velocity", "bias_acceleration"])
def test_unknown_link(dn, good, fn):
    q = A(0.1, 0.2)
    with pytest.raises(dn.InputError) as ei:
        if fn in ("link_velocity", "bias_acceleration"):
            getattr(dn, fn)(good, q, A(0, 0), "no_such_link")
        else:
            getattr(dn, fn)(good, q, "no_such_link")
    assert "no_such_link" in str(ei.value)


def test_f_ext_unknown_link_and_bad_wrench(dn, good):
    with pytest.raises(dn.InputError) as ei:
        dn.inverse_dynamics(good, Z2, Z2, Z2, f_ext={"no_such_link": A(0, 0, 1, 0, 0, 0)})
    assert "no_such_link" in str(ei.value)
    with pytest.raises(dn.InputError):
        dn.inverse_dynamics(good, Z2, Z2, Z2, f_ext={"l2": A(0, 0, 1)})
    with pytest.raises(dn.InputError):
        dn.forward_dynamics(good, Z2, Z2, Z2, f_ext={"l2": A(0, 0, float("nan"), 0, 0, 0)})


def test_hybrid_unknown_joint(dn, good):
    with pytest.raises(dn.InputError) as ei:
        dn.hybrid_dynamics(good, Z2, Z2, Z2, Z2, ["no_such_joint"])
    assert "no_such_joint" in str(ei.value)


def test_batch_bad_shapes(dn, good):
    with pytest.raises(dn.InputError):
        dn.inverse_dynamics_batch(good, np.zeros((4, 3)), np.zeros((4, 2)), np.zeros((4, 2)))
    with pytest.raises(dn.InputError):
        dn.inverse_dynamics_batch(good, np.zeros((4, 2)), np.zeros((3, 2)), np.zeros((4, 2)))
    Q = np.zeros((4, 2))
    Q[2, 1] = np.nan
    with pytest.raises(dn.InputError) as ei:
        dn.gravity_batch(good, Q)
    assert "Q[2, 1]" in str(ei.value), ei.value   # the sample and the field
    QDD = np.zeros((70, 2))  # in the second group of states computed side by side
    QDD[40, 0] = np.inf
    with pytest.raises(dn.InputError) as ei:
        dn.inverse_dynamics_batch(good, np.zeros((70, 2)), np.zeros((70, 2)), QDD)
    assert "QDD[40, 0]" in str(ei.value), ei.value


@pytest.mark.parametrize("bad", ["short", "nan"])
def test_bad_q_as_list(dn, good, bad):
    q = {"short": [0.1], "nan": [0.1, float("nan")]}[bad]
    with pytest.raises(dn.InputError):
        dn.inverse_dynamics(good, q, [0.0, 0.0], [0.0, 0.0])


def test_lists_accepted_everywhere(dn, good):
    """API.md: arrays are 1-D numpy float64; lists are accepted."""
    q, z, l = [0.1, 0.2], [0.0, 0.0], "l2"
    qa, za = np.array(q), np.zeros(2)
    pairs = [
        (lambda: dn.inverse_dynamics(good, q, z, [1, 2]),
         lambda: dn.inverse_dynamics(good, qa, za, np.array([1.0, 2.0]))),
        (lambda: dn.gravity(good, q), lambda: dn.gravity(good, qa)),
        (lambda: dn.bias_forces(good, q, [1, -1]), lambda: dn.bias_forces(good, qa, np.array([1.0, -1.0]))),
        (lambda: dn.mass_matrix(good, q), lambda: dn.mass_matrix(good, qa)),
        (lambda: dn.forward_dynamics(good, q, z, [1, 0]),
         lambda: dn.forward_dynamics(good, qa, za, np.array([1.0, 0.0]))),
        (lambda: dn.link_pose(good, q, l), lambda: dn.link_pose(good, qa, l)),
        (lambda: dn.jacobian(good, q, l), lambda: dn.jacobian(good, qa, l)),
        (lambda: dn.link_velocity(good, q, [1, 0], l), lambda: dn.link_velocity(good, qa, np.array([1.0, 0.0]), l)),
        (lambda: dn.bias_acceleration(good, q, [1, 0], l),
         lambda: dn.bias_acceleration(good, qa, np.array([1.0, 0.0]), l)),
        (lambda: dn.center_of_mass(good, q), lambda: dn.center_of_mass(good, qa)),
        (lambda: dn.inverse_dynamics(good, q, z, z, f_ext={l: [0, 0, 1, 0, 0, 0]}),
         lambda: dn.inverse_dynamics(good, qa, za, za, f_ext={l: np.array([0, 0, 1.0, 0, 0, 0])})),
        (lambda: dn.inverse_dynamics_batch(good, [q, q], [z, z], [z, z]),
         lambda: dn.inverse_dynamics_batch(good, np.array([qa, qa]), np.zeros((2, 2)), np.zeros((2, 2)))),
        (lambda: dn.gravity_batch(good, [q, q]), lambda: dn.gravity_batch(good, np.array([qa, qa]))),
    ]
    for k, (fl, fa) in enumerate(pairs):
        np.testing.assert_array_equal(np.asarray(fl(), dtype=float), np.asarray(fa(), dtype=float), err_msg=f"call {k}")


def test_real_urdf_with_invalid_inertia_warns(dn):
    """example-robot-data's allegro hand: four finger-tip links whose principal moments violate the
    triangle inequality (checked here with numpy): it loads with a ModelWarning naming each of them,
    and strict=True refuses it naming one."""
    import xml.etree.ElementTree as ET

    path = ug.erd("allegro_hand_description/urdf/allegro_left_hand.urdf")
    bad = []
    for ln in ET.parse(path).getroot().findall("link"):
        i = ln.find("inertial/inertia")
        if i is None:
            continue
        g = {k: float(i.get(k)) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        I = np.array([[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]], [g["ixz"], g["iyz"], g["izz"]]])
        e = np.linalg.eigvalsh(I)
        if e[2] > e[0] + e[1]:
            bad.append(ln.get("name"))
    assert bad, "expected invalid inertias in the allegro URDF"
    _, msgs = _model_warning(dn, path, *bad)
    assert all(f"link '{b}'" in msgs for b in bad) and "allegro_left_hand.urdf" in msgs
