"""README.md and docs/ kept true: every command they show is run by a test (doc_commands.py
maps each to the test that runs it, and the runners here run, as written, the commands mapped to
them), every ```python block runs, every relative link and anchor resolves, every page is reachable
from the README, the README stays a door of at most 200 lines, and the pictures are made by
`make docs-figures`."""
from __future__ import annotations

import ast
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import doc_commands as dc
import node_support as ns

REPO = dc.REPO
VENV_BIN = pathlib.Path(sys.executable).parent


# ------------------------------------------------------------------------------- what the docs hold
def test_readme_is_a_door_of_at_most_200_lines():
    n = len((REPO / "README.md").read_text().splitlines())
    assert n <= 200, f"README.md has {n} lines: move the detail to a page of docs/ and link it"


def test_every_block_says_its_language_and_no_command_sits_outside_a_block():
    bad = []
    for page in dc.PAGES:
        for lang, line, _ in dc.fenced_blocks(page):
            words = lang.split()
            if len(words) == 2 and words[0] in dc.LANGUAGES - {"sh"}:  # a file's content (doc_commands.py)
                if not re.match(r"^[\w.-]+(/[\w.-]+)*$", words[1]) or ".." in words[1].split("/"):
                    bad.append(f"{page.relative_to(REPO)}:{line}: ``` block of a file: {words[1]!r} is not a "
                               "relative path")
            elif lang not in dc.LANGUAGES:
                others = sorted(dc.LANGUAGES - {"sh", "python"})
                bad.append(f"{page.relative_to(REPO)}:{line}: ``` block of language {lang!r}: say sh (a command "
                           f"a test runs), python (run by this file), or one of {others}")
        fenced = set()
        for _, line, body in dc.fenced_blocks(page):
            fenced.update(range(line, line + len(body) + 2))
        for k, text in enumerate(page.read_text().split("\n"), start=1):
            if k not in fenced and re.match(r"^ {4,}(make |\.venv/bin/|dynamics_\w+ |ros2 |python)", text):
                bad.append(f"{page.relative_to(REPO)}:{k}: a command in an indented block: put it in a ```sh "
                           f"block and map it in test/doc_commands.py: {text.strip()[:80]}")
    assert not bad, "\n".join(bad)


def test_every_command_of_the_docs_is_run_by_a_test():
    found = dc.all_commands()
    missing = [f"{where[0]}: {c}" for c, where in found.items() if c not in dc.RUN_BY]
    assert not missing, ("commands shown in the docs that no test runs; add each to RUN_BY in "
                         "test/doc_commands.py with the test that runs it:\n" + "\n".join(missing))


def test_every_mapped_command_is_still_shown_and_every_mapped_test_exists():
    found = dc.all_commands()
    stale = [c for c in dc.RUN_BY if c not in found]
    assert not stale, "RUN_BY maps commands no page shows any more (remove or update them):\n" + "\n".join(stale)
    tests = {}
    for test_id in set(dc.RUN_BY.values()):
        file, _, name = test_id.partition("::")
        path = REPO / "test" / file
        assert path.is_file(), f"{test_id}: no file test/{file}"
        if file not in tests:
            tests[file] = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
        assert name in tests[file], f"{test_id}: no test {name} in test/{file}"


def _anchors(page: pathlib.Path):
    """GitHub's anchors of a page's headings: lower case, punctuation but - and _ dropped, blanks to -."""
    out, seen = set(), {}
    in_fence = False
    for line in page.read_text().split("\n"):
        if re.match(r"^ *```", line):
            in_fence = not in_fence
        m = None if in_fence else re.match(r"^#{1,6} (.*)$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: pathlib.Path):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_relative_link_and_anchor_resolves():
    bad = []
    for page in dc.PAGES + [REPO / "bench" / "README.md"]:
        for target in _links(page):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                bad.append(f"{page.relative_to(REPO)}: link to {target}: no {path}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{page.relative_to(REPO)}: link to {target}: no heading #{anchor} in {path or page.name}")
    assert not bad, "\n".join(bad)


def test_every_docs_page_is_reachable_from_the_readme():
    seen, todo = set(), [REPO / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen:
            continue
        seen.add(page)
        for target in _links(page):
            path = target.partition("#")[0]
            if path.endswith(".md") and not re.match(r"^[a-z]+:", path):
                dest = (page.parent / path).resolve()
                if dest.is_file():
                    todo.append(dest)
    unreached = [p.relative_to(REPO) for p in (REPO / "docs").glob("*.md") if p.resolve() not in seen]
    assert not unreached, f"pages no link from README.md leads to: {unreached}"


def test_the_readme_names_the_license_of_package_xml_and_setup_py():
    lic = re.search(r"<license>(.*?)</license>", (REPO / "package.xml").read_text()).group(1)
    assert f'license="{lic}"' in (REPO / "setup.py").read_text()
    readme = (REPO / "README.md").read_text()
    assert "## License" in readme and lic in readme.split("## License")[1]


def test_make_test_is_the_whole_suite_after_the_linter():
    """`make test` (README): its recipe runs the linter, then pytest on the whole of test/ (the suite
    cannot run itself; this checks that the command is what the README says)."""
    mk = (REPO / "Makefile").read_text()
    m = re.search(r"^test: (.*)\n\t(.*)$", mk, re.M)
    assert m and "lint" in m.group(1).split() and "setup" in m.group(1).split(), m
    assert re.search(r"-m pytest -q test$", m.group(2)), m.group(2)


# ------------------------------------------------------------------------------------ python blocks
PY_PAGES = [p for p in dc.PAGES if any(lang == "python" for lang, _, _ in dc.fenced_blocks(p))]


@pytest.mark.parametrize("page", PY_PAGES, ids=[p.name for p in PY_PAGES])
def test_python_blocks_run_as_written(page, tmp_path):
    """Every ```python block of a page, in order, in one interpreter, from the repository's folder."""
    code = "\n\n".join("\n".join(body) for lang, _, body in dc.fenced_blocks(page) if lang == "python")
    script = tmp_path / f"{page.stem}_blocks.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONWARNINGS": "error::RuntimeWarning"})
    assert r.returncode == 0, f"{page.relative_to(REPO)}'s python blocks:\n{r.stdout}{r.stderr}"


# ------------------------------------------------------------------------------------------ runners
def _env(**extra):
    env = ns.node_env()
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env.update(extra)
    return env


def _substitute(cmd):
    for k, v in dc.PLACEHOLDERS.items():
        cmd = cmd.replace(k, v)
    return cmd


def _venv(cmd):
    """The docs' `.venv/bin/`: the venv running the tests (.venv-jazzy under make test ROS_DISTRO=jazzy)."""
    return cmd if VENV_BIN == REPO / ".venv" / "bin" else cmd.replace(".venv/bin/", f"{VENV_BIN}/")


class Shell:
    """A command line run by bash in a session of its own, its output in a file."""

    def __init__(self, cmd, cwd=REPO, env=None):
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        self.proc = subprocess.Popen(["bash", "-c", _venv(cmd)], cwd=str(cwd), env=env or _env(), stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def output(self):
        return pathlib.Path(self.log.name).read_text(errors="replace")

    def wait_for(self, pattern, timeout=ns.START_TIMEOUT):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if re.search(pattern, self.output()):
                return True
            if self.proc.poll() is not None:
                return bool(re.search(pattern, self.output()))
            time.sleep(0.1)
        return False

    def stop(self, timeout=15.0):
        """Ctrl-C to the session (as a terminal sends it); returns the output."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
                raise AssertionError(f"still running {timeout} s after Ctrl-C:\n{self.output()[-3000:]}")
        return self.output()


KIT = (REPO.parent / "shared" / "ros2-python" / "install.sh").is_file() or \
    pathlib.Path("/work/shared/ros2-python/install.sh").is_file()
needs_ros = pytest.mark.skipif(not ns.ros_available(), reason="rclpy or dynamics_interfaces not built")


def _needs_ros2(cmd):
    if ".venv/bin/ros2" in cmd and not (VENV_BIN / "ros2").exists():
        if KIT or os.environ.get("DYNAMICS_REQUIRE_ROS") == "1":
            raise AssertionError(f"{VENV_BIN / 'ros2'} missing although the kit is there: make setup")
        pytest.skip("no ros2 CLI kit on this machine, so make setup installed no .venv/bin/ros2")


@needs_ros
@pytest.mark.parametrize("cmd", dc.commands_for(dc.START), ids=lambda c: c)
def test_commands_that_start_a_node(cmd):
    """Each command that starts a node or a launch file, as written (placeholders of a robot's path
    replaced): it says "serving" (a node given no robot: that it waits for one), and Ctrl-C ends it
    with no traceback."""
    _needs_ros2(cmd)
    sh = Shell(_substitute(cmd), env=_env(AMENT_PREFIX_PATH=dc.XACRO_PREFIX))
    try:
        ok = sh.wait_for(r"serving")
        assert ok, f"`{cmd}` never said serving:\n{sh.output()[-4000:]}"
        # the lines after "serving" (joint order, gravity) follow it within moments
        if "xacro_args" in cmd:
            assert sh.wait_for("left_upper_joint", timeout=20), sh.output()[-3000:]   # the prefix reached xacro
        if "gravity:=" in cmd:
            assert sh.wait_for(r"-1\.62", timeout=20), sh.output()[-3000:]
    finally:
        out = sh.stop()
    assert "Traceback" not in out, out[-4000:]


@needs_ros
@pytest.mark.parametrize("cmd", dc.commands_for(dc.OFFLINE), ids=lambda c: c)
def test_offline_commands(cmd):
    r = subprocess.run(["bash", "-c", _venv(cmd)], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"`{cmd}`: exit code {r.returncode}\n{r.stdout}{r.stderr}"
    assert "Traceback" not in r.stdout + r.stderr


def _demo_arm_files(folder: pathlib.Path):
    """traj.yaml and samples.yaml as docs/node.md describes them: a trajectory of the demo arm, and
    samples of it carrying a 1.2 kg payload on tool0 (efforts from the library's inverse dynamics)."""
    import yaml

    import dynamics_node as dn
    model = dn.load_model(str(ns.ARM7))
    t = np.linspace(0, 8, 400)
    w = np.array([0.7, 0.9, 1.1, 1.3, 1.5, 1.7, 1.9])
    Q = 0.6 * np.sin(np.outer(t, w) + np.arange(7))
    QD = 0.6 * w * np.cos(np.outer(t, w) + np.arange(7))
    QDD = -0.6 * w ** 2 * np.sin(np.outer(t, w) + np.arange(7))
    loaded = model.with_payload("tool0", 1.2, (0.0, 0.01, 0.06), (0.004, 0.0, 0.0, 0.004, 0.0, 0.003))
    TAU = dn.inverse_dynamics_batch(loaded, Q, QD, QDD)
    names = list(model.joint_names)
    pts = [{"positions": Q[k].tolist(), "velocities": QD[k].tolist(), "accelerations": QDD[k].tolist(),
            "time_from_start": float(t[k])} for k in range(0, 400, 40)]
    (folder / "traj.yaml").write_text(yaml.safe_dump({"joint_names": names, "points": pts}))
    pts = [{"positions": Q[k].tolist(), "velocities": QD[k].tolist(), "accelerations": QDD[k].tolist(),
            "effort": TAU[k].tolist()} for k in range(400)]
    (folder / "samples.yaml").write_text(yaml.safe_dump({"joint_names": names, "points": pts}))


@needs_ros
def test_dynamics_cli_lines_on_the_demo_arm(tmp_path):
    """Every `dynamics_cli` line mapped to this test, as written, against the demo arm served as
    /dynamics_node while joint states are published: each exits with 0 (the node answered success)."""
    import dynamics_node as dn
    cmds = dc.commands_for(dc.CLI)
    assert cmds
    _demo_arm_files(tmp_path)
    procs = ns.start_nodes({"dynamics_node": {"urdf_path": str(ns.ARM7)}})
    c = ns.ros()
    from sensor_msgs.msg import JointState
    pub = c.publisher(JointState, "/joint_states")
    model = dn.load_model(str(ns.ARM7))
    q = [0.0, 0.5, 0.0, -1.2, 0.0, 0.8, 0.0]
    failed = []
    try:
        for cmd in cmds:
            for attempt in range(2):    # once more after "no answer within 10 s" (exit code 2): the
                sh = Shell(cmd, cwd=tmp_path)     # node's first call of a kernel on a loaded machine
                end = time.monotonic() + 120
                while sh.proc.poll() is None and time.monotonic() < end:
                    pub.publish(ns.joint_state(list(model.joint_names), q, efforts=[0.0] * 7))
                    time.sleep(0.05)
                out = sh.stop()
                if sh.proc.returncode != 2 or "no answer" not in out:
                    break
            if sh.proc.returncode != 0:
                failed.append(f"`{cmd}`: exit code {sh.proc.returncode}\n{out[-1500:]}")
            elif cmd.startswith("dynamics_cli identify_payload"):
                m = re.search(r"mass: ([-0-9.e]+)", out)
                assert m and abs(float(m.group(1)) - 1.2) < 1e-6, out
    finally:
        c.node.destroy_publisher(pub)
        for p in procs.values():
            p.stop()
            p.kill()
    assert not failed, "\n\n".join(failed)


# --------------------------------------------------------------------- the README, as a newcomer runs it
def _block_with(page, text):
    """The ```sh block of page one of whose lines is text (text ending in "..." : starts with it)."""
    for lang, _, body in dc.fenced_blocks(REPO / page):
        hit = [b for b in body if (b.startswith(text[:-3]) if text.endswith("...") else b == text)]
        if lang == "sh" and hit:
            return "\n".join(body)
    raise AssertionError(f"no ```sh block of {page} holds {text!r}")


def _efforts(out, key="effort"):
    m = re.search(key + r"[:=] ?\[([^\]]*)\]", out)
    assert m, out
    return np.array([float(x) for x in m.group(1).split(",")])


@needs_ros
def test_readme_first_five_minutes_and_your_robot():
    """The README's blocks, as written, in bash, in the repository's folder: `make run` with the export
    line before it (its domain number replaced by the test's own, so that runs cannot meet), then
    from a second shell dynamics_cli, `ros2 service call`, `ros2 topic pub` + `topic echo --once`;
    the torques equal the library's. Then "Your robot": `make run URDF=...` on UR5 and dynamics_cli
    with its six angles gives Pinocchio's gravity torques."""
    import dynamics_node as dn
    from conftest import assert_close
    from urdfgen import PinOracle

    domain = str(ns.DOMAIN_ID)
    fix = "ROS_DOMAIN_ID=42"
    start = _block_with("README.md", "make run").replace(fix, f"ROS_DOMAIN_ID={domain}")
    assert "make run" in start and fix not in start
    env = _env()
    env.pop("ROS_DOMAIN_ID")
    env.pop("ROS_AUTOMATIC_DISCOVERY_RANGE")
    arm = dn.load_model(str(ns.ARM7))
    q = [0.0, 0.5, 0.0, -1.0, 0.0, 0.5, 0.0]
    node = Shell(start, env=env)
    try:
        assert node.wait_for(r"serving"), node.output()[-3000:]
        client = _block_with("README.md", ".venv/bin/dynamics_cli gravity_compensation -q 0 0.5...").replace(
            fix, f"ROS_DOMAIN_ID={domain}")
        r = subprocess.run(["bash", "-c", _venv(client)], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "success: true" in r.stdout, r.stdout + r.stderr
        np.testing.assert_allclose(_efforts(r.stdout), dn.gravity(arm, q), rtol=1e-9, atol=1e-9)
        exported = client.split("\n")[0] + "\n"
        if (VENV_BIN / "ros2").exists() or KIT:
            call = exported + _block_with("README.md", ".venv/bin/ros2 service call...")
            for attempt in range(4):  # sent once: a dropped first answer is run again, as node.md says
                p = subprocess.Popen(["bash", "-c", _venv(call)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
                try:
                    out, err = p.communicate(timeout=30)
                    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
                    break
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.communicate()
                    if attempt == 3:
                        raise
            assert r.returncode == 0 and "success=True" in r.stdout, r.stdout + r.stderr
            np.testing.assert_allclose(_efforts(r.stdout, "effort"), dn.gravity(arm, q), rtol=1e-9, atol=1e-9)
            watch = exported + _block_with("README.md", ".venv/bin/ros2 topic echo --once...")
            r = subprocess.run(["bash", "-c", _venv(watch)], cwd=REPO, env=env,
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0 and "effort:" in r.stdout and "- joint7" in r.stdout, r.stdout + r.stderr
            eff = re.search(r"effort:\n((?:- .*\n)+)", r.stdout).group(1)
            np.testing.assert_allclose([float(x[2:]) for x in eff.splitlines()], dn.gravity(arm, q),
                                       rtol=1e-9, atol=1e-9)
    finally:
        out = node.stop()
    assert "Traceback" not in out, out[-3000:]

    robot = _block_with("README.md", "make run URDF=...")
    path = REPO / robot.split("URDF=")[1].split()[0]
    assert path.is_file(), path
    model = dn.load_model(str(path))
    node = Shell(exported + robot, env=env)
    try:
        assert node.wait_for(r"serving"), node.output()[-3000:]
        call = exported + _block_with("README.md", ".venv/bin/dynamics_cli gravity_compensation -q 0.1...")
        r = subprocess.run(["bash", "-c", _venv(call)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "success: true" in r.stdout, r.stdout + r.stderr
        qu = [float(x) for x in call.split("-q ")[1].split()]
        assert len(qu) == model.nv
        assert_close(_efforts(r.stdout), PinOracle(path.read_text(), model).gravity(np.array(qu)), what="UR5 gravity")
    finally:
        node.stop()


@needs_ros
def test_ros2_graph_listings_on_the_demo_arm():
    """`ros2 service list` and `ros2 node list` (docs/node.md) name the node and its services; a fresh
    ros2 process discovers the graph in a few seconds, so each is repeated until it does (docs/node.md
    says so)."""
    cmds = [c for c in dc.commands_for("test_docs.py::test_ros2_graph_listings_on_the_demo_arm")]
    assert cmds
    _needs_ros2(cmds[0])
    procs = ns.start_nodes({"dynamics_node": {"urdf_path": str(ns.ARM7)}})
    want = {"service list": "/dynamics_node/gravity_compensation", "node list": "/dynamics_node"}
    try:
        for cmd in cmds:
            end = time.monotonic() + 60
            while True:
                r = subprocess.run(["bash", "-c", _venv(cmd)], cwd=REPO, env=_env(), capture_output=True, text=True,
                                   timeout=60)
                hit = [w for k, w in want.items() if k in cmd]
                if (r.returncode == 0 and hit and hit[0] in r.stdout.split()) or time.monotonic() > end:
                    break
                time.sleep(1)
            assert r.returncode == 0 and hit[0] in r.stdout.split(), f"`{cmd}`:\n{r.stdout}{r.stderr}"
    finally:
        subprocess.run([str(VENV_BIN / "ros2"), "daemon", "stop"], env=_env(), capture_output=True, timeout=30)
        for p in procs.values():
            p.stop()
            p.kill()


# ------------------------------------------------------------------------------------ identification
def _docs_figures():
    sys.path.insert(0, str(REPO / "tools"))
    import docs_figures
    return docs_figures


@needs_ros
def test_identify_commands_as_written(tmp_path):
    """docs/identify.md's commands, as written, in a folder holding robot.urdf (arm7) and two simulated
    recordings rec1, rec2 of a perturbed arm7 with friction (torques from Pinocchio, 2 % noise): the
    identified URDF predicts the held-out recording's torques within 5 % of their spread, its friction
    is the truth's within 15 %, and the node runs on it with friction (from the repository's folder,
    robot_identified.urdf given by its path)."""
    pytest.importorskip("pinocchio")
    import json
    import xml.etree.ElementTree as ET
    fr = _docs_figures().recordings(tmp_path)
    cmds = dc.commands_for(dc.IDENTIFY)
    offline = [c for c in cmds if c.startswith("dynamics_identify")]
    assert len(offline) == 3 and any(" fit " in c for c in offline) and any(" evaluate " in c for c in offline)
    for cmd in offline:
        r = subprocess.run(["bash", "-c", _venv(cmd)], cwd=tmp_path, env=_env(),
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"`{cmd}`:\n{r.stdout}{r.stderr}"
    ev = json.loads((tmp_path / "eval.json").read_text())
    rel = np.array(ev["relative_rms"], float)      # RMS of measured - predicted over the effort's spread
    assert rel.shape == (7,) and np.all(rel < 0.05), rel
    assert (tmp_path / "fit.png").stat().st_size > 10000 and (tmp_path / "eval.png").stat().st_size > 10000
    assert (tmp_path / "excite.yaml").is_file()
    found = {j.get("name"): j.find("dynamics") for j in ET.parse(tmp_path / "robot_identified.urdf").getroot()
             .findall("joint") if j.get("name") in fr}
    for name, (b, f) in fr.items():
        d = found[name]
        assert abs(float(d.get("friction")) - f) <= 0.15 * f + 0.05, (name, d.attrib, f)
    run = [c for c in cmds if c.startswith("make run")]
    assert len(run) == 1
    assert (tmp_path / "robot_identified.yaml").is_file()       # fit wrote the node's parameter file beside
    node = Shell(run[0].replace("--params-file robot_identified.yaml",
                                f"--params-file {tmp_path / 'robot_identified.yaml'}"))
    import yaml
    named = yaml.safe_load((tmp_path / "robot_identified.yaml").read_text())["dynamics_node"]["ros__parameters"][
        "urdf_path"]                                           # the URDF the law goes with (OUT.yaml names it)
    try:
        assert node.wait_for(r"serving"), node.output()[-3000:]
        assert pathlib.Path(named).name in node.output()
    finally:
        node.stop()


# ------------------------------------------------------------------------------------------ figures
def test_architecture_diagram_names_only_modules_that_exist():
    missing = [m for m in _docs_figures().architecture_modules() if not (REPO / m).exists()]
    assert not missing, f"tools/docs_figures.py's diagram names modules that do not exist: {missing}"


def test_committed_figures_are_the_ones_the_pages_show_and_small():
    shown = set()
    for page in dc.PAGES:
        shown.update(re.findall(r"!\[[^\]]*\]\((img/[^)]+)\)", page.read_text()))
    names = {pathlib.Path(s).name for s in shown}
    assert names == {"architecture.svg", "identify_evaluate.png", "identify_friction.png", "scaling.png"}, names
    for name in names:
        f = REPO / "docs" / "img" / name
        assert f.is_file() and 0 < f.stat().st_size < 150_000, (f, f.stat().st_size if f.exists() else None)


@needs_ros
def test_docs_figures_are_made_by_the_projects_tools(tmp_path):
    """`make docs-figures`, into a scratch folder (DOCS_IMG): the architecture diagram, the two
    identification plots and the scaling plot, each a real picture of a reasonable size."""
    pytest.importorskip("pinocchio")
    r = subprocess.run(["make", "--no-print-directory", "docs-figures", f"DOCS_IMG={tmp_path}"], cwd=REPO,
                       env=_env(), capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for name in ("identify_evaluate.png", "identify_friction.png", "scaling.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and 5_000 < len(data) < 150_000, (name, len(data))
    svg = (tmp_path / "architecture.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "dispatch.py" in svg and len(svg) < 150_000
    shutil.rmtree(tmp_path, ignore_errors=True)
