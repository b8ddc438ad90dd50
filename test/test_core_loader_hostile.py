"""Hostile and odd descriptions: every one loads or is refused
with a ModelError naming the problem; nothing blocks, eats memory, overflows silently or crashes."""
import os
import subprocess
import sys
import threading
import tracemalloc

import numpy as np
import pytest

import urdfgen as ug

INE = '<inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>'


def link(name, inertial=INE):
    return f'<link name="{name}">{inertial}</link>'


def joint(name, parent, child, jt="revolute", axis="0 0 1", xyz="0 0 0.2", extra=""):
    ax = f'<axis xyz="{axis}"/>' if axis is not None else ""
    return (f'<joint name="{name}" type="{jt}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}"/>{ax}{extra}</joint>')


def robot(*parts, name="r"):
    return f'<robot name="{name}">' + "".join(parts) + "</robot>"


GOOD = robot(link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"), joint("j2", "l1", "l2", axis="0 1 0"))


def refused(dn, source, *words, **kw):
    with pytest.raises(dn.ModelError) as ei:
        dn.load_model(source, **kw)
    msg = str(ei.value)
    for w in words:
        assert w in msg, f"{msg!r} does not say {w!r}"
    assert len(msg) < 600, f"message of {len(msg)} characters"
    return msg


def chain(n, mimic=False, multiplier=1.0):
    parts = [link(f"l{i}") for i in range(n + 1)]
    for i in range(n):
        mm = f'<mimic joint="j{i - 1}" multiplier="{multiplier}" offset="0"/>' if mimic and i else ""
        parts.append(joint(f"j{i}", f"l{i}", f"l{i + 1}", axis="0 1 0", xyz="0 0 0.1", extra=mm))
    return robot(*parts)


# ------------------------------------------------------------------------------------------------
# sources
# ------------------------------------------------------------------------------------------------
def _in_thread(fn, timeout=20.0):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "load_model blocked"
    return out


def test_fifo_is_refused_without_blocking(dn, tmp_path):
    fifo = tmp_path / "robot.urdf"
    os.mkfifo(fifo)
    out = _in_thread(lambda: dn.load_model(fifo))
    assert isinstance(out.get("error"), dn.ModelError) and "FIFO" in str(out["error"]), out


def test_device_and_directory_are_refused(dn, tmp_path):
    refused(dn, "/dev/zero", "/dev/zero", "device")
    refused(dn, tmp_path, "directory")


def test_oversize_file_is_refused_unread(dn, tmp_path):
    from dynamics_node.urdf_source import MAX_BYTES

    p = tmp_path / "huge.urdf"
    with open(p, "wb") as f:
        f.write(GOOD.encode())
        f.truncate(MAX_BYTES + 1)  # sparse: no disk used
    tracemalloc.start()
    try:
        refused(dn, p, "huge.urdf", "bytes")
        assert tracemalloc.get_traced_memory()[1] < 8 << 20
    finally:
        tracemalloc.stop()


def test_nul_and_lone_surrogate_are_refused(dn):
    refused(dn, GOOD.replace('name="l1"', 'name="l\x001"'), "NUL")
    refused(dn, GOOD.replace('name="l1"', 'name="l\ud8001"'), "surrogate")
    refused(dn, "urdf/arm7\x00.urdf", "NUL")


def test_bom_whitespace_and_comments_before_the_declaration_load(dn, tmp_path):
    decl = '<?xml version="1.0" encoding="UTF-8"?>\n'
    for text in ["\ufeff" + decl + GOOD, "\n   \n" + decl + GOOD, "<!-- generated -->\n" + decl + GOOD,
                 "\ufeff  <!-- a -->\n<!-- b -->" + decl + GOOD]:
        assert dn.load_model(text).joint_names == ("j1", "j2")
        p = ug.write(tmp_path / "r.urdf", text)
        assert dn.load_model(p).joint_names == ("j1", "j2")
        assert dn.load_model(text.encode("utf-8")).joint_names == ("j1", "j2")
    p = tmp_path / "bom.urdf"
    p.write_bytes(b"\xef\xbb\xbf" + (decl + GOOD).encode())
    assert dn.load_model(p).joint_names == ("j1", "j2")


def test_stray_text_before_the_first_element_is_refused(dn, tmp_path):
    refused(dn, "garbage\n" + GOOD, "text before the first")
    refused(dn, "x" + GOOD, "text before the first")
    p = ug.write(tmp_path / "stray.urdf", "stray words " + GOOD)
    refused(dn, p, "stray.urdf", "text before the first")
    p.write_bytes(b"\xff\xfe" + GOOD.encode("utf-16-le"))
    refused(dn, p, "stray.urdf", "UTF-8")


def test_deep_nesting_does_not_crash(dn):
    deep = "<gazebo>" * 200000 + "</gazebo>" * 200000
    m = dn.load_model(GOOD.replace("</robot>", deep + "</robot>"))
    assert m.joint_names == ("j1", "j2")
    refused(dn, GOOD.replace("</robot>", "<a>" * 50000 + "</robot>"), "not valid XML")


def test_a_robot_inside_an_unknown_element_is_refused_by_name(dn):
    """Every link and joint 3000 levels deep inside an unknown element: the robot would vanish (no joints,
    no warning); refused naming the element, its line and the depth (the lines counted here)."""
    body = "\n".join([link("base"), link("l1"), link("l2"), joint("j1", "base", "l1"), joint("j2", "l1", "l2")])
    text = '<robot name="r">\n' + "<g>\n" * 3000 + body + "\n" + "</g>\n" * 3000 + "</robot>\n"
    refused(dn, text, "<link name='base'> at line 3002", "nested 3000 level(s) deep in <g> (line 2",
            "3 <link> and 2 <joint>", "children of <robot>")
    # the links children of <robot>, every joint inside an unknown element: no joint left, refused too
    text = robot(link("base"), link("l1"), link("l2"),
                 "<xacro_group>" + joint("j1", "base", "l1") + joint("j2", "l1", "l2") + "</xacro_group>")
    refused(dn, text, "0 <link> and 2 <joint>", "<xacro_group>")
    refused(dn, robot("<a>" + link("base") + "</a>"), "1 <link> and 0 <joint>", "<a>")


def test_links_and_joints_inside_an_unknown_element_are_warned_of(dn):
    """A part of the robot inside an unknown element loads without it, with a warning naming the element,
    its line and the first one; strict=True refuses. A transmission's or ros2_control's <joint name> (no
    type) and a plugin's <link>text</link> (no name) are no URDF joints or links: no warning."""
    text = robot(link("base"), link("l1"), joint("j1", "base", "l1"),
                 '\n<group name="arm">\n' + link("l2") + joint("j2", "l1", "l2") + "</group>")
    with pytest.warns(dn.ModelWarning) as rec:
        m = dn.load_model(text)
    assert m.joint_names == ("j1",)
    msg = " ".join(str(w.message) for w in rec)
    for w in ("1 <link> and 1 <joint>", "<link name='l2'> at line 3", "<group> (line 2"):
        assert w in msg, msg
    refused(dn, text, "<group>", "strict=True", strict=True)
    legit = GOOD.replace("</robot>", '<transmission name="t"><joint name="j1"><hardwareInterface>x'
                         '</hardwareInterface></joint></transmission><ros2_control name="rc"><joint name="j2">'
                         '<command_interface name="effort"/></joint></ros2_control><gazebo><plugin name="p">'
                         '<link>l2</link></plugin></gazebo></robot>')
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", dn.ModelWarning)
        assert dn.load_model(legit).joint_names == ("j1", "j2")


def test_messages_are_cut(dn):
    roots = "".join(link(f"root_{k}") for k in range(40000))
    msg = refused(dn, robot(link("base"), link("l1"), joint("j1", "base", "l1"), roots), "root links", "more")
    assert "40001 root links" in msg
    long_value = "1 " * 15000
    msg = refused(dn, GOOD.replace('xyz="0 0 0.2"', f'xyz="{long_value}"', 1), "j1", "more characters")
    huge_name = "n" * 30000
    refused(dn, robot(link("base"), joint("j1", "base", huge_name)), "more characters")


def test_visual_only_content_never_stops_a_load(dn):
    """<texture> without filename, unknown geometry, a bad mesh scale, <gazebo><material value>
    (pr2), ros2_control and unknown elements: dynamics does not read them."""
    junk = ('<visual><geometry><mesh filename="m.stl" scale="a b"/></geometry><material name="x"><texture/>'
            '</material></visual><collision><geometry><blob size="nan"/></geometry></collision><sensor value="v"/>')
    src = GOOD.replace('<link name="l1">', f'<link name="l1">{junk}').replace(
        "</robot>", '<gazebo reference="l1"><material value="PR2/wheel_l"/><mu1 value="x"/></gazebo>'
        '<ros2_control name="rc"><joint name="ghost"><param name="p">abc</param></joint></ros2_control>'
        '<unknown_tag xyz="nan"/><material name="m"><color rgba="1 2"/></material></robot>')
    m = dn.load_model(src)
    ref = dn.load_model(GOOD)
    q = np.array([0.4, -0.3])
    np.testing.assert_array_equal(dn.gravity(m, q), dn.gravity(ref, q))


def test_model_warning_is_exported(dn):
    assert issubclass(dn.ModelWarning, UserWarning) and "ModelWarning" in dn.__all__


# ------------------------------------------------------------------------------------------------
# options
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw,word", [
    (dict(gravity="abc"), "gravity"), (dict(gravity=[1j, 0, 0]), "gravity"), (dict(gravity=[0, 0]), "gravity"),
    (dict(gravity=[0, 0, 1e308]), "gravity"), (dict(armature="x"), "armature"), (dict(armature=True), "armature"),
    (dict(armature=[0.1, 0.2]), "armature"), (dict(armature={"j1": "x"}), "armature"),
    (dict(armature={"nope": 0.1}), "nope"), (dict(armature=-1.0), "armature"),
    (dict(floating_base="no"), "floating_base"),
    (dict(floating_base=1), "floating_base"), (dict(friction="yes"), "friction"), (dict(strict="no"), "strict"),
    (dict(xacro_args={"a": "b"}), "xacro"),
])
def test_bad_options_are_named(dn, kw, word):
    refused(dn, GOOD, word, **kw)


def test_root_joint_name_is_never_dropped(dn):
    src = robot(link("base"), link("l1"), link("l2"), joint("root_joint", "base", "l1"), joint("j2", "l1", "l2"))
    assert dn.load_model(src).joint_names == ("root_joint", "j2")
    refused(dn, src, "root_joint", "floating_base", floating_base=True)
    fixed = robot(link("world"), link("base"), link("l1"), joint("root_joint", "world", "base", jt="fixed", axis=None),
                  joint("j1", "base", "l1"))
    m = dn.load_model(fixed, floating_base=True)
    assert m.joint_names == ("j1",) and m.nv == 7


def test_floating_joint_inside_the_tree(dn):
    src = robot(link("base"), link("l1"), link("l2"), link("l3"), joint("j1", "base", "l1"),
                joint("free", "l1", "l2", jt="floating", axis=None), joint("j3", "l2", "l3", axis="1 0 0"))
    m = dn.load_model(src, floating_base=True)
    assert m.joint_names == ("j1", "free", "j3") and m.nq == 7 + 1 + 7 + 1 and m.nv == 6 + 1 + 6 + 1
    q = m.neutral()
    s = m.q_slice("free")
    np.testing.assert_array_equal(q[s], [0, 0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(q[:7], [0, 0, 0, 0, 0, 0, 1])
    # the free body in the world at rest falls with g: its linear acceleration, in its own frame, is g
    a = dn.forward_dynamics(m, q, np.zeros(m.nv), np.zeros(m.nv))
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(dn.gravity(m, q)))


# ------------------------------------------------------------------------------------------------
# overflow of derived quantities
# ------------------------------------------------------------------------------------------------
def _inertial(mass="1", xyz="0 0 0", ixx="0.01"):
    return (f'<inertial><origin xyz="{xyz}"/><mass value="{mass}"/>'
            f'<inertia ixx="{ixx}" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>')


def test_overflowing_parameters_are_refused(dn):
    def two(ine=INE, axis="0 0 1", xyz="0 0 0.2"):
        return robot(link("base"), link("l1"), link("tip", ine), joint("j1", "base", "l1"),
                     joint("j2", "l1", "tip", axis=axis, xyz=xyz))

    refused(dn, two(_inertial(mass="1e308")), "tip", "mass", "out of range")
    refused(dn, two(_inertial(xyz="0 1e155 0")), "tip", "xyz", "out of range")
    refused(dn, two(_inertial(ixx="1e300")), "tip", "ixx", "out of range")
    refused(dn, two(axis="1e200 0 0"), "j2", "axis", "out of range")
    refused(dn, two(xyz="0 0 1e200"), "j2", "origin", "out of range")
    m = dn.load_model(two(axis="3e25 4e25 0"))  # large but in range: a unit axis (3/5, 4/5, 0)
    np.testing.assert_allclose(dn.jacobian(m, np.zeros(2), "tip")[3:, 1], [0.6, 0.8, 0.0], rtol=0, atol=1e-15)
    refused(dn, chain(40, mimic=True, multiplier=1e10), "mimic", "overflow")


def test_loop_joint_axis_overflow_is_refused(dn):
    src = robot(link("a"), link("b"), link("c"), joint("ja", "a", "b"), joint("jb", "a", "c", xyz="1 0 0"),
                '<loop_joint name="lj" type="revolute"><predecessor link="b"><origin xyz="1 0 0"/></predecessor>'
                '<successor link="c"/><axis xyz="0 0 1e200"/></loop_joint>')
    refused(dn, src, "lj", "axis", "out of range")
    refused(dn, src.replace("1e200", "0"), "lj", "zero")


# ------------------------------------------------------------------------------------------------
# linear cost
# ------------------------------------------------------------------------------------------------
_CHAIN_SCRIPT = """
import sys, tracemalloc
sys.path.insert(0, {here!r})
from test_core_loader_hostile import chain
import dynamics_node as dn
m = dn.load_model(chain({n}, mimic={mimic}))
tracemalloc.start()
m = dn.load_model(chain({n}, mimic={mimic}))
print(m.nv, tracemalloc.get_traced_memory()[1])
"""


@pytest.mark.parametrize("n,mimic,nv", [(3000, True, 1), (10000, False, 10000)])
def test_long_chains_load_in_linear_time_and_memory(n, mimic, nv):
    """A 3,000-joint mimic chain (a list scan per follower was cubic: it hung) and a 10,000-link chain
    (dense G and H in the load-time check: 1.8 GB). Run in a subprocess with a generous time limit
    (a hang, not a speed assertion); the memory peak must stay far below a dense nv x nv matrix."""
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", _CHAIN_SCRIPT.format(here=here, n=n, mimic=mimic)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    got_nv, peak = map(int, r.stdout.split())
    assert got_nv == nv
    assert peak < 300e6, f"peak {peak / 1e6:.0f} MB"
    if n == 10000:
        assert peak < 8 * n * n / 2, "as much memory as a dense 10,000 x 10,000 matrix"
