"""The Spark half of an app's Prometheus metrics: the query's progress and the plan's counts.

Why here: only this layer may touch pyspark. :func:`attach` is the one call a runner makes between
compiling a topology and starting its query. It

- wraps the compiled plan in ``DataFrame.observe`` where the sink does not count its records
  itself (exactly once, `print` rows): per output topic, the records the batch writes and their
  largest timestamp, counted by Spark in the same pass that writes them (a ``foreachBatch`` sink
  reports no output rows of its own; ``KafkaSink.java`` counts them: :func:`runner.written`);
- makes the :class:`Feed` that hands each progress report of the query (the app's monitor reads
  them from Spark as they come) to :class:`streamapp.runtime.metrics.AppMetrics` with those counts
  and the running totals of the compiled plan's accumulators (late records per aggregation node;
  skipped and dead-lettered records per input topic, observed in the plan). Not a
  ``StreamingQueryListener``: a Python listener has each event converted through py4j on Spark's
  listener thread, CPU that delayed a 2-core driver's next micro-batch (p99 1.6-2x without it);
  the monitor parses each report's JSON once for the app's progress and the metrics;
- serves the registry on ``STREAMAPP_METRICS_PORT`` when that is set (the operator sets it in the
  driver Pod, with a container port named ``metrics``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamapp.runtime import metrics
from streamapp.runtime.spark import session

__all__ = ["OBSERVATION", "PORT_ENV", "Attached", "Feed", "attach", "metrics_port", "observe"]

#: The environment variable naming the port the driver serves ``/metrics`` on.
PORT_ENV = "STREAMAPP_METRICS_PORT"
#: Name of the plan's observed metrics in Spark's progress (``observedMetrics``).
OBSERVATION = "streamapp_out"

_log = logging.getLogger("streamapp.metrics")


def metrics_port(environ: Mapping[str, str]) -> int | None:
    """The port from ``STREAMAPP_METRICS_PORT``; a value that is no port is refused by name."""
    raw = environ.get(PORT_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{PORT_ENV} must be a TCP port (1-65535), not {raw!r}")
    return int(raw)


@dataclasses.dataclass
class Attached:
    """What :func:`attach` made: the app's metrics, and how to stop serving them."""

    metrics: metrics.AppMetrics
    port: int | None
    feed: Feed
    stop_serving: Callable[[], None] = lambda: None


def _observed(compiled: Any, sinks: list[str]) -> bool:
    return compiled.trigger.kind != "real-time" and bool(sinks)


def observe(compiled: Any, topology: Any) -> DataFrame:
    """``compiled.plan`` with the sinks' observed metrics (:data:`OBSERVATION`: records and latest
    timestamp per sink topic), or the plan itself where there are none: no sink, or the real-time
    trigger, which takes no CollectMetrics node (there Spark's own sink counts its rows)."""
    sinks = list(topology.sink_topics())
    if not _observed(compiled, sinks):
        return compiled.plan
    columns = []  # out_<i>, ts_<i> in this order: plan.counted_topics reads out_<i> by position too
    for i, topic in enumerate(sinks):
        hit = F.col("topic") == F.lit(topic)
        columns.append(F.sum(F.when(hit, 1).otherwise(0)).alias(f"out_{i}"))
        columns.append(F.max(F.when(hit, F.unix_millis("timestamp"))).alias(f"ts_{i}"))
    return compiled.plan.observe(OBSERVATION, *columns)


def attach(
    spark: SparkSession,
    compiled: Any,
    *,
    topology: Any,
    name: str,
    namespace: str | None,
    checkpoint: str,
    environ: Mapping[str, str] = os.environ,
) -> Attached:
    """Serve the metrics of the app ``name`` running ``compiled`` (a :class:`compiler.Compiled`,
    whose plan the query runs through :func:`observe`)."""
    namespace = environ.get("STREAMAPP_NAMESPACE") or namespace or ""
    sinks = list(topology.sink_topics())
    app_metrics = metrics.AppMetrics(
        app=name,
        namespace=namespace,
        sources=list(topology.source_topics()),
        sinks=sinks,
        state_rows=str(spark.conf.get(session.TRACK_STATE_ROWS, "true")).strip().lower() == "true",
    )
    observed = _observed(compiled, sinks)
    feed = Feed(
        app_metrics,
        spark=spark,
        name=name,
        checkpoint=checkpoint,
        sinks=sinks,
        observed=observed,
        totals={"late": dict(compiled.late)},
        error_counts=compiled.error_counts,
    )
    for node in compiled.late:
        app_metrics.count("late", node, 0)  # each windowed aggregation's series exists from the start
    port = metrics_port(environ)
    attached = Attached(metrics=app_metrics, port=port, feed=feed)
    if port is not None:
        attached.stop_serving = _serve(app_metrics, port, environ.get("STREAMAPP_DRIVER_POD_IP"), name)
    return attached


def _serve(app_metrics: metrics.AppMetrics, port: int, pod_ip: str | None, name: str) -> Callable[[], None]:
    """Serve on every interface locally; in a Pod on its IP (what Prometheus scrapes, as Spark's
    driver binds it: two drivers sharing a host — the two of a rolling hand-over on a node that
    gives Pods no network of their own — never share a port) and on 127.0.0.1 where that is free
    (kubectl port-forward and exec reach the Pod there)."""
    if not pod_ip:
        stop = metrics.serve(app_metrics, port)
        print(f"metrics of {name!r} at http://0.0.0.0:{port}/metrics", flush=True)
        return stop
    stops = [metrics.serve(app_metrics, port, pod_ip)]
    if pod_ip != "127.0.0.1":
        try:
            stops.append(metrics.serve(app_metrics, port, "127.0.0.1"))
        except OSError as exc:
            _log.info("metrics not served on 127.0.0.1:%s as well: %s", port, exc)
    print(f"metrics of {name!r} at http://{pod_ip}:{port}/metrics", flush=True)

    def stop_all() -> None:
        for stop in stops:
            stop()

    return stop_all


class Feed:
    """Accounts one query's progress reports in its :class:`metrics.AppMetrics`."""

    def __init__(
        self,
        app_metrics: metrics.AppMetrics,
        *,
        spark: SparkSession,
        name: str,
        checkpoint: str,
        sinks: list[str],
        observed: bool,
        totals: Mapping[str, Mapping[str, Any]],
        error_counts: Mapping[str, tuple[str, tuple[str, ...]]],
    ) -> None:
        self.metrics = app_metrics
        self.spark = spark
        self.name = name
        self.checkpoint = checkpoint.rstrip("/")
        self.sinks = sinks
        self.observed = observed
        self.totals = totals
        self.error_counts = error_counts
        self._errors_seen: dict[tuple[str, str], int] = {}
        self._initial: dict[int, dict[tuple[str, int], int] | None] = {}

    def progress(
        self, parsed: Mapping[str, Any], *, written: Mapping[str, tuple[int, int | None]] | None = None
    ) -> None:
        """Account one progress report (Spark's JSON, parsed): a micro-batch or an idle report;
        ``written``: per topic, the records the batch wrote and their largest timestamp (epoch ms),
        where the sink counted them rather than an observation in the plan."""
        try:
            outputs = self._outputs(parsed) if written is None else _outputs(self.sinks, written)
            self.metrics.on_progress(parsed, initial_offsets=self._initial_offsets, outputs=outputs)
            for family, accumulators in self.totals.items():
                for key, accumulator in accumulators.items():
                    self.metrics.count(family, key, float(accumulator.value))
            self._count_errors(parsed.get("observedMetrics") or {})
        except Exception:  # noqa: BLE001 - metrics must never break the query: count, log, go on
            self.metrics.error("progress")
            _log.exception("metrics of %s: a progress report could not be accounted", self.name)

    def failed(self) -> None:
        """The query ended with an error."""
        self.metrics.error("query")

    def _count_errors(self, observed: Mapping[str, Any]) -> None:
        """Skipped and dead-lettered records (deserializationErrors), per source topic: the batch's
        observed counts added to running totals, which the counters follow."""
        for name, (family, topics) in self.error_counts.items():
            row = observed.get(name) or {}
            for i, topic in enumerate(topics):
                value = row[i] if isinstance(row, (list, tuple)) else row.get(f"t{i}")
                total = self._errors_seen.get((family, topic), 0) + int(value or 0)
                self._errors_seen[(family, topic)] = total
                self.metrics.count(family, topic, float(total))

    def _outputs(self, progress: Mapping[str, Any]) -> dict[str, tuple[int, float | None]]:
        if not self.observed:
            written = int((progress.get("sink") or {}).get("numOutputRows") or 0)
            return {self.sinks[0]: (written, None)} if len(self.sinks) == 1 and written > 0 else {}
        row = (progress.get("observedMetrics") or {}).get(OBSERVATION) or {}
        found: dict[str, tuple[int, float | None]] = {}
        for i, topic in enumerate(self.sinks):
            stamp = row.get(f"ts_{i}")
            found[topic] = (int(row.get(f"out_{i}") or 0), None if stamp is None else int(stamp) / 1000)
        return found

    def _initial_offsets(self, index: int) -> dict[tuple[str, int], int] | None:
        """Where source ``index`` began: the offsets Spark's Kafka source wrote to
        ``<checkpoint>/sources/<index>/0`` when the checkpoint was new (read through Hadoop's
        file system, so any checkpoint URI Spark can use works)."""
        if index not in self._initial:
            self._initial[index] = None
            jvm = self.spark.sparkContext._jvm
            assert jvm is not None
            path = jvm.org.apache.hadoop.fs.Path(f"{self.checkpoint}/sources/{index}/0")
            fs = path.getFileSystem(self.spark.sparkContext._jsc.hadoopConfiguration())
            if fs.exists(path):
                stream = fs.open(path)
                try:
                    text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
                finally:
                    stream.close()
                body = text[text.index("{") :] if "{" in text else "{}"
                self._initial[index] = metrics.offsets(body)
        return self._initial[index]


def _outputs(
    sinks: list[str], written: Mapping[str, tuple[int, int | None]]
) -> dict[str, tuple[int, float | None]]:
    """The sink's counts as :meth:`metrics.AppMetrics.on_progress` takes them (seconds)."""
    found: dict[str, tuple[int, float | None]] = {}
    for topic in sinks:
        records, stamp = written.get(topic, (0, None))
        found[topic] = (records, None if stamp is None else stamp / 1000)
    return found
