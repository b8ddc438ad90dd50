"""dynamics_identify on simulated recordings with a known truth: a perturbed, physically
consistent copy of the robot plus friction; torques from Pinocchio's RNEA on the truth URDF (not the
core) plus friction; bags written with the rosbags writer, with noise. The identified URDF must
load strictly (and in Pinocchio), predict the truth's torques on a fresh trajectory within a few %
of their spread, and its base parameters must equal the truth's."""
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

import dynamics_node as dn
import identify_sim as sim
import node_support as ns
from dynamics_node.identify.__main__ import main
from dynamics_node.urdf_source import read_description

pin = pytest.importorskip("pinocchio")
ROBOTS = {"arm7": str(ns.ARM7), "panda": str(ns.erd("panda_description/urdf/panda.urdf")),
          "ur5": str(ns.erd("ur_description/urdf/ur5_robot.urdf"))}


class Case:
    def __init__(self, robot, tmp, fs=200.0, duration=40.0, seed=3, noise=0.02):
        self.urdf = ROBOTS[robot]
        text, _ = read_description(self.urdf, None)
        rng = np.random.default_rng(seed)
        self.truth, self.fr = sim.perturbed_urdf(text, rng)
        self.model = dn.load_model(self.urdf)
        self.t = np.arange(int(duration * fs)) / fs
        self.Q, self.QD, self.QDD = sim.fourier_trajectory(self.model, self.t, rng)
        self.TAU = sim.truth_torques(self.truth, self.model, self.fr, self.Q, self.QD, self.QDD)
        self.noisy = self.TAU + noise * self.TAU.std(axis=0) * rng.normal(size=self.TAU.shape)
        self.tmp = tmp
        self.bag = str(tmp / f"{robot}_bag")
        sim.write_bag(self.bag, self.t, self.model.joint_names, self.Q, self.QD, self.noisy)

    def fresh(self, model_path):
        """Relative RMS (of the truth's spread) of the identified model on a fresh trajectory."""
        t = np.arange(0, 30, 0.01)
        Q, QD, QDD = sim.fourier_trajectory(self.model, t, np.random.default_rng(99), period=7.0)
        T = sim.truth_torques(self.truth, self.model, self.fr, Q, QD, QDD)
        P = dn.inverse_dynamics_batch(dn.load_model(model_path, friction=True, strict=True), Q, QD, QDD)
        return np.sqrt(np.mean((P - T) ** 2, axis=0)) / T.std(axis=0)


@pytest.fixture(scope="module")
def arm7(tmp_path_factory):
    return Case("arm7", tmp_path_factory.mktemp("arm7"))


def _fit(case, *extra, name="out"):
    out = case.tmp / f"{name}.urdf"
    rep = case.tmp / f"{name}.json"
    rc = main(["fit", case.bag, "--urdf", case.urdf, "--output", str(out), "--report", str(rep), *extra])
    assert rc == 0
    return out, json.loads(rep.read_text())


def _truth_base(case, out_path):
    """Base parameters of the truth and of the identified model (same base map: the nominal URDF's)."""
    from dynamics_node.identify.fit_params import setup

    par = setup(case.model, dn.load_model(case.urdf, friction=True))
    B = par.base_map()
    nb = case.model.nb

    def vec(path):
        m, mf = dn.load_model(path), dn.load_model(path, friction=True)
        p = setup(m, mf).prior
        return p
    pt = vec(_tmp_truth(case))
    po = vec(str(out_path))
    assert nb * 10 < pt.size
    return B @ pt, B @ po, B, par


def _tmp_truth(case):
    p = case.tmp / "truth.urdf"
    p.write_text(case.truth)
    return str(p)


def test_arm7_truth_recovered(arm7):
    out, rep = _fit(arm7, "--plot", str(arm7.tmp / "fit.png"))
    rel = arm7.fresh(str(out))
    assert rel.max() < 0.02, rel
    bt, bo, B, par = _truth_base(arm7, out)
    std = np.array([b["std"] for b in rep["base_parameters"]])
    scale = np.abs(B) @ par.scale_data
    # every base parameter within 5 standard deviations (the report's) of the truth's
    assert np.all(np.abs(bo - bt) < 5 * std + 1e-6 * scale), np.max(np.abs(bo - bt) / std)
    assert rep["condition_number"] < 100 and all(b["determined"] for b in rep["base_parameters"])
    # held out: the constrained fit is as good as plain least squares on the fit's samples
    assert np.all(np.array(rep["rms"]) <= 1.25 * np.array(rep["rms_unconstrained_ls"]) + 1e-9)
    assert (arm7.tmp / "fit.png").stat().st_size > 10000
    pm = pin.buildModelFromUrdf(str(out))  # another URDF tool reads it
    for k in range(1, pm.njoints):
        I = pm.inertias[k]
        assert I.mass > 0 and np.linalg.eigvalsh(I.inertia).min() > 0


def test_arm7_output_keeps_everything_else(arm7):
    out, _ = _fit(arm7, name="keep")
    import xml.etree.ElementTree as ET

    a, b = ET.parse(arm7.urdf).getroot(), ET.parse(out).getroot()
    for tag in ("joint", "link"):
        assert [e.get("name") for e in a.findall(tag)] == [e.get("name") for e in b.findall(tag)]
    for ja, jb in zip(a.findall("joint"), b.findall("joint")):
        for sub in ("origin", "axis", "limit"):
            ea, eb = ja.find(sub), jb.find(sub)
            assert (ea is None) == (eb is None) and (ea is None or ea.attrib == eb.attrib)
        if ja.get("type") != "fixed":
            d = jb.find("dynamics")
            assert float(d.get("damping")) >= 0 and float(d.get("friction")) >= 0


@pytest.mark.parametrize("factor", [2.0, 1000.0])
def test_efforts_scaled_give_torques_scaled(arm7, tmp_path, factor):
    """Efforts in another unit (x 1000: mN m, far beyond the URDF's effort limits) give the same model
    in that unit, with a warning naming each joint; they are not taken for a drive saturated at its
    limit (which had left every sample out, and the fit said there was too little excitation)."""
    out1, _ = _fit(arm7, name="single")
    bag2 = str(tmp_path / "scaled")
    sim.write_bag(bag2, arm7.t, arm7.model.joint_names, arm7.Q, arm7.QD, factor * arm7.noisy)
    out2, rep = tmp_path / "scaled.urdf", tmp_path / "scaled.json"
    assert main(["fit", bag2, "--urdf", arm7.urdf, "--output", str(out2), "--report", str(rep)]) == 0
    t = np.arange(0, 20, 0.02)
    Q, QD, QDD = sim.fourier_trajectory(arm7.model, t, np.random.default_rng(5), period=6.0)
    P1 = dn.inverse_dynamics_batch(dn.load_model(str(out1), friction=True), Q, QD, QDD)
    P2 = dn.inverse_dynamics_batch(dn.load_model(str(out2), friction=True), Q, QD, QDD)
    assert np.max(np.abs(P2 - factor * P1)) < 1e-3 * factor * np.abs(P1).max()
    warns = json.loads(rep.read_text())["warnings"]
    beyond = [n for n in arm7.model.joint_names if any(f"'{n}': efforts up to" in w for w in warns)]
    assert beyond == (list(arm7.model.joint_names) if factor > 100 else []), warns
    assert not any("saturated" in w for w in warns), warns


def test_evaluate_against_independent_figures(arm7):
    out, _ = _fit(arm7, "--to", "30", name="train")
    rep = arm7.tmp / "eval.json"
    assert main(["evaluate", arm7.bag, "--urdf", str(out), "--from", "30", "--report", str(rep),
                 "--plot", str(arm7.tmp / "eval.png")]) == 0
    ev = json.loads(rep.read_text())
    assert set(ev) >= {"joints", "rms", "max", "samples"} and ev["joints"] == list(arm7.model.joint_names)
    assert ev["samples"] == np.sum(arm7.t >= 30 - 1e-9)  # every message (none dropped at the edges)
    # independent: the exact states of the simulation, Pinocchio-free core ID of the same URDF and its
    # OUT.yaml, on a window inside the recording (at its very end the differentiated velocity of a
    # sign()-friction joint may have the wrong sign near a zero crossing: 2 fc at that sample)
    assert main(["evaluate", arm7.bag, "--urdf", str(out), "--from", "30", "--to", "38", "--report", str(rep)]) == 0
    ev = json.loads(rep.read_text())
    k = (arm7.t >= 30 - 1e-9) & (arm7.t <= 38 + 1e-9)
    assert ev["samples"] == k.sum()
    from dynamics_node.identify.law_out import read

    arm, law = read(str(out.with_suffix(".yaml")), arm7.model)
    model = dn.load_model(str(out), armature=arm, friction=law)
    P = dn.inverse_dynamics_batch(model, arm7.Q[k], arm7.QD[k], arm7.QDD[k])
    ref = np.sqrt(np.mean((arm7.noisy[k] - P) ** 2, axis=0))
    assert np.all(np.abs(np.array(ev["rms"]) - ref) < 0.3 * ref), (ev["rms"], ref)


def test_publishers_bare_db3_mcap_and_window(arm7, tmp_path):
    names = list(arm7.model.joint_names)
    split = str(tmp_path / "split")
    sim.write_bag(split, arm7.t, names, arm7.Q, arm7.QD, arm7.noisy, split=[names[:3], names[3:]])
    mc = str(tmp_path / "mc")
    sim.write_bag(mc, arm7.t, names, arm7.Q, arm7.QD, arm7.noisy, storage="mcap")
    db3 = next((tmp_path / "split").glob("*.db3"))
    bare = tmp_path / "bare.db3"
    shutil.copy(db3, bare)
    mcap_bare = tmp_path / "bare.mcap"
    shutil.copy(next((tmp_path / "mc").glob("*.mcap")), mcap_bare)
    for src in (split, mc, str(bare), str(mcap_bare)):
        out = tmp_path / "o.urdf"
        rep = tmp_path / "o.json"
        assert main(["fit", src, "--urdf", arm7.urdf, "--output", str(out), "--report", str(rep),
                     "--from", "5", "--to", "35"]) == 0, src
        r = json.loads(rep.read_text())
        assert 4.999 <= r["window"][0] < 5.1 and 34.9 < r["window"][1] <= 35.001
        assert arm7.fresh(str(out)).max() < 0.03


def test_low_rate_irregular_stamps_without_velocity(tmp_path):
    """30 Hz with jittered stamps and no velocity field: differentiation of positions must still give
    a model within a few % (a backward difference of velocity would not)."""
    c = Case("ur5", tmp_path, fs=200.0)
    rng = np.random.default_rng(7)
    tk = np.cumsum(rng.uniform(0.6, 1.4, 1300) / 30.0)
    tk = tk[tk < c.t[-1]]
    idx = lambda A: np.stack([np.interp(tk, c.t, A[:, j]) for j in range(A.shape[1])], axis=1)  # noqa: E731
    bag = str(tmp_path / "slow")
    sim.write_bag(bag, tk, c.model.joint_names, idx(c.Q), idx(c.QD), idx(c.noisy), velocity=False)
    out = tmp_path / "slow.urdf"
    assert main(["fit", bag, "--urdf", c.urdf, "--output", str(out)]) == 0
    assert c.fresh(str(out)).max() < 0.05


@pytest.mark.parametrize("robot", ["panda", "ur5"])
def test_real_robot_descriptions(robot, tmp_path):
    c = Case(robot, tmp_path)
    out = tmp_path / "o.urdf"
    rep = tmp_path / "o.json"
    assert main(["fit", c.bag, "--urdf", c.urdf, "--output", str(out), "--report", str(rep)]) == 0
    assert c.fresh(str(out)).max() < 0.05
    bt, bo, B, par = _truth_base(c, out)
    r = json.loads(rep.read_text())["base_parameters"]
    std = np.array([b["std"] for b in r])
    det = np.array([b["determined"] for b in r])
    ok = np.abs(bo - bt) < 5 * std + 1e-6 * (np.abs(B) @ par.scale_data)
    assert ok[det].all(), [n for n, d in zip(par.base_names(B), ok) if not d]
    pin.buildModelFromUrdf(str(out))


def test_a_gripper_that_reports_no_effort(tmp_path):
    """The Panda's fingers still and their effort 0 all along (a gripper driver that reports none), the
    stribeck class: the fit runs and fits the arm (a zero effort scale for the fingers' terms had made
    the semidefinite program infeasible, as on a real Panda's recording)."""
    c = Case("panda", tmp_path)
    fingers = [j for j, n in enumerate(c.model.joint_names) if "finger" in n]
    assert fingers
    Q, QD, QDD = c.Q.copy(), c.QD.copy(), c.QDD.copy()
    Q[:, fingers], QD[:, fingers], QDD[:, fingers] = 0.02, 0.0, 0.0
    T = sim.truth_torques(c.truth, c.model, c.fr, Q, QD, QDD)
    T += 0.02 * T.std(axis=0) * np.random.default_rng(5).normal(size=T.shape)
    T[:, fingers] = 0.0
    bag = str(tmp_path / "still_fingers")
    sim.write_bag(bag, c.t, c.model.joint_names, Q, QD, T)
    out, rep = tmp_path / "o.urdf", tmp_path / "o.json"
    assert main(["fit", bag, "--urdf", c.urdf, "--output", str(out), "--report", str(rep),
                 "--friction", "stribeck"]) == 0
    r = json.loads(rep.read_text())
    arm = [j for j in range(c.model.nv) if j not in fingers]
    assert np.all(np.array(r["rms"])[arm] <= 0.05 * np.array(r["effort_std"])[arm]), r["rms"]


# ---- bad input: exit code 1, a message naming the problem, nothing written


def _refused(capsys, tmp_path, argv, *words):
    out = tmp_path / "never.urdf"
    rc = main([*argv, "--output", str(out)] if argv[0] == "fit" else argv)
    err = capsys.readouterr().err
    assert rc == 1 and not out.exists(), err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".identify-")]
    for w in words:
        assert w in err, err
    return err


def test_bad_inputs(arm7, tmp_path, capsys):
    u = arm7.urdf
    _refused(capsys, tmp_path, ["fit", str(tmp_path / "nope"), "--urdf", u], "does not exist")
    trunc = tmp_path / "trunc.db3"
    data = next(pathlib_glob(arm7.bag, "*.db3")).read_bytes()
    trunc.write_bytes(data[:len(data) // 3])
    _refused(capsys, tmp_path, ["fit", str(trunc), "--urdf", u], "trunc")
    mtr = tmp_path / "trunc.mcap"
    mc = str(tmp_path / "mc")
    sim.write_bag(mc, arm7.t[:400], arm7.model.joint_names, arm7.Q[:400], arm7.QD[:400], arm7.noisy[:400],
                  storage="mcap")
    d = next(pathlib_glob(mc, "*.mcap")).read_bytes()
    mtr.write_bytes(d[:len(d) // 2])
    _refused(capsys, tmp_path, ["fit", str(mtr), "--urdf", u], "trunc")
    _refused(capsys, tmp_path, ["fit", arm7.bag, "--urdf", u, "--topic", "/js"], "/js", "/joint_states")
    names = list(arm7.model.joint_names)
    noeff = str(tmp_path / "noeff")
    sim.write_bag(noeff, arm7.t[:2000], names, arm7.Q[:2000], arm7.QD[:2000], np.full((2000, 7), np.nan))
    _refused(capsys, tmp_path, ["fit", noeff, "--urdf", u], "effort")
    zero = str(tmp_path / "zero")  # a driver that fills the effort field with zeros
    sim.write_bag(zero, arm7.t[:2000], names, arm7.Q[:2000], arm7.QD[:2000], np.zeros((2000, 7)))
    _refused(capsys, tmp_path, ["fit", zero, "--urdf", u], "every effort", "is 0")
    miss = str(tmp_path / "miss")
    sim.write_bag(miss, arm7.t[:2000], names[:6], arm7.Q[:2000, :6], arm7.QD[:2000, :6], arm7.noisy[:2000, :6])
    _refused(capsys, tmp_path, ["fit", miss, "--urdf", u], "joint7", "missing")
    _refused(capsys, tmp_path, ["fit", arm7.bag, "--urdf", u, "--from", "10", "--to", "10.5"], "too short")
    still = str(tmp_path / "still")
    Z = np.zeros((2000, 7))
    sim.write_bag(still, arm7.t[:2000], names, Z + 0.3, Z, arm7.noisy[:2000] * 0 + 1.0)
    _refused(capsys, tmp_path, ["fit", still, "--urdf", u], "excitation")
    _refused(capsys, tmp_path, ["fit", arm7.bag, "--urdf", str(ns.REPO / "urdf" / "fourbar.urdf")], "closed-loop")
    _refused(capsys, tmp_path, ["evaluate", str(tmp_path / "nope"), "--urdf", u], "does not exist")


def test_extra_joints_are_ignored_with_a_warning(arm7, tmp_path, capsys):
    names = list(arm7.model.joint_names) + ["gripper_joint"]
    n = 3000
    extra = np.concatenate([arm7.Q[:n], np.zeros((n, 1))], axis=1)
    bag = str(tmp_path / "extra")
    sim.write_bag(bag, arm7.t[:n], names, extra, np.concatenate([arm7.QD[:n], np.zeros((n, 1))], axis=1),
                  np.concatenate([arm7.noisy[:n], np.zeros((n, 1))], axis=1))
    assert main(["fit", bag, "--urdf", arm7.urdf, "--output", str(tmp_path / "o.urdf")]) == 0
    assert "gripper_joint" in capsys.readouterr().out


def test_excite_within_limits(tmp_path):
    import yaml

    out = tmp_path / "traj.yaml"
    assert main(["excite", "--urdf", str(ns.ARM7), "--output", str(out), "--period", "8"]) == 0
    tr = yaml.safe_load(out.read_text())
    m = dn.load_model(str(ns.ARM7))
    assert tr["joint_names"] == list(m.joint_names)
    P = np.array([p["positions"] for p in tr["points"]])
    V = np.array([p["velocities"] for p in tr["points"]])
    for j, n in enumerate(m.joint_names):
        lo, hi, _, vmax = m.joint_limits[n]
        assert lo <= P[:, j].min() and P[:, j].max() <= hi and np.abs(V[:, j]).max() <= vmax
    times = [p["time_from_start"]["sec"] + 1e-9 * p["time_from_start"]["nanosec"] for p in tr["points"]]
    assert np.all(np.diff(times) > 0)
    # periodic: the same state one period apart; starts at rest
    k = int(round(8 / 0.02))
    np.testing.assert_allclose(P[k], P[0], atol=1e-9)
    assert np.abs(V[0]).max() < 1e-9


def test_console_script_module_runs():
    r = subprocess.run([sys.executable, "-m", "dynamics_node.identify", "--help"], capture_output=True, text=True,
                       env=ns.node_env())
    assert r.returncode == 0 and "fit" in r.stdout and "excite" in r.stdout


def pathlib_glob(folder, pattern):
    import pathlib

    return pathlib.Path(folder).glob(pattern)


def test_warnings_saturation_sign_flip_and_a_joint_that_never_moves(arm7, tmp_path):
    """The report's warnings name the joint: efforts clipped at 70 % of their peak on joint2,
    joint7 held still (the torques recomputed from the truth), and, in another recording, joint4's
    efforts negated; no other joint is named."""
    names = list(arm7.model.joint_names)
    Q, QD, QDD = arm7.Q.copy(), arm7.QD.copy(), arm7.QDD.copy()
    Q[:, 6], QD[:, 6], QDD[:, 6] = 0.3, 0.0, 0.0
    T = sim.truth_torques(arm7.truth, arm7.model, arm7.fr, Q, QD, QDD)
    rng = np.random.default_rng(11)
    T = T + 0.02 * T.std(axis=0) * rng.normal(size=T.shape)
    top = 0.7 * np.abs(T[:, 1]).max()
    T[:, 1] = np.clip(T[:, 1], -top, top)
    bag = str(tmp_path / "warn_bag")
    sim.write_bag(bag, arm7.t, names, Q, QD, T)
    rep_path, out = tmp_path / "warn.json", tmp_path / "warn.urdf"
    assert main(["fit", bag, "--urdf", arm7.urdf, "--output", str(out), "--report", str(rep_path)]) == 0
    warns = json.loads(rep_path.read_text())["warnings"]
    text = "\n".join(warns)
    assert any("'joint2'" in w and "saturated or clipped" in w for w in warns), text
    assert not any("'joint1'" in w and "saturated" in w for w in warns), text
    assert any("never move" in w and "joint7" in w for w in warns), text
    # what the data cannot see stays at the URDF's values (times the efforts' scale k the report gives):
    # joint7's friction, in OUT.urdf's <dynamics> and in OUT.yaml
    import xml.etree.ElementTree as ET

    rep = json.loads(rep_path.read_text())
    k = rep["prior_factor"]
    d0 = ET.parse(arm7.urdf).getroot().find("joint[@name='joint7']/dynamics")
    d1 = ET.parse(out).getroot().find("joint[@name='joint7']/dynamics")
    for a in ("damping", "friction"):
        assert abs(float(d1.get(a)) - k * float(d0.get(a))) <= 1e-6 * max(1.0, float(d0.get(a))), (a, d1.attrib, k)
    assert any(p["held_at_prior"] and "joint7" in p["name"] for p in rep["base_parameters"])
    flipped = str(tmp_path / "flip_bag")
    F = arm7.noisy.copy()
    F[:, 3] *= -1.0
    sim.write_bag(flipped, arm7.t, names, arm7.Q, arm7.QD, F)
    rep2 = tmp_path / "flip.json"
    assert main(["fit", flipped, "--urdf", arm7.urdf, "--output", str(tmp_path / "flip.urdf"),
                 "--report", str(rep2)]) == 0
    warns2 = json.loads(rep2.read_text())["warnings"]
    assert any("'joint4'" in w and "sign-flipped" in w for w in warns2), "\n".join(warns2)
    assert not any("sign-flipped" in w and "'joint4'" not in w for w in warns2), "\n".join(warns2)
