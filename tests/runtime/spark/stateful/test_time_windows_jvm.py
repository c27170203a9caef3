"""The JVM's tumbling/hopping aggregation (state per key and window) against the Python engine.

``TimeWindowAggregation.java`` must give exactly what ``windows.py`` gives — the engine whose
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

    from streamapp.runtime.spark.stateful import aggregation, ops

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
            frame, spec, aggregator, emit=emit, value=value, late_counter=counter, tasks=tasks, jvm=jvm
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
    ("functions", "kind", "emit", "tasks", "task_keys"),
    [
        (("count",), "tumbling", "updates", None, "spread"),
        (("sum", "avg", "min", "max", "latest", "collect_list"), "hopping", "final", 2, "spread"),
        # A checkpoint whose state is keyed by task number (created before the spread keys).
        (("count",), "tumbling", "updates", None, "task"),
    ],
)
def test_the_jvm_gives_the_python_engines_rows_for_every_declarative_aggregator(
    harness: Harness, functions: tuple[str, ...], kind: str, emit: str, tasks: int | None, task_keys: str
) -> None:  # fmt: skip
    from streamapp.runtime.spark import checkpoints

    harness.spark.conf.set(checkpoints.TASK_KEYS_CONF, task_keys)
    try:
        _compare(harness, functions, kind, emit, tasks)
    finally:
        harness.spark.conf.set(checkpoints.TASK_KEYS_CONF, checkpoints.SPREAD)


def _compare(harness: Harness, functions: tuple[str, ...], kind: str, emit: str, tasks: int | None) -> None:
    from streamapp.runtime.spark.stateful.windows import Windows

    spec = (
        Windows.tumbling(20 * S, grace=10 * S)
        if kind == "tumbling"
        else Windows.hopping(20 * S, 8 * S, 10 * S)
    )
    records = _records(seed=zlib.crc32(f"{kind} {emit}".encode()))
    split = [17] * 7 + [1]  # state carried over 8 micro-batches
    python, late_python = _run(
        harness, records, split, functions, jvm=False, spec=spec, emit=emit, tasks=tasks
    )
    jvm, late_jvm = _run(harness, records, split, functions, jvm=True, spec=spec, emit=emit, tasks=tasks)
    assert jvm == python, ([r for r in jvm if r not in python][:5], [r for r in python if r not in jvm][:5])
    assert late_jvm == late_python > 0
    emitted = {r[1] for r in python if r[2] == ("final" if emit == "final" else "update")}
    assert emitted == set(functions)
