"""Compiles ``source`` nodes: a topic's records as read, decoded by the source's serdes.

Why a module of its own: reading is where a source's ``deserializationErrors`` policy acts —
unreadable records skipped, or dead-lettered with KIP-1034's headers (an output of the plan, so
under exactly_once_v2 in the batch's transaction) — and counted per topic; the sequencer
(:mod:`..compiler`) only hands over the reader, its outputs and its counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamapp.runtime import errors
from streamapp.runtime.spark import codecs, frames
from streamapp.runtime.topology import graph
from streamapp.runtime.topology import nodes as nd

__all__ = ["DEAD_LETTER_HEADERS", "DESERIALIZATION_EXCEPTION", "Reader", "read"]


class Reader(Protocol):
    """``read(topics)``: Kafka-shaped rows of those topics. A source's ``maxOffsetsPerTrigger``
    comes as a keyword, only when the manifest sets it (a reader that cannot honour it refuses it)."""

    def __call__(
        self, topics: Sequence[str], /, *, max_offsets_per_trigger: int | None = None
    ) -> DataFrame: ...


#: KIP-1034's dead-letter headers (Kafka Streams' names), on each record a source dead-letters.
DEAD_LETTER_HEADERS = (
    "__streams.errors.exception",
    "__streams.errors.message",
    "__streams.errors.topic",
    "__streams.errors.partition",
    "__streams.errors.offset",
)
#: The exception Kafka's own deserializers throw, named in the dead letter's exception header.
DESERIALIZATION_EXCEPTION = "org.apache.kafka.common.errors.SerializationException"


def read(
    topology: graph.Topology,
    reader: Reader,
    node: nd.Source,
    *,
    error_counts: dict[str, tuple[str, tuple[str, ...]]],
    outputs: list[DataFrame],
) -> frames.RecordFrame:
    """A source's records as read: decoded by its serdes, with its event time. A policy that
    skips or dead-letters records adds its observed metric to ``error_counts`` (the compiler's,
    whose size numbers the metrics) and its dead letters to ``outputs`` (the plan's sinks)."""
    key, value = topology.key_serde(node), topology.value_serde(node)
    limit = node.max_offsets_per_trigger
    rows = reader(list(node.topics), max_offsets_per_trigger=limit) if limit else reader(list(node.topics))
    if node.deserialization_errors not in (None, "fail"):
        rows = _readable(topology, node, rows, key.name, value.name, error_counts, outputs)
    frame = frames.RecordFrame.from_kafka(
        rows,
        key_serde=key.name,
        value_serde=value.name,
        key_schema=key.schema,
        value_schema=value.schema,
    )
    if node.timestamp is not None:
        frame = frame._with(timestamp=F.timestamp_millis(F.expr(node.timestamp).cast("bigint")))
    return frame


def _readable(
    topology: graph.Topology,
    node: nd.Source,
    rows: DataFrame,
    key: str,
    value: str,
    error_counts: dict[str, tuple[str, tuple[str, ...]]],
    outputs: list[DataFrame],
) -> DataFrame:
    """The source rows its serdes can read; the others are skipped or dead-lettered (an output
    of the plan, so under exactly_once_v2 in the batch's transaction), and counted per topic
    in an observed metric."""
    policy = node.deserialization_errors
    if topology.trigger()[0] == "real-time":
        raise errors.TopologyError(
            f"{node.name}: deserializationErrors: {policy} needs micro-batches to count what it "
            "drops; latency: low (Spark's real-time trigger) reports no counts: use fail there"
        )
    key_bad, value_bad = codecs.problem(F.col("key"), key), codecs.problem(F.col("value"), value)
    why_key = F.concat(F.lit(f"key cannot be read with the {key} serde: "), key_bad)
    why_value = F.concat(F.lit(f"value cannot be read with the {value} serde: "), value_bad)
    error = F.when(key_bad.isNotNull(), why_key).when(value_bad.isNotNull(), why_value)
    marked = rows.withColumn("_error", error)
    name = f"streamapp_{'skipped' if policy == 'skip' else 'dead_lettered'}_{len(error_counts)}"
    counts = [
        F.count_if((F.col("topic") == F.lit(t)) & F.col("_error").isNotNull()).alias(f"t{i}")
        for i, t in enumerate(node.topics)
    ]
    error_counts[name] = ("skipped" if policy == "skip" else "dead_lettered", tuple(node.topics))
    if policy == "skip":
        marked = marked.observe(name, *counts)
    else:
        assert node.dead_letter_topic is not None
        bad = marked.where(F.col("_error").isNotNull()).observe(name, *counts)
        outputs.append(_dead_letters(bad, node.dead_letter_topic))
    return marked.where(F.col("_error").isNull()).drop("_error")


def _dead_letters(bad: DataFrame, topic: str) -> DataFrame:
    """Sink rows for unreadable source rows: the original key, value, headers and timestamp, plus
    KIP-1034's headers saying which record it was and why it could not be read."""
    header = bad.schema["headers"].dataType
    errors_ = [
        (DEAD_LETTER_HEADERS[0], F.lit(DESERIALIZATION_EXCEPTION)),
        (DEAD_LETTER_HEADERS[1], F.col("_error")),
        (DEAD_LETTER_HEADERS[2], F.col("topic")),
        (DEAD_LETTER_HEADERS[3], F.col("partition").cast("string")),
        (DEAD_LETTER_HEADERS[4], F.col("offset").cast("string")),
    ]
    added = F.array(
        *[F.struct(F.lit(k).alias("key"), v.cast("binary").alias("value")) for k, v in errors_]
    ).cast(header)
    return bad.select(
        F.col("key"),
        F.col("value"),
        F.concat(F.coalesce(F.col("headers"), F.array().cast(header)), added).alias("headers"),
        F.lit(topic).alias("topic"),
        F.col("timestamp"),
        F.lit(None).cast("int").alias("partition"),
    )
