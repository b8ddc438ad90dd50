"""What every algorithm shares: the kernels' status codes, input checks
done inside the kernels (one pass that tests length and finiteness as it reads, so validation costs next
to nothing), and the Python side of arguments (coercion, mimic mapping, error messages).

The packed model is read by name through packed.py's accessors (``parent(mi, i)``, ``first_dof``, ...).

Status codes: a kernel returns 0 on success, else ``KIND * KIND_UNIT + ARG * ARG_UNIT + INDEX``: the kind
of failure, the argument at fault (ARG_NAMES) and an index (a coordinate, a body, a length up to
INDEX_MAX). ``status`` builds one (compiled into the kernels, plain Python elsewhere), ``decode`` reads one
back; the C shims use _layout.h's DN_STATUS, written from these numbers by tools/gen_layout_header.py.
"""
from __future__ import annotations

import numpy as np
from ._jit import carray, njit, types

from .errors import InputError, SingularMassMatrixError, clip, clip_names
from .joints import DBL_MIN, FREE, quat_scale
from .packed import body_i, dof_f, first_q, joint_type
from .layout import (HEADER_I, H_NB, H_NQT, H_NVT, H_NVU, MIMIC_HEAD,
                      MIMIC_Q, MIMIC_V, V_U, V_UU,
                      V_U_N, WORK_BODY, WORK_DOF, WORK_EXTRA, W_A, W_A_N, W_C, W_C_N, W_DINV, W_DINV_N, W_E,
                      W_E_N, W_F, W_F_N, W_IA, W_IA_N, W_PA, W_PA_N, W_PW, W_PW_N, W_R, W_RW, W_RW_N, W_R_N,
                      W_V, W_V_N)
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the model module does not import the kernels' plumbing
    from .model import Model

# explicit kernel signatures: compiled once (and cached), and anything else (a list, float32, a
# strided view) is refused with TypeError, upon which the wrapper converts it (the slow path)
I1 = types.int64[::1]
F1 = types.float64[::1]
F2 = types.float64[:, ::1]

# Floating-point freedoms of the hot kernels: contraction into fused multiply-adds, reassociation,
# reciprocals and the sign of zero; never 'nnan'/'ninf' (the kernels test inputs for finiteness,
# which those would let the compiler delete). Callees without their own flags inherit these.
FASTMATH = {"contract", "reassoc", "nsz", "arcp"}  # a set: what numba accepts

# C callbacks (numba cfunc) called through dynamics_node/_fastcall.c: pointers and lengths
P_I = types.CPointer(types.int64)
P_F = types.CPointer(types.float64)
SIG1 = types.int64(P_I, P_F, P_F, types.int64, P_F, P_F, types.int64)
SIG3 = types.int64(P_I, P_F, P_F, types.int64, P_F, types.int64, P_F, types.int64, P_F, P_F, types.int64)
# _fastcall.invoke3s: three vectors and one float after the third
SIG3S = types.int64(P_I, P_F, P_F, types.int64, P_F, types.int64, P_F, types.int64, types.float64, P_F, P_F,
                    types.int64)



# ---- status codes: built and read in one place ----------------------------------------

KIND_UNIT = 100000000
ARG_UNIT = 100000
INDEX_MAX = ARG_UNIT - 1   # a length beyond it is reported as INDEX_MAX

# kinds
BAD_LENGTH = 1   # an argument of the wrong length (INDEX: its length)
NOT_FINITE = 2   # an entry that is NaN or inf (INDEX: the entry)
SINGULAR = 3     # a pivot at or below the model's tolerance (INDEX: the body, or the dof)
BAD_QUAT = 4     # a free joint's quaternion too small to normalise (INDEX: its first coordinate)
OVERFLOW = 5     # finite inputs whose result is not finite
# kinds of an algorithm's own outcome, which its caller handles (raise_status has no message for them); each
# code is status(kind, 0, 0), named in the module that returns it
RANK_LOST_KIND = 6    # tree/operational_space.RANK_LOST: the selected rows of J H^-1 J^T are singular
NO_SOLUTION_KIND = 7  # contact/ncp.NO_SOLUTION: the contact solver found no forces
FIXED_LINK_KIND = 8   # contact/forward_dynamics.FIXED_LINK: a contact on a link welded to the fixed base
SCRATCH_KIND = 9      # contact/forward_dynamics.SCRATCH, sim/step.SCRATCH: scratch arrays too small
BAD_ARG_KIND = 10     # sim/select.BAD_ARG: a step's arguments or environment not what they must be

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


# status codes of no argument and no index, as module constants (numba reads them as compile-time constants);
# status.py_func is status() run as Python, also once numba is loaded
OVERFLOW_STATUS = status.py_func(OVERFLOW, 0, 0)


def decode(st) -> tuple[int, int, int]:
    """(kind, arg, index) of a status code."""
    kind, rest = divmod(int(st), KIND_UNIT)
    arg, index = divmod(rest, ARG_UNIT)
    return kind, arg, index


@njit(cache=True, inline="always")
def model_from_pointers(mip, mfp):
    """(mi, mf, nvt) as arrays over the packed model behind two C pointers (header first), mf with its mimic
    section if it has one."""
    hdr = carray(mip, (HEADER_I,))
    nb = hdr[H_NB]
    nvt = hdr[H_NVT]
    nf = dof_f(nb, nvt)
    if hdr[H_NVU] != nvt:   # mimic joints: their section follows (layout.MODEL_MIMIC_*)
        nf += MIMIC_HEAD + MIMIC_Q * hdr[H_NQT] + MIMIC_V * nvt
    return carray(mip, (body_i(nb),)), carray(mfp, (nf,)), nvt


@njit(cache=True, inline="always")
def new_work(mi):
    """The work array of a call, allocated in compiled code (cheaper than a numpy call from Python,
    and private to the call, so concurrent calls never share one)."""
    return np.empty(WORK_BODY * mi[H_NB] + WORK_DOF * mi[H_NVT] + WORK_EXTRA)


@njit(cache=True, inline="always")
def check(x, n, arg):
    """0 if x has length n and finite entries, else a status code naming arg and index."""
    if x.shape[0] != n:
        return status(BAD_LENGTH, arg, min(x.shape[0], INDEX_MAX))
    for k in range(n):
        if not (x[k] - x[k] == 0.0):
            return status(NOT_FINITE, arg, k)
    return 0


@njit(cache=True, inline="always")
def check_q(q, mi):
    """check(q) plus: every free joint's quaternion must be usable, i.e. not zero or subnormal (it is
    normalised on use, by joints.unit_quaternion, at any finite magnitude above that)."""
    st = check(q, mi[H_NQT], A_Q)
    if st != 0:
        return st
    for i in range(mi[H_NB]):
        if joint_type(mi, i) == FREE:
            k = first_q(mi, i) + 3
            if quat_scale(q, k) < DBL_MIN:
                return status(BAD_QUAT, A_Q, k)
    return 0


@njit(cache=True, inline="always")
def check_q_qd(q, qd, mi):
    """check_q(q), then qd: length nvt and finite."""
    st = check_q(q, mi)
    if st == 0:
        st = check(qd, mi[H_NVT], A_QD)
    return st


@njit(cache=True, inline="always")
def check_state(q, qd, qdd, mi):
    """check_q_qd(q, qd), then qdd: length nvt and finite."""
    st = check_q_qd(q, qd, mi)
    if st == 0:
        st = check(qdd, mi[H_NVT], A_QDD)
    return st


@njit(cache=True, inline="always")
def work_views(w, nb, nvt):
    """The per-body fields of the work array (layout.WORK_PER_BODY) as nb x size views, the per-dof ones
    (WORK_PER_DOF) as nvt x size views, and the scratch: (E, r, v, a, f, c, IA, pA, Rw, pw, Dinv, U, u, d,
    tmp); d (no longer used by any kernel) is empty."""
    E = w[W_E * nb:(W_E + W_E_N) * nb].reshape((nb, W_E_N))
    r = w[W_R * nb:(W_R + W_R_N) * nb].reshape((nb, W_R_N))
    v = w[W_V * nb:(W_V + W_V_N) * nb].reshape((nb, W_V_N))
    a = w[W_A * nb:(W_A + W_A_N) * nb].reshape((nb, W_A_N))
    f = w[W_F * nb:(W_F + W_F_N) * nb].reshape((nb, W_F_N))
    c = w[W_C * nb:(W_C + W_C_N) * nb].reshape((nb, W_C_N))
    IA = w[W_IA * nb:(W_IA + W_IA_N) * nb].reshape((nb, W_IA_N))
    pA = w[W_PA * nb:(W_PA + W_PA_N) * nb].reshape((nb, W_PA_N))
    Rw = w[W_RW * nb:(W_RW + W_RW_N) * nb].reshape((nb, W_RW_N))
    pw = w[W_PW * nb:(W_PW + W_PW_N) * nb].reshape((nb, W_PW_N))
    Dinv = w[W_DINV * nb:(W_DINV + W_DINV_N) * nb].reshape((nb, W_DINV_N))
    o = WORK_BODY * nb
    U = w[o + V_U * nvt:o + V_U * nvt + V_U_N * max(nvt, 1)].reshape((max(nvt, 1), V_U_N))  # 1 row if nvt = 0
    u = w[o + V_UU * nvt:o + V_UU * nvt + nvt]
    d = w[0:0]
    tmp = w[o + WORK_DOF * nvt:o + WORK_DOF * nvt + WORK_EXTRA]
    return E, r, v, a, f, c, IA, pA, Rw, pw, Dinv, U, u, d, tmp


# ---------------------------------------------------------------------------------------------
# Python side


def as_vec(x, name: str) -> np.ndarray:
    """A contiguous float64 1-D array from any sequence (the slow path; the fast path hands numpy
    float64 arrays straight to the kernel)."""
    try:
        a = np.ascontiguousarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a sequence of numbers, got {type(x).__name__}") from None
    if a.ndim != 1:
        a = a.reshape(-1) if a.size == a.shape[0] or a.ndim == 0 else a
        if a.ndim != 1:
            raise InputError(f"{name} must be 1-D, got shape {np.shape(x)}")
    return a


def fast_vec(x, name):
    if type(x) is np.ndarray and x.dtype == np.float64 and x.ndim == 1 and x.flags.c_contiguous:
        return x
    return as_vec(x, name)


def coordinate_owner(model: Model, arg: int, index: int, tree: bool) -> str:
    """Name of the joint that owns coordinate ``index`` of argument ``arg``."""
    if tree:
        src = model.q_src if arg == A_Q else model.v_src
        if 0 <= index < len(src):
            index = int(src[index])
    slices = model._q_slices if arg == A_Q else model._v_slices
    for name, sl in slices.items():
        if sl.start <= index < sl.stop:
            return name
    return "?"


def raise_status(model: Model, st: int, tree: bool = False, what: str = "") -> None:
    kind, arg, index = decode(st)
    name = ARG_NAMES[arg] if arg < len(ARG_NAMES) else f"argument {arg}"
    if kind == BAD_LENGTH:
        if arg == A_FEXT:
            n = 6 * model.nb
        elif tree:
            n = model.nqt if arg == A_Q else model.nvt
        else:
            n = model.nq if arg == A_Q else model.nv
        raise InputError(f"{name} has length {index}, expected {n} (joint order: "
                         f"{clip_names(model.joint_names, quote=False)})")
    if kind == NOT_FINITE:
        owner = coordinate_owner(model, arg, index, tree)
        raise InputError(f"{name}[{index}] (joint '{owner}') is not finite (NaN or inf)")
    if kind == BAD_QUAT:
        owner = coordinate_owner(model, arg, index, tree)
        raise InputError(f"q[{index}:{index + 4}] (joint '{owner}') is zero (or below 2.2e-308 in every "
                         "component): a rotation needs a non-zero quaternion, which is normalised")
    if kind == SINGULAR:
        raise SingularMassMatrixError(
            f"{what or 'this computation'} needs to invert the mass matrix, which is singular at "
            f"{model.body_label[index]}: that body and the links it carries have no inertia about its joint axis")
    raise InputError(f"invalid input (status {st})")


def to_tree_q(model: Model, q):
    q = fast_vec(q, "q")
    if q.shape[0] != model.nq:
        raise InputError(f"q has length {q.shape[0]}, expected {model.nq} (joint order: "
                         f"{clip_names(model.joint_names, quote=False)})")
    return q[model.q_src] * model.q_mul + model.q_off


def to_tree_v(model: Model, x, name: str, arg: int):
    x = fast_vec(x, name)
    if x.shape[0] != model.nv:
        raise InputError(f"{name} has length {x.shape[0]}, expected {model.nv} (joint order: "
                         f"{clip_names(model.joint_names, quote=False)})")
    return x[model.v_src] * model.v_mul


def fext_array(model: Model, f_ext) -> np.ndarray:
    """{link: (fx fy fz tx ty tz) in the link frame about its origin} -> per-body spatial forces
    (angular-first, body frame) as a flat array; empty when there are none."""
    if not f_ext:
        return EMPTY
    out = np.zeros(6 * model.nb)
    for link, w in f_ext.items():
        k = model.link_index(link)
        w = np.asarray(w, dtype=float).reshape(-1)
        if w.shape != (6,):
            raise InputError(f"f_ext[{clip(link)!r}] must have 6 numbers (fx fy fz tx ty tz), got {w.size}")
        if not np.all(np.isfinite(w)):
            raise InputError(f"f_ext[{clip(link)!r}] is not finite (NaN or inf)")
        b = int(model.link_body[k])
        if b < 0:
            continue  # acts on the fixed base: no effect on joint torques
        R = model.link_R[9 * k:9 * k + 9].reshape(3, 3)
        p = model.link_p[3 * k:3 * k + 3]
        f = R @ w[:3]
        n = R @ w[3:] + np.cross(p, f)
        out[6 * b:6 * b + 3] += n
        out[6 * b + 3:6 * b + 6] += f
    return out


EMPTY = np.zeros(0)

EMPTY_I = np.zeros(0, dtype=np.int64)

