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

.PHONY: help setup lint format typecheck test unit e2e bench bench-operator demo crds chart-test clean images images-deps

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[1m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	@command -v javac >/dev/null || { echo "setup: a JDK 17+ (java, and javac for the Kafka sink) is required"; exit 1; }
	@command -v mvn >/dev/null || { echo "setup: Maven (mvn) is required to fetch Kafka and the Spark connector"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setup: installing streamapp and its Python dependencies into $(VENV) (log: $(VENV)/install.log)"
	@# PYTHONSAFEPATH: `python -m` would otherwise put the checkout first on sys.path, where the
	@# operator/ folder shadows the standard library's `operator` in a venv that has no .pth yet.
	@{ PYTHONSAFEPATH=1 $(PY) -m pip install --upgrade pip setuptools wheel && \
		PYTHONSAFEPATH=1 $(PY) -m pip install -e '.[dev]'; } \
		> $(VENV)/install.log 2>&1 || { tail -40 $(VENV)/install.log; echo "setup: pip failed, see $(VENV)/install.log"; exit 1; }
	@touch $(STAMP)

setup: $(STAMP) $(if $(wildcard e2e/e2e.mk),e2e-deps) ## install everything from nothing (venv, Kafka, Spark connector, control plane); cached
	@$(VENV)/bin/streamapp setup

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

unit: setup ## the tests/ suite only (real Kafka + local Spark included)
	$(PY) -m pytest tests

test: setup ## every test: unit, real-Kafka integration and the e2e suite
	$(PY) -m pytest

e2e: setup ## the e2e suite against a real control plane on loopback
	$(PY) -m pytest e2e

bench: bench-run bench-operator ## benchmarks side by side (results in tests/bench/results); run on a quiet machine

bench-operator: setup ## time from `kubectl apply` to the driver Pod, median of 20 (tests/bench/results/OPERATOR.md)
	$(PY) -m tests.bench.operator_latency --apps 20

demo: setup ## word count, live, on a real broker and a real Spark query
	@$(VENV)/bin/streamapp demo

crds: $(STAMP) ## regenerate crds/ from the pydantic models (tests fail when it is stale)
	$(PY) -m streamapp.operator._crdgen

chart-test: $(STAMP) e2e-deps ## lint, render and test the Helm chart (with the helm `make setup` builds)
	$(STREAMAPP_CACHE)/bin/helm lint --strict charts/streamapp-operator
	$(PY) -m pytest -q tests/operator/test_chart_and_images.py tests/operator/test_crd.py

images-deps: ## Debian's buildah and mmdebstrap (apt-get as root, only when missing)
	@e2e/apt-deps.sh "make images" buildah=buildah mmdebstrap=mmdebstrap

images: $(STAMP) images-deps ## build the operator and runtime images with buildah on a Debian base (cached by inputs)
	@images/build.sh operator
	@images/build.sh runtime

clean: ## remove the venv and build leftovers (the download cache stays)
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
