"""The builder of the compiled kernels: ``python -m dynamics_node._jit_build build [--if-missing]``.

What ``make kernels`` (part of ``make setup``) and ``colcon build`` (setup.py's install) run, so that
a process of the installed code compiles nothing (see ``_jit.py`` for how kernels are served):

* the ahead-of-time library ``aot/kernels.so`` of the C callbacks (``build``), compiled in a
  process of its own with an empty numba cache: numba keeps a kernel's LLVM IR only when it
  compiles it, not when it loads it from its cache. That compile's numba cache then joins the
  package's cache (``~/.cache/dynamics_node/<hash of the kernel sources and numba's version>/``);
* numba's cache for this copy of the code (``warm``): every declared kernel, and every kernel that
  numba compiles at its first call, by calling every public function once (``_jit_warm.py``).
  numba keys a cached kernel by the folder of its source file and the file's time stamp, so a cache
  compiled from the source tree does not serve the copy that colcon installs, nor the other way
  round: each copy gets its own entries, and a marker ``ready/<hash of the package folder>.json``
  records the time stamps they were made for.

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


_STUBS = r"""
/* What numba's compiled code may call on its error paths, which the kernels never take (they
   return status codes, and error_model="numpy" means no ZeroDivisionError): numba's runtime is not
   loaded in a process that uses this library, so these report the impossible loudly instead. */
#include <Python.h>
#include <stdlib.h>
void numba_gil_ensure(PyGILState_STATE *s) { *s = PyGILState_Ensure(); }
void numba_gil_release(PyGILState_STATE *s) { PyGILState_Release(*s); }
static void *fail(const char *what) {
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "dynamics_node ahead-of-time kernel: %s", what);
    return NULL;
}
PyObject *numba_unpickle(const char *d, int n, const char *h) { return fail("raised an exception"); }
PyObject *numba_runtime_build_excinfo_struct(PyObject *a, PyObject *b) { return fail("raised an exception"); }
int numba_do_raise(PyObject *e) { fail("raised an exception"); return 0; }
void *NRT_MemInfo_alloc_aligned(size_t size, unsigned align) {
    fprintf(stderr, "dynamics_node ahead-of-time kernel: allocation outside numba\n");
    abort();
}
void NRT_MemInfo_call_dtor(void *mi) {
    fprintf(stderr, "dynamics_node ahead-of-time kernel: release outside numba\n");
    abort();
}
void NRT_Free(void *p) { free(p); }
/* And the one helper numba's code calls on every reshape (numba/_helperlib.c, from NumPy's
   _attempt_nocopy_reshape, BSD licences): 1 and the new strides when the array can be viewed with
   the new shape, 0 when that needs a copy. */
int numba_attempt_nocopy_reshape(Py_ssize_t nd, const Py_ssize_t *dims, const Py_ssize_t *strides,
                                 Py_ssize_t newnd, const Py_ssize_t *newdims, Py_ssize_t *newstrides,
                                 Py_ssize_t itemsize, int is_f_order) {
    Py_ssize_t olddims[64], oldstrides[64], np = 1, op = 1, last;
    int oldnd = 0, oi, oj, ok, ni, nj, nk;
    if (nd > 64) return 0;
    for (oi = 0; oi < nd; oi++)  /* axes of length 1 have no effect */
        if (dims[oi] != 1) {
            olddims[oldnd] = dims[oi];
            oldstrides[oldnd++] = strides[oi];
        }
    for (ni = 0; ni < newnd; ni++) np *= newdims[ni];
    for (oi = 0; oi < oldnd; oi++) op *= olddims[oi];
    if (np != op) return 0;
    if (np == 0) {
        for (ni = 0; ni < newnd; ni++) newstrides[ni] = itemsize;
        return 1;
    }
    oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < newnd && oi < oldnd) {
        np = newdims[ni];
        op = olddims[oi];
        while (np != op) {
            if (np < op) np *= newdims[nj++];
            else op *= olddims[oj++];
        }
        for (ok = oi; ok < oj - 1; ok++)  /* can the old axes be combined */
            if (is_f_order ? oldstrides[ok + 1] != olddims[ok] * oldstrides[ok]
                           : oldstrides[ok] != olddims[ok + 1] * oldstrides[ok + 1])
                return 0;
        if (is_f_order) {
            newstrides[ni] = oldstrides[oi];
            for (nk = ni + 1; nk < nj; nk++) newstrides[nk] = newstrides[nk - 1] * newdims[nk - 1];
        } else {
            newstrides[nj - 1] = oldstrides[oj - 1];
            for (nk = nj - 1; nk > ni; nk--) newstrides[nk - 1] = newstrides[nk] * newdims[nk];
        }
        ni = nj++;
        oi = oj++;
    }
    last = ni >= 1 ? newstrides[ni - 1] : itemsize;  /* the trailing 1s of the new shape */
    if (is_f_order && ni >= 1) last *= newdims[ni - 1];
    for (nk = ni; nk < newnd; nk++) newstrides[nk] = last;
    return 1;
}
"""


def build(out_dir=None) -> str:
    """Compile every declared C callback of the package into one shared library with numba and
    llvmlite (the same machine code numba would JIT), for ``_jit.aot_addresses``. Run in a process of its
    own with an empty numba cache (``python -m dynamics_node._jit_build build``): numba keeps a kernel's
    LLVM IR only when it compiles it, not when it loads it from its cache."""
    import ctypes
    import sysconfig

    _import_kernel_modules()
    _jit.materialize()
    cfuncs = [k for k in _jit._kernels if k.kind == "cfunc"]
    import llvmlite.binding as ll

    module = None
    symbols = {}
    for k in cfuncs:
        m = ll.parse_assembly(k.real._library.get_llvm_str())
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
        c = os.path.join(tmp, "stubs.c")
        with open(o, "wb") as f:
            f.write(obj)
        with open(c, "w") as f:
            f.write(_STUBS)
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


def _run(step, env, *args):
    """A step in a process of its own: numba's cache folder is read once per process."""
    return subprocess.run([sys.executable, "-m", "dynamics_node._jit_build", step, *args], env=env).returncode


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


def main(argv):
    """python -m dynamics_node._jit_build build [--if-missing]: the ahead-of-time library (compiled when it
    is missing, or always without --if-missing) and numba's cache for this copy of the code."""
    if not argv or argv[0] not in ("build", "_build_here", "_warm_here"):
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
    if argv[0] == "_warm_here":   # in the package's cache: first what another copy compiled (adopt)
        other = adopt(os.path.dirname(target))
        if other:
            print(f"dynamics_node: reusing the kernels compiled for {other} (the same files)", flush=True)
        warm()
        return 0
    cache = os.path.dirname(target)
    if "--if-missing" in argv and ready(cache):
        return 0
    os.makedirs(cache, exist_ok=True)
    if "--if-missing" not in argv or not _jit.aot_loaded():
        # beside the cache (same file system: the entries move by rename)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=os.path.dirname(cache)) as tmp:
            fresh = os.path.join(tmp, "numba")
            rc = _run("_build_here", {**os.environ, "NUMBA_CACHE_DIR": fresh}, target)
            if rc:
                return rc
            _merge(fresh, cache)
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
