"""Start a compiled plan as one streaming query, with the trigger and sink the topology asked for.

One query per application: every sink of the topology is a branch of one DataFrame whose rows
name their target topic, so the sources are read once, there is one checkpoint, and one micro-
batch commits all outputs together.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from streamapp.runtime.spark import jvm_sink, kafka_io, sink, stopping

__all__ = ["Collector", "Trigger", "start_collecting", "start_kafka"]


@dataclasses.dataclass(frozen=True)
class Trigger:
    """How the query is driven: ``micro-batch`` (as soon as data is there), ``real-time``
    (Spark's low-latency mode, stateless Kafka-to-Kafka plans), or ``available-now`` (drain what
    is there, then stop: reprocessing jobs and tests)."""

    kind: str = "micro-batch"
    interval: str = "0 seconds"
    #: How often a real-time query ends its long-running tasks to checkpoint. Each boundary stalls
    #: records for about a second: at 5 s the bench's stateless p99 was 2,417 ms, at 1 minute
    #: 364 ms (p50 354 → 101 ms). After a failure up to this much input is reprocessed.
    realtime_checkpoint_interval: str = "1 minute"

    def spark_kwargs(self) -> dict[str, Any]:
        if self.kind == "micro-batch":
            return {"processingTime": self.interval}
        if self.kind == "available-now":
            return {"availableNow": True}
        if self.kind == "real-time":
            return {"realTime": self.realtime_checkpoint_interval}
        raise ValueError(f"unknown trigger kind {self.kind!r}")


def start_kafka(
    plan: DataFrame,
    *,
    bootstrap: str,
    checkpoint: str,
    trigger: Trigger,
    query_name: str | None = None,
    producer_config: Mapping[str, str] | None = None,
    output_mode: str = "append",
    prints: bool = False,
    exactly_once: sink.ExactlyOnce | None = None,
) -> StreamingQuery:
    """Write the plan's rows (see :data:`sink.SINK_COLUMNS`) to Kafka.

    ``producer_config`` is Java client configuration (the connection's security among it), for the
    JVM sink's producers or, with the real-time trigger, Spark's own sink. ``exactly_once`` makes
    the JVM sink transactional (refused with the real-time trigger: Spark's own sink is not).

    A micro-batch query's sink sits behind a :class:`stopping.JvmGate` (a
    :class:`stopping.Gate` when the plan has `print` rows), so that :func:`stopping.graceful_stop`
    can stop it between batches.
    """
    gate: stopping.Gate | stopping.JvmGate | None = None
    registered: str | None = None  # the KafkaSink registration
    if trigger.kind == "real-time":
        if exactly_once is not None:
            raise ValueError(
                "exactly_once_v2 with the real-time trigger (latency: low): Spark's own Kafka sink, the "
                "only one real-time mode accepts, is not transactional"
            )
        # Real-time mode refuses append; for a stateless plan update emits the same rows.
        output_mode = "update"
        # Real-time mode accepts only Spark's own Kafka sink: records get the write time.
        writer = (
            plan.select("key", "value", "headers", "topic")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
        )
        for key, value in kafka_io.client_options(producer_config).items():
            writer = writer.option(key, value)
    else:
        batch_writer = sink.KafkaBatchWriter(
            bootstrap=bootstrap,
            producer_config=dict(producer_config or {}),
            prints=prints,
            exactly_once=exactly_once,
        )
        jvm = plan.sparkSession.sparkContext._jvm
        java = batch_writer.jvm_gate(jvm)
        if java is None:  # `print` rows: the batch comes to Python
            gate = stopping.Gate(batch_writer)
            writer = plan.writeStream.foreachBatch(gate)
        elif exactly_once is None:
            # A streaming sink of Spark's (KafkaSink.java): the write is planned with the batch, as
            # Spark's own Kafka sink's is; the gate is entered before the batch's tasks start.
            gate = stopping.JvmGate(java)
            registered = jvm_sink.register(jvm, java, batch_writer.jvm_config())
            writer = plan.writeStream.format(jvm_sink.SINK_FORMAT).option(jvm_sink.SINK_OPTION, registered)
        else:
            gate = stopping.JvmGate(java)
            writer = plan.writeStream
            writer._jwrite.foreachBatch(java)  # Java's DataStreamWriter.foreachBatch(VoidFunction2)
    writer = (
        writer.outputMode(output_mode)
        .option("checkpointLocation", checkpoint)
        .trigger(**trigger.spark_kwargs())
    )
    if query_name:
        writer = writer.queryName(query_name)
    query = writer.start()
    if gate is not None:
        stopping.register(query, gate)
    if registered is not None:
        _COUNTING[query] = (jvm, registered)
    return query


def sink_counts(trigger: Trigger, *, prints: bool, exactly_once: sink.ExactlyOnce | None) -> bool:
    """Whether :func:`start_kafka` writes with ``KafkaSink``, which counts the records each batch
    writes per topic (:func:`written`): the micro-batch trigger, at least once, no `print` rows."""
    return trigger.kind != "real-time" and not prints and exactly_once is None


def forget(query: StreamingQuery) -> None:
    """The query has ended: its sink's registration (gate, configuration, counts) goes."""
    counting = _COUNTING.pop(query, None)
    if counting is not None:
        jvm, registered = counting
        jvm.io.streamapp.spark.KafkaSink.unregister(registered)


def written(query: StreamingQuery, batch_id: int) -> jvm_sink.Written | None:
    """The records micro-batch ``batch_id`` of ``query`` wrote per topic and their largest
    timestamp (epoch ms); None if its sink does not count them or no longer remembers the batch."""
    counting = _COUNTING.get(query)
    return None if counting is None else jvm_sink.written(*counting, batch_id)


def reports_after(
    jvm: Any, query: StreamingQuery, last: tuple[str, int]
) -> list[tuple[dict[str, Any], jvm_sink.Written | None]]:
    """The progress reports (micro-batches and idle reports) of ``query`` made after ``last`` (a
    report's timestamp, Spark's ISO-8601 UTC text, which sorts as time does, and batch id), oldest
    first, each with what its batch wrote (:func:`written`; None for an idle report or a sink that
    does not count). A py4j call per 6,000 characters of new reports (``ProgressReports.java``):
    PySpark's ``recentProgress`` converts the whole buffer, 100 reports, through JSON, and reading
    the new ones one by one costs about ten py4j calls each; twice a second, either was CPU a
    2-core driver's micro-batches waited for."""
    counting = _COUNTING.get(query)
    return jvm_sink.reports_after(jvm, query._jsq, last, None if counting is None else counting[1])


#: query → (its JVM view, its KafkaSink registration): the queries whose sink counts its records.
_COUNTING: weakref.WeakKeyDictionary[StreamingQuery, tuple[Any, str]] = weakref.WeakKeyDictionary()


class Collector:
    """A ``foreachBatch`` function keeping every output row in the driver (test driver sink)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self._lock = threading.Lock()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        # Epoch millis computed in Spark: no Python time-zone conversion on the way back.
        ordered = batch.withColumn("_batch", F.lit(batch_id)).withColumn("_ts_ms", F.unix_millis("timestamp"))
        rows = []
        for row in ordered.collect():  # one action; `print` rows are printed here, not kept
            if row.topic is not None and row.topic.startswith(sink.PRINT_PREFIX):
                print(
                    f"[{row.topic[len(sink.PRINT_PREFIX) :]}]: {_text(row.key)}, {_text(row.value)}",
                    flush=True,
                )
            else:
                rows.append(row)
        with self._lock:
            self.rows.extend(rows)


def _text(raw: object) -> str | None:
    return None if raw is None else bytes(raw).decode(errors="replace")  # type: ignore[call-overload]


def start_collecting(
    plan: DataFrame,
    *,
    checkpoint: str,
    collector: Callable[[DataFrame, int], None],
    output_mode: str = "append",
) -> StreamingQuery:
    """Drain the plan's sources into ``collector`` and stop (available-now)."""
    return (
        plan.writeStream.foreachBatch(collector)
        .outputMode(output_mode)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
