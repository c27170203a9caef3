"""How long from `kubectl apply` to the driver Pod object existing (issue 5), measured, not asserted.

    .venv/bin/python -m tests.bench.operator_latency --apps 20

Starts the e2e control plane (e2e/cluster.py), an embedded Kafka broker (the operator reads the
input's partition count before it renders the Pod), the CRD and the operator as a process — the
same pieces the e2e suite uses. Then, one app after the other, runs `kubectl apply` of a fresh
StreamApp and polls the API server every 10 ms until its driver Pod exists. Two figures per app:
from launching kubectl (what a user waits) and from kubectl returning (the operator's own share:
watch event → validate → probe Kafka → render → create). Results: ``--out``/operator.json and
OPERATOR.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "e2e"))

import cluster  # noqa: E402 - e2e/ is not a package
import operator_proc  # noqa: E402

from streamapp.runtime.embedded import broker  # noqa: E402
from streamapp.runtime.kafka import admin  # noqa: E402

NAMESPACE = "bench"

APP = """\
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  kafka: {{bootstrapServers: "{bootstrap}"}}
  checkpointLocation: /tmp/streamapp-bench/{name}
  topology:
    defaults: {{keySerde: string, valueSerde: string}}
    streams:
      - from: {{topic: lines}}
        steps:
          - flatMapValues: "explode(split(lower(value), '\\\\W+'))"
          - groupBy: "value"
          - count: {{}}
          - toStream: {{}}
          - to: {{topic: counts, valueSerde: long}}
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tests.bench.operator_latency", description=__doc__.split("\n")[0]
    )
    p.add_argument("--apps", type=int, default=20, help="apps applied one after the other (default 20)")
    p.add_argument("--out", type=pathlib.Path, default=HERE / "results", help="folder for the results")
    return p


def _pod_exists(kube: cluster.Cluster, name: str) -> bool:
    try:
        kube.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}-driver")
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return False
        raise
    return True


def measure(
    kube: cluster.Cluster, bootstrap: str, apps: int, op: operator_proc.Operator
) -> list[dict[str, float]]:
    runs = []
    for i in range(apps):
        name = f"app-{i:02d}"
        manifest = APP.format(name=name, namespace=NAMESPACE, bootstrap=bootstrap)
        launched = time.monotonic()
        kube.kubectl("apply", "-f", "-", input=manifest)
        returned = time.monotonic()
        while not _pod_exists(kube, name):
            if time.monotonic() - launched > 60:
                raise RuntimeError(f"no driver Pod for {name} after 60 s; operator log:\n{op.tail(80)}")
            time.sleep(0.01)
        seen = time.monotonic()
        runs.append({"from_launch_ms": (seen - launched) * 1000, "from_return_ms": (seen - returned) * 1000})
        print(f"{name}: {runs[-1]['from_launch_ms']:.0f} ms after launching kubectl", flush=True)
    return runs


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "min": ordered[0],
        "max": ordered[-1],
        "p90": ordered[max(0, round(0.9 * len(ordered)) - 1)],
    }


def write(out: pathlib.Path, runs: list[dict[str, float]], command: str, versions: dict[str, str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    launch = _summary([r["from_launch_ms"] for r in runs])
    returned = _summary([r["from_return_ms"] for r in runs])
    document = {"command": command, "versions": versions, "runs": runs}
    document.update(from_launch_ms=launch, from_return_ms=returned)
    (out / "operator.json").write_text(json.dumps(document, indent=1))
    labelled = (
        ("launching `kubectl apply` → driver Pod exists", launch),
        ("`kubectl apply` returned → driver Pod exists", returned),
    )
    rows = "\n".join(
        f"| {label} | {s['median']:.0f} | {s['p90']:.0f} | {s['min']:.0f} | {s['max']:.0f} |"
        for label, s in labelled
    )
    (out / "OPERATOR.md").write_text(
        f"# Operator: `kubectl apply` to driver Pod\n\nGenerated {versions['date']} by:\n\n    {command}\n\n"
        f"- {versions['machine']}; {versions['kubernetes']} (kube-apiserver, etcd, scheduler, "
        f"controller-manager, KWOK, on loopback); Kafka {versions['kafka']} (embedded); streamapp "
        f"{versions['streamapp']}\n- {len(runs)} StreamApps applied one after the other, the operator "
        "running as a process; the API server polled every 10 ms for the driver Pod.\n\n"
        "| milliseconds | median | p90 | min | max |\n|---|---|---|---|---|\n"
        f"{rows}\n\nThe second row is the operator's share: the watch event reaches kopf, the spec is "
        "validated (topology compiled, expressions parsed), the input's partitions are read from "
        "Kafka, the objects are rendered and applied (ServiceAccount, Role, RoleBinding, ConfigMap, "
        "Service), and the Pod is created. Raw numbers: operator.json.\n"
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = ".venv/bin/python -m tests.bench.operator_latency " + " ".join(argv or sys.argv[1:])
    with tempfile.TemporaryDirectory(prefix="streamapp-bench-op-") as tmp, broker.EmbeddedKafka() as kafka:
        admin.create_topics(kafka.bootstrap, {"lines": 4, "counts": 4})
        kube = cluster.Cluster(pathlib.Path(tmp) / "cluster")
        kube.start()
        try:
            operator_proc.install_crd(kube)
            kube.kubectl("create", "namespace", NAMESPACE)
            op = operator_proc.Operator(kube, kube.kubeconfig, NAMESPACE, pathlib.Path(tmp))
            op.start()
            try:
                runs = measure(kube, kafka.bootstrap, args.apps, op)
            finally:
                op.stop()
            version = json.loads(kube.kubectl("version", "-o", "json"))["serverVersion"]["gitVersion"]
        finally:
            kube.stop()
    git = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    versions = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} CPUs, Linux {platform.release()}",
        "kubernetes": f"Kubernetes {version}",
        "kafka": kafka.version,
        "streamapp": git.stdout.strip(),
    }
    write(args.out, runs, command, versions)
    median = _summary([r["from_launch_ms"] for r in runs])["median"]
    print(f"median {median:.0f} ms; see {args.out / 'OPERATOR.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
