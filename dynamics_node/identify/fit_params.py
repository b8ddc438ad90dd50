"""The parameters identified and their regressor: per body the ten inertial parameters (model order,
Pinocchio's order, inertia about the body origin), then per moving URDF joint the coefficients of the
joint law (joint_law.py) of the fit's class, one block of nf per field in ``fields``:

    coulomb   viscous b, Coulomb fc with sign(qd)            (what a URDF <dynamics> holds)
    smooth    + fc with tanh(qd / vc), offset o, armature Ia
    stribeck  + Stribeck fs exp(-(qd / vs)^2) s(qd)

(vc and vs per joint are not linear parameters: ``vc`` and ``vs`` hold the values the fit uses, chosen
by classes.py). A mimic follower keeps viscous and sign() Coulomb friction only (its other columns are
zero: what the URDF can say about it). The base parameters (the combinations the torques can see)
come from QR with column pivoting of the regressor at random states (Gautier 1990).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..algorithms.estimation.regressor import N_PARAMS, PARAM_NAMES
from ..errors import InputError, clip
from ..layout import D_COULOMB, D_DAMPING, J_VI
from ..packed import body_ints, dof_floats

CLASSES = {"coulomb": ("viscous", "coulomb"), "smooth": ("viscous", "coulomb", "offset", "armature"),
           "stribeck": ("viscous", "coulomb", "offset", "armature", "stribeck")}
RANK_TOL = 1e-8  # |R_kk| of the column-normalised regressor below this x |R_00|: a dependent column


@dataclass
class Parameterisation:
    model: object          # loaded with friction=False (the regressor's model)
    nb: int
    friction_joints: tuple  # URDF names of the moving joints (mimic followers too), one viscous + one Coulomb each
    dof_friction: np.ndarray  # tree dof -> index in friction_joints
    names: tuple           # P parameter names
    prior: np.ndarray      # P: the URDF's values (merged bodies; its <dynamics>)
    scale: np.ndarray      # P: typical magnitudes (normalisation), of the prior's size
    base_idx: np.ndarray   # r independent columns (pivot order)
    dep_idx: np.ndarray
    K: np.ndarray          # p_base = p[base_idx] + K p[dep_idx]
    j_ref: list = None     # per body: a positive definite 4 x 4 pseudo-inertia (the prior's if it is one)
    scale_data: np.ndarray = None  # scale with the friction entries from the data (calibrate)
    fields: tuple = CLASSES["coulomb"]
    extended: np.ndarray = None  # per friction joint: a joint of the model's own (not a mimic follower)
    vc: np.ndarray = None    # per friction joint: the velocity scale of smooth Coulomb friction (0: sign)
    vs: np.ndarray = None    # per friction joint: the Stribeck velocity

    @property
    def P(self):
        return N_PARAMS * self.nb + len(self.fields) * len(self.friction_joints)

    def fidx(self, field, f):
        """Index in p of ``field`` (one of self.fields) of friction joint f."""
        return N_PARAMS * self.nb + self.fields.index(field) * len(self.friction_joints) + f

    def field_values(self, p, field, default=0.0):
        """Per friction joint the value of ``field`` in p (``default`` when the class has no such field)."""
        nf = len(self.friction_joints)
        if field not in self.fields:
            return np.full(nf, default)
        return np.array([p[self.fidx(field, f)] for f in range(nf)])

    def base_map(self):
        """B (r x P) with p_base = B p."""
        B = np.zeros((self.base_idx.size, self.P))
        B[np.arange(self.base_idx.size), self.base_idx] = 1.0
        B[:, self.dep_idx] = self.K
        return B

    def base_names(self, B=None, limit=6):
        """A readable name per base parameter: its leading terms."""
        B = self.base_map() if B is None else B
        out = []
        for row in B:
            w = np.abs(row) * self.scale
            order = [k for k in np.argsort(-w) if w[k] > 1e-6 * w.max()]
            terms = [f"{'+' if row[k] > 0 else '-'} {abs(row[k]):.3g} {self.names[k]}" for k in order[:limit]]
            s = " ".join(terms).removeprefix("+ ")
            if s.startswith("1 "):
                s = s[2:]
            out.append(s + (f" + {len(order) - limit} more" if len(order) > limit else ""))
        return out


def setup(model, model_friction, fields=CLASSES["coulomb"]) -> Parameterisation:
    """The parameterisation of a loaded model (``model_friction``: the same URDF with friction=True,
    for the prior friction coefficients) with the joint law's ``fields`` (module docstring)."""
    spec = model._spec
    nb, nvt = model.nb, model.nvt
    fj, dof_f = [], np.zeros(nvt, dtype=np.int64)
    vi = body_ints(model.mi, nb)[:, J_VI]
    for b in range(nb):  # one dof per body: setup's callers refuse floating joints
        name = spec.body_joint[b]
        if name not in fj:
            fj.append(name)
        dof_f[int(vi[b])] = fj.index(name)
    names = [f"{PARAM_NAMES[k]}({clip(spec.body_link[b], 60)})" for b in range(nb) for k in range(N_PARAMS)]
    names += [f"{fl}({clip(j, 60)})" for fl in fields for j in fj]
    from .. import inertial_parameters

    pi0 = inertial_parameters(model)
    D = dof_floats(model_friction.mf, nb, nvt)
    fv0, fc0 = np.zeros(len(fj)), np.zeros(len(fj))
    for d in range(nvt):
        fv0[dof_f[d]], fc0[dof_f[d]] = D[d, D_DAMPING], D[d, D_COULOMB]
    known = {"viscous": fv0, "coulomb": fc0}
    prior = np.concatenate([pi0] + [known.get(fl, np.zeros(len(fj))) for fl in fields])
    scale = _scales(model, pi0, len(fj) * len(fields))
    ext = np.array([n in model.joint_names for n in fj], bool)
    par = Parameterisation(model=model, nb=nb, friction_joints=tuple(fj), dof_friction=dof_f, names=tuple(names),
                           prior=prior, scale=scale, base_idx=np.zeros(0, np.int64), dep_idx=np.zeros(0, np.int64),
                           K=np.zeros((0, 0)), fields=tuple(fields), extended=ext, vc=np.zeros(len(fj)),
                           vs=np.zeros(len(fj)))
    _base(par)
    par.j_ref = [_reference_pseudo_inertia(pi0[N_PARAMS * b:N_PARAMS * (b + 1)], scale[N_PARAMS * b:N_PARAMS * (b + 1)])
                 for b in range(nb)]
    par.scale_data = scale.copy()
    return par


def pseudo_inertia(pi):
    """J = [[Sigma, h], [h^T, m]], Sigma = tr(Ibar)/2 1 - Ibar (Wensing et al. 2017, Eq. 8)."""
    m, h = pi[0], pi[1:4]
    Ib = np.array([[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]])
    J = np.empty((4, 4))
    J[:3, :3] = 0.5 * np.trace(Ib) * np.eye(3) - Ib
    J[:3, 3] = J[3, :3] = h
    J[3, 3] = m
    return J


def _reference_pseudo_inertia(pi, s):
    """The prior's pseudo-inertia when it is comfortably positive definite (in the body's own units),
    else that of a small ball of the body's typical mass at its origin."""

    m, L = s[0], math.sqrt(s[4] / s[0])
    T = np.diag([1 / L, 1 / L, 1 / L, 1.0]) / math.sqrt(m)
    J = pseudo_inertia(pi)
    ev = np.linalg.eigvalsh(T @ J @ T)
    if ev[0] > 1e-6 * max(ev[-1], 1e-300):
        return J
    return m * np.diag([(0.1 * L) ** 2] * 3 + [1.0])


def calibrate(par, Q, QD, TAU, QDD=None):
    """Friction scales from the data: Coulomb, Stribeck, offset ~ rms effort, viscous ~ rms effort / rms
    velocity, armature ~ rms effort / rms acceleration. A joint whose effort is zero all along (a
    gripper's that reports none) gets 1e-3 of the largest joint's: a scale of zero leaves its terms
    out of the semidefinite program's reach (the solver called it infeasible on a real Panda)."""
    s = par.scale.copy()
    m = par.model
    floor = max(1e-3 * float(np.max(np.sqrt(np.mean(TAU ** 2, axis=0)))), 1e-300)
    for f, name in enumerate(par.friction_joints):
        js = [j for j in range(m.nv) if m.joint_names[j] == name]
        if not js:  # a mimic follower: its master's row
            d = int(np.nonzero(par.dof_friction == f)[0][0])
            js = [int(m.v_src[d])]
        j = js[0]
        te = max(float(np.sqrt(np.mean(TAU[:, j] ** 2))), floor)
        ve = max(float(np.sqrt(np.mean(QD[:, j] ** 2))), 1e-2)
        ae = max(float(np.sqrt(np.mean(QDD[:, j] ** 2))), 1e-1) if QDD is not None else 1.0
        for fl in par.fields:
            s[par.fidx(fl, f)] = {"viscous": te / ve, "armature": te / ae}.get(fl, te)
    par.scale_data = s


def _scales(model, pi0, nf):  # nf: the count of friction parameters
    """Typical magnitudes: per body its prior mass m (at least 1 % of the mean body mass), length
    L = max(5 cm, |c|, radius of gyration), so m, m L, m L^2; friction: 1 (replaced from the data)."""
    nb = model.nb
    total = max(float(np.sum(pi0[0::N_PARAMS])), 1e-3)
    out = np.empty(N_PARAMS * nb + nf)
    for b in range(nb):
        p = pi0[N_PARAMS * b:N_PARAMS * (b + 1)]
        m = max(float(p[0]), 0.01 * total / nb)
        c = p[1:4] / m
        rg = math.sqrt(max(float(p[4] + p[6] + p[9]), 0.0) / m)
        L = max(0.05, float(np.linalg.norm(c)), rg)
        out[N_PARAMS * b:N_PARAMS * (b + 1)] = [m, m * L, m * L, m * L] + [m * L * L] * 6
    out[N_PARAMS * nb:] = 1.0
    return out


def random_states(model, n, rng):
    """n states within the joint limits (continuous joints and unlimited ones: +-pi), random rates."""
    nv = model.nv
    lo, hi = np.full(nv, -math.pi), np.full(nv, math.pi)
    for j, name in enumerate(model.joint_names):
        lim = model.joint_limits.get(name)
        if lim is not None and model.joint_kinds.get(name) != "continuous":
            a, b = lim[0], lim[1]
            if np.isfinite(a) and np.isfinite(b) and b > a:
                lo[j], hi[j] = a, b
    Q = rng.uniform(lo, hi, size=(n, nv))
    return Q, rng.normal(size=(n, nv)), rng.normal(size=(n, nv))


def _base(par, n=None, seed=0):
    """Base parameters by QR with column pivoting of the column-normalised regressor at random states."""
    from .stack import full_regressor

    m = par.model
    rng = np.random.default_rng(seed)
    n = n or max(64, int(4 * par.P / max(m.nv, 1)))
    Q, QD, QDD = random_states(m, n, rng)
    sgn = np.sign(QD)  # the law's shapes with vc = 0, vs = 1: their values change no rank
    shapes = {"sign": sgn, "coulomb": sgn, "stribeck": np.exp(-QD ** 2) * sgn}
    A = full_regressor(par, Q, QD, QDD, shapes).reshape(n * m.nv, par.P)
    norms = np.linalg.norm(A, axis=0)
    if not np.all(np.isfinite(norms)):
        raise InputError("the regressor at random states is not finite: check the URDF's numbers")
    from scipy.linalg import qr

    live = norms > 1e-12 * max(norms.max(), 1e-300)
    As = np.zeros_like(A)
    As[:, live] = A[:, live] / norms[live]
    _, R, piv = qr(As, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    r = int(np.sum(d > RANK_TOL * d[0])) if d.size and d[0] > 0 else 0
    ind, dep = piv[:r], piv[r:]
    Ks = np.linalg.solve(R[:r, :r], R[:r, r:]) if r else np.zeros((0, dep.size))
    sc = np.where(live, norms, 1.0)
    par.base_idx, par.dep_idx = np.asarray(ind), np.asarray(dep)
    par.K = (Ks / sc[ind][:, None]) * sc[dep][None, :]
    par.K[:, ~live[dep]] = 0.0
