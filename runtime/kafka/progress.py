"""Where an app stands in its input topics, written to Kafka itself so that anyone can read it.

Spark's Kafka source keeps its offsets in the checkpoint, never in a consumer group, so Kafka's own
tools (``kafka-consumer-groups.sh``, lag exporters) and the operator would see nothing. After each
micro-batch the driver commits the batch's end offsets to a consumer group named after the app —
a bookmark with no members, never used to consume — with the batch id, its time and the recent
input rate in each offset's metadata (:class:`Reporter`). The operator reads it back
(:func:`standing`) to show lag, throughput and the last batch time in the StreamApp's status.

Offsets are committed and read with a consumer of the group that never subscribes (see
:func:`_group_client` for why not the AdminClient). Reporting is best effort: the checkpoint stays
the only source of truth for where processing resumes, and a failed commit never stops the query.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

__all__ = ["BatchProgress", "Reporter", "Standing", "from_spark_progress", "group_id", "standing"]

#: The group's coordinator is not ready yet: try again with the next batch.
_COORDINATOR_MOVING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
)
#: Offset metadata is capped by the broker (offset.metadata.max.bytes, 4096 by default).
_METADATA_LIMIT = 4000


def group_id(app: str, namespace: str | None = None) -> str:
    """The consumer group an app's progress is committed to: ``streamapp.<namespace>.<app>``."""
    return f"streamapp.{namespace}.{app}" if namespace else f"streamapp.{app}"


@dataclasses.dataclass(frozen=True)
class BatchProgress:
    """One finished micro-batch: its id, when it ran, how many rows, and the next offset per partition."""

    batch_id: int
    time: str  # RFC 3339, as Spark reports it
    rows: int
    offsets: Mapping[tuple[str, int], int]


def _offsets(raw: object) -> dict[tuple[str, int], int]:
    """``{"topic": {"0": 42}}`` (Spark's Kafka offset JSON, as text or parsed) per partition."""
    parsed = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(parsed, Mapping):
        return {}
    found: dict[tuple[str, int], int] = {}
    for topic, partitions in parsed.items():
        if isinstance(partitions, Mapping):
            for partition, offset in partitions.items():
                if isinstance(offset, int) and offset >= 0:
                    found[(str(topic), int(partition))] = offset
    return found


def from_spark_progress(progress: Mapping[str, Any]) -> BatchProgress | None:
    """The Kafka part of a ``StreamingQueryProgress`` (None when no Kafka source has offsets yet)."""
    offsets: dict[tuple[str, int], int] = {}
    for source in progress.get("sources") or []:
        try:
            offsets.update(_offsets(source["endOffset"]))
        except (KeyError, TypeError, ValueError):
            continue  # not a Kafka source, or nothing read yet
    if not offsets:
        return None
    return BatchProgress(
        batch_id=int(progress["batchId"]),
        time=str(progress["timestamp"]),
        rows=int(progress.get("numInputRows") or 0),
        offsets=offsets,
    )


class Reporter:
    """Commits each batch's end offsets to the app's group, at most once per ``min_interval`` seconds.

    The metadata of every committed offset is ``{"batch": id, "time": ..., "rate": rows/s}``, the
    rate averaged over the batches of the last ``window`` seconds, and ``"by": instance`` when the
    committer names itself (a driver Pod: which driver ran the batch).
    """

    def __init__(
        self,
        bootstrap: str,
        group: str,
        *,
        config: Mapping[str, str] | None = None,
        min_interval: float = 1.0,
        window: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        instance: str | None = None,
    ) -> None:
        self.group = group
        self.instance = instance
        self.warned = False  # the caller warned once about a failed commit
        self._client_config = _group_client(bootstrap, group, config)
        self._committer: Consumer | None = None  # created on the first commit
        self.min_interval = min_interval
        self._window = window
        self._clock = clock
        self._rows: collections.deque[tuple[float, int]] = collections.deque()
        self._last_commit: float | None = None
        self._pending: BatchProgress | None = None

    def rate(self) -> float:
        """Rows per second over the last ``window`` seconds of batches."""
        if len(self._rows) < 2:
            return 0.0
        span = self._rows[-1][0] - self._rows[0][0]
        counted = sum(rows for _, rows in list(self._rows)[1:])
        return counted / span if span > 0 else 0.0

    def report(self, batch: BatchProgress | None, *, timeout: float = 5.0) -> bool:
        """Record ``batch`` (if any) and commit the newest recorded one, unless the last commit was
        under ``min_interval`` ago. Call it with None between batches to retry a held-back commit.

        Returns True when offsets were committed. While the group's coordinator is still loading
        (a fresh broker, a moved coordinator) the batch is kept for the next call; any other
        refusal raises :class:`KafkaException` (the driver logs it and goes on).
        """
        now = self.record(batch) if batch is not None else self._clock()
        if self._last_commit is not None and now - self._last_commit < self.min_interval:
            return False
        return self.flush(timeout=timeout)

    def record(self, batch: BatchProgress) -> float:
        """Count the batch's rows in the rate window and hold it for the next commit; returns now."""
        now = self._clock()
        self._rows.append((now, batch.rows))
        while len(self._rows) > 2 and now - self._rows[0][0] > self._window:
            self._rows.popleft()
        self._pending = batch
        return now

    def flush(self, *, timeout: float = 5.0) -> bool:
        """Commit the last recorded batch, if one is waiting (see :meth:`report`)."""
        batch, self._pending = self._pending, None
        if batch is None or not batch.offsets:
            return False
        rate = self.rate()
        fields: dict[str, Any] = {
            "batch": batch.batch_id,
            "time": batch.time,
            "rate": round(rate, 1) if math.isfinite(rate) else 0,
        }
        if self.instance:
            fields["by"] = self.instance
        metadata = json.dumps(fields)[:_METADATA_LIMIT]
        partitions = [
            TopicPartition(topic, partition, offset, metadata)
            for (topic, partition), offset in sorted(batch.offsets.items())
        ]
        try:
            if self._committer is None:
                self._committer = Consumer(self._client_config)
            committed = self._committer.commit(offsets=partitions, asynchronous=False) or []
            refused = [tp.error for tp in committed if tp.error is not None]
            if refused:
                raise KafkaException(refused[0])
        except KafkaException as exc:
            if exc.args and getattr(exc.args[0], "code", lambda: None)() in _COORDINATOR_MOVING:
                self._pending = self._pending or batch  # a newer batch supersedes this one
                return False
            raise
        self._last_commit = self._clock()
        return True

    def close(self) -> None:
        """Release the committing client (it never joined the group: nothing to leave)."""
        if self._committer is not None:
            self._committer.close()
            self._committer = None


@dataclasses.dataclass(frozen=True)
class Standing:
    """An app's position in its input topics, as its last committed progress says."""

    lag: int  # records between the committed offsets and the ends of the input partitions
    batch_id: int | None
    time: str | None  # when that batch ran (RFC 3339)
    rate: float | None  # input rows per second around then
    by: str | None = None  # who ran that batch (a driver Pod's name), when it said
    end: int | None = None  # the input partitions' end offsets added up: their growth is the arrival rate


def standing(
    bootstrap: str,
    group: str,
    topics: Sequence[str],
    *,
    config: Mapping[str, str] | None = None,
    timeout: float = 5.0,
) -> Standing | None:
    """Lag and the last batch of ``group`` over ``topics``; None when it never committed progress.

    A partition without a committed offset (added after the last batch) counts from its earliest
    record, as the app will read it.
    """
    deadline = time.monotonic() + timeout  # for the whole call, not for each request in it
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, **(config or {})})
    metadata = admin.list_topics(timeout=timeout)
    partitions = [
        TopicPartition(topic, p)
        for topic in topics
        if topic in metadata.topics and metadata.topics[topic].error is None
        for p in sorted(metadata.topics[topic].partitions)
    ]
    if not partitions:
        return None
    committed = {
        (tp.topic, tp.partition): tp
        for tp in _committed(bootstrap, group, config, partitions, deadline)
        if tp.offset >= 0 and tp.error is None
    }
    if not committed:
        return None
    ends = _list_offsets(admin, partitions, OffsetSpec.latest(), deadline)  # type: ignore[no-untyped-call]
    starts = _list_offsets(admin, partitions, OffsetSpec.earliest(), deadline)  # type: ignore[no-untyped-call]
    lag = 0
    for key, end in ends.items():
        done = committed[key].offset if key in committed else starts.get(key, 0)
        lag += max(0, end - max(done, starts.get(key, 0)))
    newest: dict[str, Any] = {}
    for tp in committed.values():
        try:
            meta = json.loads(tp.metadata or "{}")
        except ValueError:
            continue
        if isinstance(meta, dict) and int(meta.get("batch", -1)) >= int(newest.get("batch", -1)):
            newest = meta
    return Standing(
        lag=lag,
        batch_id=int(newest["batch"]) if "batch" in newest else None,
        time=str(newest["time"]) if "time" in newest else None,
        rate=float(newest["rate"]) if "rate" in newest else None,
        by=str(newest["by"]) if "by" in newest else None,
        end=sum(ends.values()),
    )


def _left(deadline: float) -> float:
    return max(0.1, deadline - time.monotonic())


def _group_client(bootstrap: str, group: str, config: Mapping[str, str] | None) -> dict[str, Any]:
    """A consumer of ``group`` that never subscribes: it only commits and reads offsets.

    Not the AdminClient's offset calls: librdkafka's ListConsumerGroupOffsets crashes the process
    when the group's coordinator answers NOT_COORDINATOR (confluentinc/librdkafka#5040, seen here
    on a fresh broker); a consumer handles that answer by finding the coordinator again.
    """
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "log_level": 0,  # a broker that is down is reported once by the caller, not per attempt
        **(config or {}),
    }


def _committed(
    bootstrap: str,
    group: str,
    config: Mapping[str, str] | None,
    partitions: Sequence[TopicPartition],
    deadline: float,
) -> list[TopicPartition]:
    """The group's committed offsets (with their metadata), waiting out a loading coordinator."""
    reader = Consumer(_group_client(bootstrap, group, config))
    try:
        while True:
            try:
                return list(reader.committed(list(partitions), timeout=_left(deadline)))
            except KafkaException as exc:
                code = exc.args[0].code() if exc.args and hasattr(exc.args[0], "code") else None
                if code not in _COORDINATOR_MOVING or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        reader.close()


def _list_offsets(
    admin: AdminClient, partitions: Sequence[TopicPartition], spec: OffsetSpec, deadline: float
) -> dict[tuple[str, int], int]:
    futures = admin.list_offsets({tp: spec for tp in partitions}, request_timeout=_left(deadline))
    found: dict[tuple[str, int], int] = {}
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = int(future.result(timeout=_left(deadline)).offset)
        except KafkaException:
            continue
    return found
