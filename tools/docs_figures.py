#!/usr/bin/env python3
"""The pictures of docs/, made by the project's own tools, never by hand: `make docs-figures`.

  architecture.svg         the boxes and arrows of ARCHITECTURE below, drawn with matplotlib; every
                           module a box names must exist (test_docs.py checks it)
  identify_evaluate.png    `dynamics_identify evaluate --plot` on a simulated recording of arm7, after
                           `dynamics_identify fit` on another one (the commands of docs/identify.md,
                           as written, in a scratch folder that recordings() fills)
  identify_friction.png    the joint friction of the URDF that fit wrote, against the simulation's truth
  scaling.png              bench/bench.py --only-scaling --quick (the sweep of `make bench`, fewer points)

The simulated recordings are those of the identification tests (test/identify_sim.py: a perturbed,
physically consistent arm7 with friction, torques from Pinocchio plus noise, written as rosbag2).
Pinocchio is a test and benchmark dependency; this is a developer's tool, never imported by the package.

    .venv/bin/python tools/docs_figures.py [--out docs/img] [--only architecture identify scaling]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent

# ------------------------------------------------------------------------------------ architecture
# Boxes: (key, title, text, modules, (x, y, w, h), colour); x, y of the lower left corner in a 100 x 74
# drawing. Groups: (title, (x, y, w, h)). Arrows: (from, to, label).
CORE, EDGE, OUTSIDE = "#dbe9f6", "#fde7c8", "#e8e8e8"
GROUPS = [
    ("library: dynamics_node/ (no ROS; import dynamics_node as dn)", (1, 11, 52, 50)),
    ("ROS edge (dynamics_node/ros/): the main process", (56, 43, 43, 18)),
    ("ROS edge: the stream process", (56, 11, 43, 29)),
]
ARCHITECTURE = [
    ("user", "Python program", "import dynamics_node as dn",
     ["dynamics_node/__init__.py"], (3, 64, 48, 8), OUTSIDE),
    ("client", "service clients", "controllers, ros2, dynamics_cli (cli/dynamics_cli.py)",
     ["dynamics_node/cli/dynamics_cli.py"], (58, 64, 39, 8), OUTSIDE),
    ("driver", "robot driver, controller", "/joint_states in;\n~/gravity_torques, effort command out",
     [], (58, 1, 39, 7), OUTSIDE),
    ("dispatch", "dispatch.py, _kernel_io.py: the one call route", "checks and coerces inputs, refuses by name,\n"
     "mimic mapping, data=, finite results only", ["dynamics_node/dispatch.py", "dynamics_node/_kernel_io.py"],
     (3, 50, 48, 8), CORE),
    ("fast", "_fastcall.c", "C front (_routes.c):\nthe hot path, per-\nthread work buffer",
     ["dynamics_node/_fastcall.c", "dynamics_node/_routes.c"], (3, 37, 15, 10), CORE),
    ("kernels", "algorithms/", "numba kernels by chapter: tree/ (Ch. 5-7, 9),\nloops/ (Ch. 8), contact/ (Ch. 11),\n"
     "derivatives/, estimation/",
     ["dynamics_node/algorithms/tree", "dynamics_node/algorithms/loops", "dynamics_node/algorithms/contact",
      "dynamics_node/algorithms/derivatives", "dynamics_node/algorithms/estimation"], (20, 37, 31, 10), CORE),
    ("jit", "_jit.py", "ahead-of-time\nkernels.so,\nnumba's cache", ["dynamics_node/_jit.py"], (3, 25, 15, 9), CORE),
    ("simcore", "sim/", "simulation step,\nthe simulated\nrobot's world",
     ["dynamics_node/sim/step.py", "dynamics_node/sim/world.py"], (20, 25, 14, 9), CORE),
    ("identify", "identify/", "dynamics_identify:\nfit on rosbag2,\noffline", ["dynamics_node/identify"],
     (37, 25, 14, 9), CORE),
    ("model", "the core: model.py, layout.py", "Model (packed, immutable), Data; spatial.py,\njoints.py, "
     "joint_law.py, topology.py, loop_data.py",
     ["dynamics_node/model.py", "dynamics_node/layout.py", "dynamics_node/spatial.py", "dynamics_node/joints.py",
      "dynamics_node/joint_law.py", "dynamics_node/topology.py", "dynamics_node/loop_data.py"], (20, 13, 31, 9), CORE),
    ("urdf", "urdf.py", "URDF, xacro,\n<loop_joint> to a Model",
     ["dynamics_node/urdf.py", "dynamics_node/urdf_source.py", "dynamics_node/loop_joints.py"], (3, 13, 15, 9), CORE),
    ("services", "services.py", "helper node\ndynamics_node_services:\none handler per service",
     ["dynamics_node/ros/services.py"], (58, 45, 19, 12), EDGE),
    ("node", "node.py", "node dynamics_node:\nparameters (params/),\nmodel state, /diagnostics",
     ["dynamics_node/ros/node.py", "dynamics_node/ros/params", "dynamics_node/ros/diagnostics.py"],
     (79, 45, 18, 12), EDGE),
    ("stream", "stream.py, stream_process.py", "node dynamics_node_stream,\nSCHED_FIFO, own rcl wait set\n"
     "(stream_executor.py): joint\nstates to torques, observer",
     ["dynamics_node/ros/stream_process.py", "dynamics_node/ros/stream.py", "dynamics_node/ros/stream_executor.py"],
     (58, 13, 23, 22), EDGE),
    ("rossim", "simulation.py", "or the simulated\nrobot (sim/),\npublished",
     ["dynamics_node/ros/simulation.py"], (84, 25, 13, 10), EDGE),
    ("latest", "latest.py", "shared memory:\nlatest joint state", ["dynamics_node/ros/latest.py"],
     (84, 13, 13, 10), EDGE),
]
ARROWS = [
    ("user", "dispatch", ""),
    ("client", "services", "services"),
    ("driver", "stream", ""),
    ("stream", "driver", ""),
    ("dispatch", "fast", ""),
    ("dispatch", "kernels", ""),
    ("fast", "kernels", ""),
    ("jit", "fast", ""),
    ("simcore", "kernels", ""),
    ("identify", "kernels", ""),
    ("kernels", "model", ""),
    ("urdf", "model", ""),
    ("services", "dispatch", "dn.*"),
    ("stream", "dispatch", "dn.*"),
    ("node", "stream", "pipe"),
]


def architecture(out: pathlib.Path):
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"     # text stays text: a small, searchable SVG
    matplotlib.rcParams["svg.hashsalt"] = "dynamics_node"   # the same ids each time: no diff when nothing changed
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    fig, ax = plt.subplots(figsize=(12, 8.9))
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 74)
    ax.axis("off")
    for title, (x, y, w, h) in GROUPS:
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.3", fc="none", ec="#777", ls="--"))
        ax.text(x + 0.5, y + h - 0.3, title, fontsize=8.5, va="top", color="#444", style="italic")
    where = {}
    for key, title, text, _mods, (x, y, w, h), colour in ARCHITECTURE:
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.2", fc=colour, ec="#333"))
        ax.text(x + w / 2, y + h - 1.0, title, ha="center", va="top", fontsize=8.5, weight="bold",
                family="monospace" if "." in title or "/" in title else "sans-serif")
        ax.text(x + w / 2, y + (h - 2.2) / 2, text, ha="center", va="center", fontsize=7.5)
        where[key] = (x, y, w, h)

    def anchor(box, toward):
        x, y, w, h = where[box]
        tx, ty, tw, th = where[toward]
        cx, cy, ox = x + w / 2, y + h / 2, tx + tw / 2
        if ty >= y + h:
            return (min(max(ox, x + 2), x + w - 2), y + h)
        if ty + th <= y:
            return (min(max(ox, x + 2), x + w - 2), y)
        return (x + w, cy) if ox > cx else (x, cy)

    for a, b, label in ARROWS:
        p, q = anchor(a, b), anchor(b, a)
        ax.annotate("", xy=q, xytext=p, arrowprops=dict(arrowstyle="->", color="#224", lw=1.0,
                                                          connectionstyle="arc3,rad=0.08"))
        if label:
            ax.text((p[0] + q[0]) / 2 + 0.5, (p[1] + q[1]) / 2, label, fontsize=7, color="#224",
                    bbox=dict(fc="white", ec="none", alpha=0.8, pad=0.5))
    fig.tight_layout()
    fig.savefig(out / "architecture.svg", metadata={"Date": None})
    plt.close(fig)


def architecture_modules():
    """Every module path the diagram names (the test checks that each exists)."""
    return sorted({m for box in ARCHITECTURE for m in box[3]})


# ---------------------------------------------------------------------------------- identification
def recordings(folder: pathlib.Path, seed=3):
    """robot.urdf (arm7), rec1 (40 s) and rec2 (10 s) in folder: simulated recordings of a perturbed
    arm7 with friction; returns the truth's friction {joint: (damping, coulomb)}."""
    sys.path.insert(0, str(REPO / "test"))
    import identify_sim as sim
    import numpy as np

    import dynamics_node as dn

    arm7 = REPO / "urdf" / "arm7.urdf"
    text = arm7.read_text()
    rng = np.random.default_rng(seed)
    truth, fr = sim.perturbed_urdf(text, rng)
    model = dn.load_model(str(arm7))
    shutil.copy(arm7, folder / "robot.urdf")
    for name, duration, period in (("rec1", 40.0, 10.0), ("rec2", 10.0, 7.0)):
        t = np.arange(int(duration * 200.0)) / 200.0
        Q, QD, QDD = sim.fourier_trajectory(model, t, rng, period=period)
        tau = sim.truth_torques(truth, model, fr, Q, QD, QDD)
        noisy = tau + 0.02 * tau.std(axis=0) * rng.normal(size=tau.shape)
        sim.write_bag(str(folder / name), t, model.joint_names, Q, QD, noisy)
    (folder / "truth.urdf").write_text(truth)
    (folder / "truth_friction.json").write_text(json.dumps(fr))
    return fr


IDENTIFY_COMMANDS = [
    "dynamics_identify fit rec1 --urdf robot.urdf --output robot_identified.urdf --report fit.json --plot fit.png",
    "dynamics_identify evaluate rec2 --urdf robot_identified.urdf --report eval.json --plot eval.png",
]


def env_with_venv():
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def identification(out: pathlib.Path):
    import xml.etree.ElementTree as ET

    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        fr = recordings(work)
        for cmd in IDENTIFY_COMMANDS:
            r = subprocess.run(cmd, shell=True, cwd=work, env=env_with_venv(), capture_output=True, text=True)
            if r.returncode:
                raise SystemExit(f"`{cmd}` failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        small_png(work / "eval.png", out / "identify_evaluate.png")
        found = {}
        for j in ET.parse(work / "robot_identified.urdf").getroot().findall("joint"):
            d = j.find("dynamics")
            if d is not None and j.get("name") in fr:
                found[j.get("name")] = (float(d.get("damping", 0)), float(d.get("friction", 0)))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted(fr)
    v = np.linspace(-1.5, 1.5, 301)
    fig, axes = plt.subplots(1, len(names), figsize=(2.0 * len(names), 2.6), sharey=True)
    for ax, name in zip(np.atleast_1d(axes), names):
        b, f = found.get(name, (np.nan, np.nan))
        ax.plot(v, b * v + f * np.sign(v), "-", lw=3.0, color="tab:orange", alpha=0.7, label="identified")
        b, f = fr[name]
        ax.plot(v, b * v + f * np.sign(v), "--", lw=1.0, color="black", label="truth")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("q̇ [rad/s]", fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    np.atleast_1d(axes)[0].set_ylabel("friction torque [N·m]", fontsize=8)
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.suptitle("Joint friction b q̇ + f_c sign(q̇): identified by dynamics_identify fit, and the truth", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "identify_friction.png", dpi=90)
    plt.close(fig)
    small_png(out / "identify_friction.png", out / "identify_friction.png")


# ----------------------------------------------------------------------------------------- scaling
def scaling(out: pathlib.Path):
    r = subprocess.run([sys.executable, str(REPO / "bench" / "bench.py"), "--only-scaling", "--quick"], cwd=REPO,
                       env=env_with_venv())
    if r.returncode:
        raise SystemExit(f"bench/bench.py --only-scaling failed ({r.returncode})")
    small_png(REPO / "bench" / "out" / "scaling.png", out / "scaling.png")


def small_png(src: pathlib.Path, dst: pathlib.Path, colours=64):
    """src as a palette PNG of `colours` colours (a plot has few; a tenth of the bytes)."""
    from PIL import Image

    img = Image.open(src).convert("RGB").quantize(colors=colours, method=Image.Quantize.MEDIANCUT)
    img.save(dst, optimize=True)


FIGURES = {"architecture": architecture, "identify": identification, "scaling": scaling}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "img"))
    ap.add_argument("--only", nargs="+", choices=sorted(FIGURES), default=list(FIGURES))
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for name in args.only:
        print(f"docs figure: {name} -> {out}", flush=True)
        FIGURES[name](out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
