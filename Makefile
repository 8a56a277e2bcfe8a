# ctxweb: `make run` starts the dashboard with demo data, `make test` runs the test suite.
# Needs only python3 (3.11+) and make; everything else is installed into .venv.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml clients/python/pyproject.toml | cksum | cut -d' ' -f1)
# Development defaults; a deployment sets DEBUG=0 and a real SECRET_KEY (see docs/deployment.md).
export DEBUG ?= 1
# Where `make run` serves: make run HOST=0.0.0.0 PORT=8100
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run check-port worker test install migrate demo lint bench bench-quick reliability reliability-quick memory memory-quick bench-phoenix clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml clients/python/pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e '.[dev]' -e clients/python
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

migrate: install
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py demo_data --url http://$(HOST):$(PORT)/

# Is something already listening on HOST:PORT? Checked first, with the system python3, so a busy port
# is said before the install, the migrations and the demo data, not after them.
check-port:
	@$(PYTHON) -c 'import socket, sys; host = "127.0.0.1" if sys.argv[1] in ("", "0.0.0.0") else sys.argv[1]; \
	s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET); s.settimeout(1); \
	sys.exit(3 if s.connect_ex((host, int(sys.argv[2]))) == 0 else 0)' '$(HOST)' '$(PORT)' 2>/dev/null; \
	status=$$?; \
	if [ $$status -eq 3 ]; then echo "port $(PORT) is in use; run make run PORT=$$(( $(PORT) + 1 ))" >&2; exit 1; \
	elif [ $$status -ne 0 ]; then echo "HOST=$(HOST) PORT=$(PORT) is not an address to serve on (PORT is a number, e.g. 8000)" >&2; exit 1; fi

# The background worker (compaction runs, imports) runs beside the server and stops with it; a worker
# that exits (killed, out of memory) is started again after a second.
run: check-port demo
	( trap 'kill $$child 2>/dev/null; wait $$child 2>/dev/null; exit 0' INT TERM; \
	  while :; do $(BIN)/python manage.py compaction_worker --no-reload & child=$$!; wait $$child; \
	  echo "the background worker stopped (exit $$?); starting it again" >&2; sleep 1; done ) & worker=$$!; \
	trap 'kill $$worker 2>/dev/null; wait $$worker 2>/dev/null' EXIT INT TERM; \
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

# Only the worker, for a server started some other way (docs/deployment.md, "Background worker").
worker: migrate
	$(BIN)/python manage.py compaction_worker

# Python's bytecode cache, and pytest's cache of the test modules with their asserts rewritten, are written
# even where the environment turns them off (PYTHONDONTWRITEBYTECODE): every test process collects the
# whole suite, and rewriting its asserts anew takes each of them about 12 s.
test: install
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

# Benchmarks (SPEC §8) on their own database: SQLite in a temporary directory, or ctxweb_bench on the
# PostgreSQL server of DATABASE_URL. Prints a table and a line of JSON; fails only on wrong results.
# `make bench` also writes the table, dated, into docs/performance.md ("Latest run of `make bench`").
bench: install
	$(BIN)/python -m bench.run --write-doc

bench-quick: install
	$(BIN)/python -m bench.run --quick

# Reliability runs (issue 9) on PostgreSQL, in a database of their own (ctxweb_reliability on the server
# of DATABASE_URL, by default postgres://postgres@127.0.0.1:5432/postgres): SIGKILLs of gunicorn during
# a stream of appends with retries, 8 writer processes with compactions, and 8 tenants while one member
# sends every hostile input of security round three. Fails on any lost, duplicated or misordered
# message, an unclosed compaction, a tenant's p99 over a second, or a 5xx.
reliability: install
	$(BIN)/python -m bench.reliability

reliability-quick: install
	$(BIN)/python -m bench.reliability --quick

# Memory per request on a session of big messages (issue 16); the quick run fails past a bound (CI).
memory: install
	$(BIN)/python bench/memory.py

memory-quick: install
	$(BIN)/python bench/memory.py --quick --max-growth-mb 40

clean:
	rm -rf $(VENV) db.sqlite3 staticfiles

# ctxweb against Arize Phoenix on the same conversations (issue 20; not run by CI or `make test`). Phoenix
# gets a virtualenv of its own, .venv-phoenix: make bench-phoenix ARGS="--turns 50 200 --database postgresql"
PHOENIX_VENV := .venv-phoenix
PHOENIX_PINS := arize-phoenix==20.26.1 opentelemetry-exporter-otlp-proto-http==1.45.2 openinference-semantic-conventions==0.1.42
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed-$(shell echo '$(PHOENIX_PINS)' | cksum | cut -d' ' -f1)

$(PHOENIX_STAMP):
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install --progress-bar on $(PHOENIX_PINS)
	rm -f $(PHOENIX_VENV)/.installed-*
	touch $(PHOENIX_STAMP)

bench-phoenix: install $(PHOENIX_STAMP)
	$(BIN)/python -m bench.versus_phoenix $(ARGS)
