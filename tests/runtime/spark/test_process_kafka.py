"""Custom processors through the real broker: state with TTL and timers, exact outputs.

Each app runs as a drain (everything there, then stop) several times on one checkpoint, so each
run is one micro-batch with input (and the no-data batch Spark runs after it when event time
moved): what a processor saw per batch is known exactly.
"""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamapp.runtime import Serdes, StreamApp, StreamsBuilder, StreamsConfig
from streamapp.runtime.app import State
from streamapp.runtime.kafka import admin

sys.path.insert(0, str(pathlib.Path(__file__).parent))

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamapp.runtime import Topology

T0 = 1_700_000_000_000
S = 1000


def _app(processor: str, source: str, sink: str) -> Topology:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    b.stream(source).process(processor).to(sink)
    return b.build()


def _drain(spark: SparkSession, bootstrap: str, topology: Topology, checkpoint: pathlib.Path) -> StreamApp:
    app = StreamApp(
        topology,
        StreamsConfig(bootstrap_servers=bootstrap, checkpoint_location=str(checkpoint), drain=True),
        spark=spark,
    )
    app.start()
    assert app.await_termination(300)
    assert app.state is State.NOT_RUNNING, app.error
    return app


def _produce(bootstrap: str, topic: str, *records: tuple[str, str, int, int]) -> None:
    admin.produce(
        bootstrap,
        topic,
        [admin.Record(k.encode(), v.encode(), timestamp=T0 + t * S, partition=p) for k, v, t, p in records],
    )


def _new(bootstrap: str, sink: str, seen: list[Any]) -> list[tuple[str, str, int]]:
    """The sink's records since the last call (key, value, timestamp in s from T0)."""
    records = admin.consume(bootstrap, sink)
    out = [
        ((r.key or b"").decode(), (r.value or b"").decode(), ((r.timestamp or 0) - T0) // S) for r in records
    ]
    new = out[len(seen) :]
    seen.extend(new)
    return new


def test_value_list_and_map_state_expire_by_ttl_in_each_tasks_stream_time(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    source, sink = new_topic(partitions=2), new_topic(partitions=1)
    topology = _app("process_udfs:Tally", source, sink)
    checkpoint, seen = tmp_path / "ckpt", []
    # k is in partition 0 (task 0), j in partition 1 (task 1).
    _produce(kafka_bootstrap, source, ("k", "a", 0, 0), ("k", "b", 1, 0), ("j", "x", 2, 1), ("k", "a", 3, 0))
    _drain(spark, kafka_bootstrap, topology, checkpoint)
    assert sorted(_new(kafka_bootstrap, sink, seen)) == [
        ("j", "count=1 recent=x by-value=x:1", 2),
        ("k", "count=3 recent=a,b,a by-value=b:1,a:2", 3),
    ]
    # Task 0 at 12 s: what it wrote at 3 s lives until 13 s.
    _produce(kafka_bootstrap, source, ("k", "c", 12, 0))
    _drain(spark, kafka_bootstrap, topology, checkpoint)
    assert _new(kafka_bootstrap, sink, seen) == [("k", "count=4 recent=a,b,a,c by-value=b:1,a:2,c:1", 12)]
    # Task 0 at 14 s: a, b, a (written at 3 s) are gone, c (12 s) is not; a starts again at 1.
    # Task 1 is at 5 s — its own stream time — so j's x (written at 2 s) is still there.
    _produce(kafka_bootstrap, source, ("k", "a", 14, 0), ("j", "w", 5, 1))
    _drain(spark, kafka_bootstrap, topology, checkpoint)
    assert sorted(_new(kafka_bootstrap, sink, seen)) == [
        ("j", "count=2 recent=x,w by-value=x:1,w:1", 5),
        ("k", "count=5 recent=c,a by-value=c:1,a:1", 14),
    ]
    # Task 1 at 30 s: x and w (written at 5 s) expired; the count (no TTL) stays.
    _produce(kafka_bootstrap, source, ("j", "y", 30, 1))
    _drain(spark, kafka_bootstrap, topology, checkpoint)
    assert _new(kafka_bootstrap, sink, seen) == [("j", "count=3 recent=y by-value=y:1", 30)]


def test_a_processing_time_timer_fires_in_the_batch_after_without_new_input(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    source, sink = new_topic(partitions=1), new_topic(partitions=1)
    topology = _app("process_udfs:Remind", source, sink)
    checkpoint, seen = tmp_path / "ckpt", []
    _produce(kafka_bootstrap, source, ("k", "v1", 0, 0), ("m", "w1", 4, 0), ("k", "v2", 3, 0))
    app = _drain(spark, kafka_bootstrap, topology, checkpoint)
    # Registered 1 ms after the batch's start; the reminders come from the no-data batch after it.
    assert _new(kafka_bootstrap, sink, seen) == [
        ("k", "processing reminder: v2", 4),
        ("m", "processing reminder: w1", 4),
    ]
    assert app.progress.records_read == {source: 3}
    _produce(kafka_bootstrap, source, ("m", "w2", 9, 0))
    _drain(spark, kafka_bootstrap, topology, checkpoint)
    assert _new(kafka_bootstrap, sink, seen) == [("m", "processing reminder: w2", 9)]


def test_after_a_key_change_a_key_is_one_task_and_a_grouping_counts_the_processors_output(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """selectKey moves records of one new key out of the partitions they were read from: the
    processor's tasks are then key hashes (Kafka Streams' repartition topic), so one key's
    records meet in one call whatever partition they came from. A null key is dropped, counted."""
    source, sink, counts = new_topic(partitions=2), new_topic(partitions=1), new_topic(partitions=1)
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    tallied = b.stream(source).select_key("lower(key)").process("process_udfs:Tally", name="tally")
    tallied.to(sink)
    tallied.group_by_key().count().to_stream().to(counts, value_serde=Serdes.Long())
    records = [("K", "a", 1, 0), ("k", "b", 2, 1), ("j", "c", 3, 1)]
    _produce(kafka_bootstrap, source, *records)
    admin.produce(kafka_bootstrap, source, [admin.Record(None, b"d", timestamp=T0 + 4 * S, partition=0)])
    app = _drain(spark, kafka_bootstrap, b.build(), tmp_path / "ckpt")
    assert sorted(_new(kafka_bootstrap, sink, [])) == [
        ("j", "count=1 recent=c by-value=c:1", 3),
        ("k", "count=2 recent=a,b by-value=a:1,b:1", 2),
    ]
    got = admin.consume(kafka_bootstrap, counts)
    assert sorted(((r.key or b"").decode(), int.from_bytes(r.value or b"", "big")) for r in got) == [
        ("j", 1),
        ("k", 1),
    ]
    assert app.progress.dropped_by_node == {"tally": 1}
