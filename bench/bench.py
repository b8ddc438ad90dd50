#!/usr/bin/env python3
"""Speed benchmark of the dynamics core against Pinocchio (run by `make bench`).

Measured in one run, on the same model and the same state:
  1. per-call time (ours and Pinocchio's timed in alternating batches, 9 rounds; the ratio is the median of the
     per-round ratios with their interquartile range, bench/pairing.py) of our inverse_dynamics,
     gravity, mass_matrix, forward_dynamics next to Pinocchio's rnea, computeGeneralizedGravity,
     crba, aba, on (a) the project's 7-DoF arm urdf/arm7.urdf (panda if missing) and (b) a humanoid
     with a floating base and 30+ joints (TALOS full v2 from example-robot-data, its 12 gripper
     mimic tags removed so that both libraries see the same 44 independent joints); ratio = ours/Pinocchio;
  2. batch: dn.inverse_dynamics_batch / dn.gravity_batch for N = 1000 states against a Python loop
     over pin.rnea (per-state time and ratio);
  3. scaling: serial chains of 2..60 joints and branched trees, time per call vs number of joints,
     written as a plot to bench/out/scaling.png (and the numbers to bench/out/scaling.csv);
  4. contact forward dynamics of the arm with 1 and 4 contacts against Pinocchio's constraintDynamics
     and forwardDynamics with contact Jacobians (issue 23);
  5. bench/bench_identify.py: dynamics_identify fit on a 60 s, 1 kHz, 7-DoF recording and its regressor
     stacking against Pinocchio's computeJointTorqueRegressor looped over the same samples;
  6. bench/bench_stream.py: the 1 kHz stream end to end as a busy client sees it (p50/p99/max alone, under
     service load, two controls with none of the load this node's work, with the cores loaded by other
     processes);
  7. bench/bench_sim.py: the simulation step against mujoco.mj_step in the same run, without and with
     contacts (issue 36); the simulated robot (simulation: true) at 1 kHz with 4 contacts touching, and with
     arm7's cylinders (128 points), its joint limits and a table (issue 30), also at real_time_factor 5:
     achieved rate, simulated/wall time, late steps, step time p50/p99 (issue 23); then bench/bench_clock.py:
     /clock at real_time_factor 5 as a separate rclpy client subscribed to /clock and /joint_states sees it,
     every step published and at the default simulation_publish_rate (issue 42);
  8. bench/bench_derivatives.py: the derivatives of the dynamics (issue 29) against Pinocchio's
     computeRNEADerivatives / computeABADerivatives on the arm, solo12 and TALOS; batch per state; analytic
     against central finite differences;
  9. bench/bench_node.py, if it exists;
 10. bench/bench_install.py: a colcon workspace on ROS 2 Jazzy built from an empty kernel cache, then the
     time from `ros2 launch` to the first gravity torque, first start after the install and later ones.
Functions not (yet) in the core are reported as "missing". No assertion: this only prints.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time
import timeit

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
sys.path.insert(0, str(REPO / "test"))  # urdfgen: URDF generators and the name-based Pinocchio state mapping
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))

import pinocchio as pin  # noqa: E402

import urdfgen as ug  # noqa: E402
from pairing import RATIO_HEADER, paired_rounds  # noqa: E402

FUNCS = [  # (label, our name, pinocchio label)
    ("inverse dynamics", "inverse_dynamics", "rnea"),
    ("gravity", "gravity", "computeGeneralizedGravity"),
    ("mass matrix", "mass_matrix", "crba"),
    ("forward dynamics", "forward_dynamics", "aba"),
]


def per_call(fn, target=0.25, repeat=7):
    """Median seconds per call: warm-up, then `repeat` timeit batches of ~target/repeat seconds."""
    for _ in range(3):
        fn()
    t = timeit.Timer(fn)
    number = 1
    while True:  # calibrate: smallest power of two of calls taking >= 20 ms
        elapsed = t.timeit(number)
        if elapsed >= 0.02:
            break
        number *= 2
    per = elapsed / number
    number = max(1, int(target / repeat / per))
    return statistics.median(t.repeat(repeat=repeat, number=number)) / number


def paired(fo, fp, target=0.4, rounds=9):
    """Seconds per call of fo and fp measured in alternation (pairing.paired_rounds), each the minimum over
    the rounds (the batch and scaling figures; the tables print the median of the per-round ratios)."""
    r = paired_rounds(fo, fp, target, rounds)
    return min(r.ours), min(r.ref)


def fmt_t(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:9.2f} us"
    return f"{s * 1e3:9.3f} ms"


class Bench:
    def __init__(self, label, xml_text, floating, our_source=None):
        import dynamics_node as dn

        self.dn = dn
        self.label = label
        t0 = time.perf_counter()
        self.model = dn.load_model(our_source if our_source is not None else xml_text, floating_base=floating)
        self.load_time = time.perf_counter() - t0
        self.oracle = ug.PinOracle(xml_text, self.model, floating=floating)
        self.pm, self.pd = self.oracle.m, self.oracle.d
        rng = np.random.default_rng(0)
        self.q, self.qd, self.qdd, self.tau = ug.random_state(self.model, rng)
        self.pq, self.pv, self.pa = self.oracle.q(self.q), self.oracle.v(self.qd), self.oracle.v(self.qdd)
        self.ptau = self.oracle.v(self.tau)

    def ours(self, name):
        m, dn = self.model, self.dn
        f = getattr(dn, name, None)
        if f is None:
            return None
        q, qd, qdd, tau = self.q, self.qd, self.qdd, self.tau
        return {
            "inverse_dynamics": lambda: f(m, q, qd, qdd),
            "gravity": lambda: f(m, q),
            "mass_matrix": lambda: f(m, q),
            "forward_dynamics": lambda: f(m, q, qd, tau),
        }[name]

    def pin(self, name):
        m, d, q, v, a, t = self.pm, self.pd, self.pq, self.pv, self.pa, self.ptau
        return {
            "inverse_dynamics": lambda: pin.rnea(m, d, q, v, a),
            "gravity": lambda: pin.computeGeneralizedGravity(m, d, q),
            "mass_matrix": lambda: pin.crba(m, d, q),
            "forward_dynamics": lambda: pin.aba(m, d, q, v, t),
        }[name]


def time_ours(fn):
    """(seconds or None, status)."""
    if fn is None:
        return None, "missing"
    try:
        t0 = time.perf_counter()
        fn()  # first call: numba may compile or load its cache
        first = time.perf_counter() - t0
        return per_call(fn), f"first call {first * 1e3:.0f} ms"
    except Exception as e:  # report, never hide
        return None, f"error: {type(e).__name__}: {str(e)[:60]}"


def table(benches):
    rows = []
    print(f"{'model':<34} {'function':<17} {'ours':>12} {'pinocchio':>12} {'ratio':>17}  note ({RATIO_HEADER}; "
          "times: medians of the 9 rounds)")
    print("-" * 120)
    for b in benches:
        for label, name, pname in FUNCS:
            ours, note = time_ours(b.ours(name))
            theirs, ratio = per_call(b.pin(name)), "-"
            if ours:
                r = paired_rounds(b.ours(name), b.pin(name))
                ours, theirs, ratio = r.ours_median, r.ref_median, r.fmt()
            print(f"{b.label:<34} {label:<17} {fmt_t(ours):>12} {fmt_t(theirs):>12} {ratio:>17}  "
                  f"{'MISSING' if note == 'missing' else ''}{pname if note != 'missing' else ''}"
                  f"{'' if note in ('missing',) else ' | ' + note}")
            rows.append((b.label, name, ours, theirs))
        print()
    return rows


def batch(b, N=1000):
    dn, m = b.dn, b.model
    rng = np.random.default_rng(1)
    states = [ug.random_state(m, rng) for _ in range(N)]
    Q = np.array([s[0] for s in states])
    QD = np.array([s[1] for s in states])
    QDD = np.array([s[2] for s in states])
    PQ = [b.oracle.q(q) for q in Q]
    PV = [b.oracle.v(v) for v in QD]
    PA = [b.oracle.v(a) for a in QDD]
    pm, pd = b.pm, b.pd
    zero = np.zeros(pm.nv)

    def loop_rnea():
        for k in range(N):
            pin.rnea(pm, pd, PQ[k], PV[k], PA[k])

    def loop_grav():
        for k in range(N):
            pin.rnea(pm, pd, PQ[k], zero, zero)

    print(f"Batch, N = {N}, {b.label} (nv = {m.nv}): time per state")
    print(f"  {'ours':<44} {'per state':>12}   {'Python loop over pin.rnea':>26}   ratio ours/loop  (target <= 1/3)")
    for name, args, loop in (("inverse_dynamics_batch", (m, Q, QD, QDD), loop_rnea),
                             ("gravity_batch", (m, Q), loop_grav)):
        f = getattr(dn, name, None)
        if f is None:
            print(f"  {name:<44} {'MISSING':>12}")
            continue
        try:
            t, ref = paired(lambda: f(*args), loop, target=1.5, rounds=5)
            t, ref = t / N, ref / N
            print(f"  {name:<44} {fmt_t(t):>12}   {fmt_t(ref):>26}   {t / ref:6.3f}  ({ref / t:5.1f}x cheaper)")
        except Exception as e:
            print(f"  {name:<44} error: {type(e).__name__}: {str(e)[:70]}")
    print()


def scaling(quick=False):
    chain_ns = [2, 4, 8, 12, 16, 24, 32, 40, 50, 60] if not quick else [2, 8, 32, 60]
    tree_shapes = [(2, 2), (3, 3), (4, 4), (4, 6), (5, 8), (6, 10)] if not quick else [(3, 3), (6, 10)]
    results = {}  # (kind, fn, who) -> [(n, t)]
    cases = [("chain", n, ug.chain_urdf(n)) for n in chain_ns]
    cases += [("tree", b * d, ug.branched_urdf(b, d)) for (b, d) in tree_shapes]
    for kind, n, xml in cases:
        try:
            bch = Bench(f"{kind}{n}", xml, False)
        except Exception as e:
            print(f"  {kind} {n}: cannot load: {type(e).__name__}: {e}")
            continue
        for _, name, _ in FUNCS:
            fo = bch.ours(name)
            to = None
            tp = None
            if fo is not None:
                try:
                    to, tp = paired(fo, bch.pin(name), target=0.08, rounds=5)
                except Exception:
                    to = None
            if tp is None:
                tp = per_call(bch.pin(name), target=0.06, repeat=5)
            results.setdefault((kind, name, "ours"), []).append((n, to))
            results.setdefault((kind, name, "pinocchio"), []).append((n, tp))
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "scaling.csv", "w") as fh:
        fh.write("kind,function,library,n_joints,seconds_per_call\n")
        for (kind, name, who), pts in results.items():
            for n, t in pts:
                fh.write(f"{kind},{name},{who},{n},{'' if t is None else repr(t)}\n")
    print("Scaling (time per call, us): ours / pinocchio")
    header = f"  {'model':<10}" + "".join(f"{lab:>26}" for lab, _, _ in FUNCS)
    print(header)
    for kind, n, _ in cases:
        cells = []
        for _, name, _ in FUNCS:
            o = dict(results.get((kind, name, "ours"), [])).get(n)
            p = dict(results.get((kind, name, "pinocchio"), [])).get(n)
            cells.append(f"{'-' if o is None else f'{o * 1e6:.1f}':>10} / {'-' if p is None else f'{p * 1e6:.1f}':<8} "
                         f"{'' if (o is None or p is None) else f'x{o / p:.1f}':>5}")
        print(f"  {kind + str(n):<10}" + "".join(f"{c:>26}" for c in cells))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True)
        for ax, (label, name, pname) in zip(axes.flat, FUNCS):
            for kind, style in (("chain", "-o"), ("tree", "--s")):
                for who, color in (("ours", "tab:blue"), ("pinocchio", "tab:orange")):
                    pts = [(n, t) for n, t in results.get((kind, name, who), []) if t is not None]
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] * 1e6 for p in pts], style, color=color,
                                label=f"{'dynamics_node' if who == 'ours' else 'Pinocchio ' + pname} ({kind})", ms=4)
            ax.set_title(label)
            ax.set_ylabel("time per call [us]")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        for ax in axes[1]:
            ax.set_xlabel("number of joints")
        fig.suptitle("dynamics_node vs Pinocchio: time per call vs number of joints")
        fig.tight_layout()
        fig.savefig(OUT / "scaling.png", dpi=110)
        print(f"  plot: {OUT / 'scaling.png'}  data: {OUT / 'scaling.csv'}")
    except Exception as e:
        print(f"  plot failed: {type(e).__name__}: {e}")
    print()


def humanoid():
    """TALOS full v2 (floating base), <mimic> removed so both libraries have the same joints."""
    p = ug.erd("talos_data/robots/talos_full_v2.urdf")
    return "talos_full_v2 floating (no mimic)", ug.strip_mimic(p.read_text())


def arm():
    p = REPO / "urdf" / "arm7.urdf"
    if p.exists():
        return "arm7 (urdf/arm7.urdf)", p.read_text(), p
    p = ug.erd("panda_description/urdf/panda.urdf")
    return "panda (arm7.urdf missing)", p.read_text(), p


def observer_cost(b):
    """Issue 10 §3: what the momentum observer adds per joint state (target <= 30 us on a 7-DoF arm):
    the update (H, C, the arithmetic; g comes from the stream's gravity torques) and the wrench at
    the arm's tip (Jacobian in link axes, the 6 x 6 least squares)."""
    import dynamics_node as dn
    from dynamics_node.ros.stream_observer import default_wrench_link
    m = b.model
    rng = np.random.default_rng(0)
    q, qd, tau = rng.uniform(-1, 1, m.nq), rng.uniform(-1, 1, m.nv), rng.uniform(-1, 1, m.nv)
    g = dn.gravity(m, q)
    link = default_wrench_link(m)
    o = dn.MomentumObserver(m, 50.0)
    t = [0.0]

    def update():
        t[0] += 1e-3
        return o.update(t[0], q, qd, tau, g=g)

    def both():
        r = update()
        return dn.external_wrench(m, q, link, r)
    tu, tb = per_call(update), per_call(both)
    print(f"Momentum observer, {b.label} (nv = {m.nv}): per joint state {fmt_t(tb)} with the wrench at "
          f"'{link}' (update alone {fmt_t(tu)}); target <= 30 us on a 7-DoF arm")
    print()


def _tool_link(b):
    """The link with the most supporting dofs (the arm's flange, a humanoid's hand), and Pinocchio's frame id."""
    dn, m = b.dn, b.model
    link = max(m.link_names, key=lambda l: (np.count_nonzero(np.abs(dn.jacobian(m, b.q, l)).sum(0)), l))
    return link, b.pm.getFrameId(link, pin.FrameType.BODY)


def controller_terms(benches):
    """Issue 11: the terms of model-based controllers against Pinocchio's, paired in this run."""
    print(f"Controller terms (issue 11), ours vs Pinocchio, paired; {RATIO_HEADER}")
    print(f"{'model':<34} {'function':<27} {'ours':>12} {'pinocchio':>12} {'ratio':>17}  pinocchio's pieces")
    print("-" * 130)
    for b in benches:
        dn, m, q, qd = b.dn, b.model, b.q, b.qd
        pm, pd, pq, pv = b.pm, b.pd, b.pq, b.pv
        link, fid = _tool_link(b)
        lwa = pin.LOCAL_WORLD_ALIGNED

        def pin_jdot():
            pin.computeJointJacobiansTimeVariation(pm, pd, pq, pv)
            return pin.getFrameJacobianTimeVariation(pm, pd, fid, lwa)

        def pin_osi():
            Mi = pin.computeMinverse(pm, pd, pq)
            Mi = np.triu(Mi) + np.triu(Mi, 1).T  # Pinocchio fills the upper triangle
            J = pin.computeFrameJacobian(pm, pd, pq, fid, lwa)
            return np.linalg.inv(J @ Mi @ J.T)

        rows = [
            ("coriolis_matrix", lambda: dn.coriolis_matrix(m, q, qd), lambda: pin.computeCoriolisMatrix(pm, pd, pq, pv),
             "computeCoriolisMatrix"),
            ("jacobian_derivative", lambda: dn.jacobian_derivative(m, q, qd, link), pin_jdot,
             "computeJointJacobiansTimeVariation + getFrameJacobianTimeVariation"),
            ("operational_space_inertia", lambda: dn.operational_space_inertia(m, q, link), pin_osi,
             "computeMinverse + computeFrameJacobian + inv(J Minv J^T) (numpy)"),
        ]
        for name, fo, fp, pname in rows:
            if getattr(dn, name, None) is None:
                print(f"{b.label:<34} {name:<27} {'MISSING':>12}")
                continue
            try:
                r = paired_rounds(fo, fp)
                print(f"{b.label:<34} {name:<27} {fmt_t(r.ours_median):>12} {fmt_t(r.ref_median):>12} {r.fmt():>17}  "
                      f"{pname}")
            except Exception as e:  # report, never hide
                print(f"{b.label:<34} {name:<27} error: {type(e).__name__}: {str(e)[:70]}")
        print(f"{'':<34} (link '{link}')")
    print()


CONTACT_POINTS = [("tool0", (0.0, 0.02, 0.05)), ("link6", (0.02, 0.0, 0.05)), ("link5", (0.0, 0.03, 0.1)),
                  ("link4", (0.03, 0.0, 0.1))]


def contact_bench(b):
    """Issue 23: contact_forward_dynamics on the arm with 1 and 4 point contacts against Pinocchio's
    constraintDynamics (CONTACT_3D RigidConstraintModels at the same points, LOCAL_WORLD_ALIGNED, the
    proximal solver at 10 iterations) and forwardDynamics with the points' Jacobians and drifts
    (KKT). The contacts are made active and sticking so that both solve the same problem: the arm at
    rest, each normal along Pinocchio's bilateral force, mu = 2 (our result is checked to equal it)."""
    dn, m = b.dn, b.model
    if getattr(dn, "contact_forward_dynamics", None) is None or any(l not in m.link_names for l, _ in CONTACT_POINTS):
        print("contact forward dynamics: MISSING (or not the arm)\n")
        return
    print("Contact forward dynamics (issue 23), ours vs Pinocchio, paired; arm at rest, contacts sticking; "
          + RATIO_HEADER)
    print(f"{'contacts':<10} {'ours':>12} {'constraintDynamics':>19} {'ratio':>17} {'forwardDynamics(J)':>19} "
          f"{'ratio':>17}  max |qdd - pin|")
    print("-" * 120)
    pm, pd = b.pm, b.pd
    q, qd = b.q, np.zeros(m.nv)
    tau = dn.gravity(m, q) * 0.3
    pq, pv, pt = b.oracle.q(q), b.oracle.v(qd), b.oracle.v(tau)
    G = b.oracle.G
    for k in (1, 4):
        cms = pin.StdVec_RigidConstraintModel()
        fm = pin.Model(pm)
        fids = []
        for link, p in CONTACT_POINTS[:k]:
            fid = pm.getFrameId(link, pin.FrameType.BODY)
            fr = pm.frames[fid]
            P = fr.placement * pin.SE3(np.eye(3), np.array(p))
            cms.append(pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pm, fr.parentJoint, P,
                                                pin.ReferenceFrame.LOCAL_WORLD_ALIGNED))
            fids.append(fm.addFrame(pin.Frame(f"c{len(fids)}", fr.parentJoint, fid, P, pin.FrameType.OP_FRAME)))
        cds = pin.StdVec_RigidConstraintData()
        for cm in cms:
            cds.append(cm.createData())
        pin.initConstraintDynamics(pm, pd, cms, cds)
        prox = pin.ProximalSettings(1e-12, 1e-12, 10)
        a = pin.constraintDynamics(pm, pd, pq, pv, pt, cms, cds, prox)
        contacts = [dn.Contact(link, p, normal=np.asarray(cd.contact_force.linear), friction=2.0)
                    for (link, p), cd in zip(CONTACT_POINTS[:k], cds)]
        fd = fm.createData()
        pin.forwardKinematics(fm, fd, pq, pv, np.zeros(fm.nv))
        pin.updateFramePlacements(fm, fd)
        pin.computeJointJacobians(fm, fd, pq)
        J = np.vstack([pin.getFrameJacobian(fm, fd, f, pin.LOCAL_WORLD_ALIGNED)[:3] for f in fids])
        gam = np.concatenate([pin.getFrameClassicalAcceleration(fm, fd, f, pin.LOCAL_WORLD_ALIGNED).linear
                              for f in fids])
        try:
            r = dn.contact_forward_dynamics(m, q, qd, tau, contacts)
            err = float(np.max(np.abs(r.qdd - G.T @ a)))
            cd_ = paired_rounds(lambda: dn.contact_forward_dynamics(m, q, qd, tau, contacts),
                                lambda: pin.constraintDynamics(pm, pd, pq, pv, pt, cms, cds, prox))
            kkt = paired_rounds(lambda: dn.contact_forward_dynamics(m, q, qd, tau, contacts),
                                lambda: pin.forwardDynamics(fm, fd, pq, pv, pt, J, gam, 1e-12))
            print(f"{k:<10} {fmt_t(cd_.ours_median):>12} {fmt_t(cd_.ref_median):>19} {cd_.fmt():>17} "
                  f"{fmt_t(kkt.ref_median):>19} {kkt.fmt():>17}  {err:.1e} ({', '.join(r.states)})")
        except Exception as e:  # report, never hide
            print(f"{k:<10} error: {type(e).__name__}: {str(e)[:80]}")
    print()


def _run_script(path, what=""):
    """Run one bench script in its own process; its exit code is reported, not raised."""
    if not path.exists():
        print(f"{path.relative_to(REPO)}: not present (skipped)")
        return
    print(f"== {path.relative_to(REPO)}{what} ==", flush=True)
    r = subprocess.run([sys.executable, str(path)], cwd=str(REPO))
    if r.returncode:
        print(f"{path.name} exited with {r.returncode}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer scaling points")
    ap.add_argument("--no-scaling", action="store_true")
    ap.add_argument("--no-node", action="store_true")
    ap.add_argument("--only-scaling", action="store_true",
                    help="the scaling sweep alone (bench/out/scaling.png; make docs-figures uses it)")
    ap.add_argument("--against", metavar="REV", help="only compare this checkout with REV (bench/compare.py)")
    args = ap.parse_args(argv)
    if args.against:
        return subprocess.run([sys.executable, str(HERE / "compare.py"), args.against]).returncode
    if args.only_scaling:
        scaling(quick=args.quick)
        return 0

    print(f"dynamics_node benchmark  |  pinocchio {pin.__version__}  |  numpy {np.__version__}  |  "
          f"python {sys.version.split()[0]}  |  cpus {os.cpu_count()}  |  "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')}")
    try:
        import dynamics_node as dn  # noqa: F401
        from dynamics_node import _jit
    except Exception as e:
        print(f"dynamics_node cannot be imported: {type(e).__name__}: {e}")
        return 1
    print("kernels: " + ("the ahead-of-time library (C callbacks), numba for the rest" if _jit.aot_loaded()
                         else "numba only (no ahead-of-time library for these sources: make kernels)"))
    print()
    benches = []
    label, xml, path = arm()
    try:
        b = Bench(label, xml, False, our_source=path)
        print(f"{label}: nq = {b.model.nq}, nv = {b.model.nv}; load {b.load_time * 1e3:.0f} ms")
        benches.append(b)
    except Exception as e:
        print(f"{label}: cannot benchmark: {type(e).__name__}: {e}")
    hlabel, hxml = humanoid()
    try:
        h = Bench(hlabel, hxml, True)
        print(f"{hlabel}: nq = {h.model.nq}, nv = {h.model.nv} ({h.model.nv - 6} joints); "
              f"load {h.load_time * 1e3:.0f} ms")
        benches.append(h)
    except Exception as e:
        print(f"{hlabel}: cannot benchmark: {type(e).__name__}: {e}")
    print()
    table(benches)
    controller_terms(benches)
    if benches and not benches[0].model.floating_base:
        contact_bench(benches[0])
    for b in benches:
        batch(b)
    if benches and not benches[0].model.floating_base:
        observer_cost(benches[0])
    if not args.no_scaling:
        scaling(quick=args.quick)
    deriv = HERE / "bench_derivatives.py"
    if deriv.exists():
        print(f"== {deriv.relative_to(REPO)} (derivatives of the dynamics vs Pinocchio, issue 29) ==", flush=True)
        r = subprocess.run([sys.executable, str(deriv)], cwd=str(REPO))
        if r.returncode:
            print(f"bench_derivatives.py exited with {r.returncode}")
    loops = HERE / "bench_loops.py"
    if loops.exists():
        print(f"== {loops.relative_to(REPO)} (closed-loop FD of the dual-arm model vs Pinocchio constraintDynamics) ==",
              flush=True)
        r = subprocess.run([sys.executable, str(loops)], cwd=str(REPO))
        if r.returncode:
            print(f"bench_loops.py exited with {r.returncode}")
    ident = HERE / "bench_identify.py"
    if ident.exists():
        print(f"== {ident.relative_to(REPO)} (dynamics_identify fit, 60 s at 1 kHz, 7 DoF; regressor stacking "
              "vs Pinocchio) ==", flush=True)
        r = subprocess.run([sys.executable, str(ident)], cwd=str(REPO), stdout=subprocess.PIPE, text=True)
        print("\n".join(ln for ln in r.stdout.splitlines() if not ln.startswith(("  ", "warning", "identified",
                                                                                  "wrote /"))))
        if r.returncode:
            print(f"bench_identify.py exited with {r.returncode}")
    stream = HERE / "bench_stream.py"
    if stream.exists() and not args.no_node:
        print(f"== {stream.relative_to(REPO)} (the 1 kHz stream end to end, as a busy client sees it: alone, under "
              "service load, with the cores loaded) ==", flush=True)
        r = subprocess.run([sys.executable, str(stream)], cwd=str(REPO))
        if r.returncode:
            print(f"bench_stream.py exited with {r.returncode} (a target missed: see above)")
    if not args.no_node:
        for name, what in (("bench_sim.py", " (the step against mj_step; the node at 1x and 5x)"),
                           ("bench_clock.py", " (/clock at 5x as a subscribing rclpy client sees it)"),
                           ("bench_node.py", ""),
                           ("bench_install.py", " (first torque after a colcon install on Jazzy)")):
            _run_script(HERE / name, what)
    return 0


if __name__ == "__main__":
    sys.exit(main())
