"""The merge frontier: which records a task fed by two topics processes now, and which it holds
back until a dry partition's next records are read (pure logic), and the two ends it compares
(Spark's offset log, the broker's high watermark on a real broker)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from streamapp.runtime.kafka import admin
from streamapp.runtime.spark.stateful import frontier

A, B = 11, 22  # source partition ids (Spark's xxhash64 of topic and partition)


def _rows(*records: tuple[int, int, int]) -> pd.DataFrame:
    """(sub, offset, ts) records of partition 0 of topic 'a' (sub A) or 'b' (sub B)."""
    return pd.DataFrame(
        {
            "sub": [r[0] for r in records],
            "topic": ["a" if r[0] == A else "b" for r in records],
            "partition": [0] * len(records),
            "offset": [r[1] for r in records],
            "ts": [r[2] for r in records],
        }
    )


def _order(frame: pd.DataFrame | None) -> list[tuple[str, int]]:
    if frame is None:
        return []
    return list(zip(frame["topic"], frame["offset"], strict=True))


def _asking(answers: dict[str, bool], asked: list[str]) -> Callable[[str, int], bool]:
    def caught_up(topic: str, partition: int) -> bool:
        asked.append(topic)
        return answers[topic]

    return caught_up


def test_a_dry_partition_with_more_at_the_broker_holds_back_the_others_records() -> None:
    # a: ts 10, 30 (then more at the broker); b: ts 20, 40, 50. Kafka Streams takes a@10, b@20,
    # a@30 and then waits for a's next record, which may be older than b@40.
    batch = _rows((A, 0, 10), (A, 1, 30), (B, 0, 20), (B, 1, 40), (B, 2, 50))
    memory: dict[str, Any] = {}
    asked: list[str] = []
    taken, held = frontier.take(batch, None, memory, _asking({"a": False, "b": True}, asked))
    assert _order(taken) == [("a", 0), ("b", 0), ("a", 1)]
    assert _order(held) == [("b", 1), ("b", 2)] and asked == ["a"]
    assert memory == {"subs": {A: ("a", 0), B: ("b", 0)}, "last": A}

    # The next batch brings a@35: it goes before the held b@40, as in Kafka Streams.
    asked.clear()
    taken, held = frontier.take(_rows((A, 2, 35)), held, memory, _asking({"a": True, "b": True}, asked))
    assert _order(taken) == [("a", 2), ("b", 1), ("b", 2)] and held is None
    assert asked == ["a"]  # a ran dry before b: caught up, so b goes on


def test_a_partition_none_of_whose_records_reached_the_task_yet_is_waited_for() -> None:
    # b's first records were all dropped before the step (null keys): b was never seen, but the
    # task reads b's partition 0 too, and the broker has more of it. Kafka Streams would wait.
    # (The randomized suite, seed 5033: a cogroup summed a's records past b's unread ones.)
    batch = _rows((A, 0, 10), (A, 1, 30))
    memory: dict[str, Any] = {}
    asked: list[str] = []
    taken, held = frontier.take(batch, None, memory, _asking({"b": False}, asked), ("a", "b"))
    assert _order(taken) == [] and _order(held) == [("a", 0), ("a", 1)] and asked == ["b"]

    asked.clear()
    taken, held = frontier.take(_rows((B, 2, 20)), held, memory, _asking({"b": True}, asked), ("a", "b"))
    assert _order(taken) == [("a", 0), ("b", 2), ("a", 1)] and held is None

    asked.clear()  # b caught up although nothing of it reached the task: a goes on
    taken, held = frontier.take(_rows((A, 0, 10)), None, {}, _asking({"b": True}, asked), ("a", "b"))
    assert _order(taken) == [("a", 0)] and held is None and asked == ["b"]


def test_a_caught_up_partition_lets_the_others_go_on_and_one_partition_never_asks() -> None:
    batch = _rows((A, 0, 10), (B, 0, 20), (B, 1, 40))
    asked: list[str] = []
    taken, held = frontier.take(batch, None, {}, _asking({"a": True, "b": True}, asked))
    assert _order(taken) == [("a", 0), ("b", 0), ("b", 1)] and held is None and asked == ["a"]

    asked.clear()
    taken, held = frontier.take(_rows((B, 5, 1), (B, 6, 0)), None, {}, _asking({}, asked))
    assert _order(taken) == [("b", 5), ("b", 6)] and held is None and asked == []  # offset order


def test_a_known_partition_without_records_that_still_has_some_holds_everything() -> None:
    memory: dict[str, Any] = {"subs": {A: ("a", 0)}}
    batch = _rows((B, 3, 20))
    taken, held = frontier.take(batch, None, memory, _asking({"a": False}, []))
    assert taken.empty and _order(held) == [("b", 3)]
    taken, held = frontier.take(_rows((A, 4, 25)), held, memory, _asking({"a": True, "b": True}, []))
    assert _order(taken) == [("b", 3), ("a", 4)] and held is None


def test_on_a_timestamp_tie_the_partition_that_waited_longer_goes_first() -> None:
    # Kafka Streams' PartitionGroup: a partition that just gave a record goes back into the
    # priority queue behind partitions whose head has the same timestamp.
    batch = _rows((A, 0, 10), (A, 1, 20), (B, 0, 20), (B, 1, 20))
    memory: dict[str, Any] = {}
    taken, held = frontier.take(batch, None, memory, _asking({"a": True, "b": True}, []))
    assert _order(taken) == [("a", 0), ("b", 0), ("a", 1), ("b", 1)] and held is None
    # At the start of a batch the partition taken last waits (b here), then the lower rank.
    taken, _ = frontier.take(_rows((A, 2, 30), (B, 2, 30)), None, memory, _asking({"a": True, "b": True}, []))
    assert _order(taken) == [("a", 2), ("b", 2)]
    ranked = _rows((A, 3, 40), (B, 3, 40)).assign(rank=[1, 0])
    taken, _ = frontier.take(ranked, None, {}, _asking({"a": True, "b": True}, []))
    assert _order(taken) == [("b", 3), ("a", 3)]


def test_a_fanned_out_record_is_processed_as_one_and_its_partition_then_goes_behind() -> None:
    # A flatMapValues made two records of a@10 (one offset). Kafka Streams takes the source
    # record once, then b@10 (which waited), then a@20: b's record never lands between the two.
    # (The randomized suite, seed 10114: a stream-table join saw a newer table value.)
    batch = _rows((A, 0, 10), (A, 0, 10), (A, 1, 20), (B, 0, 10))
    taken, held = frontier.take(batch, None, {}, _asking({"a": True, "b": True}, []))
    assert _order(taken) == [("a", 0), ("a", 0), ("b", 0), ("a", 1)] and held is None


def test_a_record_dropped_before_the_step_still_orders_its_partition() -> None:
    # A filter dropped a@10 (only its record as read remains, offset 0); a@10 at offset 1 passed.
    # Kafka Streams took a@10 (offset 0) first, so on the tie b@10 goes before a's offset 1.
    # Without the record as read, a's offset 1 would be its head and take the tie.
    # (The randomized suite, seed 10288.)
    batch = _rows((A, 0, 10), (A, 1, 10), (B, 0, 10))
    memory: dict[str, Any] = {"last": B}
    taken, _ = frontier.take(batch, None, memory, _asking({"a": True, "b": True}, []))
    assert _order(taken) == [("a", 0), ("b", 0), ("a", 1)]


def test_the_offset_log_gives_each_kafka_partitions_end() -> None:
    text = "\n".join(
        [
            "v1",
            '{"batchWatermarkMs":0,"batchTimestampMs":1795567887095,"conf":{}}',
            '{"in0":{"1":40,"0":36}}',
            "-",
            '{"in1":{"0":7}}',
        ]
    )
    assert frontier.parse_offset_log(text) == {("in0", 0): 36, ("in0", 1): 40, ("in1", 0): 7}


def test_the_broker_end_is_the_high_watermark(kafka_bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    admin.produce(kafka_bootstrap, topic, [admin.Record(b"k", b"v", partition=1) for _ in range(5)])
    probe = frontier.Frontier.of("/nonexistent", {"bootstrap.servers": kafka_bootstrap})
    assert (probe.log_end(topic, 0), probe.log_end(topic, 1)) == (0, 5)


def test_a_batch_asks_the_broker_once_and_a_retry_gets_the_same_answer(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = new_topic(1)
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    for batch in (7, 8):  # both batches read the partition up to offset 2
        (offsets / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{{"{topic}":{{"0":2}}}}\n')
    probe = frontier.Frontier.of(str(tmp_path), {"bootstrap.servers": kafka_bootstrap})
    admin.produce(kafka_bootstrap, topic, [admin.Record(b"k", b"v") for _ in range(2)])
    monkeypatch.setattr(frontier, "_batch_id", lambda: "7")
    assert probe.caught_up(topic, 0)
    assert (tmp_path / "frontier" / "7" / f"{topic}-0").read_text() == "caught up"

    admin.produce(kafka_bootstrap, topic, [admin.Record(b"k", b"v") for _ in range(3)])
    assert probe.caught_up(topic, 0)  # batch 7 again (a retry): the recorded answer
    monkeypatch.setattr(frontier, "_batch_id", lambda: "8")
    assert not probe.caught_up(topic, 0)  # batch 8 asks: 5 records at the broker, 2 read
    assert probe.caught_up("another-topic", 0)  # not read by the query: nothing to wait for
