"""dynamics_identify fit on a 60 s recording at 1 kHz of a 7-DoF arm (urdf/arm7.urdf with perturbed
inertia and the joint law of issue 27: armature, viscous, smooth Coulomb, Stribeck, offsets; torques by
the core's inverse dynamics along a smooth Fourier trajectory, 1 % noise), --friction coulomb and auto,
and the regressor stacking against Pinocchio's computeJointTorqueRegressor looped over the
same samples. Run by bench/bench.py (make bench); prints the numbers bench/README.md records."""
from __future__ import annotations

import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "test"))


def main():
    import pinocchio as pin

    import dynamics_node as dn
    import identify_sim as sim
    from dynamics_node.identify.__main__ import main as identify
    from dynamics_node.identify.fit_params import setup
    from dynamics_node.identify.stack import _Kernel, grams

    urdf = str(REPO / "urdf" / "arm7.urdf")
    rng = np.random.default_rng(0)
    text = (REPO / "urdf" / "arm7.urdf").read_text()
    truth, fr = sim.perturbed_urdf(text, rng)
    model = dn.load_model(urdf)
    t = np.arange(60000) / 1000.0
    Q, QD, QDD = sim.fourier_trajectory(model, t, rng)
    law = sim.random_law(model, fr, rng)  # issue 27: armature, smooth Coulomb, Stribeck, offsets
    tm = dn.load_model(truth, armature={n: c["Ia"] for n, c in law.items()}, friction=dn.JointFriction(
        **{f: {n: c[k] for n, c in law.items()} for f, k in (("coulomb_velocity", "vc"), ("stribeck", "fs"),
                                                            ("stribeck_velocity", "vs"), ("offset", "o"))}))
    TAU = dn.inverse_dynamics_batch(tm, Q, QD, QDD)
    TAU += 0.01 * TAU.std(axis=0) * rng.normal(size=TAU.shape)
    with tempfile.TemporaryDirectory() as d:
        bag = str(pathlib.Path(d) / "bag")
        t0 = time.perf_counter()
        sim.write_bag(bag, t, model.joint_names, Q + 1e-6 * rng.normal(size=Q.shape), QD, TAU)
        print(f"wrote a 60 s, 1 kHz, 7-joint recording (sqlite3) in {time.perf_counter() - t0:.1f} s")
        identify(["fit", bag, "--urdf", urdf, "--output", str(pathlib.Path(d) / "warm.urdf")])  # kernels cached
        # issue 27 point 6: the console script as a user runs it (a fresh process: imports, kernels
        # loaded from the cache, one thread of OpenBLAS as identify/__main__.py sets), best of 3
        for cls in ("coulomb", "auto"):
            times = []
            for k in range(3):
                out = pathlib.Path(d) / f"{cls}{k}.urdf"
                t0 = time.perf_counter()
                r = subprocess.run([sys.executable, "-m", "dynamics_node.identify", "fit", bag, "--urdf", urdf,
                                    "--output", str(out), "--friction", cls], capture_output=True, text=True)
                times.append(time.perf_counter() - t0)
                assert r.returncode == 0, r.stderr
            chosen = [ln for ln in r.stdout.splitlines() if "chosen:" in ln]
            print(f"dynamics_identify fit --friction {cls}, 60 s at 1 kHz, 7 DoF: min {min(times):.2f} s, runs "
                  f"{', '.join(f'{x:.2f}' for x in times)} (target < 15 s){'; ' + chosen[0] if chosen else ''}")
    # the stacking, on all 60 000 samples
    par = setup(model, dn.load_model(urdf, friction=True))
    kern = _Kernel(model, 1024)
    pm = pin.buildModelFromUrdf(urdf)
    pd = pm.createData()

    def ours():
        for a in range(0, Q.shape[0], 1024):
            kern(Q[a:a + 1024], QD[a:a + 1024], QDD[a:a + 1024])

    out = np.empty((1024, model.nv, 10 * model.nb))

    def pinocchio():
        for a in range(0, Q.shape[0], 1024):
            for k in range(min(1024, Q.shape[0] - a)):
                out[k] = pin.computeJointTorqueRegressor(pm, pd, Q[a + k], QD[a + k], QDD[a + k])

    best = {}
    for _ in range(3):  # alternating, minimum: other load on a shared machine only adds time
        for name, fn in (("ours", ours), ("pinocchio", pinocchio)):
            t0 = time.perf_counter()
            fn()
            best[name] = min(best.get(name, np.inf), time.perf_counter() - t0)
    n = Q.shape[0]
    print(f"regressor of 60 000 samples (7 x 70 each): ours {best['ours'] / n * 1e6:.2f} us/sample "
          f"(batch kernel, reused buffer), Pinocchio computeJointTorqueRegressor looped "
          f"{best['pinocchio'] / n * 1e6:.2f} us/sample: ratio {best['ours'] / best['pinocchio']:.2f}")
    t0 = time.perf_counter()
    grams(par, Q, QD, QDD, TAU)
    print(f"stacking all 60 000 samples into the per-joint Gram matrices (regressor + friction + products): "
          f"{time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
