"""The Python side of the contact functions (forward_dynamics.py, impact.py, soft.py): their common
argument checks, the error message of a kernel status, and the dense terms of models with mimic
joints (H = G^T H_t G, §9.6, on the reduced coordinates), which the tree kernels do not take."""
from __future__ import annotations

import numpy as np

from ...errors import InputError, RangeError
from ..._kernel_io import status, status_index, status_kind
from ..._kernel_io import A_Q, A_QD, SINGULAR
from .ncp import NO_SOLUTION


def _check_common(model, q, qd, contacts, name_qd="qd"):
    from ...dispatch import _length, check_model, vec
    from .args import pack

    check_model(model)
    if model.loops:
        raise InputError(f"model '{model.name}' has loop joints ({', '.join(model.loop_joints)}): contact dynamics "
                         "is implemented for trees (fixed or floating base, mimic joints) only")
    q = vec(q, "q")
    _length(model, q, "q", "q")
    qd = vec(qd, name_qd)
    _length(model, qd, name_qd, "v")
    for nm, x, arg in (("q", q, A_Q), (name_qd, qd, A_QD)):
        finite_or_raise(model, x, nm, arg)
    return q, qd, pack(model, contacts)


def finite_or_raise(model, x, name, arg):
    """InputError naming the first non-finite entry of x and its joint."""
    from ...dispatch import finite
    from ..._kernel_io import coordinate_owner

    if not finite(x):
        i = int(np.nonzero(~np.isfinite(x))[0][0])
        raise InputError(f"{name}[{i}] (joint '{coordinate_owner(model, arg, i, False)}') is not finite (NaN or inf)")


def _raise(model, st, what, names, arrays, f_ext=None):
    from ...dispatch import raise_status
    from ...layout import J_VI
    from ...packed import body_ints

    extras = (("f_ext", f_ext),) if f_ext else ()
    if st == NO_SOLUTION:  # also what inputs out of range lead to: the route names such an input (refuse)
        from ...dispatch import refuse
        refuse(model, what, RangeError(
            f"{what}: no contact forces satisfy the contact conditions here (with Coulomb friction the problem may "
            "have no solution, Painlevé's paradox, or one that the solver did not find): lower the friction "
            "coefficients or drop contacts", symptom="no contact forces satisfy the contact conditions (the solver "
            "found none)"), names, arrays, extras)
    if status_kind(st) == SINGULAR:
        k = status_index(st)
        vi = body_ints(model.mi, model.nb)[:, J_VI]
        st = status(SINGULAR, 0, int(np.searchsorted(vi, k, side="right") - 1))
    raise_status(model, st, False, what, names, arrays, extras)


def _dense_terms(model, q, qd, tau, packed, f_ext):
    """(A, b, v, qdd0, solve) by dense linear algebra on the reduced coordinates (mimic models)."""
    from ..tree.crba import mass_matrix
    from ..tree.jacobians import jacobian, jacobian_derivative
    from ..tree.ltdl import singular_mass_matrix
    from ..tree.rnea import inverse_dynamics

    H = mass_matrix(model, q)
    C = inverse_dynamics(model, q, qd, np.zeros(model.nv), f_ext=f_ext)
    k = packed.body.shape[0]
    T = np.empty((3 * k, model.nv))
    jb = np.empty(3 * k)
    for j, c in enumerate(packed.contacts):
        R = c.frame
        T[3 * j:3 * j + 3] = R.T @ jacobian(model, q, c.link, c.point)[:3]
        jb[3 * j:3 * j + 3] = R.T @ (jacobian_derivative(model, q, qd, c.link, c.point)[:3] @ qd)
    try:
        L = np.linalg.cholesky(H)
    except np.linalg.LinAlgError:
        raise singular_mass_matrix(model, H, "contact dynamics") from None

    def hsolve(x):
        return np.linalg.solve(L.T, np.linalg.solve(L, x))

    qdd0 = hsolve(tau - C)
    Y = np.linalg.solve(L, T.T)
    return Y.T @ Y, T @ qdd0 + jb, T @ qd, qdd0, lambda f: hsolve(T.T @ f)
