"""The kernel build's command (dynamics_node/_jit_build.py) before it compiles anything: the numba
it refuses (older than docs/install.md's oldest). Nothing here compiles a kernel; the build itself is
checked by test_core_aot.py and test_core_warm.py on the kernels `make kernels` built.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from dynamics_node import _jit_build as jb

REPO = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("found, refused", [
    ("0.58.1", True), ("0.59.9", True), ("0.57.0", True), (None, True),
    ("0.60.0", False), ("0.60.0rc1", False), ("0.68.1", False), ("1.0.0", False),
])
def test_numba_older_than_the_oldest_supported_is_refused(found, refused):
    line = jb.numba_problem(found)
    assert (line is not None) == refused
    if refused:
        assert "\n" not in line and 'pip install "numba>=0.60"' in line and ">= 0.60" in line
        assert (found or "not installed") in line


def test_the_build_stops_at_once_with_an_old_numba(tmp_path):
    """The command itself, with the metadata of a numba 0.58.1 found first on the path: one line on
    stderr, a non-zero exit, and nothing compiled or written into the cache folder."""
    dist = tmp_path / "site" / "numba-0.58.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: numba\nVersion: 0.58.1\n")
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO)]),
           "NUMBA_CACHE_DIR": str(cache)}
    r = subprocess.run([sys.executable, "-m", "dynamics_node._jit_build", "build", "--if-missing"], env=env,
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 3, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "numba 0.58.1 found" in lines[0] and 'pip install "numba>=0.60"' in lines[0], lines
    assert not cache.exists()
