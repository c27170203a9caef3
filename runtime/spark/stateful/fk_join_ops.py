"""The foreign-key table-table join on Spark: three stateful steps where Kafka Streams has three
processors and two internal topics (see :mod:`.fk_join_logic` for the semantics).

Why three steps and not the one-step union-with-side-tag of :mod:`.join_ops`: the two tables
meet on the right table's key, which is not the left table's, and a left key re-pointed to
another foreign key moves to another task. So, as in Kafka Streams:

1. **changes** (grouped by left key): each left update with the value it replaces and a version
   (a per-key counter); the foreign key is extracted from both values with the user's logic
   (a Spark expression over ``key`` and ``value``, or a Python function) and the subscription
   messages are derived in SQL (``subscription-registration`` topic);
2. **subscriptions** (grouped by the foreign key's partition of Kafka Streams' repartition topic): the
   messages, unioned with the right table's records by side tag and processed in Kafka
   Streams' order (:func:`join_logic.merge_order`) by :class:`.fk_join_logic.ForeignKeyJoin`;
   its responses go back by left key (``subscription-response`` topic). Where the right table is
   read straight from its partitions, a message waits while the right partition has records at
   the broker beyond the batch (:func:`.frontier.take`): Kafka Streams' task has read the right
   table's records long before the subscription topic brings a message, so a message never
   overtakes an older right update because a micro-batch ended between them;
3. **results** (grouped by the left key's hash): a key's responses in version order, then
   the order their task emitted them, so that a result computed before a re-point (in the old
   foreign key's task) never lands after the result of the re-point (a stale result, which
   Kafka Streams' hash check drops). The joiner then runs on ``(key, left, right)``; a
   response without a result is a tombstone.

All three run in the same micro-batch; state is one pickled value per group (:mod:`.engine`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamapp.runtime.spark.frames import Logic, RecordFrame
from streamapp.runtime.spark.stateful import engine, fk_join_logic, frontier, join_logic, join_ops

__all__ = ["foreign_key_join"]


def _type(df: DataFrame, column: str) -> str:
    return str(df.schema[column].dataType.simpleString())


def _changes(left: RecordFrame) -> DataFrame:
    """Every update of the left table (KTableSource with old values sent): key, new value, old
    value, version, ts, partition, offset. A delete of a key that does not exist changes nothing."""
    rows = engine.input_rows(left)

    def step(key: Any, batch: pd.DataFrame, state: Any) -> tuple[Any, pd.DataFrame]:
        old, version = state if state is not None else (None, 0)
        batch = engine.ordered(batch)
        out: dict[str, list[Any]] = {
            c: [] for c in ("key", "value", "old", "ver", "ts", "partition", "offset")
        }
        columns = (engine.pylist(batch["value"]), batch["ts"].tolist(), batch["partition"].tolist())
        for new, ts, part, offset in zip(*columns, batch["offset"].tolist(), strict=True):
            if new is None and old is None:
                continue
            version += 1
            for column, item in zip(out, (key, new, old, version, ts, part, offset), strict=True):
                out[column].append(item)
            old = new
        return (old, version), pd.DataFrame(out)

    value = _type(rows, "value")
    schema = (
        f"key {_type(rows, 'key')}, value {value}, old {value}, ver bigint, ts bigint, "
        "partition int, offset bigint"
    )
    return engine.run(rows, "key", step, schema)


def _foreign_keys(changes: DataFrame, extractor: Logic, fk_type: str) -> DataFrame:
    """``changes`` with ``old_fk`` and ``new_fk``: the extractor over (key, old) and (key, value)."""
    frame = RecordFrame(changes)
    new_fk = F.when(F.col("value").isNotNull(), frame.evaluate(extractor, default_type=fk_type))
    with_new = changes.withColumn("new_fk", new_fk.cast(fk_type))
    swapped = with_new.withColumnRenamed("value", "new").withColumnRenamed("old", "value")
    old_fk = F.when(
        F.col("value").isNotNull(), RecordFrame(swapped).evaluate(extractor, default_type=fk_type)
    )
    both = swapped.withColumn("old_fk", old_fk.cast(fk_type))
    return both.withColumnRenamed("value", "old").withColumnRenamed("new", "value")


def _messages(with_fks: DataFrame, *, left_join: bool) -> DataFrame:
    """The subscription messages (``fk``, ``instr``) of each update, two at most, in SQL; the same
    decisions as :func:`.fk_join_logic.subscriptions` (whose tests pin them)."""
    new = F.col("value").isNotNull()  # a missing old value has no old foreign key
    old_fk, new_fk = F.col("old_fk"), F.col("new_fk")
    changed = old_fk.isNotNull() & ~old_fk.eqNullSafe(new_fk)

    def message(fk: Column, instruction: Column | int, index: int) -> Column:
        return F.struct(fk.alias("fk"), F.lit(instruction).alias("instr") if isinstance(instruction, int)
                        else instruction.alias("instr"), F.lit(index).alias("idx"))  # fmt: skip

    if left_join:
        first = F.when(changed, message(old_fk, fk_join_logic.DELETE_NO_PROPAGATE, 0))
        second = message(new_fk, fk_join_logic.PROPAGATE_NULL, 1)
    else:
        gone = ~new | new_fk.isNull()
        first = F.when(
            old_fk.isNotNull() & (gone | changed),
            message(
                old_fk,
                F.when(gone, F.lit(fk_join_logic.DELETE_PROPAGATE)).otherwise(
                    F.lit(fk_join_logic.DELETE_NO_PROPAGATE)
                ),
                0,
            ),
        )
        second = F.when(
            new & new_fk.isNotNull(),
            message(
                new_fk,
                F.when(changed, F.lit(fk_join_logic.PROPAGATE_NULL)).otherwise(
                    F.lit(fk_join_logic.PROPAGATE_IF_FOUND)
                ),
                1,
            ),
        )
    exploded = with_fks.select(
        "*", F.explode(F.filter(F.array(first, second), lambda m: m.isNotNull())).alias("m")
    )
    return exploded.select(
        F.col("m.fk").alias("fk"),
        F.col("key").alias("pk"),
        F.col("m.instr").cast("int").alias("instr"),
        F.col("value").alias("lv"),
        F.col("ver"),
        F.col("ts"),
        F.col("partition").cast("int").alias("partition"),
        (F.col("offset") * 2 + F.col("m.idx")).cast("bigint").alias("offset"),
    )


def foreign_key_join(
    left: RecordFrame,
    right: join_ops.Side,
    *,
    extractor: Logic,
    joiner: Logic,
    left_join: bool,
    tasks: engine.Tasks,
    merged: frontier.Frontier | None = None,
) -> RecordFrame:
    """``left.join(right, foreignKeyExtractor, joiner)`` (or ``leftJoin``): the result table's
    changelog, keyed by the left key; a result that goes away is a tombstone. ``merged``: the
    query's frontier, which holds messages back behind a right partition's unread records."""
    changes = _changes(left)
    pk_type, lv_type = _type(changes, "key"), _type(changes, "value")
    fk_type, rv_type = _type(right.frame.df, "key"), _type(right.frame.df, "value")
    messages = _messages(_foreign_keys(changes, extractor, fk_type), left_join=left_join)
    lefts = messages.select(
        F.lit(join_logic.LEFT).alias("side"), "fk", "pk", "instr", "lv", "ver",
        F.lit(None).cast(rv_type).alias("rv"), "ts", "partition", "offset", F.lit("").alias("topic"),
    )  # fmt: skip
    rights = right.frame.df.select(
        F.lit(join_logic.RIGHT).alias("side"),
        F.col("key").cast(fk_type).alias("fk"),
        F.lit(None).cast(pk_type).alias("pk"),
        F.lit(None).cast("int").alias("instr"),
        F.lit(None).cast(lv_type).alias("lv"),
        F.lit(None).cast("bigint").alias("ver"),
        F.col("value").cast(rv_type).alias("rv"),
        F.unix_millis("timestamp").alias("ts"),
        F.coalesce(F.col("partition"), F.lit(0)).cast("int").alias("partition"),
        (F.coalesce(F.col("offset"), F.lit(0)) * 2).cast("bigint").alias("offset"),
        F.coalesce(F.col("topic"), F.lit("")).alias("topic"),
    ).where(F.col("fk").isNotNull())
    union = lefts.unionByName(rights)
    union = union.withColumn("task", engine.hash_task(union, "fk", tasks))
    waits = merged if right.partitioned else None
    if waits is not None:  # the frontier's columns: a message's "partition" is its left one's
        topic = F.when(F.col("side") == join_logic.RIGHT, F.col("topic")).otherwise(F.lit(""))
        union = union.withColumn("topic", topic).withColumns(
            {"sub": F.xxhash64("topic", "partition"), "rank": F.col("side")}
        )
    processor = fk_join_logic.ForeignKeyJoin(left_join=left_join)

    def subscribe(_task: Any, batch: pd.DataFrame, state: Any) -> tuple[Any, pd.DataFrame]:
        state = state if state is not None else processor.new_state()
        if waits is not None:
            held = state.setdefault("frontier", {"held": None, "memory": {}})
            batch, held["held"] = frontier.take(
                batch, held["held"], held["memory"], lambda t, p: t == "" or waits.caught_up(t, p)
            )
        sides = batch["side"].tolist()
        payloads = [
            rv if side == join_logic.RIGHT else (int(instr), pk, lv, int(ver))
            for side, rv, instr, pk, lv, ver in zip(
                sides, engine.pylist(batch["rv"]), engine.pylist(batch["instr"]), engine.pylist(batch["pk"]),
                engine.pylist(batch["lv"]), engine.pylist(batch["ver"]), strict=True,
            )
        ]  # fmt: skip
        records = zip(
            sides, engine.pylist(batch["fk"]), payloads, batch["ts"].tolist(), batch["partition"].tolist(),
            batch["offset"].tolist(), strict=True,
        )  # fmt: skip
        out: list[fk_join_logic.Response] = []
        ordered = records if waits is not None else join_logic.merge_order(records, first=join_logic.LEFT)
        for record in ordered:
            processor.process(state, record, out.append)
        frame = pd.DataFrame(out, columns=["key", "ver", "left", "right", "ts"])
        frame["seq"] = range(len(frame))
        return state, frame

    responses = engine.run(
        union,
        "task",
        subscribe,
        f"key {pk_type}, ver bigint, left {lv_type}, right {rv_type}, ts bigint, seq bigint",
    )
    responses = responses.withColumn("task", engine.hash_task(responses, "key", tasks))

    def results(_task: Any, batch: pd.DataFrame, state: Any) -> tuple[Any, pd.DataFrame]:
        rows = zip(
            engine.pylist(batch["key"]), batch["ver"].tolist(), engine.pylist(batch["left"]),
            engine.pylist(batch["right"]), batch["ts"].tolist(), strict=True,
        )  # fmt: skip
        latest: dict[Any, int] = state if state is not None else {}
        ordered = fk_join_logic.resolve(zip(rows, batch["seq"].tolist(), strict=True), latest)
        out = [(key, lv, rv, ts) for key, _, lv, rv, ts in ordered]
        return latest, pd.DataFrame(out, columns=["key", "left", "right", "ts"])

    rows = engine.run(
        responses, "task", results, f"key {pk_type}, left {lv_type}, right {rv_type}, ts bigint"
    )
    value = join_ops.joiner_column(joiner, default_type=lv_type)
    value = F.when(F.col("left").isNotNull() | F.col("right").isNotNull(), value)
    return engine.as_record_frame(rows.select("key", value.alias("value"), "ts"))
