"""dynamics_identify and the joint law on simulated recordings with a known truth: a
perturbed arm7 with armature, offsets, smooth (tanh) Coulomb and Stribeck friction (written out in
numpy, identify_sim.law_torque) on Pinocchio's RNEA, with noise. The fit from the nominal URDF must
predict a fresh trajectory's torques from OUT.urdf + OUT.yaml, evaluated here by the same independent
formula (not the core); ``auto`` must pick a class that holds the truth; ``evaluate`` must report
every message of the window; bad OUT.yaml values are refused by name."""
import json

import numpy as np
import pytest
import yaml

import dynamics_node as dn
import identify_sim as sim
import node_support as ns
from dynamics_node.identify.__main__ import main
from dynamics_node.urdf_source import read_description

pin = pytest.importorskip("pinocchio")


class LawCase:
    def __init__(self, tmp, fs=200.0, duration=40.0, seed=3, noise=0.02, stribeck=True):
        self.urdf = str(ns.ARM7)
        text, _ = read_description(self.urdf, None)
        rng = np.random.default_rng(seed)
        self.truth, self.fr = sim.perturbed_urdf(text, rng)
        self.model = dn.load_model(self.urdf)
        self.law = sim.random_law(self.model, self.fr, rng, stribeck=stribeck)
        self.t = np.arange(int(duration * fs)) / fs
        self.Q, self.QD, self.QDD = sim.fourier_trajectory(self.model, self.t, rng)
        self.TAU = sim.truth_torques(self.truth, self.model, self.fr, self.Q, self.QD, self.QDD, law=self.law)
        self.noisy = self.TAU + noise * self.TAU.std(axis=0) * rng.normal(size=self.TAU.shape)
        self.tmp = tmp
        self.bag = str(tmp / "bag")
        sim.write_bag(self.bag, self.t, self.model.joint_names, self.Q, self.QD, self.noisy)

    def fit(self, *extra, name="out"):
        out, rep = self.tmp / f"{name}.urdf", self.tmp / f"{name}.json"
        assert main(["fit", self.bag, "--urdf", self.urdf, "--output", str(out), "--report", str(rep), *extra]) == 0
        return out, json.loads(rep.read_text())


def law_of_files(urdf_path, yaml_path):
    """The law as the check evaluates it: the inertias of the URDF OUT.yaml's urdf_path names (Pinocchio;
    OUT.law.urdf beside OUT.urdf when the law is richer than a URDF), OUT.yaml's lists (numpy)."""
    rp = yaml.safe_load(open(yaml_path))["dynamics_node"]["ros__parameters"]
    urdf_path = rp.get("urdf_path") or urdf_path
    fm = rp["friction_model"]
    law = {n: dict(Ia=rp["armature"][k], b=fm["viscous"][k], fc=fm["coulomb"][k], vc=fm["coulomb_velocity"][k],
                   fs=fm["stribeck"][k], vs=fm["stribeck_velocity"][k], o=fm["offset"][k])
           for k, n in enumerate(fm["joints"])}
    return open(urdf_path).read(), law


def fresh(case, out):
    """Relative RMS (of the truth's spread) per joint on a fresh trajectory, the identified model from
    its files by the independent formula."""
    t = np.arange(0, 30, 0.01)
    Q, QD, QDD = sim.fourier_trajectory(case.model, t, np.random.default_rng(99), period=7.0)
    T = sim.truth_torques(case.truth, case.model, case.fr, Q, QD, QDD, law=case.law)
    text, law = law_of_files(out, out.with_suffix(".yaml"))
    P = sim.truth_torques(text, case.model, {}, Q, QD, QDD, law=law)
    return np.sqrt(np.mean((P - T) ** 2, axis=0)) / T.std(axis=0)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    return LawCase(tmp_path_factory.mktemp("law"))


def test_auto_recovers_the_truth_and_writes_the_node_parameter_file(case):
    out, rep = case.fit("--plot", str(case.tmp / "fit.png"))
    # auto picks the class that holds the truth (Stribeck), every class's score reported
    assert rep["friction_class"] == "stribeck", rep["cross_validation"]
    sc = rep["cross_validation"]["scores"]
    assert set(sc) == {"coulomb", "smooth", "stribeck"} and sc["stribeck"] < sc["smooth"] < sc["coulomb"]
    rel = fresh(case, out)
    assert np.sqrt(np.mean(rel ** 2)) < 0.02 and rel.max() < 0.05, rel
    # OUT.yaml: every joint in model order, the URDF's <dynamics> the same b and fc, absolute urdf_path
    doc = yaml.safe_load(out.with_suffix(".yaml").read_text())["dynamics_node"]["ros__parameters"]
    law_urdf = out.with_suffix(".law.urdf")              # the law's own inertias, beside OUT.urdf
    assert doc["urdf_path"] == str(law_urdf.resolve()) and doc["friction"] is True
    fm = doc["friction_model"]
    assert fm["joints"] == list(case.model.joint_names) and len(doc["armature"]) == 7
    assert all(len(fm[k]) == 7 for k in ("viscous", "coulomb", "coulomb_velocity", "stribeck",
                                         "stribeck_velocity", "offset"))
    assert min(doc["armature"]) >= 0 and min(fm["viscous"]) >= 0 and min(fm["coulomb"]) >= 0
    import xml.etree.ElementTree as ET

    joints = {j.get("name"): j for j in ET.parse(law_urdf).getroot().findall("joint")}
    for k, n in enumerate(fm["joints"]):
        d = joints[n].find("dynamics")
        assert float(d.get("damping")) == fm["viscous"][k] and float(d.get("friction")) == fm["coulomb"][k]
    # the identified offsets and armatures are the truth's (they are identifiable here)
    for k, n in enumerate(fm["joints"]):
        assert abs(fm["offset"][k] - case.law[n]["o"]) < 0.05 * case.TAU[:, k].std(), (n, fm["offset"][k])
    # the friction curves: per joint, the model's tau_f against the measured effort minus the rigid part
    curves = rep["friction_curves"]
    for n in case.model.joint_names:
        c = curves[n]
        m, p = np.array(c["measured"]), np.array(c["model"])
        assert len(c["velocity"]) > 10 and np.sqrt(np.mean((m - p) ** 2)) < 0.1 * np.abs(m).max(), n
    assert (case.tmp / "fit.png").stat().st_size > 20000
    # OUT.urdf and OUT.law.urdf are physically consistent and load strictly
    for path in (out, law_urdf):
        dn.load_model(str(path), strict=True)
        pm = pin.buildModelFromUrdf(str(path))
        for k in range(1, pm.njoints):
            assert pm.inertias[k].mass > 0 and np.linalg.eigvalsh(pm.inertias[k].inertia).min() > 0


@pytest.fixture(scope="module")
def coulomb_fit(case):
    return case.fit("--friction", "coulomb", name="coulomb")


def test_each_class_and_its_parameters(case, coulomb_fit):
    """--friction coulomb writes vc = fs = o = Ia = 0 (today's class); smooth fs = 0; all Ia, b, fc >= 0."""
    for cls in ("coulomb", "smooth"):
        out, rep = coulomb_fit if cls == "coulomb" else case.fit("--friction", cls, name=cls)
        assert rep["friction_class"] == cls and list(rep["cross_validation"]["scores"]) == [cls]
        fm = yaml.safe_load(out.with_suffix(".yaml").read_text())["dynamics_node"]["ros__parameters"]
        law = fm["friction_model"]
        assert all(x == 0 for x in law["stribeck"]) and all(x == 0 for x in law["stribeck_velocity"])
        if cls == "coulomb":
            assert all(x == 0 for x in law["coulomb_velocity"] + law["offset"] + fm["armature"])
        assert min(law["viscous"] + law["coulomb"] + fm["armature"]) >= 0


def test_evaluate_reads_the_yaml_and_keeps_every_message(case):
    out, _ = case.fit("--to", "28", name="train")
    t = case.t
    for window, expect in (([], t.size), (["--from", "28"], int(np.sum(t >= 28 - 1e-9))),
                           (["--from", "0.01", "--to", "3"], int(np.sum((t >= 0.01 - 1e-9) & (t <= 3 + 1e-9))))):
        rep = case.tmp / "eval.json"
        assert main(["evaluate", case.bag, "--urdf", str(out), "--report", str(rep), *window]) == 0
        ev = json.loads(rep.read_text())
        assert ev["samples"] == expect, (window, ev["samples"], expect)
        assert ev["params"] == str(out.with_suffix(".yaml").resolve())
    # held out, against the independent evaluation at the exact states
    assert main(["evaluate", case.bag, "--urdf", str(out), "--from", "28", "--report", str(rep)]) == 0
    ev = json.loads(rep.read_text())
    k = case.t >= 28 - 1e-9
    text, law = law_of_files(out, out.with_suffix(".yaml"))
    P = sim.truth_torques(text, case.model, {}, case.Q[k], case.QD[k], case.QDD[k], law=law)
    ref = np.sqrt(np.mean((case.noisy[k] - P) ** 2, axis=0))
    assert np.all(np.abs(np.array(ev["rms"]) - ref) < 0.3 * ref), (ev["rms"], ref)
    assert np.all(np.array(ev["rms"]) / case.TAU[k].std(axis=0) < 0.06), ev["rms"]


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["friction_model"]["viscous"].__setitem__(2, -1.0), ["friction_model.viscous", "negative"]),
    (lambda d: d["friction_model"]["joints"].__setitem__(0, "elbow"), ["friction_model.joints[0]", "elbow"]),
    (lambda d: d["friction_model"]["offset"].pop(), ["friction_model.offset", "6 values"]),
    (lambda d: d["friction_model"]["coulomb"].__setitem__(1, float("nan")), ["friction_model.coulomb[1]",
                                                                               "finite"]),
    (lambda d: d.__setitem__("armature", [0.1, 0.2]), ["armature", "0, 1 or 7"]),
])
def test_evaluate_refuses_bad_parameter_files_by_name(case, coulomb_fit, tmp_path, capsys, edit, words):
    out, _ = coulomb_fit
    doc = yaml.safe_load(out.with_suffix(".yaml").read_text())
    edit(doc["dynamics_node"]["ros__parameters"])
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    assert main(["evaluate", case.bag, "--urdf", str(out), "--params", str(bad)]) == 1
    err = capsys.readouterr().err
    for w in words:
        assert w in err, err
