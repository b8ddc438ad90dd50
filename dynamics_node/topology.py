"""The expanded parent array λ' of Featherstone §6.5: every degree of freedom an entry whose parent is
the previous degree of freedom of the same joint, or the last one of the nearest ancestor joint that has
degrees of freedom. Written once, ``expanded_parents`` over the packed model: compiled into the kernels
that factor H (the derivatives, the operational-space inertia, the contact dynamics) and run as plain
Python when the model is built (Model's loop data) and by the factorisations (ltdl.py).
"""
from __future__ import annotations

import numpy as np

from ._jit import njit
from .layout import H_NB, J_NV, J_PARENT, J_VI
from .packed import body_ints, dof_count, first_dof, parent, sizes


@njit(cache=True, inline="always", pure=True)
def expanded_parents(mi, lam):
    """lam[k] = λ'(k) over the tree dofs, 0-based, -1 for the base (module docstring)."""
    for i in range(mi[H_NB]):
        vi = first_dof(mi, i)
        p = parent(mi, i)
        while p >= 0 and dof_count(mi, p) == 0:
            p = parent(mi, p)
        prev = -1 if p < 0 else first_dof(mi, p) + dof_count(mi, p) - 1
        for k in range(vi, vi + dof_count(mi, i)):
            lam[k] = prev
            prev = k


def expanded_parent_array(parents, dofs):
    """λ' of §6.5 in the book's 1-based convention (0 = the base), from the parent of each body
    (1-based, 0 = the base) and its joint's degrees of freedom.

    >>> expanded_parent_array((0, 1, 1, 2, 2, 3), (1, 3, 1, 1, 1, 1))
    (0, 1, 2, 3, 1, 4, 4, 5)
    """
    nb = len(parents)
    mi = np.zeros(sizes(nb, 0)[0], dtype=np.int64)
    mi[H_NB] = nb
    J = body_ints(mi, nb)
    J[:, J_PARENT] = np.asarray(parents, dtype=np.int64) - 1
    J[:, J_NV] = dofs
    J[:, J_VI] = np.concatenate(([0], np.cumsum(dofs)[:-1])) if nb else []
    lam = np.empty(int(np.sum(dofs)), dtype=np.int64)
    expanded_parents(mi, lam)
    return tuple(int(x) + 1 for x in lam)


def dof_parents(model) -> np.ndarray:
    """0-based λ' over the model's tree degrees of freedom (-1 = base)."""
    lam = np.empty(model.nvt, dtype=np.int64)
    expanded_parents(model.mi, lam)
    return lam
