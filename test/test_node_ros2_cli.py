"""The real `ros2 launch` and `ros2` CLI (issue 21.5), as the README shows them, on every launch file of
launch/ and on robots of example-robot-data: `make setup` installs launch, launch_ros and ros2cli
from the kit ../shared/ros2-python (no wheels exist) and lays dynamics_node out in .venv as colcon
would (tools/install_ament_layout.sh), so that nothing but ROS_DOMAIN_ID and
ROS_AUTOMATIC_DISCOVERY_RANGE needs setting. Every `ros2` runs with exactly that environment
(plus PATH and HOME), from a scratch working directory.

Skipped, saying so, where the kit is absent (a user's clone has no ../shared: `make run` and
dynamics_cli work without it). Graph queries use --no-daemon and are retried (a fresh `ros2`
process needs 1-4 s of discovery to see the node); `ros2 daemon stop` at the end catches a daemon
started by a command the README shows without it.

Stopping: SIGINT to the launch process alone, and to its whole process group (Ctrl-C without a
terminal: the node gets it twice, once from the group and once forwarded by launch), must end
launch, the node and its stream process by themselves, exit code 0, no traceback (how fast is
bench_node's to measure: no timed assertion here, the suite passes beside busy processes).
"""
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

VENV = pathlib.Path(sys.prefix)
ROS2 = VENV / "bin" / "ros2"
KITS = [ns.REPO.parent / "shared" / "ros2-python", pathlib.Path("/work/shared/ros2-python")]
KIT = next((k for k in KITS if (k / "install.sh").is_file()), None)
LAUNCHES = sorted((ns.REPO / "launch").glob("*.launch.py"))
JOINTS = [f"joint{i}" for i in range(1, 8)]
POS = [0.0, 0.5, 0.0, -1.0, 0.0, 0.5, 0.0]
HANG_S = 30.0   # still running this long after SIGINT: a hang (the stop time is bench_node's)

pytestmark = pytest.mark.skipif(KIT is None, reason="no ../shared/ros2-python: the ros2 CLI kit is not on this "
                                "machine, so make setup installed no `ros2` (make run and dynamics_cli work without)")


def _yaml_list(xs):
    return "[" + ", ".join(str(x) for x in xs) + "]"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if not ROS2.is_file():
        pytest.fail(f"the kit is at {KIT} but {ROS2} does not exist: run `make setup`")
    e = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "ROS_DOMAIN_ID": str(ns.DOMAIN_ID),
         "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    cwd = tmp_path_factory.mktemp("cwd")
    yield e, str(cwd)
    subprocess.run([str(ROS2), "daemon", "stop"], env=e, cwd=str(cwd), capture_output=True, timeout=30)


def ros2(env, *args, timeout=60):
    """`ros2 ARGS...`; `ros2 service call` is run again when it waits 30 s without an answer (it sends
    its request once, and Fast DDS may drop the first answer after discovery: node.md says to run it
    again), until `timeout`."""
    e, cwd = env
    end = time.monotonic() + timeout
    while True:
        once = min(30.0, end - time.monotonic()) if args[:2] == ("service", "call") else timeout
        try:
            p = subprocess.run([str(ROS2), *args], env=e, cwd=cwd, capture_output=True, text=True,
                               timeout=max(1.0, once))
            return p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired:
            if time.monotonic() + 1.0 >= end:
                raise


def ros2_param(env, *args, timeout=60):
    """`ros2 param ...`, again while it says "Node not found" or that its wait for the node's
    parameter services timed out: a ros2 daemon that this very command started has not discovered
    the node yet (discovery is asynchronous, slower on a busy machine; node.md says to run it again)."""
    end = time.monotonic() + 60.0
    while True:
        rc, out = ros2(env, "param", *args, timeout=timeout)
        undiscovered = "Node not found" in out or "Wait for service timed out" in out
        if not undiscovered or time.monotonic() > end:
            return rc, out
        time.sleep(0.5)


class Launched:
    """`ros2 launch ...` in a session of its own (as a terminal would start it), output to a file."""

    def __init__(self, env, tmp, *args):
        self.log = tmp / "launch.log"
        e, cwd = env
        with open(self.log, "w") as f:
            self.p = subprocess.Popen([str(ROS2), "launch", *args], env=e, cwd=cwd, stdout=f,
                                      stderr=subprocess.STDOUT, start_new_session=True)

    def text(self):
        return self.log.read_text(errors="replace")

    def family(self):
        """Every process of the launch's session (launch, the node, its stream process) and the
        sessions the node's children started (the stream process has one of its own)."""
        out = set()
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    st = f.read()
                fields = st[st.rindex(")") + 2:].split()
                sid = int(fields[3])
            except (OSError, ValueError, IndexError):
                continue
            if sid == self.p.pid:
                out.add(int(pid))
        # the stream process: a child of the node in a session of its own
        for pid in list(out):
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/children") as f:
                        out.update(int(c) for c in f.read().split())
            except OSError:
                pass
        return out

    def stop(self, how):
        procs = self.family()
        t0 = time.monotonic()
        if how == "group":
            os.killpg(self.p.pid, signal.SIGINT)
        else:
            os.kill(self.p.pid, signal.SIGINT)
        try:
            rc = self.p.wait(HANG_S)
        except subprocess.TimeoutExpired:
            rc = None
        left = set()
        while time.monotonic() - t0 < HANG_S:
            left = {p for p in procs if os.path.exists(f"/proc/{p}") and _state(p) != "Z"}
            if not left:
                break
            time.sleep(0.05)
        took = time.monotonic() - t0
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        if rc is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait(5)
        return rc, took, left


def _state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
        return st[st.rindex(")") + 2]
    except OSError:
        return "gone"


def _gravity_call(env, names, pos, timeout=ns.START_TIMEOUT):
    req = f"{{name: {_yaml_list(names)}, position: {_yaml_list(pos)}}}"
    return ros2(env, "service", "call", "/dynamics_node/gravity_compensation",
                "dynamics_interfaces/srv/GravityCompensation", req, timeout=timeout)


def _efforts(out):
    """effort=[...] of a printed GravityCompensation response."""
    text = out[out.index("effort=[") + len("effort=["):]
    return np.array([float(x) for x in text[:text.index("]")].split(",")])


def test_launch_shows_its_arguments(env):
    for path in LAUNCHES:
        rc, out = ros2(env, "launch", "-s", "dynamics_node", path.name)
        assert rc == 0 and "params_file" in out and "urdf_path" in out, out


@pytest.mark.parametrize("how", ["launch process", "group"])
@pytest.mark.parametrize("path", LAUNCHES, ids=[p.name for p in LAUNCHES])
def test_every_launch_file_serves_and_stops_on_sigint(env, tmp_path, path, how):
    """Each launch file of launch/ with its defaults: the node answers through `ros2 service call`
    (the model of the launch file's URDF: its joint names come back), then Ctrl-C ends everything."""
    import dynamics_node as dn
    import yaml
    la = Launched(env, tmp_path, "dynamics_node", path.name)
    try:
        cfg = "dual_arm.yaml" if "dual_arm" in path.name else "default.yaml"
        params = yaml.safe_load((ns.REPO / "config" / cfg).read_text())["dynamics_node"]["ros__parameters"]
        model = dn.load_model(str(ns.REPO / params["urdf_path"]))
        rc, out = ros2(env, "service", "call", "/dynamics_node/mass_matrix", "dynamics_interfaces/srv/MassMatrix",
                       f"{{position: {_yaml_list(model.neutral())}}}", timeout=ns.START_TIMEOUT)
        assert rc == 0 and "success=True" in out, out + la.text()[-3000:]
        for j in model.joint_names:
            assert f"'{j}'" in out
    finally:
        rc, took, left = la.stop("group" if how == "group" else "pid")
    text = la.text()
    assert not left, f"still running {took:.2f} s after SIGINT: {left}\n{text[-3000:]}"
    assert rc == 0, f"exit code {rc} after {took:.2f} s\n{text[-3000:]}"
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    assert "process has died" not in text, text[-3000:]


@pytest.fixture(scope="module")
def ur5(env, tmp_path_factory):
    """The README's first command on a robot of our own: an absolute urdf_path."""
    urdf = ns.erd("ur_description/urdf/ur5_robot.urdf")
    la = Launched(env, tmp_path_factory.mktemp("ur5"), "dynamics_node", "dynamics.launch.py",
                  f"urdf_path:={urdf}")
    import dynamics_node as dn
    model = dn.load_model(str(urdf))
    yield la, model
    rc, took, left = la.stop("pid")
    assert rc == 0 and not left, la.text()[-3000:]


def test_service_call_answers_with_the_robots_gravity(env, ur5):
    import dynamics_node as dn
    la, model = ur5
    q = [0.1, -0.8, 1.2, -0.5, 0.4, 0.3]
    rc, out = _gravity_call(env, model.joint_names, q)
    assert rc == 0 and "success=True" in out, out + la.text()[-2000:]
    np.testing.assert_allclose(_efforts(out), dn.gravity(model, q), rtol=1e-9, atol=1e-9)


def test_topic_echo_once_of_gravity_torques(env, ur5):
    """`ros2 topic pub` feeds joint states; `ros2 topic echo --once` prints the torques."""
    la, model = ur5
    names = list(model.joint_names)
    e, cwd = env
    pub = subprocess.Popen([str(ROS2), "topic", "pub", "-r", "20", "/joint_states", "sensor_msgs/msg/JointState",
                            f"{{name: {_yaml_list(names)}, position: {_yaml_list([0.2] * len(names))}}}"],
                           env=e, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        rc, out = ros2(env, "topic", "echo", "--once", "/dynamics_node/gravity_torques", "sensor_msgs/msg/JointState")
        assert rc == 0 and f"- {names[-1]}" in out and "effort:" in out, out
    finally:
        os.kill(pub.pid, signal.SIGINT)
        pub.wait(20)


def test_param_set_gravity_changes_the_answers(env, ur5):
    import dynamics_node as dn
    la, model = ur5
    q = [0.1, -0.8, 1.2, -0.5, 0.4, 0.3]
    try:
        rc, out = ros2_param(env, "set", "/dynamics_node", "gravity", "[0.0, 0.0, -1.62]")
        assert rc == 0 and "Set parameter successful" in out, out
        rc, out = ros2_param(env, "get", "/dynamics_node", "gravity")
        assert rc == 0 and "-1.62" in out, out
        rc, out = _gravity_call(env, model.joint_names, q)
        np.testing.assert_allclose(_efforts(out), dn.gravity(model.with_gravity((0, 0, -1.62)), q),
                                   rtol=1e-9, atol=1e-9)
    finally:
        ros2_param(env, "set", "/dynamics_node", "gravity", "[0.0, 0.0, -9.81]")


def test_node_and_service_list(env, ur5):
    end = time.monotonic() + 30
    while True:
        rc, out = ros2(env, "node", "list", "--no-daemon", "--spin-time", "3")
        if "/dynamics_node" in out.split() or time.monotonic() > end:
            break
    assert rc == 0 and "/dynamics_node" in out.split(), out
    rc, out = ros2(env, "service", "type", "/dynamics_node/inverse_dynamics")
    assert rc == 0 and "dynamics_interfaces/srv/InverseDynamics" in out, out
