"""Parameters are judged before they are reported as set (docs/node.md, Parameters): a value that depends on
the model or on other parameters is refused by the node's parameter callback, with a one-line reason naming
it, and changes nothing, instead of being accepted and then failing in the stream process. A name given at
start that is no parameter (a misspelled key of a parameter file) is warned of by name, with the nearest
known name; strict: true refuses it.

In-process (hypothesis): every set of the simulation's parameters that the callback's check accepts
(params.validate, then model_state.build_state) builds the simulated robot the stream process runs
(sim.world.World) without a ConfigError, for arm7 and a floating base. On a running simulated arm: the
issue's `simulation_pd_gains [1.0, 2.0, 3.0, 4.0]`, and a parameter file with `friction_model.viscosity`.
"""
from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import node_support as ns

pytestmark = [
    pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not installed"),
    pytest.mark.skipif(not ns.core_available(), reason="the dynamics core is not importable"),
]

JOINTS = [f"joint{i}" for i in range(1, 8)]
LINKS = ["base_link", "link3", "link7", "tool0", "nowhere"]


@pytest.fixture(scope="module")
def loaded():
    from dynamics_node.ros.model_state import load
    from dynamics_node.ros.params.param_checks import validate
    return {fb: load(validate({"urdf_path": str(ns.ARM7), "floating_base": fb})) for fb in (False, True)}


def _values(draw):
    n_gains = draw(st.sampled_from([0, 1, 2, 3, 4, 12, 13, 14, 16, 26]))
    names = draw(st.lists(st.sampled_from(JOINTS + ["joint9", "root.x", "root.qw"]), max_size=3, unique=True))
    links = draw(st.lists(st.sampled_from(LINKS), max_size=2, unique=True))
    return {
        "simulation": True,
        "simulation_command_interface": draw(st.sampled_from(["effort", "position", "velocity"])),
        "simulation_pd_gains": [float(draw(st.integers(0, 50))) for _ in range(n_gains)],
        "simulation_initial_positions": [f"{n}:=0.1" for n in names],
        "simulation_contact_links": links,
        "simulation_contact_points": [0.0] * (3 * len(links) if draw(st.booleans()) else draw(st.integers(0, 4))),
        "effort_command_topic": draw(st.sampled_from(["", "/cmd"])),
        "command_joints": draw(st.lists(st.sampled_from(JOINTS + ["joint9"]), max_size=2, unique=True)),
        "simulation_obstacles": draw(st.sampled_from([[], [0.5, 0.0, 0.2, 0.4, 0.4, 0.1], [0.5, 0.0, 0.2]])),
        "simulation_floor": draw(st.sampled_from([[], [0.0, 0.0, 0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])),
    }


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_what_the_check_accepts_the_simulated_robot_takes(loaded, data):
    from dynamics_node.ros.model_state import build_state
    from dynamics_node.errors import ConfigError
    from dynamics_node.ros.params.param_checks import validate
    from dynamics_node.sim.world import World
    fb = data.draw(st.booleans(), label="floating base")
    values = {"urdf_path": str(ns.ARM7), "floating_base": fb, **_values(data.draw)}
    try:
        cfg = validate(values)
        state = build_state(loaded[fb], cfg, {})
    except ConfigError as e:
        text = str(e)
        assert "\n" not in text and text.split(":")[0].split("[")[0] in values, text   # names the parameter
        return
    try:
        World(state, cfg)
    except ConfigError as e:
        pytest.fail(f"accepted by the parameter check, refused by the simulated robot: {e}\n{values}")


# ------------------------------------------------------------------------------- a running node
@pytest.fixture(scope="module")
def sim_node():
    yield from ns.serve_one("param_checks_sim", {"urdf_path": str(ns.ARM7), "simulation": True,
                                                 "simulation_command_interface": "position",
                                                 "joint_states_topic": "/param_checks_js",
                                                 "effort_command_topic": "/param_checks_cmd"})


def test_pd_gains_of_the_wrong_length_are_refused_before_they_are_set(sim_node):
    c = ns.ros()
    (ok, reason), = c.set_parameters("param_checks_sim", simulation_pd_gains=[1.0, 2.0, 3.0, 4.0])
    assert not ok and reason.startswith("simulation_pd_gains: expected 0, 2 or 14 values"), reason
    assert "got 4" in reason and "\n" not in reason
    assert c.get_parameter("param_checks_sim", "simulation_pd_gains") == []
    assert c.set_parameters("param_checks_sim", simulation_pd_gains=[100.0, 10.0]) == [(True, "")]
    assert c.get_parameter("param_checks_sim", "simulation_pd_gains") == [100.0, 10.0]
    assert "ConfigError" not in sim_node.output(), sim_node.output()[-2000:]


def _params_file(tmp_path, extra):
    lines = ["/**:", "  ros__parameters:", f"    urdf_path: {ns.ARM7}", "    joint_states_topic: /param_checks_js2"]
    lines += [f"    {k}: {v}" for k, v in extra.items()]
    p = tmp_path / "params.yaml"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_a_misspelled_key_is_warned_of_by_name(tmp_path):
    """friction_model.viscosity (for viscous): the node starts, saying so and naming the nearest name."""
    p = _params_file(tmp_path, {"friction_model.viscosity": "[0.3]", "gravty": "[0.0, 0.0, -9.81]"})
    procs = ns.start_nodes({"param_checks_typo": {}}, ros_args=["--params-file", str(p)])
    try:
        out = procs["param_checks_typo"].output()
    finally:
        procs["param_checks_typo"].stop()
        procs["param_checks_typo"].kill()
    assert ("unknown parameter 'friction_model.viscosity' (a parameter file or -p) is ignored: did you mean "
            "'friction_model.viscous'?") in out, out
    assert "unknown parameter 'gravty'" in out and "did you mean 'gravity'?" in out, out
    assert "unknown parameter 'use_sim_time'" not in out


def test_strict_refuses_an_unknown_key(tmp_path):
    p = _params_file(tmp_path, {"friction_model.viscosity": "[0.3]", "strict": "true"})
    cmd = [sys.executable, "-m", "dynamics_node.ros", "--ros-args", "-r", "__node:=param_checks_strict",
           "--params-file", str(p)]
    r = subprocess.run(cmd, cwd=str(ns.REPO), env=ns.node_env(), capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "cannot start: unknown parameter 'friction_model.viscosity'" in out, out
    assert "did you mean 'friction_model.viscous'? (strict: true refuses unknown parameters)" in out, out
    assert "Traceback" not in out, out
