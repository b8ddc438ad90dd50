"""Bad input to the contact functions is an InputError naming the argument, nothing else
is raised, nothing non-finite is returned."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dynamics_node as dn

ARM = "urdf/arm7.urdf"


@pytest.fixture(scope="module")
def arm():
    return dn.load_model(ARM)


Q = np.array([0.1, 0.5, -0.2, -1.2, 0.3, 0.8, 0.1])


@pytest.mark.parametrize("kw,match", [
    (dict(link=3), "link"),
    (dict(link="tool0", point=(0, 0)), "point"),
    (dict(link="tool0", point=(0, np.nan, 0)), "point"),
    (dict(link="tool0", point="abc"), "point"),
    (dict(link="tool0", normal=(0, 0, 0)), "normal"),
    (dict(link="tool0", normal=(0, np.inf, 1)), "normal"),
    (dict(link="tool0", normal=None), "normal"),
    (dict(link="tool0", friction=-0.1), "friction"),
    (dict(link="tool0", friction=math.nan), "friction"),
    (dict(link="tool0", friction="0.5"), "friction"),
    (dict(link="tool0", friction=True), "friction"),
    (dict(link="tool0", stiffness=0.0), "stiffness"),
    (dict(link="tool0", damping=-1.0), "damping"),
    (dict(link="tool0", stiffness=math.inf), "stiffness"),
    (dict(link="tool0", surface_point=(0, 0, math.nan)), "surface_point"),
])
def test_contact_arguments(kw, match):
    link = kw.pop("link")
    with pytest.raises(dn.InputError, match=match):
        dn.Contact(link, **kw)


def test_contact_is_immutable():
    c = dn.Contact("tool0")
    with pytest.raises(AttributeError):
        c.friction = 2.0
    with pytest.raises(ValueError):
        c.normal[0] = 1.0


def _calls(m, cs):
    z = np.zeros(7)
    return {
        "contact_forward_dynamics": lambda **k: dn.contact_forward_dynamics(
            m, k.get("q", Q), k.get("qd", z), k.get("tau", z), k.get("contacts", cs), **k.get("extra", {})),
        "impact": lambda **k: dn.impact(m, k.get("q", Q), k.get("qd", z), k.get("contacts", cs), **k.get("extra", {})),
        "soft_contact_forces": lambda **k: dn.soft_contact_forces(m, k.get("q", Q), k.get("qd", z),
                                                                  k.get("contacts", cs), **k.get("extra", {})),
        "simulate_step": lambda **k: dn.simulate_step(m, k.get("q", Q), k.get("qd", z), k.get("tau", z),
                                                      k.get("contacts", cs), k.get("dt", 1e-3), **k.get("extra", {})),
    }


@pytest.mark.parametrize("fn", ["contact_forward_dynamics", "impact", "soft_contact_forces", "simulate_step"])
@pytest.mark.parametrize("case,match", [
    (dict(q=np.ones(6)), "q"),
    (dict(q=np.r_[np.nan, np.ones(6)]), r"q\[0\]"),
    (dict(qd=np.r_[np.ones(6), np.inf]), r"qd(_minus)?\[6\]"),
    (dict(qd="x"), "qd"),
    (dict(contacts=[dn.Contact("nope")]), r"contacts\[0\].*unknown link 'nope'"),
    (dict(contacts=[dn.Contact("base_link")]), r"contacts\[0\].*fixed to the world"),
    (dict(contacts=[(0, 0, 1)]), r"contacts\[0\] must be a dn.Contact"),
    (dict(contacts=dn.Contact("tool0")), "contacts must be a list"),
    (dict(contacts=None), "contacts must be a list"),
])
def test_bad_arguments(arm, fn, case, match):
    call = _calls(arm, [dn.Contact("tool0")])[fn]
    with pytest.raises(dn.InputError, match=match):
        call(**case)


@pytest.mark.parametrize("case,match", [
    (dict(tau=np.ones(3)), "tau"), (dict(tau=[np.nan] * 7), "tau"),
    (dict(extra={"f_ext": {"nope": (0, 0, 0, 0, 0, 0)}}), "nope"),
    (dict(extra={"f_ext": [1, 2]}), "f_ext"),
    (dict(extra={"rest_speed": -1.0}), "rest_speed"), (dict(extra={"rest_speed": "a"}), "rest_speed"),
])
def test_bad_forward_dynamics_arguments(arm, case, match):
    with pytest.raises(dn.InputError, match=match):
        _calls(arm, [dn.Contact("tool0")])["contact_forward_dynamics"](**case)


@pytest.mark.parametrize("e", [-0.1, 1.5, math.nan, math.inf, "0.5", None])
def test_restitution_outside_0_1(arm, e):
    with pytest.raises(dn.InputError, match="restitution"):
        dn.impact(arm, Q, np.zeros(7), [dn.Contact("tool0")], restitution=e)


@pytest.mark.parametrize("case,match", [
    (dict(dt=0.0), "dt"), (dict(dt=-1e-3), "dt"), (dict(dt=math.nan), "dt"), (dict(dt="1"), "dt"),
    (dict(extra={"state": np.zeros((2, 3))}), "state"), (dict(extra={"state": np.full((1, 3), np.nan)}), "state"),
    (dict(extra={"state": "x"}), "state"),
])
def test_bad_simulation_arguments(arm, case, match):
    with pytest.raises(dn.InputError, match=match):
        _calls(arm, [dn.Contact("tool0")])["simulate_step"](**case)


def test_closed_loops_are_refused():
    m = dn.load_model("urdf/dual_arm_object.urdf")
    q = m.neutral()
    with pytest.raises(dn.InputError, match="loop joints"):
        dn.contact_forward_dynamics(m, q, np.zeros(m.nv), np.zeros(m.nv), [dn.Contact(m.link_names[-1])])


def test_no_contacts_is_forward_dynamics(arm):
    tau = np.linspace(-1, 1, 7)
    r = dn.contact_forward_dynamics(arm, Q, np.ones(7) * 0.1, tau, [])
    np.testing.assert_allclose(r.qdd, dn.forward_dynamics(arm, Q, np.ones(7) * 0.1, tau), rtol=1e-10, atol=1e-10)
    assert r.forces.shape == (0, 3) and r.states == ()
    s = dn.impact(arm, Q, np.ones(7), [])
    assert np.array_equal(s.qd, np.ones(7))


def test_overflow_is_an_input_error(arm):
    with pytest.raises(dn.InputError):
        dn.contact_forward_dynamics(arm, Q, np.full(7, 1e200), np.zeros(7), [dn.Contact("tool0")])
