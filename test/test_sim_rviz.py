"""`ros2 launch dynamics_node sim.launch.py rviz:=true`: config/sim.rviz shows what docs/install.md
says (the robot, TF, the efforts, ~/markers, ~/contact_markers, the external wrench) on the topics
the nodes publish; the launch file's rviz part, evaluated by launch itself, starts
robot_state_publisher (with the robot's URDF) and rviz2 (with that configuration, its fixed frame set
to the robot's root link) where they are installed, and where they are not, one line naming them.
No rviz2 or robot_state_publisher wheel exists: "installed" is what the ament index says, replaced
here by the test; test_workspace.py runs the launch for real where they are absent."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest
import yaml

import node_support as ns

CONFIG = ns.REPO / "config" / "sim.rviz"
LAUNCH = ns.REPO / "launch" / "sim.launch.py"


def _displays():
    return {d["Class"]: d for d in yaml.safe_load(CONFIG.read_text())["Visualization Manager"]["Displays"]}


def _topic(d):
    t = d.get("Topic") or d.get("Description Topic")
    return t["Value"] if isinstance(t, dict) else t


def test_the_rviz_config_shows_the_robot_tf_efforts_markers_and_wrench():
    """The displays and the topics they read: each topic is one a node of sim.launch.py publishes
    (the node's names in the launch file: robot_sim and dynamics_node; the publishers' ~/ names in the
    ROS edge's sources)."""
    cfg = yaml.safe_load(CONFIG.read_text())
    disp = [d["Class"] for d in cfg["Visualization Manager"]["Displays"]]
    topics = {d["Class"] + " " + str(_topic(d)) for d in cfg["Visualization Manager"]["Displays"] if _topic(d)}
    assert {"rviz_default_plugins/RobotModel", "rviz_default_plugins/TF", "rviz_default_plugins/Effort",
            "rviz_default_plugins/Wrench"} <= set(disp)
    assert topics == {"rviz_default_plugins/RobotModel /robot_description",
                      "rviz_default_plugins/Effort /dynamics_node/gravity_torques",
                      "rviz_default_plugins/MarkerArray /dynamics_node/markers",
                      "rviz_default_plugins/MarkerArray /robot_sim/contact_markers",
                      "rviz_default_plugins/Wrench /dynamics_node/external_wrench"}, topics
    launch = LAUNCH.read_text()
    assert 'name="robot_sim"' in launch and 'name="dynamics_node"' in launch
    edge = {p.name: p.read_text() for p in (ns.REPO / "dynamics_node" / "ros").glob("*.py")}
    assert '"~/markers"' in edge["diagnostics.py"] and '"~/contact_markers"' in edge["simulation.py"]
    assert '"~/gravity_torques"' in edge["stream.py"] and '"~/external_wrench"' in edge["stream_observer.py"]
    assert cfg["Visualization Manager"]["Global Options"]["Fixed Frame"] == "base_link"


def _launch_module():
    pytest.importorskip("launch")
    pytest.importorskip("launch_ros")
    spec = importlib.util.spec_from_file_location("sim_launch_under_test", LAUNCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _viewers(mod, monkeypatch, present, rviz="true", urdf=ns.ARM7):
    """The actions of the launch file's rviz part, evaluated by launch with these arguments."""
    from launch import LaunchContext

    monkeypatch.setattr(mod, "installed", lambda pkg: pkg in present)
    ctx = LaunchContext()
    ctx.launch_configurations.update({"rviz": rviz, "urdf_path": str(urdf),
                                      "rviz_config": str(CONFIG)})
    return mod.viewers(ctx)


def _text(subs):
    """The text of launch's substitutions (a TextSubstitution, or a sequence of them)."""
    if isinstance(subs, (list, tuple)):
        return "".join(_text(x) for x in subs)
    return getattr(subs, "text", subs if isinstance(subs, str) else str(subs))


def _node_kwargs(node):
    return {"package": node._Node__package, "executable": node._Node__node_executable,
            "parameters": node._Node__parameters, "arguments": node._Node__arguments}


def test_rviz_true_starts_robot_state_publisher_and_rviz2_where_installed(monkeypatch, tmp_path):
    from launch.actions import LogInfo
    from launch_ros.actions import Node

    mod = _launch_module()
    acts = _viewers(mod, monkeypatch, {"robot_state_publisher", "rviz2"})
    assert not [a for a in acts if isinstance(a, LogInfo)]
    nodes = {_node_kwargs(a)["package"]: _node_kwargs(a) for a in acts if isinstance(a, Node)}
    assert set(nodes) == {"robot_state_publisher", "rviz2"}
    from launch import LaunchContext
    from launch_ros.utilities import evaluate_parameters

    (params,) = evaluate_parameters(LaunchContext(), nodes["robot_state_publisher"]["parameters"])  # as launch_ros
    assert set(params) == {"robot_description"}
    assert params["robot_description"] == ns.ARM7.read_text()
    args = [_text(a) for a in nodes["rviz2"]["arguments"]]
    assert args[0] == "-d"
    shown = pathlib.Path(args[1]).read_text()
    assert shown == CONFIG.read_text()          # arm7's root link is base_link: nothing to change
    # another robot: its root link becomes the fixed frame
    other = tmp_path / "other.urdf"
    other.write_text(ns.ARM7.read_text().replace("base_link", "pedestal"))
    acts = _viewers(mod, monkeypatch, {"robot_state_publisher", "rviz2"}, urdf=other)
    rviz = [_node_kwargs(a) for a in acts if isinstance(a, Node) and _node_kwargs(a)["package"] == "rviz2"][0]
    text = pathlib.Path(_text(rviz["arguments"][1])).read_text()
    assert yaml.safe_load(text)["Visualization Manager"]["Global Options"]["Fixed Frame"] == "pedestal"


@pytest.mark.parametrize("present", [set(), {"robot_state_publisher"}, {"rviz2"}])
def test_rviz_true_names_what_is_missing_in_one_line_and_goes_on(monkeypatch, present):
    from launch.actions import LogInfo
    from launch_ros.actions import Node

    mod = _launch_module()
    acts = _viewers(mod, monkeypatch, present)
    lines = [a for a in acts if isinstance(a, LogInfo)]
    assert len(lines) == 1
    msg = _text(lines[0].msg)
    missing = [p for p in ("robot_state_publisher", "rviz2") if p not in present]
    assert all(p in msg for p in missing) and not any(p in msg for p in present), msg
    assert "\n" not in msg
    assert sorted(_node_kwargs(a)["package"] for a in acts if isinstance(a, Node)) == sorted(present)


def test_rviz_false_starts_nothing(monkeypatch):
    mod = _launch_module()
    assert _viewers(mod, monkeypatch, {"robot_state_publisher", "rviz2"}, rviz="false") == []
