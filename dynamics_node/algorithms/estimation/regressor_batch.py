"""The inertial-parameter regressor of many states at once: Y_k with tau_k = Y_k pi for every row k
of Q, QD, QDD (Atkeson, An & Hollerbach 1986), for identification from recordings of thousands of
samples (dynamics_node.identify), where the per-state route's call overhead would dominate.

Same quantity as algorithms/estimation/regressor.py, computed the other way round. There, the ten unit-inertia
forces of body j are carried inward to the root (Eq. 5.18, ten force transforms per level). Here the
motion-subspace columns S_k of j's ancestors are carried outward into j's frame (the motion transform
^jX_λ(j), Eq. 2.24, once per ancestor dof: s_k^(j) = ^jX_λ(j) s_k^(λ(j))), and then

    Y[k, 10 j + c] = s_k^(j)T A_j[:, c]          (Eq. 5.17 with f_j = A_j pi_j, Eq. 5.16)

since S_k^T (^jX_k)^T f = (^jX_k S_k)^T f. A_j, the 6 x 10 matrix with f_j = I_j a_j + v_j x* I_j v_j =
A_j pi_j, is written out in closed form from v_j = (w, v) and a_j = (al, a) (angular first, body
coordinates, gravity as a_0 = -a_g, §5.3): with b = a + w x v,

    force  = m b + al x h + w x (w x h)
    moment = h x b + Ibar al + w x (Ibar w)

(Eq. 2.63's rbi(m, h, Ibar) in Eq. 5.16; Pinocchio's bodyRegressor is the same expansion). The
outward pass X_j, v_j, a_j is rnea_kernel's (Table 5.1), one state at a time.
"""
from __future__ import annotations

import numpy as np

from ..._jit import njit, types
from ...dispatch import Route
from ...packed import dof_count, dof_f, first_dof, parent
from ...layout import (D_S, H_NB, H_NVT, W_A,
                      W_A_N, W_E, W_E_N, W_R, W_R_N, W_V, W_V_N)
from ...spatial import load6, xm_t
from ..._kernel_io import FASTMATH, F1, F2, I1
from .regressor import N_PARAMS
from ..tree.rnea import rnea_kernel

F3 = types.float64[:, :, ::1]


@njit(cache=True, inline="always")
def body_force_columns(v, a, A):
    """A (6 x 10, angular-first rows) with f = I a + v x* I v = A pi (Eq. 5.16), pi = [m, h, Ibar as
    xx xy yy xz yz zz] (Pinocchio's order)."""
    wx, wy, wz, vx, vy, vz = v[0], v[1], v[2], v[3], v[4], v[5]
    ax, ay, az, lx, ly, lz = a[0], a[1], a[2], a[3], a[4], a[5]
    bx, by, bz = lx + wy * vz - wz * vy, ly + wz * vx - wx * vz, lz + wx * vy - wy * vx  # b = a + w x v
    for r in range(6):
        for c in range(N_PARAMS):
            A[r, c] = 0.0
    A[3, 0], A[4, 0], A[5, 0] = bx, by, bz  # m
    # h = e_x, e_y, e_z: moment h x b; force al x h + w x (w x h) = (al x + w w^T - |w|^2) h
    ww = wx * wx + wy * wy + wz * wz
    A[1, 1], A[2, 1] = -bz, by
    A[0, 2], A[2, 2] = bz, -bx
    A[0, 3], A[1, 3] = -by, bx
    A[3, 1], A[4, 1], A[5, 1] = wx * wx - ww, az + wy * wx, -ay + wz * wx
    A[3, 2], A[4, 2], A[5, 2] = -az + wx * wy, wy * wy - ww, ax + wz * wy
    A[3, 3], A[4, 3], A[5, 3] = ay + wx * wz, -ax + wy * wz, wz * wz - ww
    # Ibar: moment Ibar al + w x (Ibar w), column by column (the unit tensors of xx, xy, yy, xz, yz, zz)
    A[0, 4], A[1, 4], A[2, 4] = ax, wz * wx, -wy * wx                                   # xx
    A[0, 5], A[1, 5], A[2, 5] = ay - wz * wx, ax + wz * wy, wx * wx - wy * wy            # xy
    A[0, 6], A[1, 6], A[2, 6] = -wz * wy, ay, wx * wy                                   # yy
    A[0, 7], A[1, 7], A[2, 7] = az + wy * wx, wz * wz - wx * wx, ax - wy * wz            # xz
    A[0, 8], A[1, 8], A[2, 8] = wy * wy - wz * wz, az - wx * wy, ay + wx * wz            # yz
    A[0, 9], A[1, 9], A[2, 9] = wy * wz, -wx * wz, az                                   # zz


@njit(types.int64(I1, F1, F2, F2, F2, F3, F1, F2, F2), cache=True, fastmath=FASTMATH)
def regressor_batch_kernel(mi, mf, Q, QD, QDD, Y, w, Sb, A):
    """Y[k] (nvt x 10 nb) for every row k; Y must hold zeros on entry. w: a work array of the model
    (work_size), Sb: nb x 6 nvt scratch (the ancestors' S columns in each body's frame), A: 6 x 10
    scratch. Status as rnea_kernel (the first bad row stops the batch)."""
    nb = mi[H_NB]
    E0, r0, v0, a0 = W_E * nb, W_R * nb, W_V * nb, W_A * nb
    tau = np.empty(mi[H_NVT])
    for k in range(Q.shape[0]):
        st = rnea_kernel(mi, mf, Q[k], QD[k], QDD[k], w[0:0], tau, w)  # X_i, v_i, a_i of Table 5.1
        if st != 0:
            return st
        for j in range(nb):
            p = parent(mi, j)
            eo, ro = E0 + W_E_N * j, r0 + W_R_N * j
            i = p
            while i >= 0:  # the ancestors' columns, carried into j's frame (Eq. 2.24)
                for dof in range(first_dof(mi, i), first_dof(mi, i) + dof_count(mi, i)):
                    s = xm_t(w, eo, ro, (Sb[p, 6 * dof], Sb[p, 6 * dof + 1], Sb[p, 6 * dof + 2],
                                         Sb[p, 6 * dof + 3], Sb[p, 6 * dof + 4], Sb[p, 6 * dof + 5]))
                    for e in range(6):
                        Sb[j, 6 * dof + e] = s[e]
                i = parent(mi, i)
            for dof in range(first_dof(mi, j), first_dof(mi, j) + dof_count(mi, j)):  # j's own: S (Table 4.1)
                so = dof_f(nb, dof) + D_S
                for e in range(6):
                    Sb[j, 6 * dof + e] = mf[so + e]
            body_force_columns(load6(w, v0 + W_V_N * j), load6(w, a0 + W_A_N * j), A)
            col = N_PARAMS * j
            i = j
            while i >= 0:  # Y[dof, 10 j + c] = s^T A[:, c] (Eq. 5.17)
                for dof in range(first_dof(mi, i), first_dof(mi, i) + dof_count(mi, i)):
                    s0, s1, s2 = Sb[j, 6 * dof], Sb[j, 6 * dof + 1], Sb[j, 6 * dof + 2]
                    s3, s4, s5 = Sb[j, 6 * dof + 3], Sb[j, 6 * dof + 4], Sb[j, 6 * dof + 5]
                    for c in range(N_PARAMS):
                        Y[k, dof, col + c] = (s0 * A[0, c] + s1 * A[1, c] + s2 * A[2, c] + s3 * A[3, c]
                                              + s4 * A[4, c] + s5 * A[5, c])
                i = parent(mi, i)
    return 0


def _regressor_batch(model, data, w, Q, QD, QDD):
    from ..tree.rnea import _raise_batch, _rows

    _rows(model, Q, QD, QDD)
    Y = np.zeros((Q.shape[0], model.nvt, N_PARAMS * model.nb))
    st = regressor_batch_kernel(model._kmi, model._kmf, Q, QD, QDD, Y, w, np.empty((model.nb, 6 * model.nvt)),
                                np.empty((6, N_PARAMS)))
    if st:
        _raise_batch(model, st, Q, QD, QDD)
    if model.has_mimic:  # tau = G^T tau_t (§9.6): fold the followers' rows into their masters'
        Y = np.einsum("tv,ntp->nvp", model.G, Y)
    return 0, Y


_REGRESSOR_BATCH = Route("batch regressor", (("Q", "Q"), ("QD", "V"), ("QDD", "V")), _regressor_batch).front


def regressor_batch(model, Q, QD, QDD):
    """Y (N x nv x 10 nb): Y[k] = regressor(model, Q[k], QD[k], QDD[k]) for every row k of Q (N x nq),
    QD, QDD (N x nv), so that Y[k] @ inertial_parameters(model) is the inverse dynamics of state k
    (without the model's armature and friction, which are not inertial parameters)."""
    return _REGRESSOR_BATCH(model, None, Q, QD, QDD)
