"""The expanded parent array λ' of Featherstone §6.5: every degree of freedom an entry whose parent is
the previous degree of freedom of the same joint, or the last one of the parent joint. Plain Python
over the packed model (no kernel): the model computes it once when it is built (Model's loop data),
the factorisations (ltdl.py) use it.
"""
from __future__ import annotations

import numpy as np

from .layout import BODY_I, HEADER_I, J_NV, J_PARENT


def expanded_parent_array(parents, dofs):
    """λ' of §6.5 in the book's 1-based convention (0 = the base).

    >>> expanded_parent_array((0, 1, 1, 2, 2, 3), (1, 3, 1, 1, 1, 1))
    (0, 1, 2, 3, 1, 4, 4, 5)
    """
    last = [0] * (len(parents) + 1)  # last expanded index of body i (1-based), 0 for the base
    out = []
    for i, (p, n) in enumerate(zip(parents, dofs), start=1):
        prev = last[p]
        for _ in range(n):
            out.append(prev)
            prev = len(out)
        last[i] = prev
    return tuple(out)


def dof_parents(model) -> np.ndarray:
    """0-based λ' over the model's tree degrees of freedom (-1 = base)."""
    J = model.mi[HEADER_I:].reshape(model.nb, BODY_I)
    lam = expanded_parent_array([int(p) + 1 for p in J[:, J_PARENT]], [int(n) for n in J[:, J_NV]])
    return np.array(lam, dtype=np.int64) - 1
