"""The joint law in the node: the parameters friction_model.* and effort_command_friction
(refused by name), OUT.yaml alone starting the node (`dynamics_node --ros-args --params-file OUT.yaml`
and `make run ARGS="--params-file OUT.yaml"`), whose inverse_dynamics and
forward_dynamics answer as the law says (Pinocchio plus the formula in numpy), the effort command's
friction compensation, and the simulated robot coasting to rest as the law's closed form says."""
from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

import identify_sim as sim
import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

NAMES = [f"joint{k}" for k in range(1, 8)]
VALS = {"viscous": [0.2, 0.5, 0.3, 0.1, 0.4, 0.2, 0.05], "coulomb": [1.0, 2.0, 1.5, 0.5, 0.8, 0.3, 0.2],
        "coulomb_velocity": [0.0, 0.02, 0.05, 0.01, 0.0, 0.1, 0.03], "stribeck": [0.5, -0.5, 1.0, 0.0, 0.3, 0.2, 0.1],
        "stribeck_velocity": [0.1, 0.05, 0.2, 0.0, 0.1, 0.3, 0.05], "offset": [0.3, -0.2, 0.0, 1.5, -1.0, 0.05, 0.4]}
ARM = [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07]


def _law():
    return {n: dict(Ia=ARM[k], b=VALS["viscous"][k], fc=VALS["coulomb"][k], vc=VALS["coulomb_velocity"][k],
                    fs=VALS["stribeck"][k], vs=VALS["stribeck_velocity"][k], o=VALS["offset"][k])
            for k, n in enumerate(NAMES)}


@pytest.fixture(scope="module")
def out_files(tmp_path_factory):
    """OUT.urdf (arm7's) and OUT.yaml written by dynamics_identify's own writer."""
    from dynamics_node.identify.law_out import write
    d = tmp_path_factory.mktemp("out")
    urdf = d / "OUT.urdf"
    shutil.copy(ns.ARM7, urdf)
    write(str(d / "OUT.yaml"), str(urdf), NAMES, VALS, ARM)
    return urdf, d / "OUT.yaml"


# ------------------------------------------------------------------ parameters, without a node
@pytest.mark.parametrize("values, words", [
    ({"friction_model.joints": ["joint1", "joint1"]}, ["friction_model.joints[1]", "twice"]),
    ({"friction_model.joints": ["joint1"], "friction_model.viscous": [1.0, 2.0]},
     ["friction_model.viscous", "2 values for 1"]),
    ({"friction_model.joints": ["joint1"], "friction_model.coulomb": [-1.0]}, ["friction_model.coulomb[0]",
                                                                                 "joint1", "outside"]),
    ({"friction_model.joints": ["joint1"], "friction_model.coulomb_velocity": [float("nan")]},
     ["friction_model.coulomb_velocity[0]"]),
    ({"friction_model.joints": ["joint1"], "friction_model.coulomb": [1.0], "friction_model.stribeck": [-2.0]},
     ["friction_model.stribeck[0]", "coulomb + stribeck"]),
    ({"effort_command_friction": 1.5}, ["effort_command_friction", "[0, 1]"]),
])
def test_bad_values_are_refused_by_name(values, words):
    from dynamics_node.errors import ConfigError
    from dynamics_node.ros.params.param_checks import validate
    with pytest.raises(ConfigError) as e:
        validate(values)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_the_description_is_parsed_once_with_armature_and_law(monkeypatch):
    """With armature and friction_model set, the node loads the model from one parse of the URDF (the second
    load, which needs the model's joint names, reuses it), and the model has both: the armature on H's
    diagonal against the model loaded without it (independent of the loader's bookkeeping)."""
    import dynamics_node as dn
    from dynamics_node import urdf
    from dynamics_node.ros.model_state import load
    from dynamics_node.ros.params.param_checks import validate

    calls = []
    real = urdf.parse_xml
    monkeypatch.setattr(urdf, "parse_xml", lambda *a, **k: calls.append(1) or real(*a, **k))
    c = validate({"urdf_path": str(ns.ARM7), "friction": True, "armature": ARM,
                  "friction_model.joints": ["joint2"], "friction_model.viscous": [0.5]})
    m = load(c).model
    assert len(calls) == 1, calls
    q = np.linspace(0.1, 0.7, 7)
    plain = dn.load_model(str(ns.ARM7))
    np.testing.assert_allclose(dn.mass_matrix(m, q) - dn.mass_matrix(plain, q), np.diag(ARM), atol=1e-12)
    qd = np.zeros(7)
    qd[1] = 0.3
    assert dn.joint_friction(m, qd)[1] == pytest.approx(0.5 * 0.3)


def test_unknown_joint_is_refused_when_the_model_is_loaded():
    from dynamics_node.ros.model_state import load
    from dynamics_node.errors import ConfigError
    from dynamics_node.ros.params.param_checks import validate
    c = validate({"urdf_path": str(ns.ARM7), "friction": True, "friction_model.joints": ["joint1", "elbow"]})
    with pytest.raises(ConfigError) as e:
        load(c)
    assert "friction_model.joints[1]" in str(e.value) and "elbow" in str(e.value)


def test_out_yaml_keys_are_the_node_parameters(out_files):
    """Every key of OUT.yaml is a declared parameter, and validate() accepts its values as ROS would
    read them (the nested friction_model: flattened to friction_model.<field>)."""
    import yaml

    from dynamics_node.ros.params.node_params import PARAMETERS
    from dynamics_node.ros.params.param_checks import validate
    rp = yaml.safe_load(out_files[1].read_text())["dynamics_node"]["ros__parameters"]
    flat = {k: v for k, v in rp.items() if k != "friction_model"}
    flat.update({f"friction_model.{k}": v for k, v in rp["friction_model"].items()})
    assert set(flat) <= set(PARAMETERS)
    c = validate(flat)
    assert dict(c.friction_model)["joint4"] == tuple((f, VALS[f][3]) for f in VALS)


# ------------------------------------------------------------------ the simulated robot
WHEEL = """<robot name="wheel">
  <link name="base_link"/>
  <link name="wheel"><inertial><mass value="2.0"/><origin xyz="0 0 0"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.5"/></inertial></link>
  <joint name="spin" type="continuous"><parent link="base_link"/><child link="wheel"/>
    <origin xyz="0 0 1"/><axis xyz="0 0 1"/></joint>
</robot>"""


def _coast(v0, seconds, **law):
    from dynamics_node.ros.model_state import build_state, load
    from dynamics_node.ros.params.param_checks import validate
    from dynamics_node.sim.world import World
    vals = {"robot_description": WHEEL, "simulation": True, "friction": True, "armature": [0.25],
            "friction_model.joints": ["spin"], **{f"friction_model.{k}": [v] for k, v in law.items()}}
    c = validate(vals)
    w = World(build_state(load(c), c, {}), c)
    w.qd = np.array([v0])
    out = [w.qd[0]]
    for _ in range(int(round(seconds / w.dt))):
        assert w.step()
        out.append(w.qd[0])
    return w.dt, np.array(out)


def test_simulated_wheel_coasts_to_rest_as_the_closed_form_says():
    """Viscous + sign Coulomb friction, armature 0.25 on I = 0.5: (I + Ia) qdd = -b qd - fc sign(qd), so
    qd(t) = (v0 + fc/b) exp(-b t / (I + Ia)) - fc/b until it stops at t* = (I + Ia)/b ln(1 + b v0 / fc)."""
    b, fc, v0, J = 0.3, 0.6, 3.0, 0.75
    dt, qd = _coast(v0, 6.0, viscous=b, coulomb=fc)
    t = dt * np.arange(qd.size)
    t_stop = J / b * math.log(1 + b * v0 / fc)
    before = t < t_stop - 0.01
    ref = (v0 + fc / b) * np.exp(-b * t[before] / J) - fc / b
    np.testing.assert_allclose(qd[before], ref, atol=2e-3 * v0)
    assert np.abs(qd[t > t_stop + 0.01]).max() <= dt * fc / J * 1.01  # at rest (within one step's chatter)


def test_simulated_wheel_with_smooth_and_stribeck_friction_follows_the_law():
    """tanh Coulomb, a Stribeck bump and an offset: the simulated velocity against the ODE
    (I + Ia) qdd = -tau_f(qd) solved by scipy with the formula written in numpy."""
    from scipy.integrate import solve_ivp
    law = dict(viscous=0.2, coulomb=0.5, coulomb_velocity=0.05, stribeck=0.4, stribeck_velocity=0.3, offset=0.0)
    dt, qd = _coast(2.0, 4.0, **law)
    c = dict(Ia=0.0, b=0.2, fc=0.5, vc=0.05, fs=0.4, vs=0.3, o=0.0)
    sol = solve_ivp(lambda _, v: [-sim.law_torque({"spin": c}, np.array([[v[0]]]), np.zeros((1, 1)), ["spin"])[0, 0]
                                  / 0.75], (0, 4.0), [2.0], t_eval=dt * np.arange(qd.size), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(qd, sol.y[0], atol=5e-3)
    assert abs(qd[-1]) < 0.01


# ------------------------------------------------------------------ the node from OUT.yaml alone
def _check_services(out_files, path_prefix="/dynamics_node"):
    import pinocchio as pin

    from dynamics_interfaces.srv import ForwardDynamics, InverseDynamics
    pm = pin.buildModelFromUrdf(str(out_files[0]))
    pdata = pm.createData()
    c = ns.ros()
    rng = np.random.default_rng(5)
    for k in range(4):
        q, qd, qdd = rng.uniform(-1.5, 1.5, 7), rng.normal(size=7) * [0.01, 0.1, 1.0, 0.05, 0.3, 0.02, 2.0][k % 7], \
            rng.normal(size=7)
        qd[k] = 0.0
        law = sim.law_torque(_law(), qd[None], qdd[None], NAMES)[0]
        want = pin.rnea(pm, pdata, q, qd, qdd) + law
        r = c.call(InverseDynamics, f"{path_prefix}/inverse_dynamics",
                   InverseDynamics.Request(name=NAMES, position=list(q), velocity=list(qd), acceleration=list(qdd)))
        assert r.success, r.message
        np.testing.assert_allclose(np.asarray(r.effort), want, rtol=1e-8, atol=1e-8 * np.abs(want).max())
        tau = rng.normal(size=7) * 5
        H = pin.crba(pm, pdata, q)
        H = np.triu(H) + np.triu(H, 1).T + np.diag(ARM)
        want_a = np.linalg.solve(H, tau - pin.nonLinearEffects(pm, pdata, q, qd)
                                 - sim.law_torque(_law(), qd[None], np.zeros((1, 7)), NAMES)[0])
        r = c.call(ForwardDynamics, f"{path_prefix}/forward_dynamics",
                   ForwardDynamics.Request(name=NAMES, position=list(q), velocity=list(qd), effort=list(tau)))
        assert r.success, r.message
        np.testing.assert_allclose(np.asarray(r.acceleration), want_a, rtol=1e-8, atol=1e-8 * np.abs(want_a).max())


@pytest.mark.parametrize("how", ["params_file_alone", "make_run"])
def test_node_started_from_out_yaml_answers_as_the_law_says(out_files, how):
    from dynamics_interfaces.srv import InverseDynamics
    from test_node_your_robot import Started, _exe
    if how == "params_file_alone":
        p = Started(_exe() + ["--ros-args", "--params-file", str(out_files[1])])
    else:
        p = Started(["make", "--no-print-directory", "run", f"ARGS=--params-file {out_files[1]}"])  # its urdf_path
    try:
        ns.ros().wait_for_service(InverseDynamics, "/dynamics_node/inverse_dynamics")
        _check_services(out_files)
    finally:
        p.stop()


def test_effort_command_adds_the_friction_fraction():
    """command_friction: the fraction of tau_f(qd) on the command joints when every velocity is fresh;
    zeros (with a warning) while one is stale."""
    import dynamics_node as dn
    from dynamics_node.ros.params.friction_params import command_friction
    from dynamics_node.ros.model_state import build_state, load
    from dynamics_node.ros.params.param_checks import validate
    from dynamics_node.ros.joint_states import JointStateMerger
    vals = {"urdf_path": str(ns.ARM7), "friction": True, "friction_model.joints": NAMES, "armature": ARM,
            "effort_command_topic": "/cmd", "command_joints": ["joint3", "joint1"], "effort_command_friction": 0.5,
            **{f"friction_model.{k}": v for k, v in VALS.items()}}
    c = validate(vals)
    st = build_state(load(c), c, {})
    merger = JointStateMerger(st)
    qd = np.array([0.3, -0.2, 0.05, 0.0, 1.0, -0.01, 0.2])
    merger.update(ns.joint_state(NAMES, [0.1] * 7, list(qd)), 10.0)

    class Log:
        said = []

        def warning(self, text, **_):
            self.said.append(text)
    law = sim.law_torque(_law(), qd[None], np.zeros((1, 7)), NAMES)[0]
    got = command_friction(st, merger, 10.1, c, Log())
    np.testing.assert_allclose(got, law[[2, 0]], rtol=1e-12)
    np.testing.assert_allclose(got, dn.joint_friction(st.model, qd)[[2, 0]], rtol=1e-12)
    assert not Log.said
    merger.update(ns.joint_state(NAMES[:6], [0.1] * 6, list(qd[:6])), 11.0)  # joint7's velocity goes stale
    got = command_friction(st, merger, 11.0 + c.joint_state_timeout * 0.9, c, Log())
    assert np.all(got == 0.0) and "joint7" in Log.said[-1]
