/* _fastcall.h: what the sources of dynamics_node._fastcall share (_fastcall.c: the work buffer, the
 * kernel calls, the module; _routes.c: the Route fronts; _contact_route.c: the front of the contact
 * forward dynamics; _step_route.c: the simulation step's). See _fastcall.c. */
#ifndef DYNAMICS_FASTCALL_H
#define DYNAMICS_FASTCALL_H
#define PY_ARRAY_UNIQUE_SYMBOL dynamics_fastcall_ARRAY_API
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t (*k1_t)(const int64_t *, const double *, const double *, int64_t, double *, double *, int64_t);
typedef int64_t (*k3_t)(const int64_t *, const double *, const double *, int64_t, const double *, int64_t,
                        const double *, int64_t, double *, double *, int64_t);
typedef int64_t (*k3s_t)(const int64_t *, const double *, const double *, int64_t, const double *, int64_t,
                         const double *, int64_t, double, double *, double *, int64_t);

#include "_layout.h" /* layout.py's numbers and _kernel_io.py's status codes, DN_* */

#define OVERFLOW_STATUS DN_STATUS(DN_OVERFLOW, 0, 0) /* finite inputs, non-finite result */

#define FC_HIDDEN __attribute__((visibility("hidden")))

/* Model's slots read in place, as the interpreter's own LOAD_ATTR_SLOT does (set_model) */
FC_HIDDEN extern PyTypeObject *model_type;
FC_HIDDEN extern Py_ssize_t off_direct, off_kmi, off_kmf, off_link_index, off_link_body, off_link_p, off_loop_data;
FC_HIDDEN extern PyTypeObject RouteType, ContactRouteType, StepRouteType;
FC_HIDDEN PyObject *step_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs); /* _step_route.c */

/* a float64 (typenum) 1-D ndarray the kernels can read in place: native byte order, aligned, contiguous */
static inline int is_vec(PyObject *o, int typenum) {
    if (!PyArray_CheckExact(o)) return 0;
    PyArrayObject *a = (PyArrayObject *)o;
    return PyArray_TYPE(a) == typenum && PyArray_NDIM(a) == 1 &&
           (PyArray_FLAGS(a) & (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED)) ==
               (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED) &&
           PyArray_ISNOTSWAPPED(a);
}

static inline int model_ok(PyObject *mi, PyObject *mf) { return is_vec(mi, NPY_INT64) && is_vec(mf, NPY_DOUBLE); }

/* 1 when o is a typenum vector of n entries the kernels can read in place */
static inline int vec_of(PyObject *o, int typenum, Py_ssize_t n) {
    return is_vec(o, typenum) && PyArray_DIM((PyArrayObject *)o, 0) == n;
}

/* The cache entry of (model, *contacts) (a new reference; contacts a list or tuple) from the dict cache, or
 * made by prepare(model, contacts), which stores it there; NULL and no exception: prepare said None (not
 * served by a front); NULL with an exception: an error (_contact_route.c). */
FC_HIDDEN PyObject *contacts_entry(PyObject *cache, PyObject *prepare, PyObject *model, PyObject *contacts);

/* The calling thread's work buffer for a model (mi: nb, nvt first), or NULL with an exception set. */
FC_HIDDEN double *thread_work(const int64_t *h, Py_ssize_t *len);
/* The same with `extra` more doubles after the model's work array, whose length is *len. */
FC_HIDDEN double *thread_work_plus(const int64_t *h, Py_ssize_t extra, Py_ssize_t *len);
/* 1 when every one of n doubles is finite */
FC_HIDDEN int all_finite(const double *x, Py_ssize_t n);
/* The kernel call behind addr on checked arrays: ndarray, int status, or NULL with an exception. A model with
 * mimic joints (mi[DN_H_NVU] < mi[DN_H_NVT]) takes user coordinates, with extra (per body, per dof, per dof squared,
 * constant) floats of scratch after the thread's work array; without extra it is refused (a status). */
FC_HIDDEN PyObject *run(void *addr, int nin, int matrix, PyArrayObject *mi, PyArrayObject *mf, PyObject *work,
                        PyObject *const *x, const Py_ssize_t *extra);
#endif
