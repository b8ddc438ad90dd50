"""joints.sincos_all (the RNEA's vectorised sin/cos of the joint angles) and joints.sincos_row (the
same over a row of states, for the batch RNEA) against libm, on the angles where a reduction by pi/2
goes wrong first: multiples of pi/2 and their neighbours, tiny and large angles, and beyond 1e5
where they hand over to libm."""
import math

import numpy as np

from dynamics_node.joints import sincos_all, sincos_row
from dynamics_node.layout import BODY_I, H_NB, HEADER_I, J_QI


def _sincos(angles):
    n = len(angles)
    mi = np.zeros(HEADER_I + BODY_I * n, dtype=np.int64)
    mi[H_NB] = n
    mi[HEADER_I + J_QI::BODY_I] = np.arange(n)  # body i's first coordinate is q[i]
    w = np.full(2 * n + 3, np.nan)
    sincos_all(mi, np.ascontiguousarray(angles, dtype=float), w, 3)
    return w[3:3 + n], w[3 + n:3 + 2 * n]


def _angles():
    rng = np.random.default_rng(7)
    k = np.arange(-400, 401)
    edges = np.concatenate([k * (math.pi / 2), np.nextafter(k * (math.pi / 2), np.inf),
                            np.nextafter(k * (math.pi / 2), -np.inf)])
    return np.concatenate([edges, rng.uniform(-10, 10, 20000), rng.uniform(-1e5, 1e5, 20000),
                           [0.0, -0.0, 1e-300, -1e-300, 5e-324, 1e-8, 99999.9, 1e5, -1e5, 3e5, 1e12, -7e15]])


def _row(angles):
    n = len(angles)
    w = np.full(3 * n + 5, np.nan)
    w[5:5 + n] = angles
    sincos_row(w, 5, 5 + n, 5 + 2 * n, n)
    return w[5 + n:5 + 2 * n], w[5 + 2 * n:5 + 3 * n]


def _check(angles, s, c):
    s_ref = np.array([math.sin(x) for x in angles])
    c_ref = np.array([math.cos(x) for x in angles])
    # within a couple of ulp of libm: absolute 4e-16 (the values are at most 1 in magnitude), or
    # relative 4e-16 where they are tiny (sin near 0)
    np.testing.assert_allclose(s, s_ref, rtol=4e-16, atol=4e-16)
    np.testing.assert_allclose(c, c_ref, rtol=4e-16, atol=4e-16)
    tiny = np.abs(angles) < 1e-6
    np.testing.assert_allclose(s[tiny], s_ref[tiny], rtol=2.3e-16, atol=0)


def test_sincos_all_agrees_with_libm():
    angles = _angles()
    _check(angles, *_sincos(angles))


def test_sincos_row_agrees_with_libm():
    angles = _angles()
    _check(angles, *_row(angles))
