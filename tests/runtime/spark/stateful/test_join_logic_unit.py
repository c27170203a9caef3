"""Kafka Streams' join processors record by record, without Spark (what the Spark step runs per task)."""

from __future__ import annotations

from typing import Any

from streamapp.runtime.spark.stateful import join_logic
from streamapp.runtime.spark.stateful.join_logic import LEFT, RIGHT

T0 = 28_333_333 * 60_000  # a multiple of 60 s (RocksDB window-store segments start at T0)


def _run(processor: Any, batches: list[list[join_logic.Record]], first: int = LEFT) -> list[Any]:
    state = processor.new_state()
    out: list[Any] = []
    for batch in batches:
        for record in join_logic.merge_order(batch, first=first):
            processor.process(state, record, out.append)
    return out


def _records(rows: list[tuple[int, Any, Any, int]]) -> list[join_logic.Record]:
    """(side, key, value, ts) in offset order per side, all in partition 0."""
    return [(side, key, value, ts, 0, offset) for offset, (side, key, value, ts) in enumerate(rows)]


def test_merge_order_takes_the_partition_whose_head_is_oldest_and_keeps_offset_order() -> None:
    records = [
        (LEFT, "k1", "s1", 10, 0, 0),
        (LEFT, "k2", "s2", 1, 0, 1),  # behind k1 in its partition: processed after it
        (RIGHT, "k2", "t2", 5, 0, 0),
        (RIGHT, "k1", "t1", 10, 0, 1),  # tie with s1 at 10: the first side (here the table) wins
    ]
    order = [r[2] for r in join_logic.merge_order(records, first=RIGHT)]
    assert order == ["t2", "t1", "s1", "s2"]


def test_merge_order_takes_a_fanned_out_record_as_one() -> None:
    # s1 fanned out by a flatMapValues (two records, one offset) ties with the table's t1: both
    # halves are processed before t1 goes, as in Kafka Streams (the randomized suite, seed 10114).
    records = [
        (LEFT, "k1", "s1", 10, 0, 0),
        (LEFT, "k1", "s1x", 10, 0, 0),
        (RIGHT, "k1", "t1", 10, 0, 0),
    ]
    order = [r[2] for r in join_logic.merge_order(records, first=LEFT)]
    assert order == ["s1", "s1x", "t1"]


def test_stream_table_join_sees_the_table_as_it_is_at_each_record() -> None:
    rows = [
        (RIGHT, "u1", "alice", 1),
        (LEFT, "u1", "v1", 2),
        (RIGHT, "u1", "alice2", 3),
        (LEFT, "u1", "v2", 4),
        (RIGHT, "u1", None, 5),  # deleted
        (LEFT, "u1", "v3", 6),
        (LEFT, "u2", "v4", 7),
        (LEFT, "u2", None, 8),  # a null stream value is dropped, even by leftJoin
        (LEFT, None, "v5", 9),  # a null key: dropped by join, kept by leftJoin (KIP-962)
    ]
    batch = [(s, k, v, t, 0, i) for i, (s, k, v, t) in enumerate(rows)]
    inner = _run(join_logic.StreamTableJoin(left_join=False), [batch], first=RIGHT)
    assert inner == [("u1", "v1", "alice", 2), ("u1", "v2", "alice2", 4)]
    left = _run(join_logic.StreamTableJoin(left_join=True), [batch], first=RIGHT)
    assert left == [
        ("u1", "v1", "alice", 2),
        ("u1", "v2", "alice2", 4),
        ("u1", "v3", None, 6),
        ("u2", "v4", None, 7),
        (None, "v5", None, 9),
    ]
    # One record per micro-batch gives the same results.
    assert _run(join_logic.StreamTableJoin(left_join=True), [[r] for r in batch], first=RIGHT) == left


def test_table_table_joins_emit_tombstones_when_a_result_goes_away() -> None:
    rows = [
        (LEFT, "k", "a1", 1),  # inner: no right yet, nothing
        (RIGHT, "k", "b1", 2),
        (LEFT, "k", "a2", 5),  # processed after b2 (timestamp 3), the older head
        (RIGHT, "k", "b2", 3),
        (RIGHT, "k", None, 6),
        (LEFT, "k", None, 7),
        (LEFT, "x", None, 8),  # deleting what does not exist changes nothing
    ]
    batch = _records(rows)
    assert _run(join_logic.TableTableJoin("inner"), [batch]) == [
        ("k", "a1", "b1", 2),
        ("k", "a1", "b2", 3),
        ("k", "a2", "b2", 5),  # the max of both sides' timestamps
        ("k", None, None, 6),  # right deleted: the result goes away (left's delete then: nothing)
    ]
    left = [
        ("k", "a1", None, 1),
        ("k", "a1", "b1", 2),
        ("k", "a1", "b2", 3),
        ("k", "a2", "b2", 5),
        ("k", "a2", None, 6),
        ("k", None, None, 7),
    ]
    assert _run(join_logic.TableTableJoin("left"), [batch]) == left
    assert _run(join_logic.TableTableJoin("outer"), [batch]) == left
    right_first = _records(
        [(RIGHT, "k", "b1", 1), (LEFT, "k", "a1", 2), (LEFT, "k", None, 3), (RIGHT, "k", None, 4)]
    )
    assert _run(join_logic.TableTableJoin("left"), [right_first]) == [
        ("k", "a1", "b1", 2),
        ("k", None, None, 3),
    ]
    assert _run(join_logic.TableTableJoin("outer"), [right_first]) == [
        ("k", None, "b1", 1),
        ("k", "a1", "b1", 2),
        ("k", None, "b1", 3),
        ("k", None, None, 4),
    ]


def test_a_tombstone_for_a_key_one_side_never_had_still_updates_the_result() -> None:
    """Kafka Streams' table source forwards it, and its join processors emit again at the later
    timestamp when the other side has the key (the randomized conformance suite's seed 16)."""
    right_gone = _records([(LEFT, "f", "1", 29_750), (RIGHT, "f", None, 36_500)])
    assert _run(join_logic.TableTableJoin("left"), [right_gone]) == [
        ("f", "1", None, 29_750),
        ("f", "1", None, 36_500),
    ]
    assert _run(join_logic.TableTableJoin("outer"), [right_gone]) == [
        ("f", "1", None, 29_750),
        ("f", "1", None, 36_500),
    ]
    assert _run(join_logic.TableTableJoin("inner"), [right_gone]) == [("f", None, None, 36_500)]
    left_gone = _records([(RIGHT, "f", "1", 29_750), (LEFT, "f", None, 36_500)])
    assert _run(join_logic.TableTableJoin("left"), [left_gone]) == [("f", None, None, 36_500)]
    assert _run(join_logic.TableTableJoin("outer"), [left_gone]) == [
        ("f", None, "1", 29_750),
        ("f", None, "1", 36_500),
    ]
    nobody = _records([(LEFT, "g", None, 1), (RIGHT, "g", None, 2)])
    for how in ("inner", "left", "outer"):
        assert _run(join_logic.TableTableJoin(how), [nobody]) == []


def _ss(how: str, rows: list[tuple[int, Any, Any, int]], split: int | None = None) -> tuple[list[Any], int]:
    processor = join_logic.StreamStreamJoin(how, before=10_000, after=10_000, grace=5_000)
    state = processor.new_state()
    out: list[Any] = []
    late = 0
    batch = [(s, k, v, T0 + t * 1000, 0, i) for i, (s, k, v, t) in enumerate(rows)]
    batches = [batch] if split is None else [batch[i : i + split] for i in range(0, len(batch), split)]
    for chunk in batches:
        for record in join_logic.merge_order(chunk):
            late += not processor.process(state, record, out.append)
    return [(k, lv, rv, ts - T0 if ts is not None else None) for k, lv, rv, ts in out], late


def test_stream_stream_left_join_emits_unmatched_records_once_their_window_closed() -> None:
    rows = [
        (LEFT, "a", "A1", 100),
        (LEFT, "b", "B1", 101),
        (RIGHT, "a", "a1", 105),  # joins A1 (within 10 s): timestamp max(100, 105)
        (RIGHT, "z", "z1", 114),  # stream time 114: B1's window ends at 111 + grace 5 = 116, open
        (RIGHT, "z", "z2", 117),  # 117 > 116: B1 is emitted with a null right side, once
        (LEFT, "b", "B2", 118),
        (RIGHT, "b", "b1", 112),  # out of order: joins B2 (and not B1, already emitted)
        (RIGHT, "z", "z3", 200),
    ]
    out, late = _ss("left", rows)
    assert out == [
        ("a", "A1", "a1", 105 * 1000),
        ("b", "B1", None, 101 * 1000),
        ("b", "B2", "b1", 118 * 1000),
    ]
    assert late == 0
    for split in (1, 2, 3):
        assert _ss("left", rows, split) == (out, 0)


def test_stream_stream_outer_join_emits_both_sides_and_inner_join_neither() -> None:
    rows = [
        (LEFT, "a", "A1", 100),
        (RIGHT, "c", "c1", 102),
        (LEFT, "d", "D1", 104),
        (RIGHT, "d", "d1", 120),  # 16 s after D1: outside the 10 s window
        (LEFT, "e", "E1", 200),
    ]
    outer, _ = _ss("outer", rows)
    assert sorted(outer, key=str) == sorted(
        [
            ("a", "A1", None, 100_000),
            ("c", None, "c1", 102_000),
            ("d", "D1", None, 104_000),
            ("d", None, "d1", 120_000),
        ],
        key=str,
    )
    inner, _ = _ss("inner", rows)
    assert inner == []


def test_stream_stream_records_in_a_dropped_segment_are_late_but_still_probe() -> None:
    rows = [
        (LEFT, "a", "A1", 100),
        (RIGHT, "z", "z1", 300),  # stream time 300 s: left store observed 100 s
        (LEFT, "q", "Q1", 300),  # left store observed 300 s: segments before 240 s are dropped
        (LEFT, "a", "A0", 30),  # segment [0, 60 s) is gone: the put is dropped (late)...
        (RIGHT, "a", "a1", 35),  # ...so this right record finds nothing to join (and is late too)
    ]
    out, late = _ss("left", rows)
    assert late == 2
    # A0's window ended long before stream time: emitted at once with a null right side.
    assert ("a", "A0", None, 30_000) in out
    assert not any(lv == "A0" and rv is not None for _, lv, rv, _ in out)
