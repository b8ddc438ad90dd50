"""The kernel build's surroundings (dynamics_node/__init__.py, _jit.py, _jit_build.py): the numba it
refuses (older than docs/install.md's oldest), the cache folder, which two numba versions must never
share, and what the build changes in numba 0.58. Nothing here compiles a kernel (one small function
at most); the build itself is checked by test_core_aot.py and test_core_warm.py on the kernels
`make kernels` built.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from dynamics_node import _jit_build as jb

REPO = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("found, refused", [
    ("0.57.1", True), ("0.56.4", True), ("0.49.0", True), (None, True),
    ("0.58.1", False), ("0.58.0rc1", False), ("0.60.0", False), ("0.68.1", False), ("1.0.0", False),
])
def test_numba_older_than_the_oldest_supported_is_refused(found, refused):
    line = jb.numba_problem(found)
    assert (line is not None) == refused
    if refused:
        assert "\n" not in line and 'pip install "numba>=0.58"' in line and ">= 0.58" in line
        assert (found or "not installed") in line


def _fake_site(tmp_path, version, package=False):
    """A folder with numba's metadata (and, with package, a numba package that is only its version
    file) of the given version, to put first on the path."""
    site = tmp_path / f"site-{version}"
    dist = site / f"numba-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: numba\nVersion: {version}\n")
    if package:
        (site / "numba").mkdir()
        (site / "numba" / "__init__.py").write_text("")
        (site / "numba" / "_version.py").write_text(f'version_json = \'{{"version": "{version}"}}\'\n')
    return site


def test_the_build_stops_at_once_with_an_old_numba(tmp_path):
    """The command itself, with the metadata of a numba 0.57.1 found first on the path: one line on
    stderr, exit code 3 at once, and nothing compiled or written into the cache folder."""
    site = _fake_site(tmp_path, "0.57.1")
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]), "NUMBA_CACHE_DIR": str(cache)}
    r = subprocess.run([sys.executable, "-m", "dynamics_node._jit_build", "build", "--if-missing"], env=env,
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 3, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "numba 0.57.1 found" in lines[0] and 'pip install "numba>=0.58"' in lines[0], lines
    assert not cache.exists()


def _cache_dir(tmp_path, *first):
    """NUMBA_CACHE_DIR as `import dynamics_node` sets it, with the folders `first` first on the path."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    env["PYTHONPATH"] = os.pathsep.join([*map(str, first), str(REPO)])
    r = subprocess.run([sys.executable, "-c", "import os, dynamics_node; print(os.environ['NUMBA_CACHE_DIR'])"],
                       env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path, check=True)
    return r.stdout.strip()


def test_two_numba_versions_never_share_a_cache_folder(tmp_path):
    """The folder is named after the kernel sources and the compiler: another numba (here a package
    that is only the version file of 0.58.1, found before the installed one) gets another folder,
    the same numba the same folder; the name never imports numba."""
    installed = _cache_dir(tmp_path)
    other = _cache_dir(tmp_path, _fake_site(tmp_path, "0.58.1", package=True))
    assert installed.startswith(str(tmp_path / "xdg" / "dynamics_node")), installed
    assert other != installed
    assert _cache_dir(tmp_path) == installed
    assert _cache_dir(tmp_path, _fake_site(tmp_path, "0.58.2", package=True)) not in (installed, other)


def _helper(a, i):
    x = a[i] * 2.0
    y = x + a[i + 1]
    return x * y - a[i + 2]


def test_numba_older_than_0_59_copies_an_inlined_callee_once():
    """_jit._fix_old_numba: with numba 0.58, the inliner's statement-by-statement copy of a block gets
    the statements of the block's copy (one scope copy per block, as numba 0.59's copy_ir), and a
    variable's copy shares its source location; the kernels' machine code is the same, only the
    copying is gone (docs/install.md, Oldest versions). With a newer numba nothing is patched."""
    import copy

    import numba
    from numba.core import compiler, inline_closurecall, ir

    from dynamics_node import _jit

    _jit._fix_old_numba(numba)
    version = tuple(int(p) for p in numba.__version__.split(".")[:2])
    if version >= (0, 59):
        assert inline_closurecall.copy is copy and "__deepcopy__" in ir.Var.__dict__
    else:
        _check_block_copy(compiler, inline_closurecall, copy)
    inlined = numba.njit(inline="always")(_helper)
    assert numba.njit(lambda a: inlined(a, 0) + inlined(a, 1))(np.array([1.0, 2.0, 3.0, 4.0])) == 29.0


def _check_block_copy(compiler, inline_closurecall, copy):
    assert inline_closurecall.copy is not copy
    func_ir = compiler.run_frontend(_helper)
    for block in func_ir.blocks.values():
        twin = inline_closurecall.copy.deepcopy(block)
        assert twin is not block and len(twin.body) == len(block.body)
        for stmt, copied in zip(block.body, twin.body):
            assert inline_closurecall.copy.deepcopy(stmt) is copied
        for v in twin.scope.localvars._con.values():
            assert v.scope is twin.scope
            assert v.loc is block.scope.localvars.get(v.name).loc
