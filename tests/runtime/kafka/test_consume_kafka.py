"""``admin.consume`` reads to the end offsets a topic had at the call, against a real broker."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Producer

from streamapp.runtime.kafka import admin


def _transactional(bootstrap: str, topic: str, values: list[bytes], *, commit: bool, tid: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    for v in values:
        producer.produce(topic, value=v, partition=0)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def test_a_read_ends_at_the_end_offsets_of_the_call_past_transaction_markers(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=3)
    admin.produce(kafka_bootstrap, topic, [admin.Record(f"k{i}".encode(), b"plain") for i in range(7)])
    _transactional(kafka_bootstrap, topic, [b"kept-1", b"kept-2"], commit=True, tid=f"{topic}-a")
    _transactional(kafka_bootstrap, topic, [b"aborted"], commit=False, tid=f"{topic}-b")
    _transactional(kafka_bootstrap, topic, [b"kept-3"], commit=True, tid=f"{topic}-c")

    began = time.monotonic()
    # A timeout far above the read's own time: a read that waited for a record past the last
    # commit marker (or for the timeout) would take it all.
    committed = admin.consume(kafka_bootstrap, topic, timeout=60)
    took = time.monotonic() - began
    values = sorted(r.value for r in committed if r.value != b"plain")
    assert values == [b"kept-1", b"kept-2", b"kept-3"]
    assert sum(r.value == b"plain" for r in committed) == 7
    assert took < 30, f"the read waited {took:.1f} s: it did not see the end of the topic"

    everything = admin.consume(kafka_bootstrap, topic, timeout=60, isolation="read_uncommitted")
    assert sorted(r.value for r in everything if r.value != b"plain") == [
        b"aborted",
        b"kept-1",
        b"kept-2",
        b"kept-3",
    ]

    empty = new_topic(partitions=2)
    assert admin.consume(kafka_bootstrap, empty, timeout=60) == []
