"""A running app serves its Prometheus metrics, and they agree with what Kafka holds.

`streamapp run` on the real broker and local Spark, with STREAMAPP_METRICS_PORT set as the
operator sets it in a driver Pod; the endpoint is scraped over HTTP while the query runs.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from streamapp.runtime.embedded import broker
from streamapp.runtime.kafka import admin

MANIFEST = """\
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {{name: metered, namespace: team}}
spec:
  kafka: {{bootstrapServers: "{bootstrap}"}}
  # Off by default (a RocksDB read per state write): asked for, streamapp_state_rows has series.
  sparkConf: {{spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows: "true"}}
  topology:
    defaults: {{keySerde: string, valueSerde: string}}
    streams:
      - from: {{topics: [{a}, {b}]}}
        steps:
          - mapValues: "upper(value)"
          - to: {{topic: {upper}}}
      - from: {{topic: {c}}}
        steps:
          - groupByKey: {{}}
          - windowedBy: {{tumbling: 10s, grace: 0s}}
          - count: {{}}
          - toStream: {{}}
          - to: {{topic: {counts}, valueSerde: long}}
"""

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(port: int) -> Samples | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    return {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("app", "namespace")))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.labels.get("app", "metered") == "metered"
    }


def _get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), -1.0)


def test_the_driver_serves_metrics_that_match_the_records_in_kafka(
    kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    a, b, c = new_topic(2), new_topic(1), new_topic(1)
    upper, counts = new_topic(1), new_topic(1)
    admin.produce(kafka_bootstrap, a, [admin.Record(f"k{i}".encode(), b"x") for i in range(3)])
    admin.produce(kafka_bootstrap, b, [admin.Record(b"k", b"y"), admin.Record(b"k", b"z")])
    # Stream time of c reaches 25 s, so the record at 3 s (window [0 s, 10 s), no grace) is late.
    admin.produce(
        kafka_bootstrap,
        c,
        [admin.Record(b"k", b"v", timestamp=ts) for ts in (1000, 2000, 25_000, 3000)],
    )
    app = tmp_path / "app.yaml"
    app.write_text(MANIFEST.format(bootstrap=kafka_bootstrap, a=a, b=b, c=c, upper=upper, counts=counts))
    port = broker.free_port()
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamapp.runtime.cli",
                "run",
                str(app),
                "--checkpoint",
                str(tmp_path / "ckpt"),
                "--until-idle",
                "10",
            ],
            env={**__import__("os").environ, "STREAMAPP_METRICS_PORT": str(port), "PYTHONSAFEPATH": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 420  # a loaded 2-core machine: Spark's start alone took 60 s
        while True:
            samples = _scrape(port)
            if (
                samples
                and _get(samples, "streamapp_records_in_total", topic=c) == 4
                and _get(samples, "streamapp_records_in_total", topic=a) == 3
            ):
                break
            assert proc.poll() is None, f"run exited {proc.returncode}:\n{_failure(log)}"
            assert time.monotonic() < deadline, f"metrics never counted the input:\n{log.read_text()[-3000:]}"
            time.sleep(1)
        written = len(admin.consume(kafka_bootstrap, counts, idle=2.0, timeout=30))
        time.sleep(2)  # the batch that wrote them has reported its progress
        samples = _scrape(port)
        assert samples is not None
    finally:
        code = proc.wait(timeout=120)
    assert code == 0, log.read_text()[-3000:]
    # Records in per topic equal the records produced: the first batch of a new checkpoint too,
    # for a source reading two topics (counted from the offsets Spark's source started at).
    assert _get(samples, "streamapp_records_in_total", topic=a) == 3
    assert _get(samples, "streamapp_records_in_total", topic=b) == 2
    assert _get(samples, "streamapp_records_in_total", topic=c) == 4
    # Records out per topic equal what the topics hold.
    assert _get(samples, "streamapp_records_out_total", topic=upper) == 5
    assert written >= 2
    assert _get(samples, "streamapp_records_out_total", topic=counts) == written
    assert _get(samples, "streamapp_late_records_dropped_total", node=_late_node(samples)) == 1
    for topic, partitions, produced in ((a, 2, 3), (b, 1, 2), (c, 1, 4)):
        ends = [
            _get(samples, "streamapp_consumer_offset", topic=topic, partition=str(p))
            for p in range(partitions)
        ]
        assert sum(ends) == produced, (topic, ends)
        for p in range(partitions):
            assert _get(samples, "streamapp_consumer_lag_records", topic=topic, partition=str(p)) == 0
    assert _get(samples, "streamapp_batches_total") >= 1
    assert _get(samples, "streamapp_batch_duration_seconds_count") >= 1
    assert _get(samples, "streamapp_batch_phase_seconds_total", phase="addBatch") > 0
    assert _get(samples, "streamapp_stream_time_seconds", topic=counts) == 25.0
    assert _get(samples, "streamapp_stream_time_seconds", topic=upper) > 1_000_000_000  # produce time
    state_rows = [v for (name, _), v in samples.items() if name == "streamapp_state_rows"]
    assert state_rows and max(state_rows) >= 1, state_rows  # key k's windows
    assert _get(samples, "streamapp_errors_total", kind="progress") == 0
    assert _get(samples, "streamapp_records_skipped_total", topic=c) == 0


def _late_node(samples: Samples) -> str:
    nodes = [
        dict(labels)["node"] for name, labels in samples if name == "streamapp_late_records_dropped_total"
    ]
    assert len(nodes) == 1, nodes
    return nodes[0]


def _failure(log: pathlib.Path) -> str:
    """The lines that say what failed (Spark's plan dump after them is long), then the tail."""
    lines = log.read_text(errors="replace").splitlines()
    said = [line for line in lines if "failed" in line or "Exception" in line or "Error" in line]
    return "\n".join(said[:20]) + "\n…\n" + "\n".join(lines[-20:])
