"""dynamics_node: rigid-body dynamics of robot mechanisms (Featherstone, *Rigid Body Dynamics
Algorithms*, 2008) as a plain Python library. The ROS 2 node (``dynamics_node.node``) is a thin
adapter over it; nothing here imports rclpy.

    import dynamics_node as dn
    model = dn.load_model("urdf/arm7.urdf")
    tau = dn.inverse_dynamics(model, q, qd, qdd)

See docs/API.md and README.md for the conventions (SI units, joint order, angular-first spatial
vectors inside the core, [linear; angular] at the API edge).
"""
def _numba_cache_dir():
    """Compiled kernels are cached (numba cache=True) in a folder named after a hash of the sources
    they are compiled from (spatial, joints, model, layout, packed, status, _jit, _jit_build, _views, algorithms/):
    numba invalidates a cached kernel when its own file changes but not when a function it inlines
    from another file does, so any edit here starts a fresh cache instead of reusing stale machine
    code. NUMBA_CACHE_DIR set by the user wins."""
    import hashlib
    import os
    import pathlib
    import sys

    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    here = pathlib.Path(__file__).resolve().parent
    h = hashlib.sha1()
    kernel_sources = [here / n for n in ("spatial.py", "joints.py", "model.py", "layout.py", "packed.py", "status.py",
                                        "_jit.py", "_jit_build.py", "_views.py")]
    for p in sorted(kernel_sources + [*here.glob("algorithms/**/*.py")]):
        h.update(p.relative_to(here).as_posix().encode())
        h.update(p.read_bytes())
    try:
        base = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    except RuntimeError:  # no home directory: numba's default (next to the sources) it is
        return
    d = str(base / "dynamics_node" / h.hexdigest()[:16])
    os.environ["NUMBA_CACHE_DIR"] = d
    if "numba" in sys.modules:  # imported before us: its config has read the environment already
        sys.modules["numba"].config.CACHE_DIR = d


_numba_cache_dir()

from .errors import DynamicsError, InputError, ModelError, ModelWarning, SingularMassMatrixError  # noqa: E402

# The rest loads on first use (PEP 562): `import dynamics_node.cli` or `.errors` stays cheap, and the
# compiled kernels are loaded only when a computation is first asked for.
_LAZY = {
    "Data": ".model", "Model": ".model",
    "ROOT_JOINT": ".urdf", "load_model": ".urdf",
    "bias_forces": ".algorithms.rnea", "gravity": ".algorithms.rnea", "gravity_batch": ".algorithms.rnea",
    "inverse_dynamics": ".algorithms.rnea", "inverse_dynamics_batch": ".algorithms.rnea",
    "mass_matrix": ".algorithms.crba",
    "forward_dynamics": ".algorithms.aba",
    "floating_base_inverse_dynamics": ".algorithms.hybrid", "hybrid_dynamics": ".algorithms.hybrid",
    "bias_acceleration": ".algorithms.kinematics", "center_of_mass": ".algorithms.kinematics",
    "link_pose": ".algorithms.kinematics",
    "link_poses": ".algorithms.kinematics", "link_velocity": ".algorithms.kinematics",
    "close_loop_velocities": ".algorithms.loops", "close_loops": ".algorithms.loops",
    "closed_loop_forward_dynamics": ".algorithms.loops", "closed_loop_gravity": ".algorithms.loops",
    "closed_loop_inverse_dynamics": ".algorithms.loops", "constraint_basis": ".algorithms.loops",
    "loop_constraints": ".algorithms.loops", "loop_state": ".algorithms.loops", "mobility": ".algorithms.loops",
    "loop_position_errors": ".algorithms.loops",
    "dual_arm_terms": ".algorithms.loops", "sphere_force": ".algorithms.loops", "delta_matrix": ".algorithms.loops",
    "dual_arm_forward_dynamics": ".algorithms.loops", "dual_arm_inverse_dynamics": ".algorithms.loops",
    "pseudovelocity_basis": ".algorithms.loops", "reduced_order_dynamics": ".algorithms.loops",
    "decoupled_control": ".algorithms.loops",
    # issue 10: the inertial-parameter regressor and payload identification
    "inertial_parameters": ".algorithms.regressor", "regressor": ".algorithms.regressor",
    "link_regressor": ".algorithms.regressor", "regressor_batch": ".algorithms.regressor_batch",
    "Payload": ".identification", "identify_payload": ".identification",
    # issue 11: the terms of model-based controllers
    "coriolis_matrix": ".algorithms.coriolis",
    "jacobian": ".algorithms.jacobians", "jacobian_derivative": ".algorithms.jacobians",
    "analytic_jacobian": ".algorithms.jacobians", "manipulability": ".algorithms.jacobians",
    "jacobian_singular_values": ".algorithms.jacobians",
    "operational_space_inertia": ".algorithms.operational_space",
    # issue 10 §3: the momentum observer of external torques
    "MomentumObserver": ".observer", "external_wrench": ".observer",
    # issue 23: contact and impact (Featherstone Ch. 11)
    "Contact": ".algorithms.contact_args", "contact_forward_dynamics": ".algorithms.contact",
    "impact": ".algorithms.impact",
    # issue 28 §3: dynamic equivalence (Featherstone §9.7)
    "simplify_inertias": ".equivalence",
    "soft_contact_forces": ".algorithms.soft_contact", "simulate_step": ".algorithms.sim_route",
    # issue 29: analytic derivatives of the dynamics and the linearised step
    "inverse_dynamics_derivatives": ".algorithms.derivatives",
    "forward_dynamics_derivatives": ".algorithms.derivatives", "gravity_derivatives": ".algorithms.derivatives",
    "inverse_dynamics_derivatives_batch": ".algorithms.derivatives",
    "linearize": ".algorithms.linearize", "linearize_batch": ".algorithms.linearize",
    "integrate": ".algorithms.lie_group", "difference": ".algorithms.lie_group",
    # issue 27: the joint law (friction, offset; armature is load_model's option)
    "JointFriction": ".algorithms.friction", "joint_friction": ".algorithms.friction",
    "joint_friction_slope": ".algorithms.friction",
}

__all__ = ["DynamicsError", "InputError", "ModelError", "ModelWarning", "SingularMassMatrixError", *_LAZY]


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dynamics_node' has no attribute '{name}'")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    if module == ".algorithms.loops":  # the closed-loop functions get the core's input/output contract
        from .dispatch import guard

        value = guard(value, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
