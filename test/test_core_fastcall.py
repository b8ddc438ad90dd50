"""The C shim (dynamics_node/_fastcall.c) is built by `make setup`, and the shortest call route it
gives returns exactly what the numba dispatcher route returns, refuses what it cannot take (so the
converting route runs) and reports kernel errors the same way."""
import numpy as np
import pytest

import dynamics_node as dn
from dynamics_node import _fast
from dynamics_node.algorithms import aba, crba, rnea


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
