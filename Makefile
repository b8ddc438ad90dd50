# Two commands for a new user: `make run` and `make test` (both set up first if needed).
# `make setup` creates .venv/ (Python 3.11) from the package registries; `make bench` prints speed ratios.
# ROS_DISTRO=jazzy (on the command line: make setup|run|test ROS_DISTRO=jazzy) does the same with the wheels of
# ROS 2 Jazzy in .venv-jazzy/ (the two distributions cannot share a venv); Kilted is the default.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
ifneq ($(origin ROS_DISTRO),command line)
ROS_DISTRO := kilted
endif
ifeq ($(ROS_DISTRO),kilted)
VENV := .venv
CONSTRAINTS := constraints.txt
ROS_REQUIREMENTS := requirements-ros.txt
else ifeq ($(ROS_DISTRO),jazzy)
VENV := .venv-jazzy
CONSTRAINTS := constraints-jazzy.txt
ROS_REQUIREMENTS := requirements-ros-jazzy.txt
LOCK_EXTRA := -r requirements-workspace.txt
else
$(error ROS_DISTRO=$(ROS_DISTRO): the Makefile sets up kilted (the default) or jazzy)
endif
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
STAMP := $(VENV)/.setup-done
IFACE_STAMP := $(VENV)/.interfaces-done
LAYOUT_STAMP := $(VENV)/.ament-layout-done
KIT_STAMP := $(VENV)/.ros2-kit-done
# The `ros2` command, launch and launch_ros from source (no wheels exist), where the kit is at hand
# (shared/ros2-python beside this checkout); without it `make run` and dynamics_cli still work.
ROS2_KIT ?= $(firstword $(wildcard ../shared/ros2-python/install.sh /work/shared/ros2-python/install.sh))

# No DDS traffic leaves this machine unless the caller says otherwise; each make run gets its own domain.
export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST
export ROS_DOMAIN_ID ?= $(shell echo $$(( $$$$ % 100 + 101 )))
export PYTHONDONTWRITEBYTECODE :=

.PHONY: setup kernels workspace-venv run run-dual-arm test test-busy test-oldest lint lock bench summary docs-figures clean

setup: $(STAMP) $(IFACE_STAMP) $(LAYOUT_STAMP) $(if $(ROS2_KIT),$(KIT_STAMP)) kernels

# Exact versions: constraints.txt pins every package the tests passed with (make lock renews it).
$(STAMP): requirements.txt $(ROS_REQUIREMENTS) requirements-test.txt $(CONSTRAINTS) setup.py dynamics_node/_fastcall.c dynamics_node/_routes.c dynamics_node/_contact_route.c dynamics_node/_step_route.c dynamics_node/_fastcall.h dynamics_node/_layout.h
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c $(CONSTRAINTS) setuptools wheel
	$(PIP) install -q -c $(CONSTRAINTS) -r requirements.txt -r $(ROS_REQUIREMENTS) -r requirements-test.txt
	$(PIP) install -q --no-deps --no-build-isolation -e .
	$(PY) setup.py -q build_ext --inplace
	@touch $@

# The compiled kernels, for the sources as they are now: numba's cache plus the ahead-of-time library
# of the C callbacks (dynamics_node/_jit_build.py), both in ~/.cache/dynamics_node/<hash of the sources and
# numba's version>.
# Nothing to do when they exist for this checkout; after an edit of a kernel, a few minutes, in one process per
# core (DYNAMICS_BUILD_JOBS=N for at most N; docs/install.md, Compiling the kernels).
kernels: $(STAMP)
	@$(PY) -m dynamics_node._jit_build build --if-missing

# dynamics_node laid out in .venv as colcon installs an ament_python package (ament index marker,
# share/dynamics_node/{package.xml,launch,config,urdf}, lib/dynamics_node/<executables>), so that
# `.venv/bin/ros2 launch dynamics_node dynamics.launch.py` finds it with no variable set
$(LAYOUT_STAMP): $(STAMP) tools/install_ament_layout.sh package.xml resource/dynamics_node $(wildcard launch/*.py config/*.yaml urdf/*.urdf)
	bash tools/install_ament_layout.sh $(VENV)
	@touch $@

# launch, launch_ros, ros2launch, ros2cli (.venv/bin/ros2) from the kit; registry packages it adds are
# pinned by constraints.txt
$(KIT_STAMP): $(IFACE_STAMP) $(ROS2_KIT) $(CONSTRAINTS)
	PIP_CONSTRAINT=$(abspath $(CONSTRAINTS)) bash $(ROS2_KIT) $(VENV)
	@touch $@

$(IFACE_STAMP): $(STAMP) $(wildcard dynamics_interfaces/srv/*.srv dynamics_interfaces/msg/*.msg) dynamics_interfaces/CMakeLists.txt tools/build_interfaces.sh
	bash tools/build_interfaces.sh $(VENV) build/$(ROS_DISTRO)/dynamics_interfaces
	@touch $@

# make run: the demo arm; make run URDF=path/to/robot.urdf (or .xacro): your robot, same parameter
# file; ARGS="-p name:=value ..." adds parameters.
URDF ?=
ARGS ?=
run: setup
	@echo "dynamics_node on ROS_DOMAIN_ID=$$ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE=$$ROS_AUTOMATIC_DISCOVERY_RANGE (Ctrl-C stops it). From another shell: ROS_DOMAIN_ID=$$ROS_DOMAIN_ID $(VENV)/bin/dynamics_cli gravity_compensation"; exec $(VENV)/bin/dynamics_node --ros-args --params-file config/default.yaml $(if $(URDF),-p urdf_path:=$(abspath $(URDF))) $(ARGS)

run-dual-arm: setup
	@echo "dynamics_node (dual-arm closed-loop example) on ROS_DOMAIN_ID=$$ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE=$$ROS_AUTOMATIC_DISCOVERY_RANGE (Ctrl-C stops it)"; exec $(VENV)/bin/dynamics_node --ros-args --params-file config/dual_arm.yaml

summary: setup
	$(VENV)/bin/dynamics_summary urdf/arm7.urdf

# The workspace test (test/test_workspace.py, part of make test): ROS 2 Jazzy's wheels in a venv of their own,
# standing in for a robot's /opt/ros/jazzy, with what rosdep installs from package.xml, colcon from PyPI and the
# ros2 kit; the wheels' CMake path fix is applied to it (an artefact of the wheels, not a user's step).
# dynamics_node is not in it: the test clones it into a workspace and builds it with colcon. Once (about
# 3 minutes), then reused while these files are unchanged.
WS_VENV := build/ws-jazzy/venv
WS_STAMP := build/ws-jazzy/.venv-done
$(WS_STAMP): requirements.txt requirements-ros-jazzy.txt requirements-workspace.txt constraints-jazzy.txt tools/fix_wheel_cmake_paths.sh $(ROS2_KIT)
	rm -rf $(WS_VENV) && mkdir -p $(dir $(WS_VENV)) && $(PYTHON) -m venv $(WS_VENV)
	$(WS_VENV)/bin/pip install -q --disable-pip-version-check -c constraints-jazzy.txt setuptools wheel
	$(WS_VENV)/bin/pip install -q --disable-pip-version-check -c constraints-jazzy.txt -r requirements.txt -r requirements-ros-jazzy.txt -r requirements-workspace.txt
	bash tools/fix_wheel_cmake_paths.sh $(WS_VENV)
	$(if $(ROS2_KIT),PIP_CONSTRAINT=$(abspath constraints-jazzy.txt) bash $(ROS2_KIT) $(WS_VENV))
	@touch $@

workspace-venv: $(WS_STAMP)

test: setup lint workspace-venv
	DYNAMICS_REQUIRE_ROS=1 DYNAMICS_REQUIRE_AOT=1 DYNAMICS_REQUIRE_WORKSPACE=1 $(PY) -m pytest -q test

# The tests that talk to node processes (node, simulation, launch, ros2 and dynamics_cli) beside BUSY processes
# that spin at ordinary priority (two: both cores of a small CI machine taken), so that a test that measures
# the scheduler instead of the node fails here first (docs/design.md, Tests). BUSY_TESTS narrows it.
BUSY ?= 2
BUSY_TESTS ?= $(wildcard test/test_node_*.py test/test_sim_*.py)
test-busy: setup
	@pids=""; for i in $$(seq $(BUSY)); do (while :; do :; done) & pids="$$pids $$!"; done; \
	trap 'kill $$pids 2>/dev/null' EXIT; echo "test-busy: $(BUSY) busy processes ($$pids)"; \
	DYNAMICS_REQUIRE_ROS=1 DYNAMICS_REQUIRE_AOT=1 $(PY) -m pytest -q -rfE --timeout 400 $(BUSY_TESTS)

# The library's tests with the oldest versions it supports (constraints-oldest.txt: Ubuntu 24.04's numpy, scipy
# and numba), in .venv-oldest and on a copy of this checkout in build/oldest (the C shim is compiled there
# against numpy 1.26, the checkout's own stays as make setup built it); the kernels in their own cache folder
# (numba's version is part of its name). Not the node's tests (no ROS in that venv but ament_index_python, which
# the loader's package:// needs), nor the workspace's; the comparisons with Pinocchio skip (none for numpy 1.26).
OLDEST := .venv-oldest
OLDEST_SRC := build/oldest/src
OLDEST_TESTS ?= $(filter-out test/test_node_% test/test_sim_% test/test_workspace%,$(wildcard test/test_*.py))
$(OLDEST)/.setup-done: requirements.txt requirements-test.txt constraints.txt constraints-oldest.txt
	rm -rf $(OLDEST) && $(PYTHON) -m venv $(OLDEST)
	grep -v -E '^(numba|llvmlite|numpy|scipy|cvxpy-base|pin)==' constraints.txt > $(OLDEST)/constraints.txt
	cat constraints-oldest.txt >> $(OLDEST)/constraints.txt
	$(OLDEST)/bin/pip install -q --disable-pip-version-check -c $(OLDEST)/constraints.txt setuptools wheel
	grep -v '^pin' requirements-test.txt > $(OLDEST)/requirements-test.txt
	$(OLDEST)/bin/pip install -q --disable-pip-version-check -c $(OLDEST)/constraints.txt -r requirements.txt \
		-r $(OLDEST)/requirements-test.txt ros-ament-index-python
	@touch $@

test-oldest: $(OLDEST)/.setup-done
	rm -rf $(OLDEST_SRC) && mkdir -p $(OLDEST_SRC)
	git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C $(OLDEST_SRC)
	cd $(OLDEST_SRC) && $(abspath $(OLDEST))/bin/pip install -q --disable-pip-version-check --no-deps \
		--no-build-isolation -e . && $(abspath $(OLDEST))/bin/python setup.py -q build_ext --inplace
	cd $(OLDEST_SRC) && $(abspath $(OLDEST))/bin/python -m dynamics_node._jit_build build --if-missing
	cd $(OLDEST_SRC) && DYNAMICS_REQUIRE_AOT=1 DYNAMICS_NO_PINOCCHIO=1 $(abspath $(OLDEST))/bin/python -m pytest -q \
		-p no:cacheprovider -rs $(OLDEST_TESTS)

# ruff, configured in ruff.toml (one line length for the tree)
lint: $(STAMP)
	$(VENV)/bin/ruff check .

# Renew constraints.txt (ROS_DISTRO=jazzy: constraints-jazzy.txt, with the workspace test's colcon): the newest
# versions the registries offer for requirements*.txt, resolved in a scratch venv. Then `make clean test` and
# commit the file if everything passes. The ros2 kit's registry packages (psutil, argcomplete, osrf-pycommon)
# are not in requirements*.txt: add their lines back by hand.
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install -q --disable-pip-version-check setuptools wheel
	.venv-lock/bin/pip install -q --disable-pip-version-check -r requirements.txt -r $(ROS_REQUIREMENTS) -r requirements-test.txt $(LOCK_EXTRA)
	.venv-lock/bin/pip freeze --all --exclude-editable | grep -v '^pip==' > $(CONSTRAINTS)
	rm -rf .venv-lock

# make bench AGAINST=REV: instead of the whole benchmark, this checkout against the revision REV in alternating
# processes (bench/compare.py; bench/README.md says how to read it)
bench: setup workspace-venv
	$(PY) bench/bench.py $(if $(AGAINST),--against $(AGAINST))

# The pictures of docs/ (tools/docs_figures.py says how each is made), into DOCS_IMG (default docs/img)
DOCS_IMG ?= docs/img
docs-figures: setup
	$(PY) tools/docs_figures.py --out $(DOCS_IMG)

clean:
	rm -rf build $(VENV) $(OLDEST)
