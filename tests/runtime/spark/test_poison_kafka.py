"""Unreadable records on the real broker under each ``deserializationErrors`` policy.

A poison corpus (a truncated long, a double of the wrong length, invalid JSON, a key that is not
UTF-8) among good records: ``deadLetter`` writes each bad one, byte for byte with its own headers,
to the dead-letter topic with KIP-1034's headers saying where it came from and why, and the good
records come out exactly; ``skip`` drops them, and on a table source a bad record never deletes
its key; both count what they drop, per source topic. (``fail`` is the default: its message, with
topic, partition, offset and reason, is tested in test_codecs.)
"""

from __future__ import annotations

import json
import pathlib
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from streamapp.runtime import Serdes, StreamApp, StreamsBuilder, StreamsConfig
from streamapp.runtime.app import State
from streamapp.runtime.kafka import admin

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamapp.runtime.topology import Topology

T0 = 1_700_000_000_000


def _long(n: int) -> bytes:
    return struct.pack(">q", n)


def _rec(
    key: bytes, value: bytes, timestamp: int, headers: tuple[tuple[str, bytes], ...] = ()
) -> admin.Record:
    return admin.Record(key, value, headers=headers, timestamp=timestamp, partition=0)


def _run(
    spark: SparkSession, bootstrap: str, topology: Topology, checkpoint: pathlib.Path, guarantee: str
) -> StreamApp:
    config = StreamsConfig(
        bootstrap_servers=bootstrap,
        checkpoint_location=str(checkpoint),
        drain=True,
        processing_guarantee=guarantee,
    )
    app = StreamApp(topology, config, spark=spark)
    app.start()
    assert app.await_termination(240)
    assert app.state is State.NOT_RUNNING, app.error
    return app


def _failure(spark: SparkSession, bootstrap: str, topology: Topology, checkpoint: pathlib.Path) -> str:
    """Drain with ``topology``, which must fail: the one line the app's error says."""
    from streamapp.runtime.cli import apps

    config = StreamsConfig(bootstrap_servers=bootstrap, checkpoint_location=str(checkpoint), drain=True)
    app = StreamApp(topology, config, spark=spark)
    app.start()
    assert app.await_termination(240)
    assert app.state is State.ERROR
    return apps.one_line(app.error)


def test_dead_letters_keep_the_original_bytes_and_say_where_and_why(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    longs, doubles, jsons = new_topic(2), new_topic(1), new_topic(1)
    out, dead = new_topic(1), new_topic(1)
    bad_longs = [
        _rec(b"a", b"\x00\x01\x02", T0 + 1, (("trace", b"t1"),)),  # a truncated long
        _rec(b"\xff\xfe", _long(7), T0 + 2, ()),  # a key that is not UTF-8
    ]
    good_longs = [_rec(b"b", _long(21), T0 + 3, ()), _rec(b"c", _long(-4), T0 + 4, ())]
    admin.produce(kafka_bootstrap, longs, [good_longs[0], *bad_longs, good_longs[1]])
    bad_double = _rec(b"d", b"\x00" * 9, T0 + 5, ())
    admin.produce(kafka_bootstrap, doubles, [_rec(b"e", struct.pack(">d", 1.5), T0 + 6, ()), bad_double])
    bad_json = _rec(b"f", b'{"amount": 3', T0 + 7, ())
    admin.produce(kafka_bootstrap, jsons, [bad_json, _rec(b"g", b'{"amount": 5}', T0 + 8, ())])

    b = StreamsBuilder(default_key_serde=Serdes.String())
    policy = {"deserialization_errors": "deadLetter", "dead_letter_topic": dead}
    b.stream(longs, value_serde=Serdes.Long(), **policy).map_values("value * 2").to(
        out, value_serde=Serdes.Long()
    )
    b.stream(doubles, value_serde=Serdes.Double(), **policy).map_values("cast(value * 2 as bigint)").to(
        out, value_serde=Serdes.Long()
    )
    b.stream(jsons, value_serde=Serdes.Json("amount bigint"), **policy).map_values("value.amount * 2").to(
        out, value_serde=Serdes.Long()
    )
    # Exactly-once: the dead letters are written in the batch's transactions (read read_committed).
    app = _run(spark, kafka_bootstrap, b.build(), tmp_path / "checkpoint", "exactly_once_v2")

    results = admin.consume(kafka_bootstrap, out, expected=4, timeout=60)
    assert sorted((r.key, int.from_bytes(r.value or b"", "big", signed=True)) for r in results) == [
        (b"b", 42), (b"c", -8), (b"e", 3), (b"g", 10),
    ]  # fmt: skip
    letters = admin.consume(kafka_bootstrap, dead, expected=4, timeout=60)
    by_key = {r.key: r for r in letters}
    assert len(letters) == 4 and set(by_key) == {b"a", b"\xff\xfe", b"d", b"f"}

    def errors_of(record: admin.Record) -> dict[str, str]:
        return {k: bytes(v).decode() for k, v in record.headers if k.startswith("__streams.errors.")}

    expected = [
        (
            bad_longs[0],
            longs,
            1,
            "value cannot be read with the long serde: a long is 8 bytes, this value has 3",
        ),
        (bad_longs[1], longs, 2, "key cannot be read with the string serde: not valid UTF-8"),
        (
            bad_double,
            doubles,
            1,
            "value cannot be read with the double serde: a double is 8 bytes, this value has 9",
        ),
        (bad_json, jsons, 0, "value cannot be read with the json serde: not valid JSON"),
    ]
    for original, topic, offset, message in expected:
        letter = by_key[original.key]
        assert (letter.value, letter.timestamp) == (original.value, original.timestamp)
        assert [h for h in letter.headers if not h[0].startswith("__streams.errors.")] == list(
            original.headers
        )
        assert errors_of(letter) == {
            "__streams.errors.exception": "org.apache.kafka.common.errors.SerializationException",
            "__streams.errors.message": message,
            "__streams.errors.topic": topic,
            "__streams.errors.partition": "0",
            "__streams.errors.offset": str(offset),
        }, letter
    assert app.progress.dead_lettered == 4 and app.progress.skipped == 0
    assert app.progress.dead_lettered_by_topic == {longs: 2, doubles: 1, jsons: 1}
    assert app.progress.records_written[dead] == 4


def test_skipped_records_are_counted_and_never_delete_a_table_key(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    prices, out = new_topic(1), new_topic(1)
    records = [
        _rec(b"x", _long(10), T0 + 1, ()),
        _rec(b"y", _long(20), T0 + 2, ()),
        _rec(b"x", b"\x00\x00\x00\x0b", T0 + 3, ()),  # 4 bytes: an int, not a long
        _rec(b"y", b"not a number", T0 + 4, ()),
        _rec(b"y", _long(22), T0 + 5, ()),
    ]
    admin.produce(kafka_bootstrap, prices, records)
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.Long())
    b.table(prices, deserialization_errors="skip").to_stream().to(out)
    app = _run(spark, kafka_bootstrap, b.build(), tmp_path / "checkpoint", "at_least_once")

    changelog = admin.consume(kafka_bootstrap, out, timeout=60)
    latest = {r.key: r.value for r in changelog}
    # x keeps 10 (its bad update is skipped, not a delete); y's last good value wins; no tombstone.
    assert latest == {b"x": _long(10), b"y": _long(22)}, changelog
    assert all(r.value is not None for r in changelog)
    assert app.progress.skipped == 2 and app.progress.skipped_by_topic == {prices: 2}
    assert app.progress.dead_lettered == 0


def test_a_dead_letter_policy_without_a_topic_is_refused_by_name() -> None:
    import pytest

    from streamapp.runtime import errors, manifest

    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.Long())
    with pytest.raises(errors.TopologyError, match="needs a dead_letter_topic"):
        b.stream("a", deserialization_errors="deadLetter")
    with pytest.raises(errors.TopologyError, match="only used with deserialization_errors='deadLetter'"):
        b.stream("a", deserialization_errors="skip", dead_letter_topic="dlq")
    doc = {
        "apiVersion": "streamapp.io/v1alpha1",
        "kind": "StreamApp",
        "metadata": {"name": "x"},
        "spec": {
            "topology": {
                "defaults": {"keySerde": "string", "valueSerde": "long"},
                "streams": [
                    {
                        "from": {"topic": "a", "deserializationErrors": "deadLetter"},
                        "steps": [{"to": {"topic": "b"}}],
                    }
                ],
            }
        },
    }
    with pytest.raises(errors.StreamAppError) as raised:
        manifest.build_topology(manifest.load_manifest(json.dumps(doc)))
    assert "spec.topology.streams[0].from.deadLetterTopic" in str(raised.value)


@pytest.mark.parametrize("predicate", ["python", "sql"])
def test_a_value_its_serde_cannot_read_fails_before_any_step_sees_it(
    spark: SparkSession,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    predicate: str,
) -> None:
    """deserializationErrors: fail (the default): the record is named and no filter sees its
    value — a Python function is never called with it, and a filter that would drop it does not
    hide it (Kafka Streams deserialises before any processor)."""
    import udfs

    source, out = new_topic(1), new_topic(1)
    admin.produce(kafka_bootstrap, source, [_rec(b"k", b"fine", T0), _rec(b"k", b"\xff\xfe", T0 + 1)])
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    keep = udfs.refuses_undecodable if predicate == "python" else "value = 'fine'"
    b.stream(source).filter(keep).to(out)
    message = _failure(spark, kafka_bootstrap, b.build(), tmp_path / "checkpoint")
    expected = f"value of record {source}/0@1 cannot be read with the string serde: not valid UTF-8"
    assert expected in message, message


def test_a_record_too_large_for_the_sink_stops_the_app_naming_the_topic(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """A production error has one policy, fail (EXACTLY_ONCE.md says why): a 2 MB value, above the
    producer's max.request.size, stops the query with the topic and Kafka's own error."""
    source, out = new_topic(1), new_topic(1)
    admin.produce(kafka_bootstrap, source, [_rec(b"k", b"ab", T0)])
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    b.stream(source).map_values("repeat(value, 1048576)").to(out)
    message = _failure(spark, kafka_bootstrap, b.build(), tmp_path / "checkpoint")
    assert f"to topic {out}" in message and "RecordTooLargeException" in message, message
    assert "not transient: the query stops" in message, message
    assert admin.consume(kafka_bootstrap, out, timeout=30) == []


def test_null_keys_into_key_dependent_steps_are_dropped_and_counted_per_step(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """A null key cannot be grouped or be a table's key: Kafka Streams drops such a record and
    counts it (dropped-records); so does StreamApp, per step, under any deserializationErrors
    policy (a null key is readable: it is not a bad record), and the app keeps running."""
    from streamapp.runtime.cli import apps
    from streamapp.runtime.topology import nodes as nd

    clicks, prices, counts, latest, dead = (new_topic(1) for _ in range(5))
    admin.produce(
        kafka_bootstrap,
        clicks,
        [
            _rec(b"a", b"1", T0 + 1),
            admin.Record(None, b"2", timestamp=T0 + 2, partition=0),
            _rec(b"a", b"3", T0 + 3),
            _rec(b"\xff\xfe", b"bad", T0 + 3),  # a key that is not UTF-8: dead-lettered, not dropped
            admin.Record(None, b"4", timestamp=T0 + 4, partition=0),
            _rec(b"b", b"5", T0 + 5),
        ],
    )
    admin.produce(
        kafka_bootstrap,
        prices,
        [_rec(b"x", _long(10), T0 + 1), admin.Record(None, _long(11), timestamp=T0 + 2, partition=0)],
    )
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.Long())
    b.stream(
        clicks, value_serde=Serdes.String(), deserialization_errors="deadLetter", dead_letter_topic=dead
    ).group_by_key().count().to_stream().to(counts)
    b.table(prices, deserialization_errors="skip").to_stream().to(latest)
    topology = b.build()
    app = _run(spark, kafka_bootstrap, topology, tmp_path / "checkpoint", "at_least_once")

    final = {
        r.key: int.from_bytes(r.value or b"", "big")
        for r in admin.consume(kafka_bootstrap, counts, timeout=60)
    }
    assert final == {b"a": 2, b"b": 1}
    assert [r.key for r in admin.consume(kafka_bootstrap, latest, timeout=60)] == [b"x"]
    grouping = [n.name for n in topology.nodes if n.op == "groupBy"]
    table = next(n.name for n in topology.nodes if isinstance(n, nd.Source) and prices in n.topics)
    assert app.progress.dropped_by_node == {grouping[0]: 2, table: 1}, app.progress
    assert app.progress.dropped == 3 and app.progress.dead_lettered == 1 and app.progress.skipped == 0
    summary = apps._summary(app)
    assert f"dropped           2 record(s)  at {grouping[0]} (null key)" in summary, summary
    assert "3 dropped for a null key" in summary, summary


def test_a_table_read_twice_counts_its_null_keys_once_and_sliding_windows_drop_null_values(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """A table both written out and re-grouped drops its null key once (one count, not one per
    reader); a re-grouping sees every update, also two of a key within one micro-batch; a
    sliding-window aggregation skips a null value and counts it as dropped, as Kafka Streams'
    KStreamSlidingWindowAggregate does (time windows hand it to the aggregator instead)."""
    from streamapp.runtime.cli import apps
    from streamapp.runtime.topology import SlidingWindows, aggregate_nodes
    from streamapp.runtime.topology import nodes as nd

    prices, clicks, latest, by_price, windows = (new_topic(1) for _ in range(5))
    admin.produce(
        kafka_bootstrap,
        prices,
        [
            _rec(b"x", _long(10), T0 + 1),
            admin.Record(None, _long(11), timestamp=T0 + 2, partition=0),
            _rec(b"x", _long(12), T0 + 3),  # x leaves group 10 at T0 + 3, in the same batch
            _rec(b"y", _long(10), T0 + 4),
        ],
    )
    admin.produce(
        kafka_bootstrap,
        clicks,
        [
            _rec(b"a", b"1", T0 + 1000),
            admin.Record(b"a", None, timestamp=T0 + 2000, partition=0),
            _rec(b"a", b"3", T0 + 3000),
        ],
    )
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.Long())
    table = b.table(prices)
    table.to_stream().to(latest)
    table.group_by("cast(value as string)").count().to_stream().to(by_price)
    sliding = SlidingWindows.of_time_difference_and_grace(10_000, 0)
    b.stream(clicks, value_serde=Serdes.String()).group_by_key().windowed_by(sliding).count().to_stream().to(
        windows
    )
    topology = b.build()
    app = _run(spark, kafka_bootstrap, topology, tmp_path / "checkpoint", "at_least_once")

    def final(topic: str) -> dict[str, tuple[int, int]]:
        records = admin.consume(kafka_bootstrap, topic, timeout=60)
        return {
            (r.key or b"").decode(): (int.from_bytes(r.value or b"", "big"), r.timestamp) for r in records
        }

    assert final(latest) == {"x": (12, T0 + 3), "y": (10, T0 + 4)}
    # Group "10": x added at T0 + 1, taken out at T0 + 3, y added at T0 + 4.
    assert final(by_price) == {"10": (1, T0 + 4), "12": (1, T0 + 3)}
    # a's windows from the records at 1 s and 3 s only: its left windows and the right window of
    # the first (the null value at 2 s opens none).
    a1, a3 = T0 + 1000, T0 + 3000
    assert {k: v for k, (v, _) in final(windows).items()} == {
        f"a@{a1 - 10_000}/{a1}": 1,
        f"a@{a3 - 10_000}/{a3}": 2,
        f"a@{a1 + 1}/{a1 + 1 + 10_000}": 1,
    }
    source = next(n.name for n in topology.nodes if isinstance(n, nd.Source) and prices in n.topics)
    counter = next(
        n.name for n in topology.nodes if isinstance(n, aggregate_nodes.Count) and n.windows is not None
    )
    assert app.progress.dropped_by_node == {source: 1, counter: 1}, app.progress
    summary = apps._summary(app)
    assert f"at {counter} (null value)" in summary and f"at {source} (null key)" in summary, summary


BIG = b"x" * (2 * 1024 * 1024)  # a 2 MB value: readable, so processed under every policy


@pytest.mark.parametrize("policy", ["skip", "deadLetter", "fail"])
def test_the_poison_corpus_under_each_policy(
    spark: SparkSession,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    policy: str,
) -> None:
    """One corpus, each policy, exactly-once (read_committed): a truncated long, a double of 9
    bytes, invalid JSON and a string value that is not UTF-8 among good records, a 2 MB value and
    a null key into a grouping. ``skip`` and ``deadLetter`` keep running (a later record still
    comes out) and count every bad record per topic; ``fail`` stops naming the record and the
    reason, and commits nothing of the batch it stopped in."""
    from streamapp.runtime.cli import apps

    longs, doubles, jsons, out, counts, dead = (new_topic(1) for _ in range(6))
    strings = f"{longs}-strings"
    admin.create_topics(kafka_bootstrap, {strings: 1}, config={"max.message.bytes": str(3 * 1024 * 1024)})
    bad = {
        longs: _rec(b"a", b"\x00\x01\x02", T0 + 1, (("trace", b"t1"),)),
        doubles: _rec(b"d", b"\x00" * 9, T0 + 2),
        jsons: _rec(b"f", b'{"amount": 3', T0 + 3),
        strings: _rec(b"h", b"ok \xff\xfe", T0 + 4),
    }
    reasons = {
        longs: "value cannot be read with the long serde: a long is 8 bytes, this value has 3",
        doubles: "value cannot be read with the double serde: a double is 8 bytes, this value has 9",
        jsons: "value cannot be read with the json serde: not valid JSON",
        strings: "value cannot be read with the string serde: not valid UTF-8",
    }
    admin.produce(
        kafka_bootstrap, longs, [_rec(b"b", _long(21), T0), bad[longs], _rec(b"c", _long(-4), T0 + 5)]
    )
    admin.produce(kafka_bootstrap, doubles, [bad[doubles], _rec(b"e", struct.pack(">d", 1.5), T0 + 6)])
    admin.produce(kafka_bootstrap, jsons, [_rec(b"g", b'{"amount": 5}', T0 + 7), bad[jsons]])
    admin.produce(
        kafka_bootstrap,
        strings,
        [
            _rec(b"big", BIG, T0 + 8),
            bad[strings],
            admin.Record(None, b"no key", timestamp=T0 + 9, partition=0),
            _rec(b"i", b"fine", T0 + 10),
        ],
        client_config={"message.max.bytes": str(3 * 1024 * 1024)},
    )

    b = StreamsBuilder(default_key_serde=Serdes.String())
    on_error = {"deserialization_errors": policy}
    if policy == "deadLetter":
        on_error["dead_letter_topic"] = dead
    long_out = {"value_serde": Serdes.Long()}
    b.stream(longs, value_serde=Serdes.Long(), **on_error).map_values("value * 2").to(out, **long_out)
    b.stream(doubles, value_serde=Serdes.Double(), **on_error).map_values("cast(value * 2 as bigint)").to(
        out, **long_out
    )
    b.stream(jsons, value_serde=Serdes.Json("amount bigint"), **on_error).map_values("value.amount * 2").to(
        out, **long_out
    )
    texts = b.stream(strings, value_serde=Serdes.String(), **on_error)
    texts.map_values("cast(length(value) as bigint)").to(out, **long_out)
    texts.group_by_key().count().to_stream().to(counts, **long_out)
    config = StreamsConfig(
        bootstrap_servers=kafka_bootstrap,
        checkpoint_location=str(tmp_path / "checkpoint"),
        processing_guarantee="exactly_once_v2",
        drain=policy == "fail",
    )
    app = StreamApp(b.build(), config, spark=spark)
    app.start()

    def number(record: admin.Record) -> int:
        return int.from_bytes(record.value or b"", "big", signed=True)

    if policy == "fail":
        assert app.await_termination(240)
        assert app.state is State.ERROR
        message = apps.one_line(app.error)
        # The first bad record a task met, named as `streamapp run` prints it: topic/partition@offset.
        offsets = {longs: 1, doubles: 0, jsons: 1, strings: 1}
        named = {
            reason.replace("value ", f"value of record {topic}/0@{offsets[topic]} ", 1)
            + " (deserializationErrors: fail)"
            for topic, reason in reasons.items()
        }
        assert message in named, message
        assert admin.consume(kafka_bootstrap, out, timeout=30) == []
        return
    try:
        good = {(b"b", 42), (b"c", -8), (b"e", 3), (b"g", 10), (b"big", len(BIG)), (None, 6), (b"i", 4)}
        results = admin.consume(kafka_bootstrap, out, expected=len(good), timeout=180)
        assert {(r.key, number(r)) for r in results} == good
        # Still running: a record produced after the corpus comes out too.
        admin.produce(kafka_bootstrap, longs, [_rec(b"z", _long(5), T0 + 11)])
        later = admin.consume(kafka_bootstrap, out, expected=len(good) + 1, timeout=180)
        assert (b"z", 10) in {(r.key, number(r)) for r in later}
        assert app.state is State.RUNNING, app.error
        final = {r.key: number(r) for r in admin.consume(kafka_bootstrap, counts, timeout=60)}
        assert final == {b"big": 1, b"i": 1}  # the null key is dropped at the grouping, and counted
    finally:
        app.stop()
    progress = app.progress
    assert progress.dropped == 1, progress
    by_topic = {longs: 1, doubles: 1, jsons: 1, strings: 1}
    if policy == "skip":
        assert (progress.skipped, progress.skipped_by_topic, progress.dead_lettered) == (4, by_topic, 0)
        return
    assert (progress.dead_lettered, progress.dead_lettered_by_topic, progress.skipped) == (4, by_topic, 0)
    letters = {r.key: r for r in admin.consume(kafka_bootstrap, dead, expected=4, timeout=60)}
    assert set(letters) == {record.key for record in bad.values()}
    for topic, original in bad.items():
        letter = letters[original.key]
        assert (letter.value, letter.timestamp) == (original.value, original.timestamp)
        errors_of = {k: bytes(v).decode() for k, v in letter.headers if k.startswith("__streams.errors.")}
        assert errors_of["__streams.errors.message"] == reasons[topic]
        assert (errors_of["__streams.errors.topic"], errors_of["__streams.errors.partition"]) == (topic, "0")
        assert [h for h in letter.headers if not h[0].startswith("__streams.errors.")] == list(
            original.headers
        )
