"""An independent reference for the closed-loop terms (test-only): Table 8.4's K and k, Table 8.1's
delta and Baumgarte's k_stab built in Python from the core's public API (link_pose, jacobian,
link_velocity, bias_acceleration, mass_matrix, bias_forces), linear first in world axes at the
successor joint origin o, and the forward dynamics from the augmented system of Eq. 8.6 solved by
numpy (least squares: minimum-norm lambda when K is rank deficient).  The package computes the
same in one compiled kernel, angular first in joint coordinates, with Method 2."""
from __future__ import annotations

import numpy as np

import dynamics_node as dn
from dynamics_node.spatial import skew


def _position_error(lj, W_p, W_s):
    """Table 8.1 on ^sX_p of the aligned joint frames, ordered like lj.T's columns (linear first)."""
    Ra = lj.R_align
    Rp, Rs = W_p[:3, :3] @ Ra, W_s[:3, :3] @ Ra
    E = (Rp.T @ Rs).T
    r = Rp.T @ (W_s[:3, 3] - W_p[:3, 3])
    X = np.zeros((6, 6))
    X[:3, :3] = X[3:, 3:] = E
    X[3:, :3] = -E @ skew(r)

    def x(i, j):
        return X[i - 1, j - 1]

    d = np.zeros(6)
    t = lj.type
    if t == "fixed":
        d[:] = 0.5 * np.array([x(2, 3) - x(3, 2), x(3, 1) - x(1, 3), x(1, 2) - x(2, 1),
                               x(5, 3) - x(6, 2), x(6, 1) - x(4, 3), x(4, 2) - x(5, 1)])
    elif t in ("revolute", "continuous", "cylindrical"):
        d[0], d[1], d[3], d[4] = x(2, 3), -x(1, 3), x(5, 3), -x(4, 3)
        if t != "cylindrical":
            d[5] = x(4, 1) * x(2, 1) + x(4, 2) * x(2, 2)
    elif t == "prismatic":
        d[:3] = 0.5 * np.array([x(2, 3) - x(3, 2), x(3, 1) - x(1, 3), x(1, 2) - x(2, 1)])
        d[3], d[4] = x(5, 3), -x(4, 3)
    elif t == "spherical":
        d[3] = x(5, 1) * x(3, 1) + x(5, 2) * x(3, 2) + x(5, 3) * x(3, 3)
        d[4] = x(6, 1) * x(1, 1) + x(6, 2) * x(1, 2) + x(6, 3) * x(1, 3)
        d[5] = x(4, 1) * x(2, 1) + x(4, 2) * x(2, 2) + x(4, 3) * x(2, 3)
    else:  # planar
        d[0], d[1], d[5] = x(2, 3), -x(1, 3), r[2]
    lin_first = np.concatenate([d[3:], d[:3]])
    local = np.vstack([Ra.T @ lj.T[:3], Ra.T @ lj.T[3:]])  # unit vectors, linear first
    return lin_first[np.argmax(np.abs(local), axis=0)]


def loop_terms(model, q, qd, stabilization_time=None):
    """(K, k (+ k_stab), delta, T_w per loop) from the public API."""
    Ks, ks, ds, Tws = [], [], [], []
    for lj in model.loops:
        P, S = dn.link_pose(model, q, lj.predecessor), dn.link_pose(model, q, lj.successor)
        W_p, W_s = P @ lj.X_P, S @ lj.X_S
        o = W_s[:3, 3]
        Tw = np.vstack([W_s[:3, :3] @ lj.T[:3], W_s[:3, :3] @ lj.T[3:]])
        Js, vs, avs = [], [], []
        for link, pose in ((lj.predecessor, P), (lj.successor, S)):
            rho = o - pose[:3, 3]
            J = np.array(dn.jacobian(model, q, link))
            J[:3] -= skew(rho) @ J[3:]           # body point at o
            vb = np.array(dn.link_velocity(model, q, qd, link))
            ab = np.array(dn.bias_acceleration(model, q, qd, link))
            w = vb[3:]
            vs.append(np.r_[vb[:3] + np.cross(w, rho), w])
            # spatial acceleration at the fixed point o: a_o = d/dt v_o + alpha x rho + ... (Eq. 2.47 ff.)
            avs.append(np.r_[ab[:3] + np.cross(ab[3:], rho) - np.cross(w, vb[:3]), ab[3:]])
            Js.append(J)
        vp, v_s = vs
        cross = np.r_[np.cross(v_s[3:], vp[:3]) + np.cross(v_s[:3], vp[3:]), np.cross(v_s[3:], vp[3:])]
        k = -Tw.T @ (avs[1] - avs[0] + cross)    # Eq. 8.47
        delta = _position_error(lj, W_p, W_s)
        if stabilization_time is not None:
            a = 1.0 / stabilization_time
            k = k - 2 * a * Tw.T @ (v_s - vp) - a * a * delta   # Eq. 8.22
        Ks.append(Tw.T @ (Js[1] - Js[0]))
        ks.append(k)
        ds.append(delta)
        Tws.append(Tw)
    return np.vstack(Ks), np.concatenate(ks), np.concatenate(ds), Tws


def forward(model, q, qd, tau, stabilization_time=None, f_ext=None):
    """(qdd, loop wrenches) from the augmented system [H -K^T; K 0] [qdd; lambda] = [tau - C; k]."""
    K, k, _, Tws = loop_terms(model, q, qd, stabilization_time)
    H = dn.mass_matrix(model, q)
    C = dn.inverse_dynamics(model, q, qd, np.zeros(model.nv), f_ext)
    n, m = model.nv, K.shape[0]
    M = np.block([[H, -K.T], [K, np.zeros((m, m))]])
    sol = np.linalg.lstsq(M, np.r_[tau - C, k], rcond=None)[0]
    out, i = {}, 0
    for lj, Tw in zip(model.loops, Tws):
        out[lj.name] = Tw @ sol[n + i:n + i + Tw.shape[1]]
        i += Tw.shape[1]
    return sol[:n], out
