"""ament_python package `dynamics_node` (also a plain pip-installable Python library).

Built by colcon in a ROS workspace (`colcon build` runs `setup.py egg_info build install ...`), an
install given on the command line does three things beyond setuptools' own (class ``install``):
the console scripts go to `lib/dynamics_node/`, where `ros2 run` and launch_ros look; the nested
ament_cmake package `dynamics_interfaces/` (the messages and services, which colcon does not find:
it does not look inside a folder that is itself a package) is configured, built and installed with
CMake into the same prefix; and the kernels are compiled for the installed code
(`python -m dynamics_node._jit_build build`), so that the first start compiles nothing. pip's builds
(`pip install .`, `pip install -e .`, as `make setup` does) run none of this. docs/install.md says why.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from glob import glob

from setuptools import Extension, find_packages, setup
from setuptools.command.develop import develop as _develop
from setuptools.command.install import install as _install


def _extensions():
    """The optional C shim dynamics_node._fastcall (see its source): built when numpy's headers are
    at hand; without it every call goes through numba's dispatcher, a little slower."""
    try:
        import numpy
    except ImportError:
        return []
    return [Extension("dynamics_node._fastcall", ["dynamics_node/_fastcall.c", "dynamics_node/_routes.c",
                                                  "dynamics_node/_contact_route.c", "dynamics_node/_step_route.c"],
                      depends=["dynamics_node/_fastcall.h", "dynamics_node/_layout.h"],
                      include_dirs=[numpy.get_include()],
                      extra_compile_args=["-O2"], optional=True)]


package_name = "dynamics_node"
HERE = os.path.dirname(os.path.realpath(__file__))
INTERFACES = os.path.join(HERE, "dynamics_interfaces")


def _say(msg):
    print(f"dynamics_node setup.py: {msg}", flush=True)


def _build_interfaces(build_dir, prefix, python_dir, destdir=None):
    """Configure, build and install the ament_cmake package dynamics_interfaces into `prefix` (what
    colcon does for an ament_cmake package), its Python modules into `python_dir` (relative to the
    prefix: where this package's own go, so that one PYTHONPATH entry serves both). Returns the
    files it installed (CMake's install manifest)."""
    cmake = shutil.which("cmake")
    if cmake is None:
        raise SystemExit("dynamics_node setup.py: no cmake on PATH; it builds dynamics_interfaces "
                         "(rosdep install --from-paths src --ignore-src -y installs it)")
    os.makedirs(build_dir, exist_ok=True)
    log = os.path.join(build_dir, "dynamics_interfaces.log")
    env = dict(os.environ)
    if destdir:
        env["DESTDIR"] = destdir
    steps = [
        [cmake, "-S", INTERFACES, "-B", build_dir, "-Wno-dev", "-DCMAKE_BUILD_TYPE=Release",
         f"-DCMAKE_INSTALL_PREFIX={prefix}", f"-DPYTHON_INSTALL_DIR={python_dir}",
         f"-DPython3_EXECUTABLE={sys.executable}", f"-DPYTHON_EXECUTABLE={sys.executable}",
         "-DBUILD_TESTING=OFF"],
        [cmake, "--build", build_dir, "-j", os.environ.get("DYNAMICS_INTERFACES_JOBS", str(os.cpu_count() or 2))],
        [cmake, "--install", build_dir],
    ]
    _say(f"building dynamics_interfaces with CMake in {build_dir} (log: {log})")
    with open(log, "w") as f:
        for cmd in steps:
            f.write("$ " + " ".join(cmd) + "\n")
            f.flush()
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
            if r.returncode:
                f.close()
                with open(log) as g:
                    sys.stderr.write(g.read()[-6000:])
                raise SystemExit(f"dynamics_node setup.py: building dynamics_interfaces failed (`{' '.join(cmd[:3])}"
                                 f" ...`, log {log}). It needs a sourced ROS 2 (rosidl_default_generators, "
                                 "ament_cmake: `rosdep install --from-paths src --ignore-src -y`).")
    manifest = os.path.join(build_dir, "install_manifest.txt")
    with open(manifest) as f:
        return [ln.strip() for ln in f if ln.strip()]


def _build_kernels(install_lib, home):
    """Compile the kernels for the code just installed (numba keys its cache by the source file's
    folder and time stamp, so a cache of the source tree does not serve this copy), in a process
    that imports the installed package (not this source tree: it runs in `home`, a folder outside
    it). DYNAMICS_NODE_SKIP_KERNELS=1 skips it (a package built on one machine for others:
    the kernels are compiled for the CPU that builds them). A failure is reported, not fatal: the
    node then compiles them at its first start (minutes on two cores)."""
    if os.environ.get("DYNAMICS_NODE_SKIP_KERNELS") == "1":
        _say("DYNAMICS_NODE_SKIP_KERNELS=1: kernels not compiled (the first start compiles them)")
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = install_lib + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    _say("compiling the kernels for the installed code (a few minutes of CPU the first time)")
    r = subprocess.run([sys.executable, "-m", "dynamics_node._jit_build", "build", "--if-missing"], cwd=home, env=env)
    if r.returncode == 3:  # the build refused this numba, in a line of its own that says why
        _say("WARNING: kernels not compiled: numba too old or missing (the line above)")
    elif r.returncode:
        _say(f"WARNING: compiling the kernels failed (exit code {r.returncode}): the first start of the node "
             "compiles them instead (minutes); `python3 -m dynamics_node._jit_build build` retries")


class install(_install):  # noqa: N801 - the setuptools command's name
    """setup.py install. Given on the command line (colcon), not as part of a pip build: the
    console scripts to lib/dynamics_node, dynamics_interfaces built and installed beside, the
    kernels compiled (the module docstring)."""

    def _direct(self):
        return "install" in self.distribution.commands

    def finalize_options(self):
        if self._direct() and self.install_scripts is None:
            self.install_scripts = "$base/lib/" + package_name
        super().finalize_options()

    def run(self):
        self._interface_files = []
        if self._direct():  # first, so that --record lists its files too
            root = self.root or ""
            lib = self.install_lib[len(root):] if root and self.install_lib.startswith(root) else self.install_lib
            build_base = self.get_finalized_command("build").build_base
            self._interface_files = _build_interfaces(os.path.join(build_base, "dynamics_interfaces"),
                                                      self.install_base, os.path.relpath(lib, self.install_base),
                                                      destdir=root or None)
        super().run()
        if self._direct() and not self.root:  # a staged install (--root) is not where the code will run
            _build_kernels(self.install_lib, tempfile.gettempdir())

    def get_outputs(self):  # the files --record lists (colcon removes them on a fresh install)
        return super().get_outputs() + list(getattr(self, "_interface_files", []))


class develop(_develop):  # noqa: N801
    """setup.py develop as colcon runs it (colcon build --symlink-install: `develop --editable
    --build-directory ...`): the same for an editable install. pip's own `setup.py develop` (pip
    install -e . without a pyproject.toml) gives no build directory and gets setuptools' develop."""

    def _colcon(self):
        return "develop" in self.distribution.commands and getattr(self, "build_directory", None) is not None

    def finalize_options(self):
        if self._colcon() and not getattr(self, "script_dir", None):
            self.script_dir = os.path.join(sys.prefix, "lib", package_name)
        super().finalize_options()

    def run(self):
        super().run()
        if self._colcon() and not getattr(self, "uninstall", False):
            prefix = sys.prefix
            lib = os.path.relpath(self.install_dir, prefix)
            _build_interfaces(os.path.join(os.path.abspath(self.build_directory), "dynamics_interfaces"),
                              prefix, lib)
            _build_kernels(os.getcwd(), tempfile.gettempdir())   # colcon runs develop where the code is linked


setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(include=["dynamics_node", "dynamics_node.*"]),
    package_data={"dynamics_node": ["_aot_stubs.c"]},  # the kernel build links it (_jit_build.build)
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml")),
        ("share/" + package_name + "/config", glob("config/*.rviz")),
        ("share/" + package_name + "/urdf", glob("urdf/*.urdf")),
    ],
    install_requires=["numpy", "scipy", "qdldl", "numba", "xacro", "pyyaml", "rosbags", "cvxpy-base", "clarabel",
                      "matplotlib"],
    extras_require={"test": ["pytest", "hypothesis", "pin", "mujoco", "example-robot-data"]},
    ext_modules=_extensions(),
    cmdclass={"install": install, "develop": develop},
    zip_safe=False,
    python_requires=">=3.10",
    description="Rigid-body dynamics for robot arms (Featherstone), as a ROS 2 node and a Python library",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "dynamics_node = dynamics_node.ros.process:main",
            "dynamics_cli = dynamics_node.cli.dynamics_cli:main",
            "dynamics_summary = dynamics_node.cli.summary:main",
            "dynamics_identify = dynamics_node.identify.__main__:main",
        ],
    },
)
