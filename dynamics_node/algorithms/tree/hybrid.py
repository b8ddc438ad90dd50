"""Hybrid dynamics (Featherstone §9.1-9.2, Table 9.3): the effort is known on some joints (the
forward-dynamics set fd) and the acceleration on the others; compute the unknown halves.

The computation is the articulated-body pass of ``aba.py`` with Table 9.3's inverse-dynamics branch.
Floating-base inverse dynamics (§9.5, Table 9.6) is the special case where the floating base is the
only forward-dynamics joint with zero applied wrench: the base acceleration follows from the joint
accelerations and the whole body's momentum balance.
"""
from __future__ import annotations

import numpy as np

from ...layout import J_VI
from ...packed import body_ints
from ...errors import InputError, clip, clip_names
from ...urdf import ROOT_JOINT
from ...dispatch import Route, names_arg, wrenches
from .aba import aba_kernel


def _mask(model, forward_joints):
    forward_joints = names_arg(forward_joints, "forward_joints")
    if forward_joints is None:
        raise InputError("forward_joints must be a joint name or a list of joint names, got None")
    if isinstance(forward_joints, str):
        forward_joints = [forward_joints]
    mask = np.zeros(model.nb, dtype=np.int64)
    vmask = np.zeros(model.nv, dtype=bool)
    names = set(model.joint_names) | ({ROOT_JOINT} if model.floating_base else set())
    for name in forward_joints:
        if name not in names:
            raise InputError(f"forward_joints: unknown joint {clip(name)!r} (model joints: "
                             f"{clip_names(model.joint_names)})")
        sl = model.v_slice(name)
        vmask[sl] = True
    # a body is forward-dynamics when its dofs are (tree dofs == user dofs without mimic)
    if model.has_mimic:
        return mask, vmask  # the dense route of _hybrid_dense works on vmask alone
    vi = body_ints(model.mi, model.nb)[:, J_VI]
    for i in range(model.nb):
        mask[i] = 1 if vmask[vi[i]] else 0
    return mask, vmask


def _hybrid(model, data, w, q, qd, qdd, tau, forward_joints, f_ext):
    mask, vmask = _mask(model, forward_joints)
    qdd_in = qdd.copy()
    tau_in = tau.copy()
    qdd_in[vmask] = 0.0  # not read
    tau_in[~vmask] = 0.0  # not read
    if model.has_mimic:
        return 0, _hybrid_dense(model, q, qd, qdd_in, tau_in, vmask, f_ext, data)
    fx = wrenches(model, f_ext)
    qdd_out = np.empty(model.nvt)
    tau_out = np.empty(model.nvt)
    st = aba_kernel(model._kmi, model._kmf, q, qd, tau_in, fx, qdd_out, w, mask, qdd_in, tau_out)
    return st, (qdd_out, tau_out)


def _fbid(model, data, w, q, qd, qdd_j, f_ext):
    if not model.floating_base:
        raise InputError("floating_base_inverse_dynamics needs a model loaded with floating_base=True")
    if qdd_j.shape[0] != model.nv - 6:
        raise InputError(f"qdd_joints has length {qdd_j.shape[0]}, expected {model.nv - 6}")
    qdd = np.concatenate([np.zeros(6), qdd_j])
    qdd_out, tau_out = hybrid_dynamics(model, q, qd, qdd, np.zeros(model.nv), [ROOT_JOINT], f_ext, data)
    return 0, (qdd_out[:6], tau_out[6:])


# user coordinates in (a mimic model's system is solved densely by _hybrid_dense)
_HYBRID = Route("hybrid dynamics", (("q", "q"), ("qd", "v"), ("qdd", "v"), ("tau", "v")), _hybrid,
                extras=("forward_joints", "f_ext"), tree=False).front
_FBID = Route("floating-base inverse dynamics", (("q", "q"), ("qd", "v"), ("qdd_joints", "x")), _fbid,
              extras=("f_ext",), tree=False).front


def hybrid_dynamics(model, q, qd, qdd, tau, forward_joints, f_ext=None, data=None):
    """Return (qdd, tau), both complete (nv each).

    ``tau`` is read on the joints named in ``forward_joints``; ``qdd`` on all the others (entries that
    are not read may hold anything, NaN included). With a floating base, name ``dn.ROOT_JOINT``
    ("root_joint") to make the base a forward-dynamics joint (then tau[:6] is the wrench applied to it).
    """
    return _HYBRID(model, data, q, qd, qdd, tau, forward_joints, f_ext)


def floating_base_inverse_dynamics(model, q, qd, qdd_joints, f_ext=None, data=None):
    """Featherstone §9.5 (Table 9.6): given the joint accelerations of a floating-base robot with no
    wrench on its base, return (base acceleration (6,) as [dv, domega] in the base frame, joint
    torques (nv - 6,))."""
    return _FBID(model, data, q, qd, qdd_joints, f_ext)


def _hybrid_dense(model, q, qd, qdd_in, tau_in, fd, f_ext, data):
    """§9.1 (Eqs. 9.1-9.4) on the independent coordinates, for models with mimic joints (whose H is
    G^T H G, §9.6): H_11 qdd_1 = tau_1 - C'_1 with C' = ID(q, qd, [0; qdd_2]), then
    tau_2 = H_21 qdd_1 + C'_2."""
    from .crba import mass_matrix
    from .rnea import inverse_dynamics

    if not np.all(np.isfinite(qdd_in)) or not np.all(np.isfinite(tau_in)):
        raise InputError("qdd and tau must be finite on the joints where they are read")
    Cp = inverse_dynamics(model, q, qd, qdd_in, f_ext=f_ext, data=data)
    H = mass_matrix(model, q, data)
    qdd = qdd_in.copy()
    tau = Cp.copy()
    if fd.any():
        H11 = H[np.ix_(fd, fd)]
        try:
            L = np.linalg.cholesky(H11)
        except np.linalg.LinAlgError:
            from ...errors import SingularMassMatrixError

            raise SingularMassMatrixError("hybrid dynamics needs to invert the mass matrix of the forward-dynamics "
                                          "joints, which is singular (a massless subtree)") from None
        x = np.linalg.solve(L.T, np.linalg.solve(L, tau_in[fd] - Cp[fd]))
        qdd[fd] = x
        tau = Cp + H[:, fd] @ x
        tau[fd] = tau_in[fd]
    return qdd, tau
