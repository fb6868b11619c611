# DBus. `make demo` sets everything up and runs the demo; `make test` sets up and runs every test.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Python caches each module's bytecode (__pycache__/, ignored by git) in what make runs, even where the
# environment says PYTHONDONTWRITEBYTECODE: else each of the ~1,000 Python processes of `make test` (the
# stages' drivers and sidecars, Spark's Python workers, `dbus` commands, pytest's workers collecting
# every test file) compiles the modules it imports again (measured: collecting the tests 14.3 s -> 4.9 s).
unexport PYTHONDONTWRITEBYTECODE
VENV_STAMP := $(VENV)/.installed

.PHONY: demo test test-unit test-integration test-long test-secure lint bench venv stack-up stack-down stack-status browser screenshots cluster-up cluster-down clean-stack

# SECURE=1 (`make demo SECURE=1`, `make stack-up SECURE=1`): the secure variant of the local stack, beside the
# plain one (stack/env.sh: .stack-secure, ports 2xxxx; docs/security.md, The secure stack), and
# conf/dbus-secure.yaml. The demo's replica reaches PostgreSQL over verified TLS with libpq's own settings.
SECURE_VARS := SECURE=1 STACK_HOME=$(CURDIR)/.stack-secure DBUS_CONFIG=$(CURDIR)/conf/dbus-secure.yaml \
	STACK_POSTGRESQL_URL=postgresql+psycopg://dbus@127.0.0.1:25432 PGSSLMODE=verify-full \
	PGSSLROOTCERT=$(CURDIR)/.stack/tls/ca.pem PGPASSFILE=$(CURDIR)/.stack-secure/secrets/pgpass
SECURE_ENV := env $(SECURE_VARS)
ifeq ($(SECURE),1)
$(foreach v,$(SECURE_VARS),$(eval export $(v)))
endif

demo: stack-up
	$(VENV)/bin/dbus demo

# Two workers (pytest-xdist): most integration tests wait on servers and JVM start-ups; the stack lock in
# tests/integration/conftest.py runs an `exclusive` test alone. A worker takes a whole file at a time
# (loadfile: a module's fixtures are set up once), the next one in collection order when it is done (no
# reordering by test count, which would leave the long one-test files for last). The files that
# test-secure runs on the secure stack run there only (marker secure_once: tests/integration/conftest.py).
XDIST := -n 2 --dist loadfile --no-loadscope-reorder
test: stack-up browser
	$(PY) -m pytest tests -m "not secure_once" $(XDIST) --durations=20
	$(MAKE) test-secure

# The integration tests marked secure_stack, on the secure stack (started beside the plain one).
test-secure: venv
	$(SECURE_ENV) bash stack/stack.sh up
	$(SECURE_ENV) $(PY) -m pytest tests/integration -m secure_stack $(XDIST) --durations=10

test-unit: venv
	$(PY) -m pytest tests/unit

# The tests marked long (tests/conftest.py: soaks, second trigger modes of failure tests), skipped by `make test`.
test-long: stack-up browser
	DBUS_LONG_TESTS=1 $(PY) -m pytest tests/integration -m long $(XDIST) --durations=10

test-integration: stack-up browser
	$(PY) -m pytest tests/integration $(XDIST)

# ruff (rules and format) over the tree, mypy over every package (config in pyproject.toml).
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: stack-up
	$(PY) -m bench

venv: $(VENV_STAMP)

# Reinstalled only when pyproject.toml changes. The checkout's venv has all of DBus: the server extra (the
# stages, the console; the base requirements are the consumer client's alone) and the test tools. uv (from
# PyPI, into the venv first) installs them: the same packages pip's resolver picks; `make venv` took 32 s,
# where pip's install alone took 67 (warm caches). `pip install -e '.[server,test]'` does the same, slower.
UV_VERSION := 0.13.9
$(VENV_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(VENV)/bin/uv pip install -q --python $(PY) -e '.[server,test]'
	touch $@

stack-up: venv
	bash stack/stack.sh up

stack-down:
	bash stack/stack.sh down

stack-status:
	bash stack/stack.sh status

# Debian's Chromium for the console's browser tests (Playwright drives it; stack/services/chromium.sh):
# installed once, a few tenths of a second when it is there.
browser: venv
	bash stack/stack.sh up chromium

# The console's pages as the browser tests see them, into docs/console/ (shown in the README).
screenshots: stack-up browser
	CONSOLE_SCREENSHOTS=docs $(PY) -m pytest tests/integration -k console $(XDIST)

# A local Spark standalone cluster (a master, two workers, one in its own mount namespace without the checkout)
# and the executors' packed Python environment: stack/cluster.sh.
cluster-up: stack-up
	bash stack/cluster.sh up

cluster-down:
	bash stack/cluster.sh down

# Removes the stack's data (databases, topics, schemas, metrics, rsyslog's read positions and queues); installed
# binaries and jars stay cached.
clean-stack: stack-down
	$(SECURE_ENV) bash stack/stack.sh down
	rm -rf .stack-secure
	rm -rf .stack/mariadb .stack/postgresql .stack/zookeeper .stack/kafka .stack/registry .stack/influxdb .stack/prometheus .stack/rsyslog .stack/checkpoints
