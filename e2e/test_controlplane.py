"""Proof that the e2e control plane is real: each test exercises one component end to end.

The rest of the e2e suite trusts this cluster; if one of these fails, the failure names the
component (API server, scheduler, controller-manager, KWOK) before any chart or operator test
has to be debugged.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import cluster
import pytest

pytestmark = pytest.mark.timeout(180)

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: web
        image: registry.invalid/web:1
        resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}
"""


def _namespace(kube: cluster.Cluster, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.kubectl("create", "namespace", name)
    return name


def _eventually(what: str, check: Callable[[], object], timeout: float = 60) -> None:
    """Poll `check()` (truthy = done) until `timeout`; fail saying what never happened."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return
        except cluster.ClusterError as err:
            last = err
        time.sleep(0.5)
    pytest.fail(f"{what} within {timeout:.0f}s (last: {last})")


def test_apiserver_is_ready(kube_cluster: cluster.Cluster) -> None:
    assert kube_cluster.kubectl("get", "--raw", "/readyz").strip() == "ok"
    version = json.loads(kube_cluster.kubectl("get", "--raw", "/version"))
    assert version["gitVersion"].startswith("v1."), version


def test_api_resources_are_served(kube_cluster: cluster.Cluster) -> None:
    names = set(kube_cluster.kubectl("api-resources", "-o", "name").split())
    for expected in (
        "pods",
        "deployments.apps",
        "serviceaccounts",
        "customresourcedefinitions.apiextensions.k8s.io",
    ):
        assert expected in names, f"`kubectl api-resources` lacks {expected}"


def test_kwok_nodes_are_ready(kube_cluster: cluster.Cluster) -> None:
    nodes = json.loads(kube_cluster.kubectl("get", "nodes", "-o", "json"))["items"]
    ready = {
        n["metadata"]["name"]
        for n in nodes
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
    }
    assert ready == set(kube_cluster.nodes)


def test_deployment_pods_are_scheduled_and_running(kube_cluster: cluster.Cluster) -> None:
    ns = _namespace(kube_cluster, "deploy")
    kube_cluster.kubectl("apply", "-f", "-", input=DEPLOYMENT.format(ns=ns))
    # Needs the deployment + replicaset controllers, the scheduler and KWOK's pod lifecycle.
    kube_cluster.kubectl("rollout", "status", "-n", ns, "deployment/web", "--timeout=90s", timeout=100)
    pods = json.loads(kube_cluster.kubectl("get", "pods", "-n", ns, "-o", "json"))["items"]
    assert len(pods) == 2
    for pod in pods:
        name = pod["metadata"]["name"]
        assert pod["spec"].get("nodeName") in kube_cluster.nodes, f"pod {name} not on a KWOK node"
        assert pod["status"]["phase"] == "Running", f"pod {name} is {pod['status']['phase']}"
        assert pod["status"].get("podIP"), f"pod {name} has no IP"


def test_service_account_gets_root_ca_and_token(kube_cluster: cluster.Cluster, tmp_path: Path) -> None:
    ns = _namespace(kube_cluster, "sa")
    ca = (kube_cluster.pki / "ca.crt").read_text()

    def root_ca() -> bool:
        out = kube_cluster.kubectl("get", "configmap", "kube-root-ca.crt", "-n", ns, "-o", "json")
        return bool(json.loads(out)["data"]["ca.crt"] == ca)

    _eventually(f"configmap kube-root-ca.crt with the cluster CA did not appear in namespace {ns}", root_ca)
    kube_cluster.kubectl("create", "serviceaccount", "runner", "-n", ns)
    token = kube_cluster.kubectl("create", "token", "runner", "-n", ns, "--duration=10m").strip()
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["sub"] == f"system:serviceaccount:{ns}:runner"

    # The token authenticates on its own, and RBAC denies what was never granted.
    as_sa = tmp_path / "runner.kubeconfig"
    as_sa.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: '{kube_cluster.server}',"
        f" certificate-authority: '{kube_cluster.pki / 'ca.crt'}'}}}}]\n"
        f"users: [{{name: u, user: {{token: '{token}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
    )
    whoami = json.loads(kube_cluster.kubectl("--kubeconfig", str(as_sa), "auth", "whoami", "-o", "json"))
    assert whoami["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:runner"
    with pytest.raises(cluster.ClusterError, match="exited 1: no"):
        kube_cluster.kubectl("--kubeconfig", str(as_sa), "auth", "can-i", "list", "secrets", "-n", ns)


def test_helm_installs_a_chart(kube_cluster: cluster.Cluster, tmp_path: Path) -> None:
    """The helm built by `make e2e-deps` talks to this API server; its workloads reach Ready."""
    kube_cluster.helm("create", str(tmp_path / "demo"))
    ns = f"helm-{uuid.uuid4().hex[:6]}"
    kube_cluster.helm(
        "install", "demo", str(tmp_path / "demo"), "-n", ns, "--create-namespace", "--wait", "--timeout=90s"
    )
    status = json.loads(kube_cluster.helm("status", "demo", "-n", ns, "-o", "json"))
    assert status["info"]["status"] == "deployed"
    ready = "jsonpath={.status.readyReplicas}"
    assert kube_cluster.kubectl("get", "deployment", "demo", "-n", ns, "-o", ready) == "1"


def test_kwok_renews_node_leases(kube_cluster: cluster.Cluster) -> None:
    """Without renewed Leases the node controller marks KWOK nodes NotReady (and their pods not
    Ready) after its grace period, which turned long e2e runs flaky."""

    def renewals() -> dict[str, str]:
        leases = json.loads(kube_cluster.kubectl("get", "leases", "-n", "kube-node-lease", "-o", "json"))
        return {item["metadata"]["name"]: item["spec"].get("renewTime", "") for item in leases["items"]}

    first = renewals()
    assert set(first) == set(kube_cluster.nodes), first
    _eventually(
        "KWOK did not renew its nodes' Leases",
        lambda: all(renewed > first[node] for node, renewed in renewals().items()),
        timeout=60,
    )
