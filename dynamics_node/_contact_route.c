/* _contact_route.c: the front of dn.contact_forward_dynamics (dynamics_node/algorithms/contact/forward_dynamics.py), a
 * callable like the Route fronts of _routes.c for one call of its own shape:
 *
 *   ContactRoute(addr, cache, prepare, result, names, slow)
 *   route(model, q, qd, tau, contacts, f_ext, rest_speed, data)
 *
 * Fast when f_ext and data are None, rest_speed is a float (finite, >= 0), the model may be read in
 * place (exactly the class of set_model, _direct True, loop_data None), q, qd, tau are native aligned
 * contiguous float64 vectors and contacts is a list or tuple: then its entry is looked up in the dict
 * `cache` under (model, *contacts), or made by prepare(model, contacts) on the first call (which stores
 * it there; None: the list does not pack); an entry is (body int64[k], point float64[3k], frame
 * float64[9k], mu float64[k], floats, ints): the packed contacts and the sizes of the kernel's scratch.
 * The kernel at addr (contact.contact_fd_c) runs on the thread's work buffer, followed by its scratch;
 * status 0 gives result(qdd, forces (k x 3), states) with states the tuple of names[code] (result: a
 * tuple subclass, contact.args.ContactResult). Anything else, a cache entry of another shape and any
 * status included, goes to slow(...) with the same arguments, which recomputes and names the problem.
 */
#define NO_IMPORT_ARRAY
#include "_fastcall.h"
#include <math.h>
#include <stddef.h>

typedef int64_t (*kc_t)(const int64_t *, const double *, const double *, int64_t, const double *, int64_t,
                        const double *, int64_t, const int64_t *, const double *, const double *, const double *,
                        int64_t, double, double *, double *, int64_t *, double *, int64_t, double *, int64_t,
                        int64_t *, int64_t);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    void *addr;
    PyObject *cache, *prepare, *result, *names, *slow;
} ContactRoute;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))
enum { CR_MODEL, CR_Q, CR_QD, CR_TAU, CR_CONTACTS, CR_FEXT, CR_REST, CR_DATA, CR_NARGS };
enum { E_BODY, E_POINT, E_FRAME, E_MU, E_FLOATS, E_INTS, E_N }; /* a cache entry */

PyObject *contacts_entry(PyObject *cache, PyObject *prepare, PyObject *model, PyObject *contacts) {
    Py_ssize_t k = PySequence_Fast_GET_SIZE(contacts);
    PyObject **items = PySequence_Fast_ITEMS(contacts);
    PyObject *key = PyTuple_New(k + 1);
    if (!key) return NULL;
    Py_INCREF(model);
    PyTuple_SET_ITEM(key, 0, model);
    for (Py_ssize_t j = 0; j < k; j++) {
        Py_INCREF(items[j]);
        PyTuple_SET_ITEM(key, j + 1, items[j]);
    }
    PyObject *e = PyDict_GetItemWithError(cache, key); /* borrowed */
    Py_DECREF(key);
    if (e || PyErr_Occurred()) return Py_XNewRef(e);
    e = PyObject_CallFunctionObjArgs(prepare, model, contacts, NULL);
    if (e == Py_None) Py_CLEAR(e);
    return e;
}

/* qdd, forces and the states of the kernel's answer as `result`, or NULL (an exception set) */
static PyObject *answer(ContactRoute *r, PyObject *qdd, PyObject *F, const int64_t *codes, Py_ssize_t k) {
    PyObject *states = PyTuple_New(k);
    if (!states) return NULL;
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *nm = PyTuple_GET_ITEM(r->names, codes[j]); /* codes checked by the caller */
        Py_INCREF(nm);
        PyTuple_SET_ITEM(states, j, nm);
    }
    PyTypeObject *t = (PyTypeObject *)r->result;
    PyObject *res = t->tp_alloc(t, 3);
    if (!res) {
        Py_DECREF(states);
        return NULL;
    }
    Py_INCREF(qdd);
    Py_INCREF(F);
    PyTuple_SET_ITEM(res, 0, qdd);
    PyTuple_SET_ITEM(res, 1, F);
    PyTuple_SET_ITEM(res, 2, states);
    return res;
}

static PyObject *contact_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    ContactRoute *r = (ContactRoute *)op;
    PyObject *const *a = args;
    if (kwnames || PyVectorcall_NARGS(nargsf) != CR_NARGS || a[CR_FEXT] != Py_None || a[CR_DATA] != Py_None ||
        !PyFloat_CheckExact(a[CR_REST]))
        goto slow;
    double rest = PyFloat_AS_DOUBLE(a[CR_REST]);
    PyObject *model = a[CR_MODEL], *contacts = a[CR_CONTACTS];
    if (!(rest >= 0.0 && isfinite(rest)) || Py_TYPE(model) != model_type || SLOT(model, off_direct) != Py_True ||
        SLOT(model, off_loop_data) != Py_None || !(PyList_CheckExact(contacts) || PyTuple_CheckExact(contacts)))
        goto slow;
    PyObject *mi = SLOT(model, off_kmi), *mf = SLOT(model, off_kmf);
    if (!mi || !mf || !model_ok(mi, mf) || !is_vec(a[CR_Q], NPY_DOUBLE) || !is_vec(a[CR_QD], NPY_DOUBLE) ||
        !is_vec(a[CR_TAU], NPY_DOUBLE))
        goto slow;
    PyObject *e = contacts_entry(r->cache, r->prepare, model, contacts);
    if (!e) {
        if (PyErr_Occurred()) return NULL;
        goto slow;
    }
    PyObject *res = NULL, *qdd = NULL, *F = NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(contacts), nf = -1, ni = -1;
    if (PyTuple_CheckExact(e) && PyTuple_GET_SIZE(e) == E_N && PyLong_CheckExact(PyTuple_GET_ITEM(e, E_FLOATS)) &&
        PyLong_CheckExact(PyTuple_GET_ITEM(e, E_INTS))) {
        nf = PyLong_AsSsize_t(PyTuple_GET_ITEM(e, E_FLOATS));
        ni = PyLong_AsSsize_t(PyTuple_GET_ITEM(e, E_INTS));
        if (PyErr_Occurred()) goto done;
    }
    PyObject *body = nf >= 0 ? PyTuple_GET_ITEM(e, E_BODY) : NULL;
    if (nf < 0 || ni < 0 || !vec_of(body, NPY_INT64, k) || !vec_of(PyTuple_GET_ITEM(e, E_POINT), NPY_DOUBLE, 3 * k) ||
        !vec_of(PyTuple_GET_ITEM(e, E_FRAME), NPY_DOUBLE, 9 * k) || !vec_of(PyTuple_GET_ITEM(e, E_MU), NPY_DOUBLE, k)) {
        res = Py_None; /* an entry of another shape: not served here */
        goto done;
    }
    const int64_t *h = (const int64_t *)PyArray_DATA((PyArrayObject *)mi);
    Py_ssize_t nw;
    double *w = thread_work_plus(h, nf + ni + k, &nw); /* [work | floats | ints | codes] */
    if (!w) goto done;
    npy_intp dq = (npy_intp)h[DN_H_NVT], dF[2] = {k, 3};
    qdd = PyArray_SimpleNew(1, &dq, NPY_DOUBLE);
    F = PyArray_SimpleNew(2, dF, NPY_DOUBLE);
    if (!qdd || !F) goto done;
    PyArrayObject *q = (PyArrayObject *)a[CR_Q], *qd = (PyArrayObject *)a[CR_QD], *tau = (PyArrayObject *)a[CR_TAU];
    int64_t *si = (int64_t *)(w + nw + nf), *codes = si + ni;
    int64_t st = ((kc_t)r->addr)(
        h, (const double *)PyArray_DATA((PyArrayObject *)mf), (const double *)PyArray_DATA(q), PyArray_DIM(q, 0),
        (const double *)PyArray_DATA(qd), PyArray_DIM(qd, 0), (const double *)PyArray_DATA(tau), PyArray_DIM(tau, 0),
        (const int64_t *)PyArray_DATA((PyArrayObject *)body),
        (const double *)PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(e, E_POINT)),
        (const double *)PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(e, E_FRAME)),
        (const double *)PyArray_DATA((PyArrayObject *)PyTuple_GET_ITEM(e, E_MU)), (int64_t)k, rest,
        (double *)PyArray_DATA((PyArrayObject *)qdd), (double *)PyArray_DATA((PyArrayObject *)F), codes, w,
        (int64_t)nw, w + nw, (int64_t)nf, si, (int64_t)ni);
    for (Py_ssize_t j = 0; st == 0 && j < k; j++)
        if (codes[j] < 0 || codes[j] >= PyTuple_GET_SIZE(r->names)) st = -1;
    res = st == 0 ? answer(r, qdd, F, codes, k) : Py_None; /* a status: the slow side names it */
done:
    Py_XDECREF(qdd);
    Py_XDECREF(F);
    Py_DECREF(e);
    if (res != Py_None) return res; /* the answer, or NULL with an exception */
slow:
    return PyObject_Vectorcall(r->slow, args, nargsf, kwnames);
}

static PyObject *contact_route_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *addr, *cache, *prepare, *result, *names, *slow;
    if (!PyArg_ParseTuple(args, "OO!OO!O!O:ContactRoute", &addr, &PyDict_Type, &cache, &prepare, &PyType_Type,
                          &result, &PyTuple_Type, &names, &slow))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)result, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "result must be a tuple subclass");
        return NULL;
    }
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(names); j++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(names, j))) {
            PyErr_SetString(PyExc_TypeError, "names must be a tuple of str");
            return NULL;
        }
    void *p = PyLong_AsVoidPtr(addr);
    if (!p) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "null kernel"), NULL);
    ContactRoute *r = (ContactRoute *)type->tp_alloc(type, 0);
    if (!r) return NULL;
    r->vectorcall = contact_call;
    r->addr = p;
    r->cache = Py_NewRef(cache);
    r->prepare = Py_NewRef(prepare);
    r->result = Py_NewRef(result);
    r->names = Py_NewRef(names);
    r->slow = Py_NewRef(slow);
    return (PyObject *)r;
}

static int contact_route_traverse(ContactRoute *r, visitproc visit, void *arg) {
    Py_VISIT(r->cache);
    Py_VISIT(r->prepare);
    Py_VISIT(r->result);
    Py_VISIT(r->names);
    Py_VISIT(r->slow);
    return 0;
}

static int contact_route_clear(ContactRoute *r) {
    Py_CLEAR(r->cache);
    Py_CLEAR(r->prepare);
    Py_CLEAR(r->result);
    Py_CLEAR(r->names);
    Py_CLEAR(r->slow);
    return 0;
}

static void contact_route_dealloc(ContactRoute *r) {
    PyObject_GC_UnTrack(r);
    contact_route_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

PyTypeObject ContactRouteType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dynamics_node._fastcall.ContactRoute",
    .tp_basicsize = sizeof(ContactRoute),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(ContactRoute, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = contact_route_new,
    .tp_traverse = (traverseproc)contact_route_traverse,
    .tp_clear = (inquiry)contact_route_clear,
    .tp_dealloc = (destructor)contact_route_dealloc,
    .tp_doc = "ContactRoute(addr, cache, prepare, result, names, slow): the front of contact_forward_dynamics",
};
