"""The sparse-matrix method (Featherstone §8.13, Eq. 8.64, derived in §3.7, Eqs. 3.66-3.74).

No spanning tree: the unknowns are the bodies' accelerations a and every joint's constraint-force
variables lambda (tree joints and loop joints alike), and the equation of motion is

    [ I    P T ] [  a ]   [ P T_a tau - p      ]
    [ T'P'  0  ] [ -λ ] = [ k (+ k_stab), 0    ]                               (Eq. 8.64)

Coordinates.  Each body's acceleration is in its own body coordinates, as a difference from the
velocity-product acceleration the RNEA gives with qdd = 0 (Δa_i = a_i - a_i^vp, with a_0 = -a_g:
gravity is in a^vp, §5.3).  Then I = diag(I_i) is constant (the model's body inertias), and the
block of P T for joint j and body b is T_j^T ^jX_b, a motion transform's rows:
  * tree joint i (successor i, predecessor λ(i)), in body i's coordinates: T_i^T Δa_i -
    T_i^T ^iX_λ Δa_λ = 0 (T_i: the orthonormal complement of the joint's S_i, constant; its
    right-hand side is 0 because a_i - ^iX_λ a_λ - (a_i^vp - ^iX_λ a_λ^vp) = S_i qdd_i);
  * loop joint l, in its successor joint frame (local z, Table 4.1): T_l^T (^JX_s Δa_s - ^JX_p Δa_p)
    = k_l + k_stab, the spanning-tree route's Eq. 8.47 and Baumgarte term (Eq. 8.22, the same
    alpha = beta = 1/stabilization_time), from the same kernel code (constraints.loop_rows: Table
    8.1's delta and the constrained directions of each loop-joint type come from the type tables).
The body rows' right-hand side is T_a tau of the body's own joint (T_a = S (S^T S)^-1, so
S^T T_a = 1: Eq. 3.34) minus its children's, transformed, minus p_i = I_i a_i^vp + v_i x* I_i v_i -
f^x_i.  The joint law (friction, offset: joint_law.py) enters through tau; armature (rotor
inertia) is refused.
Afterwards qdd_i = T_a,i^T (Δa_i - ^iX_λ Δa_λ), and f_l = T_l lambda_l is the loop joint's wrench.

Sparse storage.  The matrix is symmetric with 6 N_B + n^c_tot rows.  Its pattern (the I, T and P
blocks: N_B 6x6 diagonal blocks, and per joint its rows against its one or two bodies) is built
once per model (SparsePattern, kept on the model) as an upper triangle in CSC.  Each call writes the
transform-dependent values with one compiled loop into a copy of the constant data array, and
qdldl (an L D L^T of quasi-definite matrices, from the OSQP project) refactors it: its approximate
minimum-degree ordering and symbolic factorisation are made once per model, so a call is O(nnz)
for a mechanism whose graph admits an O(n) factorisation, such as Fig. 8.4's ladder.

Quasi-definiteness and rank.  Every constraint row carries -eps on the diagonal (eps = 1e-11 of the
inverse of the largest body mass): the matrix [I, PT; T'P', -eps] is quasi-definite, so L D L^T
exists in any order, and iterative refinement on the exact matrix (eps removed) converges to the
solution of Eq. 8.64 in a few steps.  An over-constrained mechanism makes the exact matrix singular
(§8.10; the book assumes full rank).  The case met in practice, a planar loop closed by a spatial
joint, gives loop-constraint rows of K that vanish identically: they are found once per model (K at
two random configurations) and dropped, with lambda = 0 there, which is the minimum-norm choice of
the spanning-tree route (Eq. 8.41), so the two routes return the same loop wrenches.  Any remaining
rank deficiency (a configuration where independent rows become dependent) is a least-squares
problem: the refinement then converges to the accelerations and to the forces nearest the
regularised solution; when the equations are inconsistent the residual is not small and an
InputError says so.
"""
from __future__ import annotations

import math

import numpy as np

from ..._jit import njit
from ...errors import InputError, RangeError
from ...packed import body_f, body_floats, body_ints, dof_count, dof_f, dof_floats, first_dof, parent
from ...layout import (FEXT_N, B_M, D_ARMATURE, D_S, H_NB, H_NVT, J_NV, J_PARENT, J_VI, W_A, W_A_N, W_E, W_E_N, W_R,
                       W_R_N, W_V, W_V_N, B_RBI)
from ...spatial import crf_t, load6, rbi_mul_t, xm_t, xtf_t
from ..._kernel_io import A_TAU, check, fext_array, new_work, raise_status
from ...joint_law import friction_torque
from ..tree.rnea import rnea_kernel
from .constraints import _joint_from_body, loop_rows, loop_wrench, vec, world_poses
from ...loop_data import (LF_HEADER, LF_PITCH, LF_STRIDE, LI_HEADER, LJ_DIR, LJ_NC, LJ_PRED, LJ_ROW, LJ_STRIDE, LJ_SUCC,
                          SB_P0, SCRATCH_BODY, TS_EJ, TS_RJ, scratch_size)

REFINE_MAX = 60       # refinement steps at most (rank-deficient matrices converge linearly)
REFINE_TOL = 1e-15    # stop when the step is below this, relative to the solution
REFINE_STALL = 0.9    # or when a step is not this much smaller than the one before
SV = 6                # rows of one body in Eq. 8.64 and floats of one spatial vector (Ta per dof)
_STATS = {"iterations": 0}  # refinement steps of the last call (the tests and the bench read it)
EPS_REL = 1e-11       # constraint-row regularisation, relative to 1 / (largest body mass)


@njit(cache=True, inline="always")
def _t_column(d, h):
    """Column dir = d of a loop joint's T (joint coordinates, angular first): the unit vector e_d, but for
    d = 5 of a helical joint the screw direction (e6 - h e3) / sqrt(1 + h^2) (data.t_dot, Table 4.1)."""
    if d == 5 and h != 0.0:
        r = 1.0 / math.sqrt(1.0 + h * h)
        return (0.0, 0.0, -h * r, 0.0, 0.0, r)
    return (1.0 if d == 0 else 0.0, 1.0 if d == 1 else 0.0, 1.0 if d == 2 else 0.0,
            1.0 if d == 3 else 0.0, 1.0 if d == 4 else 0.0, 1.0 if d == 5 else 0.0)


@njit(cache=True)
def assemble(mi, mf, li, lf, nl, q, qd, tau, fx, alpha, Tt, tto, Ta, vals, rhs, w, s):
    """Eq. 8.64's transform-dependent coefficients into vals (the order SparsePattern lists them)
    and its right-hand side into rhs (body rows, tree-joint rows, loop-joint rows); leaves the RNEA's
    X_i, v_i in w and the body poses in s.  Returns 0 or a core status code."""
    nb = mi[H_NB]
    nvt = mi[H_NVT]
    zero = np.zeros(nvt)
    C = np.empty(nvt)
    st = rnea_kernel(mi, mf, q, qd, zero, fx, C, w)      # X_i, v_i, a_i^vp (Table 5.1, qdd = 0)
    if st != 0:
        return st
    st = check(tau, nvt, A_TAU)
    if st != 0:
        return st
    hasfx = fx.shape[0] != 0
    for i in range(SV * nb):
        rhs[i] = 0.0
    o = 0
    for i in range(nb):
        ei = W_E * nb + W_E_N * i
        ri = W_R * nb + W_R_N * i
        v = load6(w, W_V * nb + W_V_N * i)
        a = load6(w, W_A * nb + W_A_N * i)
        Io = body_f(i) + B_RBI
        Ia = rbi_mul_t(mf, Io, a)
        vIv = crf_t(v, rbi_mul_t(mf, Io, v))
        fa = [0.0] * 6
        vi = first_dof(mi, i)
        for dof in range(vi, vi + dof_count(mi, i)):
            d = dof_f(nb, dof)
            t = tau[dof] - friction_torque(mf, d, qd[dof])   # the joint law (zero with friction off)
            for k in range(6):
                fa[k] += Ta[SV * dof + k] * t          # T_a tau (Eq. 3.73)
        for k in range(6):
            x = fa[k] - Ia[k] - vIv[k]
            if hasfx:
                x += fx[FEXT_N * i + k]
            rhs[SV * i + k] += x
        p = parent(mi, i)
        if p >= 0:
            back = xtf_t(w, ei, ri, (fa[0], fa[1], fa[2], fa[3], fa[4], fa[5]))  # -^λX_i^* T_a tau on the parent
            for k in range(6):
                rhs[SV * p + k] -= back[k]
            for r in range(tto[i], tto[i + 1]):        # -T_i^T ^iX_λ: rows of the tree joint against λ(i)
                row = xtf_t(w, ei, ri, (Tt[SV * r], Tt[SV * r + 1], Tt[SV * r + 2], Tt[SV * r + 3], Tt[SV * r + 4],
                                        Tt[SV * r + 5]))
                for k in range(6):
                    vals[o + k] = -row[k]
                o += 6
    nct = tto[nb]
    for r in range(nct):
        rhs[SV * nb + r] = 0.0
    if nl == 0:
        return 0
    world_poses(mi, w, s)
    m0 = SV * nb + nct
    m = rhs.shape[0] - m0
    kk = rhs[m0:]
    dl = np.empty(m)
    vj = np.empty(m)
    g = SCRATCH_BODY * nb
    p0 = SB_P0 * nb
    for l in range(nl):
        loop_rows(mf, li, lf, w, s, nb, l, alpha, kk, dl, vj)   # k + k_stab (Eqs. 8.47, 8.22)
        lo = LI_HEADER + LJ_STRIDE * l
        nc = li[lo + LJ_NC]
        hp = lf[LF_HEADER + LF_STRIDE * l + LF_PITCH]
        for side in range(2):
            b = li[lo + LJ_SUCC] if side == 0 else li[lo + LJ_PRED]
            if b < 0:
                continue
            sg = 1.0 if side == 0 else -1.0
            _joint_from_body(s, g, b, p0)                        # ^JX_b
            for c in range(nc):
                row = xtf_t(s, g + TS_EJ, g + TS_RJ, _t_column(li[lo + LJ_DIR + c], hp))  # T_c^T ^JX_b
                for k in range(6):
                    vals[o + k] = sg * row[k]
                o += 6
    return 0


@njit(cache=True)
def extract(mi, li, lf, nl, x, w, s, Ta, qdd, wr):
    """qdd_i = T_a,i^T (Δa_i - ^iX_λ Δa_λ) and the loop wrenches f_l = T_l lambda_l (world axes)
    from the solution x = [Δa; -lambda]."""
    nb = mi[H_NB]
    for i in range(nb):
        p = parent(mi, i)
        aj = load6(x, SV * i)
        if p >= 0:
            xa = xm_t(w, W_E * nb + W_E_N * i, W_R * nb + W_R_N * i, load6(x, SV * p))
            aj = (aj[0] - xa[0], aj[1] - xa[1], aj[2] - xa[2], aj[3] - xa[3], aj[4] - xa[4], aj[5] - xa[5])
        vi = first_dof(mi, i)
        for dof in range(vi, vi + dof_count(mi, i)):
            t = 0.0
            for k in range(6):
                t += Ta[SV * dof + k] * aj[k]
            qdd[dof] = t
    if nl:
        lam = -x[x.shape[0] - _nc_total(li, nl):]
        for l in range(nl):
            loop_wrench(li, lf, s, nb, l, lam, wr)
    return 0


@njit(cache=True, inline="always")
def _nc_total(li, nl):
    t = 0
    for l in range(nl):
        t += li[LI_HEADER + LJ_STRIDE * l + LJ_NC]
    return t


# ---------------------------------------------------------------------------------------------
# Python side: the pattern (once per model), one call


def _zero_rows(model, tol=1e-12):
    """Loop-constraint rows of K that vanish at two random configurations, hence everywhere (K is
    analytic in q): a planar loop closed by a spatial joint constrains nothing out of its plane
    (§8.10's over-constraint).  Found once per model."""
    from .constraints import terms

    rng = np.random.default_rng(12345)
    zero = None
    for _ in range(2):
        q = model.neutral() + 0.0
        q[:] += rng.uniform(-1.0, 1.0, size=model.nq) * 0.7
        if model.floating_base:
            q[3:7] /= np.linalg.norm(q[3:7])
        K = terms(model, q)[0]
        big = max(float(np.max(np.abs(K))) if K.size else 0.0, 1e-300)
        z = np.max(np.abs(K), axis=1) <= tol * big if K.size else np.zeros(K.shape[0], dtype=bool)
        zero = z if zero is None else zero & z
    return zero


class SparsePattern:
    """Eq. 8.64's sparsity pattern, constant values and factorisation for one model (with or without
    its loop joints).  Built once, kept in ``model._sparse``.

    The matrix is stored as its upper triangle (CSC, rows <= columns: body rows first, then the tree
    joints' constraint rows, then the loop joints'), which qdldl factors as L D L^T.  qdldl's
    approximate-minimum-degree ordering and symbolic factorisation are computed once, here
    (qdldl.Solver); each call refactors the numbers only (Solver.update).

    n: rows; m0: first loop row; indices, indptr: the pattern; template: its constant values (I_i's
    upper triangle, T_i^T, -eps on every constraint row, -1 on dropped rows); pos_var: where the
    kernel's transform-dependent values go; var_keep: 0 for the values of dropped rows; drop: loop
    rows dropped (identically zero in K); reg: the regularisation to add back for the exact matrix;
    Tt, tto, Ta: T_i (rows of T_i^T per body, offsets) and T_a per degree of freedom."""

    def __init__(self, model, loops):
        import threading

        import qdldl
        from scipy.sparse import csc_matrix

        ld = model.loop_data if loops else None
        mi, mf = model.mi, model.mf
        nb, nvt = model.nb, model.nvt
        self.nl = ld.n_loops if ld is not None else 0
        self.li = ld._kli if ld is not None else np.zeros(LI_HEADER, dtype=np.int64)
        self.lf = ld._klf if ld is not None else np.zeros(1)
        m = ld.n_c if ld is not None else 0
        J = np.asarray(body_ints(mi, nb))
        parent, vi, nvj = J[:, J_PARENT], J[:, J_VI], J[:, J_NV]
        D = np.asarray(dof_floats(mf, nb, nvt))
        self.error = ("armature (rotor inertia, Example 9.5) is not in Eq. 8.64's body inertias"
                      if np.any(D[:, D_ARMATURE] != 0.0) else None)
        Sall = D[:, D_S:D_S + 6]
        Tt, tto, Ta = [], [0], np.zeros((nvt, 6))
        for i in range(nb):
            S = Sall[vi[i]:vi[i] + nvj[i]].T                       # 6 x nv_i, angular first
            _, _, Vt = np.linalg.svd(S.T)
            T = Vt[nvj[i]:].T                                      # orthonormal complement: T^T S = 0
            Ta[vi[i]:vi[i] + nvj[i]] = (S @ np.linalg.inv(S.T @ S)).T  # S^T T_a = 1 (Eq. 3.34)
            Tt.extend(T.T)
            tto.append(tto[-1] + T.shape[1])
        self.Tt = np.ascontiguousarray(np.array(Tt, dtype=float).reshape(-1))
        self.tto = np.array(tto, dtype=np.int64)
        self.Ta = np.ascontiguousarray(Ta.reshape(-1))
        nct = int(self.tto[-1])
        n = 6 * nb + nct + m
        self.n, self.m, self.m0 = n, m, 6 * nb + nct
        mass = np.asarray(body_floats(mf, nb)[:, B_M])
        self.eps = EPS_REL / max(float(np.max(mass)) if nb else 1.0, 1e-12)
        self.drop = np.flatnonzero(_zero_rows(model)) if m else np.zeros(0, np.int64)
        # constant entries (upper triangle): I_i, T_i^T at (body i, its joint's rows), the diagonal
        # of the constraint rows
        Io = [body_f.py_func(i) + B_RBI for i in range(nb)]
        eye = np.eye(6)
        # (nb, column, row): I_i e_k by the kernels' own product
        Iblk = np.array([[rbi_mul_t.py_func(mf, int(o), tuple(eye[k])) for k in range(6)] for o in Io])
        ur, uc = np.triu_indices(6)
        rr = (6 * np.arange(nb)[:, None] + ur[None, :]).reshape(-1)
        cc = (6 * np.arange(nb)[:, None] + uc[None, :]).reshape(-1)
        cv = Iblk[:, uc, ur].reshape(-1) if nb else np.zeros(0)
        # +delta on the bodies' diagonal: a massless body (a floating base link without <inertial>)
        # leaves I_i singular, and quasi-definiteness needs I > 0; refinement removes it again
        self.delta = EPS_REL * max(float(np.max(mass)) if nb else 1.0, 1e-12)
        bdiag = np.flatnonzero(np.tile(ur == uc, nb))
        cv = cv.copy()
        cv[bdiag] += self.delta
        trow = 6 * nb + np.arange(nct)
        tbody = np.repeat(np.arange(nb), np.diff(self.tto))
        r2 = 6 * np.repeat(tbody, 6) + np.tile(np.arange(6), nct)  # body coordinate (row <= column)
        c2 = np.repeat(trow, 6)
        diag = 6 * nb + np.arange(nct + m)
        dv = np.full(nct + m, -self.eps)
        dv[nct + self.drop] = -1.0
        const_r = np.concatenate([rr, r2, diag])
        const_c = np.concatenate([cc, c2, diag])
        const_v = np.concatenate([cv, self.Tt, dv])
        # transform-dependent entries, in the kernel's order: (body coordinate, constraint row)
        vr, vc, keep = [], [], []
        for i in range(nb):
            if parent[i] >= 0:
                for r in range(self.tto[i], self.tto[i + 1]):
                    vr.append(6 * parent[i] + np.arange(6))
                    vc.append(np.full(6, 6 * nb + r))
                    keep.append(np.ones(6))
        li = self.li
        dropped = set(self.drop.tolist())
        for l in range(self.nl):
            o = LI_HEADER + LJ_STRIDE * l
            for b in (li[o + LJ_SUCC], li[o + LJ_PRED]):
                if b < 0:
                    continue
                for c in range(li[o + LJ_NC]):
                    vr.append(6 * b + np.arange(6))
                    vc.append(np.full(6, self.m0 + li[o + LJ_ROW] + c))
                    keep.append(np.full(6, 0.0 if li[o + LJ_ROW] + c in dropped else 1.0))
        var_r = np.concatenate(vr).astype(np.int64) if vr else np.zeros(0, np.int64)
        var_c = np.concatenate(vc).astype(np.int64) if vc else np.zeros(0, np.int64)
        self.var_keep = np.concatenate(keep) if keep else np.zeros(0)
        self.nvar = len(var_r)
        all_r = np.concatenate([const_r, var_r])
        all_c = np.concatenate([const_c, var_c])
        slot = np.arange(1, len(all_r) + 1, dtype=float)
        A = csc_matrix((slot, (all_r, all_c)), shape=(n, n))
        A.sort_indices()
        pos = np.empty(len(all_r), dtype=np.int64)
        pos[A.data.astype(np.int64) - 1] = np.arange(len(all_r))
        nc0 = len(const_r)
        self.template = np.zeros(len(all_r))
        self.template[pos[:nc0]] = const_v
        self.pos_var = pos[nc0:]
        self.indices, self.indptr = A.indices.copy(), A.indptr.copy()
        # the regularised diagonal entries and what was added there: A_exact = A_reg - diag(added)
        self.diag_pos = np.concatenate([pos[bdiag], pos[len(rr) + len(r2):nc0]])
        self.reg = np.concatenate([np.full(len(bdiag), self.delta), np.full(nct + m, -self.eps)])
        self.reg[len(bdiag) + nct + self.drop] = 0.0
        for a in (self.Tt, self.tto, self.Ta, self.template, self.pos_var, self.var_keep, self.indices,
                  self.indptr, self.reg, self.drop):
            a.setflags(write=False)
        # ordering and symbolic factorisation, once, on a sample of the values
        rng = np.random.default_rng(0)
        sample = self.template.copy()
        sample[self.pos_var] = rng.uniform(0.5, 1.5, self.nvar) * self.var_keep
        self.solver = qdldl.Solver(csc_matrix((sample, self.indices, self.indptr), shape=(n, n)), upper=True)
        self.lock = threading.Lock()  # the solver holds one factorisation at a time


def pattern(model, loops) -> SparsePattern:
    """The model's SparsePattern (built at the first call, then kept)."""
    key = bool(loops and model.loop_data is not None)
    p = model._sparse.get(key)
    if p is None:
        p = model._sparse[key] = SparsePattern(model, key)
    return p


def _sym_mul(U, x):
    """(U + U^T - diag U) x for the upper triangle U."""
    return U @ x + U.T @ x - U.diagonal() * x


def sparse_forward_dynamics(model, q, qd, tau, alpha, f_ext, loops):
    """(qdd, loop wrenches) by Eq. 8.64 (see the module docstring); ``loops`` False: the tree alone
    (dn.forward_dynamics(method="sparse")): qdd only."""
    from scipy.sparse import csc_matrix

    if model.has_mimic:
        raise InputError("method='sparse' does not take mimic joints (their gear constraints, §9.6, are not "
                         "rows of Eq. 8.64): use the spanning-tree route")
    q = vec(model, q, model.nq, "q")
    qd = vec(model, qd, model.nv, "qd")
    tau = vec(model, tau, model.nv, "tau")
    pat = pattern(model, loops)
    if pat.error:
        raise InputError(f"method='sparse' on model '{model.name}': {pat.error}; use method='aba' or the "
                         "spanning-tree route")
    fx = fext_array(model, f_ext)
    n, nb = pat.n, model.nb
    vals = np.empty(pat.nvar)
    b = np.empty(n)
    w = new_work(model._kmi)
    s = np.empty(scratch_size(nb))
    st = assemble(model._kmi, model._kmf, pat.li, pat.lf, pat.nl, q, qd, tau, fx, float(alpha), pat.Tt, pat.tto,
                  pat.Ta, vals, b, w, s)
    if st:
        raise_status(model, st, what="the sparse-matrix method")
    data = pat.template.copy()
    data[pat.pos_var] = vals * pat.var_keep if pat.drop.size else vals
    b[pat.m0 + pat.drop] = 0.0
    U = csc_matrix((data, pat.indices, pat.indptr), shape=(n, n))
    with pat.lock:
        pat.solver.update(U, upper=True)
        x = pat.solver.solve(b)
        data[pat.diag_pos] -= pat.reg                             # the exact matrix's upper triangle
        last = np.inf
        it = 0
        for it in range(REFINE_MAX):                              # iterative refinement on the exact matrix
            step = pat.solver.solve(b - _sym_mul(U, x))
            ns = float(np.linalg.norm(step))
            if ns > REFINE_STALL * last:                          # at the rounding floor
                break
            x += step
            last = ns
            if ns <= REFINE_TOL * np.linalg.norm(x):
                break
    _STATS["iterations"] = it + 1
    res = b - _sym_mul(U, x)
    if not (np.isfinite(vals).all() and np.isfinite(b).all() and np.isfinite(x).all()):
        # numbers beyond float64 in Eq. 8.64's matrix or right side: the call route names the input at fault
        raise RangeError("the sparse-matrix method: its system (Eq. 8.64) or solution is not finite although every "
                         "input is finite (inputs or the model's parameters out of range)",
                         symptom="the sparse-matrix method's system (Eq. 8.64) overflowed (not finite)")
    if np.linalg.norm(res) > 1e-8 * (1.0 + np.linalg.norm(b)):
        raise RangeError("the sparse-matrix method did not converge (residual "
                         f"{np.linalg.norm(res):.3g}): the joint constraints are inconsistent (Featherstone §8.13 "
                         "assumes a properly constrained mechanism)",
                         symptom=f"the sparse-matrix method did not converge (residual {np.linalg.norm(res):.3g})")
    qdd = np.empty(model.nvt)
    wr = np.empty(6 * pat.nl)
    extract(model._kmi, pat.li, pat.lf, pat.nl, x, w, s, pat.Ta, qdd, wr)
    if not loops:
        return qdd
    ld = model.loop_data
    if ld is None:
        return qdd, {}
    return qdd, {name: wr[6 * i:6 * i + 6] for i, name in enumerate(ld.names)}
