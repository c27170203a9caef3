"""Joins on Spark: both inputs in one frame, one stateful step per task, then the joiner.

Spark has no stateful operator with two inputs, so the two sides are unioned with a side tag
(``side``: 0 left, 1 right; each side's value in its own column, ``lv`` or ``rv``, so the two
value types need not agree) and grouped by *task*: the input partition when both sides are
read straight from co-partitioned topics (as Kafka Streams' tasks), else the key's partition of
Kafka Streams' repartition topic (``engine.hash_task``). Each task runs a processor of
:mod:`.join_logic` over the micro-batch in Kafka Streams' order, with its state in one pickled
value (:mod:`.engine`), and emits ``(key, left, right, ts)`` rows; the joiner then computes the
value from ``key``, ``left`` and ``right`` as a Spark expression or a vectorised Python function.

Time mode is ``None``: a left/outer result is emitted when a later record advances the task's
stream time past its window (as in Kafka Streams, where stream time only moves with records),
so no processing-time timers are needed and the output does not depend on batch boundaries.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import pandas as pd
from pyspark.accumulators import Accumulator
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamapp.runtime.spark.frames import Logic, RecordFrame
from streamapp.runtime.spark.stateful import engine, frontier, join_logic

__all__ = ["Side", "global_join", "join", "joiner_column", "pairs"]

_RESULT_COLUMNS = ("key", "left", "right", "ts")


@dataclasses.dataclass(frozen=True)
class Side:
    """One input of a join: its records, and whether its partitions are Kafka's own (a task).

    ``sources``: where a partitioned side's records came through stateless steps, the records as
    read. Kafka Streams orders a task's records by its input partitions' records, those a filter
    dropped or a ``flatMapValues`` fanned out included, so the join orders by them too."""

    frame: RecordFrame
    partitioned: bool
    sources: tuple[RecordFrame, ...] = ()


def _tagged(
    side: int, frame: RecordFrame, key_type: str, lv: str, rv: str, *, topic: bool, read: bool = False
) -> DataFrame:
    """``frame``'s rows tagged with their side; ``read``: a source's records as read (``Side.sources``),
    which only order the side's own (``read`` true, key and value null)."""
    own = F.lit(None) if read else F.col("value")
    partition = F.coalesce(F.col("partition"), F.lit(0)).cast("int")
    source = F.coalesce(F.col("topic"), F.lit(""))
    # The source partition (frontier.take): its topic, and Spark's hash of topic and partition.
    extra = [source.alias("topic"), F.xxhash64(source, partition).alias("sub")] if topic else []
    return frame.df.select(
        (F.lit(None) if read else F.col("key")).cast(key_type).alias("key"),
        F.lit(side).alias("side"),
        (own if side == join_logic.LEFT else F.lit(None)).cast(lv).alias("lv"),
        (own if side == join_logic.RIGHT else F.lit(None)).cast(rv).alias("rv"),
        F.unix_millis("timestamp").alias("ts"),
        F.coalesce(F.col("partition"), F.lit(0)).cast("int").alias("partition"),
        F.coalesce(F.col("offset"), F.lit(0)).cast("bigint").alias("offset"),
        *extra,
        *([F.lit(read).alias("read")] if topic else []),
    )


def _type(frame: RecordFrame, column: str) -> str:
    return str(frame.df.schema[column].dataType.simpleString())


def _processor(kind: str, how: str, windows: Any) -> Any:
    if kind == "stream-table":
        return join_logic.StreamTableJoin(left_join=how == "left")
    if kind == "table-table":
        return join_logic.TableTableJoin(how)
    return join_logic.StreamStreamJoin(how, before=windows.before, after=windows.after, grace=windows.grace)


def pairs(
    kind: str,
    how: str,
    left: Side,
    right: Side,
    *,
    windows: Any = None,
    tasks: engine.Tasks,
    late_counter: Accumulator[int] | None = None,
    merged: frontier.Frontier | None = None,
) -> DataFrame:
    """The join's ``(key, left, right, ts)`` rows (before the joiner), in append mode.

    ``merged``: when both sides are read straight from their partitions (a task per partition),
    records behind a partition that ran dry while the broker has more for it wait in the task's
    state (:mod:`.frontier`), so the order does not depend on where micro-batches end."""
    if not (left.partitioned and right.partitioned):
        merged = None  # regrouped by key hash: no task reads a partition of each side
    key_type, lv, rv = _type(left.frame, "key"), _type(left.frame, "value"), _type(right.frame, "value")
    on = merged is not None
    union = _tagged(0, left.frame, key_type, lv, rv, topic=on).unionByName(
        _tagged(1, right.frame, key_type, lv, rv, topic=on)
    )
    for index, side in enumerate((left, right) if on else ()):
        for source in side.sources:
            union = union.unionByName(_tagged(index, source, key_type, lv, rv, topic=True, read=True))
    task: Column = (
        F.col("partition")
        if left.partitioned and right.partitioned
        else engine.hash_task(union, "key", tasks)
    )
    union = union.withColumn("task", task)
    processor = _processor(kind, how, windows)
    first = join_logic.RIGHT if kind == "stream-table" else join_logic.LEFT
    if on:  # at the start of a batch, a timestamp tie goes to the `first` side (frontier.take)
        union = union.withColumn("rank", F.when(F.col("side") == first, 0).otherwise(1))

    def step(_task: Any, batch: pd.DataFrame, state: Any) -> tuple[Any, pd.DataFrame]:
        state = state if state is not None else processor.new_state()
        if merged is not None:
            held = state.setdefault("frontier", {"held": None, "memory": {}})
            batch, held["held"] = frontier.take(
                batch, held["held"], held["memory"], merged.caught_up, merged.topics
            )
            batch = batch[~batch["read"]]  # they ordered the records, each with its own
        records = zip(
            batch["side"].tolist(),
            engine.pylist(batch["key"]),
            [lv if s == join_logic.LEFT else rv for s, lv, rv in zip(
                batch["side"].tolist(), engine.pylist(batch["lv"]), engine.pylist(batch["rv"]), strict=True
            )],
            batch["ts"].tolist(),
            batch["partition"].tolist(),
            batch["offset"].tolist(),
            strict=True,
        )  # fmt: skip
        out: list[join_logic.Result] = []
        late = 0
        ordered = records if merged is not None else join_logic.merge_order(records, first=first)
        for record in ordered:
            if processor.process(state, record, out.append) is False:
                late += 1
        if late and late_counter is not None:
            late_counter.add(late)
        return state, pd.DataFrame(out, columns=list(_RESULT_COLUMNS))

    schema = f"key {key_type}, left {lv}, right {rv}, ts bigint"
    return engine.run_by_task(union, "task", step, schema)


def _arity(function: Callable[..., Any]) -> int:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return len([p for p in inspect.signature(function).parameters.values() if p.kind in kinds])


def joiner_column(joiner: Logic, *, default_type: str) -> Column:
    """The joiner over ``key``, ``left`` and ``right``: an expression, or a Python function
    ``(left, right)`` or ``(key, left, right)`` run as a vectorised UDF over pandas Series."""
    if joiner.expr is not None:
        return F.expr(joiner.expr)
    function = joiner.function
    assert function is not None
    arity = _arity(function)
    returns = joiner.returns or default_type
    name = getattr(function, "__qualname__", "joiner")
    if arity == 2:

        def two(left: pd.Series, right: pd.Series) -> pd.Series:
            return pd.Series(function(left, right))

        two.__name__ = name
        return F.pandas_udf(two, returns)(F.col("left"), F.col("right"))
    if arity == 3:

        def three(key: pd.Series, left: pd.Series, right: pd.Series) -> pd.Series:
            return pd.Series(function(key, left, right))

        three.__name__ = name
        return F.pandas_udf(three, returns)(F.col("key"), F.col("left"), F.col("right"))
    raise TypeError(
        f"the joiner {name} takes {arity} parameters; expected (left, right) or (key, left, right)"
    )


def join(
    kind: str,
    how: str,
    left: Side,
    right: Side,
    joiner: Logic,
    *,
    windows: Any = None,
    tasks: engine.Tasks,
    late_counter: Accumulator[int] | None = None,
    merged: frontier.Frontier | None = None,
) -> RecordFrame:
    """The join's output records: a stream (stream-table, stream-stream) or a table changelog
    (table-table: a result that went away is a tombstone, its value null, never run through the
    joiner)."""
    rows = pairs(
        kind,
        how,
        left,
        right,
        windows=windows,
        tasks=tasks,
        late_counter=late_counter,
        merged=merged,
    )
    value = joiner_column(joiner, default_type=_type(left.frame, "value"))
    if kind == "table-table":
        value = F.when(F.col("left").isNotNull() | F.col("right").isNotNull(), value)
    return engine.as_record_frame(rows.select("key", value.alias("value"), "ts"))


def global_join(
    stream: RecordFrame,
    table: RecordFrame,
    *,
    key: Logic,
    joiner: Logic,
    left_join: bool,
    tasks: engine.Tasks,
) -> RecordFrame:
    """A stream joined with a GlobalKTable by a key extractor, without repartitioning the stream.

    Every task holds the whole table: its records are sent to every task (``tasks`` of
    them; the stream's partition modulo that is its task). In each micro-batch a task applies the
    table's records first, in offset order — Kafka Streams bootstraps a global table before any
    stream record and keeps updating it from its own thread, ahead of the tasks — then looks up
    ``key`` (computed from each stream record) for its stream records in offset order. The
    result has the stream record's key and timestamp. A null lookup key drops the record in
    ``join`` and gives a null table value in ``leftJoin``; a null stream value is dropped.
    """
    lookup = stream.evaluate(key, default_type=_type(stream, "key"))
    table_key = _type(table, "key")
    out_key, lv, rv = _type(stream, "key"), _type(stream, "value"), _type(table, "value")
    columns = [
        F.unix_millis("timestamp").alias("ts"),
        F.coalesce(F.col("partition"), F.lit(0)).cast("int").alias("partition"),
        F.coalesce(F.col("offset"), F.lit(0)).cast("bigint").alias("offset"),
    ]
    records = stream.df.select(
        F.col("key").alias("key"),
        lookup.cast(table_key).alias("jk"),
        F.lit(join_logic.LEFT).alias("side"),
        F.col("value").cast(lv).alias("lv"),
        F.lit(None).cast(rv).alias("rv"),
        *columns,
    ).withColumn("task", F.pmod(F.col("partition"), F.lit(tasks.count)).cast("int"))
    updates = table.df.select(
        F.lit(None).cast(out_key).alias("key"),
        F.col("key").cast(table_key).alias("jk"),
        F.lit(join_logic.RIGHT).alias("side"),
        F.lit(None).cast(lv).alias("lv"),
        F.col("value").cast(rv).alias("rv"),
        *columns,
    ).withColumn("task", F.explode(F.sequence(F.lit(0), F.lit(tasks.count - 1))))
    union = records.unionByName(updates)
    processor = join_logic.StreamTableJoin(left_join=left_join)

    def step(_task: Any, batch: pd.DataFrame, state: Any) -> tuple[Any, pd.DataFrame]:
        state = state if state is not None else processor.new_state()
        batch = batch.sort_values(
            ["side", "partition", "offset"], ascending=[False, True, True], kind="stable"
        )
        out: list[join_logic.Result] = []
        keys = engine.pylist(batch["key"])
        for side, own_key, jk, left, right, ts, part, off in zip(
            batch["side"].tolist(), keys, engine.pylist(batch["jk"]), engine.pylist(batch["lv"]),
            engine.pylist(batch["rv"]), batch["ts"].tolist(), batch["partition"].tolist(),
            batch["offset"].tolist(), strict=True,
        ):  # fmt: skip
            if side == join_logic.RIGHT:
                processor.process(state, (side, jk, right, ts, part, off), out.append)
                continue
            results: list[join_logic.Result] = []
            processor.process(state, (side, jk, left, ts, part, off), results.append)
            out.extend((own_key, lv_, rv_, ts_) for _, lv_, rv_, ts_ in results)
        return state, pd.DataFrame(out, columns=list(_RESULT_COLUMNS))

    rows = engine.run_by_task(union, "task", step, f"key {out_key}, left {lv}, right {rv}, ts bigint")
    value = joiner_column(joiner, default_type=lv)
    return engine.as_record_frame(rows.select("key", value.alias("value"), "ts"))
