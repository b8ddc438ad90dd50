#!/usr/bin/env bash
# Packaging defect of the ROS wheels (not of a ROS distribution): their exported CMake files name the
# wheel builder's Python and numpy include folders (/opt/python/cp311-cp311/...), and rosidl generation
# then fails with "includes non-existent path". Point them at the folders of the venv given as $1.
# Used by build_interfaces.sh (make setup) and by the workspace test's venv (test/test_workspace.py).
# Idempotent.
set -euo pipefail
VENV="$(cd "${1:?usage: fix_wheel_cmake_paths.sh VENV}" && pwd)"
PY="$VENV/bin/python"
PY_INC="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
NP_INC="$("$PY" -c 'import numpy; print(numpy.get_include())')"
mapfile -t BAD < <(grep -l '/opt/python/' "$VENV"/share/*/cmake/*.cmake 2>/dev/null || true)
for f in "${BAD[@]}"; do
  sed -i -E \
    -e "s#/opt/python/[^;\"]*/include/python3\.[0-9]+#${PY_INC}#g" \
    -e "s#/opt/python/[^;\"]*/site-packages/numpy/(_core|core)/include#${NP_INC}#g" \
    "$f"
done
if grep -l '/opt/python/' "$VENV"/share/*/cmake/*.cmake 2>/dev/null; then
  echo "fix_wheel_cmake_paths.sh: paths under /opt/python remain in the files above" >&2
  exit 1
fi
