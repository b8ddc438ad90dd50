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


# ---------------------------------------------------------------------------------------------
# the build in processes: how many, and how they share numba's cache folder and the work
def test_one_process_per_core_by_default():
    from dynamics_node import _build_jobs as bj

    assert bj.jobs({}, cores_=4, ancestors_=[], memory=64) == 4
    assert bj.jobs({}, cores_=1, ancestors_=[], memory=64) == 1
    assert bj.jobs({}, ancestors_=[], memory=64) == bj.cores() >= 1
    assert bj.jobs({}, cores_=8, ancestors_=[], memory=3) == 3       # what the memory holds
    assert bj.memory_jobs("/nonexistent") is None


def test_memory_is_read_from_meminfo(tmp_path):
    from dynamics_node import _build_jobs as bj

    info = tmp_path / "meminfo"
    info.write_text("MemTotal:  8000000 kB\nMemFree: 100 kB\nMemAvailable:    4500000 kB\n")
    assert bj.memory_jobs(str(info)) == 3    # 4.6e9 bytes / 1.5e9
    info.write_text("MemAvailable:    100 kB\n")
    assert bj.memory_jobs(str(info)) == 1    # never none


def test_the_variable_sets_at_most_that_many():
    from dynamics_node import _build_jobs as bj

    assert bj.jobs({"DYNAMICS_BUILD_JOBS": "1"}, cores_=8, ancestors_=[], memory=64) == 1
    assert bj.jobs({"DYNAMICS_BUILD_JOBS": "3"}, cores_=8, ancestors_=[], memory=64) == 3
    assert bj.jobs({"DYNAMICS_BUILD_JOBS": "16"}, cores_=8, ancestors_=[], memory=64) == 8  # never more than the cores
    assert bj.jobs({"DYNAMICS_BUILD_JOBS": " "}, cores_=8, ancestors_=[], memory=64) == 8  # empty: not set
    for bad in ("0", "-2", "two", "1.5"):
        with pytest.raises(ValueError, match="DYNAMICS_BUILD_JOBS"):
            bj.jobs({"DYNAMICS_BUILD_JOBS": bad}, cores_=8, ancestors_=[], memory=64)


@pytest.mark.parametrize("flags, n", [
    (" -j2 --jobserver-auth=3,4", 2),      # GNU make 4.3 running a recipe of `make -j2`
    ("k -j4 --jobserver-auth=3,4", 4),     # `make -k -j 4`
    ("-j 3", 3), ("--jobs=5", 5), ("--jobs 6 -l2", 6),
    (" -j", None),                         # `make -j`: no number, no limit
    (" --jobserver-auth=fifo:/tmp/x", None), ("", None), (None, None), ("-l4", None), ("-k", None),
])
def test_makes_jobs_are_read_from_makeflags(flags, n):
    from dynamics_node import _build_jobs as bj

    assert bj.makeflags_jobs(flags) == n
    env = {} if flags is None else {"MAKEFLAGS": flags}
    assert bj.jobs(env, cores_=8, ancestors_=[], memory=64) == (n or 8)


def test_colcons_parallel_workers_is_read_from_its_command_line():
    from dynamics_node import _build_jobs as bj

    def jobs(env, ancestors):
        return bj.jobs(env, cores_=8, ancestors_=ancestors, memory=64)

    colcon = ["/usr/bin/python3", "/usr/bin/colcon", "build", "--symlink-install", "--parallel-workers", "1"]
    setup = ["/usr/bin/python3", "setup.py", "egg_info", "build", "install"]
    assert jobs({}, [setup, colcon]) == 1
    assert jobs({}, [["python3", "-m", "colcon", "build", "--parallel-workers=3"]]) == 3
    assert jobs({}, [["colcon", "build"]]) == 8          # not given: no limit
    assert jobs({}, [["colcon", "test", "--parallel-workers", "1"]]) == 8  # not a build
    assert jobs({}, [["bash", "-c", "colcon build --parallel-workers 1"]]) == 8
    # every limit applies
    assert jobs({"DYNAMICS_BUILD_JOBS": "2", "MAKEFLAGS": "-j6"}, [colcon[:-1] + ["4"]]) == 2
    assert jobs({"DYNAMICS_BUILD_JOBS": "5", "MAKEFLAGS": "-j3"}, []) == 3


def test_the_ancestors_of_this_process_are_found():
    from dynamics_node import _build_jobs as bj

    if not os.path.isdir(f"/proc/{os.getpid()}"):
        pytest.skip("no /proc")
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    got = bj.ancestors()
    assert got and got[0] == parent


def test_a_bad_job_count_stops_the_build_with_one_line(tmp_path):
    env = {**os.environ, "DYNAMICS_BUILD_JOBS": "two", "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "dynamics_node._jit_build", "build"], env=env, capture_output=True,
                       text=True, timeout=120, cwd=REPO)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "dynamics_node: DYNAMICS_BUILD_JOBS='two': a number of processes (1, 2, ...) is wanted"], r.stderr
    assert not (tmp_path / "cache").exists()


_SAVER = r"""
import sys
from numba.core import caching
from dynamics_node import _jit_build
if sys.argv[2] == "locked":
    _jit_build._lock_cache(sys.argv[1] + "/lock")
cache = caching.IndexDataCacheFile(sys.argv[1], "kernel", ("stamp", 1))
for i in range(int(sys.argv[4])):
    cache.save((sys.argv[3], i), (sys.argv[3], i, b"x" * 20000))
"""


def _save_at_once(tmp_path, mode, n=150):
    """Two processes saving n entries each into one function's index of one cache folder, at once;
    then what the index names: {key: the entry in the data file it names}."""
    from numba.core import caching

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", _SAVER, str(tmp_path), mode, who, str(n)], env=env)
             for who in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    cache = caching.IndexDataCacheFile(str(tmp_path), "kernel", ("stamp", 1))
    return {key: cache.load(key) for key in cache._load_index()}


def test_the_build_processes_save_into_one_cache_folder_without_losing_an_entry(tmp_path):
    """numba saves an entry by reading the function's index, numbering a new data file and writing
    both back; the build's processes hold a lock for it (_jit_build._lock_cache), so every entry of
    both is in the index and each names the data file of its own entry. (Without the lock, on this
    machine, most entries of one process are lost: the control below, which only shows the race.)"""
    (tmp_path / "locked").mkdir()
    got = _save_at_once(tmp_path / "locked", "locked")
    assert len(got) == 300
    assert all(v is not None and v[:2] == k for k, v in got.items())
    (tmp_path / "unlocked").mkdir()
    raced = _save_at_once(tmp_path / "unlocked", "unlocked")
    lost = 300 - sum(v is not None and v[:2] == k for k, v in raced.items())
    print(f"without the lock: {lost} of 300 entries lost or naming another's data")


def _kernels_calling():
    """Kernels k0..k11 where k1 calls k0 and k3 calls k2 through a helper h that is not in the list
    (names in their globals), k0 and k2 the heaviest."""
    from dynamics_node import _jit

    g = {}
    code = {0: "x = x + 1\n    " * 40, 2: "x = x * 2\n    " * 40, 1: "x = k0(x)\n    ", 3: "x = h(x)\n    "}
    for i in range(12):
        exec(f"def k{i}(x):\n    {code.get(i, '')}return x", g)
    exec("def h(x):\n    return k2(x)", g)
    ks = [_jit.Kernel(g[f"k{i}"], "njit", None, {}) for i in range(12)]
    g.update({f"k{i}": k for i, k in enumerate(ks)}, h=_jit.Kernel(g["h"], "njit", None, {}))
    return ks


def test_each_kernel_is_compiled_by_the_process_that_claims_it(tmp_path):
    """_claimed_first: two build processes (threads here) walking the same kernels each get every
    kernel once: first those it claims, heaviest first, each once the kernels it calls are done,
    then the others', each only once the claimant has done it; a kernel claimed by a process that
    has gone is given at once."""
    import threading
    import time

    from dynamics_node import _jit_build as jb

    ks = _kernels_calling()
    assert [c.name for c in jb._callees(ks[1])] == [ks[0].name] and jb._weight(ks[1], set()) > jb._weight(ks[0], set())
    assert ks[2].name in jb._reached(ks[3], set()) and ks[2] not in jb._callees(ks[3])
    seen = {}
    start = threading.Barrier(2)

    def walk(who):
        seen[who] = []
        start.wait()
        for k in jb._claimed_first(str(tmp_path))(ks):
            reached = [c for c in ks if c.name in jb._reached(k, set())]
            done = {c.__name__: (tmp_path / (c.name + ".done")).exists() for c in [k, *reached]}
            seen[who].append((k.__name__, done))
            time.sleep(0.05)   # compiling it

    threads = [threading.Thread(target=walk, args=(w,)) for w in "ab"]
    [t.start() for t in threads]
    [t.join(30) for t in threads]
    names = sorted(k.__name__ for k in ks)
    own = {}
    for who in "ab":
        assert sorted(n for n, _ in seen[who]) == names
        own[who] = [(n, done) for n, done in seen[who] if not done[n]]   # compiled by who itself
        assert all(all(d for c, d in done.items() if c != n) for n, done in own[who]), own[who]  # its callees done
    assert sorted(n for who in "ab" for n, _ in own[who]) == names and own["a"] and own["b"]
    assert {own["a"][0][0], own["b"][0][0]} == {"k0", "k2"}   # the heaviest first
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "gone").write_text(dead.stdout.strip())
    t0 = time.monotonic()
    jb._wait(str(tmp_path), "gone")
    assert time.monotonic() - t0 < 5


def test_a_failed_build_process_stops_the_others_at_once():
    """A process that fails may have taken work the others wait for: _wait_all returns its exit code
    at once and stops the rest, and 0 only when every process exits with 0."""
    import time

    from dynamics_node import _jit_build as jb

    t0 = time.monotonic()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    failing = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    assert jb._wait_all([sleeper, failing]) == 3
    assert sleeper.returncode is not None and time.monotonic() - t0 < 30
    assert jb._wait_all([subprocess.Popen([sys.executable, "-c", "pass"]) for _ in range(2)]) == 0
