"""The C shim (dynamics_node/_fastcall.c) is built by `make setup`, and the shortest call route it
gives returns exactly what the numba dispatcher route returns, refuses what it cannot take (so the
converting route runs) and reports kernel errors the same way."""
import numpy as np
import pytest

import dynamics_node as dn
from dynamics_node import _fast
from dynamics_node.algorithms.tree import aba, crba, rnea


@pytest.fixture(scope="module")
def arm():
    return dn.load_model("urdf/arm7.urdf")


def test_shim_is_built(arm):
    assert _fast.AVAILABLE, "make setup must build dynamics_node._fastcall (setup.py build_ext --inplace)"
    assert arm._direct


def test_shim_equals_dispatcher_route(arm):
    rng = np.random.default_rng(7)
    q, qd, x = rng.uniform(-2, 2, (3, arm.nv))
    tau = np.empty(arm.nv)
    assert rnea.rnea_entry(arm._kmi, arm._kmf, q, qd, x, tau) == 0
    np.testing.assert_array_equal(dn.inverse_dynamics(arm, q, qd, x), tau)
    assert rnea.gravity_entry(arm._kmi, arm._kmf, q, tau) == 0
    np.testing.assert_array_equal(dn.gravity(arm, q), tau)
    H = np.empty(arm.nv * arm.nv)
    assert crba.crba_entry(arm._kmi, arm._kmf, q, H) == 0
    np.testing.assert_array_equal(dn.mass_matrix(arm, q), H.reshape(arm.nv, arm.nv))
    assert aba.aba_entry(arm._kmi, arm._kmf, q, qd, x, tau) == 0
    np.testing.assert_array_equal(dn.forward_dynamics(arm, q, qd, x), tau)


def _gravity_addr():
    return rnea.gravity_c.address


def test_shim_refuses_what_it_cannot_take(arm):
    q = np.zeros(arm.nv)
    a = _gravity_addr()
    for bad in (q.astype(np.float32), np.zeros(2 * arm.nv)[::2], list(q), q.astype(">f8"),
                np.frombuffer(b"\0" + q.tobytes(), offset=1)):
        assert _fast.invoke(a, False, arm._kmi, arm._kmf, None, bad) is NotImplemented, bad
    # and the public functions still answer through the converting route
    np.testing.assert_array_equal(dn.gravity(arm, list(q)), dn.gravity(arm, q))
    np.testing.assert_array_equal(dn.gravity(arm, np.zeros(2 * arm.nv)[::2]), dn.gravity(arm, q))


def test_shim_reports_kernel_errors(arm):
    q = np.zeros(arm.nv)
    st = _fast.invoke(_gravity_addr(), False, arm._kmi, arm._kmf, None, q[:-1])
    assert isinstance(st, int) and st != 0
    with pytest.raises(dn.InputError, match="length"):
        dn.gravity(arm, q[:-1])
    q[2] = np.nan
    with pytest.raises(dn.InputError, match=r"q\[2\].*joint3"):
        dn.inverse_dynamics(arm, q, np.zeros(arm.nv), np.zeros(arm.nv))


def test_shim_refuses_a_work_array_too_small(arm):
    """The C side checks a given work array's size itself (a Data of a smaller model must never be
    written past its end, whatever the Python side lets through)."""
    with pytest.raises(ValueError, match="too small"):
        _fast.invoke(_gravity_addr(), False, arm._kmi, arm._kmf, np.empty(arm.work_size - 1), np.zeros(arm.nv))


def test_hot_path_stays_in_c(arm):
    """gravity, inverse and forward dynamics and the mass matrix of a plain model with float64
    vectors run no Python code below the public function: the route's C front answers them."""
    import sys

    q = np.full(arm.nv, 0.3)
    calls = []

    def prof(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code.co_name)

    for fn, args in ((dn.gravity, (q,)), (dn.mass_matrix, (q,)), (dn.inverse_dynamics, (q, q, q)),
                     (dn.forward_dynamics, (q, q, q))):
        fn(arm, *args)
        calls.clear()
        sys.setprofile(prof)
        try:
            fn(arm, *args)
        finally:
            sys.setprofile(None)
        assert calls == [fn.__name__], (fn.__name__, calls)
    calls.clear()
    sys.setprofile(prof)
    try:
        dn.gravity(arm, list(q))  # a list takes the Python side
    finally:
        sys.setprofile(None)
    assert "slow" in calls


def test_finiteness_check_against_numpy():
    """The shim's finiteness test (a sum over eight vector lanes, then the exponent bits) agrees
    with numpy for every position of inf, -inf, NaN and the extremes, over lane and tail sizes, and
    over results made of tuples and dicts."""
    for bad in (np.inf, -np.inf, np.nan, 1.7e308, -1.7e308, -0.0, 5e-324):
        for n in (1, 2, 7, 15, 16, 17, 31, 33, 100):
            for pos in range(n):
                a = np.ones(n)
                a[pos] = bad
                ok = bool(np.isfinite(a).all())
                assert _fast.finite(a) == ok and _fast.finite_all((a, {"w": a})) == ok, (bad, n, pos)
    assert _fast.finite(np.full(40, 1.7e308))  # the sum overflows, every entry is finite
    assert not _fast.finite(np.array([np.inf, -np.inf]))  # the sum is NaN
    assert _fast.finite_all(np.ones(4)[::2]) is None  # cannot tell in place: numpy decides


# ------------------------------------------------------------------------------------- invoke3s
# the closed-loop forward dynamics' C callback (algorithms/loops/forward.py): invoke's checks with one
# float after the third vector and an output of nout floats of which out[lo:hi] is returned

@pytest.fixture(scope="module")
def dual():
    return dn.load_model("urdf/dual_arm_object.urdf")


def _fd_args(m, scale=1.0):
    rng = np.random.default_rng(3)
    return rng.uniform(-1, 1, m.nq), rng.uniform(-1, 1, m.nv), scale * rng.uniform(-5, 5, m.nv)


def _fd3s(m, q, qd, tau, alpha=10.0, work=None, lohi=None):
    from dynamics_node.algorithms.loops import forward

    ld = m.loop_data
    lo, hi = lohi or (ld.qdd_at, ld.qdd_at + m.nv + 6 * ld.n_loops)
    return _fast.invoke3s(forward._FD_C, ld.out_size, lo, hi, ld._kmi, ld._kmf, work, q, qd, tau, alpha)


def test_invoke3s_equals_the_numba_entry(dual):
    """The C callback through invoke3s returns what the numba entry computes from the same kernel,
    for the public function's answer too."""
    from dynamics_node.algorithms.loops import forward

    q, qd, tau = _fd_args(dual)
    ld = dual.loop_data
    ref = np.empty(ld.out_size)
    assert forward.fd_entry(dual._kmi, dual._kmf, ld._kli, ld._klf, q, qd, tau, np.zeros(0), 10.0, ref) == 0
    o, e = ld.qdd_at, ld.qdd_at + dual.nv + 6 * ld.n_loops
    r = _fd3s(dual, q, qd, tau)
    assert isinstance(r, np.ndarray) and r.shape == (ld.out_size,)
    np.testing.assert_allclose(r[o:e], ref[o:e], rtol=1e-13, atol=1e-13)
    for work in (np.empty(dual.work_size), dn.Data(dual).work):  # a given work array: the same answer
        np.testing.assert_array_equal(_fd3s(dual, q, qd, tau, work=work)[o:e], r[o:e])
    qdd, wr = dn.closed_loop_forward_dynamics(dual, q, qd, tau)
    np.testing.assert_array_equal(qdd, r[o:o + dual.nv])
    assert list(wr) == list(ld.names)
    # another gain, passed as an int or a numpy float: the float reaches the kernel
    r2 = _fd3s(dual, q, qd, tau, alpha=np.float64(3.0))
    np.testing.assert_array_equal(_fd3s(dual, q, qd, tau, alpha=3)[o:e], r2[o:e])
    assert not np.array_equal(r2[o:e], r[o:e])
    np.testing.assert_array_equal(dn.closed_loop_forward_dynamics(dual, q, qd, tau, 1 / 3)[0], r2[o:o + dual.nv])


def test_invoke3s_refuses_what_it_cannot_take(dual):
    q, qd, tau = _fd_args(dual)
    for bad in (q.astype(np.float32), np.repeat(q, 2)[::2], list(q), q.astype(">f8"),
                np.frombuffer(b"\0" + q.tobytes(), offset=1)):
        assert _fd3s(dual, bad, qd, tau) is NotImplemented, bad
        assert _fd3s(dual, q, qd, bad) is NotImplemented, bad
    ref = dn.closed_loop_forward_dynamics(dual, q, qd, tau)[0]
    np.testing.assert_array_equal(dn.closed_loop_forward_dynamics(dual, q.astype(">f8"), list(qd), tau)[0], ref)
    with pytest.raises(ValueError, match="too small"):
        _fd3s(dual, q, qd, tau, work=np.empty(dual.work_size - 1))
    for lohi in ((-1, 3), (5, 4), (0, dual.loop_data.out_size + 1)):
        with pytest.raises(ValueError, match="lo <= hi <= nout"):
            _fd3s(dual, q, qd, tau, lohi=lohi)
    with pytest.raises(TypeError):
        _fd3s(dual, q, qd, tau, alpha="fast")


def test_invoke3s_reports_kernel_errors_and_overflow(dual):
    q, qd, tau = _fd_args(dual)
    st = _fd3s(dual, q[:-1], qd, tau)
    assert isinstance(st, int) and st != 0
    q2 = q.copy()
    q2[1] = np.nan
    assert isinstance(_fd3s(dual, q2, qd, tau), int)
    with pytest.raises(dn.InputError, match=r"q.*(NaN|not finite)"):
        dn.closed_loop_forward_dynamics(dual, q2, qd, tau)
    # finite inputs, a result out of range: the returned part is checked, the status is OVERFLOW (5e8)
    huge = np.full(dual.nv, 1.7e308)
    assert _fd3s(dual, q, qd, huge) == 500000000
    with pytest.raises(dn.InputError, match="overflowed"):
        dn.closed_loop_forward_dynamics(dual, q, qd, huge)
    # only out[lo:hi] is checked: an empty range lets the same call through
    assert isinstance(_fd3s(dual, q, qd, huge, lohi=(0, 0)), np.ndarray)


def test_invoke3s_on_many_threads(dual):
    """Each thread computes on its own work buffer (the shim's per-thread buffer, freed at thread
    exit): concurrent calls give the single-threaded answers."""
    from concurrent.futures import ThreadPoolExecutor

    states = [_fd_args(dual, s) for s in (0.5, 1.0, 2.0, 4.0)]
    ref = [dn.closed_loop_forward_dynamics(dual, *s)[0] for s in states]

    def run(k):
        return all(np.array_equal(dn.closed_loop_forward_dynamics(dual, *states[k % 4])[0], ref[k % 4])
                   for _ in range(200))

    with ThreadPoolExecutor(4) as ex:
        assert all(ex.map(run, range(16)))


# ------------------------------------------------------------------------------- a link Route
# the front of jacobian_derivative (algorithms/tree/jacobians.py): the link origin of a link named by a str
# is answered in C, with the body and the point read from the model; everything else goes to Python

def _jdot_slow(m, q, qd, link, point=None):
    """The converting route: a Data makes the front hand the call to Route.slow (the numba entry)."""
    return dn.jacobian_derivative(m, q, qd, link, *(() if point is None else (point,)), data=dn.Data(m))


def test_link_route_equals_the_converting_route(arm):
    from dynamics_node.algorithms.tree import jacobians

    assert isinstance(jacobians._JDOT, _fast.Route)
    rng = np.random.default_rng(11)
    q, qd = rng.uniform(-2, 2, (2, arm.nv))
    for link in arm.link_names:  # base_link sits on the fixed base: J̇ = 0
        r = dn.jacobian_derivative(arm, q, qd, link)
        assert r.shape == (6, arm.nv) and r.flags.c_contiguous and r.flags.writeable
        np.testing.assert_allclose(r, _jdot_slow(arm, q, qd, link), rtol=1e-13, atol=1e-13)
    assert not dn.jacobian_derivative(arm, q, qd, "base_link").any()
    # another point, the link axes, a str subclass, keyword arguments: the Python side, same numbers
    link = arm.link_names[-1]
    ref = dn.jacobian_derivative(arm, q, qd, link)

    class Name(str):
        pass

    jd = dn.jacobian_derivative
    for other in (jd(arm, q, qd, Name(link)), jd(arm, q, qd, link=link), jd(arm, q, qd, link, np.zeros(3)),
                  jd(arm, list(q), qd, link)):
        np.testing.assert_allclose(other, ref, rtol=1e-13, atol=1e-13)
    assert not np.allclose(dn.jacobian_derivative(arm, q, qd, link, (0.1, 0, 0)), ref)


def test_link_route_hands_errors_to_python(arm):
    q, qd = np.full(arm.nv, 0.3), np.full(arm.nv, 0.2)
    link = arm.link_names[-1]
    with pytest.raises(dn.InputError, match="no_such_link"):
        dn.jacobian_derivative(arm, q, qd, "no_such_link")
    with pytest.raises(dn.InputError, match="length"):
        dn.jacobian_derivative(arm, q[:-1], qd, link)
    bad = qd.copy()
    bad[3] = np.nan
    with pytest.raises(dn.InputError, match=r"qd\[3\]"):
        dn.jacobian_derivative(arm, q, bad, link)
    with pytest.raises(dn.InputError, match="overflowed"):  # finite in, not finite out
        dn.jacobian_derivative(arm, q, np.full(arm.nv, 1.7e308), link)
    with pytest.raises(dn.InputError, match="link"):
        dn.jacobian_derivative(arm, q, qd, 7)


def test_link_route_stays_in_c(arm):
    """No Python code runs below jacobian_derivative for the controllers' call."""
    import sys

    q, link = np.full(arm.nv, 0.3), arm.link_names[-1]
    dn.jacobian_derivative(arm, q, q, link)
    calls = []
    sys.setprofile(lambda frame, event, arg: calls.append(frame.f_code.co_name) if event == "call" else None)
    try:
        dn.jacobian_derivative(arm, q, q, link)
    finally:
        sys.setprofile(None)
    assert calls == ["jacobian_derivative"], calls


def test_link_route_on_many_threads(arm):
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    states = [rng.uniform(-2, 2, (2, arm.nv)) for _ in range(4)]
    link = arm.link_names[-1]
    ref = [dn.jacobian_derivative(arm, q, qd, link) for q, qd in states]

    def run(k):
        return all(np.array_equal(dn.jacobian_derivative(arm, *states[k % 4], link), ref[k % 4]) for _ in range(300))

    with ThreadPoolExecutor(4) as ex:
        assert all(ex.map(run, range(16)))


# ------------------------------------------------------------------ the matrices route
def _derivative_calls(arm, q, qd, x):
    return ((dn.inverse_dynamics_derivatives, (q, qd, x)), (dn.forward_dynamics_derivatives, (q, qd, x)),
            (dn.gravity_derivatives, (q,)))


def test_matrices_route_stays_in_c(arm):
    """The derivatives of a plain model with float64 vectors and no f_ext run no Python code below the public
    function (the C front returns the tuple); f_ext takes the Python side."""
    import sys

    q = np.full(arm.nv, 0.3)
    calls = []

    def prof(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code.co_name)

    for fn, args in _derivative_calls(arm, q, q, q):
        fn(arm, *args)
        calls.clear()
        sys.setprofile(prof)
        try:
            fn(arm, *args)
        finally:
            sys.setprofile(None)
        assert calls == [fn.__name__], (fn.__name__, calls)
    calls.clear()
    sys.setprofile(prof)
    try:
        dn.inverse_dynamics_derivatives(arm, q, q, q, f_ext={arm.link_names[-1]: np.ones(6)})
    finally:
        sys.setprofile(None)
    assert "slow" in calls


def test_matrices_route_equals_the_computing_side(arm):
    """The C front's results are those of the route's Python side (numba entries), as separate nv x nv arrays:
    writing into one leaves the others unchanged. To rounding, not bit for bit: the C front calls the
    ahead-of-time library when it is built, which LLVM compiles to other fused multiply-adds than numba's JIT
    (seen: 1e-15 in dtau/dq, 1e-13 in the forward derivatives; with DYNAMICS_NODE_NO_AOT=1 they are equal)."""

    def same(a, b):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(b).max()))

    from dynamics_node.algorithms.derivatives import dynamics_derivatives as D

    rng = np.random.default_rng(11)
    q, qd, x = rng.uniform(-2, 2, (3, arm.nv))
    st, want = D._id_derivatives(arm, None, None, q, qd, x, None)
    got = dn.inverse_dynamics_derivatives(arm, q, qd, x)
    assert st == 0 and type(got) is tuple and len(got) == 2
    for a, b in zip(got, want):
        same(a, b)
    st, want = D._fd_derivatives(arm, None, np.empty(arm.work_size), q, qd, x, None)
    got = dn.forward_dynamics_derivatives(arm, q, qd, x)
    assert st == 0 and type(got) is tuple and len(got) == 3
    for a, b in zip(got, want):
        same(a, b)
        assert a.shape == (arm.nv, arm.nv) and a.flags.c_contiguous and a.flags.writeable
    keep = [a.copy() for a in got]
    got[0][:] = np.nan
    np.testing.assert_array_equal(got[1], keep[1])
    np.testing.assert_array_equal(got[2], keep[2])
    st, want = D._gravity_derivatives(arm, None, None, q)
    same(dn.gravity_derivatives(arm, q), want)


def test_matrices_route_hands_errors_to_python(arm):
    q = np.zeros(arm.nv)
    for fn, args in _derivative_calls(arm, q[:-1], q, q):
        with pytest.raises(dn.InputError, match="length"):
            fn(arm, *args)
    q[2] = np.nan
    for fn, args in _derivative_calls(arm, q, np.zeros(arm.nv), np.zeros(arm.nv)):
        with pytest.raises(dn.InputError, match=r"q\[2\].*joint3"):
            fn(arm, *args)
    big = np.full(arm.nv, 1e200)   # finite in, not finite out: refused by name, never returned
    with pytest.raises(dn.InputError, match="out of range"):
        dn.inverse_dynamics_derivatives(arm, np.zeros(arm.nv), big, big)


def test_matrices_route_on_many_threads(arm):
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    states = [rng.uniform(-2, 2, (3, arm.nv)) for _ in range(16)]
    want = [dn.forward_dynamics_derivatives(arm, *s) for s in states]
    with ThreadPoolExecutor(4) as ex:
        for _ in range(5):
            got = list(ex.map(lambda s: dn.forward_dynamics_derivatives(arm, *s), states))
            for g, w in zip(got, want):
                for a, b in zip(g, w):
                    np.testing.assert_array_equal(a, b)


def test_matrices_route_refuses_bad_construction():
    addr = _gravity_addr()
    with pytest.raises(ValueError, match="matrices route"):
        _fast.Route(addr, 1, False, (), print, 0, None, 2, (0, 0, 0, 0))   # matrix=False
    with pytest.raises(ValueError, match="matrices route"):
        _fast.Route(addr, 1, True, (), print, 0, None, 1, (0, -1, 0, 0))
