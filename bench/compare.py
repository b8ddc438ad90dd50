#!/usr/bin/env python3
"""This checkout against another revision, in one run: `.venv/bin/python bench/compare.py REV` (or
`bench/bench.py --against REV`, `make bench AGAINST=REV`).

REV is checked out once into build/against/<its commit> (a detached git worktree, kept for the next
comparison), its C extensions built there and its kernels compiled into its own kernel cache (the first
time minutes of CPU; reused afterwards). Both checkouts run with this checkout's venv;
PYTHONPATH names the checkout whose package a process imports, and each process prints that package's
folder, which is checked. The measuring code is this checkout's for both (this file, pairing.py, bench.py's
Bench on this checkout's urdf/arm7.urdf and example-robot-data's Panda).

A run is one process: the core functions of bench.py's table on arm7 and the three derivatives of
bench_derivatives.py on arm7 and Panda (mimic finger), each against Pinocchio in paired rounds
(pairing.paired_rounds) on the process's CPU clock (--clock wall: elapsed time, as bench.py), printed as
JSON lines. Runs alternate: current, REV, current, REV, ... after one discarded warm-up run of each. Per
function the table gives, for each checkout, the median [interquartile range] of the per-round ratios to
Pinocchio over all its rounds, and the change (current median / REV median), marked "slower" or "faster"
only when the two interquartile ranges do not overlap.
No assertion: this only prints.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
DERIVATIVES = ("inverse_dynamics_derivatives", "forward_dynamics_derivatives", "gravity_derivatives")


def _git(*args, cwd=REPO):
    return subprocess.run(["git", *args], cwd=str(cwd), check=True, capture_output=True, text=True).stdout.strip()


def _env(root):
    return {**os.environ, "PYTHONPATH": str(root)}


# ------------------------------------------------------------------------------------ one run (worker)
def _rows():
    """(model, function, ours, Pinocchio's) of the compact benchmark, with the checkout's dynamics_node."""
    import warnings

    import bench as B
    import dynamics_node as dn
    from bench import pin, ug

    label, xml, path = B.arm()
    panda = ug.erd("panda_description/urdf/panda.urdf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arm = B.Bench(label, xml, False, our_source=path)
        pb = B.Bench("panda (mimic finger)", panda.read_text(), False, our_source=panda)
    rows = [("arm7", name, arm.ours(name), arm.pin(name)) for _, name, _ in B.FUNCS]
    for tag, b in (("arm7", arm), ("panda", pb)):
        m, q, qd, qdd, tau = b.model, b.q, b.qd, b.qdd, b.tau
        pm, pd, pq, pv, pa, pt = b.pm, b.pd, b.pq, b.pv, b.pa, b.ptau
        ours = {n: getattr(dn, n, None) for n in DERIVATIVES}
        rows += [
            (tag, DERIVATIVES[0], ours[DERIVATIVES[0]] and (lambda f=ours[DERIVATIVES[0]], m=m, q=q, qd=qd, qdd=qdd:
                                                             f(m, q, qd, qdd)),
             lambda pm=pm, pd=pd, pq=pq, pv=pv, pa=pa: pin.computeRNEADerivatives(pm, pd, pq, pv, pa)),
            (tag, DERIVATIVES[1], ours[DERIVATIVES[1]] and (lambda f=ours[DERIVATIVES[1]], m=m, q=q, qd=qd, tau=tau:
                                                             f(m, q, qd, tau)),
             lambda pm=pm, pd=pd, pq=pq, pv=pv, pt=pt: pin.computeABADerivatives(pm, pd, pq, pv, pt)),
            (tag, DERIVATIVES[2], ours[DERIVATIVES[2]] and (lambda f=ours[DERIVATIVES[2]], m=m, q=q: f(m, q)),
             lambda pm=pm, pd=pd, pq=pq: pin.computeGeneralizedGravityDerivatives(pm, pd, pq)),
        ]
    return rows


def worker(rounds, target, clock):
    import dynamics_node as dn
    from dynamics_node import _jit

    from pairing import paired_rounds

    print(json.dumps({"package": str(pathlib.Path(dn.__file__).resolve().parent), "aot": _jit.aot_loaded()}),
          flush=True)
    for model, name, fo, fp in _rows():
        if fo is None:
            print(json.dumps({"model": model, "function": name, "error": "missing"}), flush=True)
            continue
        try:
            r = paired_rounds(fo, fp, target=target, rounds=rounds, timer=CLOCKS[clock])
            print(json.dumps({"model": model, "function": name, "ours": r.ours, "ref": r.ref}), flush=True)
        except Exception as e:  # report, never hide
            print(json.dumps({"model": model, "function": name, "error": f"{type(e).__name__}: {e}"[:200]}),
                  flush=True)
    return 0


# ---------------------------------------------------------------------------------------- the comparison
def prepare(sha, root=None):
    """REV's worktree with its C extensions and its kernels built, made once and reused; `root`: a
    checkout of REV made elsewhere (--rev-root), used as it is once its commit is checked."""
    if root is not None:
        root = pathlib.Path(root).resolve()
        if _git("rev-parse", "HEAD", cwd=root) != sha:
            raise RuntimeError(f"{root} is not at {sha}")
        return root
    wt = REPO / "build" / "against" / sha
    if not (wt / "dynamics_node").is_dir():
        _git("worktree", "prune")
        wt.parent.mkdir(parents=True, exist_ok=True)
        print(f"git worktree add --detach {wt.relative_to(REPO)} {sha[:10]}", flush=True)
        _git("worktree", "add", "--detach", str(wt), sha)
    env = _env(wt)
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=str(wt), env=env,
                       capture_output=True, text=True)
    if r.returncode:   # its warnings only when it fails
        raise RuntimeError(f"setup.py build_ext in {wt} exited with {r.returncode}:\n{r.stdout}{r.stderr}")
    # the kernel builder's module: dynamics_node._jit_build, or dynamics_node._jit before it was split off
    builder = "dynamics_node._jit_build" if (wt / "dynamics_node" / "_jit_build.py").exists() else "dynamics_node._jit"
    print(f"{sha[:10]}'s kernels: python -m {builder} build --if-missing (minutes the first time)",
          flush=True)
    subprocess.run([sys.executable, "-m", builder, "build", "--if-missing"], cwd=str(wt), env=env, check=True)
    return wt


def run_once(root, rounds, target, clock="cpu", timeout=None):
    """One worker process on the checkout at root: (package folder line, [result lines])."""
    r = subprocess.run([sys.executable, str(HERE / "compare.py"), "--worker", "--rounds", str(rounds),
                        "--target", str(target), "--clock", clock], cwd=str(root), env=_env(root),
                       capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode or not lines:
        raise RuntimeError(f"worker on {root} exited with {r.returncode}:\n{r.stdout[-2000:]}{r.stderr[-3000:]}")
    head = lines[0]
    expected = (root / "dynamics_node").resolve()
    if pathlib.Path(head["package"]) != expected:
        raise RuntimeError(f"the worker for {root} imported dynamics_node from {head['package']}, not {expected}")
    return head, lines[1:]


def labels(rev):
    """(REV's full commit, HEAD's short commit, this checkout's label, REV's label): the labels read
    "current abc1234+edits" (edits: tracked files changed since HEAD) and "REV def5678"."""
    sha = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    head = _git("rev-parse", "--short=7", "HEAD")
    dirty = "+edits" if _git("status", "--porcelain", "--untracked-files=no") else ""
    return sha, head, f"current {head}{dirty}", f"REV {sha[:7]}"


def verdict(a, b, width):
    """The change and the verdict of (median, low, high) a against b: "slower" or "faster" only when
    the two ranges (low-high, which ``width`` names: "spread", "range") do not overlap."""
    (ma, la, ha), (mb, lb, hb) = a, b
    word = "slower" if la > hb else "faster" if ha < lb else None
    return f"{ma / mb:7.2f}", f"{word}: beyond the {width}" if word else f"within the {width}"


def _summary(results, names):
    """Per (model, function): the table's line from {who: {(model, function): [ratios]}}."""
    from pairing import spread

    cur, rev = names
    print(f"{'model':<6} {'function':<30} {cur:>17} {rev:>17} {'change':>7}  verdict (change = {cur} / {rev})")
    print("-" * 110)
    keys = list(dict.fromkeys(k for who in names for k in results[who]))
    for key in keys:
        a, b = results[cur].get(key), results[rev].get(key)
        cells, said = [], ""
        for r in (a, b):
            cells.append(f"{spread(r)[0]:.2f} [{spread(r)[1]:.2f}-{spread(r)[2]:.2f}]" if r else "missing")
        change = "-"
        if a and b:
            change, said = verdict(spread(a), spread(b), "spread")
        print(f"{key[0]:<6} {key[1]:<30} {cells[0]:>17} {cells[1]:>17} {change:>7}  {said}")


def compare(rev, runs=5, rounds=9, target=0.4, clock="cpu", rev_root=None):
    sha, head, cur, other = labels(rev)
    wt = prepare(sha, rev_root)
    roots = {cur: REPO, other: wt}
    load0 = os.getloadavg()
    print(f"comparison: {cur} ({REPO}) against {other} ({wt}); {runs} runs of each, alternating, {rounds} rounds "
          f"a run, {clock} clock; load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, {os.cpu_count()} cpus",
          flush=True)
    for who, root in roots.items():  # the warm-up run: numba loads or compiles the kernels a run calls
        t0 = time.perf_counter()
        h, _ = run_once(root, 1, 0.05)
        print(f"  {who}: dynamics_node from {h['package']}, ahead-of-time library "
              f"{'loaded' if h['aot'] else 'NOT loaded'}; warm-up run {time.perf_counter() - t0:.0f} s", flush=True)
    results = {who: {} for who in roots}
    OUT = HERE / "out"
    OUT.mkdir(parents=True, exist_ok=True)
    log = OUT / f"compare-{head}-{sha[:7]}-{clock}.jsonl"
    with open(log, "w") as fh:
        for k in range(runs):
            for who, root in roots.items():
                _, lines = run_once(root, rounds, target, clock, timeout=900)
                for ln in lines:
                    fh.write(json.dumps({"run": k, "who": who, **ln}) + "\n")
                    if "error" in ln:
                        results[who].setdefault((ln["model"], ln["function"]), [])
                        continue
                    results[who].setdefault((ln["model"], ln["function"]), []).extend(
                        o / p for o, p in zip(ln["ours"], ln["ref"]))
            print(f"  run {k + 1}/{runs} of each done (load average {os.getloadavg()[0]:.2f})", flush=True)
    load1 = os.getloadavg()
    print()
    print(f"Ratio to Pinocchio, median [interquartile range] of {runs} x {rounds} per-round ratios "
          f"(ours/Pinocchio, timed back to back in each round, {clock} clock); lower is faster")
    _summary(results, (cur, other))
    print(f"load average at the end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; every round in {log}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", nargs="?", help="the revision to compare with (a commit, tag or branch)")
    ap.add_argument("--runs", type=int, default=5, help="runs (processes) of each checkout (default 5)")
    ap.add_argument("--rounds", type=int, default=9, help="paired rounds a function in a run (default 9)")
    ap.add_argument("--target", type=float, default=0.4, help="seconds of all rounds of a function in a run")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                    help="cpu (default): this process's CPU time, which leaves out the time it waits for a core on "
                         "a loaded machine; wall: elapsed time, as bench.py's tables")
    ap.add_argument("--rev-root", help="a checkout of REV, built, to use instead of build/against/<its commit>")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.rounds, args.target, args.clock)
    if not args.rev:
        ap.error("name the revision to compare with")
    return compare(args.rev, args.runs, args.rounds, args.target, args.clock, args.rev_root)


if __name__ == "__main__":
    sys.exit(main())
