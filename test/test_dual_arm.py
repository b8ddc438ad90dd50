"""Two arms holding a jointed object (Unseren ORNL/TM-11752) on urdf/dual_arm_object.urdf.

Oracles: Pinocchio's constraintDynamics with a CONTACT_3D constraint at the spherical joint
(test-only), Unseren's own formulation (loops/dual_arm.py, Eqs. 28-41) against Featherstone's (loops/forward.py),
and physics: energy conservation and loop closure over a 2 s simulation without actuation."""
from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

import dynamics_node as dn
from dynamics_node.algorithms.loops import dual_arm as U
from dynamics_node.algorithms import loops as L

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE / "data" / "loops"
URDF = HERE.parent / "urdf" / "dual_arm_object.urdf"
sys.path.insert(0, str(DATA))

KEEP = ["arm1_joint1", "arm1_joint2", "arm1_joint3", "arm1_joint4", "arm1_joint5", "arm1_joint6",
        "arm2_joint4", "arm2_joint5", "arm2_joint6"]


@pytest.fixture(scope="module")
def model():
    return dn.load_model(URDF)


@pytest.fixture(scope="module")
def q0(model):
    d = json.loads((DATA / "dual_arm_q0.json").read_text())["q0"]
    return np.array([d[n] for n in model.joint_names])


@pytest.fixture(scope="module")
def oracle(model):
    """Pinocchio's model of the loop, imported here so that the tests without it run where Pinocchio is not
    installed (make test-oldest; conftest: skipped under DYNAMICS_NO_PINOCCHIO=1, failed otherwise)."""
    from pin_oracle import PinLoop

    return PinLoop(URDF, model, "object_sphere", contact="3D")


def _states(model, q0, n, seed):
    """Closed, constraint-consistent states near q0 (positions closed by close_loops)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q = q0 + rng.normal(scale=0.05, size=model.nq)
        q = dn.close_loops(model, q, KEEP)
        qd = L.close_loop_velocities(model, q, rng.normal(size=model.nv), KEEP)
        out.append((q, qd, rng.normal(scale=8.0, size=model.nv)))
    return out


def test_model_closes_at_q0(model, q0):
    assert model.loop_joints == ("object_sphere",)
    assert L.loop_state(model, q0).max_error < 1e-12
    assert L.mobility(model, q0) == (9, 3, 3)  # N1 + N2 - 3 (Unseren Eq. 19)
    lj = model.loops[0]
    assert lj.type == "spherical" and lj.predecessor == "object_half1" and lj.successor == "object_half2"
    # each half is welded to its arm's end effector
    assert model.body_of("object_half1") == model.body_of("arm1_link6")
    assert model.body_of("object_half2") == model.body_of("arm2_link6")


def test_forward_dynamics_vs_pinocchio(model, q0, oracle):
    for q, qd, tau in _states(model, q0, 4, 11):
        a, w = dn.closed_loop_forward_dynamics(model, q, qd, tau)
        ap, wp = oracle.forward(q, qd, tau)
        scale = max(1.0, np.abs(ap).max())
        np.testing.assert_allclose(a, ap, rtol=1e-8, atol=1e-8 * scale)
        np.testing.assert_allclose(w["object_sphere"], wp, rtol=1e-7, atol=1e-7 * max(1, np.abs(wp).max()))
        assert np.all(w["object_sphere"][3:] == 0.0)  # a spherical joint transmits no moment


def test_sphere_force_eq31_equals_constraint_force(model, q0):
    for q, qd, tau in _states(model, q0, 3, 12):
        _, w = dn.closed_loop_forward_dynamics(model, q, qd, tau)
        f31 = U.sphere_force(model, q, qd, tau)
        np.testing.assert_allclose(f31, w["object_sphere"][:3], rtol=1e-9, atol=1e-9 * max(1, np.abs(f31).max()))


def test_joint_space_and_reduced_order_models_agree(model, q0):
    for q, qd, tau in _states(model, q0, 3, 13):
        a, w = dn.closed_loop_forward_dynamics(model, q, qd, tau)
        a51, f51 = U.dual_arm_forward_dynamics(model, q, qd, tau)  # §5.1, Eq. 32
        scale = max(1.0, np.abs(a).max())
        np.testing.assert_allclose(a51, a, atol=1e-9 * scale)
        b = U.pseudovelocity_basis(model, q, qd)
        nu = b["B"] @ qd  # Eq. 34
        nudot, a_rom, f_rom, qd_rom = U.reduced_order_dynamics(model, q, nu, tau)  # Eqs. 37-41
        np.testing.assert_allclose(qd_rom, qd, atol=1e-10 * max(1, np.abs(qd).max()))
        np.testing.assert_allclose(a_rom, a, atol=1e-9 * scale)
        np.testing.assert_allclose(nudot, b["B"] @ a + b["Bdot_qd"], atol=1e-9 * scale)  # Eq. 36
        np.testing.assert_allclose(f_rom, w["object_sphere"][:3], atol=1e-8 * max(1, np.abs(f_rom).max()))
        # Eq. 35 identities
        A = U.dual_arm_terms(model, q, qd).A
        np.testing.assert_allclose(A @ b["Pi"], np.eye(3), atol=1e-10)
        np.testing.assert_allclose(A @ b["Sigma"], 0, atol=1e-10)
        np.testing.assert_allclose(b["B"] @ b["Sigma"], np.eye(9), atol=1e-10)
        # Appendix C, Example 2, Eq. C.17: Pi = [0; J_2w^-1 [-I; 0]] (J_2w: arm 2's 6x6 Jacobian)
        arm2 = [model.v_slice(f"arm2_joint{k}").start for k in range(1, 7)]
        arm1 = [model.v_slice(f"arm1_joint{k}").start for k in range(1, 7)]
        J2w = U.dual_arm_terms(model, q, qd).J2[:, arm2]
        np.testing.assert_allclose(b["Pi"][arm1], 0, atol=1e-12)
        np.testing.assert_allclose(b["Pi"][arm2], np.linalg.solve(J2w, np.vstack([-np.eye(3), np.zeros((3, 3))])),
                                   atol=1e-9)


def test_delta_matrix_properties(model, q0):
    Dl = U.delta_matrix(model, q0)
    A = U.dual_arm_terms(model, q0, np.zeros(model.nv)).A
    np.testing.assert_allclose(Dl @ Dl, Dl, atol=1e-10)      # idempotent (after Eq. 33)
    np.testing.assert_allclose(Dl @ A.T, 0, atol=1e-10)      # orthogonal complement of A^T
    assert np.linalg.matrix_rank(Dl, tol=1e-8) == 9          # Appendix B: rank <= N1 + N2 - 3


def test_inverse_dynamics_with_requested_internal_force(model, q0):
    for (q, qd, tau), f_req in zip(_states(model, q0, 3, 14), ([10.0, -3.0, 4.0], [0, 0, 0], [-50, 20, 5])):
        qdd, _ = dn.closed_loop_forward_dynamics(model, q, qd, tau)
        tau_u = U.dual_arm_inverse_dynamics(model, q, qd, qdd, f_req)  # Eq. 23 with the free f_cs (§5.2)
        a, w = dn.closed_loop_forward_dynamics(model, q, qd, tau_u)
        scale = max(1.0, np.abs(qdd).max())
        np.testing.assert_allclose(a, qdd, atol=1e-9 * scale)
        np.testing.assert_allclose(w["object_sphere"][:3], f_req, atol=1e-7)
        # Featherstone §8.12 with requested loop-joint forces gives the same efforts
        tau_f = dn.closed_loop_inverse_dynamics(model, q, qd, qdd,
                                                loop_wrenches={"object_sphere": np.r_[f_req, 0, 0, 0]})
        np.testing.assert_allclose(tau_f, tau_u, atol=1e-8 * max(1, np.abs(tau_u).max()))
        # the minimum-norm efforts reproduce qdd, and are the least-norm member of tau_u + A^T f
        tau_m = dn.closed_loop_inverse_dynamics(model, q, qd, qdd)
        a_m, _ = dn.closed_loop_forward_dynamics(model, q, qd, tau_m)
        np.testing.assert_allclose(a_m, qdd, atol=1e-9 * scale)
        A = U.dual_arm_terms(model, q, qd).A
        np.testing.assert_allclose(A @ tau_m, 0, atol=1e-8 * max(1, np.abs(tau_m).max()))
        assert np.linalg.norm(tau_m) <= np.linalg.norm(tau_u) + 1e-9
    with pytest.raises(dn.InputError, match="free motion"):
        dn.closed_loop_inverse_dynamics(model, q, qd, qdd, loop_wrenches={"object_sphere": [0, 0, 0, 1, 0, 0]})


def test_decoupled_controller_eqs_47_48(model, q0):
    rng = np.random.default_rng(15)
    for q, qd, _ in _states(model, q0, 3, 15):
        t1 = rng.normal(scale=20, size=3)
        t2 = rng.normal(size=9)
        tau, tp, ts = U.decoupled_control(model, q, qd, t1, t2)  # Eqs. 42, 46
        np.testing.assert_allclose(tp + ts, tau)
        a, w = dn.closed_loop_forward_dynamics(model, q, qd, tau)  # the plant: Featherstone's FD
        b = U.pseudovelocity_basis(model, q, qd)
        nudot = b["B"] @ a + b["Bdot_qd"]  # Eq. 36
        np.testing.assert_allclose(nudot, t2, atol=1e-9 * max(1, np.abs(t2).max()))       # Eq. 47
        np.testing.assert_allclose(w["object_sphere"][:3], t1, atol=1e-8 * max(1, np.abs(t1).max()))  # Eq. 48


def test_gravity_compensation_holds_the_object(model, q0):
    tau = L.closed_loop_gravity(model, q0)
    a, _ = dn.closed_loop_forward_dynamics(model, q0, np.zeros(model.nv), tau)
    np.testing.assert_allclose(a, 0, atol=1e-9)
    # properly actuated with 9 actuators (arm 2's shoulder and elbow passive): efforts only there
    only = KEEP
    tau2 = L.closed_loop_gravity(model, q0, actuated=only)
    assert np.all(tau2[[model.v_slice(j).start for j in ("arm2_joint1", "arm2_joint2", "arm2_joint3")]] == 0)
    a2, _ = dn.closed_loop_forward_dynamics(model, q0, np.zeros(model.nv), tau2)
    np.testing.assert_allclose(a2, 0, atol=1e-9)
    # arm 2's spherical wrist passive: the object half can spin about the line from the wrist
    # centre to the sphere centre, and no actuator controls that freedom
    with pytest.raises(dn.InputError, match="under-actuated") as ei:
        L.closed_loop_gravity(model, q0, actuated=KEEP[:6] + ["arm2_joint1", "arm2_joint2", "arm2_joint3"])
    assert "arm2_joint6" in str(ei.value)


def test_simulation_energy_and_closure(model, q0, oracle):
    """2 s of free motion (no actuation, no damping) under gravity from rest at the closed q0:
    loop-closure error < 1e-6 and total energy (Pinocchio's kinetic + potential) conserved to 1e-4."""
    import pinocchio as pin

    pm, pd = oracle.pm, oracle.pd

    def energy(q, v):
        qp, vp = oracle.q_to_pin(q), oracle._to_pin(v)
        return pin.computeKineticEnergy(pm, pd, qp, vp) + pin.computePotentialEnergy(pm, pd, qp)

    n = model.nv
    zero = np.zeros(n)

    def f(x):
        a, _ = dn.closed_loop_forward_dynamics(model, x[:n], x[n:], zero)
        return np.concatenate([x[n:], a])

    x = np.concatenate([q0, zero])
    E0 = energy(q0, zero)
    dt = 5e-4
    worst_e, worst_d, vmax, ke_max = 0.0, 0.0, 0.0, 0.0
    for i in range(int(round(2.0 / dt))):
        k1 = f(x)
        k2 = f(x + 0.5 * dt * k1)
        k3 = f(x + 0.5 * dt * k2)
        k4 = f(x + dt * k3)
        x = x + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        if i % 10 == 0:
            worst_d = max(worst_d, L.loop_state(model, x[:n]).max_error)
            worst_e = max(worst_e, abs(energy(x[:n], x[n:]) - E0))
            vmax = max(vmax, np.abs(x[n:]).max())
            ke_max = max(ke_max, pin.computeKineticEnergy(pm, pd, oracle.q_to_pin(x[:n]), oracle._to_pin(x[n:])))
    assert vmax > 1.0  # it really moved
    assert worst_d < 1e-6, worst_d
    assert worst_e < 1e-4 * abs(E0), (worst_e, E0)
    assert worst_e < 1e-4 * ke_max, (worst_e, ke_max)  # also against the energy that moved


def test_dual_arm_api_is_exported_without_shadowing_the_core(model, q0):
    """The Unseren functions are dn.dual_arm_* (and friends), wrapped by the input/output contract of
    the closed-loop functions; dn.forward_dynamics stays the core's."""
    from dynamics_node.algorithms.tree.aba import forward_dynamics
    from dynamics_node.algorithms.tree.rnea import inverse_dynamics

    assert dn.forward_dynamics is forward_dynamics and dn.inverse_dynamics is inverse_dynamics
    for name in ("dual_arm_terms", "sphere_force", "delta_matrix", "dual_arm_forward_dynamics",
                 "pseudovelocity_basis", "reduced_order_dynamics", "dual_arm_inverse_dynamics", "decoupled_control"):
        assert getattr(dn, name).__wrapped__ is getattr(U, name)  # under the core's contract (dispatch.guard)
    qd, tau = np.zeros(model.nv), np.ones(model.nv)
    a, f = dn.dual_arm_forward_dynamics(model, q0, qd, tau)
    np.testing.assert_allclose(a, dn.closed_loop_forward_dynamics(model, q0, qd, tau)[0], atol=1e-9)
    with pytest.raises(dn.InputError, match="f_cs"):
        dn.dual_arm_inverse_dynamics(model, q0, qd, a, f_cs=[1.0, float("nan"), 0.0])
