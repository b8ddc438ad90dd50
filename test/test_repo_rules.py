"""Rules of the house that a reviewer would otherwise check by hand: module size, the floor plan
(docs/design.md: folders, layers, import direction, unique names), the evidence index."""
import pathlib

REPO = pathlib.Path(__file__).resolve().parent.parent
MAX_LINES = 500


def test_no_module_of_the_package_is_over_500_lines():
    """Python and the C shim's sources alike."""
    sources = [p for ext in ("*.py", "*.c", "*.h") for p in sorted((REPO / "dynamics_node").rglob(ext))]
    long = {str(p.relative_to(REPO)): n for p in sources
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_core_imports_no_ros():
    """The core knows nothing of ROS: only dynamics_node/ros/ (the node) and dynamics_node/cli/ (its
    ROS clients: dynamics_cli) may import rclpy or ROS messages. (ament_index_python, a plain Python
    package, may resolve package:// where it is installed.)"""
    ros_words = ("import rclpy", "from rclpy", "_msgs", "dynamics_interfaces")
    offenders = []
    for p in sorted((REPO / "dynamics_node").rglob("*.py")):
        rel = p.relative_to(REPO / "dynamics_node")
        if rel.parts[0] in ("ros", "cli"):
            continue
        for k, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#")[0]
            if any(w in code for w in ros_words) and ("import" in code):
                offenders.append(f"{rel}:{k}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def _defined_tests(path):
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name.startswith("test_")}


def test_the_evidence_index_names_real_tests_and_every_public_function():
    """test/EVIDENCE.md groups the tests by algorithm: each `file::test` it names must exist, and
    each public function of the package must appear in one of its section headings."""
    import re

    import dynamics_node as dn

    text = (REPO / "test" / "EVIDENCE.md").read_text(encoding="utf-8")
    refs = re.findall(r"`(test_[a-z0-9_]+\.py)::(test_[A-Za-z0-9_]+)`", text)
    assert len(refs) > 50, "the index names hardly any tests: was it parsed?"
    missing = []
    cache = {}
    for f, t in refs:
        p = REPO / "test" / f
        if p not in cache:
            cache[p] = _defined_tests(p) if p.exists() else set()
        if t not in cache[p]:
            missing.append(f"{f}::{t}")
    assert not missing, f"EVIDENCE.md names tests that do not exist: {missing}"
    headings = " ".join(line for line in text.splitlines() if line.startswith("## "))
    named = set(re.findall(r"`([A-Za-z_]+)`", headings))
    public = {n for n in dn.__all__ if not n.endswith(("Error", "Warning"))}
    assert public <= named, f"public functions without a section in EVIDENCE.md: {sorted(public - named)}"


def _import_graph():
    """{module: {modules of this package it imports}} over dynamics_node's .py files, every import
    statement counted (those inside functions too: a lazy import is still a dependency). Importing
    a.b.c also runs the package a.b's __init__: a module outside a subpackage that imports one of its
    modules depends on that __init__ too (not on the root package's, which loads everything lazily)."""
    import ast

    root = REPO / "dynamics_node"
    mods = {}
    for p in sorted(root.rglob("*.py")):
        parts = p.relative_to(REPO).with_suffix("").parts
        mods[".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)] = p
    edges = {m: set() for m in mods}
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rsplit(".", 1)[0]
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, ast.ImportFrom):
                base = pkg
                for _ in range(max(n.level - 1, 0)):
                    base = base.rsplit(".", 1)[0]
                mod = (base + ("." + n.module if n.module else "")) if n.level else (n.module or "")
                # `from pkg import submodule` names the submodule; `from mod import name` the module
                targets = [mod + "." + a.name if mod + "." + a.name in mods else mod for a in n.names]
            elif isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            else:
                continue
            for t in targets:
                if t not in mods or t == m:
                    continue
                edges[m].add(t)
                parts = t.split(".")
                for k in range(2, len(parts)):  # the subpackages the import runs, root excluded
                    parent = ".".join(parts[:k])
                    if parent in mods and not (m == parent or m.startswith(parent + ".")):
                        edges[m].add(parent)
    return edges


def _cycles(edges, within):
    """Strongly connected components (more than one module) of the graph restricted to `within`."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v] & within:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(within):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_another_that_imports_it_back():
    """Across the whole package (core, node, tools): no import circle, direct or longer."""
    edges = _import_graph()
    assert not _cycles(edges, set(edges)), f"import circles: {_cycles(edges, set(edges))}"


def test_the_node_and_the_tools_import_in_one_direction():
    """dynamics_node/ros (the node's modules), dynamics_node/cli (dynamics_cli and what it needs)
    and dynamics_node/identify (dynamics_identify): no module imports another that imports it back,
    directly or in a circle; the node's modules never import a tool; the core never imports any
    of them; the offline identification tool never imports ROS code."""
    edges = _import_graph()
    layers = {p: {m for m in edges if m == f"dynamics_node.{p}" or m.startswith(f"dynamics_node.{p}.")}
              for p in ("ros", "cli", "identify")}
    for name, mods in layers.items():
        assert mods, f"no modules found under dynamics_node/{name}"
        assert not _cycles(edges, mods), f"import circles in dynamics_node/{name}: {_cycles(edges, mods)}"
    edge_list = [(a, b) for a, bs in edges.items() for b in bs]
    bad = [(a, b) for a, b in edge_list if a in layers["ros"] and (b in layers["cli"] or b in layers["identify"])]
    assert not bad, f"the node's modules import tools: {bad}"
    outside = set().union(*layers.values())
    core = set(edges) - outside
    bad = [(a, b) for a, b in edge_list if a in core and b in outside]
    assert not bad, f"the core imports the ROS edge or a tool: {bad}"
    bad = [(a, b) for a, b in edge_list if a in layers["identify"] and (b in layers["ros"] or b in layers["cli"])]
    assert not bad, f"dynamics_identify imports ROS code: {bad}"


MAX_MODULES = 20
# the core: what a model is made of and read from (docs/design.md); the algorithms, the simulator, the
# node and the tools are built on it. _jit_build and warm/ (the kernel build, which imports every
# kernel) are not part of it.
CORE = ("spatial", "joints", "layout", "model", "urdf", "urdf_source", "urdf_xml", "loop_joints", "joint_law",
        "topology", "loop_data", "packed", "errors", "_jit", "_fast", "_kernel_io", "dispatch", "batch_errors")
ABOVE_CORE = ("algorithms", "sim", "ros", "cli", "identify")


def test_no_folder_holds_more_than_20_modules():
    """Each folder of the package holds at most 20 modules directly (its __init__ and __main__ aside):
    a new module finds its room, or a new room is made (docs/design.md)."""
    crowded = {}
    for d in [REPO / "dynamics_node", *sorted(p for p in (REPO / "dynamics_node").rglob("*") if p.is_dir())]:
        n = len([p for p in d.glob("*.py") if p.name not in ("__init__.py", "__main__.py")])
        if n > MAX_MODULES:
            crowded[str(d.relative_to(REPO))] = n
    assert not crowded, f"folders with more than {MAX_MODULES} modules: {crowded}"


def test_the_core_imports_nothing_built_on_it():
    """The core's modules (the model, the URDF reader, joints, spatial algebra, the joint law, the
    topology, the loops' packed data, the kernels' plumbing) import nothing from algorithms/, sim/,
    ros/, cli/ or identify/, directly or through another module, imports inside functions included;
    the algorithms import neither the simulator nor ROS; the simulator does not import ROS."""
    edges = _import_graph()
    core = {f"dynamics_node.{n}" for n in CORE} & set(edges)

    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for b in edges[todo.pop()] - seen:
                seen.add(b)
                todo.append(b)
        return seen

    def inside(m, *pkgs):
        return any(m == f"dynamics_node.{p}" or m.startswith(f"dynamics_node.{p}.") for p in pkgs)

    bad = {m: sorted(b for b in reach(m) if inside(b, *ABOVE_CORE)) for m in sorted(core)}
    bad = {m: b for m, b in bad.items() if b}
    assert not bad, f"core modules that reach above the core: {bad}"
    assert len(core) == len(CORE), f"core modules not found: {sorted(set(CORE) - {m.split('.')[1] for m in core})}"
    algorithms = [m for m in edges if inside(m, "algorithms")]
    assert algorithms
    bad = [(a, b) for a in algorithms for b in edges[a] if inside(b, "sim", "ros", "cli", "identify")]
    assert not bad, f"algorithms importing the simulator, ROS or a tool: {bad}"
    bad = [(a, b) for a in edges if inside(a, "sim") for b in edges[a] if inside(b, "ros", "cli", "identify")]
    assert not bad, f"the simulator imports ROS or a tool: {bad}"


def test_module_names_are_unique_across_the_package():
    """One name, one module: no two modules of dynamics_node (__init__ and __main__ aside) share a
    file name, and no module is named as a package of dynamics_node (tools/ at the repository's top is
    outside it)."""
    from collections import defaultdict

    where = defaultdict(list)
    for p in sorted((REPO / "dynamics_node").rglob("*.py")):
        if p.name not in ("__init__.py", "__main__.py"):
            where[p.stem].append(str(p.relative_to(REPO)))
    packages = {p.parent.name for p in (REPO / "dynamics_node").rglob("__init__.py")}
    clash = {n: ps for n, ps in where.items() if len(ps) > 1 or n in packages}
    assert not clash, f"module names used twice (or as a package's): {clash}"


BLOCK_SIZES = ("HEADER_I", "BODY_I", "HEADER_F", "BODY_F", "DOF_F")  # layout.py: the packed model's blocks
OFFSET_OWNERS = ("layout.py", "packed.py")


def _offset_sums(source):
    """Lines of a module's source where one of the packed model's block sizes is an operand of arithmetic
    (`HEADER_F + BODY_F * i`) or a bound or step of a slice (`mi[HEADER_I + J_VI::BODY_I]`)."""
    import ast

    def block(node):
        return (isinstance(node, ast.Name) and node.id in BLOCK_SIZES
                or isinstance(node, ast.Attribute) and node.attr in BLOCK_SIZES)

    lines = set()
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.BinOp):
            operands = (n.left, n.right)
        elif isinstance(n, ast.Slice):
            operands = (n.lower, n.upper, n.step)
        elif isinstance(n, ast.AugAssign):
            operands = (n.value,)
        else:
            continue
        if any(o is not None and block(o) for o in operands):
            lines.add(n.lineno)
    return sorted(lines)


def test_the_rule_on_offset_sums_sees_them():
    """The next test's scan finds the forms it forbids and passes the accessors' calls."""
    planted = ("B = mf[HEADER_F:HEADER_F + BODY_F * nb].reshape(nb, BODY_F)\n"
               "vi = model.mi[HEADER_I + J_VI::BODY_I]\n"
               "dd = do0 + DOF_F * dof\n"
               "o = layout.HEADER_I + layout.BODY_I * i\n"
               "mi = np.zeros(HEADER_I + BODY_I * nb)\n"
               "n = BODY_F\nn *= BODY_F\n")
    assert _offset_sums(planted) == [1, 2, 3, 4, 5, 7]
    allowed = ("hdr = carray(mip, (HEADER_I,))\nB = body_floats(mf, nb)\nso = dof_f(nb, dof) + D_S\n"
               "vi = body_ints(mi, nb)[:, J_VI]\n")
    assert _offset_sums(allowed) == []
    packed = (REPO / "dynamics_node" / "packed.py").read_text(encoding="utf-8")
    assert len(_offset_sums(packed)) >= 8, "packed.py's accessors are offset sums: the scan should see them"


def test_only_layout_and_packed_sum_the_packed_models_offsets():
    """Every module but layout.py (the tables) and packed.py (the accessors) reads the packed model through
    packed.py's accessors (body_f, dof_f, body_ints, body_floats, dof_floats, sizes, parent ...): no
    sum over the blocks' sizes is written anywhere else."""
    offenders = []
    for p in sorted((REPO / "dynamics_node").rglob("*.py")):
        if p.parent == REPO / "dynamics_node" and p.name in OFFSET_OWNERS:
            continue
        offenders += [f"{p.relative_to(REPO)}:{k}" for k in _offset_sums(p.read_text(encoding="utf-8"))]
    assert not offenders, f"offset sums over the packed model's blocks (use packed.py's accessors): {offenders}"
