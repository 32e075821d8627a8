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

.PHONY: run test test-unit test-integration lint setup clean bench
# Browser tests use Debian's Chromium (and an emoji font for the status lines); make test installs them when missing.
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

setup: $(VENV)/.installed

$(CHROMIUM):
	$(SUDO) apt-get install -y chromium fonts-noto-color-emoji || \
		($(SUDO) apt-get update && $(SUDO) apt-get install -y chromium fonts-noto-color-emoji)

run: setup
	$(PY) manage.py setup_demo
	$(VENV)/bin/daphne -b $(HOST) -p $(PORT) toolhub.asgi:application

# Unit tests on the embedded default (SQLite), then the whole suite on
# PostgreSQL + Redis, started here if installed but stopped.
test: setup $(CHROMIUM)
	env -u DATABASE_URL -u REDIS_URL -u CELERY_BROKER_URL $(PY) -m pytest -m "not integration" -q -p no:cacheprovider
	$(PY) tests/ensure_services.py $(TEST_DATABASE_URL) $(TEST_REDIS_URL)
	DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) TOOLHUB_CELERY_QUEUE=test-$$$$ \
		$(PY) -m pytest -p no:cacheprovider

# Tool-routing benchmark on the public bench data (figures only, no pass/fail):
# recall against the baselines, then search latency at 2,923 and 10,000 tools.
bench: setup
	$(PY) manage.py route_eval --catalog $(BENCH_DIR)/catalog.json --queries $(BENCH_DIR)/dev.jsonl --compare
	$(PY) manage.py route_eval --catalog $(BENCH_DIR)/catalog.json --queries $(BENCH_DIR)/dev.jsonl --split-history
	$(PY) manage.py route_bench --tools 2923 --bench-dir $(BENCH_DIR)
	$(PY) manage.py route_bench --tools 2923 --bench-dir $(BENCH_DIR) --history $(BENCH_DIR)/dev.jsonl
	$(PY) manage.py route_bench --tools 10000 --bench-dir $(BENCH_DIR)
	$(PY) tests/bench/api_bench.py
	$(PY) tests/bench/console_bench.py
	$(PY) tests/bench/mcp_bench.py
	$(PY) tests/bench/load_bench.py --redis-url $(TEST_REDIS_URL)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) var
