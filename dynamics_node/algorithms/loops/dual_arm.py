"""Two manipulators holding an object made of two bodies joined by a spherical joint
(M. A. Unseren, ORNL/TM-11752, 1991), reproduced on a dynamics_node model with a spherical loop joint.

Mapping of Unseren's notation onto dynamics_node
-------------------------------------------------
The model is a spanning tree plus one spherical ``<loop_joint>`` (see urdf/dual_arm_object.urdf):
arm 1 ends in the link that rigidly holds object body 1 (the loop joint's *predecessor* link), arm 2
in the link holding object body 2 (its *successor*).  The object halves are links welded by fixed
joints to the end effectors, so the core's tree dynamics already contain them.

* q = (q_1, q_2), qd, tau: the model's vectors (model.joint_names order; the two arms' joints are
  simply the columns that move the predecessor resp. the successor).
* D(q) (Eq. 25) = dn.mass_matrix (arm inertia plus the welded object body, Unseren's
  J^T L^-1 Lambda L^-T J term).
* C + H_A + H_B qd (Eqs. 24, 26, 27) = dn.bias_forces: Coriolis, centrifugal and gravity terms of
  arms and object bodies together.  Unseren keeps them apart only because he derives them by hand.
* Vectors are linear first here, as in Unseren (f_ci = [f; n], Eq. 4) and at dynamics_node's API
  (world axes); the loop package's kernels are angular first inside (Featherstone).
* Q_cs, the centre of the spherical joint = the loop joint's origin: X_P on body 1, X_S on body 2.
* A(q) (Eqs. 18, 28) = [J_Q1, -J_Q2]: the linear Jacobian of Q_cs as a point of body 1 minus that
  of Q_cs as a point of body 2 (world axes).  A qd = 0 is Eq. 29; Featherstone's K for the same
  spherical loop joint is -R_s^T A (rows in successor-frame axes), so the two formulations are
  independent computations of the same constraint.
* Adot qd (Eq. 30) = a_Q1 - a_Q2, the classical bias accelerations (qdd = 0) of the two points.
* ^{2w}f_cs = force body 1 exerts on body 2 at Q_cs, world axes (Eq. 7) = the first three entries of
  ``loop_wrenches[loop joint]`` of dn.closed_loop_forward_dynamics (predecessor on successor).
  Eq. 23: tau = D qdd + C + H_A + H_B qd + A^T f_cs.
* Pseudovelocities (Eq. 34, Appendix C Example 2): nu = [omega_c2; v_cs; omega_c1] with v_cs the
  velocity of Q_cs computed through arm 1, so B = [[0, J_2w,ang]; [J_Q1, 0]; [J_1w,ang, 0]].
"""
from __future__ import annotations

import numpy as np

from ...errors import InputError, RangeError

from ...spatial import skew
from ..tree.crba import mass_matrix
from ..tree.kinematics import bias_acceleration, jacobian, link_pose
from ..tree.rnea import bias_forces

__all__ = ["DualArmTerms", "dual_arm_terms", "sphere_force", "dual_arm_forward_dynamics", "delta_matrix",
           "pseudovelocity_basis", "reduced_order_dynamics", "dual_arm_inverse_dynamics",
           "decoupled_control"]


def _sphere_joint(model, loop_joint):
    loops = tuple(getattr(model, "loops", ()))
    if loop_joint is None:
        sph = [lj for lj in loops if lj.type == "spherical"]
        if len(sph) != 1:
            raise InputError(f"model '{model.name}' must have exactly one spherical loop joint "
                             f"(has {[lj.name for lj in sph]}); name it with loop_joint=")
        return sph[0]
    for lj in loops:
        if lj.name == loop_joint:
            if lj.type != "spherical":
                raise InputError(f"loop joint '{loop_joint}' is {lj.type}, Unseren's model needs a spherical joint")
            return lj
    raise InputError(f"unknown loop joint '{loop_joint}' (model loop joints: {list(model.loop_joints)})")


def _vec(model, x, n, what):
    try:
        a = np.asarray(x, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        a = None
    if a is None or a.shape != (n,):
        raise InputError(f"{what} must be {n} finite numbers")
    if not np.all(np.isfinite(a)):  # the caller's are finite (dispatch.guard): one computed from them overflowed
        raise RangeError(f"{what} must be {n} finite numbers", symptom=f"{what} overflowed (not finite)")
    return a


class DualArmTerms(dict):
    """Unseren's matrices at (q, qd): keys D, C (= C + H_A + H_B qd), A (3 x n), Adot_qd (3),
    J1, J2 (6 x n world Jacobians of the end-effector bodies at their own link origins),
    JQ1 (3 x n), a1_bias, a2_bias (6: classical bias accelerations at the link origins),
    aQ1_bias (3), Q1, Q2 (sphere centre as a point of body 1 / body 2)."""

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None


def dual_arm_terms(model, q, qd, loop_joint=None) -> DualArmTerms:
    """Evaluate D, C + H_A + H_B qd, A (Eq. 28) and Adot qd (Eq. 30) at (q, qd)."""
    lj = _sphere_joint(model, loop_joint)
    q = _vec(model, q, model.nq, "q")
    qd = _vec(model, qd, model.nv, "qd")
    out = DualArmTerms()
    out["D"] = np.asarray(mass_matrix(model, q), dtype=float)           # Eq. 25
    out["C"] = np.asarray(bias_forces(model, q, qd), dtype=float)       # Eqs. 24, 26, 27
    pts = []
    for i, (link, X) in enumerate(((lj.predecessor, lj.X_P), (lj.successor, lj.X_S)), start=1):
        P = link_pose(model, q, link)
        Q = P[:3, :3] @ X[:3, 3] + P[:3, 3]               # Q_cs as a point of body i
        rho = Q - P[:3, 3]                                # Unseren's ^{iw}r to Q_cs (Eq. 1)
        J = np.asarray(jacobian(model, q, link), dtype=float)
        a = np.asarray(bias_acceleration(model, q, qd, link), dtype=float)
        w = J[3:] @ qd
        JQ = J[:3] - skew(rho) @ J[3:]                   # L_si^T (L_mi^T)^-1 J_iw (Eqs. 15-17)
        aQ = a[:3] + np.cross(a[3:], rho) + np.cross(w, np.cross(w, rho))
        out[f"J{i}"] = J
        out[f"a{i}_bias"] = a
        out[f"JQ{i}"] = JQ
        out[f"aQ{i}_bias"] = aQ
        out[f"Q{i}"] = Q
        pts.append((JQ, aQ))
    out["A"] = pts[0][0] - pts[1][0]                      # Eq. 28 (A = [J_Q1, -J_Q2])
    out["Adot_qd"] = pts[0][1] - pts[1][1]                # Eq. 30
    return out


def sphere_force(model, q, qd, tau, loop_joint=None) -> np.ndarray:
    """^{2w}f_cs from (q, qd, tau) by Unseren Eq. 31:
    (A D^-1 A^T) f_cs = Adot qd + A D^-1 (tau - C - H_A - H_B qd).
    The force body 1 (predecessor side) exerts on body 2 at the joint centre, world axes."""
    t = dual_arm_terms(model, q, qd, loop_joint)
    tau = _vec(model, tau, model.nv, "tau")
    Dinv_AT = np.linalg.solve(t.D, t.A.T)
    Dinv_r = np.linalg.solve(t.D, tau - t.C)
    return np.linalg.solve(t.A @ Dinv_AT, t.Adot_qd + t.A @ Dinv_r)


def delta_matrix(model, q, loop_joint=None) -> np.ndarray:
    """Delta(q) = I - A^T (A D^-1 A^T)^-1 A D^-1 (Unseren Eq. 33): idempotent, Delta A^T = 0,
    rank <= N1 + N2 - 3 (Appendix B)."""
    t = dual_arm_terms(model, q, np.zeros(model.nv), loop_joint)
    Dinv = np.linalg.inv(t.D)
    M = t.A @ Dinv @ t.A.T
    return np.eye(model.nv) - t.A.T @ np.linalg.solve(M, t.A @ Dinv)


def dual_arm_forward_dynamics(model, q, qd, tau, loop_joint=None):
    """Joint-space closed-chain forward dynamics (Unseren §5.1, Eq. 32):
    D qdd = Delta (tau - C - H_A - H_B qd) - A^T (A D^-1 A^T)^-1 Adot qd.  Returns (qdd, f_cs)."""
    t = dual_arm_terms(model, q, qd, loop_joint)
    tau = _vec(model, tau, model.nv, "tau")
    Dinv = np.linalg.inv(t.D)
    M = t.A @ Dinv @ t.A.T
    Delta = np.eye(model.nv) - t.A.T @ np.linalg.solve(M, t.A @ Dinv)   # Eq. 33
    rhs = Delta @ (tau - t.C) - t.A.T @ np.linalg.solve(M, t.Adot_qd)   # Eq. 32
    qdd = np.linalg.solve(t.D, rhs)
    f = np.linalg.solve(M, t.Adot_qd + t.A @ Dinv @ (tau - t.C))        # Eq. 31
    return qdd, f


def pseudovelocity_basis(model, q, qd, loop_joint=None, terms=None):
    """B (Eq. 34, Appendix C Example 2: nu = [omega_c2; v_cs; omega_c1]), Bdot qd, and
    [Pi Sigma] = [A; B]^-1 (Eq. 35; computed numerically rather than by Eq. C.16).
    Returns dict with B, Bdot_qd, Pi, Sigma and the terms of :func:`dual_arm_terms`."""
    t = terms if terms is not None else dual_arm_terms(model, q, qd, loop_joint)
    B = np.vstack([t.J2[3:], t.JQ1, t.J1[3:]])                          # Eq. C.11
    Bdot_qd = np.concatenate([t.a2_bias[3:], t.aQ1_bias, t.a1_bias[3:]])
    AB = np.vstack([t.A, B])
    if np.linalg.cond(AB) > 1e12:
        raise RangeError("[A; B] is singular at this configuration (an arm Jacobian is singular; "
                         "Unseren Appendix C needs both J_iw nonsingular)",
                         symptom="[A; B] (Unseren Eq. 35) is singular")
    inv = np.linalg.inv(AB)                                             # Eq. 35
    return {"B": B, "Bdot_qd": Bdot_qd, "Pi": inv[:, :3], "Sigma": inv[:, 3:], "terms": t}


def reduced_order_dynamics(model, q, nu, tau, loop_joint=None):
    """Reduced-order model (Unseren §6, Eqs. 37-41) in the pseudovelocities nu (N1 + N2 - 3 of them):
    qd = Sigma nu (37);  Sigma^T D Sigma nudot = Sigma^T {tau + D [Pi Adot + Sigma Bdot] Sigma nu - C - H_A
    - H_B Sigma nu} (40);  qdd = Sigma nudot - [Pi Adot + Sigma Bdot] Sigma nu (38);  f_cs by Eq. 41.
    Returns (nudot, qdd, f_cs, qd)."""
    q = _vec(model, q, model.nq, "q")
    tau = _vec(model, tau, model.nv, "tau")
    # Sigma depends on q only; Adot qd and Bdot qd need qd = Sigma nu
    b0 = pseudovelocity_basis(model, q, np.zeros(model.nv), loop_joint)
    nu = _vec(model, nu, b0["Sigma"].shape[1], "nu")
    qd = b0["Sigma"] @ nu                                               # Eq. 37
    b = pseudovelocity_basis(model, q, qd, loop_joint)
    t, Pi, Sig = b["terms"], b["Pi"], b["Sigma"]
    drift = Pi @ t.Adot_qd + Sig @ b["Bdot_qd"]                         # [Pi Adot + Sigma Bdot] Sigma nu
    M = Sig.T @ t.D @ Sig
    nudot = np.linalg.solve(M, Sig.T @ (tau + t.D @ drift - t.C))       # Eq. 40
    qdd = Sig @ nudot - drift                                           # Eq. 38
    Dinv = np.linalg.inv(t.D)
    f = np.linalg.solve(t.A @ Dinv @ t.A.T, t.Adot_qd + t.A @ Dinv @ (tau - t.C))   # Eq. 41
    return nudot, qdd, f, qd


def dual_arm_inverse_dynamics(model, q, qd, qdd, f_cs=(0.0, 0.0, 0.0), loop_joint=None):
    """Joint torques producing the (constraint-consistent) motion (q, qd, qdd) with the requested
    internal force f_cs at the object's spherical joint (Unseren §5.2: the torques are not unique;
    the 3 free components are exactly f_cs).  Eq. 23: tau = D qdd + C + H_A + H_B qd + A^T f_cs."""
    t = dual_arm_terms(model, q, qd, loop_joint)
    qdd = _vec(model, qdd, model.nv, "qdd")
    f = _vec(model, f_cs, 3, "f_cs")
    return t.D @ qdd + t.C + t.A.T @ f


def decoupled_control(model, q, qd, tau1_s, tau2_s, loop_joint=None):
    """Unseren §7 composite controller tau = tau^p + tau^s with exact model knowledge (Eq. 43):
    tau^p = -{D [Pi Adot + Sigma Bdot] - H_B} Sigma nu + C + H_A (Eq. 42), tau^s = A^T tau1_s +
    D Sigma tau2_s (Eq. 46).  Then nudot = tau2_s (Eq. 47) and f_cs = tau1_s (Eq. 48).
    Returns (tau, tau_p, tau_s)."""
    b = pseudovelocity_basis(model, q, qd, loop_joint)
    t, Pi, Sig = b["terms"], b["Pi"], b["Sigma"]
    t1 = _vec(model, tau1_s, 3, "tau1_s")
    t2 = _vec(model, tau2_s, Sig.shape[1], "tau2_s")
    drift = Pi @ t.Adot_qd + Sig @ b["Bdot_qd"]
    tau_p = -t.D @ drift + t.C                                          # Eq. 42 (H_B qd is inside C)
    tau_s = t.A.T @ t1 + t.D @ Sig @ t2                                 # Eq. 46
    return tau_p + tau_s, tau_p, tau_s
