# kafkad: `make run` starts a standalone broker, `make test` installs what tests need and runs them.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
# Debian packages the test tiers need: real kcat (librdkafka 2.0.2), ZooKeeper for cluster tests.
DEB_TEST_PACKAGES := kcat zookeeper
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install run test test-unit test-integration deb-deps lint typecheck bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

run: install
	$(VENV)/bin/kafkad --config config/server.properties

deb-deps:
	@missing=""; for p in $(DEB_TEST_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@command -v kcat >/dev/null || { echo "kcat is required for the integration tests and could not be installed" >&2; exit 1; }

test: install deb-deps
	$(PY) -m pytest -q tests/unit tests/property tests/integration

test-unit: install
	$(PY) -m pytest -q tests/unit tests/property

test-integration: install deb-deps
	$(PY) -m pytest -q tests/integration

lint: install
	$(VENV)/bin/ruff check kafkad tests
	$(VENV)/bin/ruff format --check kafkad tests

typecheck: install
	$(VENV)/bin/mypy

bench: install
	$(PY) -m tests.bench.run $(if $(BENCH),--mode $(BENCH),)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .hypothesis
