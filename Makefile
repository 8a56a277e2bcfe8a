# ctxweb: `make run` starts the dashboard with demo data, `make test` runs the test suite.
# Needs only python3 (3.11+) and make; everything else is installed into .venv.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
# Development defaults; a deployment sets DEBUG=0 and a real SECRET_KEY (see README).
export DEBUG ?= 1

.PHONY: run worker test install migrate demo lint bench bench-quick reliability reliability-quick memory memory-quick clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

migrate: install
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py demo_data

# The background worker (compaction runs, imports) runs beside the server and stops with it.
run: demo
	$(BIN)/python manage.py compaction_worker --no-reload & worker=$$!; \
	trap 'kill $$worker 2>/dev/null; wait $$worker 2>/dev/null' EXIT INT TERM; \
	$(BIN)/python manage.py runserver 127.0.0.1:8000

# Only the worker, for a server started some other way (README, "Background worker").
worker: migrate
	$(BIN)/python manage.py compaction_worker

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .

# Benchmarks (SPEC §8) on their own database: SQLite in a temporary directory, or ctxweb_bench on the
# PostgreSQL server of DATABASE_URL. Prints a table and a line of JSON; fails only on wrong results.
bench: install
	$(BIN)/python -m bench.run

bench-quick: install
	$(BIN)/python -m bench.run --quick

# Reliability runs (issue 9) on PostgreSQL, in a database of their own (ctxweb_reliability on the server
# of DATABASE_URL, by default postgres://postgres@127.0.0.1:5432/postgres): SIGKILLs of gunicorn during
# a stream of appends with retries, and 8 writer processes with compactions. Fails on any lost,
# duplicated or misordered message, or an unclosed compaction.
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
