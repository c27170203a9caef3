"""Progress committed to the app's consumer group, and read back as lag, against a real broker."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from streamapp.runtime.kafka import admin, progress


def _spark_progress(batch: int, offsets: dict[str, dict[str, int]], rows: int) -> dict[str, object]:
    # The shape of StreamingQueryProgress: Kafka offsets come as JSON text.
    return {
        "batchId": batch,
        "timestamp": f"2026-11-23T10:00:0{batch}.000Z",
        "numInputRows": rows,
        "sources": [{"description": "KafkaV2[...]", "endOffset": json.dumps(offsets)}],
    }


def _commit(reporter: progress.Reporter, batch: progress.BatchProgress | None) -> None:
    """Report until committed: the first commits of a fresh broker meet a loading coordinator."""
    assert batch is not None
    deadline = time.monotonic() + 30
    committed = reporter.report(batch)
    while not committed:
        assert time.monotonic() < deadline, "progress was never committed"
        time.sleep(0.2)
        committed = reporter.report(None)  # retries the held-back batch


def test_spark_progress_is_read_per_partition() -> None:
    parsed = progress.from_spark_progress(_spark_progress(3, {"a": {"0": 5, "1": 7}, "b": {"0": 1}}, 13))
    assert parsed == progress.BatchProgress(
        batch_id=3, time="2026-11-23T10:00:03.000Z", rows=13, offsets={("a", 0): 5, ("a", 1): 7, ("b", 0): 1}
    )
    assert progress.from_spark_progress({"batchId": 0, "timestamp": "t", "sources": []}) is None


def test_rate_is_rows_over_the_window() -> None:
    now = [0.0]
    reporter = progress.Reporter("127.0.0.1:1", "g", clock=lambda: now[0], window=5)
    for second, rows in ((0.0, 100), (1.0, 200), (3.0, 400)):
        now[0] = second
        reporter.record(progress.BatchProgress(1, "t", rows, {}))
    # rows after the first batch over the time since it: the first batch's rows predate the window
    assert reporter.rate() == pytest.approx((200 + 400) / 3.0)
    now[0] = 9.0
    reporter.record(progress.BatchProgress(2, "t", 50, {}))  # batches older than 5 s leave the window
    assert reporter.rate() == pytest.approx(50 / 6.0)


def test_committed_progress_gives_lag_and_last_batch(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, other = new_topic(2), new_topic(1)
    admin.produce(kafka_bootstrap, topic, [admin.Record(b"k", b"v", partition=p % 2) for p in range(10)])
    admin.produce(kafka_bootstrap, other, [admin.Record(b"k", b"v") for _ in range(4)])
    group = progress.group_id("lagging", "apps")
    assert group == "streamapp.apps.lagging"
    assert progress.standing(kafka_bootstrap, group, [topic, other]) is None  # nothing committed yet

    reporter = progress.Reporter(kafka_bootstrap, group, min_interval=0, instance="lagging-driver-b")
    batch = progress.from_spark_progress(_spark_progress(7, {topic: {"0": 5, "1": 2}}, 7))
    _commit(reporter, batch)
    seen = progress.standing(kafka_bootstrap, group, [topic, other])
    # partition 1 of `topic` is 3 behind; `other` was never committed: all 4 records count.
    assert seen is not None
    assert (seen.lag, seen.batch_id, seen.time) == (3 + 4, 7, "2026-11-23T10:00:07.000Z")
    assert seen.by == "lagging-driver-b"  # which driver ran it: the operator's evidence of a hand-over

    caught_up = progress.from_spark_progress(
        _spark_progress(8, {topic: {"0": 5, "1": 5}, other: {"0": 4}}, 7)
    )
    _commit(reporter, caught_up)
    final = progress.standing(kafka_bootstrap, group, [topic, other])
    assert final is not None and (final.lag, final.batch_id) == (0, 8)
