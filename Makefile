# Odradek developer entry points. Every target works on a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install up test test-slow test-all bench lint proto clean

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

## Start a local cluster (controller, storage nodes, gateway) on 127.0.0.1:9092.
up: install
	$(VENV)/bin/odradek up $(ARGS)

## The default suite: unit, integration and client-compat tests (slow ones excluded).
test: install
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

## Long suites: fault injection schedules, large runs.
test-slow: install
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

test-all: test test-slow

bench: install
	$(PY) -m bench $(ARGS)

lint: install
	$(VENV)/bin/ruff check shared services tests bench
	$(VENV)/bin/ruff format --check shared services tests bench
	$(VENV)/bin/mypy shared/odradek services

## Regenerate the gRPC stubs from proto/ (a test fails when they are stale).
proto: install
	$(PY) -m odradek.rpc.generate

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
