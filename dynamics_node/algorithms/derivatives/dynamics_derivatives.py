"""The public derivatives of the dynamics: inverse, forward and gravity, one state or a batch.

The inverse dynamics' derivatives come from the analytic RNEA derivatives (rnea_derivatives.py,
Carpentier & Mansard 2018); the forward dynamics' from them by implicit differentiation of
ID(q, qd, FD(q, qd, tau)) = tau (as Carpentier & Mansard do):

    dqdd/dq = -H^-1 dID/dq,   dqdd/dqd = -H^-1 dID/dqd,   dqdd/dtau = H^-1,   evaluated at qdd = FD(q, qd, tau).

Derivatives with respect to q are taken in the tangent space (nv columns): a perturbation dq of a
free joint (the floating base) integrates on SE(3), q ⊕ dq = M exp(dq), with dq = (linear, angular)
in the child (root) frame, as Pinocchio and Crocoddyl take them; every other joint adds dq to q
(see lie_group.integrate). Mimic joints: ID_user(q, qd, qdd) = G^T ID_tree(G q + off, G qd, G qdd), so
each derivative is G^T D G (Featherstone §9.6).
"""
from __future__ import annotations

import numpy as np

from ...dispatch import Route, check_model, to_tree, wrenches
from ...batch_errors import out_of_range, symptom_of
from ...errors import InputError, RangeError, SingularMassMatrixError
from ..._kernel_io import EMPTY, raise_status
from .aba_derivatives import aba_derivatives_kernel
from .c_fronts import (FD_EXTRA, G_EXTRA, ID_EXTRA, aba_derivatives_c, gravity_derivatives_c,
                            rnea_derivatives_c)
from .gravity_derivatives import gravity_derivatives_entry
from .rnea_derivatives import (NO_H, rnea_derivatives_batch_entry, rnea_derivatives_entry,
                               rnea_derivatives_kernel, scratch_size)


def _tree_derivatives(model, q, qd, qdd, fx):
    """(dtau_dq, dtau_dqd, H) of tree coordinates, or raises by the kernel's status."""
    n = model.nvt
    dq, dv, H, s = np.empty((n, n)), np.empty((n, n)), np.empty((n, n)), np.empty(scratch_size(model.nb, n))
    st = rnea_derivatives_kernel(model._kmi, model._kmf, q, qd, qdd, fx, dq, dv, H, s, 0)
    return st, (dq, dv, H)


def _user(model, D):
    return D if not model.has_mimic else model.G.T @ D @ model.G


def _id_derivatives(model, data, w, q, qd, qdd, f_ext):
    st, dq, dv = rnea_derivatives_entry(model._kmi, model._kmf, q, qd, qdd,
                                        EMPTY if f_ext is None else wrenches(model, f_ext), NO_H)
    if st:
        return st, None
    return 0, (_user(model, dq), _user(model, dv)) if model.has_mimic else (dq, dv)


def _gravity_derivatives(model, data, w, q):
    dq = np.empty((model.nvt, model.nvt))
    st = gravity_derivatives_entry(model._kmi, model._kmf, q, dq)   # gravity_derivatives.py
    return st, (None if st else _user(model, dq))


def _fd_derivatives(model, data, w, q, qd, tau, f_ext):
    if not model.has_mimic:   # one compiled call: RNEA derivatives, qdd and H^-1 by L^T D L (aba_derivatives.py)
        n = model.nvt
        out = (np.empty((n, n)), np.empty((n, n)), np.empty((n, n)))
        st = aba_derivatives_kernel(model._kmi, model._kmf, q, qd, tau, wrenches(model, f_ext), np.empty(n), *out,
                                    np.empty((n, n)), np.empty(n), np.empty(scratch_size(model.nb, n)))
        return st, (None if st else out)
    from ..tree.aba import forward_dynamics

    qdd = forward_dynamics(model, q, qd, tau, f_ext)   # refuses a singular H by name
    qt, qdt, qddt = (to_tree(model, q, "q"), to_tree(model, qd, "v"), to_tree(model, qdd, "v")) \
        if model.has_mimic else (q, qd, qdd)
    st, (dq, dv, H) = _tree_derivatives(model, qt, qdt, qddt, wrenches(model, f_ext))
    if st:
        return st, None
    Hinv = _spd_inverse(model, _user(model, H))
    return 0, (-(Hinv @ _user(model, dq)), -(Hinv @ _user(model, dv)), Hinv)


def _spd_inverse(model, H):
    """H^-1 by Cholesky (H is symmetric positive definite whenever forward dynamics succeeded)."""
    try:
        L = np.linalg.cholesky(H)
    except np.linalg.LinAlgError:
        from ...errors import SingularMassMatrixError

        raise SingularMassMatrixError("forward dynamics derivatives need H^-1, and H is not positive "
                                      "definite at this configuration") from None
    Li = np.linalg.solve(L, np.eye(H.shape[0]))
    return Li.T @ Li


_Q, _QD, _QDD, _TAU = ("q", "q"), ("qd", "v"), ("qdd", "v"), ("tau", "v")
# the fast fronts (C, dispatch.Route with nout): the controllers' call, no f_ext, a model without mimic joints
_ID_D = Route("inverse dynamics derivatives", (_Q, _QD, _QDD), _id_derivatives, extras=("f_ext",), fast=(None,),
              shim=rnea_derivatives_c, nout=2, extra=ID_EXTRA, mimic=True).front
_G_D = Route("gravity derivatives", (_Q,), _gravity_derivatives, shim=gravity_derivatives_c, nout=1,
             extra=G_EXTRA, mimic=True).front
_FD_D = Route("forward dynamics derivatives", (_Q, _QD, _TAU), _fd_derivatives, extras=("f_ext",), tree=False,
              fast=(None,), shim=aba_derivatives_c, nout=3, extra=FD_EXTRA, mimic=True).front


def inverse_dynamics_derivatives(model, q, qd, qdd, f_ext=None):
    """(dtau_dq, dtau_dqd), each nv x nv, of tau = ID(q, qd, qdd, f_ext) (dtau/dqdd is the mass matrix
    H, dn.mass_matrix). Carpentier & Mansard's analytic RNEA derivatives (RSS 2018).

    dtau_dq is taken in the tangent space: column j is d tau / d dq_j with q ⊕ dq (dn.integrate); for a
    floating base the first 6 columns are the root's (linear, angular) velocity directions in the root
    frame, as Pinocchio's computeRNEADerivatives. f_ext: {link: (fx fy fz tx ty tz)} in the link frame
    (it moves with the link). The model's armature and friction are included (friction's d/dqd on the
    diagonal of dtau_dqd)."""
    return _ID_D(model, None, q, qd, qdd, f_ext)


def gravity_derivatives(model, q):
    """dg_dq (nv x nv): the tangent-space derivative of dn.gravity(model, q) (Pinocchio's
    computeGeneralizedGravityDerivatives)."""
    return _G_D(model, None, q)


def forward_dynamics_derivatives(model, q, qd, tau, f_ext=None):
    """(dqdd_dq, dqdd_dqd, dqdd_dtau), each nv x nv, of qdd = FD(q, qd, tau, f_ext): -H^-1 dID/dq,
    -H^-1 dID/dqd and H^-1 at qdd = FD (Pinocchio's computeABADerivatives). dqdd_dq in the tangent space
    (see inverse_dynamics_derivatives). Raises SingularMassMatrixError where forward dynamics does."""
    return _FD_D(model, None, q, qd, tau, f_ext)


# ---------------------------------------------------------------------------------------------
# batch


def batch_rows(names, arrays):
    """InputError unless every array has as many rows as the first."""
    if any(A.shape[0] != arrays[0].shape[0] for A in arrays):
        raise InputError(f"{', '.join(names)} must have the same number of rows, got "
                         f"{', '.join(str(A.shape[0]) for A in arrays)}")


def each_state(model, what, names, arrays, fn):
    """[fn(row k of each array) for every k]: the single-state function per state, whose refusal of a
    finite state (an overflow, H singular) is re-raised naming the entry out of range as 'QD[3, 2]' (batch_errors)."""
    batch_rows(names, arrays)
    out = []
    for k in range(arrays[0].shape[0]):
        try:
            out.append(fn(*(A[k] for A in arrays)))
        except (RangeError, SingularMassMatrixError) as e:  # the entry of state k out of range, if any
            blamed = out_of_range(model, what, f"{symptom_of(e)} at state {k}", names, arrays, row=k)
            raise blamed or type(e)(f"{what}: state {k}: {e}") from None
        except InputError as e:
            raise InputError(f"{what}: state {k}: {e}") from None
    return out


def _id_derivatives_batch(model, data, w, Q, QD, QDD):
    """Tree coordinates in (the route maps mimic models' rows); every state in one compiled loop."""
    batch_rows(["Q", "QD", "QDD"], [Q, QD, QDD])
    N, n = Q.shape[0], model.nvt
    DQ, DV = np.empty((N, n, n)), np.empty((N, n, n))
    st, k = rnea_derivatives_batch_entry(model._kmi, model._kmf, Q, QD, QDD, DQ, DV)
    if st:   # inputs are finite (the route checked them): a bad quaternion of state k
        try:
            raise_status(model, st, tree=model.has_mimic, what="batch inverse dynamics derivatives")
        except InputError as e:
            raise InputError(f"{e} (state {k}: Q[{k}])") from None
    if model.has_mimic:
        G = model.G
        DQ, DV = G.T @ DQ @ G, G.T @ DV @ G
    return 0, (DQ, DV)


_ID_D_BATCH = Route("batch inverse dynamics derivatives", (("Q", "Q"), ("QD", "V"), ("QDD", "V")),
                    _id_derivatives_batch).front


def inverse_dynamics_derivatives_batch(model, Q, QD, QDD):
    """inverse_dynamics_derivatives of N states (rows of N x nq, N x nv, N x nv arrays): (DTAU_DQ,
    DTAU_DQD), each N x nv x nv. A refused state is named as the sample and field: 'QD[3, 2]'."""
    check_model(model)
    return _ID_D_BATCH(model, None, Q, QD, QDD)
