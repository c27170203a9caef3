"""Kafka Streams' window rules, record by record, without Spark (the fold the Spark steps run)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from streamapp.runtime.spark.stateful import aggregation, windows
from streamapp.runtime.spark.stateful.windows import Windows

T0 = 1_700_000_000_000  # a multiple of 10 s: windows below start at T0


def _run(spec: Windows, emit: str, stamps: list[int], split: list[int] | None = None) -> list[Any]:
    """Run records (key 'a' unless a stamp is negative-coded) through ``process`` in batches."""
    state = windows.new_state()
    out: list[Any] = []
    records = [("a", 1, T0 + t, i) for i, t in enumerate(stamps)]
    sizes = split or [len(records)]
    pos = 0
    for size in sizes:
        chunk = records[pos : pos + size]
        pos += size
        now = state["t"]
        batch = []
        for key, value, ts, offset in chunk:
            now = ts if now is None else max(now, ts)
            batch.append((key, value, ts, now, 0, offset))
        out += windows.process(spec, aggregation.count(), emit, state, batch)
    return out


def _table(out: list[Any]) -> dict[tuple[int, int], Any]:
    view: dict[tuple[int, int], Any] = {}
    for kind, _key, start, end, value, *_ in out:
        if kind in ("update", "final"):
            view[start - T0, end - T0] = value
    return {w: v for w, v in view.items() if v is not None}


def _late(out: list[Any]) -> list[tuple[int, int, int]]:
    return [(s - T0, e - T0, ts - T0) for kind, _k, s, e, _v, ts, *_ in out if kind == "late"]


def test_tumbling_late_inside_grace_counts_beyond_grace_drops() -> None:
    spec = Windows.tumbling(10_000, grace=5_000)
    # 12 s opens [10,20); 4 s is late by 8 s but [0,10) closes only at 15 s: counted.
    # 16 s moves stream time past 15 s; then 9 s is beyond grace: dropped and reported.
    out = _run(spec, "updates", [1_000, 12_000, 4_000, 16_000, 9_000])
    assert _table(out) == {(0, 10_000): 2, (10_000, 20_000): 2}
    assert _late(out) == [(0, 10_000, 9_000)]


def test_hopping_lateness_is_decided_per_window() -> None:
    spec = Windows.hopping(10_000, 5_000, grace=0)
    out = _run(spec, "updates", [7_000, 12_000, 8_000])
    # 8 s belongs to [0,10) (closed at 10 s: dropped) and [5,15) (open: counted).
    assert _late(out) == [(0, 10_000, 8_000)]
    assert _table(out) == {(0, 10_000): 1, (5_000, 15_000): 3, (10_000, 20_000): 1}


def test_emit_final_emits_exactly_one_result_per_window_after_close() -> None:
    spec = Windows.tumbling(10_000, grace=2_000)
    out = _run(spec, "final", [1_000, 3_000, 11_000, 5_000, 12_500, 30_000])
    finals = [(s - T0, v, ts - T0) for kind, _k, s, _e, v, ts, *_ in out if kind == "final"]
    assert finals == [(0, 3, 5_000), (10_000, 2, 12_500)]  # [30,40) is still open
    assert not [o for o in out if o[0] == "update"]


def test_sliding_windows_follow_record_timestamps() -> None:
    spec = Windows.sliding(5_000, grace=0)
    out = _run(spec, "updates", [10_000, 13_000, 20_000, 3_000])
    assert _table(out) == {
        (5_000, 10_000): 1,  # left window of 10 s
        (8_000, 13_000): 2,  # left window of 13 s
        (10_001, 15_001): 1,  # right window of 10 s, created when 13 s arrived
        (15_000, 20_000): 1,
    }
    assert _late(out) == [(-2_000, 3_000, 3_000)]


def test_a_late_sliding_record_counts_each_closed_window_kafka_streams_would_update() -> None:
    """16.5 s arrives at stream time 21 s (grace 0): its left window [11.5, 16.5] has closed, and
    so has the right window of 14 s ([14.001, 19.001]) that Kafka Streams would create for it —
    two dropped-records, as KStreamSlidingWindowAggregate counts (the conformance suite's
    slidingUpdates found 33 vs 35 when only the record's own windows were counted)."""
    spec = Windows.sliding(5_000, grace=0)
    out = _run(spec, "updates", [10_000, 14_000, 21_000, 16_500])
    assert sorted(_late(out)) == [(11_500, 16_500, 16_500), (14_001, 19_001, 16_500)]
    # It still joins the window that is open, 21 s's left window, and opens its own right one.
    assert _table(out)[16_000, 21_000] == 2 and _table(out)[16_501, 21_501] == 1


def test_session_merges_when_a_bridging_record_arrives() -> None:
    spec = Windows.session(6_000, grace=10_000)
    out = _run(spec, "updates", [1_000, 12_000, 6_000, 40_000, 2_000])
    # 6 s bridges [1,1] and [12,12] into [1,12]; both old sessions get tombstones.
    tombstones = [(s - T0, e - T0) for kind, _k, s, e, v, *_ in out if kind == "update" and v is None]
    assert tombstones == [(1_000, 1_000), (12_000, 12_000)]
    assert _table(out) == {(1_000, 12_000): 3, (40_000, 40_000): 1}
    # 40 s closed [1,12] (12 < 40 - 10 - 6) and, a gap later, evicted it: 2 s is a late session.
    assert _late(out) == [(2_000, 2_000, 2_000)]


@pytest.mark.parametrize("emit", windows.EMITS)
def test_a_session_past_the_store_retention_does_not_merge(emit: str) -> None:
    # Kafka Streams' session store keeps gap + grace = 2 s: after 22.5 s, a fetch skips sessions
    # ending before 22.5 - 2 + 0.001 s. [20, 20] is one of them: 20.75 s (in time: its session
    # ends after 22.5 - 0 - 2) merges [22.5, 22.5] only; [20.6, 20.6] (0.1 s later) still merges.
    # 40 s closes them all (emit final).
    spec = Windows.session(2_000, grace=0)
    out = _run(spec, emit, [20_000, 22_500, 20_750, 40_000])
    assert _table(out).items() - {((40_000, 40_000), 1)} == {((20_000, 20_000), 1), ((20_750, 22_500), 2)}
    kept = _run(spec, emit, [20_600, 22_500, 20_750, 40_000])
    assert _table(kept).items() - {((40_000, 40_000), 1)} == {((20_600, 22_500), 3)}


def test_suppression_emits_a_session_when_the_stream_time_reaches_its_close_and_again_if_remade() -> None:
    # Gap 3 s, grace 5 s: 8 s closes [0, 0] for suppression (0 + 5 + 3), not yet for emit final,
    # and the store no longer returns [0, 0] to the last record, whose new [0, 0] replaces it:
    # emitted again, as Kafka Streams' buffer does (fuzz seeds 10797, 10839).
    spec = Windows.session(3_000, grace=5_000)
    finals = {}
    for emit in ("suppress", "final"):
        out = _run(spec, emit, [0, 0, 8_000, 0])
        finals[emit] = [(s - T0, e - T0, v) for kind, _k, s, e, v, *_ in out if kind == "final"]
    assert finals == {"suppress": [(0, 0, 2), (0, 0, 1)], "final": []}


@pytest.mark.parametrize(
    "spec",
    [
        Windows.tumbling(10_000, grace=3_000),
        Windows.hopping(10_000, 4_000, grace=3_000),
        Windows.sliding(6_000, grace=3_000),
        Windows.session(4_000, grace=3_000),
    ],
    ids=lambda s: s.kind,
)
@pytest.mark.parametrize("emit", windows.EMITS)
def test_results_do_not_depend_on_batch_boundaries(spec: Windows, emit: str) -> None:
    stamps = [1_000, 9_000, 4_000, 15_000, 2_000, 11_000, 26_000, 14_000, 18_000, 40_000, 21_000, 60_000]
    runs = []
    for split in ([len(stamps)], [1] * len(stamps), [5, 7], [3, 4, 5]):
        out = _run(spec, emit, stamps, split)
        finals = sorted(o[:6] for o in out if o[0] == "final")
        runs.append((_table(out), sorted(_late(out)), finals))
    assert all(run == runs[0] for run in runs[1:])
    assert runs[0][1], "the input has records beyond grace"


def test_declarative_aggregators() -> None:
    values = [(1, 5), (3, 2), (2, 9)]
    folded = {
        fn: (agg := aggregation.declarative(fn)).result(agg.fold("k", values))
        for fn in aggregation.DECLARATIVE
    }
    assert folded == {
        "count": 3,
        "sum": 16,
        "min": 2,
        "max": 9,
        "avg": 16 / 3,
        "latest": 2,
        "collect_list": [5, 2, 9],
    }
    reduce = aggregation.reduce(lambda a, b: a * b, value_type="bigint")
    assert reduce.fold("k", values) == 90
    assert list(itertools.islice(Windows.hopping(10, 5).starts(12), 5)) == [5, 10]


def test_arrival_order_merges_source_partitions_by_head_timestamp() -> None:
    """A task fed by two source partitions (a merge, a cogroup): each in offset order, the lower
    head timestamp next — Kafka Streams' PartitionGroup — whatever order the rows came in."""
    import pandas as pd

    from streamapp.runtime.spark.stateful import engine

    batch = pd.DataFrame(
        {
            "sub": [7, 7, 7, 3, 3],
            "offset": [2, 0, 1, 0, 1],
            "ts": [50, 10, 40, 20, 30],
        }
    )
    ordered = engine.arrival_order(batch)
    order = list(zip(ordered["sub"], ordered["offset"], strict=True))
    assert order == [(7, 0), (3, 0), (3, 1), (7, 1), (7, 2)]
    # Offsets stay in order within a partition even when its timestamps go back.
    back = pd.DataFrame({"sub": [1, 1, 2], "offset": [0, 1, 0], "ts": [30, 5, 20]})
    assert list(engine.arrival_order(back)["ts"]) == [20, 30, 5]
