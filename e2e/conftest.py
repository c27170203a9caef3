"""The e2e suite's real-component fixture: one Kubernetes control plane per test session.

Why here: real-component fixtures live in one place and are shared, so the chart, operator and
driver-pod tests all meet the same cluster instead of each starting their own. The binaries come
from `make e2e-deps`; when they are missing the suite fails (never skips), so a green run always
means the tests really ran against a real API server.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# e2e/ is not a package; make `import cluster` work under any pytest import mode.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

import cluster
import node_agent_proc
import operator_proc


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.Cluster]:
    """A running control plane: `.kubeconfig` (path), `.kubectl(*args)`, `.helm(*args)`, `.env`."""
    missing = cluster.missing_binaries()
    if missing:
        pytest.fail(
            f"control-plane binaries missing from {cluster.bin_dir()}: {', '.join(missing)};"
            " run `make e2e-deps` (builds them from the pinned Go modules in e2e/controlplane, cached)",
            pytrace=False,
        )
    kubectl = os.environ.get("KUBECTL", "kubectl")
    if shutil.which(kubectl) is None:
        pytest.fail(
            f"kubectl ({kubectl!r}) is not on PATH; the e2e suite drives the cluster with it", pytrace=False
        )
    kube = cluster.Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        seconds = kube.start()
    except cluster.ClusterError as err:
        pytest.fail(f"control plane did not start: {err}", pytrace=False)
    sys.stderr.write(f"\ncontrol plane up in {seconds:.1f}s at {kube.server} (logs: {kube.logs})\n")
    try:
        yield kube
    finally:
        kube.stop()


APPS_NAMESPACE = operator_proc.APPS_NAMESPACE


@pytest.fixture(scope="session")
def streamapp_chart(kube_cluster: cluster.Cluster) -> str:
    """The operator chart installed with helm (release ``streamapp``), the CRD with it from the
    chart's crds/ folder, established; returns the chart's ServiceAccount."""
    account = operator_proc.install_chart(kube_cluster, APPS_NAMESPACE)
    operator_proc.wait_for_crd(kube_cluster)
    return account


@pytest.fixture(scope="session")
def streamapp_crd(kube_cluster: cluster.Cluster, streamapp_chart: str) -> cluster.Cluster:
    """The cluster with the StreamApp CRD established (installed by the chart)."""
    return kube_cluster


@pytest.fixture(scope="session")
def streamapp_operator(
    streamapp_crd: cluster.Cluster, streamapp_chart: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[operator_proc.Operator]:
    """The chart installed with helm, and the operator running as its ServiceAccount."""
    kube = streamapp_crd
    account = streamapp_chart
    workdir = tmp_path_factory.mktemp("operator")
    kubeconfig = operator_proc.token_kubeconfig(
        kube, account, operator_proc.RELEASE_NAMESPACE, workdir / "kubeconfig"
    )
    operator = operator_proc.Operator(kube, kubeconfig, APPS_NAMESPACE, workdir)
    try:
        seconds = operator.start()
    except cluster.ClusterError as err:
        pytest.fail(f"the operator did not start: {err}", pytrace=False)
    sys.stderr.write(f"\noperator up in {seconds:.1f}s as {account} (log: {operator.log})\n")
    try:
        yield operator
    finally:
        operator.stop()


AGENT_NODE = "agent-0"


@pytest.fixture(scope="module")
def agent_node(
    streamapp_operator: operator_proc.Operator, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A node agent running Pods for real on Node ``agent-0``, while the KWOK nodes are cordoned.

    Cordoning (not a taint) keeps the apps' specs untouched: while this module runs, the scheduler
    can only bind new Pods, drivers and executors alike, to the agent's Node. Pods already on KWOK
    nodes stay there. Afterwards the agent stops (its processes with it), its Node is deleted and
    the KWOK nodes take Pods again.
    """
    workdir = tmp_path_factory.mktemp("node-agent")
    with node_agent_proc.AgentProcess(streamapp_operator.kube, AGENT_NODE, workdir).only_node() as agent:
        yield agent
