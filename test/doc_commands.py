"""The commands that README.md and docs/*.md show, and the test that runs each.

How the docs hold code: fenced blocks with a language. ```sh blocks hold commands a reader types
and a test runs; ```python blocks are run as they are by test_docs.py (every block of a page in one
interpreter, in order, from the repository's folder); ```text, ```xml and ```yaml blocks are
synopses, file contents or output, and are not run. A block whose language is followed by a relative
path (```python src/my_controller/setup.py) is that file's content, not run: file_blocks() gives them
to the test that writes and builds them. A command outside a fence (an indented block)
is refused by test_docs.py.

To show a new command: put it in a ```sh block and add one line to RUN_BY below, naming the test
that runs it (`file.py::test_name`). test_docs.py fails on a command of the docs that RUN_BY does
not map, on an entry of RUN_BY that no page shows any more, and on a test name that does not exist.
Four tests of test_docs.py run, as written, every command mapped to them, so mapping a command to
one of them is all it takes to have it run:
- CLI: `dynamics_cli ...` lines, against the demo arm served as /dynamics_node (exit code 0);
- START: commands that start a node or a launch file: they must log "serving" (or, for a node
  given no robot, that it waits for one), then stop on Ctrl-C without a traceback;
- OFFLINE: commands that need no node (exit code 0), run from the repository's folder;
- the README's first five minutes and "Your robot", and the identification commands of
  docs/identify.md, run by tests of their own.
Placeholders of the docs that a runner replaces (a reader replaces them with their own robot) are
in PLACEHOLDERS; nothing else of a command is changed.
"""
from __future__ import annotations

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
LANGUAGES = {"sh", "python", "text", "xml", "yaml"}

CLI = "test_docs.py::test_dynamics_cli_lines_on_the_demo_arm"
START = "test_docs.py::test_commands_that_start_a_node"
OFFLINE = "test_docs.py::test_offline_commands"
FIVE = "test_docs.py::test_readme_first_five_minutes_and_your_robot"
IDENTIFY = "test_docs.py::test_identify_commands_as_written"
YOUR_ROBOT = "test_node_your_robot.py::"
ROS2_CLI = "test_node_ros2_cli.py::"
WORKSPACE = "test_workspace.py::"

ARM7 = str(REPO / "urdf" / "arm7.urdf")
XACRO = str(REPO / "test" / "data" / "xacro" / "arm.urdf.xacro")
XACRO_PREFIX = str(REPO / "test" / "data" / "xacro" / "ament")   # ament prefix of the xacro's $(find)
PLACEHOLDERS = {
    "/abs/robot.urdf": ARM7,
    "/path/to/robot.urdf.xacro": XACRO,
}

RUN_BY = {
    # README.md
    "make run": FIVE,
    "make test": "test_docs.py::test_make_test_is_the_whole_suite_after_the_linter",
    "export ROS_DOMAIN_ID=42 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST": FIVE,
    ".venv/bin/dynamics_cli gravity_compensation -q 0 0.5 0 -1.0 0 0.5 0": FIVE,
    '.venv/bin/ros2 service call /dynamics_node/gravity_compensation dynamics_interfaces/srv/GravityCompensation '
    '"{name: [joint1, joint2, joint3, joint4, joint5, joint6, joint7], '
    'position: [0.0, 0.5, 0.0, -1.0, 0.0, 0.5, 0.0]}"':
        FIVE,
    '.venv/bin/ros2 topic pub -r 10 /joint_states sensor_msgs/msg/JointState "{name: [joint1, joint2, joint3, '
    'joint4, joint5, joint6, joint7], position: [0.0, 0.5, 0.0, -1.0, 0.0, 0.5, 0.0]}" > /dev/null &': FIVE,
    ".venv/bin/ros2 topic echo --once /dynamics_node/gravity_torques sensor_msgs/msg/JointState": FIVE,
    "kill %1": FIVE,
    "make run URDF=.venv/lib/python3.11/site-packages/cmeel.prefix/share/example-robot-data/robots/ur_description"
    "/urdf/ur5_robot.urdf": FIVE,
    ".venv/bin/dynamics_cli gravity_compensation -q 0.1 -0.8 1.2 -0.5 0.4 0.3": FIVE,

    # docs/node.md: starting it
    "make run URDF=path/to/robot.urdf": YOUR_ROBOT + "test_make_run_urdf_with_an_effort_command_and_no_command_joints",
    'make run URDF=robot.urdf ARGS="-p effort_command_topic:=/effort_controller/commands"':
        YOUR_ROBOT + "test_make_run_urdf_with_an_effort_command_and_no_command_joints",
    "make run-dual-arm": START,
    '.venv/bin/dynamics_node --ros-args --params-file config/default.yaml -p gravity:="[0.0, 0.0, -1.62]"': START,
    ".venv/bin/ros2 launch dynamics_node dynamics.launch.py urdf_path:=/abs/robot.urdf": START,
    ".venv/bin/ros2 launch dynamics_node dual_arm.launch.py": START,
    '.venv/bin/ros2 param set /dynamics_node gravity "[0.0, 0.0, -1.62]"':
        ROS2_CLI + "test_param_set_gravity_changes_the_answers",
    ".venv/bin/ros2 param get /dynamics_node gravity": ROS2_CLI + "test_param_set_gravity_changes_the_answers",
    ".venv/bin/ros2 service list": "test_docs.py::test_ros2_graph_listings_on_the_demo_arm",
    ".venv/bin/ros2 node list": "test_docs.py::test_ros2_graph_listings_on_the_demo_arm",
    # docs/node.md: your robot
    "make run URDF=/path/to/robot.urdf": YOUR_ROBOT + "test_make_run_urdf_with_an_effort_command_and_no_command_joints",
    '.venv/bin/dynamics_node --ros-args --params-file config/default.yaml -p urdf_path:=/path/to/robot.urdf.xacro '
    '-p "xacro_args:=[\'prefix:=left_\']"': START,
    '.venv/bin/dynamics_cli param set robot_description "$(cat /path/to/robot.urdf)"':
        YOUR_ROBOT + "test_robot_description_parameter_route_as_the_readme_shows",
    ".venv/bin/dynamics_node": YOUR_ROBOT + "test_robot_description_topic_route_as_the_readme_shows",
    ".venv/bin/dynamics_cli publish_description /path/to/robot.urdf":
        YOUR_ROBOT + "test_robot_description_topic_route_as_the_readme_shows",
    '.venv/bin/dynamics_node --ros-args --params-file config/default.yaml -p payload.link:=tool0 '
    '-p payload.mass:=1.5 -p "payload.center_of_mass:=[0.0, 0.0, 0.05]" '
    '-p effort_command_topic:=/effort_controller/commands '
    '-p "command_joints:=[joint7, joint6, joint5, joint4, joint3, joint2, joint1]"': START,
    # docs/node.md: linearised dynamics
    "dynamics_cli linearized_dynamics -q 0 0.5 0 -1.2 0 0.8 0 -v 0.1 0 0 0 0 0 0 -e 0 1 0 0 0 0 0 --dt 0.01":
        "test_node_linearized.py::test_docs_node_command_runs_as_written",
    # docs/node.md: dynamics_cli
    "dynamics_cli inverse_dynamics -q 0 0.5 0 -1.2 0 0.8 0 -a 1 0 0 0 0 0 0 -w tool0 0 0 -20 0 0 0": CLI,
    "dynamics_cli forward_dynamics -n joint7 joint6 joint5 joint4 joint3 joint2 joint1 -q 0 0.8 0 -1.2 0 0.5 0 "
    "-e 0 0 0 0 0 0 1": CLI,
    "dynamics_cli hybrid_dynamics -q 0 0.5 0 -1.2 0 0.8 0 -e 0 0 0 0 0 0 1 --forward-joints joint7": CLI,
    "dynamics_cli gravity_compensation": CLI,
    "dynamics_cli gravity_compensation -q 0 0.5 0 -1.2 0 0.8 0": CLI,
    "dynamics_cli mass_matrix -q 0 0.5 0 -1.2 0 0.8 0": CLI,
    "dynamics_cli jacobian -q 0 0.5 0 -1.2 0 0.8 0 --link tool0": CLI,
    "dynamics_cli jacobian -q 0 0.5 0 -1.2 0 0.8 0 --link tool0 --point 0 0 0.1 --axes link": CLI,
    "dynamics_cli model_terms -q 0 0.5 0 -1.2 0 0.8 0 -v 0.1 0 0 0 0 0 0 --links tool0 --point 0 0 0.1": CLI,
    "dynamics_cli contact_dynamics -q 0 0.5 0 -1.2 0 0.8 0 -c tool0 0 0 0 0 0 1 inf": CLI,
    "dynamics_cli impact -q 0 0.5 0 -1.2 0 0.8 0 -v 0 0.5 0 0 0 0 0 -c tool0 0 0 0 0 0 1 0.8 --restitution 0.5": CLI,
    "dynamics_cli set_payload --link tool0 --mass 2 --com 0 0 0.05 --inertia 0.002 0 0 0.002 0 0.002": CLI,
    "dynamics_cli set_payload --link tool0 --mass 0": CLI,
    "dynamics_cli trajectory_inverse_dynamics --file traj.yaml": CLI,
    "dynamics_cli identify_payload --link tool0 --record 10 --apply":
        "test_node_identify.py::test_cli_records_identifies_and_applies",
    "dynamics_cli identify_payload --link tool0 --file samples.yaml": CLI,
    "dynamics_cli param list": CLI,
    "dynamics_cli param get gravity": CLI,
    'dynamics_cli param set gravity "[0, 0, -1.62]"': CLI,
    "dynamics_cli echo gravity_torques --count 1": CLI,
    "dynamics_cli echo diagnostics --count 1": CLI,

    # docs/identify.md
    "dynamics_identify excite --urdf robot.urdf --output excite.yaml --period 10 --duration 20": IDENTIFY,
    "dynamics_identify fit rec1 --urdf robot.urdf --output robot_identified.urdf --report fit.json --plot fit.png":
        IDENTIFY,
    "dynamics_identify evaluate rec2 --urdf robot_identified.urdf --report eval.json --plot eval.png": IDENTIFY,
    'make run ARGS="--params-file robot_identified.yaml"': IDENTIFY,
    "dynamics_node --ros-args --params-file OUT.yaml":
        "test_node_friction.py::test_node_started_from_out_yaml_answers_as_the_law_says",
    'make run ARGS="--params-file OUT.yaml"':
        "test_node_friction.py::test_node_started_from_out_yaml_answers_as_the_law_says",

    # docs/simulate.md
    ".venv/bin/ros2 launch dynamics_node sim.launch.py": START,
    ".venv/bin/ros2 launch dynamics_node sim.launch.py gravity_compensation:=false": START,
    ".venv/bin/dynamics_node --ros-args -p urdf_path:=/abs/robot.urdf -p simulation:=true "
    '-p effort_command_topic:=/effort_controller/commands -p "simulation_initial_positions:=[joint2=0.5]"': START,

    # docs/install.md: the workspace path on Jazzy (test_workspace.py runs each as written)
    "colcon build": WORKSPACE + "test_colcon_build_builds_the_node_its_interfaces_and_its_executables",
    "source install/setup.bash": WORKSPACE + "test_colcon_build_builds_the_node_its_interfaces_and_its_executables",
    "ros2 launch dynamics_node dynamics.launch.py":
        WORKSPACE + "test_first_launch_compiles_nothing_and_serves_pinocchios_gravity",
    "ros2 launch dynamics_node sim.launch.py": WORKSPACE + "test_sim_launch_runs_the_simulated_robot_held_by_the_node",
    "ros2 run dynamics_node dynamics_cli gravity_compensation -q 0 0.5 0 -1.0 0 0.5 0":
        WORKSPACE + "test_first_launch_compiles_nothing_and_serves_pinocchios_gravity",
    "ros2 interface show dynamics_interfaces/srv/GravityCompensation":
        WORKSPACE + "test_colcon_build_builds_the_node_its_interfaces_and_its_executables",
    "ros2 run dynamics_node dynamics_node": WORKSPACE + "test_node_alone_says_what_it_waits_for",
    "ros2 run my_controller gravity_client 0 0.5 0 -1.0 0 0.5 0":
        WORKSPACE + "test_a_package_of_yours_depends_on_dynamics_node_and_calls_it",
    "ros2 launch dynamics_node sim.launch.py rviz:=true":
        WORKSPACE + "test_sim_launch_runs_the_simulated_robot_held_by_the_node",
    "python3 -m dynamics_node._jit_build build --if-missing":
        WORKSPACE + "test_the_kernel_command_is_a_no_op_when_the_build_compiled_them",
    "make setup ROS_DISTRO=jazzy": "test_package_deps.py::test_make_sets_up_jazzy_in_its_own_venv",
    "make test ROS_DISTRO=jazzy": "test_package_deps.py::test_make_sets_up_jazzy_in_its_own_venv",

    # docs/performance.md, docs/design.md
    "make docs-figures": "test_docs.py::test_docs_figures_are_made_by_the_projects_tools",
    "make summary": OFFLINE,
    ".venv/bin/dynamics_summary --check urdf/arm7.urdf": OFFLINE,
}


def normalise(cmd: str) -> str:
    return " ".join(cmd.split())


RUN_BY = {normalise(k): v for k, v in RUN_BY.items()}


def fenced_blocks(path):
    """[(language, first line number, [lines])] of the page's fenced blocks, dedented to their fence;
    an unclosed fence is an AssertionError naming the line."""
    out, lines, i = [], pathlib.Path(path).read_text().split("\n"), 0
    while i < len(lines):
        m = re.match(r"^( *)```(.*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start, body = len(m.group(1)), m.group(2).strip(), i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^ *```\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        assert i < len(lines), f"{path}:{start}: a ``` block that is never closed"
        out.append((lang, start, body))
        i += 1
    return out


def file_blocks(path) -> dict:
    """{relative path: text} of the page's blocks that name a file after their language."""
    out = {}
    for lang, _, body in fenced_blocks(path):
        words = lang.split()
        if len(words) == 2:
            out[words[1]] = "\n".join(body) + ("\n" if body else "")
    return out


def _strip_comment(line: str) -> str:
    """The line without a trailing `# comment` (a # outside quotes, after a blank)."""
    quote = None
    for k, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1] in " \t"):
            return line[:k]
    return line


def shell_commands(lang_lines):
    """The commands of a ```sh block: comment lines dropped, `\\` continuations joined, trailing
    comments removed, blanks collapsed."""
    cmds, cur = [], ""
    for line in lang_lines:
        if not cur and line.strip().startswith("#"):
            continue
        text = _strip_comment(line).rstrip()
        if text.endswith("\\"):
            cur += text[:-1] + " "
            continue
        cur += text
        if cur.strip():
            cmds.append(normalise(cur))
        cur = ""
    if cur.strip():
        cmds.append(normalise(cur))
    return cmds


def page_commands(path):
    """[(command, line number)] of every ```sh block of a page."""
    return [(c, start) for lang, start, body in fenced_blocks(path) if lang in ("sh", "bash")
            for c in shell_commands(body)]


def all_commands():
    """{command: [where]} over README.md and docs/*.md."""
    found = {}
    for p in PAGES:
        for c, line in page_commands(p):
            found.setdefault(c, []).append(f"{p.relative_to(REPO)}:{line}")
    return found


def commands_for(test_id: str):
    """The commands of the docs that RUN_BY gives to test_id, in the order the docs show them."""
    return [c for c in all_commands() if RUN_BY.get(c) == test_id]
