"""The per-loop-joint constants of a closed-loop model (Featherstone §4.2, Table 4.3: N_L, p(k),
s(k), jtype(k), X_P(l), X_S(l)), packed once when the Model is built (``model.loop_data``).

Everything is in the book's convention: spatial vectors angular first, a joint frame is the local-z
frame of Table 4.1 (the URDF joint frame turned by the loop joint's ``R_align``), and a transform is
the plx(E, r) pair of Table A.3 (E: body coordinates -> joint-frame coordinates, r: the joint-frame
origin in body coordinates).  The constraint-force subspace T_k of Table 4.1 is, in those joint
coordinates, a selection of unit vectors: column c of T_k is unit vector ``dir[c]`` (angular-first
index 0..5), so T_k^T m = m[dir].  One exception, the helical joint of pitch h (Table 4.1): its
column with dir 5 is (e6 - h e3) / sqrt(1 + h^2), so T_k^T m = (m[5] - h m[2]) / sqrt(1 + h^2) there;
every other type has h = 0 (constraints.t_dot).  The columns keep the order of the parser's ``LoopJoint.T``, which
is the row order of K, k and delta at the API.

The kernels read two flat arrays, named by the constants below:

``li`` (int64) = [N_L, n^c, offset of λ', then per loop LJ_STRIDE ints, then λ' (nvt ints)]
    per loop: predecessor body, successor body (-1: the fixed base), type code, n_k^c, first row of
    the loop in K, dir (6 slots, n_k^c used)
    λ': the expanded parent array of the tree's degrees of freedom (§6.5, Table 6.4)
``lf`` (float64) = [the model's singular-pivot tolerance, then per loop LF_STRIDE floats:
    E_P (9, row-major), r_P (3), E_S (9), r_S (3), pitch h (helical; 0 for the other types)]
    the predecessor / successor joint frame on its body (X_P(l) and X_S(l) of §4.2 composed with
    the link's place on its body)
"""
from __future__ import annotations

import math

import numpy as np

from ._jit import njit
from .errors import ModelError
from .layout import H_NB, J_NV, J_PARENT, J_VI
from .packed import body_ints

# li header
LI_NL = 0
LI_NC = 1
LI_LAMBDA = 2
LI_HEADER = 3
# per loop, in li
LJ_PRED = 0
LJ_SUCC = 1
LJ_TYPE = 2
LJ_NC = 3
LJ_ROW = 4
LJ_DIR = 5
LJ_STRIDE = LJ_DIR + 6
# lf header
LF_TOL = 0
LF_HEADER = 1
# per loop, in lf
LF_EP = 0
LF_RP = 9
LF_ES = 12
LF_RS = 21
LF_PITCH = 24
LF_STRIDE = 25

#: loop joint type -> code of Table 8.1's column in the kernels
TYPE_CODE = {"fixed": 0, "revolute": 1, "continuous": 1, "prismatic": 2, "cylindrical": 3,
             "spherical": 4, "planar": 5, "helical": 6}


@njit(cache=True, inline="always")
def t_dot(m, k, h):
    """Column k (dir) of T_k dotted with the 6-vector m (joint coordinates, angular first): m[k], but for
    k = 5 the helical screw direction (e6 - h e3) / sqrt(1 + h^2) of Table 4.1 (h = 0: m[5])."""
    if k == 5 and h != 0.0:
        return (m[5] - h * m[2]) / math.sqrt(1.0 + h * h)
    return m[k]


def _ro(a):
    a.setflags(write=False)
    return a


class LoopData:
    """Immutable packed loop constants of one model (see the module docstring).

    names: loop-joint names (file order); n_loops, n_c: N_L and n^c (Eq. 8.1); rows: per loop the
    slice of its rows in K; li, lf: read-only views of the kernels' arrays; out_size: floats the
    forward-dynamics kernel writes (forward.out_size).  The kernels get private writable copies
    (numba takes read-only arrays through a slow path): _kli, _klf, and _kmi, _kmf = the model's
    packed arrays with li / lf appended (one pointer pair for the C callback).  Nothing writes them.
    qdd_at: where qdd starts in the forward kernel's output.  clusters: the minimal loop clusters
    and their rows and columns of K (clusters.ClusterData, Featherstone §8.9)."""

    __slots__ = ("names", "n_loops", "n_c", "rows", "li", "lf", "_kli", "_klf", "_kmi", "_kmf", "out_size",
                 "qdd_at", "clusters", "_frozen")

    def __init__(self, names, rows, li, lf, kmi, kmf, out_size, clusters=None):
        object.__setattr__(self, "_frozen", False)
        self.names = tuple(names)
        self.n_loops = len(self.names)
        self.rows = tuple(rows)
        self.n_c = int(li[LI_NC])
        self._kli, self._klf, self._kmi, self._kmf = li, lf, kmi, kmf
        self.li, self.lf = _ro(li.view()), _ro(lf.view())
        self.out_size = int(out_size)
        nvt = len(li) - int(li[LI_LAMBDA])  # λ' closes li
        self.qdd_at = nvt * nvt  # in the forward kernel's output qdd follows H (forward.out_views)
        self.clusters = clusters  # the minimal loop clusters (clusters.ClusterData, §8.9)
        self._frozen = True

    def __setattr__(self, key, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(f"LoopData is immutable: cannot set '{key}'")
        object.__setattr__(self, key, value)

    def __repr__(self):
        return f"<LoopData {self.n_loops} loop joint(s), n^c = {self.n_c}>"


def constrained_directions(lj) -> np.ndarray:
    """dir of loop joint ``lj``: the angular-first index (in its local-z joint frame) of each column
    of lj.T (the parser's linear-first T in the URDF joint frame); a helical joint's screw column
    (e_z linear - h e_z angular) / sqrt(1 + h^2) is dir 5 (the module docstring)."""
    Ra = np.asarray(lj.R_align)
    T = np.asarray(lj.T)
    local = np.vstack([Ra.T @ T[:3], Ra.T @ T[3:]])  # linear first, local-z frame: unit vectors
    h = float(getattr(lj, "pitch", 0.0))
    if h:
        screw = np.array([0.0, 0.0, 1.0, 0.0, 0.0, -h]) / np.hypot(1.0, h)
        for c in range(local.shape[1]):
            if np.allclose(local[:, c], screw, atol=1e-12):
                local[:, c] = np.eye(6)[2]  # dir 5 below, read with the pitch by the kernels
    out = []
    for c in range(local.shape[1]):
        i = int(np.argmax(np.abs(local[:, c])))
        if abs(local[i, c] - 1.0) > 1e-12:
            raise ModelError(f"loop joint '{lj.name}': T is not a selection of joint-frame axes")
        out.append((i + 3) % 6)  # linear index i -> angular-first index
    return np.array(out, dtype=np.int64)


def pack(model, lambda_dof) -> LoopData | None:
    """LoopData of ``model`` (None without loop joints); ``lambda_dof`` is λ' over the tree's
    degrees of freedom (ltdl.dof_parents).  Called once from Model's constructor."""
    loops = tuple(model.loops)
    if not loops:
        return None
    nl = len(loops)
    nvt = model.nvt
    li = np.zeros(LI_HEADER + LJ_STRIDE * nl + nvt, dtype=np.int64)
    lf = np.zeros(LF_HEADER + LF_STRIDE * nl)
    lf[LF_TOL] = model.singular_tol
    rows = []
    m = 0
    for l, lj in enumerate(loops):
        o = LI_HEADER + LJ_STRIDE * l
        dirs = constrained_directions(lj)
        li[o + LJ_TYPE] = TYPE_CODE[lj.type]
        li[o + LJ_NC] = len(dirs)
        li[o + LJ_ROW] = m
        li[o + LJ_DIR:o + LJ_DIR + len(dirs)] = dirs
        f = LF_HEADER + LF_STRIDE * l
        for link, X, ib, eo, ro in ((lj.predecessor, lj.X_P, LJ_PRED, f + LF_EP, f + LF_RP),
                                    (lj.successor, lj.X_S, LJ_SUCC, f + LF_ES, f + LF_RS)):
            k = model.link_index(link)
            li[o + ib] = int(model.link_body[k])
            Rl = np.asarray(model.link_R[9 * k:9 * k + 9]).reshape(3, 3)  # link axes in body coordinates
            pl = np.asarray(model.link_p[3 * k:3 * k + 3])
            RJ = Rl @ np.asarray(X)[:3, :3] @ np.asarray(lj.R_align)    # local-z joint axes, body coordinates
            lf[eo:eo + 9] = RJ.T.reshape(9)                              # E = body -> joint coordinates
            lf[ro:ro + 3] = Rl @ np.asarray(X)[:3, 3] + pl               # r = joint origin, body coordinates
        lf[f + LF_PITCH] = float(getattr(lj, "pitch", 0.0))
        rows.append(slice(m, m + len(dirs)))
        m += len(dirs)
    li[LI_NL], li[LI_NC] = nl, m
    li[LI_LAMBDA] = LI_HEADER + LJ_STRIDE * nl
    li[li[LI_LAMBDA]:] = lambda_dof

    kmi = np.concatenate([model._kmi, li])
    kmf = np.concatenate([model._kmf, lf])
    return LoopData([lj.name for lj in loops], rows, li, lf, kmi, kmf,
                    out_size.py_func(model.nb, nvt, nl, m), analyse(model, li, rows))


# scratch of loop_terms, laid out as layout.py's work array: per body, in blocks of nb, the world
# pose ^iX_0 = plx(E0_i, p_i) (E0_i of body i at SB_E0 nb + SB_E0_N i, p_i at SB_P0 nb + SB_P0_N i),
SB_E0, SB_E0_N = 0, 9
SB_P0, SB_P0_N = 9, 3
assert SB_E0 == 0 and SB_P0 == SB_E0_N
SCRATCH_BODY = 12
# then (at SCRATCH_BODY nb) per loop:
TS_EP, TS_OP = 0, 9      # predecessor joint frame: E (world -> joint), origin (world)
TS_ES, TS_OS = 12, 21    # successor joint frame
TS_EJ, TS_RJ = 24, 33    # ^J X_b of the body at hand (J = successor joint frame)
TS_XE, TS_XB = 36, 45    # ^sX_p = [[E, 0], [B, E]], B = -E r x (Eq. 2.24)
TS_D = 54                # delta in Table 8.1's order (angular first), 6
TS_M = 60                # a motion vector in joint coordinates, 6
TS_SIZE = 66


@njit(cache=True, inline="always")
def scratch_size(nb):
    return SCRATCH_BODY * nb + TS_SIZE


WRENCH_N = 6  # floats of one loop wrench (f, n) in the forward kernel's output


@njit(cache=True, inline="always")
def out_size(nb, nvt, nl, m):
    """Floats the kernel writes: H (nvt^2, first: the C callback views it as nvt x nvt) | qdd (nvt) |
    wrenches (6 N_L) | C (nvt) | K (m nvt) |
    k, delta, K qd, lambda (m each) | Y (m nvt) | A, L_A, V (m^2 each) | b, y (m each) | zero (nvt) |
    loop_terms' scratch (in out_views' order)."""
    return (nvt * nvt + nvt + WRENCH_N * nl + nvt + m * nvt + 4 * m + m * nvt + 3 * m * m + 2 * m + nvt
            + scratch_size(nb))


# ---------------------------------------------------------------------------------------------
# the minimal loop clusters (Featherstone §8.9), found once when the model is packed


class ClusterData:
    """The minimal loop clusters of one model (immutable; ``model.loop_data.clusters``).

    names: per cluster, the tuple of its loop-joint names (model.loops order within a cluster;
    clusters ordered by their first loop joint); loops: per cluster, its loop indices; rows: per
    cluster, the rows of K it owns (int arrays, increasing); cols: per cluster, the velocity
    variables (columns of K, user coordinates) of its tree joints (increasing = model order);
    free: the columns in no cluster; order: the consecutive numbering, cols[0] + cols[1] + ... +
    free (a permutation of range(nv))."""

    __slots__ = ("names", "loops", "rows", "cols", "free", "order")

    def __init__(self, names, loops, rows, cols, free):
        self.names = tuple(tuple(n) for n in names)
        self.loops = tuple(loops)
        self.rows = tuple(rows)
        self.cols = tuple(cols)
        self.free = free
        self.order = np.concatenate(list(self.cols) + [free]).astype(np.int64)
        for a in (*self.loops, *self.rows, *self.cols, self.free, self.order):
            a.setflags(write=False)

    def __len__(self):
        return len(self.names)

    def __repr__(self):
        return f"<ClusterData {len(self.names)} cluster(s): {list(self.names)}>"


def loop_tree_joints(mi, li, l):
    """Bodies (= their tree joints) on loop l's path: from p(l) and s(l) up to, not including, their
    nearest common ancestor (Table 8.4's while loop; depth-first numbering: a parent precedes its
    children, so the larger index is the deeper one)."""
    o = LI_HEADER + LJ_STRIDE * l
    bi, bj = int(li[o + LJ_PRED]), int(li[o + LJ_SUCC])
    J = body_ints(mi, int(mi[H_NB]))
    out = []
    while bi != bj:
        if bi > bj:
            out.append(bi)
            bi = int(J[bi, J_PARENT])
        else:
            out.append(bj)
            bj = int(J[bj, J_PARENT])
    return out


def analyse(model, li, rows) -> ClusterData:
    """Cluster analysis of ``model`` (its loop data li, rows per loop): union-find over the loops
    that share a column of K.  Called once when the model is packed."""
    mi = model.mi
    J = body_ints(mi, model.nb)
    nl = len(rows)
    v_src = np.asarray(model.v_src) if model.has_mimic else None
    cols = []
    for l in range(nl):
        c = set()
        for b in loop_tree_joints(mi, li, l):
            vi = int(J[b, J_VI])
            for t in range(vi, vi + int(J[b, J_NV])):
                c.add(int(v_src[t]) if v_src is not None else t)
        cols.append(c)
    parent = list(range(nl))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner = {}
    for l in range(nl):
        for c in cols[l]:
            if c in owner:
                a, b = find(owner[c]), find(l)
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                owner[c] = l
    groups: dict[int, list[int]] = {}
    for l in range(nl):
        groups.setdefault(find(l), []).append(l)
    comps = sorted(groups.values(), key=lambda g: g[0])
    names = [[model.loops[l].name for l in g] for g in comps]
    crow = [np.concatenate([np.arange(rows[l].start, rows[l].stop) for l in g]).astype(np.int64) for g in comps]
    ccol = [np.array(sorted(set().union(*(cols[l] for l in g))), dtype=np.int64) for g in comps]
    used = np.zeros(model.nv, dtype=bool)
    for c in ccol:
        used[c] = True
    return ClusterData(names, [np.array(g, dtype=np.int64) for g in comps], crow, ccol,
                       np.flatnonzero(~used).astype(np.int64))
