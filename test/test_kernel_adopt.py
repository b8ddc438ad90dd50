"""_jit_build.adopt: the kernel build of one copy of the code reuses numba's cache entries that another
copy of the same files made in the same cache (the source tree's `make setup`, then `colcon build` of
the same clone), and nothing else: not from a copy whose files differ, not another numba's, not an
entry made for an earlier state of a file. The end to end use (a colcon build that compiles nothing
after `make setup`) is test_workspace.py's."""
from __future__ import annotations

import json
import os
import pathlib
import pickle
import shutil

import pytest

numba = pytest.importorskip("numba")

from numba.core.caching import _CacheLocator  # noqa: E402
from numba.core.serialize import dumps  # noqa: E402

from dynamics_node import _jit_build  # noqa: E402

PKG = _jit_build.PACKAGE
SOURCE = "algorithms/tree/rnea.py"


def _sub(package, rel):
    return _CacheLocator.get_suitable_cache_subpath(str(package / rel))


def _index(path, stamp, overloads, version=None):
    with open(path, "wb") as f:
        pickle.dump(version or numba.__version__, f, protocol=-1)
        f.write(dumps((stamp, overloads)))


def _read_index(path):
    with open(path, "rb") as f:
        version = pickle.load(f)
        return version, pickle.loads(f.read())


def _stamp(path):
    """numba's stamp of a source file (its contents' hash, or time stamp and size in older numbas)."""
    import types

    from numba.core.caching import _SourceFileBackedLocatorMixin
    return _SourceFileBackedLocatorMixin.get_source_stamp(types.SimpleNamespace(_py_file=str(path)))


@pytest.fixture
def other(tmp_path):
    """A byte for byte copy of the package elsewhere, its ready marker and two index entries of
    rnea.py in the cache: one made for the file as it is, one for an earlier state of it."""
    copy = tmp_path / "elsewhere" / "dynamics_node"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    cache = tmp_path / "cache"
    folder = cache / _sub(copy, SOURCE)
    folder.mkdir(parents=True)
    (folder / "rnea.rnea_kernel-10.py311.1.nbc").write_bytes(b"compiled code")
    _index(folder / "rnea.rnea_kernel-10.py311.nbi", _stamp(copy / SOURCE),
           {("sig",): "rnea.rnea_kernel-10.py311.1.nbc"})
    _index(folder / "rnea.old-20.py311.nbi", ("an earlier stamp",), {("sig",): "rnea.old-20.py311.1.nbc"})
    stamps = {}
    for p in sorted(PKG.rglob("*.py")):
        st = p.stat()
        stamps[p.relative_to(PKG).as_posix()] = [st.st_mtime, st.st_size]
    (cache / "ready").mkdir()
    marker = {"package": str(copy), "numba": _jit_build._numba_version(), "files": stamps}
    (cache / "ready" / "other.json").write_text(json.dumps(marker))
    return copy, cache


def test_entries_of_a_copy_of_the_same_files_are_taken_and_stamped_for_this_copy(other):
    copy, cache = other
    assert _jit_build.adopt(str(cache)) == copy
    ours = cache / _sub(PKG, SOURCE)
    version, (stamp, overloads) = _read_index(ours / "rnea.rnea_kernel-10.py311.nbi")
    assert version == numba.__version__
    assert stamp == _stamp(PKG / SOURCE)
    assert overloads == {("sig",): "rnea.rnea_kernel-10.py311.1.nbc"}
    assert (ours / "rnea.rnea_kernel-10.py311.1.nbc").read_bytes() == b"compiled code"
    assert not (ours / "rnea.old-20.py311.nbi").exists(), "an entry for an earlier state of the file was taken"


def test_a_copy_that_differs_by_one_file_lends_nothing(other):
    copy, cache = other
    (copy / "urdf.py").write_text((copy / "urdf.py").read_text() + "\n# changed\n")
    assert _jit_build.adopt(str(cache)) is None
    assert not (cache / _sub(PKG, SOURCE)).exists()


def test_another_numbas_cache_lends_nothing(other):
    copy, cache = other
    marker = json.loads((cache / "ready" / "other.json").read_text())
    marker["numba"] = "0.1.0"
    (cache / "ready" / "other.json").write_text(json.dumps(marker))
    assert _jit_build.adopt(str(cache)) is None


def test_no_marker_or_a_broken_one_lends_nothing(tmp_path):
    cache = tmp_path / "cache"
    (cache / "ready").mkdir(parents=True)
    assert _jit_build.adopt(str(cache)) is None
    (cache / "ready" / "broken.json").write_text("{not json")
    assert _jit_build.adopt(str(cache)) is None
    marker = {"package": str(PKG), "numba": _jit_build._numba_version(), "files": {}}
    (cache / "ready" / "self.json").write_text(json.dumps(marker))   # this copy's own marker
    assert _jit_build.adopt(str(cache)) is None
    assert os.listdir(cache) == ["ready"]


def test_a_deleted_copy_lends_nothing(other):
    copy, cache = other
    shutil.rmtree(copy)
    assert _jit_build.adopt(str(cache)) is None
    assert not pathlib.Path(cache / _sub(PKG, SOURCE)).exists()
