"""A finite input out of range is refused by name (dispatch.py, batch_errors.py): where a computation from
finite inputs fails as numbers beyond float64 make it fail (its result overflowed, H singular to working
precision, the sparse method's system not finite, a loop that cannot close), the InputError names the
input entry at fault, 'qd[4] (joint 'joint5') = 1.5e+154 is out of range', and what is in range, instead
of the symptom. The entries and joints expected are the ones each test puts out of range itself; the
hypothesis form over every public function is test_core_contract.test_finite_in_finite_out_or_input_error.
"""
from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pytest

import dynamics_node as dn
import urdfgen as ug

REPO = pathlib.Path(__file__).resolve().parent.parent
IN_RANGE = "below 1e8 in magnitude"


@pytest.fixture(scope="module")
def arm():
    return dn.load_model(REPO / "urdf" / "arm7.urdf")


@pytest.fixture(scope="module")
def panda():
    try:
        path = ug.erd("panda_description/urdf/panda.urdf")
    except FileNotFoundError:
        pytest.skip("example-robot-data's Panda is not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dn.load_model(path)


def refusal(fn, *args, **kw):
    with pytest.raises(dn.InputError) as ei:
        fn(*args, **kw)
    return str(ei.value)


def one(n, i, x, base=0.3):
    v = np.full(n, base)
    v[i] = x
    return v


def test_forward_dynamics_names_the_velocity_entry(arm):
    """The issue's call: a huge velocity entry is named with its index, joint and value, not 'overflowed'."""
    msg = refusal(dn.forward_dynamics, arm, np.full(7, 0.3), one(7, 4, 1.5e160), np.zeros(7))
    assert f"qd[4] (joint '{arm.joint_names[4]}') = 1.5e+160 is out of range" in msg, msg
    assert IN_RANGE in msg and "\n" not in msg


@pytest.mark.parametrize("arg, i, x", [("q", 0, 1e8), ("qd", 3, 2e160), ("qdd", 1, 1.7e308)])
def test_inverse_dynamics_names_the_entry(arm, arg, i, x):
    """q[0] = 1e8 rad is an angle: inverse dynamics computes it (its sine and cosine); qd, qdd overflow."""
    args = {"q": np.full(7, 0.3), "qd": np.full(7, 0.2), "qdd": np.full(7, 0.1)}
    args[arg] = one(7, i, x)
    if arg == "q":
        assert np.isfinite(dn.inverse_dynamics(arm, *args.values())).all()
        return
    msg = refusal(dn.inverse_dynamics, arm, *args.values())
    assert msg.startswith(f"inverse dynamics: {arg}[{i}] (joint '{arm.joint_names[i]}') = {x:.3g} is out of range"), msg


def test_linearize_names_the_callers_arguments(arm):
    """dn.linearize runs forward_dynamics_derivatives inside: the refusal names linearize's own qd and tau."""
    z = np.zeros(7)
    msg = refusal(dn.linearize, arm, np.full(7, 0.3), one(7, 1, 1e154, 0.0), z, 0.01)
    assert msg.startswith("linearize: qd[1] (joint 'joint2') = 1e+154 is out of range"), msg
    msg = refusal(dn.linearize, arm, np.full(7, 0.3), z, one(7, 5, 1.7e308, 0.0), 0.01)
    assert msg.startswith("linearize: tau[5] (joint 'joint6') = 1.7e+308 is out of range"), msg
    msg = refusal(dn.linearize, arm, np.full(7, 0.3), z, z, 1e300)
    assert "dt = 1e+300 is out of range" in msg, msg
    QD = np.zeros((3, 7))
    QD[2, 3] = 1e200
    msg = refusal(dn.linearize_batch, arm, np.full((3, 7), 0.3), QD, np.zeros((3, 7)), 0.01)
    assert "QD[2, 3] (joint 'joint4') = 1e+200 is out of range" in msg, msg


def test_huge_position_of_a_prismatic_joint_is_named_not_a_link(panda):
    """Panda at q = 1e20 everywhere: H is singular to working precision (the finger 1e20 m away), which
    used to be 'singular at link panda_link1'; the refusal names the finger's position. Its revolute
    angles are not blamed (an angle moves no mass away)."""
    finger = panda.joint_names.index("panda_finger_joint1")
    msg = refusal(dn.forward_dynamics, panda, np.full(panda.nq, 1e20), np.zeros(panda.nv), np.zeros(panda.nv))
    assert f"q[{finger}] (joint 'panda_finger_joint1') = 1e+20 is out of range" in msg, msg
    assert "singular" in msg and IN_RANGE in msg


def test_a_singular_model_still_names_its_link():
    """H singular because of the model (a massless link on a revolute joint), at a huge angle: the link is
    named, as before (SingularMassMatrixError), not the angle."""
    urdf = ('<robot name="m"><link name="base"/><link name="tip"/><joint name="j" type="revolute">'
            '<parent link="base"/><child link="tip"/><axis xyz="0 0 1"/>'
            '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = dn.load_model(urdf)
    with pytest.raises(dn.SingularMassMatrixError, match="tip"):
        dn.forward_dynamics(m, [1e10], [0.0], [0.0])


@pytest.mark.parametrize("loops", [False, True])
def test_sparse_method_names_the_velocity(arm, loops):
    """method='sparse' with qd = 1e200: the velocity, not 'the constraints are inconsistent'."""
    if loops:
        four = dn.load_model(REPO / "urdf" / "fourbar.urdf")
        msg = refusal(dn.closed_loop_forward_dynamics, four, np.zeros(four.nq), one(four.nv, 1, 1e200, 0.0),
                      np.zeros(four.nv), method="sparse")
        assert f"qd[1] (joint '{four.joint_names[1]}') = 1e+200 is out of range" in msg, msg
    else:
        msg = refusal(dn.forward_dynamics, arm, np.full(7, 0.3), one(7, 2, 1e200, 0.0), np.zeros(7), method="sparse")
        assert "qd[2] (joint 'joint3') = 1e+200 is out of range" in msg, msg
    assert "inconsistent" not in msg


def test_a_function_calling_another_names_its_own_argument():
    """Unseren's reduced-order dynamics turns nu into joint rates: the refusal names nu, the caller's."""
    import json
    dual = dn.load_model(REPO / "urdf" / "dual_arm_object.urdf")
    d0 = json.loads((REPO / "test" / "data" / "loops" / "dual_arm_q0.json").read_text())["q0"]
    q = np.array([d0[n] for n in dual.joint_names])
    msg = refusal(dn.reduced_order_dynamics, dual, q, one(dual.nv - 3, 2, 1.6e200, 0.1), np.zeros(dual.nv))
    assert msg.startswith("reduced order dynamics: nu[2] = 1.6e+200 is out of range"), msg


def test_the_models_own_gravity_is_named_not_an_angle(arm):
    """gravity 1e308 (a model option) and an angle of 1e10: the error names the gravity."""
    g = arm.with_gravity((0.0, 0.0, -1e308))
    msg = refusal(dn.gravity, g, one(7, 0, 1e10))
    assert "gravity" in msg and "q[0]" not in msg, msg


def test_payload_identification_names_the_sample(arm):
    """One velocity sample of 1e10 swamps the regressor (rank-deficient to working precision): it is named."""
    rng = np.random.default_rng(0)
    n = 40
    Q, QD, QDD = rng.uniform(-1, 1, (n, 7)), rng.uniform(-1, 1, (n, 7)), rng.uniform(-1, 1, (n, 7))
    TAU = dn.inverse_dynamics_batch(arm, Q, QD, QDD)
    QD[7, 5] = 1e10   # a glitch of the velocity estimate, the torques as measured
    msg = refusal(dn.identify_payload, arm, "tool0", Q, QD, QDD, TAU)
    assert "QD[7, 5] (joint 'joint6') = 1e+10 is out of range" in msg, msg


def test_inputs_in_range_compute(arm):
    """The bound the messages give is one the functions keep: every entry at 1e7 gives finite results."""
    q, v = np.full(7, 1e7), np.full(7, 1e7)
    for out in (dn.inverse_dynamics(arm, q, v, v), dn.forward_dynamics(arm, q, v, v), dn.mass_matrix(arm, q),
                dn.linearize(arm, q, v, v, 0.01), dn.forward_dynamics(arm, q, v, v, method="sparse")):
        assert all(np.isfinite(np.asarray(o)).all() for o in (out if isinstance(out, tuple) else (out,)))


def test_armature_bound_says_what_is_accepted():
    msg = str(pytest.raises(dn.ModelError, dn.load_model, REPO / "urdf" / "arm7.urdf", armature=1e300).value)
    assert "from 0 to 1e+30" in msg and "got 1e+300" in msg and "overflow" in msg, msg
    dn.load_model(REPO / "urdf" / "arm7.urdf", armature=1e30)  # the bound itself is accepted
