"""The driver Pod the operator rendered really runs: its command, args, env and files, as a process.

KWOK reports the driver Pod Running without running it, so this test does what a kubelet would:
it reads the Pod from the API server, writes each mounted ConfigMap under a local folder standing
for the container's filesystem, resolves the environment (downward API fields, Secret keys), and
starts the container's command with one override — the Spark master, local instead of the
cluster's — against the same real broker the operator probes. The records it writes, and the
lag the operator then reports from what the driver committed, prove the rendered spec works.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import cluster
import operator_proc
import pytest
from operator_proc import APPS_NAMESPACE, deploy, manifest

from streamapp.runtime.kafka import admin

pytestmark = pytest.mark.timeout(420)

NS = APPS_NAMESPACE
LINES = ["the quick brown fox", "jumps over the lazy dog", "The Dog sleeps", "a fox, a dog; the end"]


def _materialize(kube: cluster.Cluster, pod: dict[str, Any], root: pathlib.Path) -> dict[str, str]:
    """Write the container's ConfigMap mounts under ``root``; return {mount path: local folder}."""
    container = pod["spec"]["containers"][0]
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    mounts: dict[str, str] = {}
    for mount in container.get("volumeMounts") or []:
        volume = volumes[mount["name"]]
        if "configMap" not in volume:
            continue  # service account tokens and the like: a local master needs none
        local = root / mount["mountPath"].lstrip("/")
        found = kube.kubectl("get", "configmap", volume["configMap"]["name"], "-n", NS, "-o", "json")
        data = json.loads(found)["data"]
        items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]
        for item in items:
            target = local / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(data[item["key"]])
        mounts[mount["mountPath"]] = str(local)
    return mounts


def _localize(value: str, mounts: dict[str, str]) -> str:
    for mount_path, local in mounts.items():
        if value == mount_path or value.startswith(mount_path + "/"):
            return local + value[len(mount_path) :]
    return value


def _environment(kube: cluster.Cluster, pod: dict[str, Any], mounts: dict[str, str]) -> dict[str, str]:
    """The container's env as the kubelet would set it (downward API, Secret keys), localized."""
    fields = {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "metadata.uid": pod["metadata"]["uid"],
        "status.podIP": "127.0.0.1",
    }
    env: dict[str, str] = {}
    for var in pod["spec"]["containers"][0].get("env") or []:
        if "value" in var:
            env[var["name"]] = _localize(var["value"], mounts)
        elif "fieldRef" in (source := var.get("valueFrom") or {}):
            env[var["name"]] = fields[source["fieldRef"]["fieldPath"]]
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            secret = json.loads(kube.kubectl("get", "secret", ref["name"], "-n", NS, "-o", "json"))
            env[var["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
        else:
            raise AssertionError(f"env {var['name']}: a source this test does not resolve: {var}")
    return env


def _service_account(kube: cluster.Cluster, pod: dict[str, Any], folder: pathlib.Path) -> dict[str, str]:
    """What a Pod gets from its ServiceAccount — a token, the cluster's CA, the namespace — laid out
    as its mount, and the in-cluster address: the driver holds its Lease (the fence) with them,
    signed in as the account the operator made (so its Role is tested too)."""
    folder.mkdir(parents=True, exist_ok=True)
    account, namespace = pod["spec"]["serviceAccountName"], pod["metadata"]["namespace"]
    (folder / "token").write_text(kube.kubectl("create", "token", account, "-n", namespace).strip())
    (folder / "ca.crt").write_bytes((kube.pki / "ca.crt").read_bytes())
    (folder / "namespace").write_text(namespace)
    return {
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": kube.server.rsplit(":", 1)[1],
        "STREAMAPP_SERVICEACCOUNT_DIR": str(folder),
    }


def _counts(bootstrap: str, topic: str) -> dict[str, int]:
    """The latest count per word on the output topic (a KTable's changelog read to its end)."""
    latest: dict[str, int] = {}
    for record in admin.consume(bootstrap, topic, idle=1.0, timeout=30):
        assert record.key is not None and record.value is not None
        latest[record.key.decode()] = int.from_bytes(record.value, "big", signed=True)
    return latest


def test_the_rendered_driver_pod_runs_and_the_operator_reports_its_progress(
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    streamapp_report: Callable[[str], None],
) -> None:
    kube = streamapp_operator.kube
    source, sink = new_topic(2), new_topic(1)
    app = manifest("contract", source=source, sink=sink, bootstrap=kafka_bootstrap)
    app["spec"]["checkpointLocation"] = str(tmp_path / "checkpoint")
    pod = deploy(streamapp_operator, app)

    mounts = _materialize(kube, pod, tmp_path / "container")
    env = {**os.environ, **_environment(kube, pod, mounts), "STREAMAPP_SPARK_MASTER": "local[2]"}
    env.update(_service_account(kube, pod, tmp_path / "serviceaccount"))
    env["PYTHONSAFEPATH"] = "1"
    container = pod["spec"]["containers"][0]
    argv = [_localize(arg, mounts) for arg in [*container["command"], *(container.get("args") or [])]]
    assert argv[0] == "python", argv  # the runtime image's interpreter; here, this venv's
    argv[0] = sys.executable
    streamapp_report(f"driver contract: ran the rendered Pod command `{' '.join(container['command'])}`")

    admin.produce(kafka_bootstrap, source, [admin.Record(None, line.encode()) for line in LINES])
    log = tmp_path / "driver.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        expected = collections.Counter(w for line in LINES for w in _words(line))
        deadline = time.monotonic() + 180
        while (got := _counts(kafka_bootstrap, sink)) != expected:
            assert proc.poll() is None, f"the driver exited with {proc.returncode}:\n{_tail(log)}"
            assert time.monotonic() < deadline, f"counts {got} != {expected}\n{_tail(log)}"
            time.sleep(1)

        # The driver committed its progress; the operator's timer reads it into the status.
        def caught_up() -> dict[str, Any] | None:
            status = operator_proc.app_status(kube, NS, "contract")
            return status if status.get("lag") == 0 and status.get("lastBatchTime") else None

        deadline = time.monotonic() + 60
        while (status := caught_up()) is None:
            assert time.monotonic() < deadline, f"status never showed lag 0:\n{streamapp_operator.tail()}"
            time.sleep(0.5)
        assert status["throughput"].endswith(" records/s")
        listing = kube.kubectl("get", "sapp", "contract", "-n", NS)
        streamapp_report(f"driver contract: word counts exact; kubectl get sapp:\n{listing.rstrip()}")
    finally:
        # SIGTERM to the container's main process, as the kubelet sends at deletion (not to the
        # JVM it started): the query stops at a batch boundary and the driver exits 0.
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert code == 0, f"the driver did not stop cleanly on SIGTERM (exit {code}):\n{_tail(log)}"


def _words(line: str) -> list[str]:
    import re

    return [w for w in re.split(r"\W+", line.lower()) if w]


def _tail(path: pathlib.Path, lines: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def test_the_rendered_driver_starts_its_executors_on_kubernetes(
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    streamapp_report: Callable[[str], None],
) -> None:
    """The same Pod command with the cluster's master: Spark's own Kubernetes backend, signed in
    as the driver's ServiceAccount (the Role the operator made), creates one executor Pod per
    input partition, owned by the driver Pod; KWOK runs them, and the operator counts them Ready."""
    kube = streamapp_operator.kube
    app = manifest("k8s-contract", source=new_topic(3), sink=new_topic(1), bootstrap=kafka_bootstrap)
    app["spec"]["checkpointLocation"] = str(tmp_path / "checkpoint")
    pod = deploy(streamapp_operator, app)

    mounts = _materialize(kube, pod, tmp_path / "container")
    # What a Pod gets from its ServiceAccount (a token and the cluster's CA, mounted where Spark's
    # Kubernetes client looks for them in a cluster), given to Spark the way client mode reads it.
    account = pod["spec"]["serviceAccountName"]
    token = tmp_path / "token"
    token.write_text(kube.kubectl("create", "token", account, "-n", NS, "--duration=1h").strip())
    conf_file = pathlib.Path(_localize("/etc/streamapp/spark/spark-defaults.conf", mounts))
    with conf_file.open("a") as conf:
        conf.write(f"spark.kubernetes.authenticate.oauthTokenFile {token}\n")
        conf.write(f"spark.kubernetes.authenticate.caCertFile {kube.pki / 'ca.crt'}\n")
    env = {**os.environ, **_environment(kube, pod, mounts), "PYTHONSAFEPATH": "1"}
    env.update(_service_account(kube, pod, tmp_path / "serviceaccount"))
    assert env["STREAMAPP_SPARK_MASTER"] == "k8s://https://kubernetes.default.svc"
    env["STREAMAPP_SPARK_MASTER"] = f"k8s://{kube.server}"  # the same API server, from outside
    container = pod["spec"]["containers"][0]
    argv = [sys.executable, *(_localize(arg, mounts) for arg in container["command"][1:])]
    log = tmp_path / "driver.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    selector = "streamapp.io/app=k8s-contract,spark-role=executor"
    try:
        deadline = time.monotonic() + 120
        while True:
            executors = json.loads(kube.kubectl("get", "pods", "-n", NS, "-l", selector, "-o", "json"))[
                "items"
            ]
            status = operator_proc.app_status(kube, NS, "k8s-contract")
            if len(executors) == 3 and (status.get("executors") or {}).get("ready") == 3:
                break
            assert proc.poll() is None, f"the driver exited with {proc.returncode}:\n{_tail(log)}"
            assert time.monotonic() < deadline, (
                f"{len(executors)} executor Pods, status {status}\n{_tail(log)}"
            )
            time.sleep(0.5)
        for executor in executors:
            owners = executor["metadata"].get("ownerReferences") or []
            assert [o["uid"] for o in owners] == [pod["metadata"]["uid"]], executor["metadata"]["name"]
        listing = kube.kubectl("get", "sapp", "k8s-contract", "-n", NS)
        streamapp_report(
            "driver contract on Kubernetes: Spark created 3 executor Pods (3 input partitions) as the "
            f"driver's ServiceAccount, owned by the driver Pod; kubectl get sapp:\n{listing.rstrip()}"
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # executors never connect back: nothing to stop cleanly
        proc.wait(timeout=30)
    # Deleting the app deletes the driver Pod, and the garbage collector its executors.
    kube.kubectl("delete", "sapp", "k8s-contract", "-n", NS, "--timeout=90s", timeout=100)
    deadline = time.monotonic() + 60
    while kube.kubectl("get", "pods", "-n", NS, "-l", selector, "-o", "name").split():
        assert time.monotonic() < deadline, "the executor Pods outlived their driver"
        time.sleep(0.5)
