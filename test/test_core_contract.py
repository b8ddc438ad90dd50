"""The input/output contract of every public function (dynamics_node/dispatch.py).

* Arrays as callers hand them (big-endian, float32, integers, read-only, unaligned, strided,
  reversed, broadcast, lists, tuples, long double; Fortran order for the batch functions) give
  exactly the result of their contiguous native float64 copy (property-based, hypothesis).
* Wrong things (complex, text, None, objects, 0-d, n-d, bool, empty, ragged; f_ext that is not a
  dict, data=object(), forward_joints=None, a method that does not exist) raise InputError or
  TypeError naming the argument; never AttributeError, numpy's or numba's own errors.
* Finite inputs whose result overflows raise InputError naming the inputs out of range.
* data= is honoured on the C route, refused when made for another model.
* The C shim's per-thread buffer is freed when its thread ends.

Functions are enumerated from dn.__all__, so that a new one cannot be forgotten: CALLS must cover
every public callable but the exemptions listed in EXEMPT.
"""
from __future__ import annotations

import array
import json
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dynamics_node as dn
import urdfgen as ug

REPO = pathlib.Path(__file__).resolve().parent.parent

EXEMPT = {  # public names that are not computations on arrays, with the reason
    "DynamicsError": "exception class", "InputError": "exception class", "ModelError": "exception class",
    "SingularMassMatrixError": "exception class", "ModelWarning": "warning class",
    "Model": "class (built by load_model)",
    "Data": "class (its check is tested here through data=)", "ROOT_JOINT": "a constant (str)",
    "load_model": "takes a description, not arrays: its contract is the loader's",
    "inertial_parameters": "takes the model alone (no arrays)", "Payload": "class (identify_payload's result)",
    "MomentumObserver": "a stateful class (samples in stamp order): its input checks are in test_observer_core",
    "external_wrench": "a least-squares solve on the observer's r (no data=): its checks are in test_observer_core",
    "Contact": "class (checked when made: test_core_contact_errors)",
    "simplify_inertias": "takes the model alone (no arrays) and returns a Model: test_equivalence",
    "JointFriction": "class (its values are checked by load_model: test_core_friction)",
}


@pytest.fixture(scope="module")
def models():
    arm = dn.load_model(REPO / "urdf" / "arm7.urdf")
    txt, _ = ug.random_urdf(22, 9, n_mimic=2)
    mimic = dn.load_model(txt, floating_base=True)  # mimic joints and a floating base: the slow route
    four = dn.load_model(REPO / "urdf" / "fourbar.urdf")
    q4 = np.zeros(four.nv)
    q4[four.v_slice("crank_joint")], q4[four.v_slice("coupler_joint")], q4[four.v_slice("rocker_joint")] = .9, -.5, -1.2
    q4 = dn.close_loops(four, q4, ["crank_joint"])
    dual = dn.load_model(REPO / "urdf" / "dual_arm_object.urdf")  # Unseren's two arms and one object
    d0 = json.loads((REPO / "test" / "data" / "loops" / "dual_arm_q0.json").read_text())["q0"]
    return {"arm": arm, "mimic": mimic, "four": (four, q4), "dual": (dual, np.array([d0[n] for n in dual.joint_names]))}


def _state(model, seed):
    q, qd, qdd, tau = ug.random_state(model, np.random.default_rng(seed))
    return q, qd, qdd, tau


# name -> (model key, kinds of the array arguments, call(model, *arrays)); kinds: 'q', 'v' (vectors of
# the model's sizes), 'j' (nv - 6), 'Q', 'V' (3 x nq, 3 x nv), '3' (3), 'n' (nv - 3: Unseren's pseudovelocities),
# 'a', 'b' (3 and nv - 3: his decoupled controller's inputs)
def _link(m):
    return m.link_names[-1] if isinstance(m, dn.Model) else "link7"


CALLS = {
    "inverse_dynamics": ("arm", "qvv", lambda m, q, qd, qdd: dn.inverse_dynamics(m, q, qd, qdd)),
    "gravity": ("arm", "q", lambda m, q: dn.gravity(m, q)),
    "bias_forces": ("arm", "qv", lambda m, q, qd: dn.bias_forces(m, q, qd)),
    "mass_matrix": ("arm", "q", lambda m, q: dn.mass_matrix(m, q)),
    "forward_dynamics": ("arm", "qvv", lambda m, q, qd, tau: dn.forward_dynamics(m, q, qd, tau)),
    "hybrid_dynamics": ("arm", "qvvv", lambda m, q, qd, qdd, tau: dn.hybrid_dynamics(m, q, qd, qdd, tau, ["joint2"])),
    "floating_base_inverse_dynamics": ("mimic", "qvj",
                                       lambda m, q, qd, a: dn.floating_base_inverse_dynamics(m, q, qd, a)),
    "jacobian": ("arm", "q", lambda m, q: dn.jacobian(m, q, _link(m))),
    "link_pose": ("arm", "q", lambda m, q: dn.link_pose(m, q, _link(m))),
    "link_poses": ("arm", "q", lambda m, q: dn.link_poses(m, q)),
    "link_velocity": ("arm", "qv", lambda m, q, qd: dn.link_velocity(m, q, qd, _link(m))),
    "bias_acceleration": ("arm", "qv", lambda m, q, qd: dn.bias_acceleration(m, q, qd, _link(m))),
    "center_of_mass": ("arm", "q", lambda m, q: dn.center_of_mass(m, q)),
    "inverse_dynamics_batch": ("arm", "QVV", lambda m, Q, QD, QDD: dn.inverse_dynamics_batch(m, Q, QD, QDD)),
    "gravity_batch": ("arm", "Q", lambda m, Q: dn.gravity_batch(m, Q)),
    "closed_loop_forward_dynamics": ("four", "qvv", lambda m, q, qd, t: dn.closed_loop_forward_dynamics(m, q, qd, t)),
    "closed_loop_inverse_dynamics": ("four", "qvv", lambda m, q, qd, a: dn.closed_loop_inverse_dynamics(
        m, q, qd, a, actuated=["crank_joint"])),
    "closed_loop_gravity": ("four", "q", lambda m, q: dn.closed_loop_gravity(m, q, actuated=["crank_joint"])),
    "close_loops": ("four", "q", lambda m, q: dn.close_loops(m, q, ["crank_joint"])),
    "close_loop_velocities": ("four", "qv", lambda m, q, qd: dn.close_loop_velocities(m, q, qd, ["crank_joint"])),
    "loop_state": ("four", "qv", lambda m, q, qd: dn.loop_state(m, q, qd)),
    "loop_constraints": ("four", "qv", lambda m, q, qd: dn.loop_constraints(m, q, qd)),
    "constraint_basis": ("four", "qv", lambda m, q, qd: dn.constraint_basis(m, q, qd, independent=["crank_joint"])),
    "mobility": ("four", "q", lambda m, q: dn.mobility(m, q)),
    "loop_position_errors": ("four", "q", lambda m, q: dn.loop_position_errors(m, q)),
    "dual_arm_terms": ("dual", "qv", lambda m, q, qd: dn.dual_arm_terms(m, q, qd)),
    "sphere_force": ("dual", "qvv", lambda m, q, qd, tau: dn.sphere_force(m, q, qd, tau)),
    "delta_matrix": ("dual", "q", lambda m, q: dn.delta_matrix(m, q)),
    "dual_arm_forward_dynamics": ("dual", "qvv", lambda m, q, qd, tau: dn.dual_arm_forward_dynamics(m, q, qd, tau)),
    "pseudovelocity_basis": ("dual", "qv", lambda m, q, qd: dn.pseudovelocity_basis(m, q, qd)),
    "reduced_order_dynamics": ("dual", "qnv", lambda m, q, nu, tau: dn.reduced_order_dynamics(m, q, nu, tau)),
    "dual_arm_inverse_dynamics": ("dual", "qvv3", lambda m, q, qd, qdd, f: dn.dual_arm_inverse_dynamics(
        m, q, qd, qdd, f)),
    "decoupled_control": ("dual", "qvab", lambda m, q, qd, t1, t2: dn.decoupled_control(m, q, qd, t1, t2)),
    "regressor": ("mimic", "qvv", lambda m, q, qd, qdd: dn.regressor(m, q, qd, qdd)),
    "link_regressor": ("mimic", "qvv", lambda m, q, qd, qdd: dn.link_regressor(m, q, qd, qdd, _link(m))),
    "regressor_batch": ("mimic", "QVV", lambda m, Q, QD, QDD: dn.regressor_batch(m, Q, QD, QDD)),
    "identify_payload": ("arm", "QVVV", lambda m, Q, QD, QDD, TAU: dn.identify_payload(m, _link(m), Q, QD, QDD, TAU)),
    # ('p': a point, 3 numbers in the link frame)
    "coriolis_matrix": ("arm", "qv", lambda m, q, qd: dn.coriolis_matrix(m, q, qd)),
    "jacobian_derivative": ("arm", "qvp", lambda m, q, qd, p: dn.jacobian_derivative(m, q, qd, _link(m), p, "link")),
    "operational_space_inertia": ("arm", "qp", lambda m, q, p: dn.operational_space_inertia(m, q, _link(m), p)),
    "manipulability": ("arm", "q", lambda m, q: dn.manipulability(m, q, _link(m))),
    "jacobian_singular_values": ("arm", "q", lambda m, q: dn.jacobian_singular_values(m, q, _link(m))),
    "analytic_jacobian": ("arm", "q", lambda m, q: dn.analytic_jacobian(m, q, _link(m), "zyz")),
    # contact and impact
    "contact_forward_dynamics": ("arm", "qvv", lambda m, q, qd, tau: dn.contact_forward_dynamics(
        m, q, qd, tau, [dn.Contact(_link(m), (0, 0, 0.05), friction=0.5)])),
    "impact": ("arm", "qv", lambda m, q, qd: dn.impact(m, q, qd, [dn.Contact(_link(m), friction=0.5)], 0.5)),
    "soft_contact_forces": ("arm", "qv", lambda m, q, qd: dn.soft_contact_forces(
        m, q, qd, [dn.Contact(_link(m), surface_point=(0, 0, 2.0))])),
    "simulate_step": ("arm", "qvv", lambda m, q, qd, tau: dn.simulate_step(
        m, q, qd, tau, [dn.Contact(_link(m), surface_point=(0, 0, 2.0))], 1e-3)),
    # derivatives, the linearised step, the configuration space's group operations
    "inverse_dynamics_derivatives": ("mimic", "qvv", lambda m, q, qd, qdd: dn.inverse_dynamics_derivatives(
        m, q, qd, qdd)),
    "forward_dynamics_derivatives": ("arm", "qvv", lambda m, q, qd, tau: dn.forward_dynamics_derivatives(
        m, q, qd, tau)),
    "gravity_derivatives": ("mimic", "q", lambda m, q: dn.gravity_derivatives(m, q)),
    "inverse_dynamics_derivatives_batch": ("mimic", "QVV", lambda m, Q, QD, QDD: dn.inverse_dynamics_derivatives_batch(
        m, Q, QD, QDD)),
    "linearize": ("arm", "qvv", lambda m, q, qd, tau: dn.linearize(m, q, qd, tau, 0.01)),
    "linearize_batch": ("arm", "QVV", lambda m, Q, QD, TAU: dn.linearize_batch(m, Q, QD, TAU, 0.01)),
    "integrate": ("mimic", "qv", lambda m, q, v: dn.integrate(m, q, v)),
    "difference": ("mimic", "qq", lambda m, q0, q1: dn.difference(m, q0, q1)),
    # the joint law
    "joint_friction": ("arm", "v", lambda m, qd: dn.joint_friction(m, qd)),
    "joint_friction_slope": ("arm", "v", lambda m, qd: dn.joint_friction_slope(m, qd)),
}
NAMES = {  # the public argument names of the arrays, in order
    "inverse_dynamics": "q qd qdd", "gravity": "q", "bias_forces": "q qd", "mass_matrix": "q",
    "forward_dynamics": "q qd tau", "hybrid_dynamics": "q qd qdd tau",
    "floating_base_inverse_dynamics": "q qd qdd_joints",
    "jacobian": "q", "link_pose": "q", "link_poses": "q", "link_velocity": "q qd", "bias_acceleration": "q qd",
    "center_of_mass": "q", "inverse_dynamics_batch": "Q QD QDD", "gravity_batch": "Q",
    "closed_loop_forward_dynamics": "q qd tau", "closed_loop_inverse_dynamics": "q qd qdd", "closed_loop_gravity": "q",
    "close_loops": "q", "close_loop_velocities": "q qd", "loop_state": "q qd", "loop_constraints": "q qd",
    "constraint_basis": "q qd", "mobility": "q", "loop_position_errors": "q", "dual_arm_terms": "q qd",
    "sphere_force": "q qd tau", "delta_matrix": "q", "dual_arm_forward_dynamics": "q qd tau",
    "pseudovelocity_basis": "q qd", "reduced_order_dynamics": "q nu tau", "dual_arm_inverse_dynamics": "q qd qdd f_cs",
    "decoupled_control": "q qd tau1_s tau2_s",
    "regressor": "q qd qdd", "link_regressor": "q qd qdd", "identify_payload": "Q QD QDD TAU",
    "regressor_batch": "Q QD QDD",
    "coriolis_matrix": "q qd", "jacobian_derivative": "q qd point", "operational_space_inertia": "q point",
    "manipulability": "q", "jacobian_singular_values": "q", "analytic_jacobian": "q",
    "joint_friction": "qd", "joint_friction_slope": "qd",
    "contact_forward_dynamics": "q qd tau", "impact": "q qd_minus", "soft_contact_forces": "q qd",
    "simulate_step": "q qd tau",
    "inverse_dynamics_derivatives": "q qd qdd", "forward_dynamics_derivatives": "q qd tau", "gravity_derivatives": "q",
    "inverse_dynamics_derivatives_batch": "Q QD QDD", "linearize": "q qd tau", "linearize_batch": "Q QD TAU",
    "integrate": "q v", "difference": "q0 q1",
}
DATA_FUNCS = ["inverse_dynamics", "gravity", "bias_forces", "mass_matrix", "forward_dynamics", "hybrid_dynamics",
              "floating_base_inverse_dynamics", "jacobian", "link_pose", "link_poses", "link_velocity",
              "bias_acceleration", "center_of_mass", "regressor", "link_regressor", "coriolis_matrix",
              "jacobian_derivative", "operational_space_inertia", "manipulability", "jacobian_singular_values",
              "analytic_jacobian"]


def test_every_public_function_is_covered():
    public = {n for n in dn.__all__ if callable(getattr(dn, n)) or n == "ROOT_JOINT"}
    assert public - set(EXEMPT) == set(CALLS), "add the new public function to CALLS (or EXEMPT, with a reason)"
    assert set(CALLS) == set(NAMES)


def _setup(models, name, seed=0):
    key, kinds, call = CALLS[name]
    if key in ("four", "dual"):
        m, q4 = models[key]
        rng = np.random.default_rng(seed)
        base = {"q": q4, "v": rng.uniform(-1, 1, m.nv), "3": rng.uniform(-1, 1, 3), "n": rng.uniform(-1, 1, m.nv - 3),
                "a": rng.uniform(-1, 1, 3), "b": rng.uniform(-1, 1, m.nv - 3)}
    else:
        m = models[key]
        q, qd, qdd, tau = _state(m, seed)
        base = {"q": q, "v": qd, "j": qdd[6:], "p": np.random.default_rng(seed).uniform(-0.3, 0.3, 3)}
    rng = np.random.default_rng(seed + 1)
    arrays = []
    for k in kinds:
        if k == "Q":
            arrays.append(np.stack([_state(m, seed + i)[0] for i in range(3)]))
        elif k == "V":
            arrays.append(rng.uniform(-1, 1, (3, m.nv)))
        elif k == "v":
            arrays.append(rng.uniform(-1, 1, m.nv) if arrays else base["v"])
        else:
            arrays.append(base[k].copy())
    return m, call, arrays


# ------------------------------------------------------------------------------------ layouts
def _unaligned(x):
    buf = bytearray(x.nbytes + 1)
    a = np.frombuffer(buf, dtype=np.float64, offset=1, count=x.size).reshape(x.shape)
    a[...] = x
    assert not a.flags.aligned
    return a


def _readonly(x):
    a = x.copy()
    a.flags.writeable = False
    return a


LAYOUTS_1D = {
    "big-endian": lambda x: x.astype(">f8"),
    "float32": lambda x: x.astype(np.float32),
    "float16": lambda x: x.astype(np.float16),
    "integers": lambda x: np.round(3 * x).astype(np.int64),
    "uint8": lambda x: np.round(np.abs(3 * x)).astype(np.uint8),
    "longdouble": lambda x: x.astype(np.longdouble),
    "read-only": _readonly,
    "frombuffer of array('d')": lambda x: np.frombuffer(array.array("d", x)),
    "unaligned": _unaligned,
    "strided": lambda x: np.repeat(x, 3)[::3],
    "reversed": lambda x: x[::-1].copy()[::-1],
    "broadcast": lambda x: np.broadcast_to(np.float64(x[0]), x.shape),
    "list": lambda x: [float(v) for v in x],
    "list of numpy scalars": lambda x: list(x),
    "tuple": lambda x: tuple(float(v) for v in x),
    "big-endian read-only strided": lambda x: _readonly(np.repeat(x, 2).astype(">f8"))[::2],
}
LAYOUTS_2D = {
    "big-endian": lambda x: x.astype(">f8"),
    "float32": lambda x: x.astype(np.float32),
    "Fortran order": np.asfortranarray,
    "read-only": _readonly,
    "unaligned": _unaligned,
    "column slice": lambda x: np.concatenate([x, x], axis=1)[:, :x.shape[1]],
    "list of lists": lambda x: x.tolist(),
    "broadcast rows": lambda x: np.broadcast_to(x[0], x.shape),
}


def _reference(arg):
    """The contiguous native float64 copy of what the argument holds."""
    return np.array(np.asarray(arg), dtype=np.float64, order="C")


# The derivatives' C front runs the ahead-of-time library's code while other layouts go through numba's JIT
# entries, and LLVM fuses multiply-adds differently in the two (1e-15 .. 1e-13 apart; equal with
# DYNAMICS_NODE_NO_AOT=1): for these the layouts must agree to rounding, for every other function bit for bit.
TO_ROUNDING = {"inverse_dynamics_derivatives", "forward_dynamics_derivatives", "gravity_derivatives",
               "inverse_dynamics_derivatives_batch", "linearize", "linearize_batch"}


def _same(a, b, what):
    if isinstance(b, dict):
        assert isinstance(a, dict) and a.keys() == b.keys(), what
        for k in b:
            _same(a[k], b[k], f"{what}[{k}]")
    elif isinstance(b, (tuple, list)):
        assert len(a) == len(b), what
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{what}[{k}]")
    elif what.split("[")[0] in TO_ROUNDING:
        b = np.asarray(b)
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(b).max()), err_msg=what)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=what)


@pytest.mark.parametrize("name", sorted(CALLS))
@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_layout_gives_the_float64_result(models, name, data):
    seed = data.draw(st.integers(0, 3), label="seed")
    m, call, arrays = _setup(models, name, seed)
    kinds = CALLS[name][1]
    args = []
    for x, k in zip(arrays, kinds):
        table = LAYOUTS_2D if k in "QV" else LAYOUTS_1D
        layout = data.draw(st.sampled_from(sorted(table)), label=f"layout of {k}")
        args.append(table[layout](x))
    refs = [_reference(a) for a in args]
    try:
        expected = call(m, *refs)
    except dn.InputError as e:  # e.g. a broadcast quaternion that is fine, a loop that cannot close
        with pytest.raises(dn.InputError) as got:
            call(m, *args)
        assert str(got.value) == str(e)
        return
    _same(call(m, *args), expected, name)


# ------------------------------------------------------------------------------------ refusals
def _bad_values(x, kind):
    bad = {"complex": x + 0j, "str": "0 0 0", "None": None, "object": object(), "dict": {"a": 1.0},
           "bool": x > 0, "empty list": [], "ragged": [[1.0], [1.0, 2.0]], "bytes": b"\0" * 8, "set": {1.0}}
    if kind in "QV":
        bad.update({"1-D": x[0], "3-D": x[None]})
    else:
        bad.update({"0-d": np.float64(1.0), "python float": 1.0, "2-D": x[None, :], "column": x[:, None]})
    return bad


OPTIONAL_NONE = {("loop_state", 1), ("constraint_basis", 1)}  # qd=None is an accepted value there
ALSO_ROWS = {("joint_friction", 0), ("joint_friction_slope", 0)}  # an N x nv qd (N states) is accepted there


@pytest.mark.parametrize("name", sorted(CALLS))
def test_wrong_arrays_are_refused_by_name(models, name):
    m, call, arrays = _setup(models, name)
    kinds = CALLS[name][1]
    names = NAMES[name].split()
    for i, (x, k) in enumerate(zip(arrays, kinds)):
        for label, bad in _bad_values(x, k).items():
            if label == "None" and (name, i) in OPTIONAL_NONE or label == "2-D" and (name, i) in ALSO_ROWS:
                continue
            args = list(arrays)
            args[i] = bad
            with pytest.raises((dn.InputError, TypeError)) as e:
                call(m, *args)
            assert names[i] in str(e.value), f"{name}: {label} {names[i]}: {e.value!r}"
            assert "truth value" not in str(e.value) and "fingerprint" not in str(e.value)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_model_must_be_a_model(models, name):
    _, call, arrays = _setup(models, name)
    for bad in (None, object(), "urdf/arm7.urdf"):
        with pytest.raises((dn.InputError, TypeError), match="model"):
            call(bad, *arrays)


def test_other_arguments_are_checked_by_name(models):
    arm, mimic = models["arm"], models["mimic"]
    four, q4 = models["four"]
    q, qd, qdd, tau = _state(arm, 0)
    qm, qdm, qddm, taum = _state(mimic, 0)
    z4 = np.zeros(four.nv)
    cases = [
        ("f_ext", lambda f: dn.inverse_dynamics(arm, q, qd, qdd, f_ext=f)),
        ("f_ext", lambda f: dn.inverse_dynamics(mimic, qm, qdm, qddm, f_ext=f)),
        ("f_ext", lambda f: dn.forward_dynamics(arm, q, qd, tau, f_ext=f)),
        ("f_ext", lambda f: dn.hybrid_dynamics(arm, q, qd, qdd, tau, ["joint1"], f_ext=f)),
        ("f_ext", lambda f: dn.closed_loop_forward_dynamics(four, q4, z4, z4, f_ext=f)),
    ]
    for arg, fn in cases:
        for bad in ([1, 2, 3, 4, 5, 6], np.zeros(6), "link7", 5, [("link7", np.zeros(6))]):
            with pytest.raises((dn.InputError, TypeError), match=arg):
                fn(bad)
    with pytest.raises(dn.InputError, match=r"f_ext\['"):
        dn.inverse_dynamics(arm, q, qd, qdd, f_ext={arm.link_names[-1]: [1j, 0, 0, 0, 0, 0]})
    for bad in (None, 5, [1, 2], object()):
        with pytest.raises((dn.InputError, TypeError), match="forward_joints"):
            dn.hybrid_dynamics(arm, q, qd, qdd, tau, bad)
    for model, st_ in ((arm, (q, qd, tau)), (mimic, (qm, qdm, taum))):
        for bad in ("foo", None, 1, "ABA"):
            with pytest.raises(dn.InputError, match="method"):
                dn.forward_dynamics(model, *st_, method=bad)
    for bad in (None, 3, object(), ["link7"]):
        with pytest.raises((dn.InputError, TypeError), match="link"):
            dn.jacobian(arm, q, bad)
    for arg, fn in (("actuated", lambda b: dn.closed_loop_gravity(four, q4, actuated=b)),
                    ("independent", lambda b: dn.close_loops(four, q4, b)),
                    ("stabilization_time", lambda b: dn.closed_loop_forward_dynamics(four, q4, z4, z4, b))):
        for bad in ("x", object(), [1.0]) if arg == "stabilization_time" else (5, object(), [3]):
            with pytest.raises((dn.InputError, TypeError), match=arg):
                fn(bad)


# ------------------------------------------------------------------------------------ data=
def _call_with_data(models, name, data, model=None):
    key, kinds, call = CALLS[name]
    m, _, arrays = _setup(models, name)
    m = model or m
    link = m.link_names[-1]
    fns = {
        "inverse_dynamics": lambda: dn.inverse_dynamics(m, *arrays, data=data),
        "gravity": lambda: dn.gravity(m, *arrays, data=data),
        "bias_forces": lambda: dn.bias_forces(m, *arrays, data=data),
        "mass_matrix": lambda: dn.mass_matrix(m, *arrays, data=data),
        "forward_dynamics": lambda: dn.forward_dynamics(m, *arrays, data=data),
        "hybrid_dynamics": lambda: dn.hybrid_dynamics(m, *arrays, ["joint2"], data=data),
        "floating_base_inverse_dynamics": lambda: dn.floating_base_inverse_dynamics(m, *arrays, data=data),
        "jacobian": lambda: dn.jacobian(m, *arrays, link, data=data),
        "link_pose": lambda: dn.link_pose(m, *arrays, link, data=data),
        "link_poses": lambda: dn.link_poses(m, *arrays, data=data),
        "link_velocity": lambda: dn.link_velocity(m, *arrays, link, data=data),
        "bias_acceleration": lambda: dn.bias_acceleration(m, *arrays, link, data=data),
        "center_of_mass": lambda: dn.center_of_mass(m, *arrays, data=data),
        "regressor": lambda: dn.regressor(m, *arrays, data=data),
        "link_regressor": lambda: dn.link_regressor(m, *arrays, link, data=data),
        "coriolis_matrix": lambda: dn.coriolis_matrix(m, *arrays, data=data),
        "jacobian_derivative": lambda: dn.jacobian_derivative(m, arrays[0], arrays[1], link, arrays[2], data=data),
        "operational_space_inertia": lambda: dn.operational_space_inertia(m, arrays[0], link, arrays[1], data=data),
        "manipulability": lambda: dn.manipulability(m, *arrays, link, data=data),
        "jacobian_singular_values": lambda: dn.jacobian_singular_values(m, *arrays, link, data=data),
        "analytic_jacobian": lambda: dn.analytic_jacobian(m, *arrays, link, data=data),
    }
    return m, fns[name]


@pytest.mark.parametrize("name", DATA_FUNCS)
def test_data_of_another_model_or_no_data_is_refused(models, name):
    small = dn.load_model(REPO / "test" / "data" / "sixlink.urdf")
    m, _ = _call_with_data(models, name, None)
    _, fn = _call_with_data(models, name, dn.Data(small))
    with pytest.raises(dn.InputError, match="data was made for another model"):
        fn()
    _, fn = _call_with_data(models, name, object())
    with pytest.raises((dn.InputError, TypeError), match="data"):
        fn()
    d = dn.Data(m)
    _, fn = _call_with_data(models, name, d)
    _, plain = _call_with_data(models, name, None)
    _same(fn(), plain(), name)  # a Data of the right model gives the same result


def test_data_serves_models_of_the_same_tree(models):
    arm = models["arm"]
    q, qd, qdd, _ = _state(arm, 1)
    heavy = arm.with_payload(arm.link_names[-1], 2.0).with_gravity((0.0, 0.0, -3.0))
    np.testing.assert_array_equal(dn.gravity(heavy, q, data=dn.Data(arm)), dn.gravity(heavy, q))


def test_data_is_used_on_the_c_route(models):
    """With data=, the C callback computes in the Data's buffer (before: data= was ignored on that
    route), and the named views hold the book's quantities: |omega| of the last body equals that of
    the link velocity (frame-invariant), and gravity's a_0 is the base acceleration -a_g (§5.3)."""
    arm = models["arm"]
    q, qd, qdd, _ = _state(arm, 2)
    d = dn.Data(arm)
    dn.inverse_dynamics(arm, q, qd, qdd, data=d)
    last = arm.link_names[-1]
    b = arm.body_of(last)
    np.testing.assert_allclose(np.linalg.norm(d.v[b, :3]), np.linalg.norm(dn.link_velocity(arm, q, qd, last)[3:]),
                               rtol=1e-12)
    d2 = dn.Data(arm)
    dn.gravity(arm, q, data=d2)
    np.testing.assert_allclose(np.linalg.norm(d2.a[0, 3:]), np.linalg.norm(arm.gravity), rtol=1e-12)
    np.testing.assert_allclose(d2.a[0, :3], 0.0, atol=1e-15)


# ------------------------------------------------------------------------------------ overflow
def test_overflowing_results_are_refused(models):
    arm, mimic = models["arm"], models["mimic"]
    q, qd, qdd, tau = _state(arm, 0)
    for m, (qq, v, a, _) in ((arm, (q, qd, qdd, tau)), (mimic, _state(mimic, 0))):
        with pytest.raises(dn.InputError, match=r"qd\[\d+\].* is out of range.*: .*overflow"):
            dn.inverse_dynamics(m, qq, np.full(m.nv, 1.4e154), a)
        with pytest.raises(dn.InputError, match="overflow"):
            dn.bias_forces(m, qq, np.full(m.nv, 1.4e154))
        with pytest.raises(dn.InputError, match=r"qd\[\d+\].* is out of range.*: .*overflow"):
            dn.regressor(m, qq, np.full(m.nv, 1.4e154), a)
        with pytest.raises(dn.InputError, match=r"qd\[\d+\].* is out of range.*: .*overflow"):
            dn.link_regressor(m, qq, np.full(m.nv, 1.4e154), a, m.link_names[-1])
    Q, QD, QDD = np.stack([_state(arm, s)[0] for s in range(3)]), np.ones((3, arm.nv)), np.ones((3, arm.nv))
    with pytest.raises(dn.InputError, match=r"TAU\[\d+, \d+\].* is out of range"):
        dn.identify_payload(arm, link_of_arm := arm.link_names[-1], Q, QD, QDD, np.full((3, arm.nv), 1e308))
    with pytest.raises(dn.InputError, match=r"QD\[\d+, \d+\].* is out of range"):
        dn.identify_payload(arm, link_of_arm, Q, np.full((3, arm.nv), 1.4e154), QDD, np.zeros((3, arm.nv)))
    link = arm.link_names[-1]
    with pytest.raises(dn.InputError, match=r"f_ext\['tool0'\]\[\d\] \([ft][xyz]\) = 1e\+308 is out of range"):
        dn.inverse_dynamics(arm, q, qd, qdd, f_ext={link: [1e308] * 6})
    with pytest.raises(dn.InputError, match="overflow"):
        dn.forward_dynamics(arm, q, qd, tau, f_ext={link: [1e308] * 6})
    with pytest.raises(dn.InputError, match="overflow"):
        dn.inverse_dynamics_batch(arm, q[None], np.full((1, arm.nv), 1.4e154), qdd[None])


@pytest.mark.parametrize("change", ["gravity", "payload"])
def test_overflowing_model_parameters_are_refused(models, change):
    """gravity or a payload of 1e308: refused when set (ModelError/InputError) or when used."""
    arm = models["arm"]
    q = _state(arm, 0)[0]
    with pytest.raises((dn.InputError, dn.ModelError)):
        m = arm.with_gravity((0.0, 0.0, -1e308)) if change == "gravity" else arm.with_payload(arm.link_names[-1], 1e308)
        for fn in (dn.gravity, dn.mass_matrix):
            try:
                fn(m, q)
            except dn.InputError as e:
                assert "overflow" in str(e) and change in str(e)
                raise
        pytest.fail(f"{change} 1e308 gave finite results?")


def test_closed_loop_overflow_is_refused(models):
    four, q4 = models["four"]
    z = np.zeros(four.nv)
    with pytest.raises(dn.InputError, match="stabilization_time|overflow"):
        dn.closed_loop_forward_dynamics(four, q4 + 1e-3, np.full(four.nv, 1.0), z, stabilization_time=1e-160)


# ------------------------------------------------------------------------------------ memory
def test_thread_buffers_are_freed_at_thread_exit():
    """10,000 threads calling the C route once each leave the process's resident memory within a
    few MB (before: each left its work buffer behind, 9 KB for the arm)."""
    code = textwrap.dedent("""
        import os, threading, numpy as np, dynamics_node as dn
        m = dn.load_model("urdf/arm7.urdf"); q = np.zeros(m.nv); dn.gravity(m, q)
        page = os.sysconf("SC_PAGE_SIZE")
        rss = lambda: int(open("/proc/self/statm").read().split()[1]) * page
        def run(n):
            for _ in range(0, n, 20):
                ts = [threading.Thread(target=dn.gravity, args=(m, q)) for _ in range(20)]
                for t in ts: t.start()
                for t in ts: t.join()
        run(1000)
        r0 = rss(); run(10000); print(rss() - r0)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    grown = int(out.stdout.split()[-1])
    assert grown < 4 * 2**20, f"RSS grew by {grown / 2**20:.1f} MB over 10,000 threads"


def _all_finite(out):
    if isinstance(out, dict):
        return all(_all_finite(v) for v in out.values())
    if isinstance(out, (tuple, list)):
        return all(_all_finite(v) for v in out)
    a = np.asarray(out)
    return a.dtype.kind not in "fc" or bool(np.all(np.isfinite(a)))


@pytest.mark.parametrize("name", sorted(CALLS))
@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_finite_in_finite_out_or_input_error(models, name, data):
    """Finite inputs of any size, one argument scaled by 1e100..1e308 (all of it, or one entry): a finite
    result, or InputError naming that argument's entry out of range ('qd[3]', 'QD[1, 2]') rather than a
    symptom (an overflow, a singular matrix, a loop that cannot close)."""
    m, call, arrays = _setup(models, name, data.draw(st.integers(0, 3), label="seed"))
    i = data.draw(st.integers(0, len(arrays) - 1), label="argument")
    scale = 10.0 ** data.draw(st.integers(100, 308), label="log10 scale")
    a = np.array(arrays[i], dtype=float)
    if data.draw(st.booleans(), label="one entry"):
        k = data.draw(st.integers(0, a.size - 1), label="entry")
        a.flat[k] = np.clip((a.flat[k] or 1.0) * scale, -1.7e308, 1.7e308)
        arrays[i] = a
    else:
        arrays[i] = np.clip(a * scale, -1.7e308, 1.7e308)
    try:
        out = call(m, *arrays)
    except dn.InputError as e:
        arg = NAMES[name].split()[i]
        assert re.search(rf"\b{re.escape(arg)}\[\d+(, \d+)?\][^:]* = \S+ is out of range", str(e)), \
            f"{name}: {arg} scaled by {scale:g}: the refusal does not name {arg}'s entry: {e}"
        return
    assert _all_finite(out), f"{name}: argument {i} scaled by {scale:g} gave a non-finite result"
