/* _fastcall: the cheapest possible Python entry into the compiled kernels.
 *
 * A numba dispatcher spends about 0.05 us per argument working out types before it calls the
 * machine code; for a 7-DoF arm that is as much as the whole gravity computation. The kernels are
 * also exported as numba C callbacks (`cfunc`, see algorithms/_entry.py); this module calls them
 * through their addresses after checking the arrays in a few instructions. Anything that is not a
 * C-contiguous float64 (int64 for the model) 1-D ndarray gets NotImplemented back, and the Python
 * wrapper takes the ordinary (converting) route. No algorithm lives here.
 *
 *   call1(addr, mi, mf, nout, a)           -> ndarray (nout,) | int status | NotImplemented
 *   call1m(addr, mi, mf, n, a)             -> ndarray (n, n)  | int status | NotImplemented
 *   call3(addr, mi, mf, nout, a, b, c)     -> ndarray (nout,) | int status | NotImplemented
 *   call3s(addr, mi, mf, nout, a, b, c, s) -> the same with a float s passed after c
 *   set_layout(work_body, work_dof, work_extra)   the work-array size rule of layout.py
 * where the kernel at addr is int64 f(mi*, mf*, a*, len(a)[, b*, len(b), c*, len(c)], out*, work*,
 * len(work)) and a non-zero return is a status code the Python side turns into an error message.
 * The work array is a per-thread buffer kept here (grown on demand, never shared between threads):
 * allocating it in compiled code on every call cost as much as a small arm's whole computation.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>

typedef int64_t (*k1_t)(const int64_t *, const double *, const double *, int64_t, double *, double *, int64_t);
typedef int64_t (*k3_t)(const int64_t *, const double *, const double *, int64_t, const double *, int64_t,
                        const double *, int64_t, double *, double *, int64_t);
typedef int64_t (*k3s_t)(const int64_t *, const double *, const double *, int64_t, const double *, int64_t,
                         const double *, int64_t, double, double *, double *, int64_t);

static Py_ssize_t work_body = -1, work_dof = 0, work_extra = 0;
static _Thread_local double *tls_work = NULL;
static _Thread_local Py_ssize_t tls_len = 0;

/* The calling thread's work buffer for a model (mi: nb, nvt first), or NULL with an exception set. */
static double *work_for(PyObject *mi, Py_ssize_t *len) {
    const int64_t *h = (const int64_t *)PyArray_DATA((PyArrayObject *)mi);
    if (work_body < 0) {
        PyErr_SetString(PyExc_RuntimeError, "_fastcall.set_layout was not called");
        return NULL;
    }
    Py_ssize_t need = work_body * (Py_ssize_t)h[0] + work_dof * (Py_ssize_t)h[1] + work_extra;
    if (need > tls_len) {
        double *p = (double *)PyMem_RawRealloc(tls_work, (size_t)need * sizeof(double));
        if (!p) {
            PyErr_NoMemory();
            return NULL;
        }
        tls_work = p;
        tls_len = need;
    }
    *len = tls_len;
    return tls_work;
}

static inline int is_vec(PyObject *o, int typenum) {
    if (!PyArray_CheckExact(o)) return 0;
    PyArrayObject *a = (PyArrayObject *)o;
    return PyArray_TYPE(a) == typenum && PyArray_NDIM(a) == 1 && PyArray_IS_C_CONTIGUOUS(a);
}

static inline int model_ok(PyObject *const *args) {
    return is_vec(args[1], NPY_INT64) && is_vec(args[2], NPY_DOUBLE);
}

static PyObject *finish(PyObject *out, int64_t st) {
    if (st) {
        Py_DECREF(out);
        return PyLong_FromLongLong((long long)st);
    }
    return out;
}

static PyObject *call1_impl(PyObject *const *args, Py_ssize_t nargs, int matrix) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "expected (addr, mi, mf, n, a)");
        return NULL;
    }
    void *addr = PyLong_AsVoidPtr(args[0]);
    if (!addr) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "null kernel"), NULL);
    if (!model_ok(args) || !is_vec(args[4], NPY_DOUBLE)) Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t n = PyLong_AsSsize_t(args[3]);
    if (n < 0) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "negative size"), NULL);
    npy_intp dims[2] = {n, n};
    PyObject *out = PyArray_SimpleNew(matrix ? 2 : 1, dims, NPY_DOUBLE);
    if (!out) return NULL;
    Py_ssize_t nw;
    double *w = work_for(args[1], &nw);
    if (!w) {
        Py_DECREF(out);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)args[4];
    int64_t st = ((k1_t)addr)((const int64_t *)PyArray_DATA((PyArrayObject *)args[1]),
                              (const double *)PyArray_DATA((PyArrayObject *)args[2]),
                              (const double *)PyArray_DATA(a), (int64_t)PyArray_DIM(a, 0),
                              (double *)PyArray_DATA((PyArrayObject *)out), w, (int64_t)nw);
    return finish(out, st);
}

static PyObject *call1(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return call1_impl(args, nargs, 0);
}

static PyObject *call1m(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return call1_impl(args, nargs, 1);
}

static PyObject *call3_impl(PyObject *const *args, Py_ssize_t nargs, int scalar) {
    if (nargs != 7 + scalar) {
        PyErr_SetString(PyExc_TypeError, scalar ? "expected (addr, mi, mf, n, a, b, c, s)" : "expected (addr, mi, mf, n, a, b, c)");
        return NULL;
    }
    double x = 0.0;
    if (scalar) {
        if (!PyFloat_CheckExact(args[7])) Py_RETURN_NOTIMPLEMENTED;
        x = PyFloat_AS_DOUBLE(args[7]);
    }
    void *addr = PyLong_AsVoidPtr(args[0]);
    if (!addr) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "null kernel"), NULL);
    if (!model_ok(args) || !is_vec(args[4], NPY_DOUBLE) || !is_vec(args[5], NPY_DOUBLE) ||
        !is_vec(args[6], NPY_DOUBLE))
        Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t n = PyLong_AsSsize_t(args[3]);
    if (n < 0) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "negative size"), NULL);
    npy_intp dims[1] = {n};
    PyObject *out = PyArray_SimpleNew(1, dims, NPY_DOUBLE);
    if (!out) return NULL;
    Py_ssize_t nw;
    double *w = work_for(args[1], &nw);
    if (!w) {
        Py_DECREF(out);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)args[4], *b = (PyArrayObject *)args[5], *c = (PyArrayObject *)args[6];
    int64_t st;
    if (scalar)
        st = ((k3s_t)addr)((const int64_t *)PyArray_DATA((PyArrayObject *)args[1]),
                           (const double *)PyArray_DATA((PyArrayObject *)args[2]),
                           (const double *)PyArray_DATA(a), (int64_t)PyArray_DIM(a, 0),
                           (const double *)PyArray_DATA(b), (int64_t)PyArray_DIM(b, 0),
                           (const double *)PyArray_DATA(c), (int64_t)PyArray_DIM(c, 0), x,
                           (double *)PyArray_DATA((PyArrayObject *)out), w, (int64_t)nw);
    else
        st = ((k3_t)addr)((const int64_t *)PyArray_DATA((PyArrayObject *)args[1]),
                              (const double *)PyArray_DATA((PyArrayObject *)args[2]),
                              (const double *)PyArray_DATA(a), (int64_t)PyArray_DIM(a, 0),
                              (const double *)PyArray_DATA(b), (int64_t)PyArray_DIM(b, 0),
                              (const double *)PyArray_DATA(c), (int64_t)PyArray_DIM(c, 0),
                              (double *)PyArray_DATA((PyArrayObject *)out), w, (int64_t)nw);
    return finish(out, st);
}

static PyObject *call3(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return call3_impl(args, nargs, 0);
}

static PyObject *call3s(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return call3_impl(args, nargs, 1);
}

static PyObject *set_layout(PyObject *self, PyObject *args) {
    Py_ssize_t b, d, e;
    if (!PyArg_ParseTuple(args, "nnn", &b, &d, &e)) return NULL;
    if (b <= 0 || d < 0 || e < 0) {
        PyErr_SetString(PyExc_ValueError, "work sizes must be positive");
        return NULL;
    }
    work_body = b;
    work_dof = d;
    work_extra = e;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_layout", set_layout, METH_VARARGS, "set_layout(work_body, work_dof, work_extra)"},
    {"call1", (PyCFunction)(void (*)(void))call1, METH_FASTCALL, "call1(addr, mi, mf, n, a)"},
    {"call1m", (PyCFunction)(void (*)(void))call1m, METH_FASTCALL, "call1m(addr, mi, mf, n, a)"},
    {"call3", (PyCFunction)(void (*)(void))call3, METH_FASTCALL, "call3(addr, mi, mf, n, a, b, c)"},
    {"call3s", (PyCFunction)(void (*)(void))call3s, METH_FASTCALL, "call3s(addr, mi, mf, n, a, b, c, s)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_fastcall",
                                    "Cheap calls into the compiled dynamics kernels.", -1, methods};

PyMODINIT_FUNC PyInit__fastcall(void) {
    import_array();
    return PyModule_Create(&moddef);
}
