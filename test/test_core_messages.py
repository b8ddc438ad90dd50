"""Messages of refusals: every echoed value is clipped and says its length; wrong types
are InputError everywhere; the closed-loop functions check q, qd, qdd, tau like every other
function (same messages), loops or not; xacro's $(find) names the package it could not find."""
from __future__ import annotations

import os
import re
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import dynamics_node as dn

REPO = pathlib.Path(__file__).resolve().parent.parent
LONG = "x" * 100_000
LIMIT = 1500          # a refusal of a 100,000-character name stays this short, whatever it says


@pytest.fixture(scope="module")
def arm():
    return dn.load_model(str(REPO / "urdf" / "arm7.urdf"))


@pytest.fixture(scope="module")
def fourbar():
    return dn.load_model(str(REPO / "urdf" / "fourbar.urdf"))


def _calls(m, loop):
    q, z = np.zeros(7), np.zeros(7)
    lq, lz = np.asarray(loop.neutral(), float), np.zeros(loop.nv)
    return {
        "jacobian link": lambda: dn.jacobian(m, q, LONG),
        "jacobian axes": lambda: dn.jacobian(m, q, "tool0", axes=LONG),
        "link_pose": lambda: dn.link_pose(m, q, LONG),
        "link_velocity": lambda: dn.link_velocity(m, q, z, LONG),
        "jacobian_derivative": lambda: dn.jacobian_derivative(m, q, z, LONG),
        "manipulability": lambda: dn.manipulability(m, q, LONG),
        "operational_space_inertia": lambda: dn.operational_space_inertia(m, q, LONG),
        "operational_space_inertia rows": lambda: dn.operational_space_inertia(m, q, "tool0", rows=(LONG,)),
        "f_ext": lambda: dn.inverse_dynamics(m, q, z, z, f_ext={LONG: (0,) * 6}),
        "hybrid forward_joints": lambda: dn.hybrid_dynamics(m, q, z, z, z, forward_joints=[LONG]),
        "forward_dynamics method": lambda: dn.forward_dynamics(m, q, z, z, method=LONG),
        "with_payload link": lambda: m.with_payload(LONG, 1.0),
        "with_gravity text": lambda: m.with_gravity(LONG),
        "q_slice": lambda: m.q_slice(LONG),
        "v_slice": lambda: m.v_slice(LONG),
        "link_regressor": lambda: dn.link_regressor(m, q, z, z, LONG),
        "identify_payload": lambda: dn.identify_payload(m, LONG, q[None], z[None], z[None], z[None]),
        "external_wrench": lambda: dn.external_wrench(m, q, LONG, z),
        "closed_loop_inverse_dynamics actuated": lambda: dn.closed_loop_inverse_dynamics(loop, lq, lz, lz,
                                                                                         actuated=[LONG]),
        "close_loops independent": lambda: dn.close_loops(loop, lq, [LONG]),
        "load_model path": lambda: dn.load_model("/tmp/" + LONG),
        "load_model armature": lambda: dn.load_model(str(REPO / "urdf" / "arm7.urdf"), armature={LONG: 1.0}),
    }


@pytest.mark.parametrize("what", [
    "jacobian link", "jacobian axes", "link_pose", "link_velocity", "jacobian_derivative", "manipulability",
    "operational_space_inertia", "operational_space_inertia rows", "f_ext", "hybrid forward_joints",
    "forward_dynamics method", "with_payload link", "with_gravity text", "q_slice", "v_slice",
    "link_regressor", "identify_payload", "external_wrench", "closed_loop_inverse_dynamics actuated",
    "close_loops independent", "load_model path", "load_model armature"])
def test_a_long_name_is_clipped_and_its_length_said(arm, fourbar, what):
    with pytest.raises(dn.DynamicsError) as e:
        _calls(arm, fourbar)[what]()
    text = str(e.value)
    assert len(text) < LIMIT, f"{what}: a {len(text)}-character message"
    assert re.search(r"\(1000\d\d characters", text), text   # the value's length (its repr's: + quotes)


@pytest.mark.parametrize("call", [
    lambda m: m.with_payload("tool0", "1.5"),
    lambda m: m.with_payload("tool0", 1.0, "abc"),
    lambda m: m.with_payload("tool0", 1.0, (0, 0, 0), "inertia"),
    lambda m: m.with_payload("tool0", [1.0, 2.0]),
    lambda m: m.with_payload("tool0", None),
    lambda m: m.with_payload("tool0", 1.0, (0, 0)),
    lambda m: m.with_payload("tool0", float("nan")),
    lambda m: m.with_payload(None, 1.0),
    lambda m: m.with_payload(["tool0"], 1.0),
    lambda m: m.with_gravity("abc"),
    lambda m: m.with_gravity(None),
    lambda m: m.with_gravity({"z": -9.81}),
    lambda m: m.with_gravity((0, 0)),
    lambda m: m.with_gravity((0, 0, float("inf"))),
    lambda m: m.with_gravity(b"\x00\x00"),
], ids=lambda c: "")
def test_wrong_types_are_input_errors(arm, call):
    with pytest.raises(dn.InputError) as e:
        call(arm)
    assert any(w in str(e.value) for w in ("mass", "com_xyz", "inertia6", "gravity", "link")), str(e.value)


def _message(fn):
    try:
        fn()
    except dn.InputError as e:
        return str(e)
    raise AssertionError("accepted")


@pytest.mark.parametrize("which", ["q", "qd", "x"])
@pytest.mark.parametrize("bad", ["nan", "short", "text"])
def test_loop_functions_check_like_every_function(arm, fourbar, which, bad):
    """closed_loop_forward/inverse_dynamics on a model with loops or without: the argument checked
    like inverse_dynamics checks it, with the same message (index and joint, or length and order)."""
    for m in (arm, fourbar):
        n = m.nq if which == "q" else m.nv
        good = {"q": np.asarray(m.neutral(), float), "qd": np.zeros(m.nv), "x": np.zeros(m.nv)}
        v = good[which].copy()
        if bad == "nan":
            v[min(1, n - 1)] = np.nan
        elif bad == "short":
            v = v[:-1]
        else:
            v = "abc"
        args = {**good, which: v}
        ref = _message(lambda: dn.inverse_dynamics(m, args["q"], args["qd"], args["x"]))
        fd = _message(lambda: dn.closed_loop_forward_dynamics(m, args["q"], args["qd"], args["x"]))
        assert fd == ref.replace("qdd", "tau"), (m.name, fd, ref)
        inv = _message(lambda: dn.closed_loop_inverse_dynamics(m, args["q"], args["qd"], args["x"]))
        assert inv == ref, (m.name, inv, ref)
        if which == "q":
            assert _message(lambda: dn.close_loops(m, args["q"], [])) == ref
            assert _message(lambda: dn.loop_position_errors(m, args["q"])) == ref


def test_xacro_find_without_an_ament_prefix_names_the_package(tmp_path):
    src = tmp_path / "robot.urdf.xacro"
    src.write_text('<?xml version="1.0"?>\n<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="r">\n'
                   '  <xacro:include filename="$(find my_robot_description)/urdf/arm.xacro"/>\n'
                   '  <link name="base"/>\n</robot>\n')
    code = ("import dynamics_node as dn, sys\n"
            f"try:\n    dn.load_model({str(src)!r})\nexcept dn.ModelError as e:\n    print(e)\n    sys.exit(0)\n"
            "sys.exit(3)\n")
    env = {k: v for k, v in os.environ.items() if k != "AMENT_PREFIX_PATH"}
    env["PYTHONPATH"] = str(REPO)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "my_robot_description" in p.stdout and "AMENT_PREFIX_PATH" in p.stdout, p.stdout
    assert "$(find my_robot_description)" in p.stdout and "robot.urdf.xacro" in p.stdout, p.stdout


def _kw_cases(m, four):
    q, z = np.zeros(7), np.zeros(7)
    lq, lz = np.asarray(four.neutral(), float), np.zeros(four.nv)
    C = dn.Contact
    return {
        "jacobian link int": lambda: dn.jacobian(m, q, 5),
        "jacobian point text": lambda: dn.jacobian(m, q, "tool0", point="abc"),
        "f_ext value text": lambda: dn.inverse_dynamics(m, q, z, z, f_ext={"tool0": "abc"}),
        "f_ext a list": lambda: dn.inverse_dynamics(m, q, z, z, f_ext=[1, 2]),
        "f_ext key int": lambda: dn.inverse_dynamics(m, q, z, z, f_ext={5: (0,) * 6}),
        "forward_joints int": lambda: dn.hybrid_dynamics(m, q, z, z, z, forward_joints=5),
        "method int": lambda: dn.forward_dynamics(m, q, z, z, method=5),
        "rows int": lambda: dn.operational_space_inertia(m, q, "tool0", rows=5),
        "stabilization_time text": lambda: dn.closed_loop_forward_dynamics(four, lq, lz, lz, stabilization_time="x"),
        "actuated int": lambda: dn.closed_loop_inverse_dynamics(four, lq, lz, lz, actuated=5),
        "independent int": lambda: dn.close_loops(four, lq, 5),
        "load_model source int": lambda: dn.load_model(5),
        "load_model gravity text": lambda: dn.load_model(str(REPO / "urdf" / "arm7.urdf"), gravity="x"),
        "load_model armature text": lambda: dn.load_model(str(REPO / "urdf" / "arm7.urdf"), armature="x"),
        "Contact friction text": lambda: C("tool0", friction="x"),
        "Contact normal None": lambda: C("tool0", normal=None),
        "contacts int": lambda: dn.contact_forward_dynamics(m, q, z, z, 5),
        "restitution text": lambda: dn.impact(m, q, z, [C("tool0")], restitution="x"),
        "observer gain text": lambda: dn.MomentumObserver(m, "x"),
        "observer timeout text": lambda: dn.MomentumObserver(m, 1.0, timeout="x"),
        "observer stamp text": lambda: dn.MomentumObserver(m, 1.0).update("x", q, z, z),
        "external_wrench link int": lambda: dn.external_wrench(m, q, 5, z),
        "Data of text": lambda: dn.Data("x"),
        "data= text": lambda: dn.gravity(m, q, data="x"),
    }


@pytest.mark.parametrize("what", ["jacobian link int", "jacobian point text", "f_ext value text", "f_ext a list",
                                  "f_ext key int", "forward_joints int", "method int", "rows int",
                                  "stabilization_time text", "actuated int", "independent int",
                                  "load_model source int", "load_model gravity text", "load_model armature text",
                                  "Contact friction text", "Contact normal None", "contacts int", "restitution text",
                                  "observer gain text", "observer timeout text", "observer stamp text",
                                  "external_wrench link int", "Data of text", "data= text"])
def test_a_wrong_type_for_any_argument_is_an_input_error(arm, fourbar, what):
    """Not a TypeError or a bare ValueError from numpy or float(): dn's own error, naming the argument."""
    with pytest.raises(dn.DynamicsError):
        _kw_cases(arm, fourbar)[what]()
