#!/usr/bin/env python3
"""Loops, the 1 kHz stream and the node's start of this checkout against another revision, in one run:
`.venv/bin/python bench/compare_node.py REV` (the core functions and the derivatives: compare.py).

REV's worktree, C extensions and kernels are compare.py's (build/against/<its commit>, made once and
reused). Runs alternate: current, REV, current, REV, ... after one warm-up of each (its kernels loaded
once, not counted). A run of one checkout measures, with that checkout's package and node:

  loops   bench_loops.run(): closed-loop forward dynamics of the dual-arm model against Pinocchio's
          constraintDynamics, a ratio (ours / Pinocchio) timed in the same process;
  start   bench_node.start_times(): process start -> the node's "serving" line, arm7, cache warm, the
          median of --starts starts;
  stream  bench_stream.run() for the conditions "alone" and "service load": the end-to-end latency of
          the 1 kHz stream as a client that never sleeps sees it (p50 and p99 of --messages states).

The measuring code is this checkout's for both (bench_loops, bench_node, bench_stream; the node each
starts is the checkout's: bench_node.NODE_ROOT). Per measure the table gives each checkout's median
over its runs, with the lowest and highest run, and the change (current / REV), marked "slower" or
"faster" only when the two ranges do not overlap. No assertion: this only prints.
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
sys.path.insert(0, str(HERE))

import compare  # noqa: E402 - REV's worktree (compare.prepare), git, the environment of a checkout

MEASURES = (("loops", "ratio", "closed-loop FD / Pinocchio"), ("start", "median_s", "node start [s]"),
            ("stream alone", "p50_ms", "stream alone p50 [ms]"), ("stream alone", "p99_ms", "stream alone p99 [ms]"),
            ("stream service load", "p99_ms", "stream service load p99 [ms]"))


def loops_worker():
    """In a process whose PYTHONPATH is the checkout: its package first, then bench_loops (which puts this
    checkout's folder first on sys.path, too late to change the package already imported)."""
    import dynamics_node as dn

    print(json.dumps({"package": str(pathlib.Path(dn.__file__).resolve().parent)}), flush=True)
    import bench_loops

    print(json.dumps(bench_loops.run()), flush=True)
    return 0


def loops_once(root):
    r = subprocess.run([sys.executable, str(HERE / "compare_node.py"), "--loops-worker"], cwd=str(root),
                       env=compare._env(root), capture_output=True, text=True, timeout=900)
    lines = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode or len(lines) < 2:
        raise RuntimeError(f"loops worker on {root} exited with {r.returncode}:\n{r.stdout[-2000:]}{r.stderr[-3000:]}")
    if pathlib.Path(lines[0]["package"]) != (root / "dynamics_node").resolve():
        raise RuntimeError(f"the loops worker for {root} imported dynamics_node from {lines[0]['package']}")
    return lines[1]


def measure(root, starts, messages, quiet=print):
    import bench_node
    import bench_stream

    bench_node.NODE_ROOT = root
    out = {"loops": loops_once(root)}
    domain = 101 + (os.getpid() + 53) % 100
    start, node = bench_node.start_times(domain, "/compare_joint_states", "compare_dynamics_node", starts, say=quiet)
    node.stop()
    out["start"] = {"median_s": start["median_s"]}
    stream = bench_stream.run(messages, repeats=1, say=quiet, kinds=("alone", "service load"))
    out["stream alone"] = {k: stream["alone"][k] for k in ("p50_ms", "p99_ms", "answered")}
    out["stream service load"] = {k: stream["service load"][k] for k in ("p50_ms", "p99_ms", "answered")}
    return out


def _summary(results, names):
    import numpy as np

    cur, rev = names
    print(f"{'measure':<30} {cur:>24} {rev:>24} {'change':>7}  verdict (change = {cur} / {rev})")
    print("-" * 120)
    for key, field, label in MEASURES:
        cells, ranges = [], []
        for who in names:
            v = [r[key][field] for r in results[who] if key in r and np.isfinite(r[key][field])]
            if not v:
                cells.append("missing")
                ranges.append(None)
                continue
            m, lo, hi = float(np.median(v)), min(v), max(v)
            cells.append(f"{m:.3g} [{lo:.3g}-{hi:.3g}]")
            ranges.append((m, lo, hi))
        change, said = "-", ""
        if None not in ranges:
            change, said = compare.verdict(*ranges, "range")
        print(f"{label:<30} {cells[0]:>24} {cells[1]:>24} {change:>7}  {said}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", nargs="?", help="the revision to compare with (a commit, tag or branch)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each checkout (default 3)")
    ap.add_argument("--starts", type=int, default=3, help="timed node starts a run (default 3)")
    ap.add_argument("--messages", type=int, default=3000, help="joint states a stream condition a run")
    ap.add_argument("--rev-root", help="a checkout of REV, built, to use instead of build/against/<its commit>")
    ap.add_argument("--loops-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.loops_worker:
        return loops_worker()
    if not args.rev:
        ap.error("name the revision to compare with")
    sha, head, cur, other = compare.labels(args.rev)
    roots = {cur: REPO, other: compare.prepare(sha, args.rev_root)}
    load0 = os.getloadavg()
    print(f"comparison: {cur} against {other}; {args.runs} runs of each, alternating; load average "
          f"{load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, {os.cpu_count()} cpus", flush=True)
    for who, root in roots.items():   # warm-up: each checkout's kernels loaded (or compiled) once
        t0 = time.perf_counter()
        loops_once(root)
        print(f"  {who}: warm-up {time.perf_counter() - t0:.0f} s", flush=True)
    results = {who: [] for who in roots}
    log = HERE / "out" / f"compare-node-{head}-{sha[:7]}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as fh:
        for k in range(args.runs):
            for who, root in roots.items():
                r = measure(root, args.starts, args.messages, quiet=lambda *a, **kw: None)
                results[who].append(r)
                fh.write(json.dumps({"run": k, "who": who, **r}) + "\n")
                fh.flush()
            print(f"  run {k + 1}/{args.runs} of each done (load average {os.getloadavg()[0]:.2f})", flush=True)
    print()
    _summary(results, (cur, other))
    load1 = os.getloadavg()
    print(f"load average at the end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; every run in {log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
