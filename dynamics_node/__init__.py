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
    they are compiled from (spatial, joints, model, algorithms/): numba invalidates a cached kernel when its own file changes but not when a function it
    inlines from another file does, so any edit here starts a fresh cache instead of reusing stale
    machine code. NUMBA_CACHE_DIR set by the user wins."""
    import hashlib
    import os
    import pathlib

    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    here = pathlib.Path(__file__).resolve().parent
    h = hashlib.sha1()
    kernel_sources = [here / n for n in ("spatial.py", "joints.py", "model.py", "layout.py")] + [*here.glob("algorithms/*.py")]
    for p in sorted(kernel_sources):
        h.update(p.relative_to(here).as_posix().encode())
        h.update(p.read_bytes())
    base = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    d = base / "dynamics_node" / h.hexdigest()[:16]
    os.environ["NUMBA_CACHE_DIR"] = str(d)
    import numba

    numba.config.CACHE_DIR = str(d)


_numba_cache_dir()

from .errors import DynamicsError, InputError, ModelError, SingularMassMatrixError
from .model import Data, Model
from .urdf import ROOT_JOINT, load_model
from .algorithms.rnea import bias_forces, gravity, gravity_batch, inverse_dynamics, inverse_dynamics_batch
from .algorithms.crba import mass_matrix
from .algorithms.aba import forward_dynamics
from .algorithms.hybrid import floating_base_inverse_dynamics, hybrid_dynamics
from .algorithms.kinematics import (bias_acceleration, center_of_mass, jacobian, link_pose, link_poses,
                                    link_velocity)

from .algorithms.loops import (close_loop_velocities, close_loops, closed_loop_forward_dynamics,
                               closed_loop_gravity, closed_loop_inverse_dynamics, constraint_basis,
                               loop_constraints, loop_state, mobility)

__all__ = [
    "DynamicsError", "InputError", "ModelError", "SingularMassMatrixError", "Data", "Model", "ROOT_JOINT",
    "load_model", "inverse_dynamics", "gravity", "bias_forces", "mass_matrix", "forward_dynamics",
    "hybrid_dynamics", "floating_base_inverse_dynamics", "inverse_dynamics_batch", "gravity_batch",
    "jacobian", "link_pose", "link_poses", "link_velocity", "bias_acceleration", "center_of_mass",
    "closed_loop_forward_dynamics", "closed_loop_inverse_dynamics", "close_loops", "close_loop_velocities",
    "closed_loop_gravity", "constraint_basis", "loop_constraints", "loop_state", "mobility",
]
