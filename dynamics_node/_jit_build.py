"""The builder of the compiled kernels: ``python -m dynamics_node._jit_build build [--if-missing]``.

What ``make kernels`` (part of ``make setup``) and ``colcon build`` (setup.py's install) run, so that
a process of the installed code compiles nothing (see ``_jit.py`` for how kernels are served):

* the ahead-of-time library ``aot/kernels.so`` of the C callbacks (``build``), compiled in a
  process of its own with an empty numba cache: numba keeps a kernel's LLVM IR only when it
  compiles it, not when it loads it from its cache. That compile's numba cache then joins the
  package's cache (``~/.cache/dynamics_node/<hash of the kernel sources>/``);
* numba's cache for this copy of the code (``warm``): every declared kernel, and every kernel that
  numba compiles at its first call, by calling every public function once (``_jit_warm.py``).
  numba keys a cached kernel by the folder of its source file and the file's time stamp, so a cache
  compiled from the source tree does not serve the copy that colcon installs, nor the other way
  round: each copy gets its own entries, and a marker ``ready/<hash of the package folder>.json``
  records the time stamps they were made for.

``--if-missing``: nothing to do when the library loads and the marker matches this copy's files.

Both run in one process per core (``jobs``: at most DYNAMICS_BUILD_JOBS, make's -jN and colcon's
--parallel-workers), each compiling a share into a numba cache folder of its own, merged afterwards
(``_build_parallel``); with one, in one process as described above. A numba older than the oldest
supported (``NUMBA_OLDEST``) stops the build at once with one line on stderr, exit code 3.
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
import threading

from dynamics_node import _jit

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


def warm():
    """Every declared kernel loaded from numba's cache, or compiled into it, for this copy of the
    code (``materialize``: the C callbacks and the kernels with explicit signatures), then every
    public function called on small models (``_jit_warm.run``): numba compiles the kernels without
    a signature at their first call, for the types of that call, which do not depend on the model.
    Afterwards no call of the library or the node compiles anything (test/test_core_warm.py)."""
    from dynamics_node import _jit_warm

    _import_kernel_modules()
    _jit.materialize()
    _jit_warm.run()


def build(out_dir=None) -> str:
    """Compile every declared C callback of the package into one shared library with numba and
    llvmlite (the same machine code numba would JIT), for ``_jit.aot_addresses``. Run in a process of its
    own with an empty numba cache (``python -m dynamics_node._jit_build build``): numba keeps a kernel's
    LLVM IR only when it compiles it, not when it loads it from its cache."""
    _import_kernel_modules()
    _jit.materialize()
    cfuncs = [k for k in _jit._kernels if k.kind == "cfunc"]
    codegen = cfuncs[0].real._library.codegen
    return link([(k.name, k.real.native_name, k.real._library.get_llvm_str()) for k in cfuncs],
                codegen._get_host_cpu_name(), codegen._tm_features, out_dir)


def link(parts, cpu, features, out_dir=None) -> str:
    """The library of the C callbacks ``parts`` ([(kernel name, numba's native name, LLVM IR)]),
    compiled for ``cpu`` and ``features`` (numba's host CPU), and its manifest, into ``out_dir``."""
    import ctypes
    import sysconfig

    import llvmlite.binding as ll

    ll.initialize_native_target()  # numba's code generator does it; the parent of a build in processes has none
    ll.initialize_native_asmprinter()
    module = None
    symbols = {}
    for name, native, ir in parts:
        m = ll.parse_assembly(ir)
        symbols[name] = native
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
    tm = ll.Target.from_triple(ll.get_process_triple()).create_target_machine(
        cpu=cpu, features=features, opt=3, reloc="pic", codemodel="default")
    obj = tm.emit_object(module)
    out_dir = out_dir or _jit._aot_dir()
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        o = os.path.join(tmp, "kernels.o")
        c = str(PACKAGE / "_aot_stubs.c")  # what numba's code may call besides the kernels
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
                "sources": os.path.basename(os.path.dirname(out_dir)), "numba": _numba_version()}
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


def _run(step, env, *args):
    """A step in a process of its own: numba's cache folder is read once per process."""
    return subprocess.run([sys.executable, "-m", "dynamics_node._jit_build", step, *args], env=env).returncode


# ---------------------------------------------------------------------------------------------
# numba's version, and how many processes compile
NUMBA_OLDEST = (0, 60)
JOBS = "DYNAMICS_BUILD_JOBS"


def numba_problem(found):
    """The line that stops the build when numba ``found`` (its version, None if it is not installed)
    cannot compile the kernels, else None: numba 0.58 does not finish them (docs/install.md)."""
    need = ".".join(map(str, NUMBA_OLDEST))
    how = f'install a newer one into a venv: pip install "numba>={need}" (docs/install.md, Oldest versions)'
    if found is None:
        return f"dynamics_node: numba is not installed; the kernels need numba >= {need}: {how}"
    v = re.match(r"(\d+)\.(\d+)", found)
    if v and (int(v[1]), int(v[2])) < NUMBA_OLDEST:
        return f"dynamics_node: numba {found} found; the kernels need numba >= {need} (older ones do not finish): {how}"
    return None


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this system
        return os.cpu_count() or 1


def _ancestors(depth=8):
    """The command lines of the processes above this one (Linux's /proc), nearest first."""
    out, pid = [], os.getppid()
    while pid > 1 and len(out) < depth:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out.append([a.decode(errors="replace") for a in f.read().split(b"\0") if a])
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _makeflags_jobs(flags):
    """N of make's -jN (or --jobs=N) in MAKEFLAGS; None for none, and for a -j without a number."""
    m = re.search(r"(?:^|\s)(?:-j\s*|--jobs[=\s]\s*)(\d+)", flags or "")
    return int(m[1]) if m else None


def _colcon_workers(argv):
    """N of ``colcon build --parallel-workers N`` when argv is such a command line, else None."""
    names = [os.path.basename(a) for a in argv[:3]]
    if "colcon" not in names or "build" not in argv:
        return None
    for i, a in enumerate(argv):
        value = a.split("=", 1)[1] if a.startswith("--parallel-workers=") else (
            argv[i + 1] if a == "--parallel-workers" and i + 1 < len(argv) else None)
        if value is not None and value.isdigit():
            return int(value)
    return None


def jobs(environ=None, cores=None, ancestors=None):
    """How many processes compile the kernels: one per core this process may run on, at most
    DYNAMICS_BUILD_JOBS, at most make's -jN (MAKEFLAGS) and at most colcon's --parallel-workers (colcon
    passes it to no package: it is read from the command line of the colcon process above this one).
    Raises ValueError for a DYNAMICS_BUILD_JOBS that is not a positive integer."""
    environ = os.environ if environ is None else environ
    limits = [cores or _cores()]
    value = environ.get(JOBS, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{JOBS}={value!r}: a number of processes (1, 2, ...) is wanted")
        limits.append(int(value))
    limits.append(_makeflags_jobs(environ.get("MAKEFLAGS")))
    colcon = [n for n in map(_colcon_workers, _ancestors() if ancestors is None else ancestors) if n]
    limits.append(colcon[0] if colcon else None)
    return max(1, min(n for n in limits if n))


# ---------------------------------------------------------------------------------------------
# the build in several processes: each compiles its share into a numba cache folder of its own, and
# the folders are merged (numba's index of one function is read, changed and written back whole, so
# two processes adding to the same index would lose entries). Three rounds: the kernels with explicit
# signatures; the C callbacks, each process first loading the former from the merged cache, as one
# process compiles them in that order; then the warm-up calls, on the cache of both. Work is shared
# by claiming: every process walks the same list and takes the next item that no other has taken.
def _tasks(step):
    if step == "calls":
        from dynamics_node import _jit_warm

        first = {}
        for name, f in _jit_warm.CALLS.items():
            first.setdefault(f, name)
        return [*first.values(), "node"]
    if step == "cfuncs":
        return [k for k in _jit._kernels if k.kind == "cfunc"]
    return [k for k in _jit._kernels if k.kind == "njit" and k.sig is not None]


def _mine(tasks, claims, step):
    for i, task in enumerate(tasks):
        try:
            os.close(os.open(os.path.join(claims, f"{step}-{i}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        yield i, task


def _part(step, claims, out):
    """One process's share of a round (``_part_here``), its outputs in the folder ``out``."""
    if step == "calls":
        from dynamics_node import _jit_warm

        _import_kernel_modules()
        _jit.materialize()
        M = _jit_warm.Models()
        for _, name in _mine(_tasks(step), claims, step):
            _jit_warm._node(M) if name == "node" else _jit_warm.CALLS[name](M)
        return
    import numba

    class _Placeholders(dict):  # modules read C callbacks' addresses at import; nothing here calls them
        def get(self, name, default=None):
            return 16

    _jit._aot = _Placeholders()
    _import_kernel_modules()
    with _jit._lock:  # as _jit.materialize does, for a share of the kernels
        _jit._owner = threading.get_ident()
        for k in _jit._kernels:
            if k.kind == "njit":
                k.real = numba.njit(**k.options)(k.py_func)
        _jit._rebind(numba, kernels=False)
        sigs = _tasks("sigs")
        for _, k in (_mine(sigs, claims, step) if step == "sigs" else enumerate(sigs)):
            k.real.compile(k.sig)  # for the C callbacks: loaded from the first round's cache
            k.real.disable_compile()
        if step == "cfuncs":
            made = {}
            for i, k in _mine(_tasks(step), claims, step):
                k.real = numba.cfunc(k.sig, **k.options)(k.py_func)
                lib = k.real._library
                made[i] = [k.name, k.real.native_name, lib.get_llvm_str(), lib.codegen._get_host_cpu_name(),
                           lib.codegen._tm_features]
            with open(os.path.join(out, "cfuncs.json"), "w") as f:
                json.dump(made, f)


def _merge_parts(parts, out):
    """numba's cache folders of several processes as one: the union of their entries. numba's index
    (.nbi) of a function maps each compiled signature to a data file (.nbc) numbered from 1 in each
    folder, so entries are renumbered; an entry of several folders (the same signature and code) is
    kept once."""
    import pickle
    import shutil

    from numba.core.serialize import dumps

    indexes = {}
    for part in parts:
        for sub in sorted(os.listdir(part)):
            if os.path.isdir(os.path.join(part, sub)):
                for name in sorted(os.listdir(os.path.join(part, sub))):
                    if name.endswith(".nbi"):
                        indexes.setdefault((sub, name), []).append(os.path.join(part, sub))
    for (sub, name), folders in indexes.items():
        dst = os.path.join(out, sub)
        os.makedirs(dst, exist_ok=True)
        merged, head = {}, None
        for folder in folders:
            with open(os.path.join(folder, name), "rb") as f:
                version = pickle.load(f)
                stamp, overloads = pickle.loads(f.read())
            head = head or (version, stamp)
            if (version, stamp) != head:
                raise RuntimeError(f"{name}: the build's processes compiled different sources or numbas")
            for key, data in overloads.items():
                if key not in merged:
                    merged[key] = f"{name[:-4]}.{len(merged) + 1}.nbc"
                    shutil.copyfile(os.path.join(folder, data), os.path.join(dst, merged[key]))
        with open(os.path.join(dst, name), "wb") as f:
            pickle.dump(head[0], f, protocol=-1)
            f.write(dumps((head[1], merged)))


def _link_copy(src, dst):
    """dst: a copy of the cache folder src made of hard links (numba replaces a file, never writes into it)."""
    import shutil

    shutil.copytree(src, dst, copy_function=os.link) if os.path.isdir(src) else os.makedirs(dst)


def _build_parallel(n, tmp, target):
    """The build in n processes into the fresh cache folder tmp/numba, and the library into target
    (None: numba's cache only). Returns the first failing process's exit code, or 0."""
    claims = os.path.join(tmp, "claims")
    os.makedirs(claims)
    base, made = None, {}
    for step in ("sigs", "cfuncs", "calls"):
        dirs = [os.path.join(tmp, f"{step}{i}") for i in range(n)]
        procs = []
        for d in dirs:
            _link_copy(base, os.path.join(d, "numba")) if base else os.makedirs(os.path.join(d, "numba"))
            procs.append(subprocess.Popen([sys.executable, "-m", "dynamics_node._jit_build", "_part_here", step,
                                           claims, d], env={**os.environ, "NUMBA_CACHE_DIR": os.path.join(d, "numba")}))
        rc = next((r for r in [p.wait() for p in procs] if r), 0)
        if rc:
            return rc
        base = os.path.join(tmp, f"merged-{step}")
        _merge_parts([os.path.join(d, "numba") for d in dirs], base)
        for d in dirs if step == "cfuncs" else ():
            with open(os.path.join(d, "cfuncs.json")) as f:
                made.update({int(i): v for i, v in json.load(f).items()})
    os.replace(base, os.path.join(tmp, "numba"))
    if target:
        parts = [made[i] for i in sorted(made)]
        link([p[:3] for p in parts], parts[0][3], parts[0][4], target)
    return 0


def main(argv):
    """python -m dynamics_node._jit_build build [--if-missing]: the ahead-of-time library (compiled when it
    is missing, or always without --if-missing) and numba's cache for this copy of the code, in as many
    processes as jobs() says (DYNAMICS_BUILD_JOBS=N sets at most N)."""
    if not argv or argv[0] not in ("build", "_build_here", "_warm_here", "_part_here"):
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
    if argv[0] == "_build_here":
        build(argv[1])
        warm()
        return 0
    if argv[0] == "_warm_here":
        warm()
        return 0
    if argv[0] == "_part_here":
        _part(*argv[1:4])
        return 0
    cache = os.path.dirname(target)
    if "--if-missing" in argv and ready(cache):
        return 0
    try:
        n = jobs()
    except ValueError as e:
        print(f"dynamics_node: {e}", file=sys.stderr)
        return 2
    os.makedirs(cache, exist_ok=True)
    library = "--if-missing" not in argv or not _jit.aot_loaded()
    if n > 1 or library:
        print(f"dynamics_node: compiling the kernels in {n} process{'es' if n > 1 else ''} "
              f"({_cores()} cores; {JOBS}=N sets at most N)", flush=True)
        # beside the cache (same file system: the entries move by rename)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=os.path.dirname(cache)) as tmp:
            fresh = os.path.join(tmp, "numba")
            if n > 1:
                rc = _build_parallel(n, tmp, target if library else None)
            else:
                rc = _run("_build_here", {**os.environ, "NUMBA_CACHE_DIR": fresh}, target)
            if rc:
                return rc
            _merge(fresh, cache)
        if library:
            print(f"dynamics_node: ahead-of-time kernels in {target}")
    else:
        rc = _run("_warm_here", {**os.environ, "NUMBA_CACHE_DIR": cache})
        if rc:
            return rc
    os.makedirs(os.path.join(cache, "ready"), exist_ok=True)
    marker = _marker(cache)
    with open(marker + ".tmp", "w") as f:
        json.dump({"package": str(PACKAGE), "numba": _numba_version(), "files": _stamps()}, f)
    os.replace(marker + ".tmp", marker)
    print(f"dynamics_node: kernels ready for {PACKAGE} in {cache}")
    return 0


if __name__ == "__main__":  # run as a script, this file is __main__: use the package's module
    from dynamics_node import _jit_build

    sys.exit(_jit_build.main(sys.argv[1:]))
