#!/usr/bin/env bash
# Lay dynamics_node out in the venv prefix ($1, default .venv) the way colcon installs an ament_python
# package, so that launch_ros, `ros2 launch dynamics_node ...`, `ros2 run` and `ros2 pkg` find it with
# no environment variable beyond the venv on AMENT_PREFIX_PATH (the kit's `ros2` adds it itself):
#   share/ament_index/resource_index/packages/dynamics_node   the ament index marker
#   share/dynamics_node/package.xml, launch/, config/, urdf/   real folders of symlinked files
#                                                             (ros2launch does not enter symlinked folders)
#   lib/dynamics_node/<exe>                                    where launch_ros' Node(executable=) looks
# The editable install (pip -e) has none of it. Symlinks: an edit of a launch, config or URDF file is
# seen at once; a new file needs `make setup` again (the Makefile re-runs this when one appears).
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC="$PWD"
VENV="$(cd "${1:-.venv}" && pwd)"
PKG=dynamics_node
EXES=(dynamics_node dynamics_cli dynamics_summary)
[[ -x "$VENV/bin/dynamics_identify" ]] && EXES+=(dynamics_identify)
mkdir -p "$VENV/share/ament_index/resource_index/packages" "$VENV/lib/$PKG"
cp "$SRC/resource/$PKG" "$VENV/share/ament_index/resource_index/packages/$PKG"
rm -rf "$VENV/share/$PKG"
mkdir -p "$VENV/share/$PKG"
ln -s "$SRC/package.xml" "$VENV/share/$PKG/package.xml"
for d in launch config urdf; do
  mkdir -p "$VENV/share/$PKG/$d"
  for f in "$SRC/$d"/*; do
    [[ -f "$f" ]] && ln -s "$f" "$VENV/share/$PKG/$d/$(basename "$f")"
  done
done
for e in "${EXES[@]}"; do
  [[ -x "$VENV/bin/$e" ]] || { echo "install_ament_layout.sh: no $VENV/bin/$e (pip install -e . first)" >&2; exit 1; }
  ln -sfn "$VENV/bin/$e" "$VENV/lib/$PKG/$e"
done
echo "dynamics_node laid out as an ament package in $VENV (share/$PKG, lib/$PKG)"
