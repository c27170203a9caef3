"""Compiles ``to`` and ``print`` nodes into the plan's sink rows (key, value, headers, topic,
timestamp, partition), which the compiler unions into one query.

Why a module of its own: a sink is where records are encoded again — by the sink's serdes, a
windowed key as text or JSON, the partition by the sink's partitioner — and ``print`` rows are
marked for the sink to print instead of producing (:data:`..sink.PRINT_PREFIX`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamapp.runtime import errors
from streamapp.runtime.spark import codecs, frames, sink
from streamapp.runtime.spark.compilers import logic
from streamapp.runtime.topology import graph

__all__ = ["print_rows", "sink_rows"]


def sink_rows(topology: graph.Topology, node: graph.Node, frame: frames.RecordFrame) -> DataFrame:
    """The records of ``frame`` (the sink's parent) as rows for the sink's topic."""
    value = topology.value_serde(node)
    return frame.df.select(
        _sink_key(topology, node, frame).alias("key"),
        codecs.encode(F.col("value"), value.name, schema=_struct_hint(frame, "value")).alias("value"),
        F.col("headers"),
        F.lit(node.params["topic"]).alias("topic"),
        F.col("timestamp"),
        _partition(node, frame).alias("partition"),
    )


def print_rows(node: graph.Node, frame: frames.RecordFrame) -> DataFrame:
    """Rows the sink prints on the driver's stdout instead of producing (see sink.PRINT_PREFIX)."""
    label = node.params.get("label") or node.name
    return frame.df.select(
        F.col("key").cast("string").cast("binary").alias("key"),
        F.col("value").cast("string").cast("binary").alias("value"),
        F.col("headers"),
        F.lit(f"{sink.PRINT_PREFIX}{label}").alias("topic"),
        F.col("timestamp"),
        F.lit(None).cast("int").alias("partition"),
    )


def _sink_key(topology: graph.Topology, node: graph.Node, frame: frames.RecordFrame) -> Column:
    key = topology.key_serde(node)
    if topology.windowed(node.parents[0]):
        if key.name in ("string", "bytes"):
            from streamapp.runtime.spark.stateful import ops  # noqa: PLC0415

            return ops.windowed_key_text(F.col("key"))
        if key.name != "json":
            raise errors.TopologyError(
                f"{node.name}{f' ({node.path})' if node.path else ''}: a windowed key "
                f"(key, window start, window end) is written with keySerde string or json, not {key.name}"
            )
    return codecs.encode(F.col("key"), key.name, schema=_struct_hint(frame, "key"))


def _partition(node: graph.Node, frame: frames.RecordFrame) -> Column:
    """The target partition: the sink's partitioner, else null (the producer's murmur2 of the key).

    A partitioner may return any int; it is taken modulo nothing — a partition the topic does
    not have fails the batch with the producer's error, as Kafka Streams would.
    """
    partitioner = node.params.get("partitioner")
    if partitioner is None:
        return F.lit(None).cast("int")
    return frame.evaluate(logic.of(partitioner), default_type="int").cast("int")


def _struct_hint(frame: frames.RecordFrame, column: str) -> str | None:
    # JSON: structs, arrays and maps are written with to_json; a string is written as it is.
    return frames._schema_marker(frame.df.schema[column].dataType)
