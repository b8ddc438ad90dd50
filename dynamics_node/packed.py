"""The packed model (layout.py: ``mi``, ``mf``) read by name: the small accessors every kernel uses instead of
offset sums, as spatial_v2 writes ``parent(i)``. Each is inlined where it is called (numba
``inline="always"``), so a kernel reading ``parent(mi, i)`` compiles to the machine code of
``mi[HEADER_I + BODY_I * i + J_PARENT]``; they run as plain Python before numba is loaded (``pure``).

    body i's ints:    parent(mi, i) = λ(i), joint_type, first_q, first_dof, dof_count, subtree_end
    where in mf:      body_f(i) + B_*  (body i's floats),  dof_f(nb, k) + D_*  (dof k's floats)

The Python side (the packer in model.py, the loader's checks, the identification) reads and writes whole
blocks instead, as numpy views with one row per body or dof: ``body_ints(mi, nb)[i, J_*]``,
``body_floats(mf, nb)[i, B_*]``, ``dof_floats(mf, nb, nvt)[k, D_*]``; ``sizes(nb, nvt)`` are the lengths of
mi and mf (mf's without a mimic section, which starts there). These are plain functions, never called
by a kernel. Every offset sum over the blocks' sizes is in this module.
"""
from __future__ import annotations

from ._jit import njit
from .layout import BODY_F, BODY_I, DOF_F, HEADER_F, HEADER_I, J_DEND, J_NV, J_PARENT, J_QI, J_TYPE, J_VI


@njit(cache=True, inline="always", pure=True)
def body_i(i):
    """Where body i's ints start in mi (its J_* fields follow)."""
    return HEADER_I + BODY_I * i


@njit(cache=True, inline="always", pure=True)
def parent(mi, i):
    """λ(i), the parent body of body i; -1 for the fixed base (Featherstone Table 4.3)."""
    return mi[HEADER_I + BODY_I * i + J_PARENT]


@njit(cache=True, inline="always", pure=True)
def joint_type(mi, i):
    """The kernel type of joint i (joints.REVOLUTE, PRISMATIC or FREE)."""
    return mi[HEADER_I + BODY_I * i + J_TYPE]


@njit(cache=True, inline="always", pure=True)
def first_q(mi, i):
    """The first position coordinate of joint i in the tree's q."""
    return mi[HEADER_I + BODY_I * i + J_QI]


@njit(cache=True, inline="always", pure=True)
def first_dof(mi, i):
    """The first degree of freedom (velocity coordinate) of joint i in the tree's qd."""
    return mi[HEADER_I + BODY_I * i + J_VI]


@njit(cache=True, inline="always", pure=True)
def dof_count(mi, i):
    """The degrees of freedom of joint i."""
    return mi[HEADER_I + BODY_I * i + J_NV]


@njit(cache=True, inline="always", pure=True)
def subtree_end(mi, i):
    """The end (exclusive) of the dofs of body i's subtree: they are first_dof(mi, i) .. subtree_end(mi, i) - 1."""
    return mi[HEADER_I + BODY_I * i + J_DEND]


@njit(cache=True, inline="always", pure=True)
def body_f(i):
    """Where body i's floats start in mf (its B_* fields follow)."""
    return HEADER_F + BODY_F * i


@njit(cache=True, inline="always", pure=True)
def dof_f(nb, k):
    """Where dof k's floats start in mf (its D_* fields follow) for a model of nb bodies; dof_f(nb, 0) is where
    the dofs' section starts."""
    return HEADER_F + BODY_F * nb + DOF_F * k


def sizes(nb, nvt):
    """(len(mi), where mf's mimic section starts: len(mf) without one) of a model of nb bodies, nvt dofs."""
    return HEADER_I + BODY_I * nb, HEADER_F + BODY_F * nb + DOF_F * nvt


def body_ints(mi, nb):
    """The bodies' ints of mi as an (nb, BODY_I) view: row i is body i's J_* fields."""
    return mi[HEADER_I:HEADER_I + BODY_I * nb].reshape(nb, BODY_I)


def body_floats(mf, nb):
    """The bodies' floats of mf as an (nb, BODY_F) view: row i is body i's B_* fields."""
    return mf[HEADER_F:HEADER_F + BODY_F * nb].reshape(nb, BODY_F)


def dof_floats(mf, nb, nvt):
    """The dofs' floats of mf as an (nvt, DOF_F) view: row k is dof k's D_* fields."""
    d0 = HEADER_F + BODY_F * nb
    return mf[d0:d0 + DOF_F * nvt].reshape(nvt, DOF_F)
