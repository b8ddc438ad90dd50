"""Shared fixtures for the core tests (test_core_*.py).

Models are loaded once per session (numba compiles on first use; its cache is on). Pinocchio is
a test-only oracle. Every case pairs OUR model with a PinOracle that evaluates Pinocchio in our
coordinates (joints matched by name, see urdfgen.PinOracle).
"""
from __future__ import annotations

import functools
import os
import signal
import zlib
import pathlib
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
if str(HERE.parent) not in sys.path:
    sys.path.append(str(HERE.parent))

import urdfgen as ug  # noqa: E402

RTOL = 1e-9


def assert_close(actual, expected, rtol=RTOL, what=""):
    """Relative agreement: |a - e| <= rtol*|e| + rtol*max(1, max|e|) elementwise."""
    actual = np.asarray(actual, dtype=float)
    expected = np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != expected {expected.shape}"
    assert np.all(np.isfinite(actual)), f"{what}: non-finite values {actual}"
    scale = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale, err_msg=what)


# ---------------------------------------------------------------------------------------------
# Cases: (source for ours, xml for Pinocchio, floating, load kwargs)
# ---------------------------------------------------------------------------------------------
def _real(rel):
    return ug.erd(rel)


def _case_spec(name):
    """Returns (our_source, pin_xml, floating)."""
    if name == "arm7":
        p = ug.REPO / "urdf" / "arm7.urdf"
        return p, p.read_text(), False
    real = {
        "panda_mimic": ("panda_description/urdf/panda.urdf", False),
        "ur5": ("ur_description/urdf/ur5_robot.urdf", False),
        "kinova_continuous": ("kinova_description/robots/kinova.urdf", False),
        "baxter_branched": ("baxter_description/urdf/baxter.urdf", False),
        "romeo_floating_mimic": ("romeo_description/urdf/romeo.urdf", True),
        "z1_arm": ("z1_description/urdf/z1.urdf", False),
        "talos_floating_mimic": ("talos_data/robots/talos_full_v2.urdf", True),
        "solo12_floating": ("solo_description/robots/solo12.urdf", True),
    }
    if name in real:
        rel, fl = real[name]
        p = _real(rel)
        return p, p.read_text(), fl
    kind, seed = name.rsplit("_", 1)
    seed = int(seed)
    if kind == "random":
        txt, _ = ug.random_urdf(seed, 11, dynamics=True)
        return txt, txt, False
    if kind == "random_floating":
        txt, _ = ug.random_urdf(seed, 9, dynamics=True)
        return txt, txt, True
    if kind == "random_mimic":
        txt, _ = ug.random_urdf(seed, 10, n_mimic=2)
        return txt, txt, False
    if kind == "random_floating_mimic":
        txt, _ = ug.random_urdf(seed, 9, n_mimic=2)
        return txt, txt, True
    if kind == "random_unnormalised_axes":
        ours, _ = ug.random_urdf(seed, 10, normalize_axes=False)
        ref, _ = ug.random_urdf(seed, 10, normalize_axes=True)
        return ours, ref, False
    raise KeyError(name)


# every example-robot-data URDF (allegro hand, tiago, pr2, ...) is compared in test_core_loader_wild
REAL_CASES = ["arm7", "panda_mimic", "ur5", "z1_arm", "kinova_continuous", "baxter_branched",
              "romeo_floating_mimic", "talos_floating_mimic", "solo12_floating"]
RANDOM_CASES = ["random_0", "random_1", "random_2", "random_3", "random_floating_10", "random_floating_11",
                "random_mimic_20", "random_mimic_21", "random_floating_mimic_22", "random_unnormalised_axes_30"]
ALL_CASES = REAL_CASES + RANDOM_CASES


class Case:
    def __init__(self, name):
        import dynamics_node as dn

        self.name = name
        src, pin_xml, floating = _case_spec(name)
        self.source = src
        self.pin_xml = pin_xml
        self.floating = floating
        self.model = dn.load_model(src, floating_base=floating)
        self.oracle = ug.PinOracle(pin_xml, self.model, floating=floating)
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        self.states = [ug.random_state(self.model, rng) for _ in range(3)]
        links = list(self.model.link_names)
        if len(links) > 14:
            idx = rng.choice(len(links), 14, replace=False)
            links = [links[i] for i in sorted(idx)]
        self.links = links
        self.rng = rng


@functools.lru_cache(maxsize=None)
def get_case(name):
    return Case(name)


@pytest.fixture(scope="session", params=ALL_CASES)
def case(request):
    if request.param == "arm7" and not (ug.REPO / "urdf" / "arm7.urdf").exists():
        pytest.fail("urdf/arm7.urdf missing")
    return get_case(request.param)


@pytest.fixture(scope="session", params=[c for c in ALL_CASES if "floating" not in c])
def fixed_case(request):
    return get_case(request.param)


@pytest.fixture(scope="session")
def dn():
    import dynamics_node

    return dynamics_node


@pytest.fixture(scope="module", autouse=True)
def _ros_endpoints_released():
    """After each module (its node processes stopped first: this fixture is set up before them),
    the test process's ROS clients, subscriptions and publishers are destroyed (RosClient.release),
    so the node processes of later modules do not have to discover them."""
    yield
    ns = sys.modules.get("node_support")
    if ns is not None and ns._CLIENT is not None:
        ns._CLIENT.release()


# ---------------------------------------------------------------------------------------------
# Without Pinocchio (make test-oldest: no Pinocchio 3 for numpy 1.26), said so: DYNAMICS_NO_PINOCCHIO=1
# ---------------------------------------------------------------------------------------------
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under DYNAMICS_NO_PINOCCHIO=1 a test that fails (or whose fixture fails) only because Pinocchio
    cannot be imported is reported as skipped, with that reason. Never without the variable: there a
    comparison that imports Pinocchio fails where it is missing."""
    outcome = yield
    if call.excinfo is None or os.environ.get("DYNAMICS_NO_PINOCCHIO") != "1":
        return
    e = call.excinfo.value
    if isinstance(e, ModuleNotFoundError) and e.name == "pinocchio":
        report = outcome.get_result()
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           "Skipped: compares with Pinocchio, not installed (DYNAMICS_NO_PINOCCHIO=1)")


# Every test has a deadline (pytest-timeout, requirements-test.txt): a test that hangs fails with the
# stacks of all threads of this process and the suite goes on, instead of holding the run until the
# CI's own limit ends it with no trace of where it waited. TEST_DEADLINE covers the slowest test of
# a busy 2-core machine several times over; the tests that build kernels or a workspace in a
# subprocess (limits of 900-1800 s there) are given LONG_DEADLINE by their module. `--timeout N`
# sets every test's deadline instead (make test-busy).
TEST_DEADLINE = 900
LONG_DEADLINE = 2400
LONG_MODULES = ("test_workspace.py", "test_docs.py", "test_core_warm.py", "test_core_aot.py")


_TERMINAL_ERR = []   # a copy of the terminal's stderr, taken while pytest's capture is suspended


def pytest_configure(config):
    _TERMINAL_ERR.append(os.dup(2))   # fd 2 is the capture's file while a test runs
    # A run started in the background by a script (`nohup make test &`, `(make test &)`) begins with
    # SIGINT ignored, and an ignored signal stays ignored across exec: `ros2 launch` started by a test
    # then never hears the Ctrl-C the test sends it. A handler here becomes SIG_DFL in the children.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not config.pluginmanager.hasplugin("timeout"):   # pytest without the plugin: the mark is known
        config.addinivalue_line("markers", "timeout(seconds): this test's deadline (pytest-timeout)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The backstop of the deadline: pytest-timeout's signal needs the main thread to run Python, which a
    thread blocked in C while holding the GIL prevents. faulthandler's watchdog is a C thread: 60 s after
    the deadline it writes every thread's stack to stderr and ends the run (exit code 1)."""
    import faulthandler
    mark = item.get_closest_marker("timeout")
    deadline = mark.args[0] if mark and mark.args else getattr(item.config.option, "timeout", None)
    if deadline:
        err = _TERMINAL_ERR[0] if _TERMINAL_ERR else sys.__stderr__.fileno()
        faulthandler.dump_traceback_later(float(deadline) + 60.0, exit=True, file=err)
    try:
        yield
    finally:
        if deadline:
            faulthandler.cancel_dump_traceback_later()


def pytest_collection_modifyitems(config, items):
    if getattr(config.option, "timeout", None) is not None:   # --timeout given: it is every test's
        return
    for item in items:
        if item.get_closest_marker("timeout") is None:
            long = item.path.name in LONG_MODULES
            item.add_marker(pytest.mark.timeout(LONG_DEADLINE if long else TEST_DEADLINE))
