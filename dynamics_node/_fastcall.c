/* _fastcall: the cheapest possible Python entry into the compiled kernels, the front of the one call
 * route (dynamics_node/dispatch.py). Sources: this file (the work buffer, the kernel calls, the module),
 * _routes.c (the Route fronts), _contact_route.c and _step_route.c (the contact functions' and the
 * simulation step's fronts), _fastcall.h (what they share).
 *
 * A numba dispatcher spends about 0.05 us per argument working out types before it calls the
 * machine code; for a 7-DoF arm that is as much as the whole gravity computation. The kernels are
 * also exported as C callbacks (`cfunc`, see dynamics_node/_jit.py); this module calls them through
 * their addresses after checking the arrays in a few instructions. No algorithm lives here.
 *
 *   Route(addr, nin, matrix, fast, slow)   a callable: route(model, data, a[, b, c], *extras).
 *       The fast path is taken when data is None, every extra is (identically) the value in the
 *       tuple `fast`, model is exactly of the class given to set_model (its slots are then read
 *       in place), model._direct is True and every array is a native-byte-order, aligned,
 *       C-contiguous float64 1-D ndarray; the kernel's answer is returned when its status is 0 and
 *       every output is finite. Anything else, including every error, goes to slow(model, data,
 *       a, ..., *extras) unchanged (Python: coercion, mimic mapping, data=, the error messages).
 *   invoke(addr, matrix, mi, mf, work, a[, b, c]) -> ndarray | int status | NotImplemented
 *       the same kernel call for the slow path: `work` is a Data's buffer or None (the calling
 *       thread's own); status OVERFLOW (_kernel_io.py) when the result is not finite.
 *   invoke3s(addr, nout, lo, hi, mi, mf, work, a, b, c, s) -> ndarray (nout,) | int status | NotImplemented
 *       the same for a kernel int64 f(mi*, mf*, a*, len(a), b*, len(b), c*, len(c), s, out*, work*,
 *       len(work)) with one float s after c and an output of nout floats of which the caller keeps
 *       out[lo:hi] (the rest is the kernel's scratch): only that part is checked for finiteness
 *       (the closed-loop forward dynamics, algorithms/loops/forward.py; s = the Baumgarte gain).
 *   Route(addr, 2, False, fast, slow, rows, origin)   a link route: route(model, data, a, b, point,
 *       link, *extras) for a kernel of invoke3s's signature taking (a, b, the point in body
 *       coordinates, the body index as the float) and writing rows x nvt; fast as above when besides
 *       point is origin (identity) and link is a str key of model._link_index (link_body, link_p
 *       read in place).
 *   Route(addr, nin, True, fast, slow, 0, None, nout, extra)   a matrices route: as a vector route, for a
 *       kernel writing nout nvt x nvt matrices into one block (a tuple of nout views when nout > 1) with
 *       a work array longer by extra = (per body, per dof, per dof squared, constant) floats (_routes.c)
 *   conform(a) -> bool    a is what a numba kernel signature float64[::1] takes as it is
 *   finite(a) -> bool     every entry of a C-contiguous float64 array is finite
 *   finite_all(x) -> bool | None   the same over a result: arrays, floats, tuples, lists, dicts
 *   set_model(Model)                              the model class (until then: always slow)
 *   ContactRoute(addr, cache, prepare, result, names, slow)   the front of contact_forward_dynamics
 *       (_contact_route.c)
 *   StepRoute(addr, cache, prepare, result, slow), step_into(...)   the simulation step's fronts
 *       (_step_route.c)
 * where the kernel at addr is int64 f(mi*, mf*, a*, len(a)[, b*, len(b), c*, len(c)], out*, work*,
 * len(work)) and a non-zero return is a status code the Python side turns into an error message.
 *
 * The per-thread work buffer (allocating it in compiled code on every call cost as much as a small
 * arm's whole computation) is registered under a pthread key whose destructor frees it when the
 * thread ends: short-lived threads leave nothing behind.
 */
#include "_fastcall.h"

static _Thread_local double *tls_work = NULL;
static _Thread_local Py_ssize_t tls_len = 0;
static pthread_key_t work_key;
PyTypeObject *model_type = NULL;
Py_ssize_t off_direct, off_kmi, off_kmf, off_link_index, off_link_body, off_link_p, off_loop_data;

double *thread_work(const int64_t *h, Py_ssize_t *len) {
    Py_ssize_t model;
    double *w = thread_work_plus(h, 0, &model);
    *len = tls_len;
    return w;
}

double *thread_work_plus(const int64_t *h, Py_ssize_t extra, Py_ssize_t *len) {
    *len = DN_WORK_SIZE(h);
    Py_ssize_t need = *len + extra;
    if (need > tls_len) {
        double *p = (double *)realloc(tls_work, (size_t)need * sizeof(double));
        if (!p) {
            PyErr_NoMemory();
            return NULL;
        }
        tls_work = p;
        tls_len = need;
        pthread_setspecific(work_key, p); /* freed by the key's destructor at thread exit */
    }
    return tls_work;
}

/* 1 when every one of n doubles is finite. First their sum, in eight explicit lanes (vectorised):
 * an inf or NaN entry makes it inf or NaN, so a finite sum proves every entry finite. A sum that is
 * not finite (a NaN, or finite entries whose sum overflows) is settled entry by entry: a double is
 * inf or NaN when its exponent bits are all ones, the only exponent that carries into the sign bit
 * when one is added to it. */
typedef double f64x4 __attribute__((vector_size(32)));
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
#define LANES_CLONES __attribute__((target_clones("avx2", "default"))) /* resolved once, at load */
#else
#define LANES_CLONES
#endif
LANES_CLONES int all_finite(const double *x, Py_ssize_t n) {
    f64x4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, b0, b1, b2, b3, b4, b5, b6, b7;
    Py_ssize_t k = 0;
    for (; k + 32 <= n; k += 32) { /* eight independent chains of four lanes */
        memcpy(&b0, x + k, 32);
        memcpy(&b1, x + k + 4, 32);
        memcpy(&b2, x + k + 8, 32);
        memcpy(&b3, x + k + 12, 32);
        memcpy(&b4, x + k + 16, 32);
        memcpy(&b5, x + k + 20, 32);
        memcpy(&b6, x + k + 24, 32);
        memcpy(&b7, x + k + 28, 32);
        a0 += b0;
        a1 += b1;
        a2 += b2;
        a3 += b3;
        a4 += b4;
        a5 += b5;
        a6 += b6;
        a7 += b7;
    }
    a0 = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
    double s = (a0[0] + a0[1]) + (a0[2] + a0[3]);
    for (; k < n; k++) s += x[k];
    if (s - s == 0.0) return 1;
    const uint64_t E = 0x7ff0000000000000ULL, ONE = 0x0010000000000000ULL;
    uint64_t acc = 0;
    for (k = 0; k < n; k++) {
        uint64_t b;
        memcpy(&b, x + k, 8);
        acc |= (b & E) + ONE;
    }
    return !(acc >> 63);
}

/* The work array of a call: work (a Data's buffer, checked against the model behind h) or, when it is
 * None, the calling thread's own; NULL with an exception set. */
static double *call_work(const int64_t *h, PyObject *work, Py_ssize_t *nw) {
    if (work == Py_None) return thread_work(h, nw);
    Py_ssize_t need = DN_WORK_SIZE(h);
    if (!is_vec(work, NPY_DOUBLE) || !PyArray_ISWRITEABLE((PyArrayObject *)work) ||
        PyArray_DIM((PyArrayObject *)work, 0) < need) {
        PyErr_SetString(PyExc_ValueError, "work array too small for this model");
        return NULL;
    }
    *nw = PyArray_DIM((PyArrayObject *)work, 0);
    return (double *)PyArray_DATA((PyArrayObject *)work);
}

PyObject *run(void *addr, int nin, int matrix, PyArrayObject *mi, PyArrayObject *mf, PyObject *work,
                     PyObject *const *x, const Py_ssize_t *extra) {
    const int64_t *h = (const int64_t *)PyArray_DATA(mi);
    npy_intp nt = (npy_intp)h[DN_H_NVT], n = (npy_intp)h[DN_H_NVU]; /* nvt; nv, the user's (below nvt with mimic joints) */
    Py_ssize_t nw;
    double *w;
    if (n != nt) { /* mimic joints: user coordinates in and out, the route's scratch after the work array */
        if (!extra || work != Py_None) return PyLong_FromLongLong(DN_STATUS(DN_BAD_LENGTH, 0, 0)); /* the Python side */
        Py_ssize_t more = DN_SCRATCH_SIZE(extra, h);
        w = thread_work_plus(h, more, &nw);
        nw += more;
    } else {
        w = call_work(h, work, &nw);
    }
    if (!w) return NULL;
    npy_intp dims[2] = {n, n};
    PyObject *out = PyArray_SimpleNew(matrix ? 2 : 1, dims, NPY_DOUBLE);
    if (!out) return NULL;
    double *o = (double *)PyArray_DATA((PyArrayObject *)out);
    PyArrayObject *a = (PyArrayObject *)x[0];
    int64_t st;
    if (nin == 1) {
        st = ((k1_t)addr)(h, (const double *)PyArray_DATA(mf), (const double *)PyArray_DATA(a),
                          (int64_t)PyArray_DIM(a, 0), o, w, (int64_t)nw);
    } else {
        PyArrayObject *b = (PyArrayObject *)x[1], *c = (PyArrayObject *)x[2];
        st = ((k3_t)addr)(h, (const double *)PyArray_DATA(mf), (const double *)PyArray_DATA(a),
                          (int64_t)PyArray_DIM(a, 0), (const double *)PyArray_DATA(b), (int64_t)PyArray_DIM(b, 0),
                          (const double *)PyArray_DATA(c), (int64_t)PyArray_DIM(c, 0), o, w, (int64_t)nw);
    }
    if (st == 0 && !all_finite(o, matrix ? n * n : n)) st = OVERFLOW_STATUS;
    if (st) {
        Py_DECREF(out);
        return PyLong_FromLongLong((long long)st);
    }
    return out;
}


/* ------------------------------------------------------------------------------------ invoke */
static PyObject *invoke(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 && nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "expected (addr, matrix, mi, mf, work, a[, b, c])");
        return NULL;
    }
    void *addr = PyLong_AsVoidPtr(args[0]);
    if (!addr) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "null kernel"), NULL);
    int matrix = PyObject_IsTrue(args[1]);
    if (matrix < 0) return NULL;
    int nin = nargs == 6 ? 1 : 3;
    if (!model_ok(args[2], args[3])) Py_RETURN_NOTIMPLEMENTED;
    for (int k = 0; k < nin; k++)
        if (!is_vec(args[5 + k], NPY_DOUBLE)) Py_RETURN_NOTIMPLEMENTED;
    return run(addr, nin, matrix, (PyArrayObject *)args[2], (PyArrayObject *)args[3], args[4], args + 5, NULL);
}

/* ---------------------------------------------------------------------------------- invoke3s */
static PyObject *invoke3s(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "expected (addr, nout, lo, hi, mi, mf, work, a, b, c, s)");
        return NULL;
    }
    void *addr = PyLong_AsVoidPtr(args[0]);
    if (!addr) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "null kernel"), NULL);
    Py_ssize_t nout = PyLong_AsSsize_t(args[1]), lo = PyLong_AsSsize_t(args[2]), hi = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred()) return NULL;
    if (lo < 0 || hi < lo || nout < hi) {
        PyErr_SetString(PyExc_ValueError, "invoke3s needs 0 <= lo <= hi <= nout");
        return NULL;
    }
    double s;
    if (PyFloat_CheckExact(args[10])) {
        s = PyFloat_AS_DOUBLE(args[10]);
    } else {
        s = PyFloat_AsDouble(args[10]);
        if (s == -1.0 && PyErr_Occurred()) return NULL;
    }
    if (!model_ok(args[4], args[5])) Py_RETURN_NOTIMPLEMENTED;
    for (int k = 7; k < 10; k++)
        if (!is_vec(args[k], NPY_DOUBLE)) Py_RETURN_NOTIMPLEMENTED;
    const int64_t *h = (const int64_t *)PyArray_DATA((PyArrayObject *)args[4]);
    Py_ssize_t nw;
    double *w = call_work(h, args[6], &nw);
    if (!w) return NULL;
    npy_intp dims[1] = {(npy_intp)nout};
    PyObject *out = PyArray_SimpleNew(1, dims, NPY_DOUBLE);
    if (!out) return NULL;
    double *o = (double *)PyArray_DATA((PyArrayObject *)out);
    PyArrayObject *a = (PyArrayObject *)args[7], *b = (PyArrayObject *)args[8], *c = (PyArrayObject *)args[9];
    int64_t st = ((k3s_t)addr)(h, (const double *)PyArray_DATA((PyArrayObject *)args[5]),
                               (const double *)PyArray_DATA(a), (int64_t)PyArray_DIM(a, 0),
                               (const double *)PyArray_DATA(b), (int64_t)PyArray_DIM(b, 0),
                               (const double *)PyArray_DATA(c), (int64_t)PyArray_DIM(c, 0), s, o, w, (int64_t)nw);
    if (st == 0 && !all_finite(o + lo, hi - lo)) st = OVERFLOW_STATUS;
    if (st) {
        Py_DECREF(out);
        return PyLong_FromLongLong((long long)st);
    }
    return out;
}

static PyObject *conform(PyObject *self, PyObject *a) {
    return PyBool_FromLong(is_vec(a, NPY_DOUBLE) && PyArray_ISWRITEABLE((PyArrayObject *)a));
}

static PyObject *py_finite(PyObject *self, PyObject *o) {
    if (!PyArray_Check(o) || PyArray_TYPE((PyArrayObject *)o) != NPY_DOUBLE ||
        !PyArray_ISCARRAY_RO((PyArrayObject *)o) || !PyArray_ISNOTSWAPPED((PyArrayObject *)o)) {
        PyErr_SetString(PyExc_TypeError, "finite() takes a C-contiguous native float64 ndarray");
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)o;
    return PyBool_FromLong(all_finite((const double *)PyArray_DATA(a), PyArray_SIZE(a)));
}

/* 1: every float in o (an ndarray, a float, tuples, lists and dicts of them) is finite; 0: one is
 * not; 2: cannot tell here (another float dtype, a non-contiguous array; the caller uses numpy) */
static int tree_finite(PyObject *o, int depth) {
    if (PyArray_Check(o)) {
        PyArrayObject *a = (PyArrayObject *)o;
        if (!PyArray_ISFLOAT(a) && !PyArray_ISCOMPLEX(a)) return 1;
        if (PyArray_TYPE(a) != NPY_DOUBLE || !PyArray_ISCARRAY_RO(a) || !PyArray_ISNOTSWAPPED(a)) return 2;
        return all_finite((const double *)PyArray_DATA(a), PyArray_SIZE(a));
    }
    if (PyFloat_CheckExact(o)) {
        double v = PyFloat_AS_DOUBLE(o);
        return v - v == 0.0;
    }
    if (depth > 8) return 2;
    int res = 1;
    if (PyTuple_CheckExact(o) || PyList_CheckExact(o)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        PyObject **items = PySequence_Fast_ITEMS(o);
        for (Py_ssize_t k = 0; k < n && res; k++) {
            int r = tree_finite(items[k], depth + 1);
            if (r != 1) res = r;
        }
        return res;
    }
    if (PyDict_Check(o)) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (res && PyDict_Next(o, &pos, &key, &value)) {
            int r = tree_finite(value, depth + 1);
            if (r != 1) res = r;
        }
        return res;
    }
    return PyFloat_Check(o) || PyComplex_Check(o) ? 2 : 1;
}

static PyObject *finite_all(PyObject *self, PyObject *o) {
    int r = tree_finite(o, 0);
    if (r == 2) Py_RETURN_NONE;
    return PyBool_FromLong(r);
}

/* The offset of a __slots__ object attribute of type t, or -1 with an exception set. */
static Py_ssize_t slot_offset(PyTypeObject *t, const char *name) {
    PyObject *d = PyObject_GetAttrString((PyObject *)t, name);
    if (!d) return -1;
    Py_ssize_t off = -1;
    if (Py_TYPE(d) == &PyMemberDescr_Type && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX)
        off = ((PyMemberDescrObject *)d)->d_member->offset;
    else
        PyErr_Format(PyExc_TypeError, "%s is not a slot of %s", name, t->tp_name);
    Py_DECREF(d);
    return off;
}

static PyObject *set_model(PyObject *self, PyObject *t) {
    if (!PyType_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "set_model(Model) takes the class");
        return NULL;
    }
    Py_ssize_t a = slot_offset((PyTypeObject *)t, "_direct"), b = slot_offset((PyTypeObject *)t, "_kmi"),
               c = slot_offset((PyTypeObject *)t, "_kmf");
    if (a < 0 || b < 0 || c < 0) return NULL;
    Py_ssize_t li = slot_offset((PyTypeObject *)t, "_link_index"), lb = slot_offset((PyTypeObject *)t, "link_body"),
               lp = slot_offset((PyTypeObject *)t, "link_p");
    Py_ssize_t ld = slot_offset((PyTypeObject *)t, "loop_data");
    if (li < 0 || lb < 0 || lp < 0 || ld < 0) return NULL;
    Py_INCREF(t);
    Py_XSETREF(model_type, (PyTypeObject *)t);
    off_direct = a;
    off_kmi = b;
    off_kmf = c;
    off_link_index = li;
    off_link_body = lb;
    off_link_p = lp;
    off_loop_data = ld;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_model", set_model, METH_O,
     "set_model(Model): the class whose slots _direct, _kmi, _kmf (and _link_index, link_body, link_p, loop_data) "
     "the fast paths read"},
    {"invoke", (PyCFunction)(void (*)(void))invoke, METH_FASTCALL, "invoke(addr, matrix, mi, mf, work, a[, b, c])"},
    {"invoke3s", (PyCFunction)(void (*)(void))invoke3s, METH_FASTCALL,
     "invoke3s(addr, nout, lo, hi, mi, mf, work, a, b, c, s): invoke with one float s after c, nout outputs"},
    {"conform", conform, METH_O, "conform(a): a native aligned contiguous writeable float64 1-D ndarray"},
    {"finite", py_finite, METH_O, "finite(a): every entry of a C-contiguous float64 array is finite"},
    {"finite_all", finite_all, METH_O, "finite_all(result): True, False, or None when it cannot tell"},
    {"step_into", (PyCFunction)(void (*)(void))step_into, METH_FASTCALL,
     "step_into(addr, model, q, qd, tau, fx, dt, envi, envf, state_in, limits, restitution, speculative, q1, qd1, qdd, "
     "limit_tau, state_out, F, P, info, floats, ints) -> status: the simulation step into the caller's arrays"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_fastcall",
                                    "Cheap calls into the compiled dynamics kernels.", -1, methods};

PyMODINIT_FUNC PyInit__fastcall(void) {
    import_array();
    if (pthread_key_create(&work_key, free) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_key_create failed");
        return NULL;
    }
    if (PyType_Ready(&RouteType) < 0 || PyType_Ready(&ContactRouteType) < 0 || PyType_Ready(&StepRouteType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Route", (PyObject *)&RouteType) < 0 ||
        PyModule_AddObjectRef(m, "ContactRoute", (PyObject *)&ContactRouteType) < 0 ||
        PyModule_AddObjectRef(m, "StepRoute", (PyObject *)&StepRouteType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
