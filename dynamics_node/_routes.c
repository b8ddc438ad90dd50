/* _routes.c: the fronts of the one call route (dynamics_node/dispatch.py), Route and LinkRoute:
 * callables that take the controllers' call straight to a kernel's C callback and hand everything
 * else, every error included, to the Python side unchanged. See _fastcall.c for the module. */
#define NO_IMPORT_ARRAY
#include "_fastcall.h"
#include <stddef.h>

/* ------------------------------------------------------------------------------------ Route */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    void *addr;
    int nin, matrix;
    PyObject *fast; /* tuple: the extras' values that keep the fast path */
    PyObject *slow; /* callable(model, data, *arrays, *extras) */
} Route;

static PyObject *route_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Route *r = (Route *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nfast = PyTuple_GET_SIZE(r->fast);
    if (kwnames || nargs != 2 + r->nin + nfast || args[1] != Py_None) goto slow;
    for (Py_ssize_t k = 0; k < nfast; k++)
        if (args[2 + r->nin + k] != PyTuple_GET_ITEM(r->fast, k)) goto slow;
    PyObject *model = args[0];
    if (Py_TYPE(model) != model_type) goto slow;
    PyObject *direct = *(PyObject **)((char *)model + off_direct);
    if (direct != Py_True) goto slow;
    for (int k = 0; k < r->nin; k++)
        if (!is_vec(args[2 + k], NPY_DOUBLE)) goto slow;
    PyObject *mi = *(PyObject **)((char *)model + off_kmi), *mf = *(PyObject **)((char *)model + off_kmf);
    if (!mi || !mf) goto slow;
    if (!model_ok(mi, mf)) goto slow;
    PyObject *res = run(r->addr, r->nin, r->matrix, (PyArrayObject *)mi, (PyArrayObject *)mf, Py_None, args + 2);
    if (res == NULL) return NULL;
    if (PyArray_CheckExact(res)) return res;
    Py_DECREF(res); /* a status: the slow path recomputes and names the problem */
slow:
    return PyObject_Vectorcall(r->slow, args, nargsf, kwnames);
}

static PyObject *route_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *addr, *fast, *slow;
    int nin, matrix;
    if (!PyArg_ParseTuple(args, "OipO!O:Route", &addr, &nin, &matrix, &PyTuple_Type, &fast, &slow)) return NULL;
    if (nin != 1 && nin != 3) {
        PyErr_SetString(PyExc_ValueError, "nin must be 1 or 3");
        return NULL;
    }
    void *p = PyLong_AsVoidPtr(addr);
    if (!p) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "null kernel"), NULL);
    Route *r = (Route *)type->tp_alloc(type, 0);
    if (!r) return NULL;
    r->vectorcall = route_call;
    r->addr = p;
    r->nin = nin;
    r->matrix = matrix;
    Py_INCREF(fast);
    r->fast = fast;
    Py_INCREF(slow);
    r->slow = slow;
    return (PyObject *)r;
}

static int route_traverse(Route *r, visitproc visit, void *arg) {
    Py_VISIT(r->fast);
    Py_VISIT(r->slow);
    return 0;
}

static int route_clear(Route *r) {
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
    .tp_doc = "Route(addr, nin, matrix, fast, slow): the fast front of one public function",
};

/* -------------------------------------------------------------------------------- LinkRoute */
/* The front of a function of a link's point: route(model, data, a, b, point, link, *extras) with a
 * kernel of signature k3s (a, b, the point in body coordinates, the body's index as the float) that
 * writes `rows` x nvt outputs. Fast when, beyond Route's conditions, point is `origin` (the link
 * origin, by identity) and link is a str key of model._link_index: the body and the point are then
 * read from model.link_body and model.link_p in place. Anything else goes to slow unchanged. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    void *addr;
    int rows;
    PyObject *origin; /* the default point object */
    PyObject *fast;   /* tuple: the extras' values that keep the fast path */
    PyObject *slow;   /* callable(model, data, a, b, point, link, *extras) */
} LinkRoute;

enum { LR_MODEL, LR_DATA, LR_A, LR_B, LR_POINT, LR_LINK, LR_EXTRAS }; /* argument positions */

static PyObject *link_route_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    LinkRoute *r = (LinkRoute *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nfast = PyTuple_GET_SIZE(r->fast);
    if (kwnames || nargs != LR_EXTRAS + nfast || args[LR_DATA] != Py_None || args[LR_POINT] != r->origin ||
        !PyUnicode_CheckExact(args[LR_LINK]))
        goto slow;
    for (Py_ssize_t k = 0; k < nfast; k++)
        if (args[LR_EXTRAS + k] != PyTuple_GET_ITEM(r->fast, k)) goto slow;
    PyObject *model = args[LR_MODEL];
    if (Py_TYPE(model) != model_type || *(PyObject **)((char *)model + off_direct) != Py_True) goto slow;
    if (!is_vec(args[LR_A], NPY_DOUBLE) || !is_vec(args[LR_B], NPY_DOUBLE)) goto slow;
    PyObject *mi = *(PyObject **)((char *)model + off_kmi), *mf = *(PyObject **)((char *)model + off_kmf);
    PyObject *index = *(PyObject **)((char *)model + off_link_index);
    PyObject *lbody = *(PyObject **)((char *)model + off_link_body), *lp = *(PyObject **)((char *)model + off_link_p);
    if (!mi || !mf || !index || !lbody || !lp || !model_ok(mi, mf) || !PyDict_CheckExact(index) ||
        !is_vec(lbody, NPY_INT64) || !is_vec(lp, NPY_DOUBLE))
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
    npy_intp dims[2] = {r->rows, (npy_intp)h[1]}; /* rows x nvt */
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

static PyObject *link_route_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *addr, *origin, *fast, *slow;
    int rows;
    if (!PyArg_ParseTuple(args, "OiOO!O:LinkRoute", &addr, &rows, &origin, &PyTuple_Type, &fast, &slow)) return NULL;
    if (rows <= 0) {
        PyErr_SetString(PyExc_ValueError, "rows must be positive");
        return NULL;
    }
    void *p = PyLong_AsVoidPtr(addr);
    if (!p) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "null kernel"), NULL);
    LinkRoute *r = (LinkRoute *)type->tp_alloc(type, 0);
    if (!r) return NULL;
    r->vectorcall = link_route_call;
    r->addr = p;
    r->rows = rows;
    Py_INCREF(origin);
    r->origin = origin;
    Py_INCREF(fast);
    r->fast = fast;
    Py_INCREF(slow);
    r->slow = slow;
    return (PyObject *)r;
}

static int link_route_traverse(LinkRoute *r, visitproc visit, void *arg) {
    Py_VISIT(r->origin);
    Py_VISIT(r->fast);
    Py_VISIT(r->slow);
    return 0;
}

static int link_route_clear(LinkRoute *r) {
    Py_CLEAR(r->origin);
    Py_CLEAR(r->fast);
    Py_CLEAR(r->slow);
    return 0;
}

static void link_route_dealloc(LinkRoute *r) {
    PyObject_GC_UnTrack(r);
    link_route_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

PyTypeObject LinkRouteType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dynamics_node._fastcall.LinkRoute",
    .tp_basicsize = sizeof(LinkRoute),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(LinkRoute, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = link_route_new,
    .tp_traverse = (traverseproc)link_route_traverse,
    .tp_clear = (inquiry)link_route_clear,
    .tp_dealloc = (destructor)link_route_dealloc,
    .tp_doc = "LinkRoute(addr, rows, origin, fast, slow): the fast front of a function of a link's point",
};

