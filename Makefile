# Two commands for a new user: `make run` and `make test` (both set up first if needed).
# `make setup` creates .venv/ (Python 3.11) from the package registries; `make bench` prints speed ratios.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
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

.PHONY: setup kernels run run-dual-arm test lint lock bench summary docs-figures clean

setup: $(STAMP) $(IFACE_STAMP) $(LAYOUT_STAMP) $(if $(ROS2_KIT),$(KIT_STAMP)) kernels

# Exact versions: constraints.txt pins every package the tests passed with (make lock renews it).
$(STAMP): requirements.txt requirements-ros.txt requirements-test.txt constraints.txt setup.py setup.cfg dynamics_node/_fastcall.c dynamics_node/_routes.c dynamics_node/_contact_route.c dynamics_node/_step_route.c dynamics_node/_fastcall.h
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt setuptools wheel
	$(PIP) install -q -c constraints.txt -r requirements.txt -r requirements-ros.txt -r requirements-test.txt
	$(PIP) install -q --no-deps --no-build-isolation -e .
	$(PY) setup.py -q build_ext --inplace
	@touch $@

# The compiled kernels, for the sources as they are now: numba's cache plus the ahead-of-time library
# of the C callbacks (dynamics_node/_jit.py), both in ~/.cache/dynamics_node/<hash of the sources>.
# Nothing to do when they exist; after an edit of a kernel, about a minute.
kernels: $(STAMP)
	@$(PY) -m dynamics_node._jit build --if-missing

# dynamics_node laid out in .venv as colcon installs an ament_python package (ament index marker,
# share/dynamics_node/{package.xml,launch,config,urdf}, lib/dynamics_node/<executables>), so that
# `.venv/bin/ros2 launch dynamics_node dynamics.launch.py` finds it with no variable set
$(LAYOUT_STAMP): $(STAMP) tools/install_ament_layout.sh package.xml resource/dynamics_node $(wildcard launch/*.py config/*.yaml urdf/*.urdf)
	bash tools/install_ament_layout.sh $(VENV)
	@touch $@

# launch, launch_ros, ros2launch, ros2cli (.venv/bin/ros2) from the kit; registry packages it adds are
# pinned by constraints.txt
$(KIT_STAMP): $(IFACE_STAMP) $(ROS2_KIT) constraints.txt
	PIP_CONSTRAINT=$(abspath constraints.txt) bash $(ROS2_KIT) $(VENV)
	@touch $@

$(IFACE_STAMP): $(STAMP) $(wildcard dynamics_interfaces/srv/*.srv dynamics_interfaces/msg/*.msg) dynamics_interfaces/CMakeLists.txt tools/build_interfaces.sh
	bash tools/build_interfaces.sh $(VENV)
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

test: setup lint
	DYNAMICS_REQUIRE_ROS=1 DYNAMICS_REQUIRE_AOT=1 $(PY) -m pytest -q test

# ruff, configured in ruff.toml (one line length for the tree)
lint: $(STAMP)
	$(VENV)/bin/ruff check .

# Renew constraints.txt: the newest versions the registries offer for requirements*.txt, resolved in a
# scratch venv. Then `make clean test` and commit constraints.txt if everything passes.
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install -q --disable-pip-version-check setuptools wheel
	.venv-lock/bin/pip install -q --disable-pip-version-check -r requirements.txt -r requirements-ros.txt -r requirements-test.txt
	.venv-lock/bin/pip freeze --all --exclude-editable | grep -v '^pip==' > constraints.txt
	rm -rf .venv-lock

bench: setup
	$(PY) bench/bench.py

# The pictures of docs/ (tools/docs_figures.py says how each is made), into DOCS_IMG (default docs/img)
DOCS_IMG ?= docs/img
docs-figures: setup
	$(PY) tools/docs_figures.py --out $(DOCS_IMG)

clean:
	rm -rf build $(VENV)
