"""The fit: weighted least squares on the base parameters, then the physically consistent parameters
closest to it (a semidefinite program), see dynamics_node.identify's docstring for the sources.

1. OLS on the base parameters (column-normalised, eigen-decomposition of the normal matrix; directions
   whose eigenvalue is below 1e-10 of the largest are left at zero and reported undetermined).
2. Per joint j the residual variance s_j^2 = RSS_j / (N_j - b_j) (b_j: base parameters acting on j),
   weights 1 / s_j^2, and WLS again (Gautier & Poignet 2001). cov = (W^T W)^-1 of the weighted base
   regressor gives each base parameter's standard deviation.
3. The constrained problem over all parameters p (inertial of every body, friction of every joint):

       minimise  sum_j RSS_j(p) / s_j^2  +  gamma |D^-1 (p - k p0)|^2
       subject to  J_i(p_i) >= eps J_ref,i  (4 x 4 pseudo-inertia, Wensing, Kim & Slotine 2017)
                   viscous, Coulomb, armature >= 0; Coulomb + Stribeck >= 0 (fs of either sign)

   The data term is the WLS one (its normal matrix, factored); the second term pulls toward the
   URDF's values p0 only where the data say little: gamma = 1 means the prior counts as one weighted
   equation per normalised parameter (D: the parameters' typical sizes), against thousands of
   equations in directions the data determine. It is scale-equivariant: k is the least-squares
   factor between the measured torques and the URDF's rigid-body model's, the friction free
   (efforts twice as large give k twice as large, p twice as large: torques exactly doubled), and D
   scales with k too.
4. Held at the prior (equality constraints B_i p = k B_i p0): the base parameters outside the span
   the data excite, and the undetermined ones (std above 10 % of their typical size) that the data
   cannot tell from the prior as a set (_held). Holding those costs the fit about what noise would;
   holding every undetermined one would not (on weak excitation many are undetermined yet far from
   the URDF's values, and their held-out error doubled). The report names both kinds. That promise
   is checked under physical consistency: when the held solution's weighted RSS exceeds the one
   without these holds (of both kinds) by more than HOLD_SIGMAS^2 per held parameter, they are
   released (held values of another scale than the data's pull the rest through the LMIs).
5. Terms of the joint law held at their prior too (law_hold.py): those the recording does not separate
   from the inertial parameters whose least-squares value the joint cannot have, and, the problem
   solved again, those whose fitted value no joint has (an armature far above the composite inertia
   the joint moves, a friction force above its effort range). The report names each, joint and term.
   Where a held term leaves a torque on its joint's row (what it had taken of a spring) that row's
   residual variance grows; when it more than doubles (REWEIGHT), the rows are weighted by the held
   fit's residual variances and the problem solved again, so that the other parameters are not bent
   toward that torque (on the Panda with a spring on its shoulder, one sinusoid per joint, another
   joint's error at twice the speed went from 2.1 to 1.1 times the best reference's).
"""
from __future__ import annotations

import warnings as _warnings
from dataclasses import dataclass, field

import numpy as np

from ..algorithms.estimation.regressor import N_PARAMS
from ..errors import InputError, clip_names
from . import law_hold
from .fit_params import pseudo_inertia
from .stack import grams

EIG_TOL = 1e-10
EPS_LMI = 1e-4
DETERMINED = 0.1  # a base parameter is determined when its std is below this fraction of its typical size
REWEIGHT = 2.0  # a row whose residual variance a held law term multiplies by more than this is reweighted
HOLD_SIGMAS = 2.0  # an undetermined base parameter this close to the prior (in its std) may be held there


@dataclass
class Fit:
    p: np.ndarray                 # constrained, all parameters (model order, then friction)
    p_ls: np.ndarray              # base parameters, WLS, unconstrained
    std: np.ndarray               # their standard deviations
    determined: np.ndarray        # bool per base parameter
    sigma: np.ndarray             # residual std per joint of the WLS fit
    condition: float              # of the column-normalised weighted base regressor
    prior_factor: float           # k
    samples: int
    equations: np.ndarray         # per joint
    solver: str
    warnings: list = field(default_factory=list)
    held: np.ndarray = None       # bool per base parameter: held at the prior's value (undetermined)
    absent: np.ndarray = None     # bool per base parameter: its columns are zero in the data (not in the law)
    law_held: dict = None         # base parameter -> why a term of the joint law is held at its prior (law_hold.py)


def _pseudo_basis():
    """(10, 4, 4): J(pi) = sum_k pi_k E_k."""
    return np.array([pseudo_inertia(np.eye(N_PARAMS)[k]) for k in range(N_PARAMS)])


def _solve_psd(G, g, tol=EIG_TOL):
    """x = G^+ g (eigen), with the count of directions kept and the inverse on them."""
    lam, U = np.linalg.eigh(G)
    keep = lam > tol * max(lam.max(), 1e-300)
    inv = (U[:, keep] / lam[keep]) @ U[:, keep].T
    return inv @ g, inv, keep, lam, U


def least_squares(par, M, counts, weights=None):
    """Base-parameter (W)LS from the per-joint Gram matrices. Returns (p_B, cov, rss per joint, info)."""
    ib, P = par.base_idx, par.P
    nv = M.shape[0]
    w = np.ones(nv) if weights is None else weights
    Gj = M[:, ib][:, :, ib]
    gj = M[:, ib, P]
    sj = M[:, P, P]
    G = np.tensordot(w, Gj, axes=1)
    g = w @ gj
    d = np.sqrt(np.maximum(np.diag(G), 0.0))
    d[d == 0] = 1.0
    xs, inv, keep, lam, U = _solve_psd(G / np.outer(d, d), g / d)
    pB = xs / d
    cov = inv / np.outer(d, d)
    rss = np.maximum(sj - 2 * gj @ pB + np.einsum("i,jik,k->j", pB, Gj, pB), 0.0)
    cond = float(np.sqrt(lam.max() / lam[keep].min())) if keep.any() else np.inf
    return pB, cov, rss, dict(keep=keep, lam=lam, U=U, d=d, G=G, g=g, cond=cond, Gj=Gj, gj=gj)


def fit(par, samples, prior_weight=1.0, shapes=None) -> Fit:
    """The fit of the module docstring; ``shapes``: the joint law's filtered nonlinear columns at the
    window's samples (signals.Samples.shapes), default sign() Coulomb friction (S.SGN)."""
    S = samples
    sl = slice(None, None, S.decimate)
    Q, QD, QDD, TAU, mask = S.Q[sl], S.QD[sl], S.QDD[sl], S.TAU[sl], S.mask[sl]
    if shapes is None:
        shapes = {"sign": S.SGN, "coulomb": S.SGN, "stribeck": 0.0 * S.SGN}
    M, counts = grams(par, Q, QD, QDD, TAU, mask, {k: v[sl] for k, v in shapes.items()})
    warnings = []
    r = par.base_idx.size
    ib = par.base_idx
    # 1-2: OLS, residual variances, WLS
    pB, _, rss, info = least_squares(par, M, counts)
    active = np.array([np.count_nonzero(np.diag(M[j][ib][:, ib]) > 0) for j in range(M.shape[0])])
    dof = np.maximum(counts - np.minimum(active, counts - 1), 1)
    var = rss / dof
    floor = 1e-12 * max(float(np.max(M[:, par.P, par.P] / np.maximum(counts, 1))), 1e-300)
    var = np.maximum(var, floor)
    wts = 1.0 / var
    pB, cov, rss, info = least_squares(par, M, counts, wts)
    sigma = np.sqrt(rss / dof)
    std = np.sqrt(np.maximum(np.diag(cov), 0.0))
    B = par.base_map()
    pB0 = B @ par.prior
    k = _prior_factor(par, B, info)
    if not k > 0:
        warnings.append(f"the measured efforts are not explained by the URDF's model with a positive factor "
                        f"({k:.3g}): sign convention or units? The prior is used as it is")
        k = 1.0
    typical = np.abs(B) @ (par.scale_data * np.where(np.arange(par.P) < N_PARAMS * par.nb, k, 1.0))
    span = _in_span(info, r)
    determined = (std < DETERMINED * typical) & span
    if not determined.any():
        raise InputError("too little excitation to identify anything: the data determine none of the "
                         f"{r} base parameters ({clip_names(par.base_names(B), 400, quote=False)})")
    # 3: the constrained problem
    # held at the prior (_held): what the data cannot see, and what they determine poorly and cannot tell
    # from the prior; the report says which (solve.base_parameter_report)
    hold = _held(pB - k * pB0, cov, std, span, determined)
    # terms of the joint law the recording cannot separate from the inertial parameters, and (after the
    # fit) terms no joint has, held at their prior too (law_hold.py)
    terms = law_hold.law_terms(par, B)
    rho = law_hold.separability(info, terms, span)
    H = law_hold.composite_inertia(par, S.Q, [k * par.prior])
    why = law_hold.confounded(par, B, terms, rho, span, k * par.prior, pB - k * pB0, std, S, H)
    hold[list(why)] = True
    n_eq = float(np.sum(counts))
    p, solver, held = _constrained(par, info, B, k, prior_weight, n_eq, hold, typical)
    # what _held chose costs about what noise would without physical consistency, and what the data do
    # not excite costs nothing; with it, the held values can pull the rest (a prior of another scale than
    # the data's): then they are released, the prior's pull (gamma) left to keep them
    noisy = hold.copy()
    noisy[list(why)] = False
    allowance = HOLD_SIGMAS ** 2 * np.count_nonzero(noisy)
    if noisy.any() and _cost(info, B @ p) - _cost(info, pB) > allowance:
        p_free, solver_free, held_free = _constrained(par, info, B, k, prior_weight, n_eq, hold & ~noisy, typical)
        if _cost(info, B @ p) - _cost(info, B @ p_free) > allowance:
            hold &= ~noisy
            p, solver, held = p_free, solver_free, held_free
    if why and held.any():
        # the rows a held law term leaves a torque on (a spring it had taken) weighted by that row's new
        # residual, so that the other parameters are not bent to explain it
        xB = B @ p
        rss_h = np.maximum(M[:, par.P, par.P] - 2 * info["gj"] @ xB
                           + np.einsum("i,jik,k->j", xB, info["Gj"], xB), 0.0)
        var_h = np.maximum(rss_h / dof, floor)
        if np.any(var_h > REWEIGHT * var):
            info = least_squares(par, M, counts, 1.0 / var_h)[3]
            p, solver, held = _constrained(par, info, B, k, prior_weight, n_eq, hold, typical)
    index = {t: i for i, t in terms.items()}
    H = np.maximum(H, law_hold.composite_inertia(par, S.Q, [p]))   # the prior's and the fitted model's
    for _ in range(3):
        new = {index[t]: w for t, w in law_hold.implausible(par, p, S, H).items()
               if t in index and not hold[index[t]]}
        if not new or not held.any() and hold.any():
            break
        why.update({i: f"implausible: {w}" for i, w in new.items()})
        hold[list(new)] = True
        p, solver, held = _constrained(par, info, B, k, prior_weight, n_eq, hold, typical)
    law_held = {i: w for i, w in why.items() if held[i]}
    for i, w in law_held.items():
        fl, f = terms[i]
        warnings.append(law_hold.message(par, fl, f, k * par.prior[par.fidx(fl, f)], w, par.base_names(B[i:i + 1])[0],
                                         k * pB0[i]))
    return Fit(p=p, p_ls=pB, std=std, determined=determined, sigma=sigma, condition=info["cond"],
               prior_factor=k, samples=Q.shape[0], equations=counts, solver=solver, warnings=warnings,
               held=held, absent=np.diag(info["G"]) <= 0, law_held=law_held)


def _cost(info, x):
    """The weighted residual sum of squares of base parameters x (info: least_squares's), less a constant."""
    return float(x @ info["G"] @ x - 2 * info["g"] @ x)


def _prior_factor(par, B, info):
    """k: the weighted least-squares factor between the measured torques and the URDF's rigid-body
    torques, fitted together with the friction base parameters (free, not the URDF's), so that a
    URDF's made-up <dynamics> (damping 10 N m s/rad for a simulator's sake) does not bend the scale of
    its inertias (on an xArm 7 it halved it, and the parameters held at k times the URDF's then cost
    the fit about 45 times its weighted residual)."""
    G, g = info["G"], info["g"]
    rigid = np.where(np.arange(par.P) < N_PARAMS * par.nb, par.prior, 0.0)
    u = B @ rigid
    fr = np.nonzero(~np.any(B[:, :N_PARAMS * par.nb] != 0, axis=1))[0]  # base parameters of friction alone
    A = np.zeros((fr.size + 1, fr.size + 1))
    A[0, 0] = u @ G @ u
    A[0, 1:] = A[1:, 0] = u @ G[:, fr]
    A[1:, 1:] = G[np.ix_(fr, fr)]
    rhs = np.concatenate([[u @ g], g[fr]])
    if not A[0, 0] > 0:
        return 1.0
    d = np.sqrt(np.maximum(np.diag(A), 1e-300))
    x = _solve_psd(A / np.outer(d, d), rhs / d)[0] / d
    return float(x[0])


def _held(delta, cov, std, span, determined):
    """The base parameters held at the prior: those outside the span the data excite, and, taken from the
    undetermined ones in order of |delta| / std, the largest set the data cannot tell from the prior as a
    whole: its Mahalanobis distance delta_H^T cov_HH^-1 delta_H at most HOLD_SIGMAS^2 / 4 per parameter
    (on average within half of HOLD_SIGMAS standard deviations), so that holding them costs the fit
    about as much as noise would."""
    hold = ~span.copy()
    cand = np.nonzero(span & ~determined & (np.abs(delta) <= HOLD_SIGMAS * std))[0]
    cand = cand[np.argsort(np.abs(delta[cand]) / std[cand])]
    H = []
    for i in cand:
        T = H + [i]
        C = cov[np.ix_(T, T)]
        d = delta[T]
        try:
            d2 = float(d @ np.linalg.solve(C, d))
        except np.linalg.LinAlgError:
            continue
        if d2 <= 0.25 * HOLD_SIGMAS ** 2 * len(T):
            H = T
    hold[H] = True
    return hold


def _in_span(info, r):
    """Base parameters that lie in the span of the directions the data excite (not in a null direction)."""
    U, keep = info["U"], info["keep"]
    if keep.all():
        return np.ones(r, bool)
    null = U[:, ~keep]
    return np.sum(null ** 2, axis=1) < 1e-6


def _constrained(par, info, B, k, gamma, n_eq, hold=None, typical=None):
    import cvxpy as cp

    nb, P = par.nb, par.P
    D = par.scale_data * np.where(np.arange(P) < N_PARAMS * nb, k, 1.0)
    x0 = k * par.prior / D
    lam, U = np.linalg.eigh(info["G"] / np.outer(info["d"], info["d"]))
    keep = lam > EIG_TOL * lam.max()
    L = (np.sqrt(lam[keep])[:, None] * U[:, keep].T) * info["d"][None, :]
    z = (U[:, keep].T @ (info["g"] / info["d"])) / np.sqrt(lam[keep])
    LC = L @ (B * D[None, :])
    x = cp.Variable(P)
    scale = 1.0 / max(n_eq, 1.0)
    obj = cp.sum_squares(LC @ x - z) * scale + gamma * scale * cp.sum_squares(x - x0)
    cons = []
    E = _pseudo_basis()
    for i in range(nb):
        s_i = par.scale[N_PARAMS * i:N_PARAMS * (i + 1)]
        m_i, L_i = s_i[0], np.sqrt(s_i[4] / s_i[0])
        T = np.diag([1 / L_i, 1 / L_i, 1 / L_i, 1.0]) / np.sqrt(m_i)
        Ek = [T @ E[c] @ T * s_i[c] for c in range(N_PARAMS)]
        J = sum(x[N_PARAMS * i + c] * Ek[c] for c in range(N_PARAMS))
        Jref = T @ par.j_ref[i] @ T
        cons.append(0.5 * (J + J.T) >> EPS_LMI * Jref)
    nf = len(par.friction_joints)
    for fl in ("viscous", "coulomb", "armature"):  # Ia, b, fc >= 0 (joint_law.py)
        if fl in par.fields:
            i0 = par.fidx(fl, 0)
            cons.append(x[i0:i0 + nf] >= 0)
    if "stribeck" in par.fields:  # fs of either sign, fc + fs >= 0: friction at rest never drives the joint
        c0, s0 = par.fidx("coulomb", 0), par.fidx("stribeck", 0)
        cons.append(cp.multiply(D[c0:c0 + nf], x[c0:c0 + nf]) + cp.multiply(D[s0:s0 + nf], x[s0:s0 + nf]) >= 0)
    held = np.zeros(B.shape[0], bool) if hold is None else hold.copy()
    eq = []
    if held.any():  # undetermined base parameters stay at the prior's values: B_i p = k B_i p0
        R = (B[held] * D[None, :]) / typical[held][:, None]
        eq = [R @ x == (k * B[held] @ par.prior) / typical[held]]
    prob = cp.Problem(cp.Minimize(obj), cons + eq)
    used = None
    for solver in ("CLARABEL", "SCS"):
        if solver not in cp.installed_solvers():
            continue
        try:
            with _warnings.catch_warnings():  # "may be inaccurate": the status says so, and the report has it
                _warnings.simplefilter("ignore", UserWarning)
                prob.solve(solver=solver)
        except cp.error.SolverError:
            continue
        if prob.status in ("optimal", "optimal_inaccurate") and x.value is not None:
            used = f"{solver} ({prob.status})"
            break
    if used is None and eq:  # the held values and physical consistency together infeasible: hold none
        held[:] = False
        return _constrained(par, info, B, k, gamma, n_eq)[:2] + (held,)
    if used is None:
        raise InputError(f"the constrained fit failed (solver status {prob.status}); the data may be degenerate")
    return D * np.asarray(x.value), used, held
