"""The one call route of the core: every public function is one call through a :class:`Route`.

    def gravity(model, q, data=None):
        '''Featherstone §5.3 ...'''
        return _GRAVITY(model, data, q)

A route owns, once for every function, what used to be copied into each of them:

1. the front (``_fastcall.Route``, C): when ``data`` is None, the extra arguments have their
   defaults, the model needs no mimic mapping (``model._direct``) and every array is a native,
   aligned, C-contiguous float64 vector, it calls the kernel's C callback on the thread's own work
   buffer and returns the answer if the kernel's status is 0 and every output is finite. That is
   the controllers' hot path; its checks are a few flag tests. Everything else, every error
   included, goes unchanged to the Python side (2.);
2. :meth:`Route.slow`: the model and ``data`` checked (``check_data``, Pinocchio's
   ``model.check(data)``), each array coerced or refused by name (:func:`vec`), the mimic mapping
   (q_t = q[q_src] q_mul + q_off, v_t = v[v_src] v_mul; results through G: Gᵀτ, GᵀHG, J G, §9.6),
   the kernel run (the C callback through ``_fastcall.invoke`` with the data's buffer when given, or
   the numba kernel for what the callback does not take: f_ext, hybrid masks, kinematics), then the
   kernel's status turned into a message and the output checked for finiteness. A computation from
   finite inputs that fails as numbers beyond float64 make it fail (its result overflowed, a
   factorisation met inf or NaN, H singular to working precision, a RangeError of a function it calls)
   is refused naming the input entry out of range, field, index, joint and value (batch_errors.py:
   'qd[3] (joint 'elbow') = 1e+154 is out of range'), not the symptom; without such an entry the
   symptom's own error stands (the model's gravity or a payload out of range are named then).

The contract: any real array layout and dtype (big-endian, float32, read-only,
unaligned, strided, Fortran order, broadcast, lists, tuples) gives the result of its contiguous
native float64 copy; a complex array, a 0-d value or one of several dimensions where a vector is
expected, a str, None, a mapping, an object is refused with InputError naming the argument.

``data=``: kept and made real. ``dn.Data(model)`` holds the work array of
one model with named views of what the last computation left in it (``Data.v``, ``.a``, ``.f``, per
body); it is used instead of the thread's buffer on every route, the C callback's included, and is
refused with InputError when it was made for a model of another tree (it would be written past its
end). A Data serves every model of the same tree (``with_payload``/``with_gravity`` variants).

Placed at the package's top level, not in ``algorithms/``: the sources of that folder are hashed to
name the compiled kernels' cache, and this module holds no kernel (editing it recompiles nothing).
The closed-loop functions keep their own modules and pass through :func:`guard` (coercion of their
array arguments, type checks of the others, finiteness of what they return), applied where the
package exports them (``dynamics_node/__init__.py``), so they need not know about this module.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping

import numpy as np

from . import _fast, batch_errors
from .batch_errors import magnitudes, model_out_of_range as _out_of_range, overflow  # noqa: F401 (re-exported)
from .errors import InputError, RangeError, SingularMassMatrixError, clip_names
from ._kernel_io import OVERFLOW, decode

_ndarray = np.ndarray
_ffinite = _fast.finite
_ffinite_all = _fast.finite_all
_LinAlgError = np.linalg.LinAlgError
_invoke = _fast.invoke
_conform = _fast.conform or (lambda a: type(a) is np.ndarray and a.dtype == np.float64 and a.ndim == 1
                             and a.dtype.isnative and a.flags.c_contiguous and a.flags.aligned
                             and a.flags.writeable)


def finite(a: np.ndarray) -> bool:
    """Every entry of a float array is finite (one C pass when the shim can read it in place)."""
    if _ffinite is not None:
        try:
            return _ffinite(a)
        except TypeError:  # not a C-contiguous native float64 array
            pass
    return bool(np.isfinite(a).all())


def _type_name(x) -> str:
    return "None" if x is None else type(x).__name__


def vec(x, name: str) -> np.ndarray:
    """x as a native, aligned, contiguous, writeable float64 vector (x itself when it is one), or
    InputError naming the argument. Integers convert; complex, bool, text, 0-d and n-d do not."""
    if _conform(x):
        return x
    if x is None or isinstance(x, (str, bytes, Mapping, set)):
        raise InputError(f"{name} must be a vector of numbers, got {_type_name(x)}")
    try:
        a = np.asarray(x)
    except Exception:  # ragged nesting, objects numpy cannot hold: not a vector of numbers
        raise InputError(f"{name} must be a vector of numbers, got {_type_name(x)}") from None
    kind = a.dtype.kind
    if kind == "c":
        raise InputError(f"{name} must be real, got a complex array (dtype {a.dtype})")
    if kind == "O":
        try:
            a = a.astype(np.float64)
        except (TypeError, ValueError):
            raise InputError(f"{name} must be a vector of real numbers, got {_type_name(x)}") from None
    elif kind not in "fiu":
        raise InputError(f"{name} must be a vector of real numbers, got dtype {a.dtype}")
    if a.ndim != 1:
        what = "a scalar" if a.ndim == 0 else f"shape {a.shape}"
        raise InputError(f"{name} must be a vector (1-D), got {what}")
    return np.array(a, dtype=np.float64, order="C")  # always a private, native, aligned copy


def mat(x, name: str) -> np.ndarray:
    """x as a native, contiguous, writeable float64 N x n array (rows are states), or InputError."""
    if (type(x) is np.ndarray and x.ndim == 2 and x.dtype == np.float64 and x.dtype.isnative
            and x.flags.c_contiguous and x.flags.aligned and x.flags.writeable):
        return x
    if x is None or isinstance(x, (str, bytes, Mapping, set)):
        raise InputError(f"{name} must be an N x n array of numbers, got {_type_name(x)}")
    try:
        a = np.asarray(x)
    except Exception:
        raise InputError(f"{name} must be an N x n array of numbers, got {_type_name(x)}") from None
    if a.dtype.kind not in "fiu" and a.dtype.kind != "O" or a.dtype.kind == "c":
        raise InputError(f"{name} must be real, got dtype {a.dtype}")
    if a.ndim != 2:
        raise InputError(f"{name} must be an N x n array (2-D), got shape {a.shape}")
    try:
        return np.array(a, dtype=np.float64, order="C")
    except (TypeError, ValueError):
        raise InputError(f"{name} must be an array of real numbers") from None


_Model = None


def _bind_model():
    """The Model class, imported on first use (model.py does not import this module), and told to
    the shim so that its fast path reads the model's slots in place."""
    global _Model
    if _Model is None:
        from .model import Model

        if _fast.AVAILABLE:
            _fast.set_model(Model)
        _Model = Model
    return _Model


def check_model(model):
    if type(model) is not (_Model or _bind_model()):
        raise InputError(f"model must be a dn.Model (from dn.load_model), got {_type_name(model)}")


def check_data(model, data):
    """The work array of ``data`` after Pinocchio's model.check(data), or None when data is None."""
    if data is None:
        return None
    from .model import Data

    if type(data) is not Data:
        raise InputError(f"data must be a dn.Data(model) or None, got {_type_name(data)}")
    dm = data.model
    if dm is not model and not (dm.nb == model.nb and dm.nvt == model.nvt and np.array_equal(dm._kmi, model._kmi)):
        raise InputError(f"data was made for another model ('{dm.name}', {dm.nb} bodies, {dm.nvt} velocity "
                         f"coordinates), not for '{model.name}' ({model.nb} bodies, {model.nvt}): "
                         "make one with dn.Data(model)")
    w = data.work
    if not (_conform(w) and w.shape[0] >= model.work_size):
        raise InputError("data's work array was replaced or resized: make a new one with dn.Data(model)")
    return w


def _length(model, x, name, kind):
    n = model.nq if kind in "qQ" else model.nv
    if kind in "QV":
        if x.shape[1] != n:
            raise InputError(f"{name} must be an N x {n} array, got shape {x.shape}")
    elif x.shape[0] != n:
        raise InputError(f"{name} has length {x.shape[0]}, expected {n} (joint order: "
                         f"{clip_names(model.joint_names, quote=False)})")


def to_tree(model, x, kind):
    """User coordinates -> tree coordinates (mimic followers filled in): Eq. 3.19 with the offsets."""
    if kind == "q":
        return x[model.q_src] * model.q_mul + model.q_off
    if kind == "Q":
        return np.ascontiguousarray(x[:, model.q_src] * model.q_mul + model.q_off)
    if kind == "V":
        return np.ascontiguousarray(x[:, model.v_src] * model.v_mul)
    return x[model.v_src] * model.v_mul


SYMPTOMS = (RangeError, SingularMassMatrixError, _LinAlgError)  # failures that inputs out of range cause


def refuse(model, what, e, names, arrays, extras=(), row=None):
    """Raise the RangeError naming the input entry out of range behind the failure e (one of SYMPTOMS),
    else e itself (a LinAlgError as an InputError saying so)."""
    symptom = (f"{what}'s linear algebra failed ({e})" if isinstance(e, _LinAlgError) else
               "the mass matrix is singular there to working precision" if isinstance(e, SingularMassMatrixError)
               else batch_errors.symptom_of(e))
    # a joint angle is not blamed when the model's gravity or a payload is out of range (its error names
    # it), nor for a singular H (an angle moves no mass away: a prismatic position does)
    own = model is not None and (not float(np.max(np.abs(model.gravity), initial=0.0)) < batch_errors.BIG
                                 or any(not abs(p.mass) < batch_errors.BIG for p in model.payloads.values()))
    angles = not (own or isinstance(e, SingularMassMatrixError))
    blamed = batch_errors.out_of_range(model, what, symptom, names, arrays, extras, row, angles=angles)
    if blamed is not None:
        raise blamed from None
    if isinstance(e, _LinAlgError):
        raise RangeError(f"{what} failed in its linear algebra ({e}): inputs out of range: "
                         f"{_out_of_range(model, names, arrays, extras)}", symptom=symptom) from None
    raise e


def raise_status(model, st, tree, what, names=(), arrays=(), extras=()):
    from ._kernel_io import raise_status as kernel_status

    try:
        if decode(st)[0] == OVERFLOW:
            raise overflow(what, _out_of_range(model, names, arrays, extras))
        kernel_status(model, st, tree=tree, what=what)
    except SYMPTOMS as e:
        refuse(model, what, e, names, arrays, extras)


def wrenches(model, f_ext, name="f_ext"):
    """{link: (fx fy fz tx ty tz)} -> the kernels' per-body spatial forces, or EMPTY when there are none."""
    from . import _kernel_io

    if f_ext is None:
        return _kernel_io.EMPTY
    if not isinstance(f_ext, Mapping):
        raise InputError(f"{name} must be a dict {{link: (fx, fy, fz, tx, ty, tz)}} or None, got {_type_name(f_ext)}")
    if not f_ext:
        return _kernel_io.EMPTY
    clean = {}
    for link, w in f_ext.items():
        if not isinstance(link, str):
            raise InputError(f"{name} keys must be link names, got {_type_name(link)}")
        clean[link] = vec(w, f"{name}['{link}']")
    fx = _kernel_io.fext_array(model, clean)
    if not finite(fx):
        raise overflow(f"{name} (moved to the body frames)", magnitudes([name], [np.concatenate(list(clean.values()))]))
    return fx


class Route:
    """One public computation. ``inputs``: (name, kind) of the arrays, kind 'q' (nq), 'v' (nv) or
    'x' (any length, coerced only), 'Q' and 'V' (N x nq, N x nv: rows of states); ``extras``: names of the other
    arguments, and ``fast`` their
    values that allow the C callback ``shim`` (None: never); ``compute(model, data, work, *arrays,
    *extras) -> (status, out)`` runs the kernel otherwise; ``tree``: map mimic models' arrays to
    tree coordinates before and ``post`` ('v': Gᵀx, 'vv': GᵀXG, 'J': X G) after; ``matrix``: the
    callback's output is nvt x nvt. ``link_shim=(cfunc, rows, origin)``: a function of a link's point
    (inputs q, qd, point; extras link, then those of ``fast``) whose C callback takes the point in
    body coordinates and the body index (a link ``_fastcall.Route``) and writes rows x nvt; its front
    answers the link origin (``point is origin``) of a link named by a str. ``nout`` (with ``shim``): the
    callback writes nout nvt x nvt matrices (a tuple of them when nout > 1) and takes ``extra`` = (per body,
    per dof, per dof squared, constant) floats of scratch after the work array; the slow side then
    runs ``compute``; ``mimic``: the callback takes models with mimic joints too, in user coordinates
    (nv or nv x nv results; algorithms/tree/mimic.py), a vector route's with ``extra`` floats of scratch for them.
    The slow side of a model with mimic joints runs ``compute`` on tree coordinates (never the callback)."""

    def __init__(self, what, inputs, compute, extras=(), fast=(), shim=None, matrix=False, tree=True, post=None,
                 link_shim=None, nout=0, extra=(0, 0, 0, 0), mimic=False):
        self.what, self.inputs, self.compute = what, tuple(inputs), compute
        self.extras, self.fast = tuple(extras), tuple(fast)
        self.shim, self.matrix, self.tree, self.post = shim, matrix, tree, post
        self.n, self.nargs = len(self.inputs), len(self.inputs) + len(self.extras)
        self.batch = any(kind in "QV" for _, kind in self.inputs)  # rows of states: refusals name NAME[row, col]
        self.names = [nm for nm, _ in self.inputs]
        self.addr = shim.address if shim is not None and _fast.AVAILABLE else None
        self.front = self.slow
        if self.addr is not None and nout:
            _bind_model()
            self.front = _fast.Route(self.addr, len(self.inputs), True, self.fast, self.slow, 0, None, nout,
                                     tuple(extra), mimic)
            self.addr = None   # the slow side computes (invoke returns one matrix)
        elif self.addr is not None:
            _bind_model()
            self.front = _fast.Route(self.addr, len(self.inputs), matrix, self.fast, self.slow, 0, None, 0,
                                     tuple(extra), mimic)
        elif link_shim is not None and _fast.AVAILABLE:
            _bind_model()
            cf, rows, origin = link_shim
            self.front = _fast.Route(cf.address, 2, False, self.fast, self.slow, rows, origin)

    def _fast_extras(self, extras):
        for e, f in zip(extras, self.fast):
            if not (e is f or (type(e) is type(f) and e == f)):
                return False
        return True

    def slow(self, model, data, *args):
        check_model(model)
        work = None if data is None else check_data(model, data)
        if len(args) != self.nargs:
            raise TypeError(f"{self.what}: expected {self.nargs} arguments after model and data")
        xs = []
        for a, (nm, kind) in zip(args, self.inputs):
            x = mat(a, nm) if kind in "QV" else vec(a, nm)
            if kind != "x":
                _length(model, x, nm, kind)
            xs.append(x)
        if self.batch:
            batch_errors.check_finite(model, self.what, self.names, xs)
        extras = args[self.n:]
        mimic = self.tree and model.has_mimic
        kx = [to_tree(model, x, kind) if kind != "x" else x for x, (_, kind) in zip(xs, self.inputs)] if mimic else xs
        if self.addr is not None and not model.has_mimic and self._fast_extras(extras):
            r = _invoke(self.addr, self.matrix, model._kmi, model._kmf, work, *kx)
            st, out = (0, r) if r.__class__ is _ndarray else (r, None)
        else:
            try:
                st, out = self.compute(model, data, work if work is not None else np.empty(model.work_size), *kx,
                                       *extras)
            except SYMPTOMS as e:  # numbers beyond range met inside (a factorisation, a function it calls)
                refuse(model, self.what, e, self.names, xs, self._detail(extras))
        if st:
            self._fail(model, st, mimic, xs, kx, extras)
        if mimic and self.post is not None:
            G = model.G
            out = G.T @ out if self.post == "v" else (G.T @ out @ G if self.post == "vv" else out @ G)
        if not _finite_out(out):
            detail = _out_of_range(model, self.names, xs, self._detail(extras))
            k = batch_errors.first_bad_row(out, xs[0].shape[0]) if self.batch else None
            if k is not None:
                raise batch_errors.blame_row(model, self.what, self.names, xs, k,
                                             f"{self.what} overflowed (not finite) ({detail})")
            refuse(model, self.what, overflow(self.what, detail), self.names, xs, self._detail(extras))
        return out

    def _fail(self, model, st, mimic, xs, kx, extras):
        """The error of a kernel status; a non-finite tree coordinate from finite ones is the mimic
        mapping's overflow (multipliers times q), not a NaN of the caller."""
        if mimic and all(finite(x) for x in xs) and not all(finite(x) for x in kx):
            refuse(model, self.what, overflow(f"{self.what} (the mimic mapping)", magnitudes(self.names, xs)),
                   self.names, xs)
        raise_status(model, st, mimic, self.what, self.names, xs, self._detail(extras))

    def _detail(self, extras):
        """The extras an overflow message may blame: numbers and wrench dicts."""
        return [(nm, e) for nm, e in zip(self.extras, extras)
                if isinstance(e, Mapping) or (isinstance(e, (int, float)) and not isinstance(e, bool))]


def _finite_out(out) -> bool:
    """Every float in a result (an array, a float, or tuples, lists and dicts of them) is finite."""
    if _ffinite_all is not None:
        r = _ffinite_all(out)
        if r is not None:
            return r
    return _finite_py(out)


def _finite_py(out) -> bool:
    t = type(out)
    if t is np.ndarray:
        return out.dtype.kind != "f" or finite(out)
    if t is tuple or t is list:
        for o in out:
            if not _finite_py(o):
                return False
        return True
    if t is float:
        return out - out == 0.0
    if t is dict or isinstance(out, Mapping):
        return _finite_py(tuple(out.values()))
    return True


def check_out(out, what, names=(), arrays=(), extras=(), model=None):
    """InputError when a result (array, tuple, dict of arrays) is not finite (the inputs were): the
    RangeError naming the input entry out of range (its joint when the model is given)."""
    if not _finite_out(out):
        refuse(model, what, overflow(what, magnitudes(names, arrays, extras)), names, arrays, extras)


# ---------------------------------------------------------------------------------------------
# The hook of the closed-loop functions (their modules are their own; the package wraps them)

def names_arg(x, name):
    """None, one name, or an iterable of names (joint or link names): refused by name otherwise."""
    if x is None or isinstance(x, str):
        return x
    if isinstance(x, (Mapping, bytes)) or not hasattr(x, "__iter__"):
        raise InputError(f"{name} must be a joint name or a list of names, got {_type_name(x)}")
    items = list(x)
    bad = [i for i in items if not isinstance(i, str)]
    if bad:
        raise InputError(f"{name} must hold names (str), got {_type_name(bad[0])}")
    return items


def _scalar_arg(x, name, allow_none):
    if x is None and allow_none:
        return x
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise InputError(f"{name} must be a real number{' or None' if allow_none else ''}, got {_type_name(x)}")
    return x


# per closed-loop function: {argument: kind}; kinds 'vec', 'vec?' (None allowed), 'names',
# 'wrenches' (None or a dict), 'scalar', 'scalar?'
LOOP_ARGS = {
    "closed_loop_forward_dynamics": {"q": "vec", "qd": "vec", "tau": "vec", "stabilization_time": "scalar?",
                                     "f_ext": "wrenches"},
    "closed_loop_inverse_dynamics": {"q": "vec", "qd": "vec", "qdd": "vec", "actuated": "names",
                                     "loop_wrenches": "wrenches"},
    "closed_loop_gravity": {"q": "vec", "actuated": "names"},
    "close_loops": {"q": "vec", "independent": "names", "tol": "scalar", "max_iter": "scalar"},
    "close_loop_velocities": {"q": "vec", "qd": "vec", "independent": "names"},
    "loop_state": {"q": "vec", "qd": "vec?"},
    "loop_position_errors": {"q": "vec"},
    "loop_constraints": {"q": "vec", "qd": "vec", "stabilization_time": "scalar?"},
    "constraint_basis": {"q": "vec", "qd": "vec?", "independent": "names", "stabilization_time": "scalar?"},
    "mobility": {"q": "vec"},
    # Unseren's two arms holding one object (algorithms/loops/dual_arm.py); loop_joint: a name or None
    "dual_arm_terms": {"q": "vec", "qd": "vec", "loop_joint": "names"},
    "sphere_force": {"q": "vec", "qd": "vec", "tau": "vec", "loop_joint": "names"},
    "delta_matrix": {"q": "vec", "loop_joint": "names"},
    "dual_arm_forward_dynamics": {"q": "vec", "qd": "vec", "tau": "vec", "loop_joint": "names"},
    "pseudovelocity_basis": {"q": "vec", "qd": "vec", "loop_joint": "names"},
    "reduced_order_dynamics": {"q": "vec", "nu": "vec", "tau": "vec", "loop_joint": "names"},
    "dual_arm_inverse_dynamics": {"q": "vec", "qd": "vec", "qdd": "vec", "f_cs": "vec", "loop_joint": "names"},
    "decoupled_control": {"q": "vec", "qd": "vec", "tau1_s": "vec", "tau2_s": "vec", "loop_joint": "names"},
}


def _check_arg(kind, x, name):
    if kind == "vec" or (kind == "vec?" and x is not None):
        return vec(x, name)
    if kind == "names":
        return names_arg(x, name)
    if kind == "wrenches":
        if x is not None and not isinstance(x, Mapping):
            raise InputError(f"{name} must be a dict {{name: (fx, fy, fz, tx, ty, tz)}} or None, got {_type_name(x)}")
        return x if x is None else {k: vec(v, f"{name}['{k}']") for k, v in x.items()}
    if kind in ("scalar", "scalar?"):
        return _scalar_arg(x, name, kind == "scalar?")
    return x


def _guard_fail(what, e, spec, params, args):
    """The refusal of a guarded function whose call failed with e (one of SYMPTOMS), or whose result is
    not finite (e None): the input entry out of range named (refuse), else the symptom."""
    given = list(zip(params[1:], args[1:]))
    arrays = [(p, a) for p, a in given if isinstance(a, np.ndarray)]
    scal = [(p, a) for p, a in given if spec.get(p, "").startswith(("scalar", "wrenches"))
            and isinstance(a, (int, float, Mapping))]
    names, arrays = [p for p, _ in arrays], [a for _, a in arrays]
    refuse(args[0], what, e or overflow(what, magnitudes(names, arrays, scal)), names, arrays, scal)


def guard(fn, name):
    """fn with the contract of this module: its array arguments coerced (vec), its other arguments
    type-checked by name, and its results checked for finiteness. The wrapper is generated with
    fn's own signature (no *args repacking: it costs about a microsecond less per call); an
    argument left at its default passes untouched (defaults are compared by identity)."""
    spec = LOOP_ARGS.get(name)
    if spec is None:
        return fn
    params = list(inspect.signature(fn).parameters.values())
    env = {"_fn": fn, "_Model": _Model or _bind_model(), "check_model": check_model, "_conform": _conform,
           "_check_arg": _check_arg, "_finite_out": _finite_out, "_SYMPTOMS": SYMPTOMS, "_fail": _guard_fail,
           "_spec": spec, "_names": [p.name for p in params]}
    sig, body, call = [], [], []
    for k, p in enumerate(params):
        if p.default is inspect.Parameter.empty:
            sig.append(p.name)
        else:
            env[f"_d{k}"] = p.default
            sig.append(f"{p.name}=_d{k}")
        call.append(p.name)
        kind = spec.get(p.name)
        if kind == "vec":
            body.append(f"    if not _conform({p.name}): {p.name} = _check_arg('vec', {p.name}, '{p.name}')")
        elif kind is not None:
            skip = f"{p.name} is not _d{k} and " if p.default is not inspect.Parameter.empty else ""
            body.append(f"    if {skip}True: {p.name} = _check_arg('{kind}', {p.name}, '{p.name}')")
    args = ", ".join(call)
    src = (f"def guarded({', '.join(sig)}):\n"
           f"    if type({call[0]}) is not _Model: check_model({call[0]})\n" + "\n".join(body) + "\n"
           f"    try:\n        out = _fn({args})\n"
           f"    except _SYMPTOMS as e:\n"
           f"        _fail('{name.replace('_', ' ')}', e, _spec, _names, ({args},))\n"
           f"    if not _finite_out(out):\n"
           f"        _fail('{name.replace('_', ' ')}', None, _spec, _names, ({args},))\n"
           f"    return out\n")
    exec(compile(src, f"<contract of {name}>", "exec"), env)
    return functools.wraps(fn)(env["guarded"])
