"""Closed loops (Featherstone Ch. 8): parser errors, Fig. 8.3 closed forms (G, g, Example 8.2), the
four-bar against Pinocchio's constrained dynamics, identities (K G = 0, K g = k, d(delta)/dt = K qd,
Baumgarte decay), actuation cases, loop closure.  Expected values never come from the code under
test: closed forms from the book (INVENTORY §6 item 5), Pinocchio (test-only), finite differences."""
from __future__ import annotations

import math
import pathlib
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import dynamics_node as dn
from dynamics_node.algorithms import loops as L
from types import SimpleNamespace

from dynamics_node.loop_joints import parse_loop_joints, parse_transmissions

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE / "data" / "loops"
REPO = HERE.parent
sys.path.insert(0, str(DATA))
import api_oracle  # noqa: E402


def PinLoop(*args, **kwargs):  # noqa: N802 - pin_oracle's class, imported where a test compares with Pinocchio
    """pin_oracle.PinLoop, imported where a test compares with Pinocchio, so that the rest of this file runs
    without it (make test-oldest: no Pinocchio 3 for numpy 1.26; conftest reports such a test as skipped
    under DYNAMICS_NO_PINOCCHIO=1, and as failed otherwise)."""
    from pin_oracle import PinLoop as oracle

    return oracle(*args, **kwargs)

FIG83 = DATA / "fig8_3.urdf"
FOURBAR = REPO / "urdf" / "fourbar.urdf"
L1, L2 = 0.5, 0.4  # Fig. 8.3 triangle (see the URDF)


# ------------------------------------------------------------------------------------------------
# parser
# ------------------------------------------------------------------------------------------------
BASE = """<robot name="r">
  <link name="a">
    <inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <link name="b">
    <inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <link name="c">
    <inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <link name="w">
    <inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <joint name="ja" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="jb" type="revolute"><parent link="a"/><child link="c"/><origin xyz="1 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="weld" type="fixed"><parent link="c"/><child link="w"/><origin xyz="0.2 0 0"/></joint>
  {loop}
</robot>"""

GOOD = ('<loop_joint name="lj" type="revolute"><predecessor link="b"><origin xyz="1 0 0"/></predecessor>'
        '<successor link="c"/><axis xyz="0 0 1"/></loop_joint>')

BAD = {
    "unknown_link": ('<loop_joint name="lj" type="revolute"><predecessor link="nope"/><successor link="c"/>'
                     '<axis xyz="0 0 1"/></loop_joint>', ["lj", "nope", "unknown link"]),
    "same_link": ('<loop_joint name="lj" type="spherical"><predecessor link="c"/><successor link="c"/></loop_joint>',
                  ["lj", "same"]),
    "missing_axis": ('<loop_joint name="lj" type="prismatic"><predecessor link="b"/><successor link="c"/></loop_joint>',
                     ["lj", "axis"]),
    "zero_axis": ('<loop_joint name="lj" type="revolute"><predecessor link="b"/><successor link="c"/>'
                  '<axis xyz="0 0 0"/></loop_joint>', ["lj", "zero"]),
    "nan_axis": ('<loop_joint name="lj" type="cylindrical"><predecessor link="b"/><successor link="c"/>'
                 '<axis xyz="0 nan 1"/></loop_joint>', ["lj", "NaN"]),
    "nan_origin": ('<loop_joint name="lj" type="spherical"><predecessor link="b"><origin xyz="0 0 nan"/>'
                   '</predecessor><successor link="c"/></loop_joint>', ["lj", "NaN", "predecessor"]),
    "unknown_type": ('<loop_joint name="lj" type="screw"><predecessor link="b"/><successor link="c"/>'
                     '<axis xyz="0 0 1"/></loop_joint>', ["lj", "screw"]),
    # the helical joint's pitch
    "helical_no_pitch": ('<loop_joint name="lj" type="helical"><predecessor link="b"/><successor link="c"/>'
                         '<axis xyz="0 0 1"/></loop_joint>', ["lj", "pitch", "helical"]),
    "helical_pitch_text": ('<loop_joint name="lj" type="helical" pitch="fine"><predecessor link="b"/>'
                           '<successor link="c"/><axis xyz="0 0 1"/></loop_joint>', ["lj", "pitch", "'fine'"]),
    "helical_pitch_nan": ('<loop_joint name="lj" type="helical" pitch="nan"><predecessor link="b"/>'
                          '<successor link="c"/><axis xyz="0 0 1"/></loop_joint>', ["lj", "pitch", "finite"]),
    "helical_pitch_inf": ('<loop_joint name="lj" type="helical" pitch="-inf"><predecessor link="b"/>'
                          '<successor link="c"/><axis xyz="0 0 1"/></loop_joint>', ["lj", "pitch", "finite"]),
    "helical_pitch_huge": ('<loop_joint name="lj" type="helical" pitch="1e9"><predecessor link="b"/>'
                           '<successor link="c"/><axis xyz="0 0 1"/></loop_joint>', ["lj", "pitch", "1e6"]),
    "helical_no_axis": ('<loop_joint name="lj" type="helical" pitch="0.01"><predecessor link="b"/>'
                        '<successor link="c"/></loop_joint>', ["lj", "axis"]),
    "pitch_on_revolute": ('<loop_joint name="lj" type="revolute" pitch="0.01"><predecessor link="b"/>'
                          '<successor link="c"/><axis xyz="0 0 1"/></loop_joint>', ["lj", "pitch", "revolute"]),
    "missing_type": ('<loop_joint name="lj"><predecessor link="b"/><successor link="c"/></loop_joint>',
                     ["lj", "type"]),
    "missing_successor": ('<loop_joint name="lj" type="spherical"><predecessor link="b"/></loop_joint>',
                          ["lj", "successor"]),
    "no_name": ('<loop_joint type="spherical"><predecessor link="b"/><successor link="c"/></loop_joint>',
                ["loop_joint", "name"]),
    "name_of_tree_joint": ('<loop_joint name="ja" type="spherical"><predecessor link="b"/><successor link="c"/>'
                           '</loop_joint>', ["ja", "tree"]),
    "bad_rpy": ('<loop_joint name="lj" type="spherical"><predecessor link="b"><origin rpy="0 1"/></predecessor>'
                '<successor link="c"/></loop_joint>', ["lj", "rpy"]),
}


def _parse(xml):
    root = ET.fromstring(xml)
    links = {e.get("name") for e in root.findall("link")}
    joints = {e.get("name") for e in root.findall("joint")}
    return parse_loop_joints(root, links, joints, "test.urdf")


def test_parse_good_loop_joint():
    (lj,) = _parse(BASE.format(loop=GOOD))
    assert (lj.name, lj.type, lj.predecessor, lj.successor) == ("lj", "revolute", "b", "c")
    np.testing.assert_allclose(lj.X_P[:3, 3], [1, 0, 0])
    # Table 4.1 revolute about z, linear first: S = rotation about z; T spans the other five
    np.testing.assert_allclose(lj.S[:, 0], [0, 0, 0, 0, 0, 1])
    assert lj.T.shape == (6, 5)
    np.testing.assert_allclose(lj.T.T @ lj.S, 0, atol=1e-15)
    np.testing.assert_allclose(lj.T.T @ lj.T, np.eye(5), atol=1e-15)


@pytest.mark.parametrize("jtype,dof", [("fixed", 0), ("revolute", 1), ("continuous", 1), ("prismatic", 1),
                                       ("cylindrical", 2), ("spherical", 3), ("planar", 3)])
def test_parse_every_type_subspaces(jtype, dof):
    xml = BASE.format(loop=f'<loop_joint name="lj" type="{jtype}"><predecessor link="b"/><successor link="c"/>'
                      '<axis xyz="0.3 -0.5 0.8"/></loop_joint>')
    (lj,) = _parse(xml)
    assert lj.S.shape == (6, dof) and lj.T.shape == (6, 6 - dof)
    M = np.hstack([lj.S, lj.T])
    np.testing.assert_allclose(M.T @ M, np.eye(6), atol=1e-14)
    a = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    if jtype in ("revolute", "continuous"):
        np.testing.assert_allclose(lj.S[:, 0], np.r_[0, 0, 0, a], atol=1e-14)
    if jtype == "prismatic":
        np.testing.assert_allclose(lj.S[:, 0], np.r_[a, 0, 0, 0], atol=1e-14)
    if jtype == "planar":  # rotation about the normal, translation in the plane: T = tilt + normal force
        np.testing.assert_allclose(np.abs(lj.T[:3].T @ a).max(), 1.0, atol=1e-14)


@pytest.mark.parametrize("h", [0.01, -0.3, 2.5, 0.0])
def test_parse_helical_subspaces(h):
    """Table 4.1's helical joint, linear first, axis a: S = [h a; a]; T orthonormal with T^T S = 0 and
    range [S T] = R^6."""
    xml = BASE.format(loop=f'<loop_joint name="lj" type="helical" pitch="{h}"><predecessor link="b"/>'
                      '<successor link="c"/><axis xyz="0.3 -0.5 0.8"/></loop_joint>')
    (lj,) = _parse(xml)
    a = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    assert lj.pitch == h and lj.dof == 1 and lj.n_constraints == 5
    np.testing.assert_allclose(lj.S[:, 0], np.r_[h * a, a], atol=1e-14)
    np.testing.assert_allclose(lj.T.T @ lj.S, 0, atol=1e-14)
    np.testing.assert_allclose(lj.T.T @ lj.T, np.eye(5), atol=1e-14)
    assert np.linalg.matrix_rank(np.hstack([lj.S, lj.T])) == 6


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_loop_joint_names_it(case):
    frag, words = BAD[case]
    xml = BASE.format(loop=frag)
    with pytest.raises(dn.ModelError) as ei:
        _parse(xml)
    msg = str(ei.value)
    assert "test.urdf" in msg
    for w in words:
        assert w.lower() in msg.lower(), (case, msg)
    # the loader reports it too (as a ModelError naming the element)
    with pytest.raises(dn.ModelError) as ei2:
        dn.load_model(xml)
    assert words[0].lower() in str(ei2.value).lower()


def test_loop_joint_on_one_body_validator():
    from dynamics_node.loop_joints import validate_loop_bodies

    frag = '<loop_joint name="lj" type="spherical"><predecessor link="c"/><successor link="w"/></loop_joint>'
    loops = _parse(BASE.format(loop=frag))
    with pytest.raises(dn.ModelError, match="lj"):
        validate_loop_bodies(loops, {"a": -1, "b": 0, "c": 1, "w": 1}.__getitem__, "test.urdf")


def test_loader_rejects_loop_joint_on_one_body():
    """Both ends on links welded together by a fixed joint: the same body (model.body_of)."""
    frag = '<loop_joint name="lj" type="spherical"><predecessor link="c"/><successor link="w"/></loop_joint>'
    with pytest.raises(dn.ModelError) as ei:
        dn.load_model(BASE.format(loop=frag))
    assert "lj" in str(ei.value)


def test_transmissions():
    root = ET.parse(FIG83).getroot()
    assert parse_transmissions(root, {"j1", "j2", "j3", "j4"}, "f") == ("j3", "j4")
    assert parse_transmissions(ET.fromstring(BASE.format(loop="")), {"ja", "jb"}, "f") is None
    bad = BASE.format(loop='<transmission name="t"><joint name="weld"/></transmission>')
    rep = SimpleNamespace(ignored=[], warnings=[])  # an unknown joint is ignored with a warning
    assert parse_transmissions(ET.fromstring(bad), {"ja", "jb"}, "f", rep) is None
    assert "weld" in rep.warnings[0] and "weld" in rep.ignored[0]
    ghost = BASE.format(loop='<transmission name="t"><joint name="ghost_joint"/></transmission>')
    with pytest.warns(dn.ModelWarning, match="ghost_joint"):
        m = dn.load_model(ghost)
    assert m.actuated_joints == m.joint_names  # nothing known is named: every joint is actuated
    m = dn.load_model(FIG83)
    assert set(m.actuated_joints) == {"j3", "j4"}
    assert m.loop_joints == ("j5",)


MALFORMED_TRANSMISSIONS = {  # each loaded in silence before; (fragment, words of the warning)
    "no_joint": ('<transmission name="t_diff"><actuator name="m1"><mechanicalReduction>50</mechanicalReduction>'
                 '</actuator></transmission>', ["t_diff", "no <joint>"]),
    "nameless_joint": ('<transmission name="t_anon"><joint><hardwareInterface>E</hardwareInterface></joint>'
                       '</transmission>', ["t_anon", "no name"]),
    "nan_reduction": ('<transmission name="t_nan"><joint name="ja"/><actuator name="m1"><mechanicalReduction>nan'
                      '</mechanicalReduction></actuator></transmission>', ["t_nan", "'nan'", "finite"]),
    "inf_reduction_attribute": ('<transmission name="t_inf"><joint name="ja"/><rightActuator name="m2" '
                                'mechanicalReduction="inf"/></transmission>', ["t_inf", "'inf'", "m2"]),
    "text_reduction": ('<transmission name="t_txt"><joint name="ja"/><mechanicalReduction>fifty'
                       '</mechanicalReduction></transmission>', ["t_txt", "'fifty'"]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_TRANSMISSIONS))
def test_malformed_transmission_is_warned_by_name_and_refused_strict(case):
    frag, words = MALFORMED_TRANSMISSIONS[case]
    xml = BASE.format(loop=frag)
    rep = SimpleNamespace(ignored=[], warnings=[])
    parse_transmissions(ET.fromstring(xml), {"ja", "jb", "weld"}, "t.urdf", rep)
    assert len(rep.warnings) == 1 and rep.warnings[0].startswith("t.urdf: "), rep.warnings
    with pytest.warns(dn.ModelWarning) as rec:
        m = dn.load_model(xml)
    msgs = [str(r.message) for r in rec if issubclass(r.category, dn.ModelWarning)]
    assert len(msgs) == 1, msgs
    for w in words:
        assert w.lower() in msgs[0].lower(), (case, msgs[0])
    # what the transmission still says: a named known joint stays actuated, otherwise every joint is
    assert m.actuated_joints == (("ja",) if 'name="ja"' in frag else m.joint_names)
    with pytest.raises(dn.ModelError) as ei:
        dn.load_model(xml, strict=True)
    assert words[0] in str(ei.value) and "strict=True" in str(ei.value)


def test_well_formed_transmissions_warn_of_nothing():
    import warnings

    good = BASE.format(loop='<transmission name="t"><type>transmission_interface/SimpleTransmission</type>'
                       '<joint name="jb"><hardwareInterface>E</hardwareInterface></joint><actuator name="m">'
                       '<mechanicalReduction> 1.5e2 </mechanicalReduction></actuator></transmission>')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = dn.load_model(good, strict=True)
    assert m.actuated_joints == ("jb",)


# ------------------------------------------------------------------------------------------------
# Fig. 8.3 (Featherstone §8.11) and Example 8.2
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fig():
    return dn.load_model(FIG83)


def _fig_state(m, y1, y2, yd1, yd2):
    """q, qd and the closed forms G, g of Fig. 8.3 in the model's joint order."""
    d = math.sqrt(L1 ** 2 + L2 ** 2 - 2 * L1 * L2 * math.cos(y1))
    th2 = math.atan2(L2 * math.sin(y1), L2 * math.cos(y1) - L1)
    u1 = (L2 ** 2 - L1 * L2 * math.cos(y1)) / d ** 2
    u2 = L1 * L2 * math.sin(y1) / d
    u3 = (L1 ** 2 - L2 ** 2) * L1 * L2 * math.sin(y1) / d ** 4 * yd1 ** 2
    u4 = (L1 * L2 * math.cos(y1) - u2 ** 2) / d * yd1 ** 2
    ix = {n: m.v_slice(n).start for n in ("j1", "j2", "j3", "j4")}
    q = np.zeros(4)
    q[ix["j1"]], q[ix["j2"]], q[ix["j3"]], q[ix["j4"]] = y1, th2, d, y2
    G = np.zeros((4, 2))
    G[ix["j1"], 0], G[ix["j2"], 0], G[ix["j3"], 0], G[ix["j4"], 1] = 1, u1, u2, 1
    g = np.zeros(4)
    g[ix["j2"]], g[ix["j3"]] = u3, u4
    return q, G @ [yd1, yd2], G, g, ix, (u1, u2)


@pytest.mark.parametrize("y", [(1.1, 0.4, 0.7, -0.3), (2.3, -1.0, -1.5, 2.0), (0.5, 2.0, 3.0, 0.1)])
def test_fig83_G_g_closed_form(fig, y):
    q, qd, Gc, gc, ix, _ = _fig_state(fig, *y)
    st = L.loop_state(fig, q, qd)
    assert st.max_error < 1e-12 and st.max_velocity_error < 1e-12
    G, g, names = L.constraint_basis(fig, q, qd, independent=["j1", "j4"])
    assert names == sorted(names, key=lambda n: fig.v_slice(n).start) and set(names) == {"j1", "j4"}
    np.testing.assert_allclose(G, Gc, atol=1e-12)
    np.testing.assert_allclose(g, gc, atol=1e-12)
    # any pivoting: K G = 0, K g = k, full column rank (Eqs. 8.43-8.44)
    K, k = L.loop_constraints(fig, q, qd)
    G2, g2, _ = L.constraint_basis(fig, q, qd)
    assert G2.shape == (4, 2) and np.linalg.matrix_rank(G2) == 2
    np.testing.assert_allclose(K @ G2, 0, atol=1e-12)
    np.testing.assert_allclose(K @ g2, k, atol=1e-12)
    assert L.mobility(fig, q) == (2, 2, 5)  # planar loop, spatial revolute loop joint: over-constrained


def test_fig83_example_8_2_actuator_forces(fig):
    q, qd, Gc, gc, ix, (u1, u2) = _fig_state(fig, 1.1, 0.4, 0.7, -0.3)
    qdd = Gc @ [0.3, -1.2] + gc
    tau_id = dn.inverse_dynamics(fig, q, qd, qdd)
    t = [tau_id[ix[j]] for j in ("j1", "j2", "j3", "j4")]
    u = np.array([[1 / u2, u1 / u2, 1, 0], [0, 0, 0, 1]]) @ t  # Example 8.2
    tau = L.closed_loop_inverse_dynamics(fig, q, qd, qdd)  # actuated from <transmission>: j3, j4
    np.testing.assert_allclose([tau[ix["j3"]], tau[ix["j4"]]], u, rtol=1e-10, atol=1e-12)
    assert tau[ix["j1"]] == 0 and tau[ix["j2"]] == 0
    # those efforts reproduce qdd in closed-loop forward dynamics (at a closed state k_stab = 0)
    a, w = dn.closed_loop_forward_dynamics(fig, q, qd, tau)
    np.testing.assert_allclose(a, qdd, atol=1e-9)
    # any one other joint with j4 works (the book: "row 4 and any one of the other three rows")
    for other in ("j1", "j2"):
        tau2 = dn.closed_loop_inverse_dynamics(fig, q, qd, qdd, actuated=[other, "j4"])
        a2, _ = dn.closed_loop_forward_dynamics(fig, q, qd, tau2)
        np.testing.assert_allclose(a2, qdd, atol=1e-9)


def test_fig83_underactuated_names_freedom(fig):
    q, qd, Gc, gc, ix, _ = _fig_state(fig, 1.1, 0.4, 0.7, -0.3)
    with pytest.raises(dn.InputError) as ei:
        dn.closed_loop_inverse_dynamics(fig, q, qd, gc, actuated=["j3"])
    msg = str(ei.value)
    assert "under-actuated" in msg and "j4" in msg
    with pytest.raises(dn.InputError) as ei:
        dn.closed_loop_inverse_dynamics(fig, q, qd, gc, actuated=["j1", "j3"])  # both move y1 only
    assert "j4" in str(ei.value)


def test_fig83_redundant_minimum_norm(fig):
    q, qd, Gc, gc, ix, _ = _fig_state(fig, 1.1, 0.4, 0.7, -0.3)
    qdd = Gc @ [0.3, -1.2] + gc
    tau = dn.closed_loop_inverse_dynamics(fig, q, qd, qdd, actuated=["j1", "j2", "j3", "j4"])
    a, _ = dn.closed_loop_forward_dynamics(fig, q, qd, tau)
    np.testing.assert_allclose(a, qdd, atol=1e-9)
    # minimum norm among G^T tau = G^T tau_ID: tau lies in range(G) (orthogonal to null(G^T))
    tau_id = dn.inverse_dynamics(fig, q, qd, qdd)
    np.testing.assert_allclose(Gc.T @ tau, Gc.T @ tau_id, atol=1e-10)
    P = Gc @ np.linalg.pinv(Gc)
    np.testing.assert_allclose(P @ tau, tau, atol=1e-10)


def test_fig83_close_loops(fig):
    q, qd, *_ = _fig_state(fig, 1.1, 0.4, 0.7, -0.3)
    qp = q.copy()
    qp[fig.v_slice("j2")] += 0.15
    qp[fig.v_slice("j3")] -= 0.1
    qc = dn.close_loops(fig, qp, ["j1", "j4"])
    np.testing.assert_allclose(qc, q, atol=1e-10)


def test_close_loops_reports_loop_that_cannot_close():
    src = FIG83.read_text().replace('<origin xyz="0.4 0 0" rpy="0 0 0"/></successor>',
                                    '<origin xyz="0.4 0 3" rpy="0 0 0"/></successor>')
    m = dn.load_model(src)
    q = np.array([1.0, 0.0, 0.5, 0.0])
    with pytest.raises(dn.InputError) as ei:
        dn.close_loops(m, q, ["j1", "j4"])
    assert "j5" in str(ei.value)


# ------------------------------------------------------------------------------------------------
# every loop-joint type: delta (Table 8.1) is consistent with K (d delta/dt = K qd at closure),
# K qdd = k along the motion (second difference), and a fixed loop joint matches Pinocchio's 6D weld.
# ------------------------------------------------------------------------------------------------
def _rpy(R):
    """URDF rpy of R = Rz(y) Ry(p) Rx(r)."""
    p = math.asin(-R[2, 0])
    r = math.atan2(R[2, 1], R[2, 2])
    y = math.atan2(R[1, 0], R[0, 0])
    return r, p, y


@pytest.fixture(scope="module")
def dual_q0():
    import json

    return json.loads((DATA / "dual_arm_q0.json").read_text())["q0"]


def _dual_variant(jtype, q0, axis="0.3 -0.5 0.8", rotate=True, attrs=""):
    """The dual-arm model with its loop joint replaced by ``jtype`` whose joint frames coincide
    (position and orientation) at q0, so the loop is closed for every type."""
    src = (REPO / "urdf" / "dual_arm_object.urdf").read_text()
    m0 = dn.load_model(src)
    q = np.array([q0[n] for n in m0.joint_names])
    lj = m0.loops[0]
    Rp = dn.link_pose(m0, q, lj.predecessor)[:3, :3] @ (_rotx(0.4) if rotate else np.eye(3))
    Rs = dn.link_pose(m0, q, lj.successor)[:3, :3]
    RS = Rs.T @ Rp  # successor joint-frame orientation in the successor link so both frames agree
    xp = " ".join(repr(float(v)) for v in lj.X_P[:3, 3])
    xs = " ".join(repr(float(v)) for v in lj.X_S[:3, 3])
    rp = " ".join(repr(v) for v in _rpy(_rotx(0.4) if rotate else np.eye(3)))
    rs = " ".join(repr(v) for v in _rpy(RS))
    new = (f'<loop_joint name="closure" type="{jtype}"{attrs}><predecessor link="{lj.predecessor}"><origin xyz="{xp}" '
           f'rpy="{rp}"/></predecessor><successor link="{lj.successor}"><origin xyz="{xs}" rpy="{rs}"/>'
           f'</successor><axis xyz="{axis}"/></loop_joint>')
    start = src.index('<loop_joint name=')
    end = src.index("</loop_joint>") + len("</loop_joint>")
    return dn.load_model(src[:start] + new + src[end:]), q


def _rotx(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


@pytest.mark.parametrize("jtype", ["fixed", "revolute", "continuous", "prismatic", "cylindrical", "spherical",
                                   "planar", "helical 0.05", "helical -1.7"])
def test_delta_consistent_with_K(jtype, dual_q0):
    jtype, *pitch = jtype.split()
    m, q = _dual_variant(jtype, dual_q0, attrs=f' pitch="{pitch[0]}"' if pitch else "")
    assert L.loop_state(m, q).max_error < 1e-9
    rng = np.random.default_rng(3)
    for _ in range(3):
        qd = rng.normal(size=m.nv)
        h = 1e-6
        num = (L.loop_position_errors(m, q + h * qd) - L.loop_position_errors(m, q - h * qd)) / (2 * h)
        K, k = L.loop_constraints(m, q, qd)
        np.testing.assert_allclose(K @ qd, num, atol=2e-7)
        # k (Eqs. 8.15, 8.47): along any path with K qd = 0 the constraint velocity stays zero, so
        # d/dt (K qd) = K qdd + (dK/dt) qd = 0, i.e. (dK/dt) qd = -k.  Check by finite differences.
        G, _, _ = L.constraint_basis(m, q)
        qd_c = G @ rng.normal(size=G.shape[1])
        K1, _ = L.loop_constraints(m, q + h * qd_c, qd_c)
        K0, _ = L.loop_constraints(m, q - h * qd_c, qd_c)
        _, kc = L.loop_constraints(m, q, qd_c)
        np.testing.assert_allclose((K1 - K0) @ qd_c / (2 * h), -kc, atol=2e-6)


def test_fixed_loop_joint_matches_pinocchio_6d(dual_q0, tmp_path):
    m, q = _dual_variant("fixed", dual_q0)
    path = tmp_path / "welded.urdf"
    path.write_text(ET.tostring(m.xml_root, encoding="unicode"))
    pl = PinLoop(path, m, "closure", contact="6D")
    assert L.mobility(m, q) == (6, 6, 6)
    rng = np.random.default_rng(5)
    G, _, _ = L.constraint_basis(m, q)
    qd = G @ rng.normal(size=G.shape[1])
    tau = rng.normal(size=m.nv) * 10
    a, w = dn.closed_loop_forward_dynamics(m, q, qd, tau)
    ap, wp = pl.forward(q, qd, tau)
    np.testing.assert_allclose(a, ap, rtol=1e-7, atol=1e-7 * max(1, np.abs(ap).max()))
    np.testing.assert_allclose(w["closure"], wp, rtol=1e-6, atol=1e-6 * max(1, np.abs(wp).max()))


# ------------------------------------------------------------------------------------------------
# four-bar: rank-deficient K, against Pinocchio's CONTACT_3D at the pin
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fourbar():
    m = dn.load_model(FOURBAR)
    q = np.zeros(m.nv)
    q[m.v_slice("crank_joint")] = 0.9
    q[m.v_slice("coupler_joint")] = -0.5
    q[m.v_slice("rocker_joint")] = -1.2
    q = dn.close_loops(m, q, ["crank_joint"])
    return m, q


def _fourbar_closed_form(q, m):
    """Pin positions from plain trigonometry (joints about +y map x to -z)."""
    def pt(a, l):
        return np.array([l * math.cos(a), -l * math.sin(a)])
    t1 = q[m.v_slice("crank_joint")][0]
    t2 = q[m.v_slice("coupler_joint")][0]
    t3 = q[m.v_slice("rocker_joint")][0]
    return pt(t1, 0.2) + pt(t1 + t2, 0.6), np.array([0.5, 0.0]) + pt(t3, 0.45)


def test_fourbar_closure_and_mobility(fourbar):
    m, q = fourbar
    p1, p2 = _fourbar_closed_form(q, m)
    np.testing.assert_allclose(p1, p2, atol=1e-10)
    assert q[m.v_slice("crank_joint")][0] == 0.9
    assert L.mobility(m, q) == (1, 2, 5)


def test_fourbar_forward_dynamics_vs_pinocchio(fourbar):
    m, q = fourbar
    pl = PinLoop(FOURBAR, m, "pin", contact="3D")
    rng = np.random.default_rng(7)
    for _ in range(4):
        G, _, _ = L.constraint_basis(m, q)
        qd = G @ rng.normal(size=1) * 2
        tau = rng.normal(size=m.nv) * 3
        a, w = dn.closed_loop_forward_dynamics(m, q, qd, tau)
        ap, wp = pl.forward(q, qd, tau)
        np.testing.assert_allclose(a, ap, rtol=1e-7, atol=1e-8)
        # in-plane pin force is determinate; the out-of-plane force and the moments are not (the
        # minimum-norm choice makes them 0 in both)
        np.testing.assert_allclose(w["pin"][[0, 2]], wp[[0, 2]], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(w["pin"][[1, 3, 4, 5]], 0, atol=1e-7)
        K, k = L.loop_constraints(m, q, qd)
        np.testing.assert_allclose(K @ a, k, atol=1e-9)


def test_fourbar_gravity_compensation_only_crank(fourbar):
    m, q = fourbar
    tau = L.closed_loop_gravity(m, q)  # <transmission>: only the crank is actuated
    assert tau[m.v_slice("coupler_joint")][0] == 0 and tau[m.v_slice("rocker_joint")][0] == 0
    a, _ = dn.closed_loop_forward_dynamics(m, q, np.zeros(m.nv), tau)
    np.testing.assert_allclose(a, 0, atol=1e-9)
    # virtual work: u = dV/dtheta_crank along the closed mechanism (finite difference of potential)
    masses = {"crank": 0.8, "coupler": 1.2, "rocker": 1.0}
    coms = {"crank": (0.1, 0, 0), "coupler": (0.3, 0, 0.02), "rocker": (0.225, 0, 0)}

    def V(qq):
        return sum(mm * 9.81 * (dn.link_pose(m, qq, ln) @ np.r_[coms[ln], 1])[2] for ln, mm in masses.items())

    h = 1e-5
    qp = q.copy()
    qp[m.v_slice("crank_joint")] += h
    qm = q.copy()
    qm[m.v_slice("crank_joint")] -= h
    dV = (V(dn.close_loops(m, qp, ["crank_joint"])) - V(dn.close_loops(m, qm, ["crank_joint"]))) / (2 * h)
    np.testing.assert_allclose(tau[m.v_slice("crank_joint")][0], dV, rtol=1e-6)


def test_baumgarte_pulls_an_open_loop_closed(fourbar):
    m, q = fourbar
    qo = q.copy()
    qo[m.v_slice("rocker_joint")] += 0.02  # open the loop a little
    x = np.r_[qo, np.zeros(m.nv)]
    e0 = L.loop_state(m, qo).max_error
    dt = 1e-3

    def f(x):
        a, _ = dn.closed_loop_forward_dynamics(m, x[:m.nq], x[m.nq:], np.zeros(m.nv), stabilization_time=0.05)
        return np.r_[x[m.nq:], a]

    for _ in range(400):  # 0.4 s = 8 time constants
        k1 = f(x)
        k2 = f(x + dt / 2 * k1)
        k3 = f(x + dt / 2 * k2)
        k4 = f(x + dt * k3)
        x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    e1 = L.loop_state(m, x[:m.nq]).max_error
    assert e0 > 1e-3 and e1 < 1e-2 * e0  # critically damped: (1 + t/T) exp(-t/T) = 3e-3 at t = 8T
    # without stabilisation the error does not decay
    a, _ = dn.closed_loop_forward_dynamics(m, qo, np.zeros(m.nv), np.zeros(m.nv), stabilization_time=None)
    assert np.all(np.isfinite(a))


def test_inputs_are_checked(fourbar):
    m, q = fourbar
    with pytest.raises(dn.InputError):
        dn.closed_loop_forward_dynamics(m, q[:-1], np.zeros(m.nv), np.zeros(m.nv))
    with pytest.raises(dn.InputError):
        dn.closed_loop_forward_dynamics(m, q, np.full(m.nv, np.nan), np.zeros(m.nv))
    with pytest.raises(dn.InputError):
        dn.closed_loop_forward_dynamics(m, q, np.zeros(m.nv), np.zeros(m.nv), stabilization_time=0)
    for bad in (np.array([0.1, 0.1]), "0.1s", float("nan"), -0.1):
        with pytest.raises(dn.InputError, match="stabilization_time"):
            dn.closed_loop_forward_dynamics(m, q, np.zeros(m.nv), np.zeros(m.nv), stabilization_time=bad)
    with pytest.raises(dn.InputError):
        dn.closed_loop_inverse_dynamics(m, q, np.zeros(m.nv), np.zeros(m.nv), actuated=["nope"])
    # the Baumgarte gains 1/T and 1/T^2 (Eq. 8.22) must not overflow into inf/NaN accelerations
    for tiny in (1e-160, 1e-300):
        with pytest.raises(dn.InputError, match="stabilization_time"):
            dn.closed_loop_forward_dynamics(m, q, np.zeros(m.nv), np.zeros(m.nv), stabilization_time=tiny)
        with pytest.raises(dn.InputError, match="stabilization_time"):
            L.loop_constraints(m, q, np.zeros(m.nv), stabilization_time=tiny)
    for bad in ("0.1s", [0.1], {"T": 0.1}, 1e-160):  # validated whatever its type, wherever it is taken
        with pytest.raises(dn.InputError, match="stabilization_time"):
            L.constraint_basis(m, q, np.zeros(m.nv), stabilization_time=bad)
    for name, args in (("q", (q[:-1], np.zeros(m.nv), np.zeros(m.nv))), ("qd", (q, [0.0] * 2, np.zeros(m.nv))),
                       ("tau", (q, np.zeros(m.nv), ["x"] * m.nv))):
        with pytest.raises(dn.InputError, match=name):
            dn.closed_loop_forward_dynamics(m, *args)


def test_inverse_dynamics_contract_model_order(fourbar):
    """closed_loop_inverse_dynamics returns tau over model.joint_names whatever the order of
    ``actuated`` (the node labels it by those names), zeros on unactuated joints."""
    m, q = fourbar
    G, _, _ = L.constraint_basis(m, q)
    qd = G[:, 0] * 0.7
    _, g = L.constraint_basis(m, q, qd)[:2]
    qdd = G[:, 0] * 0.3 + g
    names = list(m.joint_names)
    t1 = dn.closed_loop_inverse_dynamics(m, q, qd, qdd, actuated=names)
    t2 = dn.closed_loop_inverse_dynamics(m, q, qd, qdd, actuated=names[::-1])
    assert t1.shape == (m.nv,)
    np.testing.assert_array_equal(t1, t2)
    t3 = dn.closed_loop_inverse_dynamics(m, q, qd, qdd, actuated=["crank_joint"])
    assert np.all(t3[[m.v_slice(j).start for j in names if j != "crank_joint"]] == 0)
    a, _ = dn.closed_loop_forward_dynamics(m, q, qd, t3)
    np.testing.assert_allclose(a, qdd, atol=1e-9)


def test_loop_data_packed_in_the_model():
    """The per-loop constants live in the immutable Model (no cache keyed by id(model)); a derived
    model (payload, gravity) carries its own, and they agree with the parser's LoopJoint."""
    m = dn.load_model(FOURBAR)
    ld = m.loop_data
    assert ld.names == m.loop_joints and ld.n_c == 5 and ld.rows == (slice(0, 5),)
    with pytest.raises(AttributeError):
        ld.n_c = 3
    with pytest.raises(ValueError):
        ld.li[0] = 7
    assert dn.load_model(REPO / "urdf" / "arm7.urdf").loop_data is None
    m2 = m.with_gravity([0.0, 0.0, -1.62])
    assert m2.loop_data is not ld and m2.loop_data.n_c == 5
    q = dn.close_loops(m, np.zeros(m.nq) + 0.3, ["crank_joint"])
    a1, _ = dn.closed_loop_forward_dynamics(m2, q, np.zeros(m.nv), np.zeros(m.nv))
    a2, _ = api_oracle.forward(m2, q, np.zeros(m.nv), np.zeros(m.nv), 0.1)
    np.testing.assert_allclose(a1, a2, atol=1e-9)


@pytest.mark.parametrize("path", [FIG83, FOURBAR, REPO / "urdf" / "dual_arm_object.urdf"])
def test_compiled_path_equals_public_api_path(path):
    """The compiled kernel (core kernels + Table 8.4 in joint coordinates, angular first, Method 2)
    against the same equations built from the core's public API in world axes, linear first, solved
    as the augmented system (test/data/loops/api_oracle.py)."""
    m = dn.load_model(path)
    rng = np.random.default_rng(9)
    for st in (0.1, 0.03, None):
        q = rng.normal(scale=0.5, size=m.nq)  # not closed: delta and K qd matter
        qd = rng.normal(size=m.nv)
        tau = rng.normal(size=m.nv)
        a1, w1 = dn.closed_loop_forward_dynamics(m, q, qd, tau, stabilization_time=st)
        a2, w2 = api_oracle.forward(m, q, qd, tau, st)
        np.testing.assert_allclose(a1, a2, rtol=1e-9, atol=1e-9 * max(1, np.abs(a2).max()))
        K, k = L.loop_constraints(m, q, qd, stabilization_time=st)
        K2, k2, d2, _ = api_oracle.loop_terms(m, q, qd, st)
        np.testing.assert_allclose(K, K2, atol=1e-12)
        np.testing.assert_allclose(k, k2, atol=1e-10 * max(1, np.abs(k2).max()))
        np.testing.assert_allclose(L.loop_position_errors(m, q), d2, atol=1e-13)
        for name in m.loop_joints:
            np.testing.assert_allclose(w1[name], w2[name], rtol=1e-8, atol=1e-8 * max(1, np.abs(w2[name]).max()))
    # lists are accepted
    a3, _ = dn.closed_loop_forward_dynamics(m, list(q), list(qd), list(tau), stabilization_time=None)
    np.testing.assert_allclose(a3, a1)


def test_floating_base_loop():
    """A four-bar on a floating base: the compiled and public-API paths agree, closure keeps the
    base, and inverse dynamics reports the unactuated base freedoms."""
    m = dn.load_model(FOURBAR, floating_base=True)
    q = m.neutral()
    q[m.q_slice("crank_joint")] = 0.9
    q[m.q_slice("coupler_joint")] = -0.5
    q[m.q_slice("rocker_joint")] = -1.2
    q[:3] = [0.1, -0.2, 0.3]
    qc = dn.close_loops(m, q, ["crank_joint"])
    np.testing.assert_array_equal(qc[:7], q[:7])
    assert L.loop_state(m, qc).max_error < 1e-12
    assert L.mobility(m, qc) == (7, 2, 5)
    rng = np.random.default_rng(2)
    qd = L.close_loop_velocities(m, qc, rng.normal(size=m.nv), ["crank_joint"])
    tau = rng.normal(size=m.nv)
    a1, w1 = dn.closed_loop_forward_dynamics(m, qc, qd, tau)
    a2, w2 = api_oracle.forward(m, qc, qd, tau, 0.1)
    np.testing.assert_allclose(a1, a2, atol=1e-10 * max(1, np.abs(a2).max()))
    K, k = L.loop_constraints(m, qc, qd)
    np.testing.assert_allclose(K @ a1, k, atol=1e-9)
    with pytest.raises(dn.InputError, match="base"):
        dn.closed_loop_inverse_dynamics(m, qc, qd, a1)


def test_fourbar_G_g_closed_form(fourbar):
    """G and g of the four-bar with the crank angle as y, by Cramer's rule on the planar loop
    equation a e(t1) + b e(phi) - c e(psi) = (0.5, 0) (x-z plane, joints about +y so that
    e(t) = (cos t, -sin t)) and its first and second time derivatives."""
    m, q = fourbar
    a, b, c = 0.2, 0.6, 0.45
    t1 = q[m.v_slice("crank_joint")][0]
    phi = t1 + q[m.v_slice("coupler_joint")][0]
    psi = q[m.v_slice("rocker_joint")][0]

    def e(t):
        return np.array([math.cos(t), -math.sin(t)])

    def ep(t):  # de/dt
        return np.array([-math.sin(t), -math.cos(t)])

    def solve2(c1, c2, rhs):  # Cramer: x1 c1 + x2 c2 = rhs
        det = c1[0] * c2[1] - c1[1] * c2[0]
        return ((rhs[0] * c2[1] - rhs[1] * c2[0]) / det, (c1[0] * rhs[1] - c1[1] * rhs[0]) / det)

    y_dot = 1.7
    # velocity: a y e'(t1) + b phid e'(phi) - c psid e'(psi) = 0
    phid, psid = solve2(b * ep(phi), -c * ep(psi), -a * y_dot * ep(t1))
    # acceleration with ydd = 0: b phidd e'(phi) - c psidd e'(psi) = a yd^2 e(t1) + b phid^2 e(phi) - c psid^2 e(psi)
    rhs = a * y_dot ** 2 * e(t1) + b * phid ** 2 * e(phi) - c * psid ** 2 * e(psi)
    phidd, psidd = solve2(b * ep(phi), -c * ep(psi), rhs)
    ix = {n: m.v_slice(n).start for n in ("crank_joint", "coupler_joint", "rocker_joint")}
    Gc = np.zeros((3, 1))
    Gc[ix["crank_joint"]], Gc[ix["coupler_joint"]], Gc[ix["rocker_joint"]] = 1.0, phid / y_dot - 1.0, psid / y_dot
    gc = np.zeros(3)
    gc[ix["coupler_joint"]], gc[ix["rocker_joint"]] = phidd, psidd
    qd = Gc[:, 0] * y_dot
    G, g, names = L.constraint_basis(m, q, qd, independent=["crank_joint"])
    assert names == ["crank_joint"]
    np.testing.assert_allclose(G, Gc, atol=1e-12)
    np.testing.assert_allclose(g, gc, atol=1e-10)


def test_external_force_equals_joint_torque(fourbar):
    """f_ext on a link (link frame, about its origin) acts like tau = J^T f in world axes."""
    m, q = fourbar
    G, _, _ = L.constraint_basis(m, q)
    qd = G[:, 0] * 0.8
    f = np.array([3.0, -1.0, 2.0, 0.1, 0.4, -0.2])
    R = dn.link_pose(m, q, "coupler")[:3, :3]
    tau_eq = dn.jacobian(m, q, "coupler").T @ np.r_[R @ f[:3], R @ f[3:]]
    a1, w1 = dn.closed_loop_forward_dynamics(m, q, qd, np.zeros(m.nv), f_ext={"coupler": f})
    a2, w2 = dn.closed_loop_forward_dynamics(m, q, qd, tau_eq)
    np.testing.assert_allclose(a1, a2, atol=1e-10)
    np.testing.assert_allclose(w1["pin"], w2["pin"], atol=1e-9)


def test_loop_with_a_mimic_joint_matches_public_api_oracle():
    """Mimic joints (§9.6) with a loop: K = K_tree G from the kernel, dense Method 2 on the core's
    G^T H G, against the augmented system built from the public API (api_oracle)."""
    extra = ('<link name="flag"><inertial><origin xyz="0.05 0 0"/><mass value="0.3"/><inertia ixx="0.001" '
             'ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.002"/></inertial></link>'
             '<joint name="flag_joint" type="revolute"><parent link="crank"/><child link="flag"/>'
             '<origin xyz="0.1 0 0"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/>'
             '<mimic joint="rocker_joint" multiplier="0.5" offset="0.1"/></joint></robot>')
    m = dn.load_model(FOURBAR.read_text().replace("</robot>", extra))
    assert m.has_mimic and m.nvt == m.nv + 1
    q = dn.close_loops(m, np.array([0.9, -0.5, -1.2]), ["crank_joint"])
    rng = np.random.default_rng(1)
    qd = dn.close_loop_velocities(m, q, rng.normal(size=m.nv), ["crank_joint"])
    tau = rng.normal(size=m.nv)
    for st in (0.1, None):
        a1, w1 = dn.closed_loop_forward_dynamics(m, q, qd, tau, stabilization_time=st)
        a2, w2 = api_oracle.forward(m, q, qd, tau, st)
        np.testing.assert_allclose(a1, a2, atol=1e-10 * max(1, np.abs(a2).max()))
        np.testing.assert_allclose(w1["pin"], w2["pin"], atol=1e-9 * max(1, np.abs(w2["pin"]).max()))
        K, k = L.loop_constraints(m, q, qd, st)
        K2, k2, _, _ = api_oracle.loop_terms(m, q, qd, st)
        np.testing.assert_allclose(K, K2, atol=1e-12)
        np.testing.assert_allclose(k, k2, atol=1e-10 * max(1, np.abs(k2).max()))
