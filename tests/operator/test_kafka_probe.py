"""The operator's Kafka adapter against a real broker: partition counts and the app's progress."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from streamapp.operator import errors, kafka_probe
from streamapp.runtime.kafka import admin, progress


def test_partitions_and_standing_of_a_real_group(kafka_bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(3)
    admin.produce(kafka_bootstrap, topic, [admin.Record(b"k", b"v", partition=i % 3) for i in range(9)])
    probe = kafka_probe.AdminProbe()
    assert probe.partitions(kafka_bootstrap, [topic, "no-such-topic"]) == {topic: 3}
    group = "streamapp.apps.probe-test"
    assert probe.standing(kafka_bootstrap, group, [topic]) is None  # the driver never committed

    reporter = progress.Reporter(kafka_bootstrap, group, min_interval=0)
    batch = progress.BatchProgress(
        5, "2026-11-23T10:00:00.000Z", 8, {(topic, 0): 3, (topic, 1): 3, (topic, 2): 2}
    )
    deadline = time.monotonic() + 30
    committed = reporter.report(batch)
    while not committed and time.monotonic() < deadline:  # a fresh broker's coordinator loads first
        time.sleep(0.2)
        committed = reporter.report(None)
    assert committed
    assert probe.standing(kafka_bootstrap, group, [topic]) == kafka_probe.Standing(
        lag=1, batch_id=5, time="2026-11-23T10:00:00.000Z", rate=0.0, end=9
    )  # 9 records written: the end offsets add up to 9


def test_an_unreachable_broker_is_a_retryable_error() -> None:
    probe = kafka_probe.AdminProbe(timeout=1.0)
    with pytest.raises(errors.KafkaProbeError, match=r"127\.0\.0\.1:9"):
        probe.partitions("127.0.0.1:9", ["t"])
