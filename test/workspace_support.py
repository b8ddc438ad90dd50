"""The workspace of docs/install.md on ROS 2 Jazzy (test_workspace.py, bench/bench_install.py): this
repository copied to WS/src/dynamics_node, built with colcon from a venv of Jazzy's wheels standing in
for /opt/ros/jazzy (`make workspace-venv`: build/ws-jazzy/venv), commands run in the sourced workspace.

The venv holds what rosdep installs from package.xml, colcon from PyPI and the ros2 kit (launch,
launch_ros, ros2cli: no wheels exist), not dynamics_node; its CMake files were given the wheels' path
fix (an artefact of the wheels: a distribution's user never does that). Activating it and setting
AMENT_PREFIX_PATH and CMAKE_PREFIX_PATH to it is what `source /opt/ros/jazzy/setup.bash` does. The
kernel cache is a folder of the workspace (XDG_CACHE_HOME), empty or seeded with the source tree's
kernels (seed_cache). Every process runs with ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST and node_support's ROS_DOMAIN_ID.
"""
from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

import node_support as ns

REPO = ns.REPO
WS_VENV = REPO / "build" / "ws-jazzy" / "venv"
KITS = [REPO.parent / "shared" / "ros2-python", pathlib.Path("/work/shared/ros2-python")]
KIT = next((k for k in KITS if (k / "install.sh").is_file()), None)


class Workspace:
    def __init__(self, root: pathlib.Path):
        self.root = root
        self.cache = root / "cache"
        self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", str(root)),
                    "LANG": "C.UTF-8", "XDG_CACHE_HOME": str(self.cache), "ROS_DOMAIN_ID": str(ns.DOMAIN_ID),
                    "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "PYTHONUNBUFFERED": "1"}
        # what `source /opt/ros/jazzy/setup.bash` does, for the venv that stands in for it
        v = shlex.quote(str(WS_VENV))
        self.distro = f"source {v}/bin/activate && export AMENT_PREFIX_PATH={v} CMAKE_PREFIX_PATH={v}"

    def script(self, commands, sourced=True):
        lines = [self.distro]
        if sourced:
            lines.append("source install/setup.bash")
        return "\n".join(lines + list(commands))

    def run(self, commands, timeout=600, sourced=True):
        return subprocess.run(["bash", "-c", self.script(commands, sourced)], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def start(self, command):
        return Started(self, command)

    def cache_files(self):
        return {str(p.relative_to(self.cache)): (p.stat().st_mtime_ns, p.stat().st_size)
                for p in self.cache.rglob("*") if p.is_file()}

    def installed_package(self):
        r = self.run(["python3 -c 'import dynamics_node, os; print(os.path.dirname(dynamics_node.__file__))'"],
                     timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return pathlib.Path(r.stdout.strip().splitlines()[-1])


class Started:
    """A command started in the sourced workspace (`exec`: its pid is the command's, as a terminal
    would start it), output to a file; stop() sends SIGINT to it alone (Ctrl-C to `ros2 launch`)."""

    def __init__(self, ws, command):
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        self.proc = subprocess.Popen(["bash", "-c", ws.script([f"exec {command}"])], cwd=ws.root, env=ws.env,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self):
        return pathlib.Path(self.log.name).read_text(errors="replace")

    def wait_for(self, pattern, timeout=ns.START_TIMEOUT):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if re.search(pattern, self.output()):
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        return bool(re.search(pattern, self.output()))

    def stop(self, timeout=30.0, group=False):
        """Ctrl-C: to the command alone (`ros2 launch` forwards it to its nodes), or to its process
        group as a terminal sends it (`ros2 run` leaves the node to get it from the terminal)."""
        if self.proc.poll() is None:
            if group:
                os.killpg(self.proc.pid, signal.SIGINT)
            else:
                self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
                raise AssertionError(f"still running {timeout} s after Ctrl-C:\n{self.output()[-3000:]}")
        return self.proc.returncode, self.output()


def copy_repository(dest: pathlib.Path):
    """The repository's files as a clone has them (tracked, and new files not ignored)."""
    r = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True)
    files = [f for f in r.stdout.decode().split("\0") if f] if r.returncode == 0 else []
    assert files, "git ls-files listed nothing: the workspace test copies a git checkout"
    for f in files:
        src = REPO / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)


def ready() -> bool:
    """The workspace venv exists with colcon and ros2."""
    return (WS_VENV / "bin" / "colcon").is_file() and (WS_VENV / "bin" / "ros2").is_file()


def seed_cache(cache: pathlib.Path):
    """cache/dynamics_node/<hash>/ as a user's who ran `make setup` in this clone has it: the source
    tree's ahead-of-time library, its numba cache entries and its ready marker (what the test process's
    own kernels were built into), linked or copied. `colcon build` then compiles no kernel again."""
    from numba.core.caching import _CacheLocator

    from dynamics_node import _jit, _jit_build

    src = pathlib.Path(os.path.dirname(_jit._aot_dir()))
    dst = cache / "dynamics_node" / src.name
    marker = pathlib.Path(_jit_build._marker(str(src)))
    assert marker.is_file() and (src / "aot" / "kernels.so").is_file(), f"no kernels of the source tree in {src}"
    folders = {"aot", "ready/" + marker.name}
    for p in _jit_build.PACKAGE.rglob("*.py"):
        folders.add(_CacheLocator.get_suitable_cache_subpath(str(p)))
    for rel in sorted(folders):
        if (src / rel).is_dir():
            shutil.copytree(src / rel, dst / rel, copy_function=_link_or_copy)
        elif (src / rel).is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(src / rel, dst / rel)


def _link_or_copy(a, b):   # numba and the build replace a cache file, never write into it
    try:
        os.link(a, b)
    except OSError:
        shutil.copy2(a, b)


def build(root: pathlib.Path, commands=("colcon build",), files=None, seed=False):
    """A workspace in root with this repository in src/dynamics_node and `files` ({path in the
    workspace: text}: a package of the user's) beside it, built: (Workspace, seconds, output).
    seed: its kernel cache starts as the source tree's (seed_cache), else empty."""
    w = Workspace(root)
    copy_repository(w.root / "src" / "dynamics_node")
    if seed:
        seed_cache(w.cache)
    for rel, text in (files or {}).items():
        (w.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (w.root / rel).write_text(text)
    t0 = time.monotonic()
    r = w.run(list(commands), sourced=False, timeout=1800)
    seconds = time.monotonic() - t0
    if r.returncode:
        logs = sorted((w.root / "log" / "latest_build").glob("*/stdout_stderr.log"))
        detail = "\n".join(f"{log.parent.name}:\n" + log.read_text(errors="replace")[-6000:] for log in logs)
        raise AssertionError(f"{' '.join(commands)} failed:\n{(r.stdout + r.stderr)[-3000:]}\n{detail}")
    return w, seconds, r.stdout + r.stderr
