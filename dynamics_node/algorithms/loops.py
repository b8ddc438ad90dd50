"""Closed kinematic loops (Featherstone, *Rigid Body Dynamics Algorithms*, Ch. 8): the public face.

A closed-loop system is modelled as its spanning tree (the URDF tree) plus loop-closing joints
(``<loop_joint>``, see :mod:`dynamics_node.loop_joints`).  The equation of motion of the closed
system is the tree's, with the loop-joint constraint forces added (Featherstone Eqs. 8.3-8.6):

    H qdd + C = tau + K^T lambda,        K qdd = k + k_stab.

One algorithm per module, this one re-exports them:

    loop_constraints  conventions (frames, 6-vector order); Table 8.1's delta, Table 8.4's K and k,
                      Baumgarte (Eq. 8.22), loop_state, loop_constraints, G and g (§8.8), mobility (§8.10)
    loop_forward      closed_loop_forward_dynamics (§8.5, Method 2) and its compiled kernel
    loop_inverse      closed_loop_inverse_dynamics (§8.12) and closed_loop_gravity
    loop_closure      close_loops (§8.11, Newton on delta) and close_loop_velocities (K qd = 0)

Public functions
    closed_loop_forward_dynamics(model, q, qd, tau, stabilization_time=0.1, f_ext=None)
                                                                   -> (qdd, loop_wrenches)
    closed_loop_inverse_dynamics(model, q, qd, qdd, actuated=None, loop_wrenches=None) -> tau
    closed_loop_gravity(model, q, actuated=None) -> tau          gravity compensation
    close_loops(model, q, independent) -> q                      Newton on delta
    close_loop_velocities(model, q, qd, independent) -> qd       K qd = 0
    loop_state(model, q, qd=None) -> {loop joint: delta, K_l qd, norms}
    loop_position_errors(model, q) -> [delta_1 ...]
    loop_constraints(model, q, qd, stabilization_time=None) -> (K, k)
    constraint_basis(model, q, qd=None, independent=None, stabilization_time=None)
                                                                   -> (G, g, y_names)    §8.8
    mobility(model, q) -> (n - rank K, rank K, n^c)                               §8.10
"""
from __future__ import annotations

from . import loop_forward as _forward
from .loop_closure import close_loop_velocities, close_loops
from .loop_constraints import (LoopState, constraint_basis, loop_constraints, loop_position_errors, loop_state,
                               mobility)
from .loop_forward import closed_loop_forward_dynamics
from .loop_inverse import closed_loop_gravity, closed_loop_inverse_dynamics

__all__ = [
    "LoopState", "loop_state", "loop_constraints", "constraint_basis", "mobility",
    "closed_loop_forward_dynamics", "closed_loop_inverse_dynamics", "closed_loop_gravity",
    "close_loops", "close_loop_velocities", "loop_position_errors",
]

# the forward dynamics through the core's public API; the tests compare it with the compiled path
_closed_loop_fd_generic = _forward._closed_loop_fd_generic
