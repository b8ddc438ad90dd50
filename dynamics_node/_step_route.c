/* _step_route.c: the simulation step's fronts (dynamics_node/sim/step.py, sim/route.py): the
 * kernel sim.step.sim_step_c reached in one call.
 *
 *   StepRoute(addr, cache, prepare, result, slow)
 *   route(model, q, qd, tau, contacts, dt, state, f_ext, limits, restitution, speculative)
 *       dn.simulate_step's front. Fast when f_ext is None, the model may be read in place (exactly the class
 *       of set_model, _direct True, loop_data None), q, qd, tau are native aligned contiguous float64
 *       vectors, contacts is a list or tuple whose entry is in the dict `cache` under (model, *contacts) or
 *       made by prepare(model, contacts) (contacts_entry), dt a float or int, finite and > 0, state None or
 *       a C-contiguous float64 k x 3 array, limits None or a C-contiguous float64 nv x 2 array, restitution
 *       a float or int in [0, 1] and speculative True or False. An entry is (envi int64, envf float64, k,
 *       floats, ints): the contacts as an explicit environment (layout.SIM_*) and the sizes of the
 *       kernel's scratch before its contact problem. The kernel runs on the thread's work buffer followed
 *       by its scratch; status 0 gives result(q, qd, state, forces, qdd, limit_tau) (a tuple subclass,
 *       contact.soft.SimulationStep). Anything else, any status included, goes to slow(...) with the same
 *       arguments, which checks them, recomputes and names the problem.
 *   step_into(addr, model, q, qd, tau, fx, dt, envi, envf, state_in, limits, restitution, speculative, q1,
 *             qd1, qdd, limit_tau, state_out, F, P, info, floats, ints) -> int status
 *       the same kernel into the caller's arrays (the simulated robot, sim/world.py, whose environment
 *       and buffers are made once): every array checked for dtype, layout and the lengths the kernel cannot
 *       check itself (q1 nq, qd1 qdd limit_tau nv, P as long as F; fx: per body, or empty), a TypeError
 *       when one is not as it must be; the status is the kernel's (0: done).
 * The kernel's scratch holds the contact problem after `floats`, whose size it knows only once it has
 * selected the contacts: it returns SCRATCH with the floats it needs in info[INFO_NF], and the call is
 * made again with that much (and remembers it for the next calls).
 */
#define NO_IMPORT_ARRAY
#include "_fastcall.h"
#include <math.h>
#include <stddef.h>

#define SCRATCH_STATUS 900000000 /* sim_step.SCRATCH: status(SCRATCH_KIND, 0, 0) of _kernel_io.py */
#define INFO_N DN_SIM_INFO_N /* info = [NSEL, NF, a slot per contact] */
#define INFO_NF DN_SI_NF

typedef int64_t (*ks_t)(const int64_t *, const double *, const double *, int64_t, const double *, int64_t,
                        const double *, int64_t, const double *, int64_t, double, const int64_t *, int64_t,
                        const double *, int64_t, const double *, int64_t, const double *, int64_t, double, int64_t,
                        double *, double *, double *, double *, double *, int64_t, double *, double *, int64_t,
                        int64_t *, int64_t, double *, int64_t, double *, int64_t, int64_t *, int64_t);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    void *addr;
    Py_ssize_t more; /* floats of scratch the contact problems met so far needed beyond an entry's */
    PyObject *cache, *prepare, *result, *slow;
} StepRoute;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))
enum { S_MODEL, S_Q, S_QD, S_TAU, S_CONTACTS, S_DT, S_STATE, S_FEXT, S_LIMITS, S_E, S_SPEC, S_NARGS };
enum { E_ENVI, E_ENVF, E_K, E_FLOATS, E_INTS, E_N }; /* a cache entry */

/* *x = o when o is a float or an int that converts exactly enough (1), else 0 */
static int real_of(PyObject *o, double *x) {
    if (PyFloat_CheckExact(o)) {
        *x = PyFloat_AS_DOUBLE(o);
        return 1;
    }
    if (!PyLong_CheckExact(o)) return 0;
    *x = PyLong_AsDouble(o);
    if (*x == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* 1 when o is a rows x cols C-contiguous aligned native float64 array */
static int mat_of(PyObject *o, Py_ssize_t rows, Py_ssize_t cols) {
    if (!PyArray_CheckExact(o)) return 0;
    PyArrayObject *a = (PyArrayObject *)o;
    return PyArray_TYPE(a) == NPY_DOUBLE && PyArray_NDIM(a) == 2 && PyArray_DIM(a, 0) == rows &&
           PyArray_DIM(a, 1) == cols && PyArray_ISCARRAY_RO(a) && PyArray_ISNOTSWAPPED(a);
}

static const double *data(PyObject *o) { return (const double *)PyArray_DATA((PyArrayObject *)o); }
static double *wdata(PyObject *o) { return (double *)PyArray_DATA((PyArrayObject *)o); }
static int64_t len(PyObject *o) { return (int64_t)PyArray_SIZE((PyArrayObject *)o); }

/* The kernel on the thread's buffer: [work | floats + *more | ints | info (INFO_N + k) | P (3k, when P is
 * NULL)], called again with more floats when it says SCRATCH. info NULL: on the buffer too; fx NULL: none. */
static int64_t run_step(void *addr, const int64_t *h, const double *mf, PyObject *const *in, PyObject *fx,
                        double dt, PyObject *envi, PyObject *envf, const double *sin, int64_t nsin, const double *lim,
                        int64_t nlim, double e, int spec, double *const *out, double *sout, int64_t nsout,
                        double *F, double *P, int64_t nFP, int64_t *info, int64_t ninfo, Py_ssize_t nf,
                        Py_ssize_t ni, Py_ssize_t *more, int *failed) {
    int64_t st = SCRATCH_STATUS;
    Py_ssize_t k = nFP / 3;
    for (int tries = 0; tries < 3 && st == SCRATCH_STATUS; tries++) {
        Py_ssize_t ns = nf + *more, nw;
        Py_ssize_t own = (info ? 0 : INFO_N + k) + (P ? 0 : 3 * k);
        double *w = thread_work_plus(h, ns + ni + own, &nw);
        if (!w) {
            *failed = 1;
            return 0;
        }
        double *s = w + nw;
        int64_t *si = (int64_t *)(s + ns);
        int64_t *inf = info ? info : si + ni;
        double *p = P ? P : (double *)(si + ni + (info ? 0 : INFO_N + k));
        int64_t ninf = info ? ninfo : INFO_N + k;
        st = ((ks_t)addr)(h, mf, data(in[0]), len(in[0]), data(in[1]), len(in[1]), data(in[2]), len(in[2]),
                          fx ? data(fx) : w, fx ? len(fx) : 0, dt, (const int64_t *)PyArray_DATA((PyArrayObject *)envi),
                          len(envi), data(envf), len(envf),
                          sin ? sin : w, nsin, lim ? lim : w, nlim, e, spec, out[0], out[1], out[2], out[3], sout,
                          nsout, F, p, nFP, inf, ninf, w, (int64_t)nw, s, (int64_t)ns, si, (int64_t)ni);
        if (st == SCRATCH_STATUS) {
            if (inf[INFO_NF] <= ns) break; /* not a shortfall this can mend */
            *more = (Py_ssize_t)inf[INFO_NF] - nf;
        }
    }
    return st;
}

static PyObject *step_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    StepRoute *r = (StepRoute *)op;
    PyObject *const *a = args;
    double dt, e;
    if (kwnames || PyVectorcall_NARGS(nargsf) != S_NARGS || a[S_FEXT] != Py_None || !real_of(a[S_DT], &dt) ||
        !real_of(a[S_E], &e) || !(dt > 0.0 && isfinite(dt)) || !(e >= 0.0 && e <= 1.0) ||
        (a[S_SPEC] != Py_True && a[S_SPEC] != Py_False))
        goto slow;
    PyObject *model = a[S_MODEL], *contacts = a[S_CONTACTS];
    if (Py_TYPE(model) != model_type || SLOT(model, off_direct) != Py_True || SLOT(model, off_loop_data) != Py_None ||
        !(PyList_CheckExact(contacts) || PyTuple_CheckExact(contacts)))
        goto slow;
    PyObject *mi = SLOT(model, off_kmi), *mf = SLOT(model, off_kmf);
    if (!mi || !mf || !model_ok(mi, mf) || !is_vec(a[S_Q], NPY_DOUBLE) || !is_vec(a[S_QD], NPY_DOUBLE) ||
        !is_vec(a[S_TAU], NPY_DOUBLE))
        goto slow;
    const int64_t *h = (const int64_t *)PyArray_DATA((PyArrayObject *)mi);
    PyObject *e_ = contacts_entry(r->cache, r->prepare, model, contacts);
    if (!e_) {
        if (PyErr_Occurred()) return NULL;
        goto slow;
    }
    PyObject *res = Py_None, *o[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    Py_ssize_t k = -1, nf = -1, ni = -1;
    if (PyTuple_CheckExact(e_) && PyTuple_GET_SIZE(e_) == E_N && PyLong_CheckExact(PyTuple_GET_ITEM(e_, E_K)) &&
        PyLong_CheckExact(PyTuple_GET_ITEM(e_, E_FLOATS)) && PyLong_CheckExact(PyTuple_GET_ITEM(e_, E_INTS))) {
        k = PyLong_AsSsize_t(PyTuple_GET_ITEM(e_, E_K));
        nf = PyLong_AsSsize_t(PyTuple_GET_ITEM(e_, E_FLOATS));
        ni = PyLong_AsSsize_t(PyTuple_GET_ITEM(e_, E_INTS));
        if (PyErr_Occurred()) {
            res = NULL;
            goto done;
        }
    }
    PyObject *envi = k >= 0 ? PyTuple_GET_ITEM(e_, E_ENVI) : NULL, *envf = k >= 0 ? PyTuple_GET_ITEM(e_, E_ENVF) : NULL;
    npy_intp nvt = (npy_intp)h[DN_H_NVT], nqt = (npy_intp)h[DN_H_NQT];
    if (k < 0 || nf < 0 || ni < 0 || k != PySequence_Fast_GET_SIZE(contacts) || !is_vec(envi, NPY_INT64) ||
        !is_vec(envf, NPY_DOUBLE) || (a[S_STATE] != Py_None && !mat_of(a[S_STATE], k, 3)) ||
        (a[S_LIMITS] != Py_None && !mat_of(a[S_LIMITS], nvt, 2)))
        goto done; /* an entry of another shape, a state or limits of another: the slow side */
    npy_intp dk[2] = {k, 3};
    o[0] = PyArray_SimpleNew(1, &nqt, NPY_DOUBLE);
    for (int j = 1; j < 4; j++) o[j] = PyArray_SimpleNew(1, &nvt, NPY_DOUBLE);
    o[4] = PyArray_SimpleNew(2, dk, NPY_DOUBLE);
    o[5] = PyArray_SimpleNew(2, dk, NPY_DOUBLE);
    for (int j = 0; j < 6; j++)
        if (!o[j]) {
            res = NULL;
            goto done;
        }
    double *out[4] = {wdata(o[0]), wdata(o[1]), wdata(o[2]), wdata(o[3])};
    int failed = 0;
    int64_t st = run_step(r->addr, h, data(mf), a + S_Q, NULL, dt, envi, envf,
                          a[S_STATE] != Py_None ? data(a[S_STATE]) : NULL, a[S_STATE] != Py_None ? 3 * k : 0,
                          a[S_LIMITS] != Py_None ? data(a[S_LIMITS]) : NULL, a[S_LIMITS] != Py_None ? 2 * nvt : 0, e,
                          a[S_SPEC] == Py_True, out, wdata(o[4]), 3 * k, wdata(o[5]), NULL, 3 * k, NULL, 0, nf, ni,
                          &r->more, &failed);
    if (failed) {
        res = NULL;
        goto done;
    }
    if (st != 0) goto done; /* a status: the slow side names it */
    PyTypeObject *t = (PyTypeObject *)r->result;
    res = t->tp_alloc(t, 6);
    if (res) { /* q, qd, state, forces, qdd, limit_tau (contact.soft.SimulationStep) */
        PyObject *order[6] = {o[0], o[1], o[4], o[5], o[2], o[3]};
        for (int j = 0; j < 6; j++) PyTuple_SET_ITEM(res, j, Py_NewRef(order[j]));
    }
done:
    for (int j = 0; j < 6; j++) Py_XDECREF(o[j]);
    Py_DECREF(e_);
    if (res != Py_None) return res; /* the answer, or NULL with an exception */
slow:
    return PyObject_Vectorcall(r->slow, args, nargsf, kwnames);
}

/* step_into's arguments, in order */
enum { I_ADDR, I_MODEL, I_Q, I_QD, I_TAU, I_FX, I_DT, I_ENVI, I_ENVF, I_SIN, I_LIM, I_E, I_SPEC, I_Q1, I_QD1,
       I_QDD, I_LTAU, I_SOUT, I_F, I_P, I_INFO, I_FLOATS, I_INTS, I_NARGS };

static int writable(PyObject *o, int typenum) {
    return is_vec(o, typenum) && PyArray_ISWRITEABLE((PyArrayObject *)o);
}

PyObject *step_into(PyObject *self, PyObject *const *a, Py_ssize_t nargs) {
    static Py_ssize_t more = 0; /* as StepRoute.more, for every caller of step_into (the GIL serialises them) */
    if (nargs != I_NARGS) {
        PyErr_SetString(PyExc_TypeError, "step_into takes 23 arguments (see _step_route.c)");
        return NULL;
    }
    void *addr = PyLong_AsVoidPtr(a[I_ADDR]);
    if (!addr) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "null kernel"), NULL);
    double dt, e;
    Py_ssize_t nf = PyLong_AsSsize_t(a[I_FLOATS]), ni = PyLong_AsSsize_t(a[I_INTS]);
    if (PyErr_Occurred()) return NULL;
    PyObject *model = a[I_MODEL];
    PyObject *mi = Py_TYPE(model) == model_type && SLOT(model, off_direct) == Py_True ? SLOT(model, off_kmi) : NULL;
    PyObject *mf = mi ? SLOT(model, off_kmf) : NULL;
    if (!mi || !mf || !model_ok(mi, mf) || !real_of(a[I_DT], &dt) || !real_of(a[I_E], &e) || nf < 0 || ni < 0 ||
        (a[I_SPEC] != Py_True && a[I_SPEC] != Py_False)) {
        PyErr_SetString(PyExc_TypeError, "step_into: a model read in place (no mimic joints), float dt and "
                                         "restitution, bool speculative, sizes >= 0");
        return NULL;
    }
    const int64_t *h = (const int64_t *)PyArray_DATA((PyArrayObject *)mi);
    Py_ssize_t nvt = (Py_ssize_t)h[DN_H_NVT], nqt = (Py_ssize_t)h[DN_H_NQT];
    int ok = is_vec(a[I_Q], NPY_DOUBLE) && is_vec(a[I_QD], NPY_DOUBLE) && is_vec(a[I_TAU], NPY_DOUBLE) &&
             is_vec(a[I_FX], NPY_DOUBLE) && is_vec(a[I_ENVI], NPY_INT64) && is_vec(a[I_ENVF], NPY_DOUBLE) &&
             is_vec(a[I_SIN], NPY_DOUBLE) &&
             is_vec(a[I_LIM], NPY_DOUBLE) && writable(a[I_Q1], NPY_DOUBLE) && len(a[I_Q1]) == nqt &&
             writable(a[I_SOUT], NPY_DOUBLE) && writable(a[I_F], NPY_DOUBLE) && writable(a[I_P], NPY_DOUBLE) &&
             len(a[I_P]) == len(a[I_F]) && writable(a[I_INFO], NPY_INT64);
    for (int j = I_QD1; ok && j <= I_LTAU; j++) ok = writable(a[j], NPY_DOUBLE) && len(a[j]) == nvt;
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, "step_into: contiguous native arrays (float64, envi and info int64; "
                                         "outputs writeable, q1 nq, qd1 qdd limit_tau nv, P as long as F)");
        return NULL;
    }
    double *out[4] = {wdata(a[I_Q1]), wdata(a[I_QD1]), wdata(a[I_QDD]), wdata(a[I_LTAU])};
    int failed = 0;
    int64_t st = run_step(addr, h, data(mf), a + I_Q, a[I_FX], dt, a[I_ENVI], a[I_ENVF], data(a[I_SIN]), len(a[I_SIN]),
                          data(a[I_LIM]), len(a[I_LIM]), e, a[I_SPEC] == Py_True, out, wdata(a[I_SOUT]),
                          len(a[I_SOUT]), wdata(a[I_F]), wdata(a[I_P]), len(a[I_F]),
                          (int64_t *)PyArray_DATA((PyArrayObject *)a[I_INFO]), len(a[I_INFO]), nf, ni, &more, &failed);
    if (failed) return NULL;
    return PyLong_FromLongLong((long long)st);
}

static PyObject *step_route_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *addr, *cache, *prepare, *result, *slow;
    if (!PyArg_ParseTuple(args, "OO!OO!O:StepRoute", &addr, &PyDict_Type, &cache, &prepare, &PyType_Type, &result,
                          &slow))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)result, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "result must be a tuple subclass");
        return NULL;
    }
    void *p = PyLong_AsVoidPtr(addr);
    if (!p) return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "null kernel"), NULL);
    StepRoute *r = (StepRoute *)type->tp_alloc(type, 0);
    if (!r) return NULL;
    r->vectorcall = step_call;
    r->addr = p;
    r->more = 0;
    r->cache = Py_NewRef(cache);
    r->prepare = Py_NewRef(prepare);
    r->result = Py_NewRef(result);
    r->slow = Py_NewRef(slow);
    return (PyObject *)r;
}

static int step_route_traverse(StepRoute *r, visitproc visit, void *arg) {
    Py_VISIT(r->cache);
    Py_VISIT(r->prepare);
    Py_VISIT(r->result);
    Py_VISIT(r->slow);
    return 0;
}

static int step_route_clear(StepRoute *r) {
    Py_CLEAR(r->cache);
    Py_CLEAR(r->prepare);
    Py_CLEAR(r->result);
    Py_CLEAR(r->slow);
    return 0;
}

static void step_route_dealloc(StepRoute *r) {
    PyObject_GC_UnTrack(r);
    step_route_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

PyTypeObject StepRouteType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dynamics_node._fastcall.StepRoute",
    .tp_basicsize = sizeof(StepRoute),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(StepRoute, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = step_route_new,
    .tp_traverse = (traverseproc)step_route_traverse,
    .tp_clear = (inquiry)step_route_clear,
    .tp_dealloc = (destructor)step_route_dealloc,
    .tp_doc = "StepRoute(addr, cache, prepare, result, slow): the front of dn.simulate_step",
};
