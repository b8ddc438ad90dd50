"""The class of the joint law and its velocity scales, by cross-validation in contiguous time blocks
: ``--friction {coulomb, smooth, stribeck, auto}``.

The classes (params.CLASSES): ``coulomb`` b qd + fc sign(qd); ``smooth`` b qd + fc tanh(qd / vc) + o +
Ia qdd; ``stribeck`` adds fs exp(-(qd / vs)^2) tanh(qd / vc). vc and vs enter nonlinearly: per joint
they are picked from the grids VC_GRID (0 = sign) and VS_GRID by coordinate search (each joint's
friction acts on its own row of the regressor only, so one joint's values change one row's Gram
matrices), the rest by linear least squares.

Cross-validation: the training window is cut into BLOCKS contiguous blocks; each block is predicted
by the base-parameter least squares of the others, fitted as the fit itself is (the decimated,
low-passed samples, at most MAX_ROWS of them, the law's nonlinear columns low-passed like the
efforts; weights 1 / var(tau_j)), and scored on what evaluate compares: the block's recorded efforts
(unfiltered, at most MAX_RAW samples of the window evenly strided) against the law at the states'
velocity. The score of a candidate is the root mean square over joints of that held-out RMS divided
by the recorded effort's standard deviation. Scored on low-passed efforts, a narrow Stribeck spike
(vs = 0.01-0.02 rad/s) passed unseen: the filter flattens its column, its coefficient grows to
several N m, and only the recorded efforts show the spike it puts where |qd| < vs. Contiguous
blocks, not shuffled samples: neighbouring samples of a filtered recording are not independent, and
shuffling would reward over-fitting. In ``stribeck`` each joint may also have no Stribeck term
(vs = 0), its start: a joint gets one only where it lowers the held-out error, and only at a vs of at
most half the joint's largest speed in the window, so that the recording reaches the term's decay
(exp(-4) at twice vs). A Stribeck term whose decay the recording never reaches is a Coulomb term
with a bend to the data, and it extrapolates as anything: on the Panda's fingers (at most 7 mm/s)
one at vs = 0.01 m/s took 0.7 N of the friction, which vanished at twice the speed (held-out error
1.9 times the best reference's, 1.06 without it).

``auto`` keeps the simpler class unless a richer one's score is lower by more than SIMPLER (a
relative margin: a class with more parameters must earn them on held-out data).
"""
from __future__ import annotations

import numpy as np

from .fit_params import CLASSES, calibrate, setup
from .stack import _Kernel, friction_columns, law_shapes

BLOCKS = 5
MAX_ROWS = 12000
MAX_RAW = 8000
VC_GRID = (0.0, 1e-3, 2.5e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2)
VS_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
SIMPLER = 0.01
EIG_TOL = 1e-10
RIDGE = 1e-9


class Selector:
    """Cross-validated scores of the classes on one recording's training window (module docstring)."""

    def __init__(self, model, model_f, S):
        self.model, self.model_f, self.S = model, model_f, S
        n = S.Q.shape[0]
        rows = np.arange(0, n, S.decimate)
        if rows.size > MAX_ROWS:
            rows = rows[np.linspace(0, rows.size - 1, MAX_ROWS).round().astype(np.int64)]
        self.rows = rows
        self.QD, self.QDD = S.QD[rows], S.QDD[rows]
        nv = model.nv
        self.kern = _Kernel(model, 1024)
        # training: the decimated, filtered samples (the fit's own data); scoring: raw samples of the
        # held-out block, the law at the states' velocity, against the recorded efforts
        self.W = S.mask[rows].astype(float)  # 0: a sample left out for that joint (saturated)
        self.Y = self._regressor(rows) * self.W[:, :, None]
        self.TAU = S.TAU[rows] * self.W
        rr = np.arange(n) if n <= MAX_RAW else np.linspace(0, n - 1, MAX_RAW).round().astype(np.int64)
        self.rr = rr
        self.Wr = S.mask[rr].astype(float)
        self.Yr = self._regressor(rr) * self.Wr[:, :, None]
        self.TAUr = S.TAU_RAW[rr] * self.Wr
        self.QDr, self.QDDr = S.QD[rr], S.QDD[rr]
        cuts = np.linspace(0, rows.size, BLOCKS + 1).round().astype(np.int64)
        self.blocks = [slice(int(cuts[i]), int(cuts[i + 1])) for i in range(BLOCKS)]   # contiguous rows
        bounds = [rows[b.start] for b in self.blocks] + [n]
        rcut = np.searchsorted(rr, bounds)
        self.rblocks = [slice(int(rcut[i]), int(rcut[i + 1])) for i in range(BLOCKS)]
        self.var = self._variance(S.TAU[rows], self.W)
        self.var_raw = self._variance(S.TAU_RAW[rr], self.Wr)
        self.counts = np.array([[self.Wr[b, j].sum() for j in range(nv)] for b in self.rblocks])
        self._cols = {}  # (joint, vc, vs) -> the filtered shapes at the rows
        self.pars = {}   # class -> its Parameterisation (the base parameters' QR done once)
        self.qd_full = S.grid[2]

    def _regressor(self, rows):
        S, nv = self.S, self.model.nv
        Y = np.empty((rows.size, nv, 10 * self.model.nb))
        for a in range(0, rows.size, 1024):
            r = rows[a:a + 1024]
            Y[a:a + r.size] = self.kern(S.Q[r], S.QD[r], S.QDD[r])
        return Y

    @staticmethod
    def _variance(T, W):
        var = np.array([np.var(T[W[:, j] > 0, j]) if (W[:, j] > 0).sum() > 1 else 0.0 for j in range(T.shape[1])])
        return np.where(var > 0, var, 1.0)

    # ---- the nonlinear columns: low-passed over the whole recording (parallel filtering) at the training
    # rows, as they are (the law at the velocity) at the scoring rows
    def _shape(self, j, vc, vs):
        key = (j, vc, vs)
        if key not in self._cols:
            from .signals import lowpass

            _, sc, ss = law_shapes(self.qd_full[:, j:j + 1], vc, vs)
            k = self.S.keep[self.rows]
            if vs > 0:
                both = lowpass(np.concatenate([sc, ss], axis=1), self.S.fs, self.S.cutoff)[k]
            else:  # no Stribeck term: its column is zero
                both = np.concatenate([lowpass(sc, self.S.fs, self.S.cutoff)[k], np.zeros((k.size, 1))], axis=1)
            _, rc, rs = law_shapes(self.QDr[:, j:j + 1], vc, vs)
            self._cols[key] = (both[:, 0], both[:, 1], rc[:, 0], rs[:, 0])
        return self._cols[key]

    def shapes(self, vc, vs):
        """(training shapes, scoring shapes) of the law with vc, vs per model joint."""
        nv = self.model.nv
        sc, ss = np.empty((self.rows.size, nv)), np.empty((self.rows.size, nv))
        rc, rs = np.empty((self.rr.size, nv)), np.empty((self.rr.size, nv))
        for j in range(nv):
            sc[:, j], ss[:, j], rc[:, j], rs[:, j] = self._shape(j, float(vc[j]), float(vs[j]))
        return ({"sign": self.S.SGN[self.rows], "coulomb": sc, "stribeck": ss},
                {"sign": np.sign(self.QDr), "coulomb": rc, "stribeck": rs})

    # ---- Gram matrices per block and joint, and the cross-validated score
    def _grams(self, par, shapes):
        """(A, M) for the training rows and the scoring rows: A per joint (nv x rows x P+1, contiguous
        per joint), M per block and joint."""
        train, raw = shapes
        out = []
        for Y, QD, QDD, W, TAU, shp, blocks in ((self.Y, self.QD, self.QDD, self.W, self.TAU, train, self.blocks),
                                                (self.Yr, self.QDr, self.QDDr, self.Wr, self.TAUr, raw, self.rblocks)):
            F = friction_columns(par, QD, QDD, shp) * W[:, :, None]
            A = np.ascontiguousarray(np.concatenate([Y, F, TAU[:, :, None]], axis=2).transpose(1, 0, 2))
            M = np.stack([np.stack([A[j, b].T @ A[j, b] for j in range(A.shape[0])]) for b in blocks])
            out.append((A, M))
        return (out[0][0], out[1][0]), (out[0][1], out[1][1])

    def _update_row(self, A, M, par, j, sc, ss, rc, rs):
        """Row j's coulomb and stribeck columns replaced: (sc, ss) at the training rows, (rc, rs) at the
        scoring rows; A and M updated in place."""
        for X, G, blocks, W, x_c, x_s in ((A[0], M[0], self.blocks, self.W, sc, ss),
                                          (A[1], M[1], self.rblocks, self.Wr, rc, rs)):
            cols = []
            for fl, x in (("coulomb", x_c), ("stribeck", x_s)):
                if fl in par.fields:
                    c = par.fidx(fl, par.friction_joints.index(self.model.joint_names[j]))
                    X[j, :, c] = x * W[:, j]
                    cols.append(c)
            for bi, b in enumerate(blocks):
                Ab = X[j, b, :]
                Z = Ab.T @ Ab[:, cols]
                G[bi, j][:, cols] = Z
                G[bi, j][cols, :] = Z.T

    def score(self, par, M):
        """The CV score (module docstring) and the per-joint relative held-out RMS: each block's raw
        samples predicted by the fit on the other blocks' training samples."""
        M, Mr = M
        ib, P = par.base_idx, par.P
        F = np.tensordot(M, 1.0 / self.var, axes=([1], [0]))   # per block: sum_j w_j M_j, (P+1) x (P+1)
        Gb, gb = F[:, ib][:, :, ib], F[:, ib, P]
        G, g = Gb.sum(0), gb.sum(0)
        rss = np.zeros(self.model.nv)
        x = np.zeros(P + 1)
        x[P] = -1.0
        for bi in range(len(self.blocks)):
            Gt, gt = G - Gb[bi], g - gb[bi]
            d = np.sqrt(np.maximum(np.diag(Gt), 0.0))
            d[d == 0] = 1.0
            x[ib] = _solve(Gt / np.outer(d, d), gt / d) / d
            rss += (Mr[bi] @ x) @ x
        rel = np.sqrt(np.maximum(rss, 0.0) / np.maximum(self.counts.sum(0), 1) / self.var_raw)
        return float(np.sqrt(np.mean(rel ** 2))), rel

    # ---- the classes
    def evaluate_class(self, name, out=None):
        """(score, vc per model joint, vs per model joint, per-joint relative RMS) of class ``name`` at its
        best grid values."""
        m = self.model
        nv = m.nv
        par = self.pars[name] = setup(m, self.model_f, CLASSES[name])
        vc = np.zeros(nv)
        vs = np.zeros(nv)
        moving = np.abs(self.QD).max(axis=0)
        if name == "coulomb":
            sgn = {"sign": self.S.SGN[self.rows], "coulomb": self.S.SGN[self.rows], "stribeck": 0.0 * self.QD}
            raw = {"sign": np.sign(self.QDr), "coulomb": np.sign(self.QDr), "stribeck": 0.0 * self.QDr}
            _, M = self._grams(par, (sgn, raw))
            s, rel = self.score(par, M)
            return s, vc, vs, rel
        vc[:] = 0.02
        if name == "stribeck" and out is not None:  # from smooth's solution: no Stribeck term anywhere yet
            vc[:] = out[1]
        A, M = self._grams(par, self.shapes(vc, vs))
        best, rel = self.score(par, M)
        for _sweep in range(2):  # one sweep over the Stribeck pairs from smooth's vc fell short (3 % vs 0.4 %)
            changed = False
            for j in range(nv):
                if moving[j] <= 0:
                    continue
                cands = [(c, vs[j]) for c in VC_GRID] if name == "smooth" else \
                    [(c, v) for c in VC_GRID for v in (0.0, *VS_GRID) if v <= 0.5 * moving[j]]
                cur = (vc[j], vs[j])
                for c, v in cands:
                    if (c, v) == cur:
                        continue
                    self._update_row(A, M, par, j, *self._shape(j, c, v))
                    s, r = self.score(par, M)
                    if s < best * (1 - 1e-9):
                        best, rel, cur, changed = s, r, (c, v), True
                vc[j], vs[j] = cur
                self._update_row(A, M, par, j, *self._shape(j, *cur))
            if not changed:
                break
        return best, vc, vs, rel


def _solve(G, g):
    """G^-1 g for the column-normalised normal matrix G: Cholesky with a ridge of RIDGE (the least-squares
    solution up to the directions the data do not see; a few times faster than an eigen-decomposition
    of these small matrices, which matters at hundreds of candidates), eigen-decomposition if G is not
    numerically positive definite."""
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    try:
        return cho_solve(cho_factor(G + RIDGE * np.eye(G.shape[0]), check_finite=False), g, check_finite=False)
    except LinAlgError:
        lam, U = np.linalg.eigh(G)
        keep = lam > EIG_TOL * max(lam.max(), 1e-300)
        return (U[:, keep] / lam[keep]) @ (U[:, keep].T @ g)


def choose(model, model_f, S, wanted="auto"):
    """(class, vc, vs, {class: score}, {class: per-joint relative RMS}): the class asked for, or under
    ``auto`` the simplest whose score no richer class beats by more than SIMPLER."""
    sel = Selector(model, model_f, S)
    names = list(CLASSES) if wanted == "auto" else [wanted]
    res = {}
    for n in names:
        res[n] = sel.evaluate_class(n, out=res.get("smooth"))
    pick = names[0]
    for n in names[1:]:
        if res[n][0] < res[pick][0] * (1 - SIMPLER):
            pick = n
    return (pick, res[pick][1], res[pick][2], {n: r[0] for n, r in res.items()}, {n: r[3] for n, r in res.items()},
            sel.pars[pick])


def parameterise(model, model_f, S, name, vc, vs, par=None):
    """The Parameterisation of class ``name`` with vc, vs (per model joint) and its filtered shapes."""
    par = par or setup(model, model_f, CLASSES[name])
    for f, jn in enumerate(par.friction_joints):
        if par.extended[f]:
            j = model.joint_names.index(jn)
            par.vc[f], par.vs[f] = vc[j], vs[j]
    calibrate(par, S.Q, S.QD, S.TAU, S.QDD)
    return par, S.shapes(vc, vs)
