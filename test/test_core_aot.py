"""The ahead-of-time kernel library (dynamics_node/_jit.py): a process that only computes gravity,
inverse and forward dynamics, the mass matrix and contact forward dynamics never imports numba, and
gets exactly what the numba-compiled kernels give; a library built for other sources or another CPU is not used.

`make setup` builds the library; `make test` sets DYNAMICS_REQUIRE_AOT=1 so that a missing one fails
here instead of being skipped.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import dynamics_node as dn
from dynamics_node import _jit
from dynamics_node.algorithms.contact import forward_dynamics as contact
from dynamics_node.algorithms.tree import aba, crba, rnea
from dynamics_node.algorithms.contact.args import pack

REPO = pathlib.Path(__file__).resolve().parent.parent
ARM = REPO / "urdf" / "arm7.urdf"

CHILD = r"""
import json, sys
import numpy as np
import dynamics_node as dn
from dynamics_node import _jit
out = {}
for path, floating in json.loads(sys.argv[1]):
    m = dn.load_model(path, floating_base=floating)
    rng = np.random.default_rng(3)
    q = rng.uniform(-2, 2, m.nq)
    if floating:  # the root's [x y z qx qy qz qw] come first
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
    qd, x = rng.uniform(-1, 1, m.nv), rng.uniform(-1, 1, m.nv)
    out[path + str(floating)] = {
        "q": q.tolist(), "qd": qd.tolist(), "x": x.tolist(),
        "gravity": dn.gravity(m, q).tolist(),
        "id": dn.inverse_dynamics(m, q, qd, x).tolist(),
        "fd": dn.forward_dynamics(m, q, qd, x).tolist(),
        "H": dn.mass_matrix(m, q).tolist(),
        "contact": dn.contact_forward_dynamics(m, q, qd, x * 20, [
            dn.Contact(m.link_names[-1], (0.1, 0, 0), (0, 0, 1), 0.5),
            dn.Contact(m.link_names[-3], normal=(1, 0, 1))]).qdd.tolist()}
print(json.dumps({"numba": "numba" in sys.modules, "aot": _jit.aot_loaded(), "results": out}))
"""


def _child(models, env=None):
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(models)], capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def built():
    if not _jit.aot_loaded():
        if os.environ.get("DYNAMICS_REQUIRE_AOT") == "1":
            pytest.fail("the ahead-of-time kernel library is missing: `make kernels` builds it")
        pytest.skip("no ahead-of-time kernel library (make kernels)")
    return True


def test_hot_paths_run_without_numba_and_match_the_numba_kernels(built, tmp_path):
    floating = tmp_path / "floating.urdf"
    floating.write_text(ARM.read_text())
    got = _child([[str(ARM), False], [str(floating), True]])
    assert got["aot"] and not got["numba"], got
    for key, r in got["results"].items():
        path, fl = key[:-5] if key.endswith("False") else key[:-4], key.endswith("True")
        m = dn.load_model(path, floating_base=fl)
        q, qd, x = (np.array(r[k]) for k in ("q", "qd", "x"))
        # the numba dispatchers of the same kernels, called directly (the public functions would take
        # the library's C callbacks in this process too)
        mi, mf, n = m._kmi, m._kmf, m.nv
        out = {"gravity": np.empty(n), "id": np.empty(n), "fd": np.empty(n), "H": np.empty(n * n),
               "contact": np.empty(n)}
        assert rnea.gravity_entry(mi, mf, q, out["gravity"]) == 0
        assert rnea.rnea_entry(mi, mf, q, qd, x, out["id"]) == 0
        assert aba.aba_entry(mi, mf, q, qd, x, out["fd"]) == 0
        assert crba.crba_entry(mi, mf, q, out["H"]) == 0
        p = pack(m, [dn.Contact(m.link_names[-1], (0.1, 0, 0), (0, 0, 1), 0.5),
                     dn.Contact(m.link_names[-3], normal=(1, 0, 1))])
        assert contact.contact_fd_kernel(mi, mf, q, qd, x * 20, np.zeros(0), p.body, p.point, p.frame, p.mu,
                                         contact.REST_SPEED, out["contact"], np.empty((2, 3)),
                                         np.empty(2, dtype=np.int64), np.empty(m.work_size)) == 0
        for name, ours in out.items():
            np.testing.assert_allclose(np.array(r[name]).reshape(-1), ours, rtol=1e-13, atol=1e-13,
                                       err_msg=f"{key} {name}")
    assert _jit.numba_loaded()


def test_a_library_for_another_cpu_is_not_used(built, tmp_path):
    src = pathlib.Path(os.environ["NUMBA_CACHE_DIR"]) / "aot"
    dst = tmp_path / "cache" / "aot"
    shutil.copytree(src, dst)
    manifest = json.loads((dst / "kernels.json").read_text())
    manifest["cpu"] = "another-cpu"
    (dst / "kernels.json").write_text(json.dumps(manifest))
    got = _child([[str(ARM), False]], env={"NUMBA_CACHE_DIR": str(tmp_path / "cache")})
    assert not got["aot"] and got["numba"]


def test_no_library_means_numba_compiles(tmp_path):
    got = _child([[str(ARM), False]], env={"DYNAMICS_NODE_NO_AOT": "1"})
    assert not got["aot"] and got["numba"]


def test_signatures_are_spelled_as_numba_parses_them():
    from numba.core import sigutils

    from dynamics_node._kernel_io import F2, I1, SIG3

    assert str(I1) == "int64[::1]" and str(F2) == "float64[:, ::1]"
    args, ret = sigutils.normalize_signature(str(SIG3))
    assert str(ret) == "int64" and len(args) == 11 and str(args[0]) == "int64*"


# Loading numba while other threads compute. With the library, a process imports numba only when it
# first needs a kernel the library does not hold (a Jacobian, say); the node does that in a warm-up
# thread while it serves requests. A request reaching a kernel's numba dispatcher between its
# compile() and disable_compile() failed with "RuntimeError: compilation disabled" (seen in CI: the
# warm-up against an inverse-dynamics request with an external wrench, a numba-only path).

WATCH = r"""
import sys
from numba.core import dispatcher  # numba itself, not yet our kernels
seen = []
orig = dispatcher.Dispatcher.compile
def compile(self, sig):
    if _jit._numba is None:  # inside materialize(): no module may expose a dispatcher yet
        for name, mod in list(sys.modules.items()):
            if name.startswith("dynamics_node") and mod is not None:
                seen.extend(f"{name}.{a}" for a, v in vars(mod).items() if isinstance(v, dispatcher.Dispatcher))
    return orig(self, sig)
dispatcher.Dispatcher.compile = compile

import dynamics_node as dn
from dynamics_node import _jit
from dynamics_node.algorithms.tree import rnea
m = dn.load_model(sys.argv[1])
assert _jit.aot_loaded() and not _jit.numba_loaded()
dn.jacobian(m, [0.1] * 7, "tool0")  # not in the library: materialize()
assert _jit.numba_loaded() and not isinstance(rnea.rnea_kernel, _jit.Kernel)  # the modules have them now
print("EXPOSED" if seen else "OK", sorted(set(seen))[:5])
"""

STRESS = r"""
import sys, threading
import numpy as np
import dynamics_node as dn
from dynamics_node import _jit

m = dn.load_model(sys.argv[1])
q = np.array([0.1, 0.7, -0.3, -1.1, 0.4, 0.9, -0.2])
assert _jit.aot_loaded() and not _jit.numba_loaded()
errors, go = [], threading.Event()

def requests():  # a service thread, started while the warm-up loads numba
    go.wait()
    try:
        for _ in range(300):
            dn.inverse_dynamics(m, q, np.zeros(7), np.ones(7), {"tool0": (0, 0, -20, 0, 0, 0)})
            dn.link_poses(m, q)
    except Exception as e:
        errors.append(f"{type(e).__name__}: {e}")

def warm_up():
    go.set()
    dn.jacobian(m, q, "tool0")
    dn.mass_matrix(m, q)

ts = [threading.Thread(target=requests) for _ in range(2)] + [threading.Thread(target=warm_up)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("ERRORS" if errors else "OK", errors[:3])
"""


def _last_line(code):
    r = subprocess.run([sys.executable, "-c", code, str(ARM)], capture_output=True, text=True, timeout=600,
                       cwd=REPO)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


def test_no_module_exposes_a_dispatcher_while_numba_compiles(built):
    out = _last_line(WATCH)
    assert out.startswith("OK"), out


def test_requests_while_numba_loads_all_succeed(built):
    for _ in range(3):
        out = _last_line(STRESS)
        assert out.startswith("OK"), out


LATE = r"""
import sys
import dynamics_node as dn
from dynamics_node import _jit
from dynamics_node.algorithms.derivatives import c_fronts   # declared before numba is loaded
assert "dynamics_node.algorithms.loops.forward" not in sys.modules
_jit.materialize()                                          # numba loaded (any njit kernel's first call)
from dynamics_node.algorithms.loops import forward          # declared after
aot = _jit.aot_addresses()
print(forward._FD_C == aot["dynamics_node.algorithms.loops.forward.fd_c"],
      c_fronts.aba_derivatives_c.address == aot["dynamics_node.algorithms.derivatives.c_fronts.aba_derivatives_c"])
"""


def test_c_callbacks_come_from_the_library_after_numba_is_loaded(built):
    """A C callback's address is the library's whether its module was imported before numba was loaded
    or after (the closed loops' forward dynamics, imported on first use, ran numba's JIT code when a
    call before it had loaded numba: 5 % slower)."""
    assert _last_line(LATE) == "True True"
