"""dynamics_identify evaluate on what recordings and parameter files really hold: joint states split
over two publishers (merged by joint name as the node merges them, counted as joint states), the
parameter file bringing its own URDF, and inputs an attacker would try (a scalar where a list
belongs, friction_model a list, a broken YAML file, efforts of 1e300), each refused in one line that
names the problem. The reference of every number is independent of the code under test: the
simulation's exact states and the noise added to its torques (the truth URDF evaluated against its
own noisy torques leaves exactly that noise)."""
import json
import re

import numpy as np
import pytest
import yaml

import dynamics_node as dn
import identify_sim as sim
import node_support as ns
from dynamics_node.identify.__main__ import main
from dynamics_node.urdf_source import read_description

pin = pytest.importorskip("pinocchio")
FS, DURATION, NOISE = 200.0, 12.0, 0.02


class Truth:
    """arm7 perturbed, viscous friction only (no Coulomb: a sign() at a zero crossing would make the
    differentiated states' error depend on one sample), its torques from Pinocchio plus known noise."""

    def __init__(self, tmp, seed=5):
        text, _ = read_description(str(ns.ARM7), None)
        rng = np.random.default_rng(seed)
        truth, fr = sim.perturbed_urdf(text, rng)
        self.text = re.sub(r'friction="[^"]*"', 'friction="0.0"', truth)
        self.fr = {n: (b, 0.0) for n, (b, _) in fr.items()}
        self.urdf = tmp / "truth.urdf"
        self.urdf.write_text(self.text)
        self.model = dn.load_model(str(ns.ARM7))
        self.names = list(self.model.joint_names)
        self.rng = rng
        self.tmp = tmp

    def at(self, t, seed=9):
        """Exact states and noisy torques at the times t (one trajectory for any set of times)."""
        Q, QD, QDD = sim.fourier_trajectory(self.model, t, np.random.default_rng(seed), period=6.0)
        TAU = sim.truth_torques(self.text, self.model, self.fr, Q, QD, QDD)
        noise = NOISE * np.random.default_rng(seed + 1).normal(size=TAU.shape)
        return Q, QD, QDD, TAU + noise, noise


@pytest.fixture(scope="module")
def truth(tmp_path_factory):
    return Truth(tmp_path_factory.mktemp("inputs"))


def _evaluate(bag, *args):
    rep = pathlib_tmp(bag) / "eval.json"
    assert main(["evaluate", str(bag), *args, "--report", str(rep)]) == 0
    return json.loads(rep.read_text())


def pathlib_tmp(bag):
    import pathlib

    return pathlib.Path(bag).parent


def test_split_publishers_are_merged_and_counted_as_joint_states(truth, tmp_path):
    """Joints 1-4 and 5-7 from two publishers, the second 1.5 ms after the first: the node's merge
    gives one joint state per pair, and each joint's effort is compared with the prediction at its own
    stamp; the RMS per joint is the added noise's (the truth's own URDF), as for one publisher."""
    t = np.arange(int(DURATION * FS)) / FS
    dt = 0.0015
    both = np.sort(np.concatenate([t, t + dt]))
    Q, QD, QDD, TAU, noise = truth.at(both)
    a, b = np.searchsorted(both, t), np.searchsorted(both, t + dt)
    names = truth.names
    split = tmp_path / "split"
    sim.write_publishers_bag(str(split), [(names[:4], t, Q[a][:, :4], QD[a][:, :4], TAU[a][:, :4]),
                                          (names[4:], t + dt, Q[b][:, 4:], QD[b][:, 4:], TAU[b][:, 4:])])
    one = tmp_path / "one"
    sim.write_bag(str(one), t, names, Q[a], QD[a], TAU[a])
    ev = _evaluate(split, "--urdf", str(truth.urdf), "--from", "2", "--to", "10")
    in_window = int(np.sum((t >= 2 - 1e-9) & (t + dt <= 10 + 1e-9)))
    assert ev["samples"] == in_window, (ev["samples"], in_window)       # joint states, not 2x messages
    assert ev["samples_per_joint"] == [in_window] * 7 and ev["publishers"] == 2
    ref = np.sqrt(np.mean(np.concatenate([noise[a][:, :4], noise[b][:, 4:]], axis=1)[
        (t >= 2 - 1e-9) & (t + dt <= 10 + 1e-9)] ** 2, axis=0))
    rms = np.array(ev["rms"])
    assert np.all(np.abs(rms - ref) < 0.25 * ref), (rms, ref)
    ev1 = _evaluate(one, "--urdf", str(truth.urdf), "--from", "2", "--to", "10")
    assert ev1["samples"] == int(np.sum((t >= 2 - 1e-9) & (t <= 10 + 1e-9))) and ev1["publishers"] == 1
    assert np.all(np.abs(np.array(ev1["rms"]) - rms) < 0.25 * ref)


def test_a_parameter_file_brings_its_urdf_and_none_means_the_urdf_alone(truth, tmp_path, capsys):
    """--params OUT.yaml evaluates the URDF its urdf_path names (as the node runs it) with its law;
    --params none the URDF given, alone, with its <dynamics>."""
    from dynamics_node.identify.law_out import write

    t = np.arange(int(DURATION * FS)) / FS
    Q, QD, QDD, TAU, noise = truth.at(t)
    bag = tmp_path / "bag"
    sim.write_bag(str(bag), t, truth.names, Q, QD, TAU + 0.4)      # an offset of 0.4 on every joint
    zeros = {f: np.zeros(7) for f in ("viscous", "coulomb", "coulomb_velocity", "stribeck", "stribeck_velocity")}
    b = [truth.fr[n][0] for n in truth.names]
    params = tmp_path / "law.yaml"
    write(str(params), str(truth.urdf), truth.names, {**zeros, "viscous": np.array(b), "offset": np.full(7, 0.4)},
          np.zeros(7))
    other = tmp_path / "other.urdf"
    other.write_text(ns.ARM7.read_text())                          # the nominal arm: wrong inertias
    w = ["--from", "2", "--to", "10"]
    ref = np.sqrt(np.mean(noise[(t >= 2 - 1e-9) & (t <= 10 + 1e-9)] ** 2, axis=0))
    ev = _evaluate(bag, "--urdf", str(other), "--params", str(params), *w)
    assert ev["urdf"] == str(truth.urdf) and ev["params"] == str(params.resolve())
    assert "urdf_path" in capsys.readouterr().out
    assert np.all(np.abs(np.array(ev["rms"]) - ref) < 0.25 * ref), (ev["rms"], ref)
    ev = _evaluate(bag, "--params", str(params), *w)                    # no --urdf: the file's urdf_path
    assert ev["urdf"] == str(truth.urdf) and np.all(np.abs(np.array(ev["rms"]) - ref) < 0.25 * ref)
    ev = _evaluate(bag, "--urdf", str(truth.urdf), "--params", "none", *w)   # the offset is not in a URDF
    assert ev["params"] is None and np.all(np.abs(np.array(ev["rms"]) - np.hypot(0.4, ref)) < 0.25 * ref), ev["rms"]


@pytest.fixture(scope="module")
def bag(truth, tmp_path_factory):
    t = np.arange(int(DURATION * FS)) / FS
    Q, QD, QDD, TAU, _ = truth.at(t)
    path = tmp_path_factory.mktemp("bag") / "bag"
    sim.write_bag(str(path), t, truth.names, Q, QD, TAU)
    return str(path)


def _one_line_refusal(capsys, argv, *words):
    rc = main(argv)
    cap = capsys.readouterr()
    err = cap.err
    assert rc == 1, (rc, cap.out, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err          # one line
    for w in words:
        assert w in err, err
    return err


def _yaml(tmp_path, truth, edit):
    from dynamics_node.identify.law_out import write

    path = tmp_path / "p.yaml"
    vals = {f: np.zeros(7) for f in ("viscous", "coulomb", "coulomb_velocity", "stribeck", "stribeck_velocity",
                                     "offset")}
    write(str(path), str(truth.urdf), truth.names, vals, np.zeros(7))
    doc = yaml.safe_load(path.read_text())
    out = edit(doc["dynamics_node"]["ros__parameters"])
    path.write_text(out if isinstance(out, str) else yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("edit, words", [
    (lambda rp: rp["friction_model"].__setitem__("viscous", 0.3), ["friction_model.viscous", "list", "0.3"]),
    (lambda rp: rp.__setitem__("friction_model", [1.0, 2.0]), ["friction_model", "mapping", "[1.0, 2.0]"]),
    (lambda rp: rp["friction_model"].__setitem__("joints", "joint1"), ["friction_model.joints", "list"]),
    (lambda rp: rp.__setitem__("armature", 0.1), ["armature", "list"]),
    (lambda rp: rp.__setitem__("armature", [1e300] * 7), ["armature[0]", "outside"]),
    (lambda rp: rp["friction_model"].__setitem__("coulomb_velocity", [1e3] * 7), ["coulomb_velocity", "100"]),
    (lambda rp: rp.__setitem__("urdf_path", 3), ["urdf_path", "string"]),
    (lambda rp: rp.__setitem__("urdf_path", "/nowhere/robot.urdf"), ["urdf_path", "/nowhere/robot.urdf",
                                                                      "does not exist"]),
    (lambda rp: "dynamics_node:\n  ros__parameters:\n    armature: [0.1, 0.2\n    friction: true\n",
     ["not valid YAML", "line 4", "column"]),
    (lambda rp: "dynamics_node:\n  ros__parameters:\n    a: 1\n   b: 2\n", ["not valid YAML", "line 4", "block"]),
    (lambda rp: "dynamics_node:\n  ros__parameters:\n  - a\n", ["no dynamics_node: ros__parameters"]),
    (lambda rp: "- just\n- a list\n", ["no dynamics_node: ros__parameters"]),
])
def test_bad_parameter_files_are_refused_in_one_line(truth, bag, tmp_path, capsys, edit, words):
    path = _yaml(tmp_path, truth, edit)
    err = _one_line_refusal(capsys, ["evaluate", bag, "--urdf", str(truth.urdf), "--params", str(path)], *words)
    assert str(path) in err or "urdf_path" in err


def test_unknown_keys_of_a_parameter_file_are_named(truth, bag, tmp_path, capsys):
    path = _yaml(tmp_path, truth, lambda rp: rp["friction_model"].__setitem__("viscosity", [0.1] * 7))
    assert main(["evaluate", bag, "--params", str(path)]) == 0
    out = capsys.readouterr().out
    assert "friction_model.viscosity" in out and "unknown" in out


@pytest.mark.parametrize("command", ["fit", "evaluate"])
def test_absurd_efforts_are_named(truth, tmp_path, capsys, command):
    """Efforts of 1e300 on one joint: refused naming the joint's efforts, not as poor excitation."""
    t = np.arange(int(DURATION * FS)) / FS
    Q, QD, QDD, TAU, _ = truth.at(t)
    TAU[:, 2] = 1e300 * np.sign(TAU[:, 2])
    path = tmp_path / "huge"
    sim.write_bag(str(path), t, truth.names, Q, QD, TAU)
    argv = ["fit", str(path), "--urdf", str(ns.ARM7), "--output", str(tmp_path / "o.urdf")] if command == "fit" \
        else ["evaluate", str(path), "--urdf", str(truth.urdf)]
    err = _one_line_refusal(capsys, argv, "joint3", "efforts", "1e+300")
    assert "excitation" not in err and not (tmp_path / "o.urdf").exists()


@pytest.mark.parametrize("opt", [["--from", "nan"], ["--to", "inf"], ["--prior-weight", "-1"]])
def test_window_and_weight_must_be_finite(truth, bag, capsys, tmp_path, opt):
    argv = ["fit", bag, "--urdf", str(ns.ARM7), "--output", str(tmp_path / "o.urdf"), *opt]
    _one_line_refusal(capsys, argv, opt[0])
