"""The kernels' status codes, built and read in one place.

A kernel returns 0 on success, else ``KIND * KIND_UNIT + ARG * ARG_UNIT + INDEX``: the kind of failure,
the argument at fault (ARG_NAMES) and an index (a coordinate, a body, a length up to INDEX_MAX).
``status`` builds one (compiled into the kernels, plain Python elsewhere), ``decode`` reads one back; the C
shims use _layout.h's DN_STATUS, written from these numbers by tools/gen_layout_header.py.
"""
from __future__ import annotations

from ._jit import njit

KIND_UNIT = 100000000
ARG_UNIT = 100000
INDEX_MAX = ARG_UNIT - 1   # a length beyond it is reported as INDEX_MAX

# kinds
BAD_LENGTH = 1   # an argument of the wrong length (INDEX: its length)
NOT_FINITE = 2   # an entry that is NaN or inf (INDEX: the entry)
SINGULAR = 3     # a pivot at or below the model's tolerance (INDEX: the body, or the dof)
BAD_QUAT = 4     # a free joint's quaternion too small to normalise (INDEX: its first coordinate)
OVERFLOW = 5     # finite inputs whose result is not finite

# arguments
ARG_NAMES = ("q", "qd", "qdd", "tau", "f_ext")
A_Q, A_QD, A_QDD, A_TAU, A_FEXT = 0, 1, 2, 3, 4


@njit(cache=True, inline="always", pure=True)
def status(kind, arg, index):
    """The status code of a failure of this kind, at argument arg, index index."""
    return kind * KIND_UNIT + arg * ARG_UNIT + index


@njit(cache=True, inline="always", pure=True)
def status_kind(st):
    """The kind of a status code."""
    return st // KIND_UNIT


@njit(cache=True, inline="always", pure=True)
def status_index(st):
    """The index of a status code."""
    return st % ARG_UNIT


OVERFLOW_STATUS = KIND_UNIT * OVERFLOW   # status(OVERFLOW, 0, 0), for Python code and numba globals alike


def decode(st) -> tuple[int, int, int]:
    """(kind, arg, index) of a status code."""
    kind, rest = divmod(int(st), KIND_UNIT)
    arg, index = divmod(rest, ARG_UNIT)
    return kind, arg, index
