# StreamApp — the front door. `make help` lists the targets; CI calls the same ones.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export STREAMAPP_CACHE ?= $(HOME)/.cache/streamapp
# Python wheels pip builds or downloads are cached with everything else.
export PIP_CACHE_DIR := $(STREAMAPP_CACHE)/pip
STAMP := $(VENV)/.installed

-include e2e/e2e.mk
-include tests/bench/bench.mk

.PHONY: fuzz help prereqs-runtime prereqs-e2e jvm setup-runtime setup lint format typecheck test test-long unit e2e bench bench-operator bench-reconciles bench-rollouts bench-windowed demo crds chart-test clean chaos images images-deps images-test

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[1m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The tools each part of the set-up needs, checked before anything is downloaded; each message
# says what is missing and what was found. The runtime (demo, unit tests) needs Python, a JDK and
# Maven; the e2e control plane adds Go (the version its go.mod files require: the build uses the
# local toolchain, GOTOOLCHAIN=local) and kubectl.
GO_NEEDED = $(shell awk '$$1 == "go" {print $$2}' e2e/controlplane/go.mod e2e/controlplane/*/go.mod 2>/dev/null | sort -V | tail -1)

prereqs-runtime: ## check the runtime's prerequisites: Python 3.11+, a JDK 17+ (java, javac), Maven 3.6.3+
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
		echo "setup: Python 3.11+ is required; $(PYTHON) is $$($(PYTHON) --version 2>&1 | head -1) (make PYTHON=python3.11 …)"; exit 1; }
	@command -v java >/dev/null && command -v javac >/dev/null || { \
		echo "setup: a JDK 17+ is required (java, and javac: Maven builds StreamApp's JVM library): install e.g. openjdk-17-jdk-headless"; exit 1; }
	@v=$$(java -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ {print $$2}'); \
		[ "$${v%%.*}" -ge 17 ] 2>/dev/null || { echo "setup: a JDK 17+ is required; java is version $$v"; exit 1; }
	@command -v mvn >/dev/null || { \
		echo "setup: Maven (mvn) is required to build StreamApp's JVM library and fetch Kafka and Spark's Kafka connector from Maven Central"; exit 1; }

prereqs-e2e: ## check the e2e suite's prerequisites: Go (as e2e/controlplane/go.mod requires) and kubectl
	@go=$${GO:-$$(command -v go || echo /usr/local/go/bin/go)}; \
		[ -x "$$go" ] || { echo "setup: Go $(GO_NEEDED)+ is required to build the e2e control plane (go not found; or set GO=/path/to/go)"; exit 1; }; \
		have=$$("$$go" env GOVERSION | sed 's/^go//'); \
		[ "$$(printf '%s\n%s\n' "$(GO_NEEDED)" "$$have" | sort -V | head -1)" = "$(GO_NEEDED)" ] || { \
		echo "setup: Go $(GO_NEEDED)+ is required (the go.mod files in e2e/controlplane say go $(GO_NEEDED), and the build uses the local toolchain); $$go is $$have"; exit 1; }
	@command -v kubectl >/dev/null || { echo "setup: kubectl is required by the e2e suite (any recent client)"; exit 1; }

$(STAMP): pyproject.toml | prereqs-runtime
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setup: installing streamapp and its Python dependencies into $(VENV) (log: $(VENV)/install.log)"
	@# PYTHONSAFEPATH: `python -m` would otherwise put the checkout first on sys.path, where the
	@# operator/ folder shadows the standard library's `operator` in a venv that has no .pth yet.
	@{ PYTHONSAFEPATH=1 $(PY) -m pip install --upgrade pip setuptools wheel && \
		PYTHONSAFEPATH=1 $(PY) -m pip install -e '.[dev]'; } \
		> $(VENV)/install.log 2>&1 || { tail -40 $(VENV)/install.log; echo "setup: pip failed, see $(VENV)/install.log"; exit 1; }
	@touch $(STAMP)

# StreamApp's JVM library (runtime/jvm/README.md): Maven compiles it, runs its JUnit tests (a failing
# one fails the set-up) and writes the jar the runtime loads and the wheel ships, with the project's
# local repository (the first build downloads Spark's and Kafka's artifacts, later ones need no
# network). Rebuilt only when a file of the module changed.
JVM_JAR := runtime/jvm/target/streamapp-runtime-jvm-$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1).jar
JVM_LOG := runtime/jvm/target/build.log

jvm: $(JVM_JAR) ## StreamApp's JVM library: mvn package in runtime/jvm, its JUnit tests included; cached

$(JVM_JAR): runtime/jvm/pom.xml $(shell find runtime/jvm/src -type f 2>/dev/null) | prereqs-runtime
	@echo "setup: building StreamApp's JVM library with Maven, JUnit tests included (log: $(JVM_LOG))"
	@mkdir -p $(dir $(JVM_LOG))
	@mvn -q -B -Dmaven.repo.local=$(STREAMAPP_CACHE)/m2 -f runtime/jvm/pom.xml package > $(JVM_LOG) 2>&1 || { \
		tail -60 $(JVM_LOG); echo "setup: building the JVM library failed, see $(JVM_LOG)"; exit 1; }
	@touch $@

setup-runtime: prereqs-runtime $(STAMP) jvm ## the runtime only (venv, Kafka, Spark's connector): what demo and unit need; cached
	@$(VENV)/bin/streamapp setup

setup: prereqs-runtime prereqs-e2e $(STAMP) jvm $(if $(wildcard e2e/e2e.mk),e2e-deps) ## everything: the runtime, the driver's class-data archive and the e2e control plane (built from Go modules); cached
	@# setup-runtime's `streamapp setup`, with the archive (one run: its lines are printed once)
	@$(VENV)/bin/streamapp setup --class-data-archive

# mypy needs the import layout (streamapp/runtime, streamapp/operator); the folders are mapped.
build/typecheck/streamapp:
	@mkdir -p $@ && ln -sfn ../../../runtime $@/runtime && ln -sfn ../../../operator $@/operator

lint: $(STAMP) build/typecheck/streamapp ## read-only checks: ruff, mypy --strict, import layers
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	PYTHONPATH=build/typecheck $(VENV)/bin/lint-imports --no-cache

format: $(STAMP) ## rewrite sources with ruff's fixes and formatter
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck: $(STAMP) build/typecheck/streamapp ## mypy --strict
	$(VENV)/bin/mypy

unit: setup-runtime ## the tests/ suite only (real Kafka + local Spark included; chart rendering needs helm from `make setup`)
	$(PY) -m pytest -m "not long" tests

test: setup ## the suite CI runs: unit, real-Kafka integration, conformance and e2e (the long runs: make test-long)
	$(PY) -m pytest -p tests.cpu_per_test --durations=25 --junitxml=build/test-report.xml -m "not long"

# The image tests build both images first (10-20 min from nothing on 2 cores).
test-long: setup images ## the long runs (pytest -m long): 20-kill chaos, autoscale soak, benchmark harness, images
	$(PY) -m pytest --durations=25 -m long

e2e: setup ## the e2e suite against a real control plane on loopback (its long runs: make test-long)
	$(PY) -m pytest --durations=15 -m "not long" e2e

fuzz: setup-runtime ## N random topologies and inputs (default 2000, seeds from FROM) against Kafka Streams; MINUTES= runs a slice (the same command goes on), FRESH=1 starts over; results in tests/conformance/results/FUZZ.md
	STREAMAPP_FUZZ=$(or $(N),2000) STREAMAPP_FUZZ_FROM=$(or $(FROM),1000) STREAMAPP_FUZZ_MINUTES=$(MINUTES) STREAMAPP_FUZZ_FRESH=$(FRESH) \
	  $(PY) -m pytest -s -q --timeout=0 tests/conformance/test_randomized.py

bench: bench-run bench-startup bench-eos bench-join bench-windowed bench-operator bench-reconciles bench-rollouts ## benchmarks side by side (results in tests/bench/results); run on a quiet machine

bench-operator: setup ## time from `kubectl apply` to the driver Pod, median of 20 (tests/bench/results/OPERATOR.md)
	$(PY) -m tests.bench.operator_latency --apps 20

bench-reconciles: setup ## reconciliations per minute of an idle app on the e2e cluster (tests/bench/results/RECONCILES.md)
	$(PY) -m pytest e2e/bench_reconciles.py -s -q

bench-rollouts: setup ## five redeploys under continuous input, rolling vs recreate, on the e2e cluster (tests/bench/results/ROLLOUTS.md)
	$(PY) -m pytest e2e/bench_rollouts.py -s -q

demo: setup-runtime ## word count, live, on a real broker and a real Spark query
	@$(VENV)/bin/streamapp demo

crds: $(STAMP) ## regenerate crds/ from the pydantic models (tests fail when it is stale)
	$(PY) -m streamapp.operator._crdgen

chart-test: $(STAMP) e2e-deps ## lint, render and test the Helm chart (with the helm `make setup` builds)
	$(STREAMAPP_CACHE)/bin/helm lint --strict charts/streamapp-operator
	$(PY) -m pytest -q tests/operator/test_chart_and_images.py tests/operator/test_crd.py

images-deps: ## Debian's buildah and mmdebstrap (apt-get as root, only when missing)
	@e2e/apt-deps.sh "make images" buildah=buildah mmdebstrap=mmdebstrap

images: $(STAMP) jvm images-deps ## build the operator and runtime images with buildah on a Debian base (cached by inputs)
	@images/build.sh operator
	@images/build.sh runtime

images-test: setup images ## the built images: user, entrypoint, labels, the driver contract inside the runtime image, and an app run from it by the node agent
	$(PY) -m pytest e2e/test_images.py

clean: ## remove the venv and build leftovers (the download cache stays)
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache runtime/jvm/target

chaos: setup ## kill -9 the driver 50 times (and restart the broker twice) under load; results in tests/chaos/results
	$(PY) -m tests.chaos.run --kills 50 --broker-restarts 2 --out tests/chaos/results
