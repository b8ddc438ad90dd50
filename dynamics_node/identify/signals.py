"""From merged joint-state samples to the states and torques of the fit: resampling, zero-phase
filtering, differentiation (module docstring of dynamics_node.identify says why each).

1. Window and grid: the samples between ``t_from`` and ``t_to`` (s after the topic's first message),
   inside the span every joint covers, onto a uniform grid at the recording's rate (the median
   interval of the joints' samples): linear interpolation per joint, so irregular stamps and
   publishers that each send some joints are fine.
2. Cutoff: the motion's bandwidth f_m is where 99.5 % of the detrended positions' power lies (FFT);
   the low-pass cutoff is f_c = clip(5 f_m, 1 Hz, 20 Hz) and at most 0.2 f_s, so it follows the
   sample rate at 30-100 Hz recordings.
3. A 4th-order Butterworth low-pass run forwards and backwards (scipy.signal.sosfiltfilt: zero phase,
   no lag between torque and state) on the positions AND the efforts, so both see the same smoothing.
4. q', q'' as the first and second derivatives of a quintic interpolating spline through the filtered
   positions (scipy.interpolate.make_interp_spline): exact for polynomials to degree 5 and accurate to
   near the cutoff at any rate, where finite differences lose 7 % of the acceleration at 30 Hz.
   The recorded velocity is not used (it may be missing); q' comes from the positions.
   sign(q') goes through the same filter (the Coulomb columns of the regressor: parallel filtering,
   Gautier 1997; the other columns are smooth functions of the filtered states).
5. The whole recording is filtered (its ends padded: lowpass), then the window cut out; for the fit
   3 / f_c at the recording's ends (the filter's edges) are dropped, for evaluate nothing (edges=False,
   joint_states: every joint state of the window, merged by name as the node merges them); the fit
   takes every k-th sample so that its rate stays above 5 f_c (parallel decimation, Gautier 1997:
   the filtered signals carry nothing above f_c).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ..errors import clip_names
from .bag import BagError

MIN_DURATION = 2.0   # s of window after the edges are dropped
MIN_SAMPLES = 30
EFFORT_LIMIT = 1e9     # N m (N): above any joint's torque (or force) by orders of magnitude
POSITION_LIMIT = 1e6   # rad (m)
STILL = 1e-9           # rad/s (m/s): a differentiated velocity below this is zero


@dataclass
class Samples:
    joints: tuple         # model joint order
    t: np.ndarray         # s since the topic's first message
    Q: np.ndarray
    QD: np.ndarray
    QDD: np.ndarray
    TAU: np.ndarray       # filtered efforts (what the fit uses)
    TAU_RAW: np.ndarray   # efforts on the grid, unfiltered (what evaluate compares with)
    fs: float             # grid rate (Hz)
    cutoff: float         # low-pass cutoff (Hz)
    decimate: int
    mask: np.ndarray      # per sample and joint: usable for the fit (not saturated)
    SGN: np.ndarray = None  # sign(QD) through the same low-pass (the Coulomb columns, parallel filtering)
    warnings: list = field(default_factory=list)
    grid: tuple = None      # (t, Q, QD, QDD) of the whole recording's grid (filtered), and the rows kept
    keep: np.ndarray = None

    def shapes(self, vc, vs, rows=None):
        """{"sign", "coulomb", "stribeck"}: the joint law's nonlinear columns (stack.law_shapes) with vc, vs
        per model joint, low-passed over the whole recording like the efforts, at the window's rows
        (``rows``: a subset of them, indices into the window)."""
        from .stack import law_shapes

        _, sc, ss = law_shapes(self.grid[2], vc, vs)
        k = self.keep if rows is None else self.keep[rows]
        return {"sign": self.SGN if rows is None else self.SGN[rows], "coulomb": lowpass(sc, self.fs, self.cutoff)[k],
                "stribeck": lowpass(ss, self.fs, self.cutoff)[k] if np.any(np.asarray(vs) > 0) else 0.0 * sc[k]}


def _rate(rec, names):
    dts = [np.median(np.diff(rec.joints[n].t)) for n in names if rec.joints[n].t.size > 1]
    dts = [d for d in dts if d > 0]
    if not dts:
        raise BagError("the recording has fewer than two samples per joint: too short to identify anything")
    return 1.0 / float(np.median(dts))


def motion_bandwidth(Q, fs):
    """Frequency (Hz) below which 99.5 % of the detrended positions' power lies (largest over joints)."""
    n = Q.shape[0]
    X = Q - np.linspace(0, 1, n)[:, None] * (Q[-1] - Q[0]) - Q[0]  # detrended: the ends meet
    P = np.abs(np.fft.rfft(X - X.mean(axis=0), axis=0)) ** 2
    f = np.fft.rfftfreq(n, 1.0 / fs)
    tot = P.sum(axis=0)
    out = 0.0
    for j in range(Q.shape[1]):
        if tot[j] <= 0:
            continue
        c = np.cumsum(P[:, j]) / tot[j]
        out = max(out, float(f[min(np.searchsorted(c, 0.995), f.size - 1)]))
    return out


def choose_cutoff(Q, fs):
    fm = motion_bandwidth(Q, fs)
    return float(min(np.clip(5.0 * fm, 1.0, 20.0), 0.2 * fs))


def lowpass(X, fs, fc):
    """The zero-phase low-pass of the module docstring, its edges padded by ``_extend``."""
    from scipy.signal import sosfiltfilt

    sos = _butter(float(fc), float(fs))
    n = X.shape[0]
    pad = min(n - 1, int(np.ceil(3.0 * fs / fc)))
    if pad < 8:
        return sosfiltfilt(sos, X, axis=0)
    L = min(n, max(8, int(np.ceil(0.5 * fs / fc))))
    Xp = np.concatenate([_extend(X[:L][::-1], pad)[::-1], X, _extend(X[-L:], pad)], axis=0)
    return sosfiltfilt(sos, Xp, axis=0, padtype=None)[pad:pad + n]


@functools.lru_cache(maxsize=16)
def _butter(fc, fs):
    from scipy.signal import butter

    return butter(4, fc, fs=fs, output="sos")


def _extend(Y, pad):
    """``pad`` samples after the end of Y (L x m): the cubic fitted to Y continued, plus Y's deviation
    from it reflected through the end point (an odd extension of the residual). Filtering the padded
    signal then keeps the trend's slope and curvature at the recording's ends, where sosfiltfilt's own
    odd extension of the signal forces the second derivative towards zero (an acceleration error over
    the last ~1 / f_c that evaluate, which keeps every message, would see). The cubic over 0.5 / f_c:
    on sums of sines at 200 Hz and 1 kHz (f_c = 2.5 Hz) the acceleration's RMS error over the first and
    last second fell from about 2x the signal (sosfiltfilt alone) to below 1 % of it; a quadratic, or a
    fit over 1-2 / f_c, did 3-20 times worse."""
    L = Y.shape[0]
    u = np.arange(L, dtype=float) - (L - 1)           # 0 at the end point
    V = np.vander(u / L, 4)
    coef, *_ = np.linalg.lstsq(V, Y, rcond=None)
    res = Y - V @ coef
    k = np.arange(1, pad + 1, dtype=float)
    trend = np.vander(k / L, 4) @ coef
    idx = np.clip(L - 1 - np.arange(1, pad + 1), 0, L - 1)
    return trend + (2 * res[-1] - res[idx])


def derivatives(t, X):
    """X', X'' at t: derivatives of the quintic interpolating spline through (t, X)."""
    from scipy.interpolate import make_interp_spline

    sp = make_interp_spline(t, X, k=5, axis=0)
    return sp.derivative(1)(t), sp.derivative(2)(t)


def _saturation(e, limit):
    """Samples where the effort sits at a plateau of its extreme (clipping) or at the URDF limit (within
    0.1 %). Efforts beyond the limit are not a drive at its limit but another unit, or a limit below
    what the drive gives: they stay in the fit (prepare warns)."""
    f = np.isfinite(e)
    if f.sum() < 10:
        return np.zeros(e.size, bool)
    top = float(np.nanmax(np.abs(e)))
    sat = np.zeros(e.size, bool)
    if top > 0:
        at = f & (np.abs(e) >= top * (1 - 1e-4))
        if at.sum() >= max(5, 0.005 * f.sum()):
            sat |= at
    if limit and limit > 0:
        sat |= f & (np.abs(np.abs(e) - limit) <= 1e-3 * limit)
    return sat


def _magnitudes(s, name, topic, warnings):
    """Refuses positions and efforts no joint has (the fit's squares would overflow, or the units are
    wrong), naming the joint; infinite values are left out like missing ones, with a warning."""
    for what, x, limit, unit in (("efforts", s.effort, EFFORT_LIMIT, "N m or N"),
                                 ("positions", s.position, POSITION_LIMIT, "rad or m")):
        ok = np.isfinite(x)
        if ok.any() and float(np.abs(x[ok]).max()) > limit:
            raise BagError(f"joint '{clip_names([name], 80, quote=False)}': {what} up to {np.abs(x[ok]).max():.3g} in "
                           f"the recording on '{topic}': not what a joint measures (above {limit:g} {unit}); "
                           "check the driver's units and fields")
        inf = int(np.isinf(x).sum())
        if inf:
            warnings.append(f"joint '{name}': {inf} infinite {what} left out (like missing values)")
    if not np.isfinite(s.position).any():
        raise BagError(f"joint '{clip_names([name], 80, quote=False)}' has no finite position in the recording on "
                       f"'{topic}'")


def prepare(rec, model, t_from=None, t_to=None, cutoff=None, edges=True) -> Samples:
    """The Samples of the model's joints from a Recording (module docstring). BagError for joints of
    the model missing from the recording, a window with too few samples, or joints without efforts.
    ``edges=False`` (evaluate): the filter's edges at the recording's ends are kept."""
    names = list(model.joint_names)
    warnings = []
    missing = [n for n in names if n not in rec.joints]
    if missing:
        raise BagError(f"joints of the URDF missing from the recording on '{rec.topic}': {clip_names(missing)} "
                       f"(the recording has {clip_names(sorted(rec.joints))})")
    extra = sorted(set(rec.joints) - set(names))
    if extra:
        warnings.append(f"joints in the recording that the URDF does not have are ignored: {clip_names(extra)}")
    no_eff = [n for n in names if not np.isfinite(rec.joints[n].effort).any()]
    if no_eff:
        raise BagError(f"no effort for joints {clip_names(no_eff)} in the recording on '{rec.topic}': "
                       "identification needs the measured torque of every moving joint")
    for nm in names:
        _magnitudes(rec.joints[nm], nm, rec.topic, warnings)
    zero = [n for n in names if not np.any(rec.joints[n].effort[np.isfinite(rec.joints[n].effort)])]
    if len(zero) == len(names):
        raise BagError(f"every effort in the recording on '{rec.topic}' is 0: the driver does not report the "
                       "measured torques there (identification needs them)")
    fs = _rate(rec, names)
    lo = max(float(rec.joints[n].t[0]) for n in names)
    hi = min(float(rec.joints[n].t[-1]) for n in names)
    a = lo if t_from is None else max(lo, float(t_from))
    b = hi if t_to is None else min(hi, float(t_to))
    dt = 1.0 / fs
    n = int(np.floor((hi - lo) / dt + 1e-9)) + 1 if hi > lo else 0
    inside = int(np.floor((b - a) / dt + 1e-9)) + 1 if b > a else 0
    if inside < MIN_SAMPLES or n < MIN_SAMPLES:
        raise BagError(f"too short to identify anything: the window [{a:.3g}, {b:.3g}] s holds {max(inside, 0)} "
                       f"samples at {fs:.4g} Hz (the recording spans {rec.duration:.3g} s); at least {MIN_SAMPLES} "
                       f"and {MIN_DURATION:g} s are needed")
    # the whole recording is filtered and differentiated; the window is cut afterwards (no filter edge
    # inside the recording), and 3 / f_c at the recording's own ends is dropped
    t = lo + dt * np.arange(n)
    Q, E = np.empty((n, len(names))), np.empty((n, len(names)))
    for j, nm in enumerate(names):
        s = rec.joints[nm]
        ok = np.isfinite(s.position)
        pos = s.position[ok]
        if model.joint_kinds.get(nm) == "continuous":
            pos = np.unwrap(pos)
        Q[:, j] = np.interp(t, s.t[ok], pos)
        okE = np.isfinite(s.effort)
        E[:, j] = np.interp(t, s.t[okE], s.effort[okE])
        gaps = np.diff(s.t[ok])
        if gaps.size and gaps.max() > max(10 * dt, 0.1):
            warnings.append(f"joint '{nm}': a gap of {gaps.max():.3g} s without samples (interpolated across)")
    fc = choose_cutoff(Q, fs) if cutoff is None else float(min(cutoff, 0.45 * fs))
    edge = int(np.ceil(3.0 * fs / fc)) if edges else 0
    keep = np.nonzero((t >= a - 1e-9) & (t <= b + 1e-9) & (np.arange(n) >= edge) & (np.arange(n) < n - edge))[0]
    if keep.size < MIN_SAMPLES or keep.size * dt < MIN_DURATION:
        raise BagError(f"too short to identify anything: {keep.size * dt:.3g} s of samples at {fs:.4g} Hz in the "
                       f"window [{a:.3g}, {b:.3g}] s after the filter's edges at the recording's ends (low-pass at "
                       f"{fc:.3g} Hz, {edge * dt:.3g} s each); at least {MIN_DURATION:g} s are needed")
    Qf = lowpass(Q, fs, fc)
    Ef = lowpass(E, fs, fc)
    QD, QDD = derivatives(t, Qf)
    QD[np.abs(QD) < STILL] = 0.0  # a joint held still: rounding, not motion (sign(qd) would flip on it)
    SGN = lowpass(np.sign(QD), fs, fc)
    sat = np.zeros((n, len(names)), bool)
    for j, nm in enumerate(names):
        lim = model.joint_limits.get(nm)
        limit = lim[2] if lim is not None and np.isfinite(lim[2]) and lim[2] > 0 else None
        peak = float(np.nanmax(np.abs(E[:, j]))) if np.isfinite(E[:, j]).any() else 0.0
        if limit and peak > 1.01 * limit:
            warnings.append(f"joint '{nm}': efforts up to {peak:.4g}, {peak / limit:.3g} times the URDF's effort limit "
                            f"{limit:.4g}: another unit (the fit's efforts' scale takes one common to all joints), or "
                            "a limit below what the drive gives; used as recorded")
        s = _saturation(E[:, j], limit)
        if s.any():
            warnings.append(f"joint '{nm}': effort saturated or clipped at {np.abs(E[s, j]).max():.4g} in "
                            f"{s.mean() * 100:.2g} % of the samples (left out of the fit)")
            idx = np.nonzero(s)[0]
            for k in range(-edge, edge + 1):  # the filter smears a clipped sample over ~1/fc
                sat[np.clip(idx + k, 0, n - 1), j] = True
    dec = max(1, int(np.floor(fs / (5.0 * fc))))
    return Samples(joints=tuple(names), t=t[keep], Q=Qf[keep], QD=QD[keep], QDD=QDD[keep], TAU=Ef[keep],
                   TAU_RAW=E[keep], fs=fs, cutoff=fc, decimate=dec, mask=~sat[keep], SGN=SGN[keep],
                   warnings=warnings, grid=(t, Qf, QD, QDD), keep=keep)


def joint_states(rec, names, t_from=None, t_to=None):
    """For evaluate: the recording's joint states as the node merges them (joint_states.JointStateMerger: the
    latest value of each joint by name), none dropped at the filter's edges. A joint state is complete
    when every joint of ``names`` has a new value since the previous one: one per message when one
    publisher sends every joint, one per round when several publishers each send some (joints 1-4 and
    5-7: two messages, one joint state). Returns (t: each joint state's time, the stamp of the message
    that completed it, within the window; T: per joint state and joint the stamp of the value it
    holds; E: the recorded effort there, NaN where that message had none)."""
    series = [rec.joints[n] for n in names]
    lo = -np.inf if t_from is None else float(t_from) - 1e-9
    hi = np.inf if t_to is None else float(t_to) + 1e-9
    first = series[0].t
    if all(s.t.size == first.size and np.array_equal(s.t, first) for s in series):
        T = np.repeat(first[:, None], len(names), axis=1)   # every message names every joint
        E = np.stack([s.effort for s in series], axis=1)
        t = first
    else:
        tt = np.concatenate([s.t for s in series])
        jj = np.concatenate([np.full(s.t.size, j) for j, s in enumerate(series)])
        kk = np.concatenate([np.arange(s.t.size) for s in series])
        order = np.argsort(tt, kind="stable")
        latest = np.zeros(len(names), dtype=np.int64)
        fresh = np.zeros(len(names), bool)
        left = len(names)
        rows, done = [], []
        for e in order:
            j = jj[e]
            latest[j] = kk[e]
            if not fresh[j]:
                fresh[j] = True
                left -= 1
            if left == 0:
                rows.append(latest.copy())
                done.append(tt[e])
                fresh[:] = False
                left = len(names)
        K = np.array(rows, dtype=np.int64).reshape(-1, len(names))
        T = np.stack([series[j].t[K[:, j]] for j in range(len(names))], axis=1) if K.size else \
            np.zeros((0, len(names)))
        E = np.stack([series[j].effort[K[:, j]] for j in range(len(names))], axis=1) if K.size else \
            np.zeros((0, len(names)))
        t = np.asarray(done, dtype=float)
    w = (t >= lo) & (t <= hi)
    return t[w], T[w], E[w]


def states_at(S, times):
    """The filtered grid's (Q, QD, QDD) interpolated at ``times`` (any shape of stamps: (n,) -> (n, nv))."""
    t_grid, Qg, QDg, QDDg = S.grid

    def at(X):
        return np.stack([np.interp(times, t_grid, X[:, j]) for j in range(X.shape[1])], axis=1)
    return at(Qg), at(QDg), at(QDDg)
