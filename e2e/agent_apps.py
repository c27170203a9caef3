"""An app under test on the node agent: its status, its Pods, and waiting on them (shared by the
e2e tests that run apps and the rollout benchmark)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import cluster
import node_agent_proc
import operator_proc
import pytest
from operator_proc import APPS_NAMESPACE as NS

__all__ = ["WAIT", "App", "delete_app", "pods", "running_ready"]

#: Spark on a loaded 2-core machine: a driver with two executor JVMs took 277 s to its first output
#: once (load average 25), so waits are generous; the figures in the report are what matters.
WAIT = 600


def delete_app(kube: cluster.Cluster, name: str, *, missing_ok: bool = False) -> None:
    """``kubectl delete`` the StreamApp and wait until the operator has stopped its Pods (a
    test's finalizer passes ``missing_ok``: its JVMs must not outlive the test, failed or not)."""
    missing = ("--ignore-not-found",) if missing_ok else ()
    kube.kubectl("delete", "sapp", name, "-n", NS, *missing, "--timeout=120s", timeout=130)


def pods(kube: cluster.Cluster, selector: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(
        kube.kubectl("get", "pods", "-n", NS, "-l", selector, "-o", "json")
    )["items"]
    return found


def running_ready(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def ready(pod: dict[str, Any]) -> bool:
        conditions = pod["status"].get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    return [
        p
        for p in candidates
        if p["status"].get("phase") == "Running" and ready(p) and not p["metadata"].get("deletionTimestamp")
    ]


class App:
    """One app under test: its topics, what was produced, and ways to wait on it."""

    def __init__(
        self, name: str, kube: cluster.Cluster, agent: node_agent_proc.AgentProcess, bootstrap: str
    ) -> None:
        self.name, self.kube, self.agent, self.bootstrap = name, kube, agent, bootstrap
        self.sent: list[str] = []

    def diagnose(self) -> str:
        driver = f"{self.name}-driver"
        return (
            f"\n--- driver log:\n{self.agent.container_log(NS, driver, 'driver')}"
            f"\n--- agent log:\n{self.agent.tail(40)}"
        )

    def eventually(self, what: str, check: Callable[[], Any], timeout: float = WAIT) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = check()
                if last:
                    return last
            except cluster.ClusterError as err:
                last = err
            time.sleep(1)
        pytest.fail(f"{self.name}: {what} within {timeout:.0f}s (last: {last}){self.diagnose()}")

    def status(self) -> dict[str, Any]:
        return operator_proc.app_status(self.kube, NS, self.name)

    def listing(self) -> str:
        return self.kube.kubectl("get", "sapp", self.name, "-n", NS).rstrip()

    def executors(self) -> list[dict[str, Any]]:
        return running_ready(pods(self.kube, f"streamapp.io/app={self.name},spark-role=executor"))

    def driver_pod(self) -> dict[str, Any] | None:
        found = pods(self.kube, f"streamapp.io/app={self.name},spark-role=driver")
        return found[0] if found else None
