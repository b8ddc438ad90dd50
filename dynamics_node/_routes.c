/* _routes.c: the fronts of the one call route (dynamics_node/dispatch.py): Route objects, callables
 * that take the controllers' call straight to a kernel's C callback and hand everything else, every
 * error included, to the Python side unchanged. See _fastcall.c for the module.
 *
 * Two modes of one type:
 *   vector route  route(model, data, a[, b, c], *extras), kernel k1_t or k3_t (run() in _fastcall.c); with
 *                 mimic, models with mimic joints too (user coordinates, `extra` floats of scratch);
 *   link route    route(model, data, a, b, point, link, *extras), kernel k3s_t taking (a, b, the point
 *                 in body coordinates, the body's index as the float) and writing rows x nvt: fast
 *                 also needs point to be `origin` (the link origin, by identity) and link a str key
 *                 of model._link_index; the body and the point are read from model.link_body and
 *                 model.link_p in place;
 *   matrices route route(model, data, a[, b, c], *extras) with nout > 1 or a scratch rule `extra`:
 *                 a kernel k1_t or k3_t writing nout nvt x nvt matrices one after the other into one
 *                 block (returned as one matrix, or a tuple of nout views of the block), with a work
 *                 array of the model's length plus extra = (per body, per dof, per dof squared,
 *                 constant) floats of scratch (the derivatives of the dynamics: two or three results),
 *                 nv x nv in user coordinates (mi[3]); with mimic, models with mimic joints take it too. */
#define NO_IMPORT_ARRAY
#include "_fastcall.h"
#include <stddef.h>

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    void *addr;
    int nin, matrix;
    int rows;         /* a link route's output rows */
    int nout;         /* a matrices route's outputs (0: not a matrices route) */
    int mimic;        /* a route whose kernel takes models with mimic joints (user coordinates; nv = mi[3] sizes the
                       * results); a vector route's extra is then that kernel's scratch for them */
    Py_ssize_t extra[4]; /* a matrices route's scratch: per body, per dof, per dof squared, constant */
    PyObject *origin; /* a link route's default point; NULL for a vector route */
    PyObject *fast;   /* tuple: the extras' values that keep the fast path */
    PyObject *slow;   /* callable with the route's own arguments */
} Route;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* 1 when the call's extras are (identically) the route's fast values and the model may be read in
 * place (exactly the class of set_model, _direct True or the route takes mimic joints, its packed arrays
 * usable): mi and mf set. */
static int fast_call(Route *r, PyObject *model, PyObject *const *extras, PyObject **mi, PyObject **mf) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(r->fast); k++)
        if (extras[k] != PyTuple_GET_ITEM(r->fast, k)) return 0;
    if (Py_TYPE(model) != model_type || (SLOT(model, off_direct) != Py_True && !r->mimic)) return 0;
    *mi = SLOT(model, off_kmi);
    *mf = SLOT(model, off_kmf);
    return *mi && *mf && model_ok(*mi, *mf);
}

/* 1 when a vector or matrices route's call (model, None, the nin arrays, the extras) may take the kernel:
 * no keywords, no data, the fast extras, a model read in place and native float64 vectors; mi, mf set. */
static int fast_args(Route *r, PyObject *const *args, size_t nargsf, PyObject *kwnames, PyObject **mi,
                     PyObject **mf) {
    if (kwnames || PyVectorcall_NARGS(nargsf) != 2 + r->nin + PyTuple_GET_SIZE(r->fast) || args[1] != Py_None ||
        !fast_call(r, args[0], args + 2 + r->nin, mi, mf))
        return 0;
    for (int k = 0; k < r->nin; k++)
        if (!is_vec(args[2 + k], NPY_DOUBLE)) return 0;
    return 1;
}

static PyObject *vector_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Route *r = (Route *)op;
    PyObject *mi, *mf;
    if (!fast_args(r, args, nargsf, kwnames, &mi, &mf)) goto slow;
    PyObject *res = run(r->addr, r->nin, r->matrix, (PyArrayObject *)mi, (PyArrayObject *)mf, Py_None, args + 2,
                        r->mimic ? r->extra : NULL);
    if (res == NULL) return NULL;
    if (PyArray_CheckExact(res)) return res;
    Py_DECREF(res); /* a status: the slow path recomputes and names the problem */
slow:
    return PyObject_Vectorcall(r->slow, args, nargsf, kwnames);
}

/* The kernel behind a matrices route on checked arrays: the result (one ndarray, or a tuple of nout views
 * of one block), Py_None for a status or an overflow (the slow path recomputes and names it), or NULL with
 * an exception set. */
static PyObject *run_matrices(Route *r, PyArrayObject *mi, PyArrayObject *mf, PyObject *const *x) {
    const int64_t *h = (const int64_t *)PyArray_DATA(mi);
    npy_intp n = (npy_intp)h[DN_H_NVU]; /* nv (the results), below nvt with mimic joints */
    Py_ssize_t nw, extra = DN_SCRATCH_SIZE(r->extra, h);
    double *w = thread_work_plus(h, extra, &nw);
    if (!w) return NULL;
    npy_intp dims[3] = {r->nout, n, n};
    PyObject *block = PyArray_SimpleNew(r->nout > 1 ? 3 : 2, r->nout > 1 ? dims : dims + 1, NPY_DOUBLE);
    if (!block) return NULL;
    double *o = (double *)PyArray_DATA((PyArrayObject *)block);
    PyArrayObject *a = (PyArrayObject *)x[0];
    int64_t st;
    if (r->nin == 1) {
        st = ((k1_t)r->addr)(h, (const double *)PyArray_DATA(mf), (const double *)PyArray_DATA(a),
                             (int64_t)PyArray_DIM(a, 0), o, w, (int64_t)(nw + extra));
    } else {
        PyArrayObject *b = (PyArrayObject *)x[1], *c = (PyArrayObject *)x[2];
        st = ((k3_t)r->addr)(h, (const double *)PyArray_DATA(mf), (const double *)PyArray_DATA(a),
                             (int64_t)PyArray_DIM(a, 0), (const double *)PyArray_DATA(b), (int64_t)PyArray_DIM(b, 0),
                             (const double *)PyArray_DATA(c), (int64_t)PyArray_DIM(c, 0), o, w,
                             (int64_t)(nw + extra));
    }
    if (st || !all_finite(o, r->nout * n * n)) {
        Py_DECREF(block);
        Py_RETURN_NONE;
    }
    if (r->nout == 1) return block;
    PyObject *res = PyTuple_New(r->nout);
    if (!res) {
        Py_DECREF(block);
        return NULL;
    }
    for (int k = 0; k < r->nout; k++) {
        PyArray_Descr *d = PyArray_DescrFromType(NPY_DOUBLE);
        PyObject *v = PyArray_NewFromDescr(&PyArray_Type, d, 2, dims + 1, NULL, o + k * n * n,
                                           NPY_ARRAY_CARRAY, NULL);
        if (!v) {
            Py_DECREF(res);
            Py_DECREF(block);
            return NULL;
        }
        Py_INCREF(block);
        if (PyArray_SetBaseObject((PyArrayObject *)v, block) < 0) {
            Py_DECREF(v);
            Py_DECREF(res);
            Py_DECREF(block);
            return NULL;
        }
        PyTuple_SET_ITEM(res, k, v);
    }
    Py_DECREF(block);
    return res;
}

static PyObject *matrices_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Route *r = (Route *)op;
    PyObject *mi, *mf;
    if (!fast_args(r, args, nargsf, kwnames, &mi, &mf)) goto slow;
    PyObject *res = run_matrices(r, (PyArrayObject *)mi, (PyArrayObject *)mf, args + 2);
    if (res != Py_None) return res;
    Py_DECREF(res);
slow:
    return PyObject_Vectorcall(r->slow, args, nargsf, kwnames);
}

enum { LR_MODEL, LR_DATA, LR_A, LR_B, LR_POINT, LR_LINK, LR_EXTRAS }; /* a link route's arguments */

static PyObject *link_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Route *r = (Route *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *mi, *mf;
    if (kwnames || nargs != LR_EXTRAS + PyTuple_GET_SIZE(r->fast) || args[LR_DATA] != Py_None ||
        args[LR_POINT] != r->origin || !PyUnicode_CheckExact(args[LR_LINK]) ||
        !fast_call(r, args[LR_MODEL], args + LR_EXTRAS, &mi, &mf) || !is_vec(args[LR_A], NPY_DOUBLE) ||
        !is_vec(args[LR_B], NPY_DOUBLE))
        goto slow;
    PyObject *index = SLOT(args[LR_MODEL], off_link_index), *lbody = SLOT(args[LR_MODEL], off_link_body),
             *lp = SLOT(args[LR_MODEL], off_link_p);
    if (!index || !lbody || !lp || !PyDict_CheckExact(index) || !is_vec(lbody, NPY_INT64) || !is_vec(lp, NPY_DOUBLE))
        goto slow;
    PyObject *kobj = PyDict_GetItemWithError(index, args[LR_LINK]); /* borrowed */
    if (!kobj) {
        if (PyErr_Occurred()) return NULL;
        goto slow; /* an unknown link: the slow side names it */
    }
    Py_ssize_t k = PyLong_AsSsize_t(kobj);
    if (k == -1 && PyErr_Occurred()) return NULL;
    if (k < 0 || k >= PyArray_DIM((PyArrayObject *)lbody, 0) || 3 * k + 3 > PyArray_DIM((PyArrayObject *)lp, 0))
        goto slow;
    const int64_t *h = (const int64_t *)PyArray_DATA((PyArrayObject *)mi);
    Py_ssize_t nw;
    double *w = thread_work(h, &nw);
    if (!w) return NULL;
    npy_intp dims[2] = {r->rows, (npy_intp)h[DN_H_NVT]}; /* rows x nvt */
    PyObject *out = PyArray_SimpleNew(2, dims, NPY_DOUBLE);
    if (!out) return NULL;
    double *o = (double *)PyArray_DATA((PyArrayObject *)out);
    PyArrayObject *a = (PyArrayObject *)args[LR_A], *b = (PyArrayObject *)args[LR_B];
    double body = (double)((const int64_t *)PyArray_DATA((PyArrayObject *)lbody))[k];
    int64_t st = ((k3s_t)r->addr)(h, (const double *)PyArray_DATA((PyArrayObject *)mf),
                                  (const double *)PyArray_DATA(a), (int64_t)PyArray_DIM(a, 0),
                                  (const double *)PyArray_DATA(b), (int64_t)PyArray_DIM(b, 0),
                                  (const double *)PyArray_DATA((PyArrayObject *)lp) + 3 * k, 3, body, o, w, (int64_t)nw);
    if (st == 0 && all_finite(o, dims[0] * dims[1])) return out;
    Py_DECREF(out); /* a status or an overflow: the slow path recomputes and names the problem */
slow:
    return PyObject_Vectorcall(r->slow, args, nargsf, kwnames);
}

static PyObject *route_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *addr, *fast, *slow, *origin = NULL;
    int nin, matrix, rows = 0, nout = 0, mimic = 0;
    Py_ssize_t extra[4] = {0, 0, 0, 0};
    if (!PyArg_ParseTuple(args, "OipO!O|iOi(nnnn)p:Route", &addr, &nin, &matrix, &PyTuple_Type, &fast, &slow, &rows,
                          &origin, &nout, extra, extra + 1, extra + 2, extra + 3, &mimic))
        return NULL;
    if (origin == Py_None) origin = NULL;
    if (origin ? (nin != 2 || rows <= 0) : (nin != 1 && nin != 3)) {
        PyErr_SetString(PyExc_ValueError, "nin must be 1 or 3 (a link route: 2, with rows > 0 and origin)");
        return NULL;
    }
    if (nout < 0 || (nout && (origin || !matrix)) || (mimic && origin) || extra[0] < 0 || extra[1] < 0 ||
        extra[2] < 0 || extra[3] < 0) {
        PyErr_SetString(PyExc_ValueError, "a matrices route takes matrix=True, no origin, nout >= 1, extra >= 0 "
                                          "(and a link route no mimic)");
        return NULL;
    }
    void *p = PyLong_AsVoidPtr(addr);
    if (!p) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "null kernel"), NULL);
    Route *r = (Route *)type->tp_alloc(type, 0);
    if (!r) return NULL;
    r->vectorcall = origin ? link_call : (nout ? matrices_call : vector_call);
    r->nout = nout;
    r->mimic = mimic;
    memcpy(r->extra, extra, sizeof extra);
    r->addr = p;
    r->nin = nin;
    r->matrix = matrix;
    r->rows = rows;
    Py_XINCREF(origin);
    r->origin = origin;
    Py_INCREF(fast);
    r->fast = fast;
    Py_INCREF(slow);
    r->slow = slow;
    return (PyObject *)r;
}

static int route_traverse(Route *r, visitproc visit, void *arg) {
    Py_VISIT(r->origin);
    Py_VISIT(r->fast);
    Py_VISIT(r->slow);
    return 0;
}

static int route_clear(Route *r) {
    Py_CLEAR(r->origin);
    Py_CLEAR(r->fast);
    Py_CLEAR(r->slow);
    return 0;
}

static void route_dealloc(Route *r) {
    PyObject_GC_UnTrack(r);
    route_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

PyTypeObject RouteType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dynamics_node._fastcall.Route",
    .tp_basicsize = sizeof(Route),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Route, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = route_new,
    .tp_traverse = (traverseproc)route_traverse,
    .tp_clear = (inquiry)route_clear,
    .tp_dealloc = (destructor)route_dealloc,
    .tp_doc = "Route(addr, nin, matrix, fast, slow[, rows, origin[, nout, extra[, mimic]]]): the fast front of one "
              "public function (with rows and origin: of a link's point; with nout and extra: of nout matrices, "
              "user nv x nv, of models with mimic joints too when mimic)",
};
