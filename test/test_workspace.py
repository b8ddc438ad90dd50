"""The workspace path of docs/install.md, on ROS 2 Jazzy, as a robot's user types it: this repository
copied to WS/src/dynamics_node, plain `colcon build` in WS, `source install/setup.bash`, then the
page's commands as written (`ros2 launch`, `ros2 run`, `ros2 interface show`).

ROS 2 Jazzy is a venv of its pip wheels (`make workspace-venv`: build/ws-jazzy/venv, reused while its
requirement files are unchanged) standing in for /opt/ros/jazzy: activating it and setting
AMENT_PREFIX_PATH and CMAKE_PREFIX_PATH to it is what `source /opt/ros/jazzy/setup.bash` does; it
holds what rosdep installs from package.xml, colcon from PyPI and the ros2 kit (launch, launch_ros,
ros2cli: no wheels exist), not dynamics_node. Its CMake files were given the wheels' path fix (an
artefact of the wheels: a distribution's user never does that).

The kernel cache (XDG_CACHE_HOME) starts as a user's who ran `make setup` in the clone: the source
tree's kernels (workspace_support.seed_cache), so colcon build compiles none again but adopts them for
the installed copy (_jit_build.adopt; bench/bench_install.py times a build from an empty cache). The
first start must compile nothing (no file of the cache is written or changed by it) and use numba's
cache of the INSTALLED code (numba's own locator names its folder), and the node's torques are
Pinocchio's. Every process runs with ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST and the suite's own
ROS_DOMAIN_ID. Skipped, saying why, where the kit is absent (a user's clone); under `make test`
(DYNAMICS_REQUIRE_WORKSPACE=1) a missing venv is an error.
"""
from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest

import doc_commands as dc
import node_support as ns
import workspace_support as wss

REPO = ns.REPO
PAGE = REPO / "docs" / "install.md"
Q = [0.0, 0.5, 0.0, -1.0, 0.0, 0.5, 0.0]

pytestmark = pytest.mark.skipif(wss.KIT is None, reason="no ../shared/ros2-python: without the ros2 kit the "
                                "workspace venv has no `ros2` (a robot's distribution has it)")


def _block(first):
    """The commands of docs/install.md's ```sh block whose first command is `first`."""
    for lang, _, body in dc.fenced_blocks(PAGE):
        cmds = dc.shell_commands(body) if lang == "sh" else []
        if cmds and cmds[0] == first:
            return cmds
    raise AssertionError(f"docs/install.md has no ```sh block starting with {first!r}")


def _your_package():
    """The files of the page's package `my_controller` (its blocks that name a file), and the empty
    __init__.py the text names."""
    files = dc.file_blocks(PAGE)
    assert "src/my_controller/package.xml" in files, sorted(files)
    return {**files, "src/my_controller/my_controller/__init__.py": ""}


def _command(cmd):
    for lang, _, body in dc.fenced_blocks(PAGE):
        if lang == "sh" and cmd in dc.shell_commands(body):
            return cmd
    raise AssertionError(f"docs/install.md does not show {cmd!r}")


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    if not wss.ready():
        if os.environ.get("DYNAMICS_REQUIRE_WORKSPACE") == "1":
            pytest.fail(f"no {wss.WS_VENV} with colcon and ros2: `make workspace-venv` makes it")
        pytest.skip(f"no {wss.WS_VENV}: `make workspace-venv` makes it (make test does)")
    w, w.build_seconds, w.build_output = wss.build(tmp_path_factory.mktemp("ws"), _block("colcon build")[:1],
                                                   files=_your_package(), seed=True)
    print(f"\nworkspace: colcon build {w.build_seconds:.0f} s")
    yield w
    w.run(["ros2 daemon stop"], timeout=60)


def test_colcon_build_builds_the_node_its_interfaces_and_its_executables(ws):
    """`colcon build` finds dynamics_node (and the page's package of a user, beside it) and builds it
    with its message and service types, whose `ros2 interface show` is the .srv file; `source
    install/setup.bash` makes ros2 find the package."""
    assert re.search(r"Summary: 2 packages finished", ws.build_output), ws.build_output[-3000:]
    prefix = ws.root / "install" / "dynamics_node"
    for exe in ("dynamics_node", "dynamics_cli", "dynamics_summary", "dynamics_identify"):
        assert (prefix / "lib" / "dynamics_node" / exe).is_file(), exe
    cmds = _block("colcon build")
    assert cmds == ["colcon build", "source install/setup.bash"], cmds
    show = _command("ros2 interface show dynamics_interfaces/srv/GravityCompensation")
    r = ws.run(["ros2 pkg prefix dynamics_node", show], timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0] == str(prefix), r.stdout

    def fields(text):
        return [re.sub(r"\s+", " ", ln.split("#")[0]).strip() for ln in text.splitlines()
                if ln.split("#")[0].strip()]
    srv = (REPO / "dynamics_interfaces" / "srv" / "GravityCompensation.srv").read_text()
    assert fields("\n".join(r.stdout.splitlines()[1:])) == fields(srv), r.stdout


def test_first_launch_compiles_nothing_and_serves_pinocchios_gravity(ws):
    """docs/install.md's `ros2 launch dynamics_node dynamics.launch.py` after the build: numba's cache
    holds the installed code's entries (the folder numba's locator names for the installed files),
    the start writes nothing into the cache, the node publishes gravity torques of joint states and
    `ros2 run dynamics_node dynamics_cli ...` answers; both equal Pinocchio's gravity."""
    from numba.core.caching import _CacheLocator
    from sensor_msgs.msg import JointState
    from conftest import assert_close
    from urdfgen import PinOracle
    import dynamics_node as dn

    installed = ws.installed_package()
    assert installed.is_relative_to(ws.root / "install"), installed
    (hashdir,) = [p for p in (ws.cache / "dynamics_node").iterdir() if p.is_dir() and not p.name.startswith(".")]
    for f in ("algorithms/estimation/observer.py", "algorithms/tree/rnea.py"):
        sub = _CacheLocator.get_suitable_cache_subpath(str(installed / f))
        assert any((hashdir / sub).glob("*.nbi")), f"no numba cache of the installed {f} in {hashdir / sub}"
    assert (hashdir / "aot" / "kernels.so").is_file()
    log = (ws.root / "log" / "latest_build" / "dynamics_node" / "stdout_stderr.log").read_text()
    assert f"reusing the kernels compiled for {REPO / 'dynamics_node'}" in log, log[-3000:]
    before = ws.cache_files()

    model = dn.load_model(str(ns.ARM7))
    oracle = PinOracle(ns.ARM7.read_text(), model).gravity(np.array(Q))
    c = ns.ros()
    torques, sub = c.subscribe(JointState, "/dynamics_node/gravity_torques")
    pub = c.publisher(JointState, "/joint_states")
    launch = ws.start(_command("ros2 launch dynamics_node dynamics.launch.py"))
    try:
        assert launch.wait_for(r"serving"), launch.output()[-4000:]
        got = []
        end = time.monotonic() + 60
        while not got and time.monotonic() < end:
            pub.publish(ns.joint_state(list(model.joint_names), Q))
            got = ns.drain(torques, timeout=0.1)
        assert got, f"no gravity torque within 60 s of serving:\n{launch.output()[-3000:]}"
        assert_close(np.array(got[-1].effort), oracle, what="gravity_torques of the installed node")
        cli = _command("ros2 run dynamics_node dynamics_cli gravity_compensation -q 0 0.5 0 -1.0 0 0.5 0")
        r = ws.run([cli], timeout=120)
        assert r.returncode == 0 and "success: true" in r.stdout, r.stdout + r.stderr
        eff = re.search(r"effort[:=] ?\[([^\]]*)\]", r.stdout)
        assert eff, r.stdout
        assert_close(np.array([float(x) for x in eff.group(1).split(",")]), oracle, what="dynamics_cli's answer")
    finally:
        c.node.destroy_publisher(pub)
        c.node.destroy_subscription(sub)
        rc, out = launch.stop()
    assert rc == 0 and "Traceback" not in out, out[-3000:]
    after = ws.cache_files()
    changed = sorted(k for k in after if before.get(k) != after[k])
    assert not changed, f"the first start compiled kernels (cache files written: {changed[:10]})"


def test_the_kernel_command_is_a_no_op_when_the_build_compiled_them(ws):
    """docs/install.md's command for another user, run by the one who built: nothing to do, nothing written."""
    before = ws.cache_files()
    r = ws.run([_command("python3 -m dynamics_node._jit_build build --if-missing")], timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout + r.stderr
    assert ws.cache_files() == before


def test_node_alone_says_what_it_waits_for(ws):
    """`ros2 run dynamics_node dynamics_node` with no robot: its first lines say what it waits for."""
    from dynamics_node.ros.model_state import WAITING

    p = ws.start(_command("ros2 run dynamics_node dynamics_node"))
    try:
        assert p.wait_for(re.escape(WAITING), timeout=120), p.output()[-3000:]
        first = [ln for ln in p.output().splitlines() if ln.strip()][:6]
        assert any(WAITING in ln for ln in first), first
    finally:
        rc, out = p.stop(group=True)
    assert rc == 0 and "Traceback" not in out, out[-3000:]


@pytest.mark.parametrize("cmd", ["ros2 launch dynamics_node sim.launch.py",
                                 "ros2 launch dynamics_node sim.launch.py rviz:=true"])
def test_sim_launch_runs_the_simulated_robot_held_by_the_node(ws, cmd):
    """sim.launch.py: the simulated robot publishes joint states and the node its torques; with
    rviz:=true where robot_state_publisher and rviz2 are not installed (no wheels exist), one line
    names them and the rest runs."""
    from sensor_msgs.msg import JointState

    c = ns.ros()
    states, s1 = c.subscribe(JointState, "/joint_states")
    torques, s2 = c.subscribe(JointState, "/dynamics_node/gravity_torques")
    p = ws.start(_command(cmd))
    try:
        assert p.wait_for(r"\[robot_sim\].*serving") and p.wait_for(r"\[dynamics_node\].*serving"), p.output()[-4000:]
        assert ns.collect(states, 10, 60) and ns.collect(torques, 10, 60), p.output()[-3000:]
        missing = [ln for ln in p.output().splitlines() if "not installed" in ln]
        if cmd.endswith("rviz:=true"):
            assert len(missing) == 1 and "robot_state_publisher and rviz2" in missing[0], missing
        else:
            assert not missing, missing
    finally:
        c.node.destroy_subscription(s1)
        c.node.destroy_subscription(s2)
        rc, out = p.stop()
    assert rc == 0 and "Traceback" not in out, out[-3000:]


def test_a_package_of_yours_depends_on_dynamics_node_and_calls_it(ws):
    """docs/install.md's `my_controller`, built by the same `colcon build` beside dynamics_node: colcon
    started it only after dynamics_node finished (its <depend>dynamics_node</depend>), every key of its
    package.xml is a package in src/ or a rosdep key of Jazzy (what `rosdep install --from-paths src
    --ignore-src` resolves), and `ros2 run my_controller gravity_client ...` against the launched node
    prints Pinocchio's gravity torques."""
    import xml.etree.ElementTree as ET

    from conftest import assert_close
    from test_package_deps import rosdep_keys
    from urdfgen import PinOracle
    import dynamics_node as dn

    out = ws.build_output
    finished, started = out.find("Finished <<< dynamics_node"), out.find("Starting >>> my_controller")
    assert 0 <= finished < started, out[-3000:]
    xml = ET.parse(ws.root / "src" / "my_controller" / "package.xml").getroot()
    keys = [e.text.strip() for e in xml if e.tag.endswith("depend")]
    in_src = {ET.parse(p).getroot().findtext("name") for p in (ws.root / "src").glob("*/package.xml")}
    jazzy = {k for k, where in rosdep_keys().items() if "jazzy" in where}
    assert "dynamics_node" in keys and "dynamics_interfaces" not in keys, keys
    unresolved = [k for k in keys if k not in in_src and k not in jazzy]
    assert not unresolved, f"keys rosdep would not resolve: {unresolved}"

    model = dn.load_model(str(ns.ARM7))
    oracle = PinOracle(ns.ARM7.read_text(), model).gravity(np.array(Q))
    launch = ws.start(_command("ros2 launch dynamics_node dynamics.launch.py"))
    try:
        assert launch.wait_for(r"serving"), launch.output()[-4000:]
        r = ws.run([_command("ros2 run my_controller gravity_client 0 0.5 0 -1.0 0 0.5 0")], timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        got = dict(re.findall(r"^(\w+): (\S+) N m$", r.stdout, flags=re.M))
        assert list(got) == list(model.joint_names), r.stdout
        assert_close(np.array([float(v) for v in got.values()]), oracle, rtol=1e-6, what="my_controller (6 decimals)")
    finally:
        rc, out = launch.stop()
    assert rc == 0 and "Traceback" not in out, out[-3000:]
