"""The JVM's windowed aggregations (state per key and window) against the Python engine.

``TimeWindowAggregation.java`` (tumbling, hopping), ``SlidingWindowAggregation.java`` and
``SessionWindowAggregation.java`` must give exactly what ``windows.py`` gives — the engine whose
semantics the conformance suite checks against Kafka Streams — for every declarative aggregator,
both emit modes, out-of-order records around every grace limit, several input partitions, a key
change (tasks fed by several partitions: the arrival-order merge), whatever the micro-batch
boundaries. Each case runs both implementations over the same records and compares every row.
"""

from __future__ import annotations

import random
import zlib
from typing import Any

import pytest
from stateful_harness import Harness

T0 = 28_333_333 * 60_000
S = 1000


def _records(seed: int, count: int = 120) -> list[tuple[Any, ...]]:
    """Keys a–e on 3 partitions, mostly in order, some records 5–40 s back (within and beyond grace),
    a few values null (count counts them, the others skip them)."""
    rng = random.Random(seed)
    t, out = 0, []
    for _ in range(count):
        t += rng.choice([0, 250, 1000, 2500, 4000])
        ts = t - rng.choice([0, 0, 0, 5 * S, 9 * S, 10 * S, 12 * S, 40 * S]) if rng.random() < 0.3 else t
        key = rng.choice("abcde")
        value = None if rng.random() < 0.05 else rng.choice(["x", "yy", "zzz", "wwww", "b", "ccccc"])
        out.append((key, value, T0 + max(0, ts), {"a": 0, "b": 1, "c": 2, "d": 0, "e": 1}[key]))
    return out


def _run(
    harness: Harness, records: list[tuple[Any, ...]], split: list[int], functions: tuple[str, ...], *,
    jvm: bool, spec: Any, emit: str, tasks: int | None,
) -> tuple[list[tuple[Any, ...]], int]:  # fmt: skip
    """Every declarative aggregator over the records in one query; rows as comparable tuples."""
    from pyspark.sql import functions as F

    from streamapp.runtime.spark.stateful import aggregation, engine, ops

    spark = harness.spark
    counter: Any = ops.JvmCounter(spark, "late") if jvm else spark.sparkContext.accumulator(0)
    frame = harness.frame(records, split=split)
    plan = None
    for fn in functions:
        text = fn in ("min", "max", "latest", "collect_list")
        value = None if fn == "count" else "value" if text else "length(value)"
        aggregator = (
            aggregation.count() if fn == "count" else aggregation.declarative(fn, "string" if text else "int")
        )
        out = ops.windowed_aggregate(
            frame,
            spec,
            aggregator,
            emit=emit,
            value=value,
            late_counter=counter,
            jvm=jvm,
            tasks=None if tasks is None else engine.Tasks(tasks),
        ).df
        out = out.select(F.lit(fn).alias("fn"), *[c for c in out.columns if c != "value"],
                         F.col("value").cast("string").alias("value"))  # fmt: skip
        plan = out if plan is None else plan.unionByName(out)
    assert plan is not None
    rows = harness.drain(plan)
    return sorted(
        (r["_batch"], r["fn"], r["kind"], r["key"], r["window_start"] - T0, r["window_end"] - T0, r["value"],
         r["ts"] - T0, r["partition"], r["offset"])
        for r in rows
    ), counter.value  # fmt: skip


@pytest.mark.parametrize(
    ("functions", "kind", "emit", "tasks"),
    [
        (("count",), "tumbling", "updates", None),
        (("sum", "avg", "min", "max", "latest", "collect_list"), "hopping", "final", 2),
        (("count",), "session", "updates", None),
        (("sum", "avg", "min", "max", "latest"), "session", "final", 2),
        (("count", "latest"), "session", "final", None),
        (("sum", "max"), "session", "updates", 2),
        (("count",), "sliding", "updates", None),
        (("sum", "avg", "min", "max", "latest", "collect_list"), "sliding", "final", 2),
        (("count", "collect_list"), "sliding", "updates", 2),
    ],
)
def test_the_jvm_gives_the_python_engines_rows_for_every_declarative_aggregator(
    harness: Harness, functions: tuple[str, ...], kind: str, emit: str, tasks: int | None
) -> None:
    _compare(harness, functions, kind, emit, tasks)


def _compare(harness: Harness, functions: tuple[str, ...], kind: str, emit: str, tasks: int | None) -> None:
    from streamapp.runtime.spark.stateful.windows import Windows

    spec = {
        "tumbling": Windows.tumbling(20 * S, grace=10 * S),
        "hopping": Windows.hopping(20 * S, 8 * S, 10 * S),
        # Records 5-40 s back merge sessions, fall within grace or are late; sessions end and are
        # forgotten (kept 10 + 2 * 8 s) many times over the records' 3 minutes.
        "session": Windows.session(8 * S, grace=10 * S),
        # Windows found for 2 * 10 + 5 s of starts, closed 15 s after their start.
        "sliding": Windows.sliding(10 * S, grace=5 * S),
    }[kind]
    seed = f"{kind} {emit}" + (f" {functions}" if kind in ("session", "sliding") else "")
    records = _records(seed=zlib.crc32(seed.encode()))
    split = [17] * 7 + [1]  # state carried over 8 micro-batches
    if kind in ("session", "sliding"):
        # A batch whose stream time moves past many buckets of session ends or window starts (they
        # are read, closed and forgotten together).
        split = [17] * 3 + [60, 9]
    python, late_python = _run(
        harness, records, split, functions, jvm=False, spec=spec, emit=emit, tasks=tasks
    )
    jvm, late_jvm = _run(harness, records, split, functions, jvm=True, spec=spec, emit=emit, tasks=tasks)
    assert jvm == python, ([r for r in jvm if r not in python][:5], [r for r in python if r not in jvm][:5])
    assert late_jvm == late_python > 0
    emitted = {r[1] for r in python if r[2] == ("final" if emit == "final" else "update")}
    assert emitted == set(functions)
    if kind == "session" and emit == "updates":
        assert any(r[2] == "update" and r[6] is None for r in python)  # merged sessions' tombstones


@pytest.mark.parametrize("split", [[4], [2, 2], [1, 1, 1, 1]])
def test_a_closed_session_is_never_merged_whatever_the_batches(harness: Harness, split: list[int]) -> None:
    """Emit final per record: b's record closes a's session (stream time 19 s passes its end 0 +
    grace 10 s + gap 8 s); a's out-of-order record at 5 s is still in time, but the session store
    (retention gap + grace = 18 s) no longer returns [0, 0] (it ends before 19 - 18 + 1 s), so the
    record opens [5, 5], as in Kafka Streams. Each session is emitted once, wherever the
    micro-batches end, by both engines."""
    from streamapp.runtime.spark.stateful.windows import Windows

    records = [
        ("a", "x", T0, 0),
        ("b", "x", T0 + 19 * S, 0),
        ("a", "x", T0 + 5 * S, 0),
        ("c", "x", T0 + 60 * S, 0),
    ]
    spec = Windows.session(8 * S, grace=10 * S)
    rows = {}
    for jvm in (False, True):
        out, _ = _run(harness, records, split, ("count",), jvm=jvm, spec=spec, emit="final", tasks=None)
        rows[jvm] = [(r[3], r[4], r[5], r[6]) for r in out if r[2] == "final"]  # key, start, end, count
    assert sorted(rows[False]) == [("a", 0, 0, "1"), ("a", 5 * S, 5 * S, "1"), ("b", 19 * S, 19 * S, "1")]
    assert rows[True] == rows[False]


@pytest.mark.parametrize("split", [[4], [1, 1, 1, 1]])
def test_a_sliding_window_beyond_the_tasks_retention_is_not_found(harness: Harness, split: list[int]) -> None:
    """Kafka Streams finds a sliding window only while its start is within 2 d + grace of the
    latest start the task wrote, whichever key wrote it: b's records move the latest start to 40 s,
    so a's window [10, 20] is not found by a's record at 28 s, whose left window [18, 28] is then
    new and already closed (one late contribution, not two: without the bound, the window before
    it would also make a's previous record's right window [21, 31], closed as well)."""
    from streamapp.runtime.spark.stateful.windows import Windows

    records = [("a", "x", T0 + 20 * S, 0), ("b", "x", T0 + 39 * S, 0), ("b", "x", T0 + 40 * S, 0)]
    records.append(("a", "x", T0 + 28 * S, 0))
    spec = Windows.sliding(10 * S, grace=5 * S)
    rows, late = {}, {}
    for jvm in (False, True):
        out, late[jvm] = _run(
            harness, records, split, ("count",), jvm=jvm, spec=spec, emit="updates", tasks=None
        )
        rows[jvm] = [(r[2], r[3], r[4], r[5]) for r in out]  # kind, key, start, end
    assert [r for r in rows[False] if r[0] == "late"] == [("late", "a", 18 * S, 28 * S)]
    assert late[False] == 1
    assert (rows[True], late[True]) == (rows[False], late[False])


@pytest.mark.parametrize(
    ("serde", "keys", "order"),
    [
        # Long keys as big-endian two's complement: 9 before 10 (their text put "10" first), a
        # negative key last.
        ("long", [10, -1, 9, 2**40], [9, 10, 2**40, -1]),
        # Text keys as UTF-8: U+FFFD (EF BF BD) before U+1F600 (F0 ...), whose UTF-16 comes first.
        ("string", ["b", "\U0001f600", "z", "\ufffd", "a"], ["a", "b", "z", "\ufffd", "\U0001f600"]),
    ],
)
def test_windows_closing_together_emit_in_the_order_of_their_serialised_keys(
    harness: Harness, serde: str, keys: list[Any], order: list[Any]
) -> None:
    """Kafka Streams emits the final results of windows that close on one record in the order of
    their serialised keys, unsigned (its window store's and suppression buffer's order), on both
    engines. The JVM ordered keys by their text before: "10" before "9", and a bytes key (a text
    key's state) by its identity hash."""
    from pyspark.sql import functions as F

    from streamapp.runtime.spark.stateful import aggregation, ops
    from streamapp.runtime.spark.stateful.windows import Windows

    records = [(k, "x", T0 + i * S, 0) for i, k in enumerate(keys)] + [(keys[0], "x", T0 + 60 * S, 0)]
    spark = harness.spark
    for jvm in (False, True):
        counter: Any = ops.JvmCounter(spark, "late") if jvm else spark.sparkContext.accumulator(0)
        out = ops.windowed_aggregate(
            harness.frame(records, key_serde=serde), Windows.tumbling(20 * S, grace=10 * S),
            aggregation.count(), emit="final", late_counter=counter, jvm=jvm,
        ).df  # fmt: skip
        rows = harness.drain(out.where(F.col("kind") == "final"))
        assert [r["key"] for r in rows] == order, ("jvm" if jvm else "python", rows)
        assert [r["value"] for r in rows] == [1] * len(keys)


@pytest.mark.parametrize(
    ("emit", "order"),
    [
        # Emit-final reads a time-ordered store: end, start, key.
        ("final", [(10, 0), (2**40, 500), (9, 1000), (-1, 1000)]),
        # Suppression's buffer: end, then the serialised windowed key (the key before its start).
        ("suppress", [(9, 1000), (10, 0), (2**40, 500), (-1, 1000)]),
    ],
)
def test_sessions_closing_together_emit_in_kafka_streams_order(
    harness: Harness, emit: str, order: list[tuple[int, int]]
) -> None:
    """Sessions that end together and close on one record: emit final orders them by start, then
    key; suppress by key, then start (the conformance suite's keyOrderSession* scenarios found
    it), on both engines."""
    from pyspark.sql import functions as F

    from streamapp.runtime.spark.stateful import aggregation, ops
    from streamapp.runtime.spark.stateful.windows import Windows

    starts = {10: 0, 9: 1000, -1: 1000, 2**40: 500}
    records = [(k, "x", T0 + t, 0) for k, t in starts.items()] + [(k, "x", T0 + 2 * S, 0) for k in starts]
    records.append((10, "x", T0 + 60 * S, 0))  # closes them all
    spark = harness.spark
    for jvm in (False, True):
        counter: Any = ops.JvmCounter(spark, "late") if jvm else spark.sparkContext.accumulator(0)
        out = ops.windowed_aggregate(
            harness.frame(records, key_serde="long"), Windows.session(3 * S, grace=5 * S),
            aggregation.count(), emit=emit, late_counter=counter, jvm=jvm,
        ).df  # fmt: skip
        rows = harness.drain(out.where(F.col("kind") == "final"))
        assert [(r["key"], r["window_start"] - T0) for r in rows] == order, ("jvm" if jvm else "python", rows)
        assert {r["window_end"] - T0 for r in rows} == {2 * S}


@pytest.mark.parametrize("kind", ["session", "sliding"])
def test_state_forgets_what_no_record_can_reach_any_more(harness: Harness, kind: str) -> None:
    """60 keys' windows, then each task's stream time 10 minutes on: the task's state keeps only
    the new keys' windows, and the listing of keys by time bucket only their buckets."""
    from streamapp.runtime.spark.stateful import aggregation, ops
    from streamapp.runtime.spark.stateful.windows import Windows

    records = [(f"k{i}", "x", T0 + i * 100, i % 3) for i in range(60)]
    records += [(f"z{p}", "x", T0 + 600 * S + p, p) for p in range(3)]
    spec = Windows.session(8 * S, grace=10 * S) if kind == "session" else Windows.sliding(10 * S, grace=5 * S)
    spark = harness.spark
    out = ops.windowed_aggregate(
        harness.frame(records, split=[30, 30, 3]), spec, aggregation.count(), emit="updates",
        late_counter=ops.JvmCounter(spark, "late"), jvm=True,
    ).df  # fmt: skip
    harness.drain(out)
    # Spark's state data source: the map states' entries (user_map_key, user_map_value) per task.
    state = spark.read.format("statestore").option("path", harness.checkpoint)
    windows = state.option("stateVarName", "sessions" if kind == "session" else "windows").load().collect()
    assert sorted(r.user_map_key.key for r in windows) == [b"z0", b"z1", b"z2"]
    chunks = state.option("stateVarName", "ends" if kind == "session" else "starts").load().collect()
    assert sorted(k for r in chunks for k in r.user_map_value.keys) == [b"z0", b"z1", b"z2"]
