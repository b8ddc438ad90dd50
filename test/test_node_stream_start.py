"""A model arriving in the stream process, in-process (no DDS): what the stream answers with
before and after its observer's kernels are loaded, the states it builds from the node's messages
(stream_process and model_state.StateLoader), and when the node may say so (StreamProcess.when_applied:
'serving' and the model lines wait for the stream). The node as processes, on a busy machine:
test_node_busy.py. No timing is asserted."""
from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

J = [f"joint{i}" for i in range(1, 8)]


def _cfg(**values):
    from dynamics_node.ros.params.param_checks import validate
    return validate(values)


def _counting_load(monkeypatch):
    """model_state.load wrapped: the list of descriptions it was asked to load."""
    from dynamics_node.ros import model_state
    calls, real = [], model_state.load

    def load(cfg, topic_text=None, *a, **kw):
        calls.append(cfg.urdf_path or cfg.robot_description or topic_text)
        return real(cfg, topic_text, *a, **kw)
    monkeypatch.setattr(model_state, "load", load)
    return calls


def _heavy_arm7(factor=2.0, name="arm7_heavy", pads=0):
    """arm7's URDF with every link mass times factor (same joints, other gravity torques), and
    `pads` small bodies fixed to link7 (a description that takes longer to load: 0.1 s for 1000)."""
    import xml.etree.ElementTree as ET
    root = ET.fromstring(ns.ARM7.read_text())
    root.set("name", name)
    for m in root.iter("mass"):
        m.set("value", repr(float(m.get("value")) * factor))
    for k in range(pads):
        link = ET.SubElement(root, "link", name=f"pad{k}")
        inertial = ET.SubElement(link, "inertial")
        ET.SubElement(inertial, "origin", xyz=f"0 0 {0.0001 * k}")
        ET.SubElement(inertial, "mass", value="0.001")
        ET.SubElement(inertial, "inertia", ixx="1e-7", ixy="0", ixz="0", iyy="1e-7", iyz="0", izz="1e-7")
        joint = ET.SubElement(root, "joint", name=f"pad_joint{k}", type="fixed")
        ET.SubElement(joint, "parent", link="link7")
        ET.SubElement(joint, "child", link=f"pad{k}")
    return ET.tostring(root, encoding="unicode")


def _masses(xml_text):
    import xml.etree.ElementTree as ET
    return sum(float(m.get("value")) for m in ET.fromstring(xml_text).iter("mass"))


# ----------------------------------------------------------------------------- the hand-off
def test_a_hand_off_without_a_token_keeps_the_token_of_the_one_before_it():
    """The node waits for the token of each state it sends: a description switched meanwhile by
    the stream process (no token) must not hide it when both are merged before the stream runs."""
    from dynamics_node.ros.stream_executor import ConfigHandOff
    h = ConfigHandOff()
    h.put("A", "cfgA", {"gravity"}, 5)
    h.put("B", "cfgB", {"robot_description"}, None)
    assert h.take() == ("B", "cfgB", {"gravity", "robot_description"}, 5)
    assert h.take() is None
    h.put("A", "cfgA", set(), 5)
    h.put("B", "cfgB", set(), 6)
    assert h.take()[3] == 6


# ----------------------------------------------------------------------------- StateLoader
def test_the_same_inputs_give_the_same_state_and_any_change_a_new_one(monkeypatch):
    from dynamics_node.ros.model_state import StateLoader
    calls = _counting_load(monkeypatch)
    sl = StateLoader()
    c = _cfg(urdf_path=str(ns.ARM7))
    st = sl.state(c, None, {}, {"urdf_path"})
    assert sl.state(c, None, {}, set()) is st and len(calls) == 1   # kept: no merge or observer reset
    c2 = _cfg(urdf_path=str(ns.ARM7), gravity=[0.0, 0.0, -1.62])
    st2 = sl.state(c2, None, {}, {"gravity"})
    assert st2 is not st and len(calls) == 1                        # gravity is no reason to read the file
    np.testing.assert_allclose(st2.model.gravity, [0.0, 0.0, -1.62])
    pay = {"tool0": (1.5, (0.0, 0.0, 0.05), (0.0,) * 6)}
    st3 = sl.state(c2, None, pay, set())
    assert st3 is not st2 and abs(st3.model.total_mass() - (_masses(ns.ARM7.read_text()) + 1.5)) < 1e-12


def test_a_file_is_read_again_when_a_model_parameter_changes(tmp_path):
    """Setting urdf_path (even to the same name) reads the file again: it may have changed."""
    from dynamics_node.ros.model_state import StateLoader
    path = tmp_path / "arm.urdf"
    path.write_text(ns.ARM7.read_text())
    sl = StateLoader()
    c = _cfg(urdf_path=str(path))
    st = sl.state(c, None, {}, {"urdf_path"})
    assert abs(st.model.total_mass() - _masses(ns.ARM7.read_text())) < 1e-12
    heavy = _heavy_arm7(3.0)
    path.write_text(heavy)
    assert sl.state(c, None, {}, set()) is st                       # nothing changed: not read
    st2 = sl.state(c, None, {}, {"urdf_path"})
    assert abs(st2.model.total_mass() - _masses(heavy)) < 1e-9


def test_a_forwarded_description_is_loaded_once_and_a_refusal_returns_without_loading(monkeypatch):
    """The node forwards a new model first (the stream switches to it), then sends its own state of
    it (the same state object: nothing is reset); after a refusal it sends its previous state,
    which the stream still holds loaded."""
    from dynamics_node.ros.model_state import StateLoader
    calls = _counting_load(monkeypatch)
    a, b = ns.ARM7.read_text(), _heavy_arm7()
    sl = StateLoader()
    c = _cfg()                                  # no robot given: the topic is the source
    assert sl.state(c, None, {}, set()) is None
    st_a = sl.preview(c, a, {}, set())
    assert st_a.model.name == "arm7" and sl.current_state() == (st_a, c)
    assert sl.state(c, a, {}, set()) is st_a
    st_b = sl.preview(c, b, {}, set())
    assert st_b.model.name == "arm7_heavy" and abs(st_b.model.total_mass() - _masses(b)) < 1e-9
    back = sl.state(c, a, {}, set())            # the node refused b: its previous state again
    assert back.model.name == "arm7" and abs(back.model.total_mass() - _masses(a)) < 1e-12
    assert [x for x in calls if x] == [a, b]    # each description loaded once


def test_a_file_set_by_parameter_is_read_once_for_the_preview_and_the_state_after_it(monkeypatch, tmp_path):
    from dynamics_node.ros.model_state import StateLoader
    calls = _counting_load(monkeypatch)
    path = tmp_path / "heavy.urdf"
    heavy = _heavy_arm7(3.0)
    path.write_text(heavy)
    sl = StateLoader()
    sl.state(_cfg(urdf_path=str(ns.ARM7)), None, {}, {"urdf_path"})
    c = _cfg(urdf_path=str(path))
    st = sl.preview(c, None, {}, {"urdf_path"})
    assert abs(st.model.total_mass() - _masses(heavy)) < 1e-9
    assert sl.state(c, None, {}, {"urdf_path"}) is st          # the node's state of it: taken already
    assert calls == [str(ns.ARM7), str(path)]
    assert sl.state(c, None, {}, {"urdf_path"}) is not st      # set again later: read again
    assert calls == [str(ns.ARM7), str(path), str(path)]


def test_a_bad_forwarded_description_raises_and_keeps_the_state():
    from dynamics_node.ros.model_state import StateLoader
    sl = StateLoader()
    c = _cfg()
    st = sl.state(c, None, {}, set())
    with pytest.raises(Exception):  # noqa: B017 - whatever the loader raises: the node names it
        sl.preview(c, "<robot name='broken'><link name='a'/><joint name='j' type='revolute'>", {}, set())
    assert sl.current_state() == (st, c)


# ----------------------------------------------------------------------------- the stream
def test_torques_before_the_observer_kernels_and_estimates_from_the_first_joint_state_after():
    """A fresh stream process answers with gravity torques as soon as it has the robot; the
    observer runs once `extras` is on (its kernels loaded), from the next joint state: r = 0 there,
    then the core observer fed every sample from that one."""
    import dynamics_node as dn
    import test_observer_core as core
    from dynamics_node.algorithms.estimation import observer as obs
    from dynamics_node.ros.model_state import build_state, load
    from dynamics_node.ros.stream import Stream
    from test_node_observer_inprocess import Log, Node
    from urdfgen import PinOracle
    c = _cfg(urdf_path=str(ns.ARM7), observer_gain=200.0)
    st = build_state(load(c), c, {})
    node = Node()
    s = Stream(node, lambda n: n, Log())
    s.extras = False
    s.configure(st, c, {"joint_states_topic"}, now=True)
    sim = core.simulate(st.model, seconds=0.1, push=False)
    t0 = 5_000_000_000

    def feed(samples):
        for t, q, qd, tau, _ in samples:
            s.on_joint_state(ns.joint_state(J, q, qd, stamp_ns=t0 + round(t * 1e9), efforts=tau))
    feed(sim[:30])
    grav = node.of("~/gravity_torques")
    assert len(grav) == 30 and not node.of("~/external_torques") and s.observer is None
    pin = PinOracle(ns.ARM7.read_text(), st.model)
    for (t, q, *_), g in zip(sim, grav):
        np.testing.assert_allclose(g.effort, pin.gravity(q), rtol=1e-9, atol=1e-9)
    s.extras = True                       # as the stream process does once the kernels are loaded
    s.configure(st, c, set(), now=True)
    feed(sim[30:])
    ext = node.of("~/external_torques")
    assert len(ext) == len(sim) - 30 and len(node.of("~/gravity_torques")) == len(sim)
    assert np.array_equal(ext[0].effort, np.zeros(7))
    ref = obs.MomentumObserver(st.model, 200.0, timeout=c.joint_state_timeout)
    for (t, q, qd, tau, _), e in zip(sim[30:], ext):
        np.testing.assert_allclose(e.effort, ref.update(t, q, qd, tau, g=dn.gravity(st.model, q)),
                                   rtol=1e-9, atol=1e-9)


def test_a_new_model_is_answered_whole_from_the_joint_state_after_the_switch():
    """Same joint names, other masses: every answer is one model's gravity at its joint state,
    the old one's until the switch and the new one's from the next joint state on."""
    from dynamics_node.ros.model_state import StateLoader
    from dynamics_node.ros.stream import Stream
    from test_node_observer_inprocess import Log, Node
    from urdfgen import PinOracle
    sl = StateLoader()
    c = _cfg(observer_gain=0.0)
    sl.state(c, None, {}, set())
    a, b = ns.ARM7.read_text(), _heavy_arm7()
    node = Node()
    s = Stream(node, lambda n: n, Log())
    st_a = sl.preview(c, a, {}, set())
    s.configure(st_a, c, {"joint_states_topic"}, now=True)
    rng = np.random.default_rng(7)
    qs = rng.uniform(-1.5, 1.5, (20, 7))
    for k, q in enumerate(qs[:10]):
        s.on_joint_state(ns.joint_state(J, q, stamp_ns=k))
    st_b = sl.preview(c, b, {}, set())
    s.configure(st_b, c, {"robot_description"}, now=True)
    for k, q in enumerate(qs[10:], 10):
        s.on_joint_state(ns.joint_state(J, q, stamp_ns=k))
    out = node.of("~/gravity_torques")
    assert [ns.stamp_ns(m) for m in out] == list(range(20))
    pa, pb = PinOracle(a, st_a.model), PinOracle(b, st_b.model)
    for k, (m, q) in enumerate(zip(out, qs)):
        assert list(m.name) == J
        np.testing.assert_allclose(m.effort, (pa if k < 10 else pb).gravity(q), rtol=1e-9, atol=1e-9)


# ----------------------------------------------------------------------------- when the node says so
class _Log:
    def __init__(self):
        self.lines = []

    def info(self, t, **_kw):
        self.lines.append(t)

    warning = error = info


def _stream_process_fed():
    """A StreamProcess whose reports' thread reads what the test sends (no child process)."""
    from dynamics_node.ros.stream_process import StreamProcess
    sp = StreamProcess("n", "/", _Log())
    ours, theirs = multiprocessing.Pipe()
    threading.Thread(target=sp._receive, args=(theirs,), daemon=True).start()
    return sp, ours


def _wait(event):
    assert event.wait(30), "the callback never ran"


def test_the_lines_wait_until_the_stream_is_ready_and_has_taken_the_state():
    sp, pipe = _stream_process_fed()
    said = []
    done = threading.Event()
    sp.seq = 2                            # two states sent
    sp.when_applied(lambda err: (said.append(("serving", err)), done.set()))
    pipe.send(("applied", 1))
    pipe.send(("applied", 2))             # taken, but its observer's kernels are still loading
    pipe.send(("report", {}))
    sp.ready_event.wait(0.2)
    assert said == []
    pipe.send(("ready", 1234))
    _wait(done)
    assert said == [("serving", None)]
    # a later state: its line waits for that state, not an earlier one
    sp.seq = 3
    done.clear()
    sp.when_applied(lambda err: (said.append(("reloaded", err)), done.set()))
    pipe.send(("applied", 2))
    pipe.send(("report", {}))
    assert not done.wait(0.2)
    pipe.send(("applied", 3))
    _wait(done)
    assert said[-1] == ("reloaded", None)
    # one it could not build: said, with the reason
    sp.seq = 4
    done.clear()
    sp.when_applied(lambda err: (said.append(("bad", err)), done.set()))
    pipe.send(("error", "ConfigError: no such link", 4))
    _wait(done)
    assert said[-1] == ("bad", "ConfigError: no such link")
    # when it has it already: at once, in the calling thread
    sp.seq = 3
    sp.when_applied(lambda err: said.append(("now", err)))
    assert said[-1] == ("now", None)
