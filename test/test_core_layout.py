"""The kernels are written against dynamics_node/layout.py's names, not against hand-computed offsets:
the layout tables are consistent with what the C shim and the packer assume, and a scan of
every compiled function's source finds none of the patterns the offsets used to take (`9 * nb`,
`mi[ii + 3]`, a literal 126 or 172)."""
import ast
import pathlib

import numpy as np
import pytest

import dynamics_node as dn
from dynamics_node import layout as L

PKG = pathlib.Path(dn.__file__).resolve().parent
# the core's kernel files and every file of algorithms/ and sim/ and their sub-packages, so that a new
# kernel file is scanned too
KERNEL_FILES = ["joints.py", "spatial.py", "joint_law.py", "loop_data.py", "topology.py", "packed.py", "_kernel_io.py",
                *sorted(p.relative_to(PKG).as_posix() for d in ("algorithms", "sim") for p in (PKG / d).rglob("*.py"))]
ALLOWED_BIG = set()  # no big literal in compiled code: status codes are built by _kernel_io.status


def test_constants_are_the_tables_running_sums():
    """Every constant of layout.py, written out by hand, is its table's running sum of sizes (the offset),
    its size (where a _N constant is defined) and its table's total; every table is in L.TABLES."""
    tables = {id(t) for t, _, _ in L.TABLES}
    assert all(id(v) in tables for k, v in vars(L).items() if isinstance(v, tuple) and v and isinstance(v[0], tuple)
               and len(v[0]) == 3 and k != "TABLES")
    named = set()
    for table, prefix, total in L.TABLES:
        off = 0
        for name, size, meaning in table:
            assert getattr(L, f"{prefix}_{name}") == off, f"{prefix}_{name}"
            assert getattr(L, f"{prefix}_{name}_N", size) == size, f"{prefix}_{name}_N"
            assert meaning and size > 0
            named |= {f"{prefix}_{name}", f"{prefix}_{name}_N"}
            off += size
        assert getattr(L, total) == off, total
        named.add(total)
    # no stray constant of a table's prefix that its table does not name
    prefixes = {p for _, p, _ in L.TABLES}
    stray = {k for k in vars(L) if k.split("_")[0] in prefixes and k not in named and k not in ("B_RBI",)}
    assert not stray, sorted(stray)


def test_c_header_is_what_the_tables_give():
    """dynamics_node/_layout.h, which the C shims include, is what tools/gen_layout_header.py writes from
    the tables now (regenerate it after editing a table)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_layout_header", PKG.parent / "tools" / "gen_layout_header.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = gen.header_text()
    assert (PKG / "_layout.h").read_text() == text, "run tools/gen_layout_header.py"
    # and the header says what the tables say, read back independently of the generator's loop
    defs = dict(ln.split()[1:3] for ln in text.splitlines() if ln.startswith("#define DN_") and "(" not in
                ln.split()[1])
    assert defs["DN_W_E"] == "0" and defs["DN_WORK_BODY"] == str(L.WORK_BODY) and defs["DN_H_NVU"] == "3"
    assert defs["DN_SI_NF"] == str(L.SI_NF) and defs["DN_D_OFFSET"] == str(L.D_OFFSET)


def test_c_shims_read_the_header_by_name():
    """The C shims read the packed model's header and size the work arrays through _layout.h's names, not
    by position (h[1]) or by repeating the size rule or a status code's number."""
    import re

    for name in ("_fastcall.c", "_routes.c", "_contact_route.c", "_step_route.c", "_fastcall.h"):
        src = (PKG / name).read_text()
        assert not re.search(r"\bh\[\d\]", src), name
        assert not re.search(r"\b[1-5]00000000(LL)?\b", src), name   # a status code by its number
        assert "work_body" not in src, name
    assert '#include "_layout.h"' in (PKG / "_fastcall.h").read_text()


def test_consistent_offsets_relied_on():
    # what other code relies on: the C shim reads nb and nvt from mi[0], mi[1]; rbi(m, h, Ibar) is 13
    # consecutive floats; the cosines follow the sines (joints.sincos_all)
    assert (L.H_NB, L.H_NVT) == (0, 1)
    assert (L.B_H, L.B_IBAR) == (L.B_RBI + 1, L.B_RBI + 4) and L.RBI_N == 1 + L.B_H_N + L.B_IBAR_N
    assert L.RBI_N <= L.W_IA_N and L.W_COS == L.W_SIN + 1


def test_packed_model_reads_back_by_name():
    """The packer (model.py) and the names agree: fields read back by name are the model's own data."""
    m = dn.load_model(str(PKG.parent / "urdf" / "arm7.urdf"), floating_base=True, armature=0.25)
    J = m.mi[L.HEADER_I:].reshape(m.nb, L.BODY_I)
    assert m.mi[L.H_NB] == m.nb and m.mi[L.H_NVT] == m.nvt and m.mi[L.H_NQT] == m.nqt
    np.testing.assert_array_equal(J[:, L.J_PARENT], m.parent)
    np.testing.assert_array_equal(J[:, L.J_TYPE], m.jtype)
    assert list(J[:, L.J_NV]) == [6] + [1] * (m.nb - 1) and J[1, L.J_QI] == 7 and J[1, L.J_VI] == 6
    np.testing.assert_array_equal(m.mf[L.HF_GRAVITY:L.HF_GRAVITY + 3], m.gravity)
    assert m.mf[L.HF_TOL] == m.singular_tol
    D = m.mf[L.HEADER_F + L.BODY_F * m.nb:L.HEADER_F + L.BODY_F * m.nb + L.DOF_F * m.nvt].reshape(m.nvt, L.DOF_F)
    assert m.mf.shape[0] == L.HEADER_F + L.BODY_F * m.nb + L.DOF_F * m.nvt   # no mimic section without mimic joints
    assert m.mi[L.H_NVU] == m.nv == m.nvt
    assert np.all(D[:, L.D_ARMATURE][6:] == 0.25)
    np.testing.assert_array_equal(D[:6, L.D_S:L.D_S + 6], np.block([[np.zeros((3, 3)), np.eye(3)],
                                                                   [np.eye(3), np.zeros((3, 3))]]))
    assert m.work_size == L.WORK_BODY * m.nb + L.WORK_DOF * m.nvt + L.WORK_EXTRA


def _kernels(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            decos = {getattr(d.func if isinstance(d, ast.Call) else d, "id", "") for d in node.decorator_list}
            if decos & {"njit", "cfunc"}:
                yield node


def _int(node):
    return isinstance(node, ast.Constant) and type(node.value) is int


def _offences(fn):
    """Literal offsets in a compiled function: a literal times nb (a work-array block), an integer
    literal inside an index of mi (every field of mi has its name), a literal beyond any spatial
    quantity's size (36) but the status codes."""
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for a, b in ((node.left, node.right), (node.right, node.left)):
                if _int(a) and isinstance(b, ast.Name) and b.id in ("nb", "nvt"):
                    yield f"{a.value} * {b.id}"
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "mi":
            for sub in ast.walk(node.slice):
                if _int(sub) and sub.value != 0:
                    yield f"mi[... {sub.value} ...]"
        if _int(node) and node.value > 36 and node.value not in ALLOWED_BIG:
            yield f"literal {node.value}"


@pytest.mark.parametrize("name", KERNEL_FILES)
def test_no_literal_offsets_in_kernels(name):
    found = {f"{fn.name}: {o}" for fn in _kernels(PKG / name) for o in _offences(fn)}
    assert not found, f"{name}: hand-computed offsets in compiled code: {sorted(found)}"


def test_scan_covers_every_compiled_file():
    """Every module holding a compiled function (njit, cfunc) is scanned, the loop package's included."""
    compiled = {p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py") if any(True for _ in _kernels(p))}
    assert {"algorithms/loops/constraints.py", "algorithms/loops/forward.py"} <= compiled
    assert compiled <= set(KERNEL_FILES), sorted(compiled - set(KERNEL_FILES))


def test_scan_catches_the_old_patterns():
    """The scan above can fail: it finds each kind of offset the kernels used to be written with."""
    src = ("@njit\ndef k(mi, mf, w, nb, i):\n    r0 = 9 * nb\n    p = mi[HEADER_I + 5 * i]\n"
           "    t = w[172]\n    return mi[ii + 3]\n")
    found = sorted(_offences(next(_kernels_src(src))))
    assert found == ["9 * nb", "literal 172", "mi[... 3 ...]", "mi[... 5 ...]"]


def _kernels_src(src):
    tmp = pathlib.Path(__file__).parent / "__layout_scan_tmp.py"
    try:
        tmp.write_text(src)
        yield from _kernels(tmp)
    finally:
        tmp.unlink(missing_ok=True)


def _subtree_dof_end(parent, vi, nvj, i):
    """The end of the dofs of i's subtree from the parent array alone (every body whose ancestors include i)."""
    end = vi[i] + nvj[i]
    for k in range(len(parent)):
        a = k
        while a >= 0 and a != i:
            a = parent[a]
        if a == i:
            end = max(end, vi[k] + nvj[k])
    return end


@pytest.mark.parametrize("src,floating", [("arm7.urdf", True), ("dual_arm_object.urdf", False), ("talos", True)])
def test_subtree_dof_end_is_every_descendant(src, floating):
    """J_DEND (the kernels' subtree of dofs, derivatives and H^-1) is the end of the dofs of every descendant,
    and the subtree is the run of dofs VI .. DEND - 1 (depth-first order)."""
    import urdfgen as ug

    path = ug.erd("talos_data/robots/talos_full_v2.urdf") if src == "talos" else PKG.parent / "urdf" / src
    if not path.exists():
        pytest.skip(f"{path} is not here")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = dn.load_model(str(path), floating_base=floating)
    J = m.mi[L.HEADER_I:].reshape(m.nb, L.BODY_I)
    vi, nvj = J[:, L.J_VI], J[:, L.J_NV]
    for i in range(m.nb):
        assert J[i, L.J_DEND] == _subtree_dof_end(m.parent, vi, nvj, i), i
        inside = {k for k in range(m.nb) if vi[i] <= vi[k] < J[i, L.J_DEND]}
        assert inside == {k for k in range(m.nb) if _is_desc(m.parent, k, i)}, i


def _is_desc(parent, k, i):
    while k >= 0 and k != i:
        k = parent[k]
    return k == i


def test_bodies_out_of_depth_first_order_are_refused():
    from dynamics_node.model import _check_depth_first

    _check_depth_first([-1, 0, 1, 0, 3], list("abcde"))          # two branches, each after its parent
    _check_depth_first([-1, 0, 1, 1, 0], list("abcde"))          # siblings, then back to the root's child
    with pytest.raises(ValueError, match="'d' .*body 3.*follows 'c'"):
        _check_depth_first([-1, 0, 0, 1], list("abcd"))   # b's child d after b's sibling c


def test_view_is_reshape_without_the_machinery():
    """The kernels' view(a, o, shape) (dynamics_node._jit) is a[o:o + prod(shape)].reshape(shape), compiled
    and as Python, and writes through to a."""
    from numba import njit

    from dynamics_node import _jit
    from dynamics_node.algorithms.derivatives import rnea_derivatives as R

    _jit.materialize()
    view = R.view   # the intrinsic, once numba is loaded
    assert not isinstance(view, _jit._Late)

    @njit
    def take(a, o, n):
        v3 = view(a, o, (n, 2, 3))
        v2 = view(a, o + 1, (n, 6))
        v3[n - 1, 1, 2] = -1.0
        return v3.copy(), v2.copy(), view(a, 0, (4,)).copy()

    a = np.arange(40.0)
    v3, v2, v1 = take(a, 3, 4)
    b = np.arange(40.0)
    b[3 + 4 * 6 - 1] = -1.0
    np.testing.assert_array_equal(v3, b[3:27].reshape(4, 2, 3))
    np.testing.assert_array_equal(v2, b[4:28].reshape(4, 6))
    np.testing.assert_array_equal(v1, b[0:4])
    assert a[3 + 4 * 6 - 1] == -1.0   # a view, not a copy
    np.testing.assert_array_equal(_jit._view_py(b, 3, (4, 2, 3)), b[3:27].reshape(4, 2, 3))   # as Python
    ints = R.ints if hasattr(R, "ints") else None
    if ints is not None:
        @njit
        def as_int(a):
            k = ints(a, 2, (3,))
            k[1] = 7
            return k.copy()

        f = np.zeros(6)
        np.testing.assert_array_equal(as_int(f), [0, 7, 0])
        assert f[3:4].view(np.int64)[0] == 7 and f[2] == 0.0


def test_accessors_read_the_packed_model_by_name():
    """_kernel_io.py's accessors, compiled, give the loader's own arrays (λ(i), the joint type) and the coordinates
    of arm7 on a floating base counted by hand (the free joint's 7 positions and 6 dofs, then one per joint);
    body_f / dof_f are where body i's and dof k's fields start."""
    from numba import njit

    from dynamics_node import packed as P

    m = dn.load_model(str(PKG.parent / "urdf" / "arm7.urdf"), floating_base=True)

    @njit
    def read(mi):
        out = np.empty((mi[L.H_NB], 6), dtype=np.int64)
        for i in range(mi[L.H_NB]):
            out[i, 0] = P.parent(mi, i)
            out[i, 1] = P.joint_type(mi, i)
            out[i, 2] = P.first_q(mi, i)
            out[i, 3] = P.first_dof(mi, i)
            out[i, 4] = P.dof_count(mi, i)
            out[i, 5] = P.subtree_end(mi, i)
        return out

    got = read(m.mi)
    np.testing.assert_array_equal(got[:, 0], m.parent)
    np.testing.assert_array_equal(got[:, 1], m.jtype)
    assert list(got[:, 2]) == [0] + list(range(7, 7 + m.nb - 1))
    assert list(got[:, 3]) == [0] + list(range(6, 6 + m.nb - 1))
    assert list(got[:, 4]) == [6] + [1] * (m.nb - 1)
    assert got[0, 5] == m.nvt == 6 + m.nb - 1   # the base's subtree: every dof (a serial arm)
    assert P.body_f(2) == L.HEADER_F + 2 * L.BODY_F and P.dof_f(m.nb, 7) == L.HEADER_F + m.nb * L.BODY_F + 7 * L.DOF_F


def test_status_codes_round_trip():
    """status() builds KIND 10^8 + ARG 10^5 + INDEX, compiled and as Python; decode() reads it back; the C
    header's DN_STATUS is the same arithmetic."""
    from numba import njit

    from dynamics_node import _kernel_io as S

    @njit
    def build(k, a, i):
        return S.status(k, a, i)

    for k, a, i in ((S.BAD_LENGTH, S.A_FEXT, 99999), (S.SINGULAR, 0, 12), (S.OVERFLOW, 0, 0)):
        code = k * 10 ** 8 + a * 10 ** 5 + i
        assert build(k, a, i) == code and S.decode(code) == (k, a, i)
    assert S.OVERFLOW_STATUS == 5 * 10 ** 8
    assert "#define DN_STATUS(kind, arg, index)" in (PKG / "_layout.h").read_text()
