"""A floating base's quaternion is normalised on use (joints.unit_quaternion), at any finite magnitude:
q with the quaternion scaled by 1e160 or 1e-160 gives what the unit quaternion gives
(the sum of squares of 1e160 overflows, of 1e-160 underflows: the normalisation scales by the
largest component first). A quaternion of norm 0, or one whose components are all subnormal, is
refused by name."""
import pathlib

import numpy as np
import pytest

import dynamics_node as dn
from urdfgen import random_state

ARM = pathlib.Path(__file__).resolve().parent.parent / "urdf" / "arm7.urdf"


@pytest.fixture(scope="module")
def floating():
    m = dn.load_model(str(ARM), floating_base=True)
    q, qd, qdd, tau = random_state(m, np.random.default_rng(14))
    return m, q, qd, qdd, tau


CALLS = {
    "inverse_dynamics": lambda m, q, qd, qdd, tau: dn.inverse_dynamics(m, q, qd, qdd),
    "inverse_dynamics f_ext": lambda m, q, qd, qdd, tau: dn.inverse_dynamics(
        m, q, qd, qdd, f_ext={"tool0": [1, 2, 3, .1, .2, .3]}),
    "gravity": lambda m, q, qd, qdd, tau: dn.gravity(m, q),
    "mass_matrix": lambda m, q, qd, qdd, tau: dn.mass_matrix(m, q),
    "forward_dynamics": lambda m, q, qd, qdd, tau: dn.forward_dynamics(m, q, qd, tau),
    "forward_dynamics crba": lambda m, q, qd, qdd, tau: dn.forward_dynamics(m, q, qd, tau, method="crba"),
    "hybrid_dynamics": lambda m, q, qd, qdd, tau: np.concatenate(dn.hybrid_dynamics(m, q, qd, qdd, tau, ["joint3"])),
    "jacobian": lambda m, q, qd, qdd, tau: dn.jacobian(m, q, "tool0"),
    "link_pose": lambda m, q, qd, qdd, tau: dn.link_pose(m, q, "tool0"),
    "link_velocity": lambda m, q, qd, qdd, tau: dn.link_velocity(m, q, qd, "tool0"),
    "inverse_dynamics_batch": lambda m, q, qd, qdd, tau: dn.inverse_dynamics_batch(m, q[None], qd[None], qdd[None]),
}


@pytest.mark.parametrize("scale", [1e160, 1e-160, 1e300, 1e-300, 7.0])
@pytest.mark.parametrize("name", list(CALLS))
def test_quaternion_of_any_magnitude_is_the_same_rotation(floating, name, scale):
    m, q, qd, qdd, tau = floating
    assert abs(np.linalg.norm(q[3:7]) - 1.0) < 1e-15
    qs = q.copy()
    qs[3:7] *= scale
    ref = np.asarray(CALLS[name](m, q, qd, qdd, tau))
    got = np.asarray(CALLS[name](m, qs, qd, qdd, tau))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(ref).max()), err_msg=name)


@pytest.mark.parametrize("quat", [(0.0, 0.0, 0.0, 0.0), (5e-324, 0.0, 0.0, -0.0), (1e-310, 2e-310, 0.0, 1e-309)])
def test_zero_or_subnormal_quaternion_is_refused_by_name(floating, quat):
    m, q, qd, qdd, tau = floating
    qs = q.copy()
    qs[3:7] = quat
    for name in ("inverse_dynamics", "gravity", "mass_matrix", "forward_dynamics", "jacobian"):
        with pytest.raises(dn.InputError, match=r"q\[3:7\].*root_joint.*quaternion"):
            CALLS[name](m, qs, qd, qdd, tau)


def test_smallest_normal_quaternion_is_usable(floating):
    """The threshold is the smallest normal double, not the old 1e-10 on the norm."""
    m, q, qd, qdd, tau = floating
    qs = q.copy()
    qs[3:7] = (0.0, 0.0, 0.0, 2.2250738585072014e-308)
    qi = q.copy()
    qi[3:7] = (0.0, 0.0, 0.0, 1.0)
    np.testing.assert_allclose(dn.gravity(m, qs), dn.gravity(m, qi), rtol=1e-14, atol=1e-12)
