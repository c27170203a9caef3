"""A real Prometheus scrapes a running driver and the operator; PromQL answers lag and throughput,
and every panel of the chart's Grafana dashboard returns data.

The driver is the Pod the operator rendered, run as a process as in test_driver_contract.py (KWOK
runs no containers), with its metrics port — the one the Pod declares as ``metrics`` — moved to
a free loopback port; Prometheus (Debian's package) scrapes it and the operator every second.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import cluster
import operator_proc
import prometheus
import pytest
from operator_proc import APPS_NAMESPACE, deploy, manifest
from test_driver_contract import _environment, _localize, _materialize, _service_account, _tail

from streamapp.runtime.kafka import admin

pytestmark = pytest.mark.timeout(480)

NS = APPS_NAMESPACE
DASHBOARD = pathlib.Path(__file__).resolve().parents[1] / "charts/streamapp-operator/files/dashboard.json"
LINES = [f"line {i} of the metered app, a fox and a dog" for i in range(60)]


def _panel_queries(app: str) -> list[tuple[str, str]]:
    """(title, PromQL) of every dashboard panel, its variables set as Grafana would for this app."""
    dashboard = json.loads(DASHBOARD.read_text())
    found = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = (
                target["expr"]
                .replace("$namespace", NS)
                .replace("$app", app)
                .replace("$__rate_interval", "1m")
            )
            found.append((panel["title"], expr))
    return found


def test_prometheus_scrapes_a_driver_and_the_operator_and_the_dashboard_has_data(
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    streamapp_report: Callable[[str], None],
) -> None:
    kube = streamapp_operator.kube
    source, sink = new_topic(2), new_topic(1)
    app = manifest("metered", source=source, sink=sink, bootstrap=kafka_bootstrap)
    app["spec"]["checkpointLocation"] = str(tmp_path / "checkpoint")
    # The State rows panel needs the stores' row count, off by default (a read per state write).
    app["spec"]["sparkConf"] = {"spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "true"}
    pod = deploy(streamapp_operator, app)

    container = pod["spec"]["containers"][0]
    declared = {p["name"]: p["containerPort"] for p in container["ports"]}
    mounts = _materialize(kube, pod, tmp_path / "container")
    env = {**os.environ, **_environment(kube, pod, mounts), "STREAMAPP_SPARK_MASTER": "local[2]"}
    env.update(_service_account(kube, pod, tmp_path / "serviceaccount"))
    assert env["STREAMAPP_METRICS_PORT"] == str(declared["metrics"]), (
        declared,
        env["STREAMAPP_METRICS_PORT"],
    )
    port = cluster._free_port()  # the Pod's port, moved: every driver here shares one host
    env.update(STREAMAPP_METRICS_PORT=str(port), PYTHONSAFEPATH="1")
    argv = [sys.executable, *(_localize(a, mounts) for a in container["command"][1:])]

    prom = prometheus.Prometheus(
        tmp_path / "prometheus",
        {
            "streamapp-drivers": [f"127.0.0.1:{port}"],
            "streamapp-operator": [f"127.0.0.1:{streamapp_operator.metrics_port}"],
        },
    )
    seconds = prom.start()
    admin.produce(kafka_bootstrap, source, [admin.Record(None, line.encode()) for line in LINES])
    log = tmp_path / "driver.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    selector = f'app="metered", namespace="{NS}"'
    try:
        deadline = time.monotonic() + 240
        while True:
            got = prom.query(f"sum(streamapp_records_in_total{{{selector}}})")
            if got and float(got[0]["value"][1]) == len(LINES):
                break
            assert proc.poll() is None, f"the driver exited with {proc.returncode}:\n{_tail(log)}"
            assert time.monotonic() < deadline, (
                f"Prometheus never saw {len(LINES)} records in: {got}\n{_tail(log)}"
            )
            time.sleep(1)
        # An app's lag and throughput, as an alert or a dashboard asks for them.
        lag_query = f"sum by (app) (streamapp_consumer_lag_records{{{selector}}})"
        rate_query = f"sum by (app) (rate(streamapp_records_in_total{{{selector}}}[1m]))"
        lag, rate = prom.query(lag_query), prom.query(rate_query)
        assert [float(s["value"][1]) for s in lag] == [0.0], lag
        assert len(rate) == 1 and float(rate[0]["value"][1]) > 0, rate
        per_partition = prom.query(f"streamapp_consumer_lag_records{{{selector}}}")
        assert sorted(s["metric"]["partition"] for s in per_partition) == ["0", "1"]
        up = {t["labels"]["job"]: t["health"] for t in prom.targets()}
        assert up == {"streamapp-drivers": "up", "streamapp-operator": "up"}, prom.targets()
        results, empty = [], []
        for title, expr in _panel_queries("metered"):
            samples = prom.query(expr)
            if not samples:
                empty.append(f"{title}: {expr}")
            results.append(f"  {title}: {', '.join(s['value'][1] for s in samples[:4])}")
        assert not empty, "dashboard panels without data:\n" + "\n".join(empty)
        streamapp_report(
            f"Prometheus {prom.binary} (ready in {seconds:.1f} s) scraped a driver and the operator:\n"
            f"  {lag_query} = {lag[0]['value'][1]}\n  {rate_query} = {float(rate[0]['value'][1]):.2f}\n"
            f"every dashboard panel returned data ({len(results)} queries):\n" + "\n".join(results)
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        finally:
            prom.stop()
    assert code == 0, f"the driver did not stop cleanly on SIGTERM (exit {code}):\n{_tail(log)}"
