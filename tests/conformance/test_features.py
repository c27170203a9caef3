"""The features make test's seeds are chosen by (randomized.features) find the exact edges of time."""

from __future__ import annotations

import dataclasses
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import randomized

from streamapp.runtime.kafka import admin

T0 = randomized.T0


def _case(streams: list[dict[str, object]], *inputs: list[tuple[str, int]]) -> randomized.Case:
    records = [
        [admin.Record(k.encode(), b"1", timestamp=T0 + t, partition=0) for k, t in topic] for topic in inputs
    ]
    return randomized.Case(
        seed=0, family="join", streams=streams, inputs=records, partitions=1, mode="stream",
        value_serde="string", batch=1000, trigger="available-now",
    )  # fmt: skip


JOIN = [
    {"name": "right", "from": {"topic": "in1"}},
    {"from": {"topic": "in0"}, "steps": [
        {"join": {"with": "right", "joiner": "left", "windows": {"before": "2s", "after": "1s"}}},
    ]},
]  # fmt: skip


def _edges(case: randomized.Case, prefix: str) -> set[str]:
    return {f.removeprefix(prefix) for f in randomized.features(case) if f.startswith(prefix)}


def test_a_join_pair_exactly_a_window_apart_is_an_edge_in_or_out_of_order() -> None:
    edge = "join/stream-stream/on the window's edge, "
    # Left records at 5 s; right at 6 s (after = 1 s) come first twice: the end of the left's window.
    late_left = _case(JOIN, [("a", 7000), ("a", 5000), ("a", 5000)], [("a", 6000), ("b", 8000)])
    assert _edges(late_left, edge) == {"out of order"}
    # The same pairs with the left records first: the start of the right records' window.
    in_order = _case(JOIN, [("a", 5000), ("a", 5000)], [("a", 6000), ("a", 6000)])
    assert _edges(in_order, edge) == {"in order"}
    # 2.5 s apart: outside; and a pair gone from the store (retention 3 s) is no edge.
    assert _edges(_case(JOIN, [("a", 5000)] * 2, [("a", 7500)] * 2), edge) == set()
    gone = _case(JOIN, [("a", 21000), ("a", 6000), ("a", 6000)], [("a", 7000), ("b", 20000)])
    assert _edges(gone, edge) == set()


def test_a_record_on_a_time_windows_grace_limit_is_an_edge_per_engine() -> None:
    def windowed(aggregation: dict[str, object], *times: int) -> randomized.Case:
        steps = [{"groupByKey": {}}, {"windowedBy": {"tumbling": "5s", "grace": "2s"}}, aggregation]
        return _case([{"from": {"topic": "in0"}, "steps": steps}], [("a", t) for t in times])

    # Stream time 12 s: the window [5 s, 10 s) ends + grace exactly there; twice.
    on = (12000, 9000, 7500)
    assert _edges(windowed({"count": {}}, *on), "window/") >= {"tumbling/on the grace limit/declarative"}
    reduce = {"reduce": "conformance_functions:add"}
    assert "tumbling/on the grace limit/python" in _edges(windowed(reduce, *on), "window/")
    # 11.75 s: a quarter second inside the grace.
    assert not any("limit" in f for f in _edges(windowed({"count": {}}, 11750, 9000, 7500), "window/"))


def test_a_tables_key_deleted_for_good_is_a_feature() -> None:
    table = [{"from": {"topic": "in0", "as": "table"}, "steps": [{"toStream": {}}]}]

    def deleted(*records: tuple[str, bytes | None]) -> bool:
        case = _case(table, [(k, 1000) for k, _ in records])
        rows = [dataclasses.replace(r, value=v) for r, (_, v) in zip(case.inputs[0], records, strict=True)]
        return "join/a table's key deleted for good" in randomized.features(
            dataclasses.replace(case, inputs=[rows])
        )

    assert deleted(("a", b"1"), ("b", b"1"), ("a", None))
    assert not deleted(("a", b"1"), ("a", None), ("a", b"2"))  # undone
    assert not deleted(("a", None), ("b", b"1"))  # a key that never had a value


def test_a_left_row_re_pointed_to_a_foreign_key_the_right_table_lacks_is_a_feature() -> None:
    fk_join = [
        {"name": "right", "from": {"topic": "in1", "as": "table"}},
        {"from": {"topic": "in0", "as": "table"}, "steps": [{"join": {"with": "right", "joiner": "left",
                                                                      "foreignKey": "fk"}}]},
    ]  # fmt: skip
    extract = {None: None, **{str(d): "abcdef"[d % 6] for d in range(10)}}

    def repointed(
        left: list[tuple[str, bytes | None, int]], right: list[tuple[str, bytes | None, int]]
    ) -> bool:
        case = _case(fk_join, [], [])
        rows = [
            [admin.Record(k.encode(), v, timestamp=T0 + t, partition=0) for k, v, t in side]
            for side in (left, right)
        ]
        found = randomized.features(dataclasses.replace(case, inputs=rows), {"fk": extract})
        return "join/foreign-key/re-pointed to a key the right table lacks for good" in found

    # x points at a (the right table has it), then at b, which the right table never has.
    assert repointed([("x", b"0", 1000), ("x", b"1", 3000)], [("a", b"r", 500)])
    x = [("x", b"0", 1000), ("x", b"1", 3000)]
    assert not repointed(x, [("a", b"r", 500), ("b", b"r", 4000)])  # b comes later
    assert not repointed(x, [("a", b"r", 4000)])  # a only after: x had no result to delete
    assert not repointed([("x", b"0", 1000), ("x", b"6", 3000)], [("a", b"r", 500)])  # 6 points at a again
