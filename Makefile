# The two commands of the README: `make run` (the service, on embedded PostgreSQL unless
# DATABASE_URL is set) and `make test` (ruff, import-linter, mypy, then the whole test suite). Both create the virtual
# environment and install the pinned dependencies on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test test-slow lint bench clean

$(STAMP): pyproject.toml agent/pyproject.toml rules/pyproject.toml constraints/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		-c constraints/constraints.txt -e ./rules -e '.[dev]' -e ./agent
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/fleet demo --host $(HOST) --port $(PORT)

test: lint
	$(BIN)/pytest $(PYTEST_ARGS)

# The slow part of the reliability suite (docs/reliability.md): schemathesis over every operation
# with many more generated cases (at least 1,000 per seed operation). `.ci/run` runs it after `make test`.
test-slow: $(STAMP)
	FLEET_FUZZ=slow $(BIN)/pytest tests/api/test_schema_fuzz.py $(PYTEST_ARGS)

# Style, the layering contracts (import-linter, in pyproject.toml) and types (mypy).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# make bench [SCALE=small|2|…]: SCALE=small is a quick run (under two minutes).
bench: $(STAMP)
	$(BIN)/python bench/run.py $(if $(SCALE),--scale $(SCALE))

clean:
	rm -rf $(VENV) .fleet
