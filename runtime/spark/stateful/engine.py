"""Run a pure-Python fold over Spark state: one ``transformWithStateInPandas`` per stateful step.

Kafka Streams' stateful operators need things Spark's built-in aggregations do not give: per-record
lateness against a task's stream time, Python aggregators with subtractors, session updates. Each
step here is a :class:`Step` — a function ``(group key, batch as pandas, state) -> (state, rows)``
— run by :class:`.blob_processor.BlobProcessor` under ``transformWithStateInPandas`` (RocksDB
provider, protobuf).
The state of a group is one pickled value: simple and fast for the small per-group state of the
operators here (a task's open windows, a key's aggregate); a task with very many open windows
rewrites a large value per micro-batch, which is why tumbling and hopping windows with a
declarative aggregator run on the JVM with state per key and window (see the package docstring).

``transformWithStateInPandas`` (unlike ``applyInPandasWithState``) may be chained in one query,
which a KTable-grouped aggregate needs (table state, then group state). Time mode ``None``: no
Spark watermark drops rows behind our back; windows close on the task's own stream time, exactly
when Kafka Streams would close them, so the output never depends on micro-batch boundaries.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import logging
import math
from collections.abc import Callable
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamapp.runtime.spark import codecs, frames, jvm_udfs
from streamapp.runtime.spark.frames import RECORD_COLUMNS, RecordFrame
from streamapp.runtime.spark.stateful.blob_processor import BlobProcessor

__all__ = [
    "TASK_KEY", "Step", "Tasks", "arrival_order", "as_record_frame",
    "hash_task", "input_rows", "run", "run_by_task", "task_key", "with_task_key",
]  # fmt: skip

Step = Callable[[Any, pd.DataFrame, Any], tuple[Any, pd.DataFrame]]

log = logging.getLogger("streamapp.stateful")


def input_rows(frame: RecordFrame, value: str | None = None, *, topic: bool = False) -> DataFrame:
    """The columns a step reads: key, value, ts (epoch ms), partition, offset, sub (the source
    partition's identity), and with ``topic`` the source topic (a merged step, through the merge
    frontier: null keys kept, for it to order and then skip); else null keys dropped.

    ``value`` is an optional SQL expression for the aggregated value (declarative YAML
    aggregations such as ``sum: "length(value)"``); by default the record's value.
    """
    df = frame.df if topic else frame.df.where(F.col("key").isNotNull())
    partition = F.coalesce(F.col("partition"), F.lit(0)).cast("int")
    return df.select(
        "key",
        (F.expr(value) if value else F.col("value")).alias("value"),
        F.unix_millis("timestamp").alias("ts"),
        partition.alias("partition"),
        F.coalesce(F.col("offset"), F.lit(0)).cast("bigint").alias("offset"),
        # The source partition a record was read from (topic and partition): see arrival_order.
        F.xxhash64(F.coalesce(F.col("topic"), F.lit("")), partition).alias("sub"),
        *([F.coalesce(F.col("topic"), F.lit("")).alias("topic")] if topic else []),
    )


def run(df: DataFrame, group: str, step: Step, output_schema: str) -> DataFrame:
    """``df.groupBy(group)`` through ``step`` with state; rows come out in append mode."""
    return df.groupBy(group).transformWithStateInPandas(
        statefulProcessor=BlobProcessor(step),
        outputStructType=output_schema,
        outputMode="append",
        timeMode="None",
    )


@dataclasses.dataclass(frozen=True)
class Tasks:
    """Kafka Streams' tasks after a key change: the ``count`` partitions of its repartition topic,
    where a record goes by Kafka's default partitioner (murmur2 of its key serialised with
    ``key_serde``, the app's default key serde)."""

    count: int
    key_serde: str = "string"


def hash_task(df: DataFrame, column: str, tasks: Tasks) -> Column:
    """The task of a record of ``df`` regrouped by ``column`` (its key, after a key change): the
    partition of the repartition topic Kafka Streams would write it to
    (``io.streamapp.spark.KafkaPartition``; see :class:`Tasks`)."""
    key = _key_bytes(df, column, tasks.key_serde)
    kafka = jvm_udfs.call("kafka_partition", key, F.lit(tasks.count), spark=df.sparkSession)
    # A null key (a left foreign-key join's row without a foreign key) has no partition in Kafka:
    # it gets the task Spark's hash gives it (hash(null) is the seed), one task like any key's.
    return F.coalesce(kafka, F.pmod(F.hash(column), F.lit(tasks.count)).cast("int"))


def _key_bytes(df: DataFrame, column: str, serde: str) -> Column:
    """The bytes ``serde`` writes for the key in ``column``; with the ``bytes`` serde (no default
    key serde), a key that is not bytes or text is written as its type's own serde would."""
    dtype = df.schema[column].dataType
    if serde == "bytes" and not isinstance(dtype, (T.BinaryType, T.StringType)):
        serde = (
            "long" if isinstance(dtype, T.LongType)
            else "int" if isinstance(dtype, (T.IntegerType, T.ShortType, T.ByteType))
            else "double" if isinstance(dtype, (T.DoubleType, T.FloatType))
            else "json"
        )  # fmt: skip
    structured = isinstance(dtype, (T.StructType, T.ArrayType, T.MapType))
    return codecs.encode(F.col(column), serde, schema="declared" if structured else None)


#: The column :func:`with_task_key` adds: what a step grouped by task is grouped by.
TASK_KEY = "task_key"


def with_task_key(df: DataFrame, task: str) -> DataFrame:
    """``df`` with column :data:`TASK_KEY`: the grouping key of the task number in column ``task``
    (:func:`task_key`)."""
    return df.withColumn(TASK_KEY, task_key(df.sparkSession, F.col(task)))


def run_by_task(df: DataFrame, task: str, step: Step, output_schema: str) -> DataFrame:
    """:func:`run` grouped by the task number in column ``task`` (through :func:`task_key`);
    ``step`` gets the group's key, not the task number (the rows carry their partition)."""
    return run(with_task_key(df, task), TASK_KEY, step, output_schema)


def task_key(spark: SparkSession, task: Column) -> Column:
    """The grouping key of task number ``task``: the key Spark's hash partitioning puts in state
    partition ``task mod n`` (``io.streamapp.spark.TaskKey``)."""
    return jvm_udfs.call("task_key", task.cast("int"), spark=spark)


def as_record_frame(df: DataFrame, key: Any = None) -> RecordFrame:
    """Step output (key, value, ts) as a record frame; the update timestamps become ``timestamp``."""
    return RecordFrame(
        df.select(
            (key if key is not None else F.col("key")).alias("key"),
            F.col("value"),
            F.timestamp_millis("ts").alias("timestamp"),
            F.array().cast(frames.HEADERS).alias("headers"),
            F.lit(None).cast("int").alias("partition"),
            F.lit(None).cast("bigint").alias("offset"),
            F.lit(None).cast("string").alias("topic"),
        ).select(*RECORD_COLUMNS)
    )


def arrival_order(batch: pd.DataFrame) -> pd.DataFrame:
    """One task's batch in the order Kafka Streams processes a task fed by several partitions (a
    merge or cogroup of co-partitioned topics; for a key change, our stand-in for the repartition
    topic): each source partition by offset, and next always the partition whose head record has
    the lowest timestamp, as its PartitionGroup picks with every partition's records buffered
    (ties: the lower source id). Deterministic for a given batch."""
    ordered = batch.sort_values(["sub", "offset"], kind="stable", ignore_index=True)
    subs = ordered["sub"].to_numpy()
    if len(subs) == 0 or (subs == subs[0]).all():
        return ordered
    ts = ordered["ts"].to_numpy()
    bounds = [0, *(i for i in range(1, len(subs)) if subs[i] != subs[i - 1]), len(subs)]
    heads = [(int(ts[a]), int(subs[a]), a, b) for a, b in itertools.pairwise(bounds)]
    heapq.heapify(heads)
    order = []
    while heads:
        _, sub, i, end = heapq.heappop(heads)
        order.append(i)
        if i + 1 < end:
            heapq.heappush(heads, (int(ts[i + 1]), sub, i + 1, end))
    return ordered.iloc[order].reset_index(drop=True)


def ordered(batch: pd.DataFrame) -> pd.DataFrame:
    """A batch in the order Kafka Streams would process it: per partition, by offset."""
    return batch.sort_values(["partition", "offset"], kind="stable", ignore_index=True)


def pylist(series: pd.Series) -> list[Any]:
    """Plain Python values (numpy scalars pickle fine but compare and print worse)."""
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in series.tolist()]
