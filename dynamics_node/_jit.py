"""The kernels' compiler, numba, loaded only when a kernel is needed that is not already compiled.

Kernel modules declare their compiled functions with ``njit`` and ``cfunc`` from here, spelled as
numba's own (``@njit(types.int64(I1, F1), cache=True)``). Nothing is compiled or loaded at import:

* a C callback (``cfunc``) that the ahead-of-time library holds is served from there:
  ``kernel.address`` is its address in ``kernels.so``, and numba is never imported. ``make setup``
  builds that library (``python -m dynamics_node._jit_build build``, see ``_jit_build.py``). The C shim
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
_order = None         # a build process's order of compiling kernels (_jit_build: its own share first)


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
        return make_view(numba, as_int=name == "ints")   # the intrinsic, made once numba is loaded
    return make


def make_view(numba, as_int=False):
    """view(a, o, shape): a C-contiguous view of a[o : o + prod(shape)] with that shape, as
    ``a[o:o + prod(shape)].reshape(shape)`` but without reshape's general machinery (numba calls two
    helpers per reshape, about 18 ns, where this costs nothing: the kernels of the derivatives take a
    dozen views of their scratch per call). a: 1-d C-contiguous; the caller guarantees the extent (the
    kernels check their scratch's length against its layout before they take views). as_int: ints(a, o, shape),
    the same floats' memory as int64 (8 bytes each too): integer scratch inside a float work array."""
    from numba import types as nt
    from numba.core import cgutils
    from numba.core.imputils import impl_ret_borrowed
    from numba.extending import intrinsic
    from numba.np.arrayobj import make_array, populate_array

    @intrinsic
    def view(typingctx, a, o, shape):
        if not (isinstance(a, nt.Array) and a.ndim == 1 and a.layout == "C" and isinstance(o, nt.Integer)
                and (not as_int or a.dtype == nt.float64)
                and isinstance(shape, nt.BaseTuple) and all(isinstance(t, nt.Integer) for t in shape)):
            return None

        def codegen(context, builder, sig, args):
            ary = make_array(sig.args[0])(context, builder, args[0])
            dims = [context.cast(builder, d, t, nt.intp)
                    for d, t in zip(cgutils.unpack_tuple(builder, args[2]), sig.args[2])]
            itemsize = context.get_constant(nt.intp, context.get_abi_sizeof(context.get_data_type(a.dtype)))
            strides = [itemsize]
            for d in reversed(dims[1:]):   # C order: the last index is the contiguous one
                strides.insert(0, builder.mul(strides[0], d))
            out = make_array(sig.return_type)(context, builder)
            data = builder.gep(ary.data, [context.cast(builder, args[1], sig.args[1], nt.intp)])
            if as_int:
                data = builder.bitcast(data, context.get_data_type(nt.int64).as_pointer())
            populate_array(out, data=data,
                           shape=dims, strides=strides, itemsize=itemsize, meminfo=ary.meminfo, parent=None)
            return impl_ret_borrowed(context, builder, sig.return_type, out._getvalue())

        return nt.Array(nt.int64 if as_int else a.dtype, len(shape), "C")(a, o, shape), codegen

    return view


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
            if _numba is not None:  # numba is loaded already: what numba's decorator does, except that a C
                # callback stays a Kernel, whose address is the library's when it has it (a module imported
                # after a call loaded numba, such as the closed loops' after close_loop_velocities)
                k.real = _numba_object(_numba, kind, sig, k.options, py_func)
                return k if kind == "cfunc" else k.real
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

            _fix_old_numba(numba)
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
                for k in _ordered([k for k in pending if k.kind == "njit" and k.sig is not None]):
                    k.real.compile(k.sig)
                    k.real.disable_compile()
                for k in _ordered([k for k in pending if k.kind == "cfunc"]):
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


def _ordered(kernels):
    """The kernels in the order materialize compiles them: as declared, or as the build orders them."""
    return kernels if _order is None else _order(kernels)


def _fix_old_numba(numba):
    """numba 0.58 (Ubuntu 24.04's) with the two fixes of its inliner that came with 0.59 (numba PRs
    #8990 and #9245), which change how much IR it copies, not what it compiles. Every small helper of
    the kernels is inlined (``inline="always"``), and at each call site 0.58 deep-copies the callee's IR
    block by block, then each statement again on its own, each time with the callee's whole scope and
    every variable's source location: a cost of statements times variables per inlined call, which
    kept the kernel build from finishing in 35 minutes (crba_kernel alone: 72 s of CPU, 2.6 s with
    these fixes, for the same machine code). Newer numba is left as it is."""
    import copy

    from numba.core import inline_closurecall, ir

    version = tuple(int(p) for p in numba.__version__.split(".")[:2] if p.isdigit())
    if version >= (0, 59) or inline_closurecall.copy is not copy:
        return
    if "__deepcopy__" not in ir.Var.__dict__:
        def var_deepcopy(self, memo):  # 0.59's: the location is shared, as Const's and FreeVar's are
            out = ir.Var(copy.deepcopy(self.scope, memo), self.name, self.loc)
            memo[id(self)] = out
            return out

        ir.Var.__deepcopy__ = var_deepcopy

    class BlockCopy:
        """``copy`` as the inliner sees it: copy_ir's statement-by-statement copy of a block it has just
        deep-copied gets the statements of that copy, as copy_ir does from 0.59 on."""

        def __init__(self):
            self.memo = {}

        def __getattr__(self, name):
            return getattr(copy, name)

        def deepcopy(self, x, memo=None):
            if memo is None and isinstance(x, ir.Block):
                self.memo = {}
                return copy.deepcopy(x, self.memo)
            if memo is None and isinstance(x, ir.Stmt) and id(x) in self.memo:
                return self.memo[id(x)]
            return copy.deepcopy(x, memo)

    inline_closurecall.copy = BlockCopy()


def _rebind(numba, kernels=True):
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "dynamics_node" or name.startswith("dynamics_node.")):
            continue
        d = mod.__dict__
        for attr, value in list(d.items()):
            # C callbacks stay Kernels: an address read later is still the library's (Kernel.address)
            if kernels and isinstance(value, Kernel) and value.real is not None and value.kind != "cfunc":
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
