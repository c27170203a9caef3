# e2e/e2e.mk -- the real Kubernetes control plane for the e2e suite, included by the top Makefile.
# The binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, helm) are built
# from the pinned Go modules in e2e/controlplane into $(STREAMAPP_CACHE)/bin; e2e/cluster.py runs
# them on loopback.

STREAMAPP_CACHE ?= $(HOME)/.cache/streamapp
PY ?= .venv/bin/python
E2E_CLUSTER_DIR ?= build/e2e-cluster

.PHONY: e2e-deps e2e-cluster-test e2e-cluster-up e2e-cluster-down

e2e-deps: ## build the control plane + kwok + helm from pinned Go modules (cached in $STREAMAPP_CACHE/bin); Debian's prometheus
	@STREAMAPP_CACHE="$(STREAMAPP_CACHE)" e2e/controlplane/build.sh
	@e2e/apt-deps.sh "the e2e suite (Prometheus, image builds)" prometheus=prometheus buildah=buildah mmdebstrap=mmdebstrap

e2e-cluster-test: e2e-deps ## smoke-test the control plane: readyz, scheduling onto KWOK nodes, tokens, api-resources
	$(PY) -m pytest e2e/test_controlplane.py -q

e2e-cluster-up: e2e-deps ## start a control plane in build/e2e-cluster (E2E_CLUSTER_DIR) and leave it running
	$(PY) e2e/cluster.py up --dir $(E2E_CLUSTER_DIR)

e2e-cluster-down: ## stop the control plane started by e2e-cluster-up
	$(PY) e2e/cluster.py down --dir $(E2E_CLUSTER_DIR)
