"""Models with mimic joints (Featherstone §9.6) through the C front: inverse dynamics, gravity, the mass matrix,
the Coriolis matrix and forward dynamics take user coordinates in compiled code (algorithms/tree/mimic.py: the map to
the tree, G^T x and G^T D G in one pass, the reduced mass matrix by Cholesky) where the Python side maps with
numpy and solves with numpy (dispatch.to_tree, ltdl.crba_forward_dynamics). The two are independent computations
of the same numbers; the same call with lists takes the Python side."""
import numpy as np
import pytest

import dynamics_node as dn
import urdfgen as ug
from conftest import assert_close, get_case

CASES = ["panda_mimic", "talos_floating_mimic", "random_mimic_20", "random_floating_mimic_22"]


def _calls(m, q, qd, qdd, tau):
    return {"inverse_dynamics": lambda f: dn.inverse_dynamics(m, f(q), f(qd), f(qdd)),
            "gravity": lambda f: dn.gravity(m, f(q)),
            "mass_matrix": lambda f: dn.mass_matrix(m, f(q)),
            "coriolis_matrix": lambda f: dn.coriolis_matrix(m, f(q), f(qd)),
            "forward_dynamics": lambda f: dn.forward_dynamics(m, f(q), f(qd), f(tau))}


@pytest.mark.parametrize("name", CASES)
def test_compiled_user_coordinates_equal_the_python_side(name):
    m = get_case(name).model
    assert m.has_mimic and m.nv < m.nvt and m.nq < m.nqt
    rng = np.random.default_rng(len(name))
    for _ in range(3):
        q, qd, qdd, tau = ug.random_state(m, rng)
        for what, call in _calls(m, q, qd, qdd, tau).items():
            fast, slow = call(lambda x: x), call(list)
            assert fast.shape == slow.shape and fast.shape[0] == m.nv, what
            assert_close(fast, slow, rtol=1e-10, what=f"{name}: {what}")
        # and against the definitions: G^T H G and H qdd + C = tau
        H = dn.mass_matrix(m, q)
        assert_close(dn.inverse_dynamics(m, q, qd, dn.forward_dynamics(m, q, qd, tau)), tau, rtol=1e-9, what=name)
        assert_close(H, H.T, rtol=1e-12, what=f"{name}: H symmetric")


@pytest.mark.parametrize("name", CASES[:2])
def test_the_compiled_route_never_reaches_the_python_side(name, monkeypatch):
    m = get_case(name).model
    q, qd, qdd, tau = ug.random_state(m, np.random.default_rng(3))
    import dynamics_node.dispatch as D

    def refuse(model):
        raise AssertionError("the Python side was called")

    monkeypatch.setattr(D, "check_model", refuse)
    for what, call in _calls(m, q, qd, qdd, tau).items():
        assert np.all(np.isfinite(call(lambda x: x))), what
        with pytest.raises(AssertionError, match="Python side"):
            call(list)


def test_bad_input_of_a_mimic_model_is_named_as_before():
    """A refusal in compiled code sends the call to the Python side, which names it."""
    m = get_case("panda_mimic").model
    q, qd, qdd, tau = ug.random_state(m, np.random.default_rng(4))
    bad = qd.copy()
    bad[2] = np.nan
    with pytest.raises(dn.InputError, match=r"qd\[2\]"):
        dn.inverse_dynamics(m, q, bad, qdd)
    with pytest.raises(dn.InputError, match="q has length"):
        dn.mass_matrix(m, q[:-1])
    with pytest.raises(dn.InputError, match=r"tau\[0\]"):
        dn.forward_dynamics(m, q, qd, np.r_[np.inf, tau[1:]])
