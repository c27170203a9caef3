"""Kafka admin and plain client helpers built on confluent-kafka (no Spark).

Shared by the operator (partition counts), the CLI and demo (create topics, feed and read them),
the test fixtures and the benchmarks, so every caller creates topics and reads results the same way.
Producers use the murmur2 partitioner, the Java client's default, so a key lands on the same
partition whether a Java, Spark or Python client wrote it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

__all__ = [
    "Record",
    "consume",
    "create_topics",
    "partition_counts",
    "produce",
]

Header = tuple[str, bytes | None]


@dataclasses.dataclass(frozen=True)
class Record:
    """One Kafka record as tests and tools see it."""

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None  # epoch millis
    partition: int | None = None
    offset: int | None = None
    topic: str | None = None


def _headers(
    raw: Mapping[str, str | bytes | None] | Iterable[tuple[str, str | bytes | None]] | None,
) -> tuple[Header, ...]:
    """confluent-kafka hands headers over as (name, bytes|str|None) pairs (or, when given, a dict)."""
    pairs = raw.items() if isinstance(raw, Mapping) else raw
    return tuple(
        (name, v if v is None or isinstance(v, bytes) else str(v).encode()) for name, v in pairs or ()
    )


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def create_topics(
    bootstrap: str,
    topics: Mapping[str, int],
    *,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> None:
    """Create each topic with the given partition count (replication 1); existing ones are kept."""
    client = _admin(bootstrap)  # keep a reference: futures die with a collected client
    futures = client.create_topics(
        [
            NewTopic(name, num_partitions=n, replication_factor=1, config=dict(config or {}))
            for name, n in topics.items()
        ],
        operation_timeout=timeout,
    )
    for future in futures.values():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise
    # Topic metadata reaches the broker's cache asynchronously; wait until every partition is seen.
    deadline = time.monotonic() + timeout
    while partition_counts(bootstrap, list(topics)) != dict(topics):
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics {sorted(topics)} not visible on {bootstrap} after {timeout} s")
        time.sleep(0.1)


def partition_counts(bootstrap: str, topics: Sequence[str], *, timeout: float = 10.0) -> dict[str, int]:
    """Partition count per existing topic (topics that do not exist are left out)."""
    client = _admin(bootstrap)
    meta = client.list_topics(timeout=timeout)
    return {
        name: len(meta.topics[name].partitions)
        for name in topics
        if name in meta.topics and meta.topics[name].error is None
    }


def produce(bootstrap: str, topic: str, records: Iterable[Record], *, timeout: float = 60.0) -> int:
    """Write records (idempotent producer, murmur2 partitioner); returns how many were acknowledged."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
            "linger.ms": 5,
            "log_level": 3,
        }
    )
    count = 0
    failures: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        nonlocal count
        if err is None:
            count += 1
        else:
            failures.append(str(err))

    for record in records:
        kwargs: dict[str, object] = {"key": record.key, "value": record.value, "on_delivery": on_delivery}
        if record.headers:
            kwargs["headers"] = list(record.headers)
        if record.timestamp is not None:
            kwargs["timestamp"] = record.timestamp
        if record.partition is not None:
            kwargs["partition"] = record.partition
        while True:
            try:
                producer.produce(topic, **kwargs)  # type: ignore[arg-type]
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(timeout)
    if remaining or failures:
        raise RuntimeError(
            f"producing to {topic} on {bootstrap}: {remaining} records unacknowledged, "
            f"{len(failures)} failed (first: {failures[:1]})"
        )
    return count


def consume(
    bootstrap: str,
    topic: str,
    *,
    expected: int | None = None,
    timeout: float = 60.0,
    idle: float = 2.0,
    isolation: str = "read_committed",
) -> list[Record]:
    """Read a topic from the beginning of every partition.

    Stops once ``expected`` records arrived (and fails after ``timeout`` if they do not), or, with
    no ``expected``, once nothing new arrived for ``idle`` seconds.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"streamapp-reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "log_level": 3,
        }
    )
    try:
        counts = partition_counts(bootstrap, [topic])
        if topic not in counts:
            raise RuntimeError(f"topic {topic!r} does not exist on {bootstrap}")
        consumer.assign([TopicPartition(topic, p, 0) for p in range(counts[topic])])
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            if expected is not None and len(records) >= expected:
                break
            if expected is None and time.monotonic() - last_new > idle:
                break
            batch = consumer.consume(num_messages=10_000, timeout=0.2)
            for msg in batch:
                if msg.error():
                    raise RuntimeError(f"reading {topic}: {msg.error()}")
                _, ts = msg.timestamp()
                records.append(
                    Record(
                        key=msg.key(),
                        value=msg.value(),
                        headers=_headers(msg.headers()),
                        timestamp=ts,
                        partition=msg.partition(),
                        offset=msg.offset(),
                        topic=msg.topic(),
                    )
                )
            if batch:
                last_new = time.monotonic()
        if expected is not None and len(records) < expected:
            raise TimeoutError(
                f"read {len(records)} of {expected} expected records from {topic} in {timeout} s"
            )
        return records
    finally:
        consumer.close()
