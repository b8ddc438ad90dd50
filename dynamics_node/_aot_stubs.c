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
