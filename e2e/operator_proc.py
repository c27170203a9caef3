"""The StreamApp operator as the e2e suite runs it: the chart installed with helm, the operator a process.

Why a process and not the chart's Pod: KWOK reports pods Running without running them, so the
operator Deployment the chart creates never executes. The chart still matters — its CRD, service
account and RBAC are installed for real — and the operator process authenticates with a token of
the chart's ServiceAccount, so every API call it makes is checked against the chart's Roles exactly
as in a cluster. A missing permission fails the suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import cluster
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "streamapp-operator"
CRD = ROOT / "crds" / "streamapp.io_streamapps.yaml"
RELEASE, RELEASE_NAMESPACE = "streamapp", "streamapp-system"
#: The namespace the e2e operator watches and the apps under test live in.
APPS_NAMESPACE = NS = "apps-e2e"


def install_crd(kube: cluster.Cluster) -> None:
    """Apply the generated CRD and wait until `kubectl explain` serves its schema."""
    kube.kubectl("apply", "--server-side", "-f", str(CRD))
    wait_for_crd(kube)


def wait_for_crd(kube: cluster.Cluster) -> None:
    """Wait until the StreamApp CRD is Established and `kubectl explain` serves its schema."""
    kube.kubectl("wait", "--for=condition=Established", "crd/streamapps.streamapp.io", "--timeout=60s")
    # The OpenAPI document `kubectl explain` reads is republished a moment after Established.
    deadline = time.monotonic() + 60
    while True:
        try:
            kube.kubectl("explain", "streamapps.spec")
            return
        except cluster.ClusterError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def install_chart(kube: cluster.Cluster, watch: str) -> str:
    """`helm install` the operator chart watching namespace ``watch``; returns its ServiceAccount.

    The chart brings the CRD (its crds/ folder), as a user's first install does: nothing applies
    it with kubectl first (:func:`wait_for_crd` waits for it to serve).
    """
    kube.kubectl("create", "namespace", watch)
    kube.helm(
        "install", RELEASE, str(CHART), "-n", RELEASE_NAMESPACE, "--create-namespace",
        "--set", f"watchNamespaces={{{watch}}}", "--wait", "--timeout=120s",
        timeout=150,
    )  # fmt: skip
    selector = f"app.kubernetes.io/instance={RELEASE}"
    found = kube.kubectl("get", "serviceaccounts", "-n", RELEASE_NAMESPACE, "-o", "json", "-l", selector)
    accounts = json.loads(found)["items"]
    assert len(accounts) == 1, f"the chart should create one ServiceAccount, found {accounts}"
    return str(accounts[0]["metadata"]["name"])


def token_kubeconfig(kube: cluster.Cluster, account: str, namespace: str, path: pathlib.Path) -> pathlib.Path:
    """A kubeconfig that authenticates as ServiceAccount ``namespace/account`` (a bound token)."""
    token = kube.kubectl("create", "token", account, "-n", namespace, "--duration=4h").strip()
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: e2e, cluster: {{server: '{kube.server}',"
        f" certificate-authority: '{kube.pki / 'ca.crt'}'}}}}]\n"
        f"users: [{{name: {account}, user: {{token: '{token}'}}}}]\n"
        f"contexts: [{{name: e2e, context: {{cluster: e2e, user: {account}}}}}]\ncurrent-context: e2e\n"
    )
    path.chmod(0o600)
    return path


class Operator:
    """``python -m streamapp.operator`` watching one namespace; log in ``log``, metrics on ``metrics_url``."""

    def __init__(
        self, kube: cluster.Cluster, kubeconfig: pathlib.Path, namespace: str, workdir: pathlib.Path
    ) -> None:
        self.kube = kube  # the cluster, as its admin (tests act as the user; the operator as itself)
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.workdir = workdir
        self.log = workdir / "operator.log"
        self.liveness_port = cluster._free_port()
        self.metrics_port = cluster._free_port()
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> float:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            # Partitions and lag are re-read every 2 s instead of 30 s, so tests wait seconds
            # (make bench-reconciles runs the default).
            "STREAMAPP_RECONCILE_INTERVAL": os.environ.get("STREAMAPP_E2E_RECONCILE_INTERVAL", "2"),
            "PYTHONSAFEPATH": "1",  # the checkout's operator/ folder must not shadow the stdlib
        }
        argv = [
            sys.executable, "-m", "streamapp.operator", "-n", self.namespace,
            "--liveness-port", str(self.liveness_port), "--metrics-port", str(self.metrics_port), "--verbose",
        ]  # fmt: skip
        began = time.monotonic()
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.workdir, start_new_session=True
            )
        while not self._alive():
            if self.process.poll() is not None:
                raise cluster.ClusterError(
                    f"the operator exited with {self.process.returncode}:\n{self.tail()}"
                )
            if time.monotonic() - began > timeout:
                self.stop()
                raise cluster.ClusterError(
                    f"the operator did not answer /healthz in {timeout:.0f}s:\n{self.tail()}"
                )
            time.sleep(0.2)
        return time.monotonic() - began

    def _alive(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.liveness_port}/healthz", timeout=2) as resp:
                return bool(resp.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def metrics(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as resp:
            return str(resp.read().decode())

    def tail(self, lines: int = 60) -> str:
        return cluster._tail(self.log, lines)

    def diagnose(self, lines: int = 150) -> str:
        """The log's end, after the operator wrote every thread's stack to it (SIGUSR1)."""
        if self.process is not None and self.process.poll() is not None:
            return f"THE OPERATOR EXITED with {self.process.returncode}:\n{self.tail(lines)}"
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGUSR1)
            time.sleep(1)
        return self.tail(lines)

    def kill(self) -> None:
        """kill -9, as a crashed or evicted operator Pod: no handler finishes, nothing is cleaned up."""
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def app_status(kube: cluster.Cluster, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kube.kubectl("get", "streamapp", name, "-n", namespace, "-o", "json"))
    return dict(found.get("status") or {})


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), {})


#: Apps that really run on a node agent, sized for its 2 cores: the driver requests 100m CPU and a
#: 512m heap, each executor 200m CPU (one task slot) and a 512m heap — small enough that during a
#: rolling hand-over two drivers and both executor sets (up to 4 each) fit. The agent does not
#: enforce requests; they only let the scheduler place the Pods.
SIZING: dict[str, Any] = {
    "executors": {"min": 1, "max": 4, "coresPerExecutor": 1},
    "resources": {
        "driver": {"cpu": "100m", "memory": "512m"},
        "executor": {"cpu": "200m", "memory": "512m"},
    },
}


def manifest(name: str, *, source: str, sink: str, bootstrap: str, **deployment: Any) -> dict[str, Any]:
    """The word count example as a StreamApp, with a checkpoint and the given deployment."""
    return {
        "apiVersion": "streamapp.io/v1alpha1",
        "kind": "StreamApp",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "kafka": {"bootstrapServers": bootstrap},
            "checkpointLocation": f"/tmp/streamapp-e2e/{name}-{uuid.uuid4().hex[:6]}",
            "topology": {
                "defaults": {"keySerde": "string", "valueSerde": "string"},
                "streams": [
                    {
                        "name": "counts",
                        "from": {"topic": source},
                        "steps": [
                            {"flatMapValues": "explode(split(lower(value), '\\\\W+'))"},
                            {"filter": "value != ''"},
                            {"groupBy": "value"},
                            {"count": {}},
                            {"toStream": {}},
                            {"to": {"topic": sink, "valueSerde": "long"}},
                        ],
                    }
                ],
            },
            "deployment": {"executors": {"min": 1, "max": 8, "coresPerExecutor": 1}, **deployment},
        },
    }


def apply(kube: cluster.Cluster, doc: dict[str, Any] | str) -> str:
    text = doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False)
    return kube.kubectl("apply", "-f", "-", input=text)


def driver(kube: cluster.Cluster, name: str) -> dict[str, Any] | None:
    found = kube.kubectl(
        "get", "pods", "-n", NS, "-l", f"streamapp.io/app={name},spark-role=driver", "-o", "json"
    )
    items = json.loads(found)["items"]
    return dict(items[0]) if items else None


def deployed(kube: cluster.Cluster, name: str) -> dict[str, Any] | None:
    """The status once the current revision's driver Pod runs, for the current generation (else None).

    Not Ready: Ready also needs a completed micro-batch, which a KWOK driver never gets to.
    """
    app = json.loads(kube.kubectl("get", "streamapp", name, "-n", NS, "-o", "json"))
    status = app.get("status") or {}
    if condition(status, "Progressing").get("reason") != "Deployed" or status.get("phase") != "Running":
        return None
    return dict(status) if status.get("observedGeneration") == app["metadata"]["generation"] else None


def deploy(op: Operator, app: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    """Apply ``app`` and return its driver Pod once the operator reports the revision deployed."""
    name = app["metadata"]["name"]
    apply(op.kube, app)
    deadline = time.monotonic() + timeout
    while (pod := driver(op.kube, name)) is None or deployed(op.kube, name) is None:
        assert time.monotonic() < deadline, (
            f"{name}: no deployed driver Pod in {timeout:.0f} s:\n{op.diagnose()}"
        )
        time.sleep(0.25)
    return pod
