"""The kernels' compiler, numba, loaded only when a kernel is needed that is not already compiled.

Kernel modules declare their compiled functions with ``njit`` and ``cfunc`` from here, spelled as
numba's own (``@njit(types.int64(I1, F1), cache=True)``). Nothing is compiled or loaded at import:

* a C callback (``cfunc``) that the ahead-of-time library holds is served from there:
  ``kernel.address`` is its address in ``kernels.so``, and numba is never imported. ``make setup``
  builds that library (``python -m dynamics_node._jit build``, see ``build``). The C shim
  (``_fastcall.c``) calls the kernels through these addresses, which is every hot path of the node
  (gravity, inverse and forward dynamics, mass matrix). Importing numba and loading its cache costs
  about a second, which was most of the node's start time;
* anything else (a call to an ``njit`` kernel, or a ``cfunc`` when there is no library) imports
  numba once and turns every declared kernel into its numba dispatcher (``materialize``). Modules
  see the dispatchers in their globals afterwards, so later calls cost exactly what numba's cost;
* except an ``njit(pure=True)`` kernel: integer arithmetic (the sizes of a kernel's scratch), which
  Python calls as the plain function until numba is loaded (so that sizing a C callback's arrays
  does not load it); it may call only other pure kernels.

Kernels are compiled with numba's defaults plus ``error_model="numpy"`` (a division by zero gives
inf or nan rather than raising: no Python exception machinery inside C callbacks; the kernels test
their pivots and return status codes). The ahead-of-time library sits in the numba cache folder,
which is named after a hash of the kernel sources (see ``dynamics_node/__init__.py``), so an edited
kernel is never served from a stale library; it is also tied to the CPU it was compiled for.
"""
from __future__ import annotations

import os
import sys
import threading

DEFAULTS = {"error_model": "numpy"}
_lock = threading.RLock()
_kernels: list = []   # every kernel declared so far, in order
_numba = None         # the numba module, once materialized
_aot = None           # {kernel name: address} of the ahead-of-time library, {} if there is none
_owner = None         # the thread running materialize(), while it runs


class _Type(str):
    """A numba type written as the text numba parses: ``types.float64[:, ::1]`` and
    ``types.int64(I1, F1)`` build "float64[:, ::1]" and "int64(int64[::1], float64[::1])"."""

    def __getitem__(self, key):
        keys = key if isinstance(key, tuple) else (key,)
        return _Type(f"{self}[{', '.join('::1' if k.step == 1 else ':' for k in keys)}]")

    def __call__(self, *args):
        return _Type(f"{self}({', '.join(args)})")


class types:  # noqa: N801 - spelled as numba.types
    int64 = _Type("int64")
    float64 = _Type("float64")
    void = _Type("void")

    @staticmethod
    def CPointer(t):  # noqa: N802
        return _Type(f"CPointer({t})")


class _Late:
    """Stands for a numba function in kernel modules until numba is loaded (then _rebind puts
    ``make(numba)`` in its place)."""

    def __init__(self, name, make, py=None):
        self.name, self.make, self.py = name, make, py

    def __call__(self, *args):  # a kernel run as Python (njit(pure=True)) before numba is loaded
        if self.py is None:
            raise RuntimeError(f"{self.name} runs only in compiled kernels")
        return self.py(*args)

    def __repr__(self):
        return f"<{self.name}, not loaded yet>"


def _views(name):
    def make(numba):
        from . import _views   # the intrinsics (numba extensions), imported with numba only

        return _views.make_view(numba, as_int=name == "ints")
    return make


carray = _Late("numba.carray", lambda numba: numba.carray)


def _view_py(a, o, shape, dtype=None):
    """view and ints as Python (a kernel run before numba is loaded)."""
    n = 1
    for d in shape:
        n *= d
    v = a[o:o + n]
    return (v if dtype is None else v.view(dtype)).reshape(shape)


view = _Late("view", _views("view"), _view_py)
ints = _Late("ints", _views("ints"), lambda a, o, shape: _view_py(a, o, shape, "int64"))
_late_made: dict = {}


class Kernel:
    """A declared kernel: the Python function, its signature and options; ``real`` is the numba
    dispatcher (or CFunc) once materialized."""

    def __init__(self, py_func, kind, sig, options):
        self.pure = bool(options.pop("pure", False))
        self.py_func = py_func
        self.kind = kind
        self.sig = sig
        self.options = {**DEFAULTS, **options}
        self.real = None
        self.name = f"{py_func.__module__}.{py_func.__qualname__}"
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__module__ = py_func.__module__
        self.__doc__ = py_func.__doc__

    def __call__(self, *args):
        if self.pure and _numba is None:
            return self.py_func(*args)
        # the numba object only once materialize() has finished (it runs under the lock, so another
        # thread's call waits for it instead of catching a dispatcher before its signature is fixed)
        return (self.real if _numba is not None else materialize(self))(*args)

    @property
    def address(self):
        """Address of the C callback: from the ahead-of-time library if it has it, else numba's."""
        a = aot_addresses().get(self.name)
        return a if a is not None else (self.real if _numba is not None else materialize(self)).address

    @property
    def _numba_type_(self):
        # how numba types this object where a kernel module's global still holds it while
        # materialize() compiles: as its dispatcher (see materialize)
        if self.real is None:
            raise AttributeError("_numba_type_")
        return self.real._numba_type_

    def __getattr__(self, attr):  # py_func, signatures, inspect_llvm, ... of the numba object
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self.real is not None and _owner == threading.get_ident():
            return getattr(self.real, attr)  # numba's compiler, within materialize(), inspecting a callee
        return getattr(self.real if _numba is not None else materialize(self), attr)

    def __repr__(self):
        return f"<{self.kind} kernel {self.name}{'' if self.real is None else ' (compiled)'}>"


def _declare(kind, sig, options):
    def decorate(py_func):
        with _lock:
            k = Kernel(py_func, kind, sig, options)
            _kernels.append(k)
            if _numba is not None:  # numba is loaded already: what numba's decorator does
                k.real = _numba_object(_numba, kind, sig, k.options, py_func)
                return k.real
            return k
    return decorate


def njit(sig=None, **options):
    """numba.njit, deferred (see the module docstring)."""
    if callable(sig) and not isinstance(sig, str):  # bare @njit
        return _declare("njit", None, {})(sig)
    return _declare("njit", sig, options)


def cfunc(sig, **options):
    """numba.cfunc, deferred; served from the ahead-of-time library when it has it."""
    return _declare("cfunc", sig, options)


def _numba_object(numba, kind, sig, options, py_func):
    if kind == "cfunc":
        return numba.cfunc(sig, **options)(py_func)
    return numba.njit(sig, **options)(py_func) if sig is not None else numba.njit(**options)(py_func)


def materialize(kernel=None):
    """Import numba and replace every declared kernel by its numba object, in the globals of every
    dynamics_node module. Returns the numba object of ``kernel`` when one is given."""
    global _numba, _owner
    with _lock:
        if _numba is None:
            import numba

            _owner = threading.get_ident()
            pending = [k for k in _kernels if k.real is None]
            try:
                # 1. a dispatcher for each njit kernel, nothing compiled yet. Module globals keep the
                #    Kernel objects, which numba types as their dispatchers (Kernel._numba_type_), so
                #    compiling a kernel finds its callees; no other thread can reach a dispatcher yet.
                for k in pending:
                    if k.kind == "njit":
                        k.real = numba.njit(**k.options)(k.py_func)
                _rebind(numba, kernels=False)
                # 2. the explicit signatures, compiled (or loaded from numba's cache) as numba.njit(sig)
                #    would: then no other signature is compiled (the wrappers rely on the TypeError)
                for k in pending:
                    if k.kind == "njit" and k.sig is not None:
                        k.real.compile(k.sig)
                        k.real.disable_compile()
                for k in pending:
                    if k.kind == "cfunc":
                        k.real = numba.cfunc(k.sig, **k.options)(k.py_func)
                # 3. only now, with every signature compiled and fixed, the dispatchers replace the
                #    Kernel objects in the modules. Before, another thread calling a kernel through a
                #    module global could reach a dispatcher between its compile() and disable_compile()
                #    and fail with "compilation disabled" (the node's warm-up thread against a request).
                _rebind(numba)
                _numba = numba
            except BaseException:  # as if nothing had been loaded: the next call tries again
                for k in pending:
                    k.real = None
                raise
            finally:
                _owner = None
        return None if kernel is None else kernel.real


def _rebind(numba, kernels=True):
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "dynamics_node" or name.startswith("dynamics_node.")):
            continue
        d = mod.__dict__
        for attr, value in list(d.items()):
            if kernels and isinstance(value, Kernel) and value.real is not None:
                d[attr] = value.real
            elif isinstance(value, _Late):
                if value.name not in _late_made:
                    _late_made[value.name] = value.make(numba)
                d[attr] = _late_made[value.name]


def numba_loaded() -> bool:
    return _numba is not None


# ---------------------------------------------------------------------------------------------
# the ahead-of-time library
def _aot_dir():
    d = os.environ.get("NUMBA_CACHE_DIR")
    return os.path.join(d, "aot") if d else None


def cpu_key() -> str:
    """The CPU the library is compiled for, as /proc/cpuinfo names it (model and flags): numba
    compiles for the host CPU's features, so a library built elsewhere is not used."""
    import hashlib

    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f.read().split("\n\n")[0].splitlines()
                     if ln.split(":")[0].strip() in ("vendor_id", "model name", "flags")]
    except OSError:
        return ""
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()[:16]


def aot_addresses() -> dict:
    """{kernel name: address} of the ahead-of-time library of these sources on this CPU, loaded
    once; {} if it is missing, stale or cannot be loaded (then numba compiles as usual)."""
    global _aot
    if _aot is not None:
        return _aot
    with _lock:
        if _aot is not None:
            return _aot
        table = {}
        d = _aot_dir()
        if d and os.environ.get("DYNAMICS_NODE_NO_AOT") != "1":
            try:
                import ctypes
                import json

                with open(os.path.join(d, "kernels.json")) as f:
                    manifest = json.load(f)
                if manifest.get("cpu") == cpu_key():
                    lib = ctypes.CDLL(os.path.join(d, manifest["library"]))
                    table = {name: ctypes.cast(lib[sym], ctypes.c_void_p).value
                             for name, sym in manifest["kernels"].items()}
                    table["__library__"] = lib  # keeps it loaded
            except (OSError, ValueError, KeyError, AttributeError):
                table = {}
        _aot = table
        return _aot


def aot_loaded() -> bool:
    return bool(aot_addresses())


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
    llvmlite (the same machine code numba would JIT), for ``aot_addresses``. Run in a process of its
    own with an empty numba cache (``python -m dynamics_node._jit build``): numba keeps a kernel's
    LLVM IR only when it compiles it, not when it loads it from its cache."""
    import ctypes
    import importlib
    import json
    import pkgutil
    import subprocess
    import sysconfig
    import tempfile

    from dynamics_node import algorithms

    for m in pkgutil.iter_modules(algorithms.__path__):
        importlib.import_module(f"dynamics_node.algorithms.{m.name}")
    materialize()
    cfuncs = [k for k in _kernels if k.kind == "cfunc"]
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
    out_dir = out_dir or _aot_dir()
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
    manifest = {"library": "kernels.so", "cpu": cpu_key(), "kernels": symbols,
                "sources": os.path.basename(os.path.dirname(out_dir)), "numba": _numba.__version__}
    with open(os.path.join(out_dir, "kernels.json.tmp"), "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(os.path.join(out_dir, "kernels.json.tmp"), os.path.join(out_dir, "kernels.json"))
    return out_dir


def _main(argv):
    """python -m dynamics_node._jit build [--if-missing]: build the ahead-of-time library (in a fresh
    numba cache, which then becomes the package's cache if it has none yet)."""
    import shutil
    import subprocess
    import tempfile

    # the package is imported (it set NUMBA_CACHE_DIR from the source hash)
    if not argv or argv[0] not in ("build", "_build_here"):
        print(_main.__doc__, file=sys.stderr)
        return 2
    target = _aot_dir()
    if target is None:
        print("dynamics_node._jit: no NUMBA_CACHE_DIR (no home directory?): nothing built", file=sys.stderr)
        return 1
    if argv[0] == "_build_here":
        build(argv[1])
        return 0
    if "--if-missing" in argv and aot_loaded():
        return 0
    cache = os.path.dirname(target)
    with tempfile.TemporaryDirectory(prefix="dynamics_node_aot_") as tmp:
        fresh = os.path.join(tmp, "numba")
        env = {**os.environ, "NUMBA_CACHE_DIR": fresh}
        r = subprocess.run([sys.executable, "-m", "dynamics_node._jit", "_build_here", target], env=env)
        if r.returncode:
            return r.returncode
        if not os.path.isdir(cache) or not any(n != "aot" for n in os.listdir(cache)):
            # numba's cache of this compile serves the kernels that are not C callbacks
            for n in os.listdir(fresh):
                shutil.move(os.path.join(fresh, n), os.path.join(cache, n))
    print(f"dynamics_node: ahead-of-time kernels in {target}")
    return 0


if __name__ == "__main__":  # run as a script, this file is __main__: use the package's module
    from dynamics_node import _jit

    sys.exit(_jit._main(sys.argv[1:]))
