"""An app's Prometheus metrics, from the progress Spark reports after each micro-batch.

Why a package of its own, without pyspark: the metric names, labels and the arithmetic that turns
a ``StreamingQueryProgress`` (its JSON) into counters and gauges are plain Python, unit-tested
without a JVM; :mod:`streamapp.runtime.spark.query_metrics` is the thin Spark half (the
``StreamingQueryListener`` that feeds :meth:`AppMetrics.on_progress`, the observed output counts,
the accumulators). The driver serves the registry on the port the operator declares
(``STREAMAPP_METRICS_PORT``); the chart's PodMonitor scrapes it.

Names follow Prometheus' conventions: the ``streamapp_`` prefix, base units in the name
(``_seconds``, ``_bytes``, ``_records``), ``_total`` on counters, and the labels ``app`` and
``namespace`` on every series, ``topic`` and ``partition`` where they apply.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import prometheus_client

__all__ = ["BATCH_BUCKETS", "ERROR_KINDS", "PHASES", "AppMetrics", "offsets", "serve"]

#: Micro-batch durations span 0.1 s (stateless, warm) to minutes (a first batch, a backlog).
BATCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: Spark's ``durationMs`` phases of a micro-batch (``triggerExecution`` is the whole batch).
PHASES = ("latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets")
#: ``query``: the query stopped with an exception; ``progress``: a progress event could not be
#: turned into metrics (the query goes on; the event's metrics are missing).
ERROR_KINDS = ("query", "progress")


def offsets(raw: object) -> dict[tuple[str, int], int]:
    """Spark's Kafka offset JSON (``{"topic": {"0": 42}}``, text or parsed) per topic-partition."""
    parsed = json.loads(raw) if isinstance(raw, str) else raw
    found: dict[tuple[str, int], int] = {}
    if isinstance(parsed, Mapping):
        for topic, partitions in parsed.items():
            if isinstance(partitions, Mapping):
                for partition, offset in partitions.items():
                    if isinstance(offset, int) and offset >= 0:
                        found[(str(topic), int(partition))] = offset
    return found


def _epoch(stamp: str) -> float:
    """Spark's progress timestamps (``2026-11-23T19:40:01.123Z``) as epoch seconds."""
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@dataclasses.dataclass
class _Totals:
    """Counters Spark keeps as running totals (accumulators): we add the difference."""

    seen: dict[tuple[str, ...], float] = dataclasses.field(default_factory=dict)

    def delta(self, key: tuple[str, ...], total: float) -> float:
        before = self.seen.get(key, 0.0)
        self.seen[key] = total
        return max(0.0, total - before)


class AppMetrics:
    """The metrics of one app's query, in a registry of their own (one per query, not global).

    ``sources`` and ``sinks`` are the app's input and output topics: their series exist from the
    start (at 0), so a dashboard and an alert see an idle app, not a missing one. ``state_rows``:
    the state stores count their rows (``session.TRACK_STATE_ROWS``); without the count Spark
    reports 0 rows, so ``streamapp_state_rows`` has no series rather than a wrong one.
    """

    def __init__(
        self, *, app: str, namespace: str, sources: list[str], sinks: list[str], state_rows: bool = True
    ) -> None:
        self.registry = prometheus_client.CollectorRegistry()
        self.app, self.namespace = app, namespace
        self.counts_state_rows = state_rows
        base = ["app", "namespace"]

        def counter(name: str, doc: str, labels: list[str]) -> prometheus_client.Counter:
            return prometheus_client.Counter(name, doc, base + labels, registry=self.registry)

        def gauge(name: str, doc: str, labels: list[str]) -> prometheus_client.Gauge:
            return prometheus_client.Gauge(name, doc, base + labels, registry=self.registry)

        self.records_in = counter("streamapp_records_in", "Records read from each input topic.", ["topic"])
        self.records_out = counter(
            "streamapp_records_out", "Records written to each output topic.", ["topic"]
        )
        self.batches = counter("streamapp_batches", "Micro-batches completed.", [])
        self.batch_duration = prometheus_client.Histogram(
            "streamapp_batch_duration_seconds",
            "Duration of each micro-batch (Spark's triggerExecution).",
            base,
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.phase_seconds = counter(
            "streamapp_batch_phase_seconds",
            "Time spent in each phase of the micro-batches (Spark's durationMs), summed.",
            ["phase"],
        )
        self.input_rate = gauge(
            "streamapp_input_records_per_second", "Input rate of the last micro-batch.", []
        )
        self.processing_rate = gauge(
            "streamapp_processed_records_per_second", "Processing rate of the last micro-batch.", []
        )
        self.lag = gauge(
            "streamapp_consumer_lag_records",
            "Records of each input partition not yet processed, when the last micro-batch was planned.",
            ["topic", "partition"],
        )
        self.offset = gauge(
            "streamapp_consumer_offset",
            "Next offset the app reads in each input partition.",
            ["topic", "partition"],
        )
        self.stream_time = gauge(
            "streamapp_stream_time_seconds",
            "Largest record timestamp written to each output topic (epoch seconds).",
            ["topic"],
        )
        self.watermark_delay = gauge(
            "streamapp_watermark_delay_seconds",
            "How far the output's stream time is behind the wall clock at the end of the last batch.",
            [],
        )
        self.state_rows = gauge(
            "streamapp_state_rows",
            "Rows (keys, windows) in each stateful operator's state, where the state stores count them.",
            ["operator"],
        )
        self.state_bytes = gauge(
            "streamapp_state_bytes", "Memory used by each stateful operator's state store.", ["operator"]
        )
        self.late = counter(
            "streamapp_late_records_dropped",
            "Record contributions dropped as late (beyond the window's grace), by aggregation node.",
            ["node"],
        )
        self.skipped = counter(
            "streamapp_records_skipped", "Bad records skipped (error policy skip), by input topic.", ["topic"]
        )
        self.dead_lettered = counter(
            "streamapp_records_dead_lettered",
            "Bad records sent to the dead-letter topic (error policy dead-letter), by input topic.",
            ["topic"],
        )
        self.dropped = counter(
            "streamapp_records_dropped",
            "Records dropped as Kafka Streams drops them: a null key into a key-dependent step (grouping, "
            "a table), a null value into a sliding-window aggregation; by node.",
            ["node"],
        )
        self.errors = counter("streamapp_errors", "Errors, by kind (query, progress).", ["kind"])
        self.last_batch = gauge(
            "streamapp_last_batch_timestamp_seconds", "When the last micro-batch started (epoch seconds).", []
        )
        self._totals = _Totals()
        # Every series the dashboard reads exists from the start.
        for topic in sources:
            for family in (self.records_in, self.skipped, self.dead_lettered):
                family.labels(app, namespace, topic)
        for topic in sinks:
            self.records_out.labels(app, namespace, topic)
        for phase in PHASES:
            self.phase_seconds.labels(app, namespace, phase)
        for kind in ERROR_KINDS:
            self.errors.labels(app, namespace, kind)
        self.batches.labels(app, namespace)
        self.batch_duration.labels(app, namespace)
        for rate in (self.input_rate, self.processing_rate, self.watermark_delay):
            rate.labels(app, namespace).set(0)

    # -- feeding -------------------------------------------------------------------------------

    def on_progress(
        self,
        progress: Mapping[str, Any],
        *,
        initial_offsets: Callable[[int], dict[tuple[str, int], int] | None] = lambda _i: None,
        outputs: Mapping[str, tuple[int, float | None]] | None = None,
    ) -> None:
        """Account one ``StreamingQueryProgress`` (its JSON, parsed).

        ``initial_offsets(i)`` gives where source ``i`` started when its ``startOffset`` is null
        (the first batch of a checkpoint); ``outputs`` maps each output topic to the records the
        batch wrote there and their largest timestamp (epoch seconds), counted in the plan.
        """
        a, ns = self.app, self.namespace
        durations = progress.get("durationMs") or {}
        if progress.get("numInputRows") is not None or "triggerExecution" in durations:
            self.batches.labels(a, ns).inc()
        if "triggerExecution" in durations:
            self.batch_duration.labels(a, ns).observe(durations["triggerExecution"] / 1000)
        for phase in PHASES:
            if phase in durations:
                self.phase_seconds.labels(a, ns, phase).inc(max(0, durations[phase]) / 1000)
        self.input_rate.labels(a, ns).set(_number(progress.get("inputRowsPerSecond")))
        self.processing_rate.labels(a, ns).set(_number(progress.get("processedRowsPerSecond")))
        if progress.get("timestamp"):
            self.last_batch.labels(a, ns).set(_epoch(str(progress["timestamp"])))
        for index, source in enumerate(progress.get("sources") or []):
            self._source(index, source, initial_offsets)
        for index, state in enumerate(progress.get("stateOperators") or []):
            name = f"{index}:{state.get('operatorName', 'state')}"
            if self.counts_state_rows:
                self.state_rows.labels(a, ns, name).set(_number(state.get("numRowsTotal")))
            self.state_bytes.labels(a, ns, name).set(_number(state.get("memoryUsedBytes")))
        newest: float | None = None
        for topic, (records, stamp) in (outputs or {}).items():
            self.records_out.labels(a, ns, topic).inc(records)
            if stamp is not None:
                self.stream_time.labels(a, ns, topic).set(stamp)
                newest = stamp if newest is None else max(newest, stamp)
        if newest is not None and progress.get("timestamp"):
            ended = _epoch(str(progress["timestamp"])) + durations.get("triggerExecution", 0) / 1000
            self.watermark_delay.labels(a, ns).set(max(0.0, ended - newest))

    def _source(
        self,
        index: int,
        source: Mapping[str, Any],
        initial_offsets: Callable[[int], dict[tuple[str, int], int] | None],
    ) -> None:
        a, ns = self.app, self.namespace
        end = offsets(source.get("endOffset"))
        if not end:
            return  # not a Kafka source, or nothing planned yet
        latest = offsets(source.get("latestOffset"))
        for (topic, partition), position in end.items():
            self.offset.labels(a, ns, topic, str(partition)).set(position)
            behind = latest.get((topic, partition), position) - position
            self.lag.labels(a, ns, topic, str(partition)).set(max(0, behind))
        topics = sorted({topic for topic, _ in end})
        rows = int(source.get("numInputRows") or 0)
        if len(topics) == 1:
            # Exact: Spark counted the rows (transaction markers, which take offsets, are not rows).
            self.records_in.labels(a, ns, topics[0]).inc(rows)
            return
        start = offsets(source.get("startOffset")) if source.get("startOffset") else initial_offsets(index)
        if start is None:
            return  # where the first batch began is unknown: count nothing rather than guess
        for topic in topics:
            read = sum(
                max(0, position - start.get((t, p), position))
                for (t, p), position in end.items()
                if t == topic
            )
            self.records_in.labels(a, ns, topic).inc(read)

    def count(self, family: str, key: str, total: float) -> None:
        """Account an accumulator's running ``total`` (late and dropped per node,
        skipped/dead-lettered per topic): the counter grows by what is new since the last call."""
        metric = {
            "late": self.late,
            "skipped": self.skipped,
            "dead_lettered": self.dead_lettered,
            "dropped": self.dropped,
        }[family]
        grown = self._totals.delta((family, key), total)
        metric.labels(self.app, self.namespace, key).inc(grown)

    def error(self, kind: str) -> None:
        self.errors.labels(self.app, self.namespace, kind).inc()

    def exposition(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)


def _number(value: object) -> float:
    """Spark reports NaN/None for rates of an empty batch: 0 reads better on a dashboard."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def serve(metrics: AppMetrics, port: int, addr: str = "0.0.0.0") -> Callable[[], None]:
    """Serve ``metrics`` on ``port`` (``/metrics``); returns the function that stops the server."""
    server, thread = prometheus_client.start_http_server(port, addr=addr, registry=metrics.registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return stop
