"""The chart's life cycle on a real API server: `helm test`, `helm upgrade`, `helm uninstall`.

What KWOK allows, said plainly: KWOK runs no containers. It marks a Job's Pod Succeeded on its
own, so `helm test` passing here shows the hook is rendered, created and judged by helm — not that
its probe ran. The probe itself is therefore also run here as a process (the hook container's
command, with the Service address replaced by the e2e operator's metrics port), against the
operator that answers and against a server that is not the operator. In a real cluster the same
Job runs the probe in the operator image.

Upgrade and uninstall use a second release (its own namespace and RBAC) so that the session's
operator, signed in as the first release's ServiceAccount, keeps its rights.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import operator_proc
import pytest
import yaml

pytestmark = pytest.mark.timeout(300)

RELEASE, NAMESPACE, WATCH = "second", "streamapp-second", "apps-second"


def _hook_job(kube: Any, release: str, namespace: str) -> dict[str, Any]:
    hooks = kube.helm("get", "hooks", release, "-n", namespace)
    jobs = [d for d in yaml.safe_load_all(hooks) if d and d.get("kind") == "Job"]
    assert len(jobs) == 1, hooks
    assert jobs[0]["metadata"]["annotations"]["helm.sh/hook"] == "test"
    return dict(jobs[0])


def _run_probe(job: dict[str, Any], url: str) -> subprocess.CompletedProcess[str]:
    container = job["spec"]["template"]["spec"]["containers"][0]
    script = container["args"][0]
    service_url = next(w.strip('"') for w in script.split() if w.startswith('"http://'))
    assert service_url.endswith("/metrics"), service_url
    assert container["command"] == ["python", "-c"]
    return subprocess.run(
        [sys.executable, "-c", script.replace(service_url, url)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def not_the_operator() -> Iterator[str]:
    """An HTTP server that answers /metrics with something else."""

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"# nothing of the operator's\nup 1\n")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def test_helm_test_probes_the_operator(
    streamapp_operator: operator_proc.Operator, not_the_operator: str, streamapp_report: Any
) -> None:
    kube = streamapp_operator.kube
    out = kube.helm("test", operator_proc.RELEASE, "-n", operator_proc.RELEASE_NAMESPACE, "--timeout=120s",
                    timeout=150)  # fmt: skip
    assert "Succeeded" in out, out
    job = _hook_job(kube, operator_proc.RELEASE, operator_proc.RELEASE_NAMESPACE)
    answered = _run_probe(job, streamapp_operator.metrics_url)
    assert answered.returncode == 0, answered.stderr + answered.stdout
    assert "the operator answers" in answered.stdout
    refused = _run_probe(job, not_the_operator)
    assert refused.returncode != 0 and "without the operator's metrics" in refused.stderr, refused
    streamapp_report(
        "helm test: the hook Job was created and judged Succeeded (KWOK completes Job Pods without "
        f"running them); its probe, run as a process: {answered.stdout.strip()!r}; against another "
        "server it fails"
    )


def test_helm_upgrade_and_uninstall(streamapp_crd: Any, streamapp_report: Any) -> None:
    kube = streamapp_crd
    kube.kubectl("create", "namespace", WATCH)
    kube.helm(
        "install", RELEASE, str(operator_proc.CHART), "-n", NAMESPACE, "--create-namespace",
        "--set", f"watchNamespaces={{{WATCH}}}", "--wait", "--timeout=120s", timeout=150,
    )  # fmt: skip
    # An app under this release survives both upgrade and uninstall (the CRD is never removed).
    app = operator_proc.manifest("kept", source="in", sink="out", bootstrap="kafka:9092")
    app["metadata"]["namespace"] = WATCH
    operator_proc.apply(kube, app)

    def deployment() -> dict[str, Any]:
        found = kube.kubectl("get", "deployments", "-n", NAMESPACE, "-o", "json")
        items = json.loads(found)["items"]
        assert len(items) == 1, items
        return dict(items[0])

    def env(dep: dict[str, Any]) -> dict[str, str]:
        container = dep["spec"]["template"]["spec"]["containers"][0]
        return {e["name"]: e.get("value", "") for e in container["env"]}

    assert env(deployment())["STREAMAPP_RECONCILE_INTERVAL"] == "30"
    kube.kubectl("create", "namespace", "apps-third")
    kube.helm(
        "upgrade", RELEASE, str(operator_proc.CHART), "-n", NAMESPACE, "--reuse-values",
        "--set", "reconcileInterval=15", "--set", "watchNamespaces={" + WATCH + ",apps-third}",
        "--wait", "--timeout=120s", timeout=150,
    )  # fmt: skip
    upgraded = deployment()
    assert env(upgraded)["STREAMAPP_RECONCILE_INTERVAL"] == "15"
    assert upgraded["metadata"]["generation"] >= 2
    status = json.loads(kube.helm("status", RELEASE, "-n", NAMESPACE, "-o", "json"))
    assert status["version"] == 2 and status["info"]["status"] == "deployed", status["info"]
    # The new namespace got its Role; the chart's RBAC follows the values.
    roles = kube.kubectl("get", "roles", "-n", "apps-third", "-o", "name", "-l",
                         f"app.kubernetes.io/instance={RELEASE}")  # fmt: skip
    assert roles.split(), "helm upgrade did not create the Role in the new namespace"

    kube.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout=120s", timeout=150)
    selector = f"app.kubernetes.io/instance={RELEASE}"
    for kind, where in (("deployments,serviceaccounts,services", ["-n", NAMESPACE]),
                        ("roles,rolebindings", ["-n", WATCH]),
                        ("clusterroles,clusterrolebindings", [])):  # fmt: skip
        left = kube.kubectl("get", kind, *where, "-l", selector, "-o", "name")
        assert not left.split(), f"helm uninstall left {left}"
    # helm never deletes the CRDs of crds/: the apps are kept.
    kube.kubectl("get", "crd", "streamapps.streamapp.io")
    assert (
        kube.kubectl("get", "streamapp", "kept", "-n", WATCH, "-o", "name").strip()
        == "streamapp.streamapp.io/kept"
    )
    streamapp_report(
        "helm: installed a second release (CRD from the chart already present), upgraded it "
        "(revision 2: reconcileInterval 30 → 15, a new watched namespace got its Role), uninstalled "
        "it (no Deployment, ServiceAccount, Service, Role or ClusterRole left; the CRD and apps kept)"
    )
