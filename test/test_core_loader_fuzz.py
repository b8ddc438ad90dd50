"""Time-bounded property-based fuzz of the loader on mutated real URDFs:
whatever the mutation, load_model either returns a model whose gravity and inverse dynamics at the
neutral configuration are finite, or raises a DynamicsError subclass; never another exception.
Derandomized (a fixed sequence of examples), 200 examples."""
import math
import warnings
import xml.etree.ElementTree as ET
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import urdfgen as ug

SOURCES = [ug.REPO / "urdf" / "arm7.urdf", ug.erd("panda_description/urdf/panda.urdf"),
           ug.erd("ur_description/urdf/ur5_robot.urdf"),
           ug.erd("double_pendulum_description/urdf/double_pendulum.urdf"),
           ug.DATA / "sixlink.urdf"]
TEXTS = [p.read_text() for p in SOURCES]
NUMERIC = ("xyz", "rpy", "value", "ixx", "ixy", "ixz", "iyy", "iyz", "izz", "lower", "upper", "effort",
           "velocity", "damping", "friction", "multiplier", "offset")
NUMBER_TEXT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e308", "-1e308", "1e155", "1e200 0 0", "0 0 0", "1e-320", "-0", "nan", "inf", "abc", "",
                     "1 2", "1 2 3 4", "0x10", "1_0", " 1 ", "1e400", "-5", "0 0 1e31", "٣"]),
    st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=4).map(lambda v: " ".join(map(repr, v))),
)
NAMES = st.sampled_from(["", "root_joint", "ghost", "base", "world", "x" * 300, "j1", "link1", "a b", "\u00e9"])


def _elements(root):
    return [el for el in root.iter() if isinstance(el.tag, str)]


def _mutate(data, text):
    root = ET.fromstring(text)
    els = _elements(root)
    for _ in range(data.draw(st.integers(1, 3), label="n_mutations")):
        kind = data.draw(st.sampled_from(["number", "name", "delete", "duplicate", "type", "junk", "move"]),
                         label="kind")
        el = els[data.draw(st.integers(0, len(els) - 1), label="element")]
        if kind == "number":
            keys = [k for k in el.attrib if k in NUMERIC] or list(NUMERIC)
            el.set(data.draw(st.sampled_from(keys)), data.draw(NUMBER_TEXT, label="number"))
        elif kind == "name":
            keys = [k for k in el.attrib if k in ("name", "link", "joint")] or ["name"]
            el.set(data.draw(st.sampled_from(keys)), data.draw(NAMES, label="name"))
        elif kind == "delete" and el is not root:
            parent = next(p for p in els if el in list(p))
            parent.remove(el)
            els = _elements(root)
        elif kind == "duplicate" and el is not root:
            parent = next(p for p in els if el in list(p))
            parent.append(ET.fromstring(ET.tostring(el)))
            els = _elements(root)
        elif kind == "type":
            el.set("type", data.draw(st.sampled_from(["revolute", "continuous", "prismatic", "fixed", "floating",
                                                      "planar", "spherical", "", "bogus"])))
        elif kind == "junk":
            el.append(ET.fromstring(data.draw(st.sampled_from([
                "<gazebo><material value='x'/></gazebo>", "<mimic joint='ghost'/>", "<inertial/>",
                "<transmission name='t'><joint name='ghost'/></transmission>", "<axis xyz='0 0 0'/>",
                "<origin xyz='1e29 0 0' rpy='1e300 0 0'/>", "<limit effort='nan'/>", "<visual><texture/></visual>",
                "<loop_joint name='lj' type='revolute'><predecessor link='ghost'/>"
                "<successor link='base'/></loop_joint>",
            ]))))
            els = _elements(root)
        elif kind == "move" and el is not root:
            parent = next(p for p in els if el in list(p))
            parent.remove(el)
            target = els[data.draw(st.integers(0, len(els) - 1))]
            if target is not el and el not in _elements(target) and el.iter:
                target.append(el)
            els = _elements(root)
    out = ET.tostring(root, encoding="unicode")
    if data.draw(st.booleans(), label="text_edit"):
        k = data.draw(st.integers(0, len(out)), label="at")
        junk = ["", "<", "&", "\x00", "\ud800", "]]>", "<!--", "\ufeff", "&lol;"]
        out = out[:k] + data.draw(st.sampled_from(junk)) + out[k:]
    return out


@settings(max_examples=200, derandomize=True, deadline=timedelta(seconds=10), database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_mutated_urdfs_load_or_are_refused(dn, data):
    text = _mutate(data, TEXTS[data.draw(st.integers(0, len(TEXTS) - 1), label="source")])
    floating = data.draw(st.booleans(), label="floating_base")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dn.ModelWarning)
            m = dn.load_model(text, floating_base=floating)
    except dn.DynamicsError:
        return
    q = m.neutral()
    ones = np.ones(m.nv)
    g = dn.gravity(m, q)
    tau = dn.inverse_dynamics(m, q, ones, ones)
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(tau)), (g, tau)
    assert all(math.isfinite(x) for x in np.asarray(dn.mass_matrix(m, q)).ravel())


@pytest.fixture(scope="module")
def dn():
    import dynamics_node

    return dynamics_node
