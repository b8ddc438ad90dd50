#!/usr/bin/env bash
# Build the dynamics_interfaces package (ament_cmake + rosidl) with plain CMake and install it into
# the prefix of the Python venv given as $1 (default .venv). See ../shared/notes/ros2-from-pip.md:
# no colcon is needed, and rclpy finds the installed types with no environment variables.
# Idempotent: re-running rewrites nothing twice and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="$(cd "${1:-.venv}" && pwd)"
PY="$VENV/bin/python"
BUILD="$PWD/build/dynamics_interfaces"

# 1. Packaging defect of the ROS wheels: their exported CMake files name the wheel builder's Python
#    and numpy include folders (/opt/python/cp311-cp311/...), and rosidl generation then fails with
#    "includes non-existent path". Point them at this venv's folders.
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
  echo "build_interfaces.sh: paths under /opt/python remain in the files above" >&2
  exit 1
fi

# 2. Configure, build, install into the venv prefix, with the venv's Python for the generators.
export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export CMAKE_PREFIX_PATH="$VENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export PATH="$VENV/bin:$PATH"
mkdir -p "$(dirname "$BUILD")"
cmake -S dynamics_interfaces -B "$BUILD" -Wno-dev \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$VENV" -DCMAKE_INSTALL_PREFIX="$VENV" \
  -DPython3_EXECUTABLE="$PY" -DPYTHON_EXECUTABLE="$PY" \
  -DBUILD_TESTING=OFF > "$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log" >&2; exit 1; }
cmake --build "$BUILD" -j"$(nproc 2>/dev/null || echo 2)" > "$BUILD.build.log" 2>&1 || { tail -n 60 "$BUILD.build.log" >&2; exit 1; }
cmake --install "$BUILD" > /dev/null

# 3. Check: the types import from the venv's Python.
"$PY" -c 'from dynamics_interfaces.srv import InverseDynamics, TrajectoryInverseDynamics; print("dynamics_interfaces installed:", InverseDynamics.__module__)'
