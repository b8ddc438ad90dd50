"""Stacking the regressor over many samples: per joint j the Gram matrix of [Y_j, tau_j] (rows: the
samples where joint j's effort is usable), accumulated chunk by chunk with the batch regressor
kernel (algorithms/estimation/regressor_batch.py) writing into one reused buffer. Everything the fit needs
(least squares, residual per joint, weights, the constrained problem) follows from these
(P + 1) x (P + 1) matrices, so memory does not grow with the recording's length.
"""
from __future__ import annotations

import numpy as np

from ..algorithms.estimation.regressor_batch import regressor_batch_kernel
from ..errors import InputError

CHUNK = 1024


class _Kernel:
    """The batch regressor of one model with its buffers (reused across chunks: the kernel writes the
    same entries for every state and leaves the others zero)."""

    def __init__(self, model, chunk):
        self.m = model
        self.Y = np.zeros((chunk, model.nvt, 10 * model.nb))
        self.w = np.empty(model.work_size)
        self.Sb = np.empty((model.nb, 6 * model.nvt))
        self.A = np.empty((6, 10))

    def __call__(self, Q, QD, QDD):
        m, n = self.m, Q.shape[0]
        if m.has_mimic:  # tree coordinates (§9.6): q_t = mul q + offset, qd_t = mul qd
            Q = Q[:, m.q_src] * m.q_mul + m.q_off
            QD, QDD = QD[:, m.v_src] * m.v_mul, QDD[:, m.v_src] * m.v_mul
        Y = self.Y[:n]
        st = regressor_batch_kernel(m._kmi, m._kmf, np.ascontiguousarray(Q), np.ascontiguousarray(QD),
                                    np.ascontiguousarray(QDD), Y, self.w, self.Sb, self.A)
        if st:
            raise InputError(f"the regressor could not be computed (status {st}): non-finite or out-of-range states")
        return np.einsum("tv,ntp->nvp", m.G, Y) if m.has_mimic else Y


def full_regressor(par, Q, QD, QDD, shapes=None):
    """(N x nv x P): inertial columns, then friction columns."""
    k = _Kernel(par.model, Q.shape[0])
    return np.concatenate([k(Q, QD, QDD), friction_columns(par, QD, QDD, shapes)], axis=2)


def grams(par, Q, QD, QDD, TAU, mask=None, shapes=None, chunk=CHUNK):
    """(M, counts): M[j] = [Y_j, tau_j]^T [Y_j, tau_j] over the samples usable for joint j."""
    m = par.model
    nv, P = m.nv, par.P
    M = np.zeros((nv, P + 1, P + 1))
    counts = np.zeros(nv, dtype=np.int64)
    kern = _Kernel(m, min(chunk, Q.shape[0]))
    Aug = np.empty((min(chunk, Q.shape[0]), P + 1))
    for a in range(0, Q.shape[0], chunk):
        b = min(a + chunk, Q.shape[0])
        Yi = kern(Q[a:b], QD[a:b], QDD[a:b])
        F = friction_columns(par, QD[a:b], QDD[a:b], None if shapes is None else {k: v[a:b] for k, v in shapes.items()})
        for j in range(nv):
            A = Aug[:b - a]
            A[:, :10 * m.nb] = Yi[:, j, :]
            A[:, 10 * m.nb:P] = F[:, j, :]
            A[:, P] = TAU[a:b, j]
            if mask is not None and not mask[a:b, j].all():
                A = A[mask[a:b, j]]
            M[j] += A.T @ A
            counts[j] += A.shape[0]
    return M, counts


def law_shapes(QD, vc, vs):
    """The nonlinear shapes of the joint law per column of QD (N x n): s(qd) = tanh(qd / vc) (sign where
    vc = 0) and exp(-(qd / vs)^2) s(qd) (0 where vs = 0), joint_law.py."""
    sgn = np.sign(QD)
    vc = np.broadcast_to(np.asarray(vc, float), QD.shape[1:])
    vs = np.broadcast_to(np.asarray(vs, float), QD.shape[1:])
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(vc > 0, np.tanh(QD / np.where(vc > 0, vc, 1.0)), sgn)
        ss = np.where(vs > 0, np.exp(-(QD / np.where(vs > 0, vs, 1.0)) ** 2), 0.0) * sc
    return sgn, sc, ss


def friction_columns(par, QD, QDD, shapes=None):
    """F (N x nv x nfields nf): the friction part of the regressor, G^T of the tree dofs' joint law in
    the class's fields (fit_params.py). ``shapes``: {"sign", "coulomb", "stribeck"} (N x nv, per model
    joint) as the efforts' filter left them (the nonlinear columns low-passed like the efforts:
    Gautier's parallel filtering of the columns that are not smooth), default the law's shapes of QD
    with par.vc, par.vs."""
    m = par.model
    nf = len(par.friction_joints)
    N = QD.shape[0]
    F = np.zeros((N, m.nv, len(par.fields) * nf))
    if shapes is None:
        vc = np.zeros(m.nv)
        vs = np.zeros(m.nv)
        for d in range(m.nvt):
            f = int(par.dof_friction[d])
            if par.extended[f]:
                vc[m.v_src[d]], vs[m.v_src[d]] = par.vc[f], par.vs[f]
        sgn, sc, ss = law_shapes(QD, vc, vs)
    else:
        sgn, sc, ss = shapes["sign"], shapes["coulomb"], shapes["stribeck"]
    col = {fl: k * nf for k, fl in enumerate(par.fields)}
    for d in range(m.nvt):
        u, mul, f = int(m.v_src[d]), float(m.v_mul[d]), int(par.dof_friction[d])
        F[:, u, col["viscous"] + f] += mul * mul * QD[:, u]
        if not par.extended[f]:  # a mimic follower: sign() Coulomb of its own velocity mul qd_u
            F[:, u, col["coulomb"] + f] += mul * np.sign(mul) * sgn[:, u]
            continue
        F[:, u, col["coulomb"] + f] += sc[:, u]
        if "offset" in col:
            F[:, u, col["offset"] + f] += 1.0
        if "armature" in col:
            F[:, u, col["armature"] + f] += QDD[:, u]
        if "stribeck" in col:
            F[:, u, col["stribeck"] + f] += ss[:, u]
    return F
