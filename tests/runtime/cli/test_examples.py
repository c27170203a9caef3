"""The packaged examples (``streamapp examples``) run as documented, through the real broker.

Each example manifest runs unchanged except for its topic names (unique per test) with
:class:`StreamApp` on the session's broker and Spark; the output records are compared exactly:
key, value and timestamp.
"""

from __future__ import annotations

import pathlib
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from streamapp.runtime import StreamApp, StreamsConfig, manifest
from streamapp.runtime.app import State
from streamapp.runtime.cli import examples
from streamapp.runtime.kafka import admin

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamapp.runtime import Topology

README = pathlib.Path(__file__).parents[3] / "README.md"
T0 = 1_700_000_040_000  # a whole minute (epoch ms): windows start here
S = 1000


def test_every_example_is_listed_valid_and_documented() -> None:
    names = [example.name for example in examples.available()]
    assert names == [
        "account-balances",
        "login-alerts",
        "pageviews-by-region",
        "region-sizes",
        "silent-keys",
        "wordcount",
    ]
    readme = README.read_text()
    for example in examples.available():
        assert not manifest.validate_manifest(example.path), example.path
        assert example.summary, f"{example.path} has no summary comment"
        assert f"streamapp run {example.name}" in readme, f"README does not show {example.name}"


def _topology(name: str, new_topic: Callable[..., str]) -> tuple[Topology, str, str]:
    """The example with fresh topics; its one source and one sink."""
    topology = manifest.build_topology(manifest.load_manifest(examples.find(name)))
    (source,), (sink,) = topology.source_topics(), topology.sink_topics()
    renamed = {source: new_topic(1), sink: new_topic(1)}
    return topology.rename_topics(renamed), renamed[source], renamed[sink]


def _drain(
    spark: SparkSession,
    bootstrap: str,
    topology: Topology,
    checkpoint: pathlib.Path,
    processing_guarantee: str | None = None,
) -> StreamApp:
    config = StreamsConfig(
        bootstrap_servers=bootstrap,
        checkpoint_location=str(checkpoint),
        drain=True,
        processing_guarantee=processing_guarantee,
    )
    app = StreamApp(topology, config, spark=spark)
    app.start()
    assert app.await_termination(300)
    assert app.state is State.NOT_RUNNING, app.error
    return app


def _longs(records: Sequence[admin.Record]) -> list[tuple[str, int | None, int | None]]:
    return [
        (
            (r.key or b"").decode(),
            None if r.value is None else struct.unpack(">q", r.value)[0],
            None if r.timestamp is None else r.timestamp - T0,
        )
        for r in records
    ]


def test_wordcount_counts_every_word(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    topology, source, sink = _topology("wordcount", new_topic)
    lines = ["the stream of words", "Streams and tables, streams and TABLES"]
    admin.produce(
        kafka_bootstrap,
        source,
        [admin.Record(None, t.encode(), timestamp=T0 + i) for i, t in enumerate(lines)],
    )
    app = _drain(spark, kafka_bootstrap, topology, tmp_path / "ckpt")
    out = _longs(admin.consume(kafka_bootstrap, sink))
    # One micro-batch: one update per word, its count and the newest timestamp among its lines.
    assert sorted(out) == [
        ("and", 2, 1),
        ("of", 1, 0),
        ("stream", 1, 0),
        ("streams", 2, 1),
        ("tables", 2, 1),
        ("the", 1, 0),
        ("words", 1, 0),
    ]
    assert app.progress.records_read == {source: 2}
    assert app.progress.records_written == {sink: 7}


def test_account_balances_count_each_payment_once_across_restarts(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    document = manifest.load_manifest(examples.find("account-balances"))
    assert document.spec.processing_guarantee == "exactly_once_v2"
    topology, source, sink = _topology("account-balances", new_topic)
    checkpoint = tmp_path / "ckpt"

    def drain() -> StreamApp:
        return _drain(spark, kafka_bootstrap, topology, checkpoint, document.spec.processing_guarantee)

    def pay(*payments: tuple[str, int, int]) -> None:
        records = [admin.Record(a.encode(), str(c).encode(), timestamp=T0 + t) for a, c, t in payments]
        admin.produce(kafka_bootstrap, source, records)

    pay(("alice", 1500, 1), ("bob", 200, 2), ("alice", -300, 3))
    assert drain().processing_guarantee == "exactly_once_v2"
    pay(("alice", 50, 4))
    drain()  # the second run resumes from the checkpoint: no payment is summed twice
    # read_committed (admin.consume's default): only committed transactions' records.
    out = _longs(admin.consume(kafka_bootstrap, sink))
    assert out == [("alice", 1200, 3), ("bob", 200, 2), ("alice", 1250, 4)]


def test_login_alerts_raise_one_alert_per_minute_with_three_failures(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    topology, source, sink = _topology("login-alerts", new_topic)
    failures = [
        ("alice", 0), ("alice", 10), ("bob", 15), ("alice", 20), ("bob", 30),
        ("alice", 61),
        ("carol", 75),  # stream time 75 s: the minute [0, 60) closed at 60 s + 10 s grace
        ("alice", 5),   # too late for [0, 60): dropped and counted, not a fourth failure
        ("bob", 80),
    ]  # fmt: skip
    admin.produce(
        kafka_bootstrap,
        source,
        [admin.Record(user.encode(), b"bad password", timestamp=T0 + t * S) for user, t in failures],
    )
    app = _drain(spark, kafka_bootstrap, topology, tmp_path / "ckpt")
    out = _longs(admin.consume(kafka_bootstrap, sink))
    # alice: 3 in [0, 60) (stamped with her newest, 20 s); bob had 2; [60, 120) is still open.
    assert out == [(f"alice@{T0}/{T0 + 60 * S}", 3, 20 * S)]
    assert app.progress.late == 1
    assert app.progress.records_read == {source: len(failures)}
    assert app.progress.records_written == {sink: 1}


def test_region_sizes_follow_users_who_move_and_leave(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    topology, source, sink = _topology("region-sizes", new_topic)
    checkpoint = tmp_path / "ckpt"
    admin.produce(
        kafka_bootstrap,
        source,
        [
            admin.Record(b"u1", b"eu", timestamp=T0 + 1),
            admin.Record(b"u2", b"us", timestamp=T0 + 2),
            admin.Record(b"u3", b"eu", timestamp=T0 + 3),
        ],
    )
    _drain(spark, kafka_bootstrap, topology, checkpoint)
    first = _longs(admin.consume(kafka_bootstrap, sink))
    assert sorted(first) == [("eu", 2, 3), ("us", 1, 2)]
    # u1 moves to us, u2 leaves (a tombstone): eu loses u1, us gains u1 and loses u2.
    admin.produce(
        kafka_bootstrap,
        source,
        [admin.Record(b"u1", b"us", timestamp=T0 + 4), admin.Record(b"u2", None, timestamp=T0 + 5)],
    )
    app = _drain(spark, kafka_bootstrap, topology, checkpoint)
    second = _longs(admin.consume(kafka_bootstrap, sink))[len(first) :]
    assert {key: (count, ts) for key, count, ts in second} == {"eu": (1, 4), "us": (1, 5)}
    assert app.progress.records_read == {source: 2}


def test_pageviews_by_region_count_each_view_in_the_region_of_its_moment(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """The README's input: a user who moves, a view that arrives after the move with an older
    timestamp, a user without a profile, a view too late for its minute. Kafka Streams' output on
    the same topology is compared in the conformance suite (pageViewsByRegion)."""
    topology = manifest.build_topology(manifest.load_manifest(examples.find("pageviews-by-region")))
    renamed = {t: new_topic(1) for t in ("page-views", "user-profiles", "pageviews-by-region")}
    topology = topology.rename_topics(renamed)
    assert sorted(topology.source_topics()) == sorted([renamed["page-views"], renamed["user-profiles"]])

    def records(*rows: tuple[str, str, int]) -> list[admin.Record]:
        return [admin.Record(k.encode(), v.encode(), timestamp=T0 + t * S) for k, v, t in rows]

    admin.produce(
        kafka_bootstrap,
        renamed["user-profiles"],
        records(("alice", "eu", 0), ("bob", "us", 0), ("alice", "us", 70)),
    )
    views = records(
        ("alice", "/home", 10), ("bob", "/cart", 20), ("carol", "/home", 30),  # carol: no profile
        ("alice", "/search", 65), ("alice", "/cart", 75), ("bob", "/home", 80),
        ("alice", "/help", 50),  # processed after her move (70 s): counts in us, in the first minute
        ("bob", "/search", 125),  # stream time 125 s: the first minute closed at 60 s + 30 s grace
        ("bob", "/cart", 40),  # late: dropped and counted
    )  # fmt: skip
    admin.produce(kafka_bootstrap, renamed["page-views"], views)
    app = _drain(spark, kafka_bootstrap, topology, tmp_path / "ckpt")
    out = _longs(admin.consume(kafka_bootstrap, renamed["pageviews-by-region"]))
    minute = [f"@{T0 + m * 60 * S}/{T0 + (m + 1) * 60 * S}" for m in range(3)]
    latest = {key: (count, ts) for key, count, ts in out}  # the last update of each window
    assert latest == {
        f"eu{minute[0]}": (1, 10 * S),
        f"us{minute[0]}": (2, 50 * S),  # bob 20 s, alice 50 s
        f"eu{minute[1]}": (1, 65 * S),
        f"us{minute[1]}": (2, 80 * S),  # alice 75 s, bob 80 s
        f"us{minute[2]}": (1, 125 * S),
    }
    assert app.progress.late == 1
    assert app.progress.records_read == {renamed["page-views"]: 9, renamed["user-profiles"]: 3}


def _strings(records: Sequence[admin.Record]) -> list[tuple[str, str | None, int | None]]:
    return [
        (
            (r.key or b"").decode(),
            None if r.value is None else r.value.decode(),
            None if r.timestamp is None else (r.timestamp - T0) // S,
        )
        for r in records
    ]


def test_silent_keys_alert_once_a_key_is_silent_for_ten_seconds_of_stream_time(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """The custom processor example: an event-time timer per key, out-of-order input, and alerts
    that come from a micro-batch without input (each run drains what is there, then stops)."""
    topology, source, sink = _topology("silent-keys", new_topic)
    checkpoint = tmp_path / "ckpt"

    def beats(*beats: tuple[str, int]) -> None:
        admin.produce(
            kafka_bootstrap,
            source,
            [admin.Record(k.encode(), b"beat", timestamp=T0 + t * S) for k, t in beats],
        )

    # a@3 is out of order (a's newest is 5): it does not move a's silence. Stream time 14 s:
    # a is silent from 15 s, b from 19 s, c from 24 s — nothing yet.
    beats(("a", 0), ("b", 2), ("a", 5), ("a", 3), ("b", 9), ("c", 14))
    _drain(spark, kafka_bootstrap, topology, checkpoint)
    assert _strings(admin.consume(kafka_bootstrap, sink)) == []
    # d at 16 s moves stream time past a's 15 s. No record follows: the alert comes from the
    # no-data batch Spark runs after the batch that moved event time.
    beats(("d", 16))
    app = _drain(spark, kafka_bootstrap, topology, checkpoint)
    first = _strings(admin.consume(kafka_bootstrap, sink))
    assert first == [("a", f"a silent since {T0 + 5 * S}", 15)]
    assert app.progress.batches >= 2, "the alert needs the batch after d's"
    # b beats again (its watch moves to 40 s); a, whose alert went out, reappears with an old
    # record (4 s): silent since 4 s, already due at stream time 30 s; c and d fall silent.
    beats(("b", 30), ("a", 4))
    _drain(spark, kafka_bootstrap, topology, checkpoint)
    second = _strings(admin.consume(kafka_bootstrap, sink))[len(first) :]
    assert second == [
        ("a", f"a silent since {T0 + 4 * S}", 14),
        ("c", f"c silent since {T0 + 14 * S}", 24),
        ("d", f"d silent since {T0 + 16 * S}", 26),
    ]
