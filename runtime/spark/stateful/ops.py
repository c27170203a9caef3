"""The stateful DSL operations over record frames: what the compiler calls for each graph node.

Every function takes a :class:`RecordFrame` and plain parameters (aggregators from
:mod:`.aggregation`, windows from :mod:`.windows`, user logic as :class:`frames.Logic`) and returns
frames in the record layout, so table outputs go to the sink like any stream. All of them emit in
Spark's *append* output mode (the rows are changelog records), so they combine freely with each
other and with stateless steps in one query.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
from pyspark.accumulators import Accumulator
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamapp.runtime.spark import codecs, frames
from streamapp.runtime.spark.frames import Logic, RecordFrame
from streamapp.runtime.spark.stateful import engine, frontier, windows
from streamapp.runtime.spark.stateful.aggregation import Aggregator

__all__ = [
    "WINDOWED_COLUMNS",
    "JvmCounter",
    "Windowed",
    "aggregate",
    "table",
    "table_aggregate",
    "windowed_aggregate",
    "windowed_key_text",
]

#: Columns of a windowed aggregation's raw output (see :class:`Windowed`).
WINDOWED_COLUMNS = ("kind", "key", "window_start", "window_end", "value", "ts", "partition", "offset")


def _type(df: DataFrame, column: str) -> str:
    return str(df.schema[column].dataType.simpleString())


# -- KGroupedStream: count / reduce / aggregate -------------------------------------------------


def aggregate(
    frame: RecordFrame,
    aggregator: Aggregator,
    *,
    value: str | None = None,
    merged: frontier.Frontier | None = None,
) -> RecordFrame:
    """A grouped stream's aggregate as a KTable changelog: per key and micro-batch one update,
    stamped with the max timestamp of all records folded in so far, as in Kafka Streams.

    ``frame`` is already keyed by the grouping key (group_by = select_key before this).
    Records with a null key or value are skipped, as Kafka Streams does. ``merged``: the input
    merges several topics into each task (a cogroup, a merge): see :func:`_merged_aggregate`.
    """
    rows = engine.input_rows(frame, value, topic=merged is not None)
    if merged is not None:
        return _merged_aggregate(rows, aggregator, merged)

    def step(key: Any, batch: pd.DataFrame, state: Any) -> tuple[Any, pd.DataFrame]:
        agg, max_ts = state if state is not None else (aggregator.initial(), None)
        batch = engine.ordered(batch)
        folded = False
        for v, ts in zip(engine.pylist(batch["value"]), batch["ts"].tolist(), strict=True):
            if v is not None:
                agg = aggregator.add(key, v, agg, ts)
                max_ts = ts if max_ts is None else max(max_ts, ts)
                folded = True
        if not folded:
            # Only null values (skipped): no update, as in Kafka Streams. (Emitting the unchanged
            # aggregate again repeated an update; the randomized conformance suite, seed 2.)
            return state, pd.DataFrame()
        out = pd.DataFrame({"key": [key], "value": [aggregator.result(agg)], "ts": [max_ts]})
        return (agg, max_ts), out

    schema = f"key {_type(rows, 'key')}, value {aggregator.value_type}, ts bigint"
    return engine.as_record_frame(engine.run(rows, "key", step, schema))


def _merged_aggregate(rows: DataFrame, aggregator: Aggregator, merged: frontier.Frontier) -> RecordFrame:
    """:func:`aggregate` of a task fed by several co-partitioned topics: its records in Kafka
    Streams' order across them, those behind a partition that ran dry held back (:mod:`.frontier`).
    Each update is then one Kafka Streams emits too: folding each key's share of a micro-batch on
    its own gave a cogroup of two topics aggregates no order of the records reaches (the
    randomized conformance suite's subsequence check, cogroupByKey: 6 keys under a 45-record
    batch)."""

    def step(task: Any, batch: pd.DataFrame, state: Any) -> tuple[Any, pd.DataFrame]:
        state = state if state is not None else {"aggs": {}, "held": None, "merge": {}}
        batch, state["held"] = frontier.take(
            batch, state["held"], state["merge"], merged.caught_up, merged.topics
        )
        aggs: dict[Any, tuple[Any, int]] = state["aggs"]
        changed: dict[Any, None] = {}
        for k, v, ts in zip(
            engine.pylist(batch["key"]), engine.pylist(batch["value"]), batch["ts"].tolist(), strict=True
        ):
            if k is not None and v is not None:  # ordered with the others, then skipped
                agg, max_ts = aggs.get(k, (aggregator.initial(), ts))
                aggs[k] = (aggregator.add(k, v, agg, ts), max(max_ts, ts))
                changed[k] = None
        out = pd.DataFrame(
            {
                "key": list(changed),
                "value": [aggregator.result(aggs[k][0]) for k in changed],
                "ts": [aggs[k][1] for k in changed],
            }
        )
        return state, out

    schema = f"key {_type(rows, 'key')}, value {aggregator.value_type}, ts bigint"
    return engine.as_record_frame(engine.run_by_task(rows, "partition", step, schema))


# -- windowed aggregations ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Windowed:
    """A windowed aggregation's output: ``df`` has :data:`WINDOWED_COLUMNS`.

    ``kind`` is ``update`` (changelog; a null value is the tombstone of a merged session),
    ``final`` (emit-final) or ``late`` (a dropped record-window contribution, with the record's
    partition and offset). Use :attr:`table` for the sink; :attr:`late` is a side output for
    tests and debugging — each of the two used in a query runs the aggregation once.
    """

    df: DataFrame

    @property
    def table(self) -> RecordFrame:
        """The results; key = struct<key, start, end> (epoch ms); the timestamp is the max timestamp of
        the records folded in, as in Kafka Streams."""
        results = self.df.where(F.col("kind") != "late")
        key = F.struct(
            F.col("key").alias("key"), F.col("window_start").alias("start"), F.col("window_end").alias("end")
        )
        return engine.as_record_frame(results, key=key)

    @property
    def late(self) -> DataFrame:
        return self.df.where(F.col("kind") == "late")


def windowed_aggregate(
    frame: RecordFrame,
    spec: windows.Windows,
    aggregator: Aggregator,
    *,
    emit: str = "updates",
    value: str | None = None,
    late_counter: Accumulator[int] | JvmCounter | None = None,
    tasks: engine.Tasks | None = None,
    merged: frontier.Frontier | None = None,
    jvm: bool = False,
    per_input: bool = False,
) -> Windowed:
    """Aggregate per key and window with Kafka Streams' per-record lateness and grace.

    State lives per *task* (the input ``partition``, as in Kafka Streams; after a key change, the
    partitions of its repartition topic, ``tasks``: :func:`engine.hash_task`): its stream time is the running
    max of timestamps in :func:`engine.arrival_order`, computed vectorised per batch and carried
    across batches. ``emit``: ``updates`` (one changelog update per changed window and micro-batch),
    ``final`` (exactly one result per window, when stream time passes ``end + grace``) or
    ``suppress`` (``final`` in the order of Kafka Streams' suppression buffer).
    Dropped contributions are added to ``late_counter`` (a Spark accumulator), logged at debug
    level on logger ``streamapp.stateful``, and appear as ``late`` rows. ``merged``: the input
    merges several topics into each task; records behind a partition that ran dry while the
    broker has more for it wait in the task's state (:mod:`.frontier`). ``jvm``: run on the JVM
    with state per key and window (``state.windows_on_jvm`` decides; ``late_counter`` is then a
    :class:`JvmCounter`). ``per_input``: a cogroup (values ``struct(src, …)``), whose lateness
    Kafka Streams judges by each grouped stream's own stream time (one processor per stream,
    sharing the store): a record is late against the records of its own input only.
    """
    if emit not in windows.EMITS:
        raise ValueError(f"emit must be one of {windows.EMITS}, not {emit!r}")
    # Kafka Streams' windowed aggregations skip null keys only: a null value reaches the
    # aggregator (a windowed count counts it, and it moves stream time and the window's
    # timestamp). Conformance scenarios tumblingSuppress & co. showed it (2 vs our 1).
    if tasks is not None and merged is not None:
        raise ValueError("a merge frontier needs the source partitions as tasks (no key change)")
    rows = engine.input_rows(frame, value, topic=merged is not None)
    if tasks is not None:
        # Kafka Streams' repartition topic after a key change: all records of a key in one task
        # (one stream time); the source partition stays in `sub` for the arrival order.
        rows = rows.withColumn("partition", engine.hash_task(rows, "key", tasks))

    if jvm:
        if (
            merged is not None
            or aggregator.name is None
            or (spec.kind == "session" and aggregator.name == "collect_list")
        ):
            raise ValueError(f"a {spec.kind} window aggregation with this aggregator does not run on the JVM")
        if late_counter is not None and not isinstance(late_counter, JvmCounter):
            raise TypeError("the JVM aggregation counts late records in a JvmCounter")
        return Windowed(_on_jvm(rows, spec, aggregator, emit, late_counter))
    schema = _windowed_schema(rows, aggregator)
    if isinstance(late_counter, JvmCounter):
        raise TypeError("the Python engine counts late records in a Spark accumulator")
    counter: Accumulator[int] | None = late_counter

    def step(task: Any, batch: pd.DataFrame, state: Any) -> tuple[Any, pd.DataFrame]:
        state = state if state is not None else windows.new_state()
        if merged is None:
            batch = engine.arrival_order(batch)
        else:
            batch, state["held"] = frontier.take(
                batch, state.get("held"), state.setdefault("merge", {}), merged.caught_up, merged.topics
            )
            # Ordered with the others, then skipped: null keys; null values of a sliding window
            # (its compiler kept them for the order, KStreamSlidingWindowAggregate skips them).
            batch = batch[batch["key"].notna() & (batch["value"].notna() if spec.kind == "sliding" else True)]
            if not len(batch):
                return state, pd.DataFrame(columns=list(WINDOWED_COLUMNS))
        ts = batch["ts"].to_numpy(dtype=np.int64)
        if per_input:
            stream_time = ts.copy()
            times: dict[int, int] = state.setdefault("input_t", {})
            for i, v in enumerate(engine.pylist(batch["value"])):
                src = int(v["src"])
                stream_time[i] = times[src] = max(times.get(src, int(ts[i])), int(ts[i]))
        else:
            stream_time = np.maximum.accumulate(ts)  # Kafka's stream time, this record included
            if state["t"] is not None:
                stream_time = np.maximum(stream_time, state["t"])
        records = list(
            zip(
                engine.pylist(batch["key"]),
                engine.pylist(batch["value"]),
                ts.tolist(),
                stream_time.tolist(),
                batch["partition"].tolist(),
                batch["offset"].tolist(),
                strict=True,
            )
        )
        out = windows.process(spec, aggregator, emit, state, records)
        late = [o for o in out if o[0] == "late"]
        if late:
            if counter is not None:
                counter.add(len(late))
            engine.log.debug(
                "task %s: dropped %d late record-window contributions (stream time %s, grace %d ms): %s",
                task, len(late), state["t"], spec.grace, late[:3],
            )  # fmt: skip
        return state, pd.DataFrame(out, columns=list(WINDOWED_COLUMNS))

    return Windowed(engine.run_by_task(rows, "partition", step, schema))


class JvmCounter:
    """A Spark ``LongAccumulator`` the JVM's tasks add to, read like a Python accumulator."""

    def __init__(self, spark: SparkSession, name: str) -> None:
        self._accumulator = spark.sparkContext._jsc.sc().longAccumulator(name)

    @property
    def value(self) -> int:
        return int(self._accumulator.value())

    @property
    def jvm(self) -> Any:
        return self._accumulator


def _on_jvm(
    rows: DataFrame,
    spec: windows.Windows,
    aggregator: Aggregator,
    emit: str,
    late_counter: JvmCounter | None,
) -> DataFrame:
    """``TimeWindowAggregation.java`` (state per key and window), ``SlidingWindowAggregation.java``
    or ``SessionWindowAggregation.java`` (state per key) over the rows, grouped by task."""
    spark = rows.sparkSession
    jvm = spark.sparkContext._jvm
    assert jvm is not None and aggregator.name is not None
    # A text key is kept as the bytes Kafka gave: the state's key, and the output's until the
    # string the plan expects.
    text_as_bytes = isinstance(rows.schema["key"].dataType, T.StringType)
    if text_as_bytes:
        rows = rows.withColumn("key", F.col("key").cast("binary"))
    if aggregator.name == "count":
        # A count reads no value: a null of its type crosses the shuffle and the row conversion.
        rows = rows.withColumn("value", F.lit(None).cast(rows.schema["value"].dataType))
    schema = _windowed_schema(rows, aggregator)
    keyed = engine.with_task_key(rows, "partition")._jdf
    value_type = rows.schema["value"].dataType.json()
    late = late_counter.jvm if late_counter is not None else None
    tail = (emit, aggregator.name, value_type, schema, late)
    if spec.kind == "session":
        jdf = jvm.io.streamapp.spark.SessionWindowAggregation.apply(keyed, spec.size, spec.grace, *tail)
    elif spec.kind == "sliding":
        jdf = jvm.io.streamapp.spark.SlidingWindowAggregation.apply(keyed, spec.size, spec.grace, *tail)
    else:
        jdf = jvm.io.streamapp.spark.TimeWindowAggregation.apply(
            keyed, spec.size, spec.advance, spec.grace, *tail
        )
    out = DataFrame(jdf, spark)
    return out.withColumn("key", F.col("key").cast("string")) if text_as_bytes else out


def _windowed_schema(rows: DataFrame, aggregator: Aggregator) -> str:
    """The rows a windowed aggregation of ``rows`` emits (DDL; :data:`windows.Out`)."""
    return (
        f"kind string, key {_type(rows, 'key')}, window_start bigint, window_end bigint, "
        f"value {aggregator.value_type}, ts bigint, partition int, offset bigint"
    )


def windowed_key_text(key: Column) -> Column:
    """The readable windowed key for Kafka: ``<key>@<start>/<end>`` (epoch milliseconds), as bytes."""
    return codecs.windowed_key_text(key["key"], key["start"], key["end"])


# -- KTables -----------------------------------------------------------------------------------


def _table_rows(frame: RecordFrame) -> DataFrame:
    """Per key and batch: the new latest value, the value before the batch, the timestamp."""
    rows = engine.input_rows(frame)

    def step(key: Any, batch: pd.DataFrame, state: Any) -> tuple[Any, pd.DataFrame]:
        batch = engine.ordered(batch)
        old = state[0] if state is not None else None
        new, ts = engine.pylist(batch["value"])[-1], int(batch["ts"].iloc[-1])
        part, offset = int(batch["partition"].iloc[-1]), int(batch["offset"].iloc[-1])
        if new is None and state is None:
            return None, pd.DataFrame()  # deleting a key that does not exist changes nothing
        out = pd.DataFrame(
            {"key": [key], "value": [new], "old": [old], "ts": [ts], "partition": [part], "offset": [offset]}
        )
        return (None if new is None else (new, ts)), out

    value_type = _type(rows, "value")
    schema = (
        f"key {_type(rows, 'key')}, value {value_type}, old {value_type}, ts bigint, "
        "partition int, offset bigint"
    )
    return engine.run(rows, "key", step, schema)


def _table_changes(frame: RecordFrame) -> DataFrame:
    """Every update of a table from its changelog ``frame``, one row each, as Kafka Streams'
    KTableSource forwards them: the new value, the value it replaces, the record's timestamp. A
    delete of a key that does not exist changes nothing. Unlike :func:`_table_rows`, updates of a
    key within one micro-batch are not merged: a re-grouping aggregation sees the group each
    intermediate value mapped to, and its timestamp (same state as :func:`_table_rows`)."""
    rows = engine.input_rows(frame)

    def step(key: Any, batch: pd.DataFrame, state: Any) -> tuple[Any, pd.DataFrame]:
        batch = engine.ordered(batch)
        out: dict[str, list[Any]] = {c: [] for c in ("key", "value", "old", "ts", "partition", "offset")}
        columns = (engine.pylist(batch["value"]), batch["ts"].tolist(), batch["partition"].tolist())
        for new, ts, part, offset in zip(*columns, batch["offset"].tolist(), strict=True):
            old = state[0] if state is not None else None
            if new is None and old is None:
                continue  # deleting a key that does not exist changes nothing
            for column, item in zip(out, (key, new, old, ts, part, offset), strict=True):
                out[column].append(item)
            state = None if new is None else (new, int(ts))
        return state, pd.DataFrame(out)

    value_type = _type(rows, "value")
    schema = (
        f"key {_type(rows, 'key')}, value {value_type}, old {value_type}, ts bigint, "
        "partition int, offset bigint"
    )
    return engine.run(rows, "key", step, schema)


def table(frame: RecordFrame) -> RecordFrame:
    """``builder.table(topic)``: latest value per key from a changelog; a null value deletes the
    key. Output is the table's changelog: per key and micro-batch an update or a tombstone,
    with the timestamp of the record that made it."""
    return engine.as_record_frame(_table_rows(frame))


def table_aggregate(
    frame: RecordFrame, aggregator: Aggregator, *, key: Logic, value: Logic | None = None
) -> RecordFrame:
    """``table.group_by(key, value).aggregate(init, adder, subtractor)`` from the table's source
    changelog ``frame``: when a table key's value changes, the old value is subtracted from the
    group it mapped to and the new value added to its (possibly different) group."""
    if aggregator.subtract is None:
        raise ValueError("a KTable-grouped aggregation needs a subtractor")
    # Each update on its own (Kafka Streams' KTableRepartitionMap): a value that lived only
    # within a micro-batch still moved through its group, and its timestamp counts there.
    changes = _table_changes(frame)
    base = [
        F.col("key"),
        F.timestamp_millis("ts").alias("timestamp"),
        F.array().cast(frames.HEADERS).alias("headers"),
        F.col("partition"),
        F.lit(None).cast("string").alias("topic"),
    ]
    # The sign travels in the offset's low bit: 0 subtract (first), 1 add — the order Kafka uses.
    views = [
        RecordFrame(changes.where(F.col(column).isNotNull()).select(*base, F.col(column).alias("value"), off))
        for column, off in (
            ("old", (F.col("offset") * 2).alias("offset")),
            ("value", (F.col("offset") * 2 + 1).alias("offset")),
        )
    ]
    mapped = [view.map(key, value) if value is not None else view.select_key(key) for view in views]
    rows = engine.input_rows(mapped[0].merge(mapped[1]))
    subtract = aggregator.subtract

    def step(group: Any, batch: pd.DataFrame, state: Any) -> tuple[Any, pd.DataFrame]:
        agg, max_ts = state if state is not None else (aggregator.initial(), None)
        batch = engine.ordered(batch)
        columns = (engine.pylist(batch["value"]), batch["ts"].tolist(), batch["offset"].tolist())
        for v, ts, off in zip(*columns, strict=True):
            agg = aggregator.add(group, v, agg, ts) if off % 2 else subtract(group, v, agg, ts)
            max_ts = ts if max_ts is None else max(max_ts, ts)
        out = pd.DataFrame({"key": [group], "value": [aggregator.result(agg)], "ts": [max_ts]})
        return (agg, max_ts), out

    schema = f"key {_type(rows, 'key')}, value {aggregator.value_type}, ts bigint"
    return engine.as_record_frame(engine.run(rows, "key", step, schema))
