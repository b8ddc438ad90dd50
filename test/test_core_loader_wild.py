"""Every URDF of example-robot-data (raw files, fixed and floating base) that Pinocchio loads loads here,
and its inverse dynamics, gravity, mass matrix, forward dynamics (where H is well conditioned) and
Jacobians match Pinocchio (test-only oracle, urdfgen.PinOracle) to 1e-9 relative at seeded random
states. Parametrised per file, so a failure names it. Inconsistent inertias, unknown transmission
joints and visual-only problems load with ModelWarnings."""
import pathlib
import warnings
import zlib

import numpy as np
import pytest

import urdfgen as ug
from conftest import assert_close

ROBOTS = ug.erd(".")
FILES = sorted(str(p.relative_to(ROBOTS)) for p in ROBOTS.rglob("*.urdf"))
N_STATES = 2


def _pin_loads(path):
    import pinocchio as pin

    try:
        pin.buildModelFromUrdf(str(path))
        return True
    except Exception:
        return False


def test_the_collection_is_there():
    assert len(FILES) >= 60, f"example-robot-data has {len(FILES)} URDF files, expected about 69"


@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "floating"])
@pytest.mark.parametrize("rel", FILES)
def test_matches_pinocchio(rel, floating, dn):
    path = ROBOTS / rel
    if not _pin_loads(path):
        with pytest.raises(dn.ModelError):  # e.g. ur3.urdf: no <link> at all (urdfdom: no robot name)
            dn.load_model(path, floating_base=floating)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any other warning class is a defect
        warnings.simplefilter("ignore", dn.ModelWarning)
        m = dn.load_model(path, floating_base=floating)
    xml = pathlib.Path(path).read_text()
    oracle = ug.PinOracle(xml, m, floating=floating)
    assert oracle.m.nv == m.nv + sum(1 for _ in m.mimic), f"{rel}: Pinocchio nv {oracle.m.nv}, ours {m.nv}"
    rng = np.random.default_rng(zlib.crc32(f"{rel}{floating}".encode()))
    links = list(m.link_names)
    picks = [links[k] for k in rng.choice(len(links), min(3, len(links)), replace=False)]
    for _ in range(N_STATES):
        q, qd, qdd, tau = ug.random_state(m, rng)
        assert_close(dn.inverse_dynamics(m, q, qd, qdd), oracle.rnea(q, qd, qdd), what=f"{rel}: ID")
        assert_close(dn.gravity(m, q), oracle.gravity(q), what=f"{rel}: gravity")
        H = dn.mass_matrix(m, q)
        Hp = oracle.crba(q)
        assert_close(H, Hp, what=f"{rel}: H")
        if m.nv and np.linalg.cond(Hp) < 1e8:
            assert_close(dn.forward_dynamics(m, q, qd, tau), oracle.aba(q, qd, tau), rtol=1e-9, what=f"{rel}: FD")
        for link in picks:
            assert_close(dn.jacobian(m, q, link), oracle.jacobian(q, link), what=f"{rel}: J {link}")
