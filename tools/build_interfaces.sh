#!/usr/bin/env bash
# Build the dynamics_interfaces package (ament_cmake + rosidl) with plain CMake and install it into
# the prefix of the Python venv given as $1 (default .venv), building in the folder $2 (default
# build/dynamics_interfaces). See ../shared/notes/ros2-from-pip.md: no colcon is needed, and rclpy
# finds the installed types with no environment variables.
# Idempotent: re-running rewrites nothing twice and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="$(cd "${1:-.venv}" && pwd)"
PY="$VENV/bin/python"
BUILD="$PWD/${2:-build/dynamics_interfaces}"

# 1. The ROS wheels' CMake files name the wheel builder's include folders: point them at this venv's.
bash tools/fix_wheel_cmake_paths.sh "$VENV"

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
