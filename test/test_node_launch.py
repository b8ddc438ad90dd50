"""launch/dynamics.launch.py and config/*.yaml (launch_ros has no wheel here: test what can be
tested): the launch file compiles and, run against stand-ins of launch/launch_ros, starts this
package's `dynamics_node` executable with config/default.yaml; every key of the parameter files
is a parameter the node declares, with the declared type; the node runs on config/default.yaml
(what `make run` does) and the executables are console scripts of setup.py."""
from __future__ import annotations

import ast
import importlib.util
import sys
import types

import pytest
import yaml

import node_support as ns

LAUNCH = ns.REPO / "launch" / "dynamics.launch.py"
LAUNCHES = sorted((ns.REPO / "launch").glob("*.launch.py"))
CONFIGS = sorted((ns.REPO / "config").glob("*.yaml"))


def _declared():
    pytest.importorskip("rclpy")
    from rcl_interfaces.msg import ParameterType as T
    from dynamics_node.ros.params.node_params import PARAMETERS
    return {k: (v.default, getattr(T, "PARAMETER_" + v.type.upper())) for k, v in PARAMETERS.items()}


@pytest.mark.parametrize("path", LAUNCHES, ids=[p.name for p in LAUNCHES])
def test_launch_files_compile(path):
    compile(path.read_text(), str(path), "exec")


def _stub_modules(captured):
    """Minimal stand-ins of launch, launch_ros and ament_index_python for running the file."""
    class _Rec:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs
            captured.append(self)

    launch = types.ModuleType("launch")
    launch.LaunchDescription = type("LaunchDescription", (_Rec,), {})
    actions = types.ModuleType("launch.actions")
    actions.DeclareLaunchArgument = type("DeclareLaunchArgument", (_Rec,), {})
    actions.OpaqueFunction = type("OpaqueFunction", (_Rec,), {})   # sim.launch.py's rviz part (test_sim_rviz.py)
    actions.LogInfo = type("LogInfo", (_Rec,), {})
    subst = types.ModuleType("launch.substitutions")
    subst.LaunchConfiguration = type("LaunchConfiguration", (_Rec,), {})
    launch_ros = types.ModuleType("launch_ros")
    ros_actions = types.ModuleType("launch_ros.actions")
    ros_actions.Node = type("Node", (_Rec,), {})
    conditions = types.ModuleType("launch.conditions")
    conditions.IfCondition = type("IfCondition", (_Rec,), {})
    ament = types.ModuleType("ament_index_python")
    ament_pk = types.ModuleType("ament_index_python.packages")
    ament_pk.get_package_share_directory = lambda pkg: f"/share/{pkg}"
    ament_pk.PackageNotFoundError = type("PackageNotFoundError", (KeyError,), {})
    return {"launch": launch, "launch.actions": actions, "launch.substitutions": subst, "launch.conditions": conditions,
            "launch_ros": launch_ros, "launch_ros.actions": ros_actions,
            "ament_index_python": ament, "ament_index_python.packages": ament_pk}


@pytest.mark.parametrize("path", LAUNCHES, ids=[p.name for p in LAUNCHES])
def test_launch_files_start_this_packages_executable_with_a_shipped_config(monkeypatch, path):
    captured = []
    for name, mod in _stub_modules(captured).items():
        monkeypatch.setitem(sys.modules, name, mod)
    spec = importlib.util.spec_from_file_location("dynamics_launch_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ld = mod.generate_launch_description()
    assert ld is not None
    nodes = [r for r in captured if type(r).__name__ == "Node"]
    # one node named dynamics_node; sim.launch.py adds the simulated robot beside it (another name)
    assert len(nodes) == (2 if path.name == "sim.launch.py" else 1)
    for n in nodes:
        assert n.kwargs["package"] == "dynamics_node" and n.kwargs["executable"] == "dynamics_node"
    assert [n.kwargs["name"] for n in nodes].count("dynamics_node") == 1
    args = {r.args[0]: r.kwargs.get("default_value") for r in captured
            if type(r).__name__ == "DeclareLaunchArgument"}
    share = "/share/dynamics_node/"
    assert args["params_file"].startswith(share + "config/")
    assert (ns.REPO / args["params_file"][len(share):]).is_file(), args["params_file"]
    assert args["urdf_path"].startswith(share + "urdf/")
    assert (ns.REPO / args["urdf_path"][len(share):]).is_file(), args["urdf_path"]
    if path == LAUNCH:
        assert args["params_file"] == share + "config/default.yaml"
        assert args["urdf_path"] == share + "urdf/arm7.urdf"
    # every parameter the launch file sets itself is declared by the node
    declared = _declared()
    for p in (p for n in nodes for p in n.kwargs["parameters"]):
        if isinstance(p, dict):
            assert set(p) <= set(declared), set(p) - set(declared)
    # setup.py installs what the launch file refers to
    setup = (ns.REPO / "setup.py").read_text()
    assert '"dynamics_node = dynamics_node.ros.process:main"' in setup
    assert '("share/" + package_name + "/config", glob("config/*.yaml"))' in setup
    assert '("share/" + package_name + "/launch", glob("launch/*.py"))' in setup
    assert '("share/" + package_name + "/urdf", glob("urdf/*.urdf"))' in setup


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_parameter_files_hold_only_declared_parameters_of_the_declared_type(path):
    from rcl_interfaces.msg import ParameterType as T
    declared = _declared()
    data = yaml.safe_load(path.read_text())
    assert list(data) == ["dynamics_node"], "parameters must be under the node name dynamics_node"
    params = data["dynamics_node"]["ros__parameters"]
    assert params, "empty parameter file"
    check = {
        T.PARAMETER_INTEGER: lambda v: isinstance(v, int) and not isinstance(v, bool),
        T.PARAMETER_BOOL: lambda v: isinstance(v, bool),
        T.PARAMETER_DOUBLE: lambda v: isinstance(v, float),
        T.PARAMETER_STRING: lambda v: isinstance(v, str),
        T.PARAMETER_DOUBLE_ARRAY: lambda v: isinstance(v, list) and v and all(isinstance(x, float) for x in v),
        T.PARAMETER_STRING_ARRAY: lambda v: isinstance(v, list) and v and all(isinstance(x, str) for x in v),
    }
    for key, value in params.items():
        assert key in declared, f"{path.name}: {key} is not a parameter of dynamics_node"
        ptype = declared[key][1]
        assert check[ptype](value), f"{path.name}: {key}={value!r} is not of the declared type {ptype}"


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_node_runs_on_each_config(path):
    """What `make run` does: the executable with --params-file config/<file>.yaml."""
    import dynamics_node as dn
    from dynamics_interfaces.srv import MassMatrix
    params = yaml.safe_load(path.read_text())["dynamics_node"]["ros__parameters"]
    procs = ns.start_nodes({"dynamics_node": {}}, ros_args=("--params-file", str(path)))
    p = procs["dynamics_node"]
    try:
        c = ns.ros()
        assert c.get_parameter("dynamics_node", "urdf_path") == params["urdf_path"]
        model = dn.load_model(str(ns.REPO / params["urdf_path"]),
                              floating_base=params.get("floating_base", False))
        r = c.call(MassMatrix, p.path("mass_matrix"), MassMatrix.Request(position=list(model.neutral())))
        assert r.success, r.message
        assert list(r.name) == list(model.joint_names) and len(r.mass_matrix) == model.nv ** 2
    finally:
        p.stop()
        p.kill()


def test_console_scripts_exist_in_setup_py():
    tree = ast.parse((ns.REPO / "setup.py").read_text())
    text = ast.unparse(tree)
    for script in ("dynamics_node = dynamics_node.ros.process:main",
                   "dynamics_cli = dynamics_node.cli.dynamics_cli:main"):
        assert script in text
