"""The kernel build's command (dynamics_node/_jit_build.py) before it compiles anything: how many
processes it runs (one per core, at most DYNAMICS_BUILD_JOBS, make's -jN and colcon's
--parallel-workers), the numba it refuses (older than docs/install.md's oldest), and how the numba
caches of its processes are merged. Nothing here compiles a kernel; the build itself is checked by
test_core_aot.py and test_core_warm.py on the kernels `make kernels` built.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from dynamics_node import _jit_build as jb

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_one_process_per_core_by_default():
    assert jb.jobs({}, cores=4, ancestors=[]) == 4
    assert jb.jobs({}, cores=1, ancestors=[]) == 1
    assert jb.jobs({}, ancestors=[]) == jb._cores() >= 1


def test_the_variable_sets_at_most_that_many():
    assert jb.jobs({"DYNAMICS_BUILD_JOBS": "1"}, cores=8, ancestors=[]) == 1
    assert jb.jobs({"DYNAMICS_BUILD_JOBS": "3"}, cores=8, ancestors=[]) == 3
    assert jb.jobs({"DYNAMICS_BUILD_JOBS": "16"}, cores=8, ancestors=[]) == 8  # never more than the cores
    assert jb.jobs({"DYNAMICS_BUILD_JOBS": " "}, cores=8, ancestors=[]) == 8  # empty: not set
    for bad in ("0", "-2", "two", "1.5"):
        with pytest.raises(ValueError, match="DYNAMICS_BUILD_JOBS"):
            jb.jobs({"DYNAMICS_BUILD_JOBS": bad}, cores=8, ancestors=[])


@pytest.mark.parametrize("flags, n", [
    (" -j2 --jobserver-auth=3,4", 2),      # GNU make 4.3 running a recipe of `make -j2`
    ("k -j4 --jobserver-auth=3,4", 4),     # `make -k -j 4`
    ("-j 3", 3), ("--jobs=5", 5), ("--jobs 6 -l2", 6),
    (" -j", None),                         # `make -j`: no number, no limit
    (" --jobserver-auth=fifo:/tmp/x", None), ("", None), (None, None), ("-l4", None), ("-k", None),
])
def test_makes_jobs_are_read_from_makeflags(flags, n):
    assert jb._makeflags_jobs(flags) == n
    env = {} if flags is None else {"MAKEFLAGS": flags}
    assert jb.jobs(env, cores=8, ancestors=[]) == (n or 8)


def test_colcons_parallel_workers_is_read_from_its_command_line():
    colcon = ["/usr/bin/python3", "/usr/bin/colcon", "build", "--symlink-install", "--parallel-workers", "1"]
    setup = ["/usr/bin/python3", "setup.py", "egg_info", "build", "install"]
    assert jb.jobs({}, cores=8, ancestors=[setup, colcon]) == 1
    assert jb.jobs({}, cores=8, ancestors=[["python3", "-m", "colcon", "build", "--parallel-workers=3"]]) == 3
    assert jb.jobs({}, cores=8, ancestors=[["colcon", "build"]]) == 8          # not given: no limit
    assert jb.jobs({}, cores=8, ancestors=[["colcon", "test", "--parallel-workers", "1"]]) == 8  # not a build
    assert jb.jobs({}, cores=8, ancestors=[["bash", "-c", "colcon build --parallel-workers 1"]]) == 8
    # every limit applies
    assert jb.jobs({"DYNAMICS_BUILD_JOBS": "2", "MAKEFLAGS": "-j6"}, cores=8, ancestors=[colcon[:-1] + ["4"]]) == 2
    assert jb.jobs({"DYNAMICS_BUILD_JOBS": "5", "MAKEFLAGS": "-j3"}, cores=8, ancestors=[]) == 3


def test_the_ancestors_of_this_process_are_found():
    got = jb._ancestors()
    if not os.path.isdir(f"/proc/{os.getpid()}"):
        pytest.skip("no /proc")
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    assert got and got[0] == parent


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


def test_the_parts_caches_merge_into_one_that_numba_reads(tmp_path):
    """Two processes' numba caches with an entry each for the same function (numbered 1 in both
    folders) and one entry they share: the merged cache serves the three, each with its own data."""
    from numba.core.caching import IndexDataCacheFile

    stamp = (1700000000.0, 1234)
    a, b, out = (tmp_path / n / "mod_abc" for n in ("a", "b", "out"))
    for d in (a, b):
        d.mkdir(parents=True)
    key = lambda sig: (sig, ("x86_64-unknown-linux-gnu", "skylake", ""), ("h1", "h2"))  # noqa: E731
    IndexDataCacheFile(str(a), "mod.f-10.py311", stamp).save(key("int64(float64)"), {"code": "A"})
    IndexDataCacheFile(str(a), "mod.f-10.py311", stamp).save(key("shared"), {"code": "S"})
    IndexDataCacheFile(str(b), "mod.f-10.py311", stamp).save(key("int64(int64)"), {"code": "B"})
    IndexDataCacheFile(str(b), "mod.f-10.py311", stamp).save(key("shared"), {"code": "S"})
    IndexDataCacheFile(str(b), "mod.g-20.py311", stamp).save(key("void()"), {"code": "G"})
    jb._merge_parts([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "out"))
    f = IndexDataCacheFile(str(out), "mod.f-10.py311", stamp)
    assert f.load(key("int64(float64)")) == {"code": "A"}
    assert f.load(key("int64(int64)")) == {"code": "B"}
    assert f.load(key("shared")) == {"code": "S"}
    assert IndexDataCacheFile(str(out), "mod.g-20.py311", stamp).load(key("void()")) == {"code": "G"}
    assert sorted(p.name for p in out.iterdir()) == [
        "mod.f-10.py311.1.nbc", "mod.f-10.py311.2.nbc", "mod.f-10.py311.3.nbc", "mod.f-10.py311.nbi",
        "mod.g-20.py311.1.nbc", "mod.g-20.py311.nbi"]
    # an index of other sources (another time stamp) is not merged into these
    IndexDataCacheFile(str(b), "mod.f-10.py311", (1.0, 1)).save(key("int64(int64)"), {"code": "old"})
    with pytest.raises(RuntimeError, match="different sources"):
        jb._merge_parts([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "out2"))
