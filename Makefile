# hpcvar: two commands do all the set-up on a fresh machine.
#   make demo   create .venv, install everything (Python deps, an MPI, the native build), run the main job
#   make test   the same set-up, then the linters (make lint) and the whole test suite (what CI runs)
#   make lint   ruff, mypy and clang-format (check only) with the versions the test extra installs
# Options: MPI=mpich|openmpi|system (system: the MPI whose mpicc is on PATH or in $MPICC),
#          PYTHON=python3.11, VENV=.venv, PYTEST_ARGS="-k latency",
#          WERROR=OFF (C warnings stay warnings: for a compiler that warns where ours does not).

PYTHON ?= python3
VENV ?= .venv
MPI ?= mpich
BIN := $(VENV)/bin
STAMP := $(VENV)/.hpcvar-installed-$(MPI)
WERROR ?= ON
# Thicket and Extra-P, which read hpcvar's exports in the tests, without their declared pins (pyproject.toml, test)
EXPORT_READERS := "llnl-hatchet>=2024.1" "llnl-thicket>=2024.1" "extrap>=4.2,<5"
NATIVE_SOURCES = $(shell find native -type f \( -name '*.c' -o -name '*.h' \) | sort)
SOURCES := $(shell find src native CMakeLists.txt pyproject.toml -type f \( -name '*.py' -o -name '*.c' -o -name '*.h' -o -name 'CMakeLists.txt' -o -name '*.toml' -o -name '*.html' -o -name '*.j2' \) 2>/dev/null)

ifeq ($(MPI),system)
  MPI_PIP :=
  EXTRAS := test
  MPICC_FOR_BUILD := $(or $(MPICC),$(shell command -v mpicc 2>/dev/null))
else
  MPI_PIP := $(MPI)
  EXTRAS := test,$(MPI)
  MPICC_FOR_BUILD := $(abspath $(BIN))/mpicc
endif

.PHONY: demo test test-slow lint install clean native-dev

demo: $(STAMP)
	$(BIN)/hpcvar demo

# The unit and fuzz tests (no MPI, nothing timed) run on every core (pytest-xdist); the integration and testbed
# tests, which time real runs and shaped links, one after the other on a quiet machine. PYTEST_ARGS: one pytest.
test: lint
ifeq ($(strip $(PYTEST_ARGS)),)
	$(BIN)/python -m pytest -n auto tests/unit tests/fuzz
	$(BIN)/python -m pytest tests/integration tests/testbed
else
	$(BIN)/python -m pytest $(PYTEST_ARGS)
endif

# The linters CI runs (docs/developing.md, Linters); the same as .pre-commit-config.yaml.
lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/clang-format --dry-run -Werror $(NATIVE_SOURCES)
	$(BIN)/python tools/function_length.py --max 80 native

# the long tests too (minutes each on 2 cores; not in CI)
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m "slow or not slow" $(PYTEST_ARGS)

install: $(STAMP)

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "error: hpcvar needs Python >= 3.11 ($(PYTHON) is older). Run: make PYTHON=python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python $(SOURCES)
	$(BIN)/python -m pip install -q --disable-pip-version-check "scikit-build-core>=0.10" $(MPI_PIP)
	@command -v cmake >/dev/null 2>&1 || $(BIN)/python -m pip install -q --disable-pip-version-check cmake
	@test -n "$(MPICC_FOR_BUILD)" || echo "warning: no mpicc found: MPI benchmarks will be unavailable (MPI=mpich installs one)"
	MPICC="$(MPICC_FOR_BUILD)" HPCVAR_WERROR=$(WERROR) $(BIN)/python -m pip install -q --disable-pip-version-check \
	  --no-build-isolation -e ".[$(EXTRAS)]"
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps $(EXPORT_READERS)
# hpcvar's bytecode, as pip compiles a regular install's: an editable install compiles its modules on first
# import and, where PYTHONDONTWRITEBYTECODE is set, on every command (0.17 s of each start-up, measured)
	$(BIN)/python -m compileall -q src/hpcvar
	@rm -f $(VENV)/.hpcvar-installed-*
	@touch $@

# A developer's CMake build of the native programs (use with HPCVAR_NATIVE_DIR=build/dev/bin).
native-dev: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" cmake -S . -B build/dev -DHPCVAR_WERROR=$(WERROR) >/dev/null
	cmake --build build/dev -j2

clean:
	rm -rf build $(VENV)
