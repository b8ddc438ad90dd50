"""Inverse dynamics of a closed-loop system (Featherstone §8.12, Eqs. 8.61-8.63): actuator efforts
for a motion that satisfies the loop constraints, and gravity compensation."""
from __future__ import annotations

import numpy as np

from ...errors import InputError, clip, clip_names
from ..tree.kinematics import link_pose
from ..tree.rnea import inverse_dynamics
from .constraints import matrix_rank, names, rank_tol, terms, v_labels, vec


def _actuated_mask(model, actuated):
    if actuated is None:
        actuated = getattr(model, "actuated_joints", None) or model.joint_names
    if not isinstance(actuated, str):
        try:
            actuated = list(actuated)
        except TypeError:
            raise InputError(f"actuated must be a list of joint names, got {type(actuated).__name__}") from None
    mask = np.zeros(model.nv, dtype=bool)
    for j in names(actuated):
        if not isinstance(j, str) or j not in model.joint_names:
            raise InputError(f"actuated: unknown joint {clip(j)!r} (model joints: {clip_names(model.joint_names)})")
        mask[model.v_slice(j)] = True
    return mask


def _describe_motion(model, m):
    labels = v_labels(model)
    m = m / np.max(np.abs(m))
    parts = [f"{labels[i]} {m[i]:+.3g}" for i in range(len(m)) if abs(m[i]) > 1e-6]
    return "(" + ", ".join(parts) + ")"


def closed_loop_inverse_dynamics(model, q, qd, qdd, actuated=None, loop_wrenches=None, _clustered=True):
    """Actuator efforts of a closed-loop system (Featherstone §8.12, Eqs. 8.61-8.63).

    Returns tau over model.joint_names: nv entries in the model's order (never in the order of
    ``actuated``), zeros on the joints that are not actuated.  ``actuated``: joint names (default
    model.actuated_joints, from <transmission>, else all).  q, qd, qdd must satisfy the loop
    constraints (close_loops / close_loop_velocities / constraint_basis).

    * properly actuated: the unique u of G_u^T u = G^T tau_ID (Eq. 8.63);
    * redundantly actuated: the minimum-norm u (no criterion in the book; ours: least squares);
      or, with ``loop_wrenches`` {loop joint: (fx fy fz tx ty tz)} (predecessor on successor, world
      axes, about the joint origin; loops not named are free), the efforts that produce those
      loop-joint constraint forces: tau = tau_ID - K^T lambda (Eq. 8.61);
    * under-actuated (rank G_u < n - r): InputError naming the freedoms no actuator controls.

    G is built per loop cluster (Featherstone §8.9: block-diagonal, each block K_c by §8.8's
    elimination); u does not depend on the basis chosen for G.
    """
    q = vec(model, q, model.nq, "q")
    qd = vec(model, qd, model.nv, "qd")
    qdd = vec(model, qdd, model.nv, "qdd")
    mask = _actuated_mask(model, actuated)
    tau_id = np.asarray(inverse_dynamics(model, q, qd, qdd), dtype=float)
    if model.loop_data is None:
        if not np.all(mask):
            bad = [j for j in model.joint_names if not np.all(mask[model.v_slice(j)])]
            raise InputError(f"under-actuated: no actuator on joint(s) {', '.join(bad)} of the kinematic tree")
        return tau_id
    K = terms(model, q)[0]  # Eq. 8.62 needs G, i.e. K only
    return _actuator_efforts(model, q, K, tau_id, mask, loop_wrenches, _clustered)


def _basis(model, K, clustered):
    """G: a basis of the admissible motions (null space of K, Eq. 8.52); any serves Eqs. 8.62-8.63,
    whose solutions do not depend on the basis.  Clustered: block-diagonal, §8.8 per block (§8.9);
    otherwise (the former route) the SVD of the whole K."""
    if clustered:
        from .basis import block_basis, dense_G  # basis imports constraints, as this module does

        cd = model.loop_data.clusters
        parts, _ = block_basis(cd, K, np.zeros(K.shape[0]))
        return dense_G(cd, model.nv, parts)[0]
    _, sv, Vt = np.linalg.svd(K)
    return Vt[int(np.sum(sv > rank_tol(K))):].T


def _actuator_efforts(model, q, K, tau_id, mask, loop_wrenches, clustered=True):
    G = _basis(model, K, clustered)
    Gu = G[mask]
    nfree = G.shape[1]
    ru = matrix_rank(Gu)
    if ru < nfree:
        # freedoms y with G_u y = 0: motions qd = G y no actuator can drive (Featherstone §8.12 case 1)
        _, s, Vt = np.linalg.svd(Gu if Gu.size else np.zeros((1, nfree)))
        null = Vt[ru:].T
        motions = [_describe_motion(model, G @ null[:, i]) for i in range(null.shape[1])]
        act = [j for j in model.joint_names if np.any(mask[model.v_slice(j)])]
        raise InputError(
            f"under-actuated: with actuators on {act or 'no joint'} the closed-loop system has "
            f"{nfree - ru} freedom(s) no actuator controls, moving the joints as "
            + "; ".join(motions) + " (Featherstone §8.12: rank(G_u) < n - r)")
    tau = np.zeros(model.nv)
    if loop_wrenches is None:
        rhs = G.T @ tau_id  # Eq. 8.62
        u, *_ = np.linalg.lstsq(Gu.T, rhs, rcond=None)  # Eq. 8.63; minimum norm if redundant
        tau[mask] = u
        return tau
    # requested loop-joint constraint forces: tau = tau_ID - K^T lambda (Eq. 8.61)
    try:
        unknown = dict(loop_wrenches)
    except (TypeError, ValueError):
        raise InputError("loop_wrenches must map loop-joint names to (fx fy fz tx ty tz)") from None
    lam_fixed = np.zeros(K.shape[0])
    free_rows = np.zeros(K.shape[0], dtype=bool)
    for lj, rows in zip(model.loops, model.loop_data.rows):
        if lj.name in unknown:
            try:
                f = np.asarray(unknown.pop(lj.name), dtype=float).reshape(-1)
            except (TypeError, ValueError):
                f = np.zeros(0)
            if f.shape != (6,) or not np.all(np.isfinite(f)):
                raise InputError(f"loop_wrenches['{lj.name}'] must be 6 finite numbers (fx fy fz tx ty tz)")
            # T_k in world axes: the parser's T (linear first, URDF joint axes) turned by the joint frame
            R = link_pose(model, q, lj.successor)[:3, :3] @ lj.X_S[:3, :3]
            Tw = np.vstack([R @ lj.T[:3], R @ lj.T[3:]])
            lam = Tw.T @ f  # T_w has orthonormal columns
            if np.linalg.norm(f - Tw @ lam) > 1e-9 * (1.0 + np.linalg.norm(f)):
                raise InputError(f"loop_wrenches['{lj.name}'] has a component along the joint's free motion "
                                 f"({lj.type} joint): a constraint force cannot act there")
            lam_fixed[rows] = lam
        else:
            free_rows[rows] = True
    if unknown:
        raise InputError(f"loop_wrenches names unknown loop joint(s) {sorted(map(str, unknown))}; "
                         f"loop joints: {list(model.loop_joints)}")
    target = tau_id - K.T @ lam_fixed
    # unknowns: u (actuated) and lambda of the loops not named; Q[u; 0] - K_free^T lam_free = target
    M = np.hstack([np.eye(model.nv)[:, mask], -K[free_rows].T])
    sol, *_ = np.linalg.lstsq(M, target, rcond=None)
    if np.linalg.norm(M @ sol - target) > 1e-8 * (1.0 + np.linalg.norm(target)):
        raise InputError("the requested loop_wrenches cannot be produced by the actuated joints "
                         f"{[j for j in model.joint_names if np.any(mask[model.v_slice(j)])]}")
    tau[mask] = sol[:int(mask.sum())]
    return tau


def closed_loop_gravity(model, q, actuated=None, _clustered=True):
    """Gravity compensation of a closed-loop robot: actuator efforts (over model.joint_names, zeros
    on unactuated joints) holding configuration q at rest (Featherstone §8.12 with qd = qdd = 0)."""
    z = np.zeros(model.nv)
    return closed_loop_inverse_dynamics(model, q, z, z, actuated=actuated, _clustered=_clustered)
