"""The C front of contact_forward_dynamics (_fastcall.ContactRoute, dynamics_node/_contact_route.c) and
the allocation-free pieces behind it: the front answers the plain call with what the numba kernel
gives, runs no Python below the public function, and hands every other call (and every error) to the
Python side; the kernel refuses scratch that is too small; the dense solves of the contact problem
(algorithms/tree/dense.py) against numpy's LAPACK; the reshape helper of the ahead-of-time library against
numpy."""
from __future__ import annotations

import ctypes
import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import urdfgen as ug

import dynamics_node as dn
from dynamics_node import _fast, _jit
from dynamics_node.algorithms.contact import forward_dynamics as C
from dynamics_node.algorithms.tree import dense

MUS = (0.0, 0.3, 1.0, 2.0, math.inf)


@pytest.fixture(scope="module")
def arm():
    return dn.load_model("urdf/arm7.urdf")


def _problems(seed, n):
    """Random contact problems: the arm and random trees (fixed and floating bases), 1-5 contacts,
    random or vertical normals, every friction kind, at rest or moving."""
    rng = np.random.default_rng(seed)
    models = [dn.load_model("urdf/arm7.urdf")] + [dn.load_model(ug.random_urdf(s, n_links=6)[0],
                                                                floating_base=s % 2 == 1) for s in range(4)]
    for i in range(n):
        m = models[i % len(models)]
        movable = [lk for lk in m.link_names if m.body_of(lk) >= 0]
        cs = [dn.Contact(movable[int(rng.integers(len(movable)))], point=rng.uniform(-0.2, 0.2, 3),
                         normal=(0, 0, 1) if i % 4 == 0 else rng.normal(size=3),
                         friction=MUS[int(rng.integers(len(MUS)))]) for _ in range(1 + i % 5)]
        q, qd, _, tau = ug.random_state(m, rng)
        yield m, q, (np.zeros(m.nv) if i % 3 == 0 else qd), 3 * tau, cs


def _numba_kernel(m, q, qd, tau, cs):
    """The same kernel through numba's dispatcher: (status, qdd, F, codes)."""
    from dynamics_node.algorithms.contact.args import pack

    p = pack(m, cs)
    qdd, F, codes = np.empty(m.nvt), np.empty((p.k, 3)), np.empty(p.k, dtype=np.int64)
    st = C.contact_fd_kernel(m._kmi, m._kmf, q, qd, tau, np.zeros(0), p.body, p.point, p.frame, p.mu, C.REST_SPEED,
                             qdd, F, codes, np.empty(m.work_size))
    return st, qdd, F, codes


def _calls(fn):
    """fn()'s result and the Python functions called below fn (which is a lambda or a local function)."""
    calls = []
    sys.setprofile(lambda frame, event, arg: calls.append(frame.f_code.co_name) if event == "call" else None)
    try:
        out = fn()
    finally:
        sys.setprofile(None)
    return out, calls[1:]


def test_the_front_is_the_c_route():
    assert _fast.AVAILABLE, "make setup must build dynamics_node._fastcall"
    assert isinstance(C._CFD, _fast.ContactRoute)


def test_front_equals_the_numba_kernel():
    solved = 0
    for m, q, qd, tau, cs in _problems(3, 80):
        st, qdd, F, codes = _numba_kernel(m, q, qd, tau, cs)
        try:
            r = dn.contact_forward_dynamics(m, q, qd, tau, cs)
        except dn.InputError:
            assert st != 0
            continue
        assert st == 0
        np.testing.assert_allclose(r.qdd, qdd, rtol=1e-12, atol=1e-12 * (1 + np.abs(qdd).max()))
        np.testing.assert_allclose(r.forces, F, rtol=1e-12, atol=1e-12 * (1 + np.abs(F).max()))
        assert r.states == tuple(C.STATE_NAMES[c] for c in codes)
        assert r.qdd.flags.c_contiguous and r.qdd.flags.writeable and r.forces.shape == (len(cs), 3)
        assert type(r) is C.ContactResult
        solved += 1
    assert solved >= 50, solved


def test_front_stays_in_c(arm):
    """No Python code runs below contact_forward_dynamics for the plain call (after the first call
    with a list of contacts, which packs it)."""
    q = np.full(arm.nv, 0.3)
    tau = dn.gravity(arm, q) * 0.3
    cs = [dn.Contact("tool0", (0, 0.02, 0.05), normal=(0, 0, 1), friction=2.0),
          dn.Contact("link5", (0, 0.03, 0.1), normal=(0, 1, 1), friction=0.5)]
    first, calls = _calls(lambda: dn.contact_forward_dynamics(arm, q, np.zeros(arm.nv), tau, cs))
    assert "_c_entry" in calls
    again, calls = _calls(lambda: dn.contact_forward_dynamics(arm, q, np.zeros(arm.nv), tau, list(cs)))
    assert calls == ["contact_forward_dynamics"], calls
    np.testing.assert_array_equal(first.qdd, again.qdd)
    _, calls = _calls(lambda: dn.contact_forward_dynamics(arm, q, np.zeros(arm.nv), tau, tuple(cs), rest_speed=0.0))
    assert calls == ["contact_forward_dynamics"], calls


def test_everything_else_goes_to_python_with_the_same_answer(arm):
    q = np.full(arm.nv, 0.3)
    qd = np.linspace(-0.2, 0.3, arm.nv)
    tau = dn.gravity(arm, q) * 0.3
    cs = [dn.Contact("tool0", (0, 0.02, 0.05), normal=(0, 0, 1), friction=0.4)]
    ref = dn.contact_forward_dynamics(arm, q, qd, tau, cs)
    cfd = dn.contact_forward_dynamics
    qd32 = qd.astype(np.float32)
    for call, tol in ((lambda: cfd(arm, q, qd, tau, cs, f_ext={}), 1e-13),
                      (lambda: cfd(arm, q, qd, tau, cs, data=dn.Data(arm)), 1e-13),
                      (lambda: cfd(arm, list(q), qd, tau, cs), 1e-13),
                      (lambda: cfd(arm, q, qd.astype(">f8"), tau, cs), 1e-13),
                      (lambda: cfd(arm, q, qd32, tau, cs), 1e-6),  # the float32 values: other numbers
                      (lambda: cfd(arm, q, qd, tau, iter(cs)), 1e-13),
                      (lambda: cfd(arm, q, qd, tau, cs, rest_speed=np.float64(1e-9)), 1e-13)):
        r, calls = _calls(call)
        assert "_contact_fd_slow" in calls
        np.testing.assert_allclose(r.qdd, ref.qdd, rtol=tol, atol=tol * np.abs(ref.qdd).max())
        assert r.states == ref.states
    r, calls = _calls(lambda: cfd(arm, q, qd, tau, contacts=cs, rest_speed=1e-9, f_ext=None))  # keywords: the same
    assert calls == ["contact_forward_dynamics"] and np.array_equal(r.qdd, ref.qdd)
    r0, calls = _calls(lambda: cfd(arm, q, qd, tau, cs, rest_speed=0))  # an int: checked in Python
    assert "_contact_fd_slow" in calls
    r1 = cfd(arm, q, qd, tau, cs, rest_speed=0.0)
    np.testing.assert_array_equal(r0.qdd, r1.qdd)
    # errors are named by the Python side
    bad = q.copy()
    bad[2] = np.nan
    with pytest.raises(dn.InputError, match=r"q\[2\]"):
        cfd(arm, bad, qd, tau, cs)
    with pytest.raises(dn.InputError, match="length"):
        cfd(arm, q, qd[:-1], tau, cs)
    with pytest.raises(dn.InputError, match=r"contacts\[1\]"):
        cfd(arm, q, qd, tau, [cs[0], "tool0"])
    with pytest.raises(dn.InputError, match="no_such_link"):
        cfd(arm, q, qd, tau, [dn.Contact("no_such_link")])
    with pytest.raises(dn.InputError, match="rest_speed"):
        cfd(arm, q, qd, tau, cs, rest_speed=-1.0)
    with pytest.raises(dn.InputError, match="overflowed"):
        cfd(arm, q, np.full(arm.nv, 1e200), tau, cs)


def test_a_mimic_model_goes_to_python():
    m = dn.load_model(ug.random_urdf(20, n_links=6, n_mimic=1)[0])
    assert m.has_mimic
    link = [lk for lk in m.link_names if m.body_of(lk) >= 0][-1]
    q, qd, _, tau = ug.random_state(m, np.random.default_rng(1))
    r, calls = _calls(lambda: dn.contact_forward_dynamics(m, q, qd, tau, [dn.Contact(link, friction=0.0)]))
    assert "_contact_fd_checked" in calls and r.qdd.shape == (m.nv,)


def test_the_kernel_refuses_scratch_too_small_and_entries_of_another_shape(arm):
    """contact_fd_core checks the scratch it is given against contact_scratch itself (SCRATCH), and the
    front checks the cache entry's arrays: either way the Python side answers, with the same result."""
    q = np.full(arm.nv, 0.2)
    tau = dn.gravity(arm, q) * 0.5
    cs = [dn.Contact("tool0", normal=(0, 0, 1), friction=1.0), dn.Contact("link4", normal=(1, 0, 1), friction=1.0)]
    ref = dn.contact_forward_dynamics(arm, q, np.zeros(arm.nv), tau, cs)
    key = (arm, *cs)
    body, point, frame, mu, nf, ni = C._C_CACHE[key]
    assert (nf, ni) == C.contact_scratch(arm.nvt, 2)
    for entry in ((body, point, frame, mu, nf - 1, ni), (body, point, frame, mu, nf, ni - 1),
                  (body.astype(float), point, frame, mu, nf, ni), (body, point[:-1], frame, mu, nf, ni),
                  (body, point, frame, mu, nf), "not an entry"):
        C._C_CACHE[key] = entry
        r, calls = _calls(lambda: dn.contact_forward_dynamics(arm, q, np.zeros(arm.nv), tau, cs))
        assert "_contact_fd_slow" in calls, entry
        np.testing.assert_array_equal(r.qdd, ref.qdd)
    C._C_CACHE[key] = (body, point, frame, mu, nf, ni)
    _, calls = _calls(lambda: dn.contact_forward_dynamics(arm, q, np.zeros(arm.nv), tau, cs))
    assert calls == ["contact_forward_dynamics"]
    # and the kernel's own check, called directly
    qdd, F, codes = np.empty(arm.nvt), np.empty((2, 3)), np.empty(2, dtype=np.int64)
    st = C.contact_fd_core(arm._kmi, arm._kmf, q, np.zeros(arm.nv), tau, np.zeros(0), body, point, frame, mu,
                           C.REST_SPEED, qdd, F, codes, np.empty(arm.work_size), np.empty(nf - 1),
                           np.empty(ni, dtype=np.int64))
    assert st == C.SCRATCH


def test_front_on_many_threads(arm):
    rng = np.random.default_rng(9)
    cs = [dn.Contact("tool0", (0, 0.02, 0.05), normal=(0, 0, 1), friction=0.5),
          dn.Contact("link6", (0.02, 0, 0.05), normal=(0, 1, 2), friction=0.5)]
    states = [(rng.uniform(-2, 2, arm.nv), rng.uniform(-1, 1, arm.nv), rng.uniform(-20, 20, arm.nv)) for _ in range(4)]
    ref = [dn.contact_forward_dynamics(arm, *s, cs) for s in states]

    def run(k):
        return all(np.array_equal(dn.contact_forward_dynamics(arm, *states[k % 4], cs).qdd, ref[k % 4].qdd)
                   for _ in range(300))

    with ThreadPoolExecutor(4) as ex:
        assert all(ex.map(run, range(16)))


def test_lstsq_minnorm_equals_numpy_lstsq():
    """The Newton steps' minimum-norm least squares (column-pivoted QR and a QR of the trapezoid's
    transpose) against numpy's SVD-based lstsq, full rank or not, consistent or not."""
    rng = np.random.default_rng(0)
    for trial in range(400):
        n = int(rng.integers(1, 17))
        r = int(rng.integers(0, n + 1))
        J = rng.normal(size=(n, r)) @ rng.normal(size=(r, n)) * 10.0 ** rng.uniform(-3, 3)
        if trial % 7 == 0:
            J[:, rng.integers(n)] = 0.0
        b = J @ rng.normal(size=n) if trial % 2 else rng.normal(size=n)
        nf, ni = dense.lstsq_scratch(n)
        x = np.empty(n)
        rank = dense.lstsq_minnorm(J, b, x, 1e-13, np.full(nf, np.nan), np.empty(ni, dtype=np.int64))
        ref, _, rank_ref, _ = np.linalg.lstsq(J, b, rcond=1e-13)
        assert rank == rank_ref, trial
        np.testing.assert_allclose(x, ref, rtol=1e-8, atol=1e-9 * max(1e-300, np.abs(ref).max()))


def test_psd_minnorm_equals_the_pseudoinverse():
    rng = np.random.default_rng(1)
    for trial in range(300):
        n = int(rng.integers(1, 13))
        B = rng.normal(size=(n, int(rng.integers(0, n + 1))))
        M = B @ B.T
        consistent = trial % 3 != 0
        r = M @ rng.normal(size=n) if consistent else rng.normal(size=n)
        nf, ni = dense.psd_scratch(n)
        x = np.empty(n)
        ok = dense.psd_minnorm(M, r, x, np.full(nf, np.nan), np.empty(ni, dtype=np.int64))
        ref = np.linalg.pinv(M, rcond=1e-10, hermitian=True) @ r
        if consistent or np.linalg.norm(M @ ref - r) <= 1e-9 * np.linalg.norm(r):
            assert ok, trial
            np.testing.assert_allclose(x, ref, rtol=1e-7, atol=1e-8 * max(1.0, np.abs(ref).max()))
        else:
            assert not ok, trial


def test_reshape_helper_of_the_library_equals_numpy():
    """numba's code calls numba_attempt_nocopy_reshape on every reshape; the ahead-of-time library
    defines its own (_jit_build._STUBS): it must view exactly what numpy views without a copy, with the
    same strides."""
    if not _jit.aot_loaded():
        pytest.skip("no ahead-of-time kernel library (make kernels)")
    lib = ctypes.CDLL(os.path.join(os.environ["NUMBA_CACHE_DIR"], "aot", "kernels.so"))
    f = lib.numba_attempt_nocopy_reshape
    P = ctypes.POINTER(ctypes.c_ssize_t)
    f.argtypes = [ctypes.c_ssize_t, P, P, ctypes.c_ssize_t, P, P, ctypes.c_ssize_t, ctypes.c_int]
    rng = np.random.default_rng(2)
    base = np.arange(720.0)
    for _ in range(300):
        shape = tuple(int(s) for s in rng.choice([1, 2, 3, 4, 5, 6], size=int(rng.integers(1, 4))))
        a = base[:int(np.prod(shape))].reshape(shape)
        if rng.random() < 0.5 and a.ndim > 1:
            a = a.T if rng.random() < 0.5 else a[..., ::1]
        if rng.random() < 0.3:
            a = a[::2] if a.shape[0] > 1 else a
        new = tuple(int(s) for s in rng.permutation(list(a.shape) + [1] * int(rng.integers(0, 2))))
        order = "F" if rng.random() < 0.3 else "C"
        arr = lambda x: (ctypes.c_ssize_t * max(1, len(x)))(*x)  # noqa: E731
        out = (ctypes.c_ssize_t * max(1, len(new)))()
        ok = f(a.ndim, arr(a.shape), arr(a.strides), len(new), arr(new), out, 8, int(order == "F"))
        v = a.reshape(new, order=order)  # a view where numpy can make one, else a copy
        if not np.shares_memory(v, a):   # (numpy 1.26 has no reshape(copy=False) to ask)
            v = None
        assert bool(ok) == (v is not None), (a.shape, a.strides, new, order)
        if ok and a.size:  # the strides of axes longer than 1 (those of length 1 do not matter)
            assert [o for o, n in zip(out[:len(new)], new) if n > 1] == \
                [s for s, n in zip(v.strides, new) if n > 1], (a.shape, a.strides, new, order)
