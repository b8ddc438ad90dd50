#!/usr/bin/env python3
"""The module moves of the floor plan (docs/design.md), and a rewriter for text written before them.

A branch started before the move edits the modules at their old paths; git's rename detection carries
those edits to the new paths, but the lines both sides changed (import blocks, above all) conflict,
and lines the branch added name the old modules. Resolve such a conflict to the branch's side, then
run this on the files: their imports (relative ones resolved where the file was, module-level and
inside functions), dotted names (dynamics_node.algorithms.friction) and path mentions
(algorithms/friction.py) are rewritten to the new places. It never moves a file.

    .venv/bin/python tools/moved_modules.py FILE...      # rewrite these files in place
    .venv/bin/python tools/moved_modules.py --check      # list the lines of the tree that name old modules

A script, not a test: it serves the merges of branches older than the move.
"""
from __future__ import annotations

import ast
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
PKG = REPO / "dynamics_node"

# old path under dynamics_node/ -> new path
MOVES = {
    "algorithms/_common.py": "_kernel_io.py",
    "algorithms/topology.py": "topology.py",
    "algorithms/friction.py": "joint_law.py",
    "algorithms/loops/data.py": "loop_data.py",
    **{f"algorithms/{n}.py": f"algorithms/tree/{n}.py" for n in (
        "rnea", "rnea_batch", "crba", "aba", "hybrid", "kinematics", "jacobians", "coriolis", "dense", "ltdl",
        "operational_space", "mimic", "joint_limits", "lie_group")},
    "equivalence.py": "algorithms/tree/equivalence.py",
    "algorithms/contact.py": "algorithms/contact/forward_dynamics.py",
    "algorithms/contact_args.py": "algorithms/contact/args.py",
    "algorithms/contact_checks.py": "algorithms/contact/checks.py",
    "algorithms/contact_ncp.py": "algorithms/contact/ncp.py",
    "algorithms/contact_single.py": "algorithms/contact/single.py",
    "algorithms/soft_contact.py": "algorithms/contact/soft.py",
    "algorithms/impact.py": "algorithms/contact/impact.py",
    "algorithms/derivatives.py": "algorithms/derivatives/dynamics_derivatives.py",
    "algorithms/derivatives_c.py": "algorithms/derivatives/c_fronts.py",
    "algorithms/rnea_derivatives.py": "algorithms/derivatives/rnea_derivatives.py",
    "algorithms/aba_derivatives.py": "algorithms/derivatives/aba_derivatives.py",
    "algorithms/gravity_derivatives.py": "algorithms/derivatives/gravity_derivatives.py",
    "algorithms/linearize.py": "algorithms/derivatives/linearize.py",
    "algorithms/regressor.py": "algorithms/estimation/regressor.py",
    "algorithms/regressor_batch.py": "algorithms/estimation/regressor_batch.py",
    "identification.py": "algorithms/estimation/payload.py",
    "observer.py": "algorithms/estimation/observer.py",
    "algorithms/sim_step.py": "sim/step.py",
    "algorithms/sim_select.py": "sim/select.py",
    "algorithms/sim_route.py": "sim/route.py",
    "ros/sim_env.py": "sim/env.py",
    "ros/sim_shapes.py": "sim/shapes.py",
    "ros/sim_world.py": "sim/world.py",
    "ros/sim_commands.py": "sim/commands.py",
    "tools/__init__.py": "cli/__init__.py",
    "tools/cli.py": "cli/dynamics_cli.py",
    "tools/calls.py": "cli/calls.py",
    "tools/record.py": "cli/record.py",
    "summary.py": "cli/summary.py",
    "ros/identify.py": "ros/payload_services.py",
    "ros/observer.py": "ros/stream_observer.py",
    "ros/params.py": "ros/node_params.py",
    "identify/params.py": "identify/fit_params.py",
}


def dotted(path: str) -> str:
    parts = ["dynamics_node", *path[:-3].split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MOD = {dotted(o): dotted(n) for o, n in MOVES.items()}
MOD["dynamics_node.tools"] = "dynamics_node.cli"
OLD_PATH = {n: o for o, n in MOVES.items()}          # new path -> old path
PATHS = {**{"dynamics_node/" + o: "dynamics_node/" + n for o, n in MOVES.items()},
         **{o: n for o, n in MOVES.items() if "/" in o}, "dynamics_node/tools/": "dynamics_node/cli/"}


def _alternatives(keys):
    return "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))


RE_DOT = re.compile(r"(?<![\w.])(" + _alternatives(MOD) + r")(?![\w])")
RE_PATH = re.compile(r"(?<![\w/.])(" + _alternatives(PATHS) + r")(?![\w])")
OLD_MODULES = set(MOD) | {dotted(p.relative_to(PKG).as_posix()) for p in PKG.rglob("*.py")}


def _is_new_module(name: str) -> bool:
    rel = pathlib.Path(*name.split(".")[1:])
    return (PKG / rel).with_suffix(".py").is_file() or (PKG / rel / "__init__.py").is_file()


def _old_dots(text: str):
    """The matches of RE_DOT that name an old module, not a module of today's tree that shares the
    prefix (dynamics_node.algorithms.contact.args: contact/ is a package now)."""
    for m in RE_DOT.finditer(text):
        nxt = re.match(r"(?:\.| import )(\w+)", text[m.end():])
        if nxt and _is_new_module(m.group(1) + "." + nxt.group(1)):
            continue
        yield m


def _sub_dots(text: str) -> str:
    out, at = [], 0
    for m in _old_dots(text):
        out += [text[at:m.start()], MOD[m.group(1)]]
        at = m.end()
    return "".join(out) + text[at:]


def _new_name(old: str) -> str:
    if old in MOD:
        return MOD[old]
    for o, n in sorted(MOD.items(), key=lambda kv: -len(kv[0])):
        if old.startswith(o + "."):
            return n + old[len(o):]
    return old


def _relative(from_pkg: str, target: str) -> str:
    a, b = from_pkg.split("."), target.split(".")
    c = 0
    while c < min(len(a), len(b)) and a[c] == b[c]:
        c += 1
    return "." * (len(a) - c + 1) + ".".join(b[c:])


def rewrite(path: pathlib.Path) -> list[str]:
    """Rewrite one file in place; returns the import lines it could not rewrite (to do by hand)."""
    text = path.read_text(encoding="utf-8")
    manual = []
    rel = path.resolve().relative_to(REPO).as_posix()
    if rel.startswith("dynamics_node/") and rel.endswith(".py"):
        here = rel[len("dynamics_node/"):]
        old, new = dotted(OLD_PATH.get(here, here)), dotted(here)
        init = path.name == "__init__.py"
        old_pkg, new_pkg = (old, new) if init else (old.rsplit(".", 1)[0], new.rsplit(".", 1)[0])
        lines = text.splitlines(keepends=True)
        edits = []
        for n in ast.walk(ast.parse(text)):
            if not (isinstance(n, ast.ImportFrom) and n.level):
                continue
            base = old_pkg
            for _ in range(n.level - 1):
                base = base.rsplit(".", 1)[0]
            target = base + ("." + n.module if n.module else "")
            subs = [a.name for a in n.names if f"{target}.{a.name}" in OLD_MODULES]
            if subs:
                news = [_new_name(f"{target}.{s}") for s in subs]
                parents = {x.rsplit(".", 1)[0] for x in news}
                if len(parents) != 1 or len(subs) != len(n.names) or any(
                        x.rsplit(".", 1)[1] != s for x, s in zip(news, subs)):
                    manual.append(f"{rel}:{n.lineno}: {lines[n.lineno - 1].strip()}")
                    continue
                new_target = parents.pop()
            else:
                new_target = _new_name(target)
            was, now = "." * n.level + (n.module or ""), _relative(new_pkg, new_target)
            if was != now:
                edits.append((n.lineno - 1, n.col_offset, was, now))
        for ln, col, was, now in sorted(set(edits), reverse=True):
            m = re.compile(r"from\s+" + re.escape(was) + r"\s+import").match(lines[ln], col)
            if m is None:
                manual.append(f"{rel}:{ln + 1}: {lines[ln].strip()}")
                continue
            lines[ln] = lines[ln][:m.start()] + f"from {now} import" + lines[ln][m.end():]
        text = "".join(lines)
    text = _sub_dots(text)
    text = RE_PATH.sub(lambda m: PATHS[m.group(1)], text)
    path.write_text(text, encoding="utf-8")
    return manual


def check() -> int:
    """Lines of the tracked text files that name an old module by its dotted name or its path."""
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    found = 0
    for f in files:
        p = REPO / f
        if p.suffix not in (".py", ".md", ".c", ".h", ".txt", ".yaml") and p.name != "Makefile" or not p.is_file():
            continue
        if f == "tools/moved_modules.py":
            continue
        for k, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if any(True for _ in _old_dots(line)) or RE_PATH.search(line):
                print(f"{f}:{k}: {line.strip()}")
                found += 1
    return 1 if found else 0


def main(argv):
    if argv == ["--check"]:
        return check()
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    manual = [m for f in argv for m in rewrite(pathlib.Path(f))]
    for m in manual:
        print("by hand:", m)
    return 1 if manual else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
