"""The builder of the compiled kernels: ``python -m dynamics_node._jit_build build [--if-missing]``.

What ``make kernels`` (part of ``make setup``) and ``colcon build`` (setup.py's install) run, so that
a process of the installed code compiles nothing (see ``_jit.py`` for how kernels are served):

* numba's cache for this copy of the code: every declared kernel (the C callbacks and the kernels
  with explicit signatures, ``materialize``), and every kernel that numba compiles at its first call,
  by calling every public function once (``warm/entries.py``). numba keys a cached kernel by the folder
  of its source file and the file's time stamp, so a cache compiled from the source tree does not
  serve the copy that colcon installs, nor the other way round: each copy gets its own entries, and a
  marker ``ready/<hash of the package folder>.json`` records the time stamps they were made for;
* the ahead-of-time library ``aot/kernels.so`` of the C callbacks (``build``), linked from the LLVM
  IR that numba keeps of each (with the kernel, in its cache).

Both in the package's cache folder (``~/.cache/dynamics_node/<hash of the kernel sources and
numba's version>/``), and in ``jobs()`` processes at once (``_build_jobs.py``: one per core, at most
DYNAMICS_BUILD_JOBS, make's -jN, colcon's --parallel-workers). The processes share one numba cache
folder, whose writes a lock orders (``_lock_cache``), and share the work by claiming it
(``_claimed_first``): each compiles first the kernels no other process has taken, then loads the
others' from the cache. Two rounds: the declared kernels, then the calls (every process loading all
the declared kernels first), the first process out of calls to take linking the library. One
process does both in one round.

``--if-missing``: nothing to do when the library loads and the marker matches this copy's files.
A numba older than the oldest supported (``NUMBA_OLDEST``), or none, stops the build at once with one
line on stderr, exit code 3.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

from dynamics_node import _build_jobs, _jit

PACKAGE = pathlib.Path(__file__).resolve().parent
# not compiled for a model or a request: the ROS edge, the command-line tools, the identification
SKIP = ("ros", "cli", "identify")


def _kernel_modules():
    """The package's modules that declare kernels (the `_jit` decorators, or numba's own)."""
    names = []
    for p in sorted(PACKAGE.rglob("*.py")):
        rel = p.relative_to(PACKAGE)
        if rel.parts[0] in SKIP or p.name in ("__main__.py", "_jit.py", "_jit_build.py"):
            continue
        text = p.read_text(encoding="utf-8")
        if "@njit" in text or "@cfunc" in text or "numba.njit" in text:
            names.append(".".join(("dynamics_node",) + rel.with_suffix("").parts).removesuffix(".__init__"))
    return names


def _import_kernel_modules():
    import importlib

    for name in _kernel_modules():
        importlib.import_module(name)


def build(out_dir=None) -> str:
    """Link every declared C callback of the package into one shared library with llvmlite (the same
    machine code numba would JIT), for ``_jit.aot_addresses``, in a process that has materialized
    the kernels. The IR is what numba keeps of a kernel for linking it into others (its cache keeps it
    too), in which numba gives every function linkonce_odr linkage: the callbacks' are made external
    again."""
    import ctypes
    import sysconfig

    import llvmlite.binding as ll

    cfuncs = [k for k in _jit._kernels if k.kind == "cfunc"]
    module = None
    symbols = {}
    for k in cfuncs:
        m = ll.parse_assembly(str(k.real._library._get_module_for_linking()))
        m.get_function(k.real.native_name).linkage = "external"
        symbols[k.name] = k.real.native_name
        if module is None:
            module = m
        else:
            module.link_in(m)
    module.verify()
    allocating = [f.name for f in module.functions if f.name.startswith("NRT_MemInfo_alloc")]
    if allocating:  # numba's allocator is not there when the library is used without numba
        raise RuntimeError(f"a C callback allocates ({', '.join(allocating)}): kernels must use the work array")
    # numba's own target machine is made for its JIT (static relocations); a shared library needs
    # position-independent code, for the same CPU and features
    codegen = cfuncs[0].real._library.codegen
    tm = ll.Target.from_triple(ll.get_process_triple()).create_target_machine(
        cpu=codegen._get_host_cpu_name(), features=codegen._tm_features, opt=3, reloc="pic",
        codemodel="default")
    obj = tm.emit_object(module)
    out_dir = out_dir or _jit._aot_dir()
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        o = os.path.join(tmp, "kernels.o")
        c = str(PACKAGE / "_aot_stubs.c")   # what numba's code may call besides the kernels
        with open(o, "wb") as f:
            f.write(obj)
        so = os.path.join(tmp, "kernels.so")
        cc = os.environ.get("CC", "cc")
        # -Bsymbolic: the library's calls of its own functions (numba's NRT_incref and NRT_decref on
        # every array view, one kernel calling another) bind directly, not through the PLT
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-Wl,-Bsymbolic", "-o", so, o, c,
                        "-I" + sysconfig.get_paths()["include"], "-lm"], check=True)
        ctypes.CDLL(so)  # a symbol that nothing defines fails here, not silently when it is used
        os.replace(so, os.path.join(out_dir, "kernels.so"))
    manifest = {"library": "kernels.so", "cpu": _jit.cpu_key(), "kernels": symbols,
                "sources": os.path.basename(os.path.dirname(out_dir)), "numba": _jit._numba.__version__}
    with open(os.path.join(out_dir, "kernels.json.tmp"), "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(os.path.join(out_dir, "kernels.json.tmp"), os.path.join(out_dir, "kernels.json"))
    return out_dir


# ---------------------------------------------------------------------------------------------
# the command line
def _stamps():
    """{file: [mtime, size]} of the package's sources: what numba checks a cached kernel against."""
    out = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        st = p.stat()
        out[p.relative_to(PACKAGE).as_posix()] = [st.st_mtime, st.st_size]
    return out


def _marker(cache):
    """The marker of this copy of the code in the cache folder."""
    key = hashlib.sha1(str(PACKAGE).encode()).hexdigest()[:16]
    return os.path.join(cache, "ready", key + ".json")


def _numba_version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numba")
    except PackageNotFoundError:
        return None


def ready(cache=None) -> bool:
    """Whether this copy of the code would compile nothing: the ahead-of-time library loads, and
    numba's cache was filled for these files as they are (path, time stamps, numba's version)."""
    cache = cache or os.path.dirname(_jit._aot_dir())
    try:
        with open(_marker(cache)) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return False
    return (_jit.aot_loaded() and m.get("package") == str(PACKAGE) and m.get("numba") == _numba_version()
            and m.get("files") == _stamps())


def _same_file(a, b):
    try:
        return a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def adopt(cache):
    """Copy into this copy's folders of numba's cache the entries another copy of the same code made
    in the same cache (``make setup`` in a clone, then ``colcon build`` of that clone: the same files
    at another path), so that warming this copy loads instead of compiling. numba files a kernel under
    its source folder's path and stamps it with the source file (its contents, or its time stamp and
    size in older numbas), so an entry is taken only from a copy whose every file is byte for byte
    this copy's, only while its stamp is still that file's, and is stamped anew with this copy's file.
    Returns the other copy's folder, or None when there is none."""
    import glob
    import pickle
    import shutil
    import types as _types

    from numba.core.caching import _CacheLocator, _SourceFileBackedLocatorMixin
    from numba.core.serialize import dumps

    def stamp(path):
        return _SourceFileBackedLocatorMixin.get_source_stamp(_types.SimpleNamespace(_py_file=str(path)))

    ours = _stamps()
    for marker in sorted(glob.glob(os.path.join(cache, "ready", "*.json"))):
        try:
            with open(marker) as f:
                m = json.load(f)
        except (OSError, ValueError):
            continue
        other = pathlib.Path(m.get("package", ""))
        if other == PACKAGE or m.get("numba") != _numba_version() or set(m.get("files", ())) != set(ours):
            continue
        if not all(_same_file(other / rel, PACKAGE / rel) for rel in ours):
            continue
        for folder in sorted({os.path.dirname(rel) for rel in ours}):
            src = os.path.join(cache, _CacheLocator.get_suitable_cache_subpath(str(other / folder / "_.py")))
            dst = os.path.join(cache, _CacheLocator.get_suitable_cache_subpath(str(PACKAGE / folder / "_.py")))
            names = sorted(os.listdir(src)) if os.path.isdir(src) else []
            os.makedirs(dst, exist_ok=True)
            for name in [n for n in names if n.endswith(".nbc")]:   # the data before the index naming it
                shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
            for name in [n for n in names if n.endswith(".nbi")]:
                source = os.path.join(folder, name.split(".")[0] + ".py")   # index: <module>.<qualname>-...
                if source not in ours:
                    continue
                with open(os.path.join(src, name), "rb") as f:
                    version = pickle.load(f)
                    was, overloads = pickle.loads(f.read())
                if was != stamp(other / source):   # stale: made for an earlier state of the file
                    continue
                with open(os.path.join(dst, name + ".tmp"), "wb") as f:
                    pickle.dump(version, f, protocol=-1)
                    f.write(dumps((stamp(PACKAGE / source), overloads)))
                os.replace(os.path.join(dst, name + ".tmp"), os.path.join(dst, name))
        return other
    return None


def _merge(fresh, cache):
    """Move numba's cache files of a fresh compile into the package's cache, replacing the entries
    of the same copy of the code (a fresh compile writes only this copy's)."""
    for sub in os.listdir(fresh):
        src = os.path.join(fresh, sub)
        if not os.path.isdir(src):
            continue
        dst = os.path.join(cache, sub)
        os.makedirs(dst, exist_ok=True)
        for name in os.listdir(src):
            os.replace(os.path.join(src, name), os.path.join(dst, name))


# ---------------------------------------------------------------------------------------------
# numba's version
NUMBA_OLDEST = (0, 58)   # Ubuntu 24.04's 0.58.1; docs/install.md, Oldest versions


def numba_problem(found):
    """The line that stops the build when numba ``found`` (its version, None if it is not installed)
    is older than the oldest the kernels are tested with, else None."""
    need = ".".join(map(str, NUMBA_OLDEST))
    how = f'install a newer one into a venv: pip install "numba>={need}" (docs/install.md, Oldest versions)'
    if found is None:
        return f"dynamics_node: numba is not installed; the kernels need numba >= {need}: {how}"
    v = re.match(r"(\d+)\.(\d+)", found)
    if v and (int(v[1]), int(v[2])) < NUMBA_OLDEST:
        return f"dynamics_node: numba {found} found; the kernels need numba >= {need}: {how}"
    return None


# ---------------------------------------------------------------------------------------------
# the build in processes sharing one numba cache folder
def _lock_cache(lockfile):
    """numba's cache writes and reads in this process, each while holding the lock on ``lockfile``.
    numba saves an entry by reading the function's index, choosing the next free data file's number
    and writing both back: two processes saving entries of one function at once could both choose
    the same number, and the index would then name a data file holding another entry's code."""
    import fcntl

    from numba.core import caching

    held = open(lockfile, "a")  # noqa: SIM115 - held for the life of the process

    def locked(method):
        def run(self, *args):
            fcntl.flock(held, fcntl.LOCK_EX)
            try:
                return method(self, *args)
            finally:
                fcntl.flock(held, fcntl.LOCK_UN)
        return run

    cls = caching.IndexDataCacheFile
    cls.save, cls.load = locked(cls.save), locked(cls.load)


def _claim(claims, key):
    """Whether this process takes the work ``key`` (no other process has): a file of its own."""
    try:
        fd = os.open(os.path.join(claims, key), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def _wait(claims, key):
    """Until the process that took ``key`` has done it, or is gone (then this process does it)."""
    path = os.path.join(claims, key)
    while not os.path.exists(path + ".done"):
        try:
            with open(path) as f:
                pid = int(f.read() or 0)
            if pid:
                os.kill(pid, 0)
        except (OSError, ValueError):   # gone (ProcessLookupError is an OSError)
            return
        time.sleep(0.05)


def _callees(k):
    """The declared kernels that kernel k's code names (its module's globals)."""
    g = k.py_func.__globals__
    return [g[n] for n in k.py_func.__code__.co_names if isinstance(g.get(n), _jit.Kernel)]


def _reached(k, seen):
    """``seen`` with the names of every kernel k's code reaches, through the kernels it calls."""
    for c in _callees(k):
        if c.name not in seen:
            seen.add(c.name)
            _reached(c, seen)
    return seen


def _weight(k, seen):
    """The bytecode of k and every kernel it reaches, which numba compiles (or inlines) with it: a
    rough measure of its compile time, for starting with the longest."""
    if k.name in seen:
        return 0
    seen.add(k.name)
    return len(k.py_func.__code__.co_code) + sum(_weight(c, seen) for c in _callees(k))


def _claimed_first(claims):
    """materialize's order in a build process: the kernels it takes, compiled as it comes to them, the
    heaviest first and each once the kernels of the list it reaches are done (else numba would compile
    them with it, for its argument types, and again for their own signature); then those other
    processes took, each once its process has saved it (then it loads)."""
    def done(name):
        return os.path.exists(os.path.join(claims, name + ".done"))

    def order(kernels):
        listed = {k.name for k in kernels}
        needs = {k.name: _reached(k, set()) & listed for k in kernels}
        todo = sorted(kernels, key=lambda k: -_weight(k, set()))
        theirs = []
        while todo:
            k = next((k for k in todo if all(done(c) for c in needs[k.name])), todo[0])
            todo.remove(k)
            if _claim(claims, k.name):
                yield k
                open(os.path.join(claims, k.name + ".done"), "w").close()
            else:
                theirs.append(k)
        for k in theirs:
            _wait(claims, k.name)
            yield k
    return order


class _NoAddresses(dict):
    """The library's table while the declared kernels compile: modules read the C callbacks' addresses
    at import, which would compile every kernel there, in the order of the imports. Nothing is called
    in that round, so an address that is never used stands for each."""

    def get(self, name, default=None):
        return 16


def part(step, claims, target=None):
    """One build process's share of a round (``_part_here``), in the cache folder NUMBA_CACHE_DIR:
    ``declared``, the kernels materialize compiles; ``calls``, the library (``target``: its folder)
    and the entries of ``warm.entries.CALLS``."""
    from dynamics_node.warm import entries

    _lock_cache(os.path.join(claims, "lock"))
    if step == "declared":
        _jit._aot = _NoAddresses()
        _import_kernel_modules()
        _jit._order = _claimed_first(claims)
        _jit.materialize()
        return
    _import_kernel_modules()
    _jit.materialize()   # every declared kernel, loaded
    M = entries.Models()
    first = {}
    for entry, fn in entries.CALLS.items():
        first.setdefault(fn, entry)
    for fn, entry in first.items():
        if _claim(claims, "call-" + entry):
            M.reseed(entry)
            fn(M)
    if _claim(claims, "call-node"):
        M.reseed("node")
        entries._node(M)
    if target and _claim(claims, "library"):   # by the first process out of calls to take
        build(target)


def _wait_all(procs):
    """0 once every process has exited with 0; else, as soon as one fails, its exit code, the others
    stopped (they could be waiting for work the failed one had taken)."""
    while True:
        codes = [p.poll() for p in procs]
        failed = next((c for c in codes if c), 0)
        if failed or None not in codes:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            return failed
        time.sleep(0.1)


def _compile(folder, n, target=None, times=None):
    """numba's cache in ``folder`` for this copy of the code, and the library into ``target``, by n
    processes; ``times`` gets each round's wall time. Returns 0, or the exit code of a process that failed."""
    with tempfile.TemporaryDirectory(prefix=".claims-", dir=os.path.dirname(folder)) as claims:
        env = {**os.environ, "NUMBA_CACHE_DIR": folder}
        # one process: its import compiles the declared kernels as they are declared, then the calls
        for step in ("declared", "calls") if n > 1 else ("calls",):
            t0 = time.monotonic()
            procs = [subprocess.Popen([sys.executable, "-m", "dynamics_node._jit_build", "_part_here", step, claims,
                                       *([target] if target else [])], env=env) for _ in range(n)]
            rc = _wait_all(procs)
            if rc:
                return rc
            if times is not None:
                times[step] = time.monotonic() - t0
    return 0


def main(argv):
    """python -m dynamics_node._jit_build build [--if-missing]: the ahead-of-time library (compiled when it
    is missing, or always without --if-missing) and numba's cache for this copy of the code."""
    if not argv or argv[0] not in ("build", "_part_here"):
        print(main.__doc__, file=sys.stderr)
        return 2
    problem = numba_problem(_numba_version())
    if problem:
        print(problem, file=sys.stderr)
        return 3
    target = _jit._aot_dir()
    if target is None:
        print("dynamics_node._jit: no NUMBA_CACHE_DIR (no home directory?): nothing built", file=sys.stderr)
        return 1
    if argv[0] == "_part_here":
        part(*argv[1:])
        return 0
    try:
        n = _build_jobs.jobs()
    except ValueError as e:
        print(f"dynamics_node: {e}", file=sys.stderr)
        return 2
    cache = os.path.dirname(target)
    if "--if-missing" in argv and ready(cache):
        return 0
    os.makedirs(cache, exist_ok=True)
    times = {}
    if "--if-missing" not in argv or not _jit.aot_loaded():
        # from nothing, beside the cache (same file system: the entries move by rename)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=os.path.dirname(cache)) as tmp:
            fresh = os.path.join(tmp, "numba")
            os.makedirs(fresh)
            rc = _compile(fresh, n, target, times)
            if rc:
                return rc
            _merge(fresh, cache)
        print(f"dynamics_node: ahead-of-time kernels in {target}")
    else:   # the library is there: numba's cache for this copy, first what another copy compiled
        other = adopt(cache)
        if other:
            print(f"dynamics_node: reusing the kernels compiled for {other} (the same files)", flush=True)
        rc = _compile(cache, n, times=times)
        if rc:
            return rc
    os.makedirs(os.path.join(cache, "ready"), exist_ok=True)
    marker = _marker(cache)
    with open(marker + ".tmp", "w") as f:
        json.dump({"package": str(PACKAGE), "numba": _numba_version(), "files": _stamps()}, f)
    os.replace(marker + ".tmp", marker)
    rounds = ", ".join(f"{step} {t:.0f} s" for step, t in times.items())
    print(f"dynamics_node: kernels ready for {PACKAGE} in {cache} ({n} process{'es' if n > 1 else ''}: {rounds})")
    return 0


if __name__ == "__main__":  # run as a script, this file is __main__: use the package's module
    from dynamics_node import _jit_build

    sys.exit(_jit_build.main(sys.argv[1:]))
