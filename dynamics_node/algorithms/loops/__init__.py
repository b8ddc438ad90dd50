"""Closed kinematic loops (Featherstone, *Rigid Body Dynamics Algorithms*, Ch. 8): the public face.

A closed-loop system is modelled as its spanning tree (the URDF tree) plus loop-closing joints
(``<loop_joint>``, see :mod:`dynamics_node.loop_joints`).  The equation of motion of the closed
system is the tree's, with the loop-joint constraint forces added (Featherstone Eqs. 8.3-8.6):

    H qdd + C = tau + K^T lambda,        K qdd = k + k_stab.

One algorithm per module; the per-loop-joint constants are packed once in the Model
(``model.loop_data``, loop_data.py):

    data         X_P, X_S, joint type, T_k as a selection of joint axes, bodies p(k), s(k) (§4.2)
    constraints  Table 8.1's delta, Table 8.4's K and k, Baumgarte (Eq. 8.22), loop_state,
                 loop_constraints, mobility (§8.10)
    basis        G and g (§8.8, Gaussian elimination with complete pivoting; per cluster)
    clusters     the minimal loop clusters and the block-diagonal K and G (§8.9), forward dynamics
                 on the blocks
    sparse       the sparse-matrix method (§8.13, Eq. 8.64) on bodies and joints
    forward      closed_loop_forward_dynamics (§8.5, Method 2) and its compiled kernel
    inverse      closed_loop_inverse_dynamics (§8.12) and closed_loop_gravity
    closure      close_loops (§8.11, Newton on delta) and close_loop_velocities (K qd = 0)
    dual_arm     two arms holding a jointed object (Unseren, ORNL/TM-11752): Eq. 31 joint force,
                 joint-space and reduced-order models, decoupled control

Inside: the book's angular-first spatial vectors (spatial.py).  At the API: [linear; angular],
world axes; loop wrenches are (fx fy fz tx ty tz) the predecessor exerts on the successor, about
the loop joint's origin.

Public functions
    closed_loop_forward_dynamics(model, q, qd, tau, stabilization_time=0.1, f_ext=None)
                                                                   -> (qdd, loop_wrenches)
    closed_loop_inverse_dynamics(model, q, qd, qdd, actuated=None, loop_wrenches=None)
                                                    -> tau (nv, model.joint_names order)
    closed_loop_gravity(model, q, actuated=None) -> tau          gravity compensation
    close_loops(model, q, independent) -> q                      Newton on delta
    close_loop_velocities(model, q, qd, independent) -> qd       K qd = 0
    loop_state(model, q, qd=None) -> {loop joint: delta, K_l qd, norms}
    loop_position_errors(model, q) -> [delta_1 ...]
    loop_constraints(model, q, qd, stabilization_time=None) -> (K, k)
    constraint_basis(model, q, qd=None, independent=None, stabilization_time=None)
                                                                   -> (G, g, y_names)    §8.8
    mobility(model, q) -> (n - rank K, rank K, n^c)                               §8.10
    dual_arm_terms, sphere_force, delta_matrix, dual_arm_forward_dynamics, pseudovelocity_basis,
    reduced_order_dynamics, dual_arm_inverse_dynamics, decoupled_control          (dual_arm)
"""
from __future__ import annotations

# The names load on first use (PEP 562), each from its module: importing the package runs none of them.
# tree/aba.py's method="sparse" imports sparse.py and forward.py imports tree/aba.py; loading them
# eagerly here would make the two packages import each other in a circle.
_WHERE = {
    "close_loop_velocities": "closure", "close_loops": "closure",
    "constraint_basis": "basis",
    "LoopState": "constraints", "loop_constraints": "constraints", "loop_position_errors": "constraints",
    "loop_state": "constraints", "mobility": "constraints",
    "DualArmTerms": "dual_arm", "decoupled_control": "dual_arm", "delta_matrix": "dual_arm",
    "dual_arm_forward_dynamics": "dual_arm", "dual_arm_inverse_dynamics": "dual_arm", "dual_arm_terms": "dual_arm",
    "pseudovelocity_basis": "dual_arm", "reduced_order_dynamics": "dual_arm", "sphere_force": "dual_arm",
    "closed_loop_forward_dynamics": "forward",
    "closed_loop_gravity": "inverse", "closed_loop_inverse_dynamics": "inverse",
}

__all__ = [
    "LoopState", "loop_state", "loop_constraints", "constraint_basis", "mobility",
    "closed_loop_forward_dynamics", "closed_loop_inverse_dynamics", "closed_loop_gravity",
    "close_loops", "close_loop_velocities", "loop_position_errors",
    "DualArmTerms", "dual_arm_terms", "sphere_force", "delta_matrix", "dual_arm_forward_dynamics",
    "pseudovelocity_basis", "reduced_order_dynamics", "dual_arm_inverse_dynamics", "decoupled_control",
]


def __getattr__(name):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module("." + where, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
