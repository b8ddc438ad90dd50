"""xacro files, package:// and $(find pkg) through ament's index, and
`dynamics_summary --check` as a user runs it (a subprocess): exit 0 clean, 1 warnings, 2 no load."""
import os
import subprocess
import sys

import numpy as np
import pytest

import urdfgen as ug
from conftest import assert_close

XDIR = ug.DATA / "xacro"
PREFIX = XDIR / "ament"  # a minimal ament prefix holding the package fake_arm_description

# arm.urdf.xacro with prefix "left_", expanded by hand (the independent reference)
EXPECTED = """<robot name="xacro_arm">
  <link name="left_base"><inertial><mass value="2"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <link name="left_upper"><inertial><origin xyz="0 0 0.15"/><mass value="1.5"/>
    <inertia ixx="0.01125" ixy="0" ixz="0" iyy="0.01125" iyz="0" izz="0.00015"/></inertial></link>
  <joint name="left_upper_joint" type="revolute"><parent link="left_base"/><child link="left_upper"/>
    <origin xyz="0 0 0.3"/><axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="50" velocity="2"/></joint>
  <link name="left_fore"><inertial><origin xyz="0 0 0.12"/><mass value="1.0"/>
    <inertia ixx="0.0048" ixy="0" ixz="0" iyy="0.0048" iyz="0" izz="0.0001"/></inertial></link>
  <joint name="left_fore_joint" type="revolute"><parent link="left_upper"/><child link="left_fore"/>
    <origin xyz="0 0 0.24"/><axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="50" velocity="2"/></joint>
</robot>"""


@pytest.fixture
def ament(monkeypatch):
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(PREFIX))


def test_xacro_file_with_args_macro_property_and_find(dn, ament):
    m = dn.load_model(XDIR / "arm.urdf.xacro", xacro_args={"prefix": "left_"})
    ref = dn.load_model(EXPECTED)
    assert m.joint_names == ("left_upper_joint", "left_fore_joint") == ref.joint_names
    assert set(m.link_names) == {"left_base", "left_upper", "left_fore"}
    rng = np.random.default_rng(3)
    for _ in range(3):
        q, qd, qdd, _ = ug.random_state(m, rng)
        assert_close(dn.inverse_dynamics(m, q, qd, qdd), dn.inverse_dynamics(ref, q, qd, qdd), what="ID")
        assert_close(dn.mass_matrix(m, q), dn.mass_matrix(ref, q), what="H")
    # the default of the arg: no prefix; str paths and package:// reach the same file
    assert dn.load_model(str(XDIR / "arm.urdf.xacro")).joint_names == ("upper_joint", "fore_joint")


def test_package_uri_resolves_through_ament(dn, ament, tmp_path):
    m = dn.load_model("package://fake_arm_description/urdf/two_link.urdf")
    assert m.joint_names == ("j1",) and str(PREFIX) in m.source
    # a macro-only xacro through package://: expanded, then refused naming the resolved file
    with pytest.raises(dn.ModelError, match="link.xacro.*no <link>"):
        dn.load_model("package://fake_arm_description/urdf/link.xacro")


def test_missing_package_is_named(dn, ament):
    with pytest.raises(dn.ModelError, match="no_such_package_xyz"):
        dn.load_model(XDIR / "missing_pkg.urdf.xacro")
    with pytest.raises(dn.ModelError, match="other_missing_pkg"):
        dn.load_model("package://other_missing_pkg/urdf/robot.urdf")


def test_without_ament_index_the_package_is_named(dn, monkeypatch):
    monkeypatch.setitem(sys.modules, "ament_index_python", None)
    monkeypatch.setitem(sys.modules, "ament_index_python.packages", None)
    with pytest.raises(dn.ModelError, match="fake_arm_description") as ei:
        dn.load_model(XDIR / "arm.urdf.xacro")
    assert "ament_index_python" in str(ei.value)


def test_xacro_text_is_refused_by_name(dn):
    text = (XDIR / "arm.urdf.xacro").read_text()
    with pytest.raises(dn.ModelError, match="xacro"):
        dn.load_model(text)


def test_xacro_errors_are_model_errors(dn, ament, tmp_path):
    p = ug.write(tmp_path / "bad.urdf.xacro", '<robot name="b" xmlns:xacro="http://www.ros.org/wiki/xacro">'
                 '<link name="${undefined_property}"/></robot>')
    with pytest.raises(dn.ModelError, match="bad.urdf.xacro"):
        dn.load_model(p)
    p = ug.write(tmp_path / "bad2.urdf.xacro", '<robot name="b" xmlns:xacro="http://www.ros.org/wiki/xacro">'
                 '<xacro:call macro="nope"/></robot>')
    with pytest.raises(dn.ModelError, match="bad2.urdf.xacro"):
        dn.load_model(p)


# ------------------------------------------------------------------------------------------------
# dynamics_summary --check
# ------------------------------------------------------------------------------------------------
def _check(*args, env=None):
    e = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "dynamics_node.cli.summary", "--check", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=e)


def test_check_clean_file_exits_0():
    r = _check(ug.REPO / "urdf" / "arm7.urdf")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "clean" in r.stdout


def test_check_lists_inertia_problems_merges_and_ignored(tmp_path):
    """allegro: four links breaking the triangle inequality; a transmission naming an unknown joint
    and visuals are reported as ignored; fixed joints as merged. Exit 1 (warnings)."""
    r = _check(ug.erd("allegro_hand_description/urdf/allegro_left_hand.urdf"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.count("triangle inequality by") == 4
    txt = (ug.REPO / "urdf" / "arm7.urdf").read_text()
    extra = ('<transmission name="t_ghost"><joint name="ghost_joint"/></transmission>'
             '<link name="cam"><visual><geometry><mesh filename="x.stl" scale="a b c"/></geometry>'
             '<material name="m"><texture/></material></visual></link>'
             '<joint name="cam_mount" type="fixed"><parent link="tool0"/><child link="cam"/></joint>'
             '<gazebo><material value="Gazebo/Red"/></gazebo>')
    p = ug.write(tmp_path / "arm_plus.urdf", txt.replace("</robot>", extra + "</robot>"))
    r = _check(p)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ghost_joint" in r.stdout and "t_ghost" in r.stdout
    assert "fixed joint 'cam_mount': link 'cam' merged into" in r.stdout
    assert "<gazebo>" in r.stdout and "<link/visual>" in r.stdout


def test_check_unloadable_exits_2(tmp_path):
    p = ug.write(tmp_path / "broken.urdf", "<robot name='b'><link name='a'></robot>")
    r = _check(p)
    assert r.returncode == 2 and "broken.urdf" in r.stdout, r.stdout + r.stderr


def test_check_xacro_with_args():
    r = _check(XDIR / "arm.urdf.xacro", "--xacro-arg", "prefix:=right_", env={"AMENT_PREFIX_PATH": str(PREFIX)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 joints" in r.stdout
