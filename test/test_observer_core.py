"""The momentum observer (dynamics_node/algorithms/estimation/observer.py) against a simulation written
here: the 7-DoF arm under a PD controller tracking a sine, pushed by a known wrench at a link for one second, integrated
with RK4 on the core's forward dynamics (f_ext). Also closed forms of the discretisation (a robot
held still under a constant external torque), the resets, the wrench estimate and bad input."""
from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

import dynamics_node as dn
from dynamics_node.algorithms.estimation import observer as obs

REPO = pathlib.Path(__file__).resolve().parent.parent
ARM7 = str(REPO / "urdf" / "arm7.urdf")
LINK = "link7"
F_PUSH = np.array([12.0, -8.0, 15.0, 0.6, -1.0, 0.1])   # link axes, about the link origin
T_ON, T_OFF, T_END = 1.5, 2.5, 3.5
RATE = 1000.0
K = 200.0


@pytest.fixture(scope="module")
def model():
    return dn.load_model(ARM7)


def simulate(model, seconds=T_END, push=True, rate=RATE, substeps=2, speed=1.0, window=(T_ON, T_OFF)):
    """Samples (t, q, qd, tau, tau_ext) at `rate`: the arm under gravity compensation plus a PD
    (weighted by H) tracking a sine on every joint; tau is held over each sample interval (zero-order hold, as a
    controller sends it) and is what the joint-state effort reports at the sample."""
    n = model.nv
    q0 = np.array([0.2, 0.6, -0.3, -1.2, 0.4, 0.8, -0.2])
    amp = np.array([0.5, 0.4, 0.5, 0.6, 0.7, 0.6, 0.8]) * speed
    w = 2 * math.pi * np.array([0.5, 0.4, 0.6, 0.5, 0.7, 0.45, 0.55])
    # PD weighted by H(q) (a light wrist joint gets small gains): about 20 rad/s of closed-loop
    # bandwidth, critically damped, well within a 1 kHz zero-order hold
    kp, kd = 400.0, 40.0

    def desired(t):
        return q0 + amp * np.sin(w * t), amp * w * np.cos(w * t)

    def fext(t):
        return {LINK: tuple(F_PUSH)} if push and window[0] <= t < window[1] else None

    def f(t, x, tau, fx):
        q, qd = x[:n], x[n:]
        return np.concatenate([qd, dn.forward_dynamics(model, q, qd, tau, f_ext=fx)])

    dt = 1.0 / rate
    h = dt / substeps
    x = np.concatenate(desired(0.0))
    out = []
    for k in range(int(round(seconds * rate)) + 1):
        t = k * dt
        q, qd = x[:n], x[n:]
        qdes, qddes = desired(t)
        tau = dn.gravity(model, q) + dn.mass_matrix(model, q) @ (kp * (qdes - q) + kd * (qddes - qd))
        fx = fext(t)
        J = obs.link_jacobian(model, q, LINK)
        out.append((t, q.copy(), qd.copy(), tau.copy(), J.T @ F_PUSH if fx else np.zeros(n)))
        for s in range(substeps):  # the push switches on and off at sample instants
            ts = t + s * h
            k1 = f(ts, x, tau, fx)
            k2 = f(ts + h / 2, x + h / 2 * k1, tau, fx)
            k3 = f(ts + h / 2, x + h / 2 * k2, tau, fx)
            k4 = f(ts + h, x + h * k3, tau, fx)
            x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return out


@pytest.fixture(scope="module")
def sim(model):
    return simulate(model)


def run_observer(model, samples, gain=K):
    o = obs.MomentumObserver(model, gain, timeout=0.5)
    return np.array([o.update(t, q, qd, tau) for t, q, qd, tau, _ in samples])


def _windows(samples):
    t = np.array([s[0] for s in samples])
    ext = np.array([s[4] for s in samples])
    push = (t >= T_ON + 0.05) & (t < T_OFF)
    free = ((t >= 0.05) & (t < T_ON)) | (t >= T_OFF + 0.05)
    return t, ext, push, free


def test_observer_follows_the_external_torque_and_stays_near_zero_in_free_motion(model, sim):
    r = run_observer(model, sim)
    t, ext, push, free = _windows(sim)
    scale = np.abs(ext).max()
    assert scale > 5.0  # the push is felt at every joint that supports the link
    err_push = np.abs(r[push] - ext[push]).max()
    err_free = np.abs(r[free]).max()
    # within a few percent of J^T F after the step, near zero in free motion (velocity up to 2.8 rad/s)
    assert err_push < 0.03 * scale, f"during the push: max |r - J^T F| = {err_push:.4g} (scale {scale:.4g})"
    assert err_free < 0.01 * scale, f"free motion: max |r| = {err_free:.4g} (scale {scale:.4g})"
    # the observer is a first-order filter with time constant 1/K: 63 % of the step after 1/K
    k_on = int(np.flatnonzero(t >= T_ON)[0])
    k_tau = k_on + int(round(RATE / K))
    frac = (r[k_tau] @ ext[k_tau]) / (ext[k_tau] @ ext[k_tau])
    assert abs(frac - (1 - math.exp(-1))) < 0.03, frac


def test_a_wrong_coriolis_term_shows_in_free_motion(model, sim, monkeypatch):
    """C q̇ in place of Cᵀ q̇: the same check of free motion fails (what the test above guards)."""
    right = obs._coriolis
    monkeypatch.setattr(obs, "_coriolis", lambda m, q, qd: np.asarray(right(m, q, qd)).T)
    r = run_observer(model, sim)
    _, ext, _, free = _windows(sim)
    assert np.abs(r[free]).max() > 0.05 * np.abs(ext).max()


def test_the_wrench_estimate_matches_the_applied_wrench(model):
    """The arm moving slower (a fifth of the amplitudes: J^T F changes slower, so the observer's lag
    of 1/K behind it is smaller), pushed: the wrench estimate at every 10th sample of the push."""
    sim = simulate(model, seconds=T_OFF, speed=0.2)
    r = run_observer(model, sim)
    t, _, push, _ = _windows(sim)
    for k in np.flatnonzero(push)[::10]:
        est = obs.external_wrench(model, sim[k][1], LINK, r[k])
        assert est.rank == 6 and math.isfinite(est.condition_number)
        # within 4 % of the force and of the torque (J's condition number, 15 to 60 along the path,
        # amplifies what is left of that lag)
        assert np.linalg.norm(est.wrench[:3] - F_PUSH[:3]) < 0.04 * np.linalg.norm(F_PUSH[:3]), (t[k], est.wrench)
        assert np.linalg.norm(est.wrench[3:] - F_PUSH[3:]) < 0.04 * np.linalg.norm(F_PUSH[3:]), (t[k], est.wrench)


def test_wrench_from_exact_torques_and_rank_loss_near_the_base(model):
    rng = np.random.default_rng(3)
    q = rng.uniform(-1, 1, 7)
    F = rng.normal(size=6)
    # independent J in link axes: finite differences of the link pose (rows [linear; angular])
    J = np.zeros((6, 7))
    T0 = dn.link_pose(model, q, LINK)
    for j in range(7):
        dq = np.zeros(7)
        dq[j] = 1e-6
        Tp, Tm = dn.link_pose(model, q + dq, LINK), dn.link_pose(model, q - dq, LINK)
        J[:3, j] = T0[:3, :3].T @ (Tp[:3, 3] - Tm[:3, 3]) / 2e-6
        dR = T0[:3, :3].T @ (Tp[:3, :3] - Tm[:3, :3]) / 2e-6
        J[3:, j] = [dR[2, 1], dR[0, 2], dR[1, 0]]
    np.testing.assert_allclose(obs.link_jacobian(model, q, LINK), J, atol=1e-7)
    est = obs.external_wrench(model, q, LINK, J.T @ F)
    np.testing.assert_allclose(est.wrench, F, atol=1e-9)
    assert est.rank == 6 and np.abs(est.residual).max() < 1e-9
    # link2 moves with two joints: only two wrench components are observable there
    est2 = obs.external_wrench(model, q, "link2", J.T @ F)
    assert est2.rank == 2 and est2.condition_number == math.inf
    with pytest.raises(dn.InputError, match="unknown link 'nope'"):
        obs.external_wrench(model, q, "nope", np.zeros(7))


def test_the_discrete_update_is_the_exact_first_order_response_for_any_step(model):
    """Held still (q̇ = 0) by τ = g − τ_ext: r(t) = (1 − e^{−K (t − t0)}) τ_ext at every sample,
    whatever the spacing of the stamps and however large K dt (forward Euler diverges past 2)."""
    q = np.array([0.3, -0.5, 0.2, -1.0, 0.1, 0.7, 0.0])
    ext = np.array([1.0, -2.0, 0.5, 3.0, -0.2, 0.1, 0.05])
    tau = dn.gravity(model, q) - ext
    Kj = np.array([5.0, 50.0, 200.0, 1000.0, 20.0, 80.0, 3000.0])
    o = obs.MomentumObserver(model, Kj)
    t0 = 100.0
    stamps = t0 + np.cumsum(np.r_[0.0, np.random.default_rng(0).uniform(1e-4, 0.02, 200)])
    for t in stamps:
        r = o.update(t, q, np.zeros(7), tau)
        np.testing.assert_allclose(r, (1 - np.exp(-Kj * (t - t0))) * ext, rtol=1e-9, atol=1e-12)


def test_gaps_repeats_and_stamps_going_back(model):
    q, z = np.zeros(7), np.zeros(7)
    ext = np.ones(7)
    tau = dn.gravity(model, q) - ext
    o = obs.MomentumObserver(model, 10.0, timeout=0.5)
    assert np.array_equal(o.update(1.0, q, z, tau), z) and o.last_reset == "first sample"
    r1 = o.update(1.1, q, z, tau)
    np.testing.assert_allclose(r1, (1 - math.exp(-1.0)) * ext, rtol=1e-12)
    assert o.update(1.1, q, z, tau) is None          # a repeated stamp is not integrated
    assert np.array_equal(o.update(1.7, q, z, tau), z) and "gap of 0.6" in o.last_reset
    o.update(1.8, q, z, tau)
    assert np.array_equal(o.update(1.75, q, z, tau), z) and "went back" in o.last_reset
    o.update(1.85, q, z, tau)
    o.reset()
    assert np.array_equal(o.update(1.9, q, z, tau), z) and o.last_reset == "reset"


def test_bad_input_is_refused_by_name(model):
    with pytest.raises(dn.InputError, match="floating-base"):
        obs.MomentumObserver(dn.load_model(ARM7, floating_base=True), 50.0)
    for bad in (0.0, -1.0, math.nan, [1.0, 2.0]):
        with pytest.raises(dn.InputError, match="gain"):
            obs.MomentumObserver(model, bad)
    o = obs.MomentumObserver(model, 50.0)
    z = np.zeros(7)
    with pytest.raises(dn.InputError, match=r"tau\[2\] is nan"):
        o.update(0.0, z, z, [0, 0, math.nan, 0, 0, 0, 0])
    with pytest.raises(dn.InputError, match="qd: expected 7 values, got 6"):
        o.update(0.0, z, np.zeros(6), z)
    with pytest.raises(dn.InputError, match="stamp"):
        o.update(math.inf, z, z, z)


def test_the_wrench_solve_equals_numpy_least_squares_full_rank_or_not():
    """The 6 x 6 Jacobi kernel against numpy's SVD-based lstsq (minimum-norm solution, same rcond)."""
    rng = np.random.default_rng(7)
    for trial in range(200):
        nv = int(rng.integers(6, 10)) if trial % 2 else int(rng.integers(1, 6))
        J = rng.normal(size=(6, nv)) * rng.uniform(0.01, 3.0, size=(6, 1))
        if trial % 5 == 0:      # rank-deficient: a product of thinner factors
            k = int(rng.integers(1, 6))
            J = rng.normal(size=(6, k)) @ rng.normal(size=(k, nv))
        r = rng.normal(size=nv)
        F, rank, sv, res = obs._wrench_solve(J, r, obs.WRENCH_RCOND)
        np.testing.assert_allclose(res, r - J.T @ F, rtol=1e-12, atol=1e-12)
        Fr, _, rank_r, sv_r = np.linalg.lstsq(J.T, r, rcond=obs.WRENCH_RCOND)
        assert rank == rank_r, trial
        np.testing.assert_allclose(F, Fr, rtol=1e-7, atol=1e-9 * (1 + np.abs(Fr).max()))
        # singular values above rcond agree; those below (from sqrt(eig J Jᵀ): resolved to about
        # 1e-8 of the largest, hence rcond 1e-6) are below it in both
        big = sv_r > obs.WRENCH_RCOND * sv_r.max()
        np.testing.assert_allclose(sv[:len(sv_r)][big], sv_r[big], rtol=1e-7)
        assert (sv[rank:] <= obs.WRENCH_RCOND * sv[0]).all()
