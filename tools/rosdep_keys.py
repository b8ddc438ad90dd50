"""Write test/data/rosdep_keys.txt: the rosdep keys that a robot computer's rosdep resolves, read from a
checkout of rosdistro (github.com/ros/rosdistro), for test/test_package_deps.py (rosdep cannot reach
its database from the test machines, so the test reads this extract).

    python tools/rosdep_keys.py /path/to/rosdistro [test/data/rosdep_keys.txt]

One line per key, tab-separated: the key, then where it resolves:
  noble   a system key of rosdep/base.yaml or rosdep/python.yaml with an Ubuntu 24.04 (noble) rule,
          apt or pip (what Jazzy runs on; Kilted's platform is the same Ubuntu)
  jazzy   a package released in Jazzy (jazzy/distribution.yaml), rosdep's ros-jazzy-<name>
  kilted  a package released in Kilted (kilted/distribution.yaml)
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import yaml

UBUNTU = "noble"
DISTROS = ("jazzy", "kilted")


def resolves_on_ubuntu(rule) -> bool:
    """Whether a rosdep rule (the value of a key) has a non-empty rule for Ubuntu noble."""
    if not isinstance(rule, dict) or "ubuntu" not in rule:
        return False
    u = rule["ubuntu"]
    if isinstance(u, dict) and not ({"pip", "apt", "source", "packages"} & set(u)):
        u = u.get(UBUNTU, u.get("*"))      # per release codename
    if isinstance(u, dict):
        inner = u.get("pip") or u.get("apt") or u.get("source") or u
        return bool(inner.get("packages", inner) if isinstance(inner, dict) else inner)
    return bool(u)


def released(distribution: dict) -> set:
    out = set()
    for name, repo in distribution.get("repositories", {}).items():
        rel = repo.get("release") or {}
        if rel.get("version"):
            out.update(rel.get("packages") or [name])
    return out


def extract(rosdistro: pathlib.Path) -> dict:
    keys = {}
    for f in ("base.yaml", "python.yaml"):
        for k, rule in yaml.safe_load((rosdistro / "rosdep" / f).read_text()).items():
            if resolves_on_ubuntu(rule):
                keys.setdefault(k, set()).add(UBUNTU)
    for d in DISTROS:
        for p in released(yaml.safe_load((rosdistro / d / "distribution.yaml").read_text())):
            keys.setdefault(p, set()).add(d)
    return keys


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    src = pathlib.Path(argv[0])
    out = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).parent.parent / "test" / "data"
                       / "rosdep_keys.txt")
    git = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True)
    commit = git.stdout.strip() or os.environ.get("ROSDISTRO_COMMIT", "")   # an exported tree: say which
    keys = extract(src)
    order = (UBUNTU,) + DISTROS
    lines = [f"# rosdep keys resolved on Ubuntu {UBUNTU} and the packages released in {' and '.join(DISTROS)},",
             f"# from rosdistro {commit or '(not a git checkout)'}; written by tools/rosdep_keys.py"]
    lines += [k + "\t" + " ".join(s for s in order if s in where) for k, where in sorted(keys.items())]
    out.write_text("\n".join(lines) + "\n")
    print(f"{out}: {len(keys)} keys")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
