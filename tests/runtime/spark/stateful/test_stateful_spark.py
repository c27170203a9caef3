"""Stateful operations on local Spark over file topics: aggregates, windows, KTables."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from pyspark import cloudpickle
from stateful_harness import Harness, table_view

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

T0 = 28_333_333 * 60_000  # 1_699_999_980_000: a multiple of 60 s, so windows align with it


def concat(agg: str, value: str) -> str:
    return f"{agg}+{value}"


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _labelled(label: str, df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    cols = [c for c in df.columns if c not in ("value", "headers", "topic")]
    return df.select(F.lit(label).alias("op"), *cols, F.col("value").cast("string").alias("value"))


def test_grouped_aggregations_emit_table_updates_with_the_max_timestamp(harness: Harness) -> None:
    from streamapp.runtime.spark.stateful import aggregation, ops

    records = [
        ("a", "x", T0 + 5),
        ("b", "yy", T0 + 1),
        ("a", "zzz", T0 + 2),
        ("a", None, T0 + 9),
        ("b", "w", T0 + 3),
    ]
    rows: list[dict[str, Any]] = []
    for split in ([5], [2, 3]):
        frame = harness.frame(records, split=split)
        plan = (
            _labelled("count", ops.aggregate(frame, aggregation.count()).df)
            .unionByName(
                _labelled("reduce", ops.aggregate(frame, aggregation.reduce(concat, value_type="string")).df)
            )
            .unionByName(
                _labelled(
                    "sum", ops.aggregate(frame, aggregation.declarative("sum"), value="length(value)").df
                )
            )
        )
        rows = harness.drain(plan)
        view = table_view(rows, lambda r: (r["op"], r["key"]))
        stamps = {(r["op"], r["key"]): r["timestamp"] for r in rows}
        # Null values are skipped (Kafka Streams); the update carries the newest contributing timestamp.
        assert view == {
            ("count", "a"): "2", ("count", "b"): "2",
            ("reduce", "a"): "x+zzz", ("reduce", "b"): "yy+w",
            ("sum", "a"): "4", ("sum", "b"): "3",
        }  # fmt: skip
        assert stamps[("count", "a")] == T0 + 5 and stamps[("count", "b")] == T0 + 3
    assert len([r for r in rows if r["op"] == "count"]) == 4  # one update per key and micro-batch


def _windowed(
    harness: Harness, records: list[tuple[Any, ...]], split: list[int], specs: dict[str, Any]
) -> Any:
    from streamapp.runtime.spark.stateful import aggregation, ops

    counter = harness.spark.sparkContext.accumulator(0)
    frame = harness.frame(records, split=split)
    plan = None
    for label, (spec, emit) in specs.items():
        out = ops.windowed_aggregate(frame, spec, aggregation.count(), emit=emit, late_counter=counter)
        labelled = _labelled(label, out.df)
        plan = labelled if plan is None else plan.unionByName(labelled)
    rows = harness.drain(plan)
    return rows, counter.value


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    # The plans union several aggregations, so values travel as text: counts back to ints.
    rows = [r | {"value": None if r["value"] is None else int(r["value"])} for r in rows]

    def rel(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["op"], r["key"], r["window_start"] - T0, r["window_end"] - T0)

    return {
        "table": table_view([r for r in rows if r["kind"] == "update"], rel),
        "finals": sorted((*rel(r), r["value"], r["ts"] - T0) for r in rows if r["kind"] == "final"),
        "late": sorted((*rel(r), r["ts"] - T0) for r in rows if r["kind"] == "late"),
    }


S = 1000


def test_tumbling_and_hopping_lateness_per_record_and_both_emits_independent_of_batches(
    harness: Harness,
) -> None:
    from streamapp.runtime.spark.stateful.windows import Windows

    tumbling, hopping = Windows.tumbling(60 * S, grace=10 * S), Windows.hopping(60 * S, 30 * S, grace=10 * S)
    specs = {
        "tu": (tumbling, "updates"),
        "tf": (tumbling, "final"),
        "hu": (hopping, "updates"),
        "hf": (hopping, "final"),
    }
    records = [
        ("a", "v", T0 + 10 * S),
        ("b", "v", T0 + 50 * S),
        ("a", "v", T0 + 65 * S),  # stream time 65 s
        ("a", "v", T0 + 55 * S),  # late, but [0,60) closes at 70 s: inside grace, counted
        ("a", "v", T0 + 75 * S),  # stream time 75 s: [0,60) is closed
        ("b", "v", T0 + 59 * S),  # beyond grace for [0,60) and [-30,30)... dropped; [30,90) counts it
        ("a", "v", T0 + 200 * S),  # closes everything before [150,210)/[180,240)
    ]
    runs = []
    for split in ([7], [1] * 7, [3, 4], [4, 3]):
        rows, late_count = _windowed(harness, records, split, specs)
        runs.append(_summary(rows))
        assert late_count == len(runs[-1]["late"])
    assert all(run == runs[0] for run in runs[1:]), runs
    result = runs[0]
    assert result["late"] == [("hf", "b", 0, 60 * S, 59 * S), ("hu", "b", 0, 60 * S, 59 * S),
                              ("tf", "b", 0, 60 * S, 59 * S), ("tu", "b", 0, 60 * S, 59 * S)]  # fmt: skip
    tumbling_finals = [f for f in result["finals"] if f[0] == "tf"]
    assert tumbling_finals == [
        ("tf", "a", 0, 60 * S, 2, 55 * S),
        ("tf", "a", 60 * S, 120 * S, 2, 75 * S),
        ("tf", "b", 0, 60 * S, 1, 50 * S),
    ]  # exactly one per closed window; [180,240) is still open
    assert result["table"][("tu", "a", 0, 60 * S)] == 2
    assert result["table"][("hu", "b", 30 * S, 90 * S)] == 2
    finals = {f[:4]: f[4] for f in result["finals"] if f[0] == "hf"}
    assert finals == {
        ("hf", k, s, e): v
        for (op, k, s, e), v in result["table"].items()
        if op == "hu" and e + 10 * S <= 200 * S
    }


def test_sliding_and_session_windows_with_grace_and_a_bridging_record(harness: Harness) -> None:
    from streamapp.runtime.spark.stateful.windows import Windows

    sliding, session = Windows.sliding(10 * S, grace=5 * S), Windows.session(15 * S, grace=5 * S)
    specs = {
        "su": (sliding, "updates"),
        "sf": (sliding, "final"),
        "xu": (session, "updates"),
        "xf": (session, "final"),
    }
    records = [
        ("a", "v", T0 + 0 * S),
        ("a", "v", T0 + 25 * S),  # a second session; [0,0] closes (0 < 25 - 5 - 15)
        ("a", "v", T0 + 12 * S),  # out of order but in time: merges [25,25] into [12,25], not the
        # closed [0,0] (Kafka Streams' store, retention gap + grace, no longer returns it)
        ("a", "v", T0 + 60 * S),  # stream time 60 s: [12,25] closes (25 < 60 - 5 - 15)
        ("a", "v", T0 + 20 * S),  # in no session still kept, and its own closed: dropped
        ("a", "v", T0 + 100 * S),
    ]
    runs = []
    for split in ([6], [1] * 6, [2, 4]):
        rows, late_count = _windowed(harness, records, split, specs)
        runs.append(_summary(rows))
        assert late_count == len(runs[-1]["late"])
    assert all(run == runs[0] for run in runs[1:]), runs
    result = runs[0]
    sessions = {k[2:]: v for k, v in result["table"].items() if k[0] == "xu"}
    # The merged-away session [25,25] was tombstoned.
    assert sessions == {(0, 0): 1, (12 * S, 25 * S): 2, (60 * S, 60 * S): 1, (100 * S, 100 * S): 1}
    assert [f for f in result["finals"] if f[0] == "xf"] == [
        ("xf", "a", 0, 0, 1, 0),
        ("xf", "a", 12 * S, 25 * S, 2, 25 * S),
        ("xf", "a", 60 * S, 60 * S, 1, 60 * S),
    ]
    # Sliding windows [t - 10 s, t]: 12 s and 20 s are beyond grace for their windows.
    sliding_table = {k[2:]: v for k, v in result["table"].items() if k[0] == "su"}
    assert sliding_table == {(-10 * S, 0): 1, (15 * S, 25 * S): 1, (50 * S, 60 * S): 1, (90 * S, 100 * S): 1}
    assert [f[2:] for f in result["finals"] if f[0] == "sf"] == [
        (-10 * S, 0, 1, 0), (15 * S, 25 * S, 1, 25 * S), (50 * S, 60 * S, 1, 60 * S),
    ]  # fmt: skip
    assert result["late"] == [
        ("sf", "a", 2 * S, 12 * S, 12 * S), ("sf", "a", 10 * S, 20 * S, 20 * S),
        ("su", "a", 2 * S, 12 * S, 12 * S), ("su", "a", 10 * S, 20 * S, 20 * S),
        ("xf", "a", 20 * S, 20 * S, 20 * S), ("xu", "a", 20 * S, 20 * S, 20 * S),
    ]  # fmt: skip
