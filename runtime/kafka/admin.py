"""Kafka admin and plain client helpers built on confluent-kafka (no Spark).

Shared by the operator (partition counts), the CLI and demo (create topics, feed and read them),
the test fixtures and the benchmarks, so every caller creates topics and reads results the same way.
Producers use the murmur2 partitioner, the Java client's default, so a key lands on the same
partition whether a Java, Spark or Python client wrote it.

Every function takes ``client_config``, librdkafka settings merged into each client's (the
connection's security: :meth:`security.Credentials.librdkafka`). librdkafka reports a refused
connection — wrong password, untrusted certificate — only to an error callback and then times out
with "broker transport failure"; the clients here collect those reports, so the error raised says
what the broker refused, and they stop at once on authentication and TLS failures, which a retry
with the same credentials cannot fix.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # type: ignore[attr-defined]

__all__ = [
    "Record",
    "add_partitions",
    "consume",
    "create_topics",
    "partition_counts",
    "produce",
]

Header = tuple[str, bytes | None]

#: Connection failures that retrying with the same configuration cannot fix.
_REFUSED = (KafkaError._AUTHENTICATION, KafkaError._SSL)


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


class _Reports:
    """The errors librdkafka reported about connections (its ``error_cb``)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.errors: list[KafkaError] = []

    def __call__(self, error: KafkaError) -> None:
        self.errors.append(error)

    def refused(self) -> KafkaException | None:
        """An authentication or TLS failure seen so far, as an exception naming it."""
        for error in self.errors:
            if error.code() in _REFUSED:
                return KafkaException(KafkaError(error.code(), f"Kafka at {self.bootstrap}: {error.str()}"))
        return None

    def explain(self, exc: KafkaException) -> KafkaException:
        """``exc``, or the connection failure behind it when one was reported."""
        specific = [e for e in self.errors if e.code() != KafkaError._ALL_BROKERS_DOWN]
        if not specific:
            return exc
        first = specific[0]
        return KafkaException(KafkaError(first.code(), f"Kafka at {self.bootstrap}: {first.str()}"))


#: librdkafka would print every failed connection attempt to stderr (many a second while a broker
#: is down); the errors reach ``error_cb`` and the raised exception names them instead.
QUIET = {"log_level": 0}


def _config(bootstrap: str, client_config: Mapping[str, str] | None, reports: _Reports) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, **QUIET, **(client_config or {}), "error_cb": reports}


def _list_topics(bootstrap: str, client_config: Mapping[str, str] | None, timeout: float) -> Any:
    """The cluster's metadata (confluent-kafka's untyped ClusterMetadata)."""
    reports = _Reports(bootstrap)
    client = AdminClient(_config(bootstrap, client_config, reports))
    deadline = time.monotonic() + timeout
    while True:
        # In short steps: a refused connection ends the wait instead of running out the timeout.
        try:
            return client.list_topics(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
        except KafkaException as exc:
            client.poll(0)  # serves the error callbacks
            if (refused := reports.refused()) is not None:
                raise refused from exc
            if time.monotonic() >= deadline:
                raise reports.explain(exc) from exc


def create_topics(
    bootstrap: str,
    topics: Mapping[str, int],
    *,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    client_config: Mapping[str, str] | None = None,
) -> None:
    """Create each topic with the given partition count (replication 1); existing ones are kept."""
    reports = _Reports(bootstrap)
    # Keep a reference: futures die with a collected client.
    client = AdminClient(_config(bootstrap, client_config, reports))
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
                client.poll(0)
                raise reports.explain(exc) from exc
    # Topic metadata reaches the broker's cache asynchronously; wait until every partition is seen.
    deadline = time.monotonic() + timeout
    while partition_counts(bootstrap, list(topics), client_config=client_config) != dict(topics):
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics {sorted(topics)} not visible on {bootstrap} after {timeout} s")
        time.sleep(0.1)


def add_partitions(
    bootstrap: str,
    totals: Mapping[str, int],
    *,
    timeout: float = 30.0,
    client_config: Mapping[str, str] | None = None,
) -> None:
    """Grow each topic to the given total partition count (Kafka never shrinks a topic)."""
    reports = _Reports(bootstrap)
    client = AdminClient(_config(bootstrap, client_config, reports))
    futures = client.create_partitions(
        [NewPartitions(name, total) for name, total in totals.items()], operation_timeout=timeout
    )
    for future in futures.values():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            client.poll(0)
            raise reports.explain(exc) from exc
    deadline = time.monotonic() + timeout
    while partition_counts(bootstrap, list(totals), client_config=client_config) != dict(totals):
        if time.monotonic() > deadline:
            raise TimeoutError(f"partitions of {sorted(totals)} not visible on {bootstrap} after {timeout} s")
        time.sleep(0.1)


def partition_counts(
    bootstrap: str,
    topics: Sequence[str],
    *,
    timeout: float = 10.0,
    client_config: Mapping[str, str] | None = None,
) -> dict[str, int]:
    """Partition count per existing topic (topics that do not exist are left out)."""
    meta = _list_topics(bootstrap, client_config, timeout)
    return {
        name: len(meta.topics[name].partitions)
        for name in topics
        if name in meta.topics and meta.topics[name].error is None
    }


def end_offsets(
    bootstrap: str,
    topics: Sequence[str],
    *,
    timeout: float = 10.0,
    client_config: Mapping[str, str] | None = None,
) -> dict[str, dict[int, int]]:
    """The next offset to be written per partition of each existing topic (its high watermark)."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    reports = _Reports(bootstrap)
    meta = _list_topics(bootstrap, client_config, timeout)
    consumer = Consumer({**_config(bootstrap, client_config, reports), "group.id": "streamapp-offsets"})
    try:
        return {
            name: {
                p: consumer.get_watermark_offsets(TopicPartition(name, p), timeout=timeout)[1]
                for p in meta.topics[name].partitions
            }
            for name in topics
            if name in meta.topics and meta.topics[name].error is None
        }
    finally:
        consumer.close()


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Record],
    *,
    timeout: float = 60.0,
    client_config: Mapping[str, str] | None = None,
) -> int:
    """Write records (idempotent producer, murmur2 partitioner); returns how many were acknowledged."""
    reports = _Reports(bootstrap)
    producer = Producer(
        {
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
            "linger.ms": 5,
            **_config(bootstrap, client_config, reports),
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
    deadline = time.monotonic() + timeout
    remaining = producer.flush(0)
    while remaining and time.monotonic() < deadline:
        remaining = producer.flush(0.5)  # in steps, to stop at once when the broker refuses us
        if (refused := reports.refused()) is not None:
            raise refused
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
    idle: float | None = None,
    isolation: str = "read_committed",
    client_config: Mapping[str, str] | None = None,
) -> list[Record]:
    """Read a topic from the beginning of every partition.

    Stops once ``expected`` records arrived (and fails after ``timeout`` if they do not); with
    ``idle``, once nothing new arrived for ``idle`` seconds (a topic still being written);
    otherwise once every partition is read to the end offset it had at the call: what was written
    before it, without waiting for more (``timeout`` bounds the wait for a transaction still open).
    """
    reports = _Reports(bootstrap)
    consumer = Consumer(
        {
            "group.id": f"streamapp-reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            **_config(bootstrap, client_config, reports),
        }
    )
    try:
        counts = partition_counts(bootstrap, [topic], client_config=client_config)
        if topic not in counts:
            raise RuntimeError(f"topic {topic!r} does not exist on {bootstrap}")
        partitions = [TopicPartition(topic, p, 0) for p in range(counts[topic])]
        to_end = expected is None and idle is None
        ends = (
            {tp.partition: consumer.get_watermark_offsets(tp, timeout=timeout)[1] for tp in partitions}
            if to_end
            else {}
        )
        consumer.assign(partitions)
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            if expected is not None and len(records) >= expected:
                break
            if idle is not None and expected is None and time.monotonic() - last_new > idle:
                break
            if to_end and all(
                tp.offset >= ends[tp.partition] or ends[tp.partition] <= 0
                for tp in consumer.position(partitions)
            ):
                break
            batch = consumer.consume(num_messages=10_000, timeout=0.2)
            if (refused := reports.refused()) is not None:
                raise refused
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
