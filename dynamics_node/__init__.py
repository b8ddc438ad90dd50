"""dynamics_node: rigid-body dynamics of robot mechanisms (Featherstone, *Rigid Body Dynamics
Algorithms*, 2008) as a plain Python library. Nothing here imports rclpy: the ROS 2 node
(``dynamics_node.ros``, the ``dynamics_node`` command) and the command-line tools (``dynamics_node.cli``:
``dynamics_cli``, ``dynamics_summary``; ``dynamics_node.identify``: ``dynamics_identify``) are built on it.

    import dynamics_node as dn
    model = dn.load_model("urdf/arm7.urdf")
    tau = dn.inverse_dynamics(model, q, qd, qdd)

The floor plan (docs/design.md): the core at this level (spatial, joints, model, layout, urdf, joint_law,
topology, loop_data...), the algorithms by chapter under ``algorithms/`` (tree, loops, contact,
derivatives, estimation), the simulator's physics under ``sim/``. See docs/API.md and README.md for the
conventions (SI units, joint order, angular-first spatial vectors inside the core, [linear; angular] at
the API edge).
"""
# the files the compiled kernels are made from, beside algorithms/ (dispatch.py, the URDF reader and the
# ROS edge are not: their edits keep the cache)
_KERNEL_SOURCES = ("spatial.py", "joints.py", "model.py", "layout.py", "joint_law.py", "topology.py", "loop_data.py",
                  "_kernel_io.py", "_jit.py", "_jit_build.py", "_aot_stubs.c", "sim/step.py", "sim/select.py",
                  "sim/route.py")


def _numba_cache_dir():
    """Compiled kernels are cached (numba cache=True) in a folder named after a hash of the sources
    they are compiled from (_KERNEL_SOURCES, algorithms/ and sim/'s compiled step; not the call route, ros/...):
    numba invalidates a cached kernel when its own file changes but not when a function it inlines
    from another file does, so any edit here starts a fresh cache instead of reusing stale machine
    code. The hash covers the compiler too (``_compiler_key``): two numba versions never share a folder
    (each would overwrite the other's ahead-of-time library and numba's cache index).
    NUMBA_CACHE_DIR set by the user wins."""
    import hashlib
    import os
    import pathlib
    import sys

    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    here = pathlib.Path(__file__).resolve().parent
    h = hashlib.sha1()
    for p in sorted([here / n for n in _KERNEL_SOURCES] + [*here.glob("algorithms/**/*.py")]):
        h.update(p.relative_to(here).as_posix().encode())
        h.update(p.read_bytes())
    h.update(_compiler_key())
    try:
        base = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    except RuntimeError:  # no home directory: numba's default (next to the sources) it is
        return
    d = str(base / "dynamics_node" / h.hexdigest()[:16])
    os.environ["NUMBA_CACHE_DIR"] = d
    if "numba" in sys.modules:  # imported before us: its config has read the environment already
        sys.modules["numba"].config.CACHE_DIR = d


def _compiler_key():
    """numba's and llvmlite's version files (``<package>/_version.py``, versioneer's, which name the
    release and its commit), found without importing either: importlib.metadata costs ~30 ms at every
    import of the package, find_spec a tenth of a millisecond. Where a version file is not there, the
    package's folder stands for it."""
    import importlib.util

    key = b""
    for name in ("numba", "llvmlite"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None and spec.origin else None
        if origin is None:
            key += f"{name}: none\n".encode()
            continue
        try:
            with open(origin[:-len("__init__.py")] + "_version.py", "rb") as f:
                key += f.read()
        except OSError:
            key += f"{name}: {origin}\n".encode()
    return key


_numba_cache_dir()

from .errors import DynamicsError, InputError, ModelError, ModelWarning, SingularMassMatrixError  # noqa: E402

# The rest loads on first use (PEP 562): `import dynamics_node.cli` or `.errors` stays cheap, and the
# compiled kernels are loaded only when a computation is first asked for.
_LAZY = {
    # the model (Featherstone Ch. 4) and the joint law (friction, offset; armature is load_model's option)
    "Data": ".model", "Model": ".model",
    "ROOT_JOINT": ".urdf", "load_model": ".urdf",
    "JointFriction": ".joint_law", "joint_friction": ".joint_law", "joint_friction_slope": ".joint_law",
    # tree dynamics (Ch. 5-7, §9.1-9.6)
    "bias_forces": ".algorithms.tree.rnea", "gravity": ".algorithms.tree.rnea",
    "gravity_batch": ".algorithms.tree.rnea",
    "inverse_dynamics": ".algorithms.tree.rnea", "inverse_dynamics_batch": ".algorithms.tree.rnea",
    "mass_matrix": ".algorithms.tree.crba",
    "forward_dynamics": ".algorithms.tree.aba",
    "floating_base_inverse_dynamics": ".algorithms.tree.hybrid", "hybrid_dynamics": ".algorithms.tree.hybrid",
    "integrate": ".algorithms.tree.lie_group", "difference": ".algorithms.tree.lie_group",
    # kinematics and the terms of model-based controllers
    "bias_acceleration": ".algorithms.tree.kinematics", "center_of_mass": ".algorithms.tree.kinematics",
    "link_pose": ".algorithms.tree.kinematics", "link_poses": ".algorithms.tree.kinematics",
    "link_velocity": ".algorithms.tree.kinematics",
    "coriolis_matrix": ".algorithms.tree.coriolis",
    "jacobian": ".algorithms.tree.jacobians", "jacobian_derivative": ".algorithms.tree.jacobians",
    "analytic_jacobian": ".algorithms.tree.jacobians", "manipulability": ".algorithms.tree.jacobians",
    "jacobian_singular_values": ".algorithms.tree.jacobians",
    "operational_space_inertia": ".algorithms.tree.operational_space",
    # dynamic equivalence (§9.7)
    "simplify_inertias": ".algorithms.tree.equivalence",
    # closed loops and dual arms (Ch. 8)
    "close_loop_velocities": ".algorithms.loops", "close_loops": ".algorithms.loops",
    "closed_loop_forward_dynamics": ".algorithms.loops", "closed_loop_gravity": ".algorithms.loops",
    "closed_loop_inverse_dynamics": ".algorithms.loops", "constraint_basis": ".algorithms.loops",
    "loop_constraints": ".algorithms.loops", "loop_state": ".algorithms.loops", "mobility": ".algorithms.loops",
    "loop_position_errors": ".algorithms.loops",
    "dual_arm_terms": ".algorithms.loops", "sphere_force": ".algorithms.loops", "delta_matrix": ".algorithms.loops",
    "dual_arm_forward_dynamics": ".algorithms.loops", "dual_arm_inverse_dynamics": ".algorithms.loops",
    "pseudovelocity_basis": ".algorithms.loops", "reduced_order_dynamics": ".algorithms.loops",
    "decoupled_control": ".algorithms.loops",
    # contact and impact (Ch. 11) and the simulation step
    "Contact": ".algorithms.contact.args", "contact_forward_dynamics": ".algorithms.contact.forward_dynamics",
    "impact": ".algorithms.contact.impact", "soft_contact_forces": ".algorithms.contact.soft",
    "simulate_step": ".sim.route",
    # analytic derivatives and the linearised step
    "inverse_dynamics_derivatives": ".algorithms.derivatives.dynamics_derivatives",
    "inverse_dynamics_derivatives_batch": ".algorithms.derivatives.dynamics_derivatives",
    "forward_dynamics_derivatives": ".algorithms.derivatives.dynamics_derivatives",
    "gravity_derivatives": ".algorithms.derivatives.dynamics_derivatives",
    "linearize": ".algorithms.derivatives.linearize", "linearize_batch": ".algorithms.derivatives.linearize",
    # estimation: the inertial-parameter regressor, payload identification, the momentum observer
    "inertial_parameters": ".algorithms.estimation.regressor", "regressor": ".algorithms.estimation.regressor",
    "link_regressor": ".algorithms.estimation.regressor",
    "regressor_batch": ".algorithms.estimation.regressor_batch",
    "Payload": ".algorithms.estimation.payload", "identify_payload": ".algorithms.estimation.payload",
    "MomentumObserver": ".algorithms.estimation.observer", "external_wrench": ".algorithms.estimation.observer",
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
