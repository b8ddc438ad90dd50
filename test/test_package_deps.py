"""package.xml is the truth: rosdep installs on a robot computer only what package.xml declares, so
every third-party module that the installed package imports at run time (dynamics_node/ and the launch
files, imports inside functions included: an AST scan, not an import) has its rosdep key as an
exec_depend, every module the tests import has one as a test_depend (or exec_depend), and every key
declared resolves: checked against test/data/rosdep_keys.txt, an extract of rosdistro (system keys
with an Ubuntu noble rule; packages released in Jazzy and Kilted; tools/rosdep_keys.py writes it)
because rosdep cannot reach its database from here. A key that rosdistro lacks is allowed only when
docs/install.md tells rosdep to skip it and says how to install the package instead.

The next import without its key fails test_every_runtime_import_has_its_exec_depend, naming it.
"""
from __future__ import annotations

import ast
import os
import pathlib
import re
import sys
import xml.etree.ElementTree as ET

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
RUNTIME_SOURCES = sorted((REPO / "dynamics_node").rglob("*.py")) + sorted((REPO / "launch").glob("*.py"))
TEST_SOURCES = sorted((REPO / "test").rglob("*.py"))
FIRST_PARTY = {"dynamics_node", "dynamics_interfaces"}   # this package (it builds dynamics_interfaces)

# Python module -> rosdep key, where they differ; a module that is itself a ROS package of Jazzy and
# Kilted (rclpy, std_msgs, launch_ros, xacro...) is its own key.
MODULE_KEYS = {
    "numpy": "python3-numpy",
    "scipy": "python3-scipy",
    "yaml": "python3-yaml",
    "numba": "python3-numba",
    "llvmlite": "python3-numba",      # numba's code generator: a dependency of numba (apt and pip alike)
    "matplotlib": "python3-matplotlib",
    "rosbags": "python3-rosbags-pip",
    "cvxpy": "python3-cvxpy-pip",
    "qdldl": "python3-qdldl-pip",
    "pytest": "python3-pytest",
    "hypothesis": "python3-hypothesis",
    "pinocchio": "pinocchio",
    "mujoco": "python3-mujoco-pip",
}
# Keys rosdistro does not have: rosdep must skip them (docs/install.md says so and how to install them)
NO_KEY = {"python3-qdldl-pip"}
# Test-only modules with no rosdep key at all, installed with pip for the tests (docs/install.md)
TEST_ONLY_PIP = {"example_robot_data": "example-robot-data", "cmeel": "example-robot-data"}
# Python module -> the distribution setup.py's install_requires names (pip installs), where they differ
PIP_NAMES = {"yaml": "pyyaml", "cvxpy": "cvxpy-base", "llvmlite": "numba"}


def imports(paths, local=(), base=REPO):
    """{top-level module: first file importing it} of `paths`: import statements anywhere (inside
    functions too) and pytest.importorskip("x") calls; stdlib, relative and `local` modules left out."""
    out = {}
    for p in paths:
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"), str(p))):
            names = []
            if isinstance(n, ast.Import):
                names = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
                names = [n.module]
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "importorskip"
                  and n.args and isinstance(n.args[0], ast.Constant)):
                names = [n.args[0].value]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY and top not in local:
                    out.setdefault(top, p.relative_to(base).as_posix())
    return out


def declared():
    """{dependency kind: set of keys} of package.xml (`depend` counts as build, exec and test)."""
    root = ET.parse(REPO / "package.xml").getroot()
    kinds = {}
    for el in root:
        if el.tag.endswith("depend"):
            kinds.setdefault(el.tag, set()).add(el.text.strip())
    both = kinds.get("depend", set())
    return {k: kinds.get(k, set()) | both for k in ("buildtool_depend", "build_depend", "exec_depend", "test_depend")}


def rosdep_keys():
    keys = {}
    for line in (REPO / "test" / "data" / "rosdep_keys.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            k, _, where = line.partition("\t")
            keys[k] = set(where.split())
    return keys


def key_of(module, keys):
    if module in MODULE_KEYS:
        return MODULE_KEYS[module]
    if {"jazzy", "kilted"} <= keys.get(module, set()):
        return module
    return None


def test_the_rosdep_extract_is_rosdistros():
    """The extract holds what a reader of rosdistro would find: numpy's system key, rclpy in both
    distributions, and no key at all for qdldl (the reason for NO_KEY)."""
    keys = rosdep_keys()
    assert len(keys) > 3000, "test/data/rosdep_keys.txt looks truncated: rewrite it with tools/rosdep_keys.py"
    assert keys["python3-numpy"] == {"noble"} and {"jazzy", "kilted"} <= keys["rclpy"]
    assert not any("qdldl" in k for k in keys)


def test_every_runtime_import_has_its_exec_depend():
    keys = rosdep_keys()
    exec_deps = declared()["exec_depend"]
    problems = []
    for module, where in sorted(imports(RUNTIME_SOURCES).items()):
        key = key_of(module, keys)
        if key is None:
            problems.append(f"{where} imports {module}: no rosdep key is known for it (add its exec_depend to "
                            f"package.xml and the module's key to MODULE_KEYS here)")
        elif key not in exec_deps:
            problems.append(f"{where} imports {module}: package.xml has no <exec_depend>{key}</exec_depend>")
    assert not problems, "\n".join(problems)


def test_every_test_import_has_its_test_depend():
    keys = rosdep_keys()
    deps = declared()
    have = deps["test_depend"] | deps["exec_depend"]
    local = {p.stem for p in TEST_SOURCES} | {p.stem for p in (REPO / "tools").glob("*.py")}
    problems = []
    for module, where in sorted(imports(TEST_SOURCES, local).items()):
        if module in TEST_ONLY_PIP:
            continue
        key = key_of(module, keys)
        if key is None:
            problems.append(f"{where} imports {module}: no rosdep key is known for it")
        elif key not in have:
            problems.append(f"{where} imports {module}: package.xml has no <test_depend>{key}</test_depend>")
    assert not problems, "\n".join(problems)


def test_every_declared_key_resolves_or_is_skipped_as_docs_install_md_says():
    keys = rosdep_keys()
    unresolved = set()
    for kind, ks in declared().items():
        for k in ks:
            where = keys.get(k, set())
            ros = {"jazzy", "kilted"} <= where
            if not (ros or "noble" in where):
                unresolved.add(k)
    assert unresolved == NO_KEY, (f"keys rosdistro does not resolve on Ubuntu noble / Jazzy and Kilted: "
                                  f"{sorted(unresolved)}; allowed only: {sorted(NO_KEY)}")
    text = (REPO / "docs" / "install.md").read_text()
    skips = set()
    for m in re.finditer(r"--skip-keys[ =]\"([^\"]+)\"", text):
        skips |= set(m.group(1).split())
    assert NO_KEY <= skips, f"docs/install.md must tell rosdep to skip {sorted(NO_KEY - skips)}"
    for k in NO_KEY:
        pip = k.removeprefix("python3-").removesuffix("-pip")
        assert re.search(rf"pip install [^\n]*\b{re.escape(pip)}\b", text), f"docs/install.md: no pip install of {pip}"
    for module, dist in TEST_ONLY_PIP.items():
        assert dist in text, f"docs/install.md must say how to install {dist} (tests import {module})"


def test_no_dependency_is_declared_twice_and_interfaces_are_not_a_key():
    """dynamics_interfaces is built by this package (setup.py): as a key it would be unresolvable, as
    rosdep does not find the nested package either."""
    root = ET.parse(REPO / "package.xml").getroot()
    seen = {}
    for el in root:
        if el.tag.endswith("depend"):
            seen.setdefault((el.tag, el.text.strip()), 0)
            seen[(el.tag, el.text.strip())] += 1
    assert all(n == 1 for n in seen.values()), [k for k, n in seen.items() if n > 1]
    assert not any(k == "dynamics_interfaces" for _, k in seen)


def test_setup_py_install_requires_every_runtime_module_that_pip_installs():
    """`pip install .` (no rosdep) must bring the same non-ROS modules."""
    setup = ast.parse((REPO / "setup.py").read_text())
    req = next(kw.value for n in ast.walk(setup) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup"
               for kw in n.keywords if kw.arg == "install_requires")
    names = {ast.literal_eval(e).lower() for e in req.elts}
    keys = rosdep_keys()
    missing = []
    for module, where in sorted(imports(RUNTIME_SOURCES).items()):
        if key_of(module, keys) == module:   # a ROS package: from the distribution or its wheels
            continue
        if PIP_NAMES.get(module, module).lower() not in names:
            missing.append(f"{where} imports {module}: setup.py's install_requires lacks "
                           f"{PIP_NAMES.get(module, module)}")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("module", ["pandas", "torch"])
def test_an_import_without_a_key_is_caught(tmp_path, module):
    """The scan sees an import inside a function, and no key is known for these modules."""
    f = tmp_path / "x.py"
    f.write_text(f"def f():\n    import {module}.sub as s\n    return s\n")
    found = imports([f], base=tmp_path)
    assert found == {module: "x.py"} and key_of(module, rosdep_keys()) is None


def _make_n(*args):
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # not make test's
    r = subprocess.run(["make", "-n", "-B", *args], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_make_sets_up_jazzy_in_its_own_venv():
    """docs/install.md: `make setup ROS_DISTRO=jazzy` and `make test ROS_DISTRO=jazzy` use .venv-jazzy,
    constraints-jazzy.txt (Jazzy's rclpy 7, Ubuntu 24.04's setuptools 68) and Jazzy's wheels; plain
    `make setup` stays on Kilted in .venv (the recipes as make would run them, `make -n -B`)."""
    jazzy, kilted = _make_n("setup", "ROS_DISTRO=jazzy"), _make_n("setup")
    assert "-m venv .venv-jazzy" in jazzy and "-c constraints-jazzy.txt" in jazzy
    assert "-r requirements-ros-jazzy.txt" in jazzy and ".venv/" not in jazzy.replace(".venv-jazzy/", "")
    assert "-m venv .venv\n" in kilted and "-c constraints.txt" in kilted and "jazzy" not in kilted
    assert ".venv-jazzy/bin/python -m pytest -q test" in _make_n("test", "ROS_DISTRO=jazzy")
    pins = dict(ln.split("==") for ln in (REPO / "constraints-jazzy.txt").read_text().splitlines()
                if "==" in ln and not ln.startswith("#"))
    assert pins["ros-rclpy"].startswith("7.") and pins["ros-jazzy-rclpy"] == pins["ros-rclpy"]
    assert pins["setuptools"] == "68.1.2"
    reqs = [ln.split("#")[0].strip() for ln in (REPO / "requirements-ros-jazzy.txt").read_text().splitlines()]
    assert all(r.startswith("ros-jazzy-") for r in reqs if r.startswith("ros-"))
    kilted_pins = dict(ln.split("==") for ln in (REPO / "constraints.txt").read_text().splitlines()
                       if "==" in ln and not ln.startswith("#"))
    assert kilted_pins["ros-rclpy"].startswith("9.")


def test_make_tests_the_oldest_versions_in_their_own_venv():
    """`make test-oldest` (docs/install.md, Oldest versions): .venv-oldest with constraints-oldest.txt's pins,
    the library's tests on a copy of the checkout, never .venv nor the node's tests; and the oldest numba
    is one number everywhere: requirements.txt's floor, constraints-oldest.txt's pin and the version below
    which the kernel build stops (_jit_build.NUMBA_OLDEST)."""
    from dynamics_node._jit_build import NUMBA_OLDEST

    out = _make_n("test-oldest")
    assert "-m venv .venv-oldest" in out and "constraints-oldest.txt" in out and "build/oldest/src" in out
    assert ".venv/" not in out and "test/test_core_aot.py" in out and "test_node_" not in out and "test_sim_" not in out
    oldest = ".".join(map(str, NUMBA_OLDEST))
    lines = (REPO / "constraints-oldest.txt").read_text().splitlines()
    pins = dict(ln.split("#")[0].strip().split("==") for ln in lines if "==" in ln and not ln.startswith("#"))
    assert pins["numba"].startswith(oldest + ".")
    floors = [ln.split("#")[0].strip() for ln in (REPO / "requirements.txt").read_text().splitlines()]
    assert f"numba>={oldest}" in floors and f"numpy>={pins['numpy'].rsplit('.', 1)[0]}" in floors
    assert f"scipy>={pins['scipy'].rsplit('.', 1)[0]}" in floors
