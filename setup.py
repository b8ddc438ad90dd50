"""ament_python package `dynamics_node` (also a plain pip-installable Python library)."""
from glob import glob

from setuptools import Extension, find_packages, setup


def _extensions():
    """The optional C shim dynamics_node._fastcall (see its source): built when numpy's headers are
    at hand; without it every call goes through numba's dispatcher, a little slower."""
    try:
        import numpy
    except ImportError:
        return []
    return [Extension("dynamics_node._fastcall", ["dynamics_node/_fastcall.c", "dynamics_node/_routes.c",
                                                  "dynamics_node/_contact_route.c", "dynamics_node/_step_route.c"],
                      depends=["dynamics_node/_fastcall.h"], include_dirs=[numpy.get_include()],
                      extra_compile_args=["-O2"], optional=True)]


package_name = "dynamics_node"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(include=["dynamics_node", "dynamics_node.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml")),
        ("share/" + package_name + "/urdf", glob("urdf/*.urdf")),
    ],
    install_requires=["numpy", "scipy", "qdldl", "numba", "xacro", "pyyaml", "rosbags", "cvxpy-base", "clarabel",
                      "matplotlib"],
    ext_modules=_extensions(),
    zip_safe=False,
    python_requires=">=3.10",
    description="Rigid-body dynamics for robot arms (Featherstone), as a ROS 2 node and a Python library",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "dynamics_node = dynamics_node.ros.process:main",
            "dynamics_cli = dynamics_node.tools.cli:main",
            "dynamics_summary = dynamics_node.summary:main",
            "dynamics_identify = dynamics_node.identify.__main__:main",
        ],
    },
)
