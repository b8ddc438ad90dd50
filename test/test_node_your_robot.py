"""Your robot, one line (README "Your robot"): the node started exactly as the README shows, with the
shipped parameter file, on robots that are not the demo arm, gives Pinocchio's gravity torques."""
from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import node_support as ns

pytestmark = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")

CONFIG = ns.REPO / "config" / "default.yaml"
BIN = pathlib.Path(sys.executable).parent   # the docs' .venv/bin/: the venv running the tests (.venv-jazzy too)
EXE = BIN / "dynamics_node"
ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",       # a mimic finger
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "z1": "z1_description/urdf/z1.urdf",
    "kinova": "kinova_description/robots/kinova.urdf",   # continuous joints
}


def _exe():
    if EXE.exists():
        return [str(EXE)]
    if os.environ.get("DYNAMICS_REQUIRE_ROS") == "1":
        raise AssertionError(f"{EXE} missing: make setup installs it")
    return [sys.executable, "-m", "dynamics_node.ros"]


class Started:
    """A process started by a command line, its output in a file, killed at the end."""

    def __init__(self, cmd, cwd=ns.REPO):
        import tempfile
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        self.proc = subprocess.Popen(cmd, cwd=str(cwd), env=ns.node_env(), stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def output(self):
        with open(self.log.name) as f:
            return f.read()

    def wait_for(self, *texts, timeout=10.0):
        """The output once it holds every one of texts (or at the timeout): the stream process may
        answer a joint state a moment before the main process has written its start lines."""
        deadline = time.monotonic() + timeout
        while True:
            out = self.output()
            if all(t in out for t in texts) or time.monotonic() > deadline:
                return out
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)


def _random_q(model, seed):
    rng = np.random.default_rng(seed)
    q = np.asarray(model.neutral(), float)
    for j in model.joint_names:
        lo, hi = (model.joint_limits.get(j) or (np.nan, np.nan))[:2]
        lo = lo if np.isfinite(lo) else -np.pi
        hi = hi if np.isfinite(hi) else np.pi
        q[model.q_slice(j)] = rng.uniform(lo, hi)
    return q


def _torques_at(proc, model, q, topic_ns="/dynamics_node", js_topic="/joint_states", extra=None):
    """Publish joint states at q until the node answers on <ns>/gravity_torques; returns the message
    (and the first message on `extra` = (type, topic), if given)."""
    from sensor_msgs.msg import JointState
    c = ns.ros()
    pub = c.publisher(JointState, js_topic)
    out, sub = c.subscribe(JointState, f"{topic_ns}/gravity_torques")
    ext = c.subscribe(*extra) if extra else None
    names = list(model.joint_names)
    pos = [float(q[model.q_slice(j).start]) for j in names]
    deadline = time.monotonic() + ns.START_TIMEOUT
    try:
        while time.monotonic() < deadline:
            if proc.proc.poll() is not None:
                raise AssertionError(f"node exited ({proc.proc.returncode}):\n{proc.output()}")
            pub.publish(ns.joint_state(names, pos))
            got = ns.drain(out, timeout=0.1)
            if got and (ext is None or not ext[0].empty()):
                return got[-1], (ext[0].get() if ext else None)
        raise AssertionError(f"no gravity torques within {ns.START_TIMEOUT} s:\n{proc.output()}")
    finally:
        c.node.destroy_subscription(sub)
        c.node.destroy_publisher(pub)
        if ext:
            c.node.destroy_subscription(ext[1])


def _check_against_pinocchio(model, path, msg, q):
    from conftest import assert_close
    from urdfgen import PinOracle
    oracle = PinOracle(path.read_text(), model)
    assert list(msg.name) == list(model.joint_names)
    assert_close(np.asarray(msg.effort), oracle.gravity(q), what=f"{path.name} gravity torques")


@pytest.mark.parametrize("robot", ["panda", "ur5", "z1"])
def test_readme_command_with_the_shipped_parameter_file_on_another_robot(robot):
    """README: .venv/bin/dynamics_node --ros-args --params-file config/default.yaml -p urdf_path:=..."""
    import dynamics_node as dn
    path = ns.erd(ROBOTS[robot])
    model = dn.load_model(str(path))
    p = Started(_exe() + ["--ros-args", "--params-file", "config/default.yaml", "-p", f"urdf_path:={path}"])
    try:
        q = _random_q(model, 7)
        msg, _ = _torques_at(p, model, q)
        _check_against_pinocchio(model, path, msg, q)
        want = (f"robot '{model.name}' from urdf_path {path}", f"{len(model.joint_names)} joints",
                ", ".join(model.joint_names))
        log = p.wait_for(*want)
        assert all(w in log for w in want), log[-3000:]
    finally:
        p.stop()


def test_make_run_urdf_with_an_effort_command_and_no_command_joints():
    """`make run URDF=...` on Kinova, with an effort command topic and no command_joints: the command
    holds every joint's torque in the model's order, which the node logs at start."""
    import dynamics_node as dn
    from std_msgs.msg import Float64MultiArray
    path = ns.erd(ROBOTS["kinova"])
    model = dn.load_model(str(path))
    rel = os.path.relpath(path, ns.REPO)   # a relative path, as a user in the repository types it
    p = Started(["make", "--no-print-directory", "run", f"URDF={rel}",
                 "ARGS=-p effort_command_topic:=/effort_controller/commands"])
    try:
        q = _random_q(model, 3)
        msg, cmd = _torques_at(p, model, q, extra=(Float64MultiArray, "/effort_controller/commands"))
        _check_against_pinocchio(model, path, msg, q)
        lim = np.array([model.joint_limits[j][2] if model.joint_limits.get(j) else np.inf for j in model.joint_names])
        lim = np.where(np.isfinite(lim) & (lim > 0), lim, np.inf)
        np.testing.assert_array_equal(np.asarray(cmd.data), np.clip(np.asarray(msg.effort), -lim, lim))
        want = f"joints in this order: {', '.join(model.joint_names)}"
        assert want in p.wait_for(want)
    finally:
        p.stop()


def test_launch_file_parameters_resolve_to_the_shipped_file_and_the_given_urdf(monkeypatch):
    """launch/dynamics.launch.py run against stand-ins of launch/launch_ros (no wheel here): its
    parameters, resolved with urdf_path:=<UR5>, started as launch_ros would, give UR5's torques."""
    import importlib.util

    import dynamics_node as dn
    from test_node_launch import _stub_modules
    captured = []
    for name, mod in _stub_modules(captured).items():
        monkeypatch.setitem(sys.modules, name, mod)
    spec = importlib.util.spec_from_file_location("launch_under_test", ns.REPO / "launch" / "dynamics.launch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.generate_launch_description()
    node = [r for r in captured if type(r).__name__ == "Node"][0].kwargs
    defaults = {r.args[0]: r.kwargs.get("default_value") for r in captured
                if type(r).__name__ == "DeclareLaunchArgument"}
    path = ns.erd(ROBOTS["ur5"])
    given = {"urdf_path": str(path)}
    share = "/share/dynamics_node/"

    def resolve(x):  # a LaunchConfiguration: the given launch argument, else its default (share -> repo)
        if type(x).__name__ == "LaunchConfiguration":
            v = given.get(x.args[0], defaults[x.args[0]])
            return str(ns.REPO / v[len(share):]) if v.startswith(share) else v
        return x
    cmd = _exe() + ["--ros-args"]
    for entry in node["parameters"]:
        if isinstance(entry, dict):
            for k, v in entry.items():
                cmd += ["-p", f"{k}:={resolve(v)}"]
        else:
            f = resolve(entry)
            assert f == str(CONFIG)           # the shipped parameter file
            cmd += ["--params-file", f]
    model = dn.load_model(str(path))
    p = Started(cmd)
    try:
        q = _random_q(model, 11)
        msg, _ = _torques_at(p, model, q)
        _check_against_pinocchio(model, path, msg, q)
    finally:
        p.stop()


def test_shipped_parameter_files_hold_nothing_of_one_robot_but_its_file():
    import yaml
    for cfg in sorted((ns.REPO / "config").glob("*.yaml")):
        params = yaml.safe_load(cfg.read_text())["dynamics_node"]["ros__parameters"]
        assert "command_joints" not in params and "payload.link" not in params, cfg.name
        assert params.get("payload.mass", 0.0) == 0.0 and params.get("armature", []) in ([], [0.0]), cfg.name


@pytest.mark.parametrize("args, words", [
    (["-p", "urdf_path:=/no/such/robot.urdf"], ["urdf_path", "/no/such/robot.urdf", "absolute path"]),
    (["-p", "payload.link:=flange", "-p", "payload.mass:=2.0"], ["payload.link", "flange", "set payload.mass to 0"]),
    (["-p", "effort_command_topic:=/cmd", "-p", "command_joints:=[elbow]"], ["command_joints[0]", "elbow"]),
    (["-p", "gravity:=[0.0, 0.0, -1.0e308]"], ["gravity", "100"]),
    (["-p", "xacro_args:=[prefix:=left_]"], ["bad ROS arguments", "xacro_args:=[prefix:=left_]",
                                             "\"xacro_args:=['prefix:=left_']\""]),
])
def test_a_start_that_fails_says_in_one_line_which_parameter_value_and_what_to_do(args, words):
    cmd = _exe() + ["--ros-args", "--params-file", "config/default.yaml", *args]
    r = subprocess.run(cmd, cwd=str(ns.REPO), env=ns.node_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "cannot start" in ln]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def _cli(*args, timeout=60):
    cli = BIN / "dynamics_cli"
    cmd = [str(cli)] if cli.exists() else [sys.executable, "-m", "dynamics_node.cli.dynamics_cli"]
    return subprocess.run(cmd + list(args), cwd=str(ns.REPO), env=ns.node_env(), capture_output=True,
                          text=True, timeout=timeout)


def test_robot_description_parameter_route_as_the_readme_shows():
    """README route 2: dynamics_cli param set robot_description "$(cat robot.urdf)" on a running node."""
    import dynamics_node as dn
    path = ns.erd(ROBOTS["z1"])
    model = dn.load_model(str(path))
    p = Started(_exe() + ["--ros-args", "--params-file", "config/default.yaml"])
    try:
        _torques_at(p, dn.load_model(str(ns.ARM7)), np.zeros(7))      # serving the demo arm
        r = _cli("param", "set", "robot_description", path.read_text())
        assert r.returncode == 0, r.stdout + r.stderr
        q = _random_q(model, 5)
        msg, _ = _torques_at(p, model, q)
        _check_against_pinocchio(model, path, msg, q)
    finally:
        p.stop()


def test_robot_description_topic_route_as_the_readme_shows():
    """README route 3: the node with no robot waits for the topic; dynamics_cli publish_description
    (robot_state_publisher's QoS) gives it the robot."""
    import dynamics_node as dn
    path = ns.erd(ROBOTS["ur5"])
    model = dn.load_model(str(path))
    p = Started(_exe())
    cli = BIN / "dynamics_cli"
    cmd = [str(cli)] if cli.exists() else [sys.executable, "-m", "dynamics_node.cli.dynamics_cli"]
    pub = Started(cmd + ["publish_description", str(path), "--duration", "60"])
    try:
        q = _random_q(model, 9)
        msg, _ = _torques_at(p, model, q)
        _check_against_pinocchio(model, path, msg, q)
        assert "no robot yet, waiting for the robot description" in p.wait_for("no robot yet")
    finally:
        pub.stop()
        p.stop()
