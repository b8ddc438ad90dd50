"""The sparse L^T D L factorisation (Featherstone §6.5, Tables 6.3-6.5), forward dynamics by the CRBA
route (Table 9.5's route for a floating base) against the ABA and Pinocchio, and floating-base
inverse dynamics (§9.5, Table 9.6)."""
import numpy as np
import pytest

from conftest import assert_close, get_case

CASES = ["arm7", "baxter_branched", "kinova_continuous", "random_0", "random_2", "random_floating_10",
         "solo12_floating", "talos_floating_mimic", "random_mimic_20"]


@pytest.mark.parametrize("name", ["arm7", "baxter_branched", "random_2", "solo12_floating"])
def test_ltdl_reproduces_H_without_fill_in(name, dn):
    from dynamics_node._kernel_io import to_tree_q
    from dynamics_node.algorithms.tree.crba import mass_matrix_tree
    from dynamics_node.algorithms.tree.ltdl import dof_parents, ltdl_factor

    c = get_case(name)
    m = c.model
    q = to_tree_q(m, c.states[0][0])  # every tree coordinate (mimic followers included)
    H = mass_matrix_tree(m, q)
    lam = dof_parents(m)
    F = np.array(H)
    assert ltdl_factor(F, lam, m.singular_tol) == -1
    n = H.shape[0]
    L = np.tril(F, -1) + np.eye(n)
    D = np.diag(np.diag(F))
    assert_close(L.T @ D @ L, H, what=f"{name}: L^T D L = H")
    ancestors = [set() for _ in range(n)]
    for i in range(n):
        j = lam[i]
        while j != -1:
            ancestors[i].add(int(j))
            j = lam[j]
    for i in range(n):
        for j in range(i):
            if j not in ancestors[i]:
                assert F[i, j] == H[i, j] == 0.0, f"{name}: fill-in at ({i}, {j})"


@pytest.mark.parametrize("name", CASES)
def test_forward_dynamics_crba_route_equals_aba_and_pinocchio(name, dn):
    c = get_case(name)
    for q, qd, _, tau in c.states:
        via_crba = dn.forward_dynamics(c.model, q, qd, tau, method="crba")
        assert_close(via_crba, c.oracle.aba(q, qd, tau), what=f"{name}: FD by CRBA + L^T D L vs Pinocchio aba")
        assert_close(via_crba, dn.forward_dynamics(c.model, q, qd, tau), what=f"{name}: CRBA route vs ABA")


@pytest.mark.parametrize("name", ["random_floating_10", "solo12_floating", "talos_floating_mimic"])
def test_floating_base_inverse_dynamics_table_9_6(name, dn):
    """Given joint accelerations and no wrench on the base, the base acceleration makes the base
    wrench of ordinary inverse dynamics vanish, and the joint torques are that ID's (Pinocchio)."""
    c = get_case(name)
    for q, qd, qdd, _ in c.states:
        a_base, tau_j = dn.floating_base_inverse_dynamics(c.model, q, qd, qdd[6:])
        full = np.r_[a_base, qdd[6:]]
        tau = c.oracle.rnea(q, qd, full)
        assert_close(tau[:6], np.zeros(6), rtol=1e-9, what=f"{name}: base wrench")
        assert_close(tau_j, tau[6:], what=f"{name}: joint torques")


def test_the_one_dense_cholesky_against_numpy():
    """algorithms/dense.cholesky (the factor the mimic, closed-loop and operational-space kernels share) and its
    solves against numpy's Cholesky and solve; the first non-positive pivot is reported by its column."""
    from numba import njit

    from dynamics_node.algorithms.tree import dense

    @njit
    def run(A, b, B, tol):
        n = A.shape[0]
        L = np.zeros((n, n))
        k = dense.cholesky(A, L, n, tol)
        if k < 0:
            dense.cholesky_solve(L, b, n)
            dense.cholesky_solve_rows(L, B, n, 2.0)
        return k, L

    rng = np.random.default_rng(7)
    for n in (1, 3, 8):
        M = rng.standard_normal((n, n))
        A = M @ M.T + n * np.eye(n)
        b, B = rng.standard_normal(n), rng.standard_normal((n, 3))
        x, X = b.copy(), B.copy()
        k, L = run(A, x, X, 1e-12)
        assert k == -1
        np.testing.assert_allclose(np.tril(L), np.linalg.cholesky(A), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=1e-10)
        np.testing.assert_allclose(X, 2.0 * np.linalg.solve(A, B), rtol=1e-10)
    A = np.diag([2.0, 1.0, -1.0, 3.0])
    assert run(A, np.zeros(4), np.zeros((4, 1)), 1e-12)[0] == 2
