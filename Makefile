# The two commands of the README: `make run` (the service, on embedded PostgreSQL unless
# DATABASE_URL is set) and `make test` (ruff, import-linter, mypy, then the whole test suite). Both create the virtual
# environment and install the pinned dependencies on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run reset test test-fast test-slow lint bench clean

# pytest-xdist workers (docs/reliability.md, "The suite"): most of the suite's time is spent waiting
# on processes it started (servers, agents, Slurm, a browser), so more workers than cores pay.
# `make test PYTEST_WORKERS=0` runs in one process. --dist loadgroup keeps the tests that share a
# Slurm cluster, a browser, a private PostgreSQL or the schemathesis count on one worker.
# make test-fast is CPU-bound (no process to wait on): fewer workers there, each of which also
# collects the suite and migrates its own test database.
PYTEST_WORKERS ?= 4
FAST_WORKERS ?= 3
XDIST = --dist loadgroup
# The tests that start no process and no browser (markers in pyproject.toml, tests/support/suite.py).
FAST = not browser and not e2e and not slurm and not faults and not slow and not process

$(STAMP): pyproject.toml agent/pyproject.toml rules/pyproject.toml constraints/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		-c constraints/constraints.txt -e ./rules -e '.[dev]' -e ./agent
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/fleet demo --host $(HOST) --port $(PORT)

# Start the demo over: drop its database and delete the agents' state and the admin password file
# (`fleet demo --reset`); .venv stays. `make clean` deletes .venv and .fleet too.
reset: $(STAMP)
	$(BIN)/fleet demo --reset

test: lint
	$(BIN)/pytest -n $(PYTEST_WORKERS) $(XDIST) $(PYTEST_ARGS)

# Everything that starts no process and no browser, without the lint: the quick loop while working.
test-fast: $(STAMP)
	$(BIN)/pytest -n $(FAST_WORKERS) $(XDIST) -m "$(FAST)" $(PYTEST_ARGS)

# The slow part of the reliability suite (docs/reliability.md): schemathesis over every operation
# with many more generated cases (at least 1,000 per seed operation). `.ci/run` runs it after `make test`.
# It runs under Hypothesis's `ci` profile everywhere (tests/support/hypothesis_profiles.py): the quick
# `dev` profile's 20 examples would cap schemathesis's 1,000 per seed operation off CI.
test-slow: $(STAMP)
	FLEET_FUZZ=slow FLEET_HYPOTHESIS_PROFILE=ci $(BIN)/pytest tests/api/test_schema_fuzz.py $(PYTEST_ARGS)

# Style, the layering contracts (import-linter, in pyproject.toml) and types (mypy).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# make bench [SCALE=small|2|…]: SCALE=small is a quick run (under three minutes; the history part adds about 20 s,
# the bring-up about 4.5 min: its discrete-event hall and the same hall with real fleet serve + fleet-agent processes).
bench: $(STAMP)
	$(BIN)/python bench/run.py $(if $(SCALE),--scale $(SCALE))

clean:
	rm -rf $(VENV) .fleet
