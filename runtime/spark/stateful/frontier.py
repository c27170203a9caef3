"""Which records a task fed by several partitions may process now, and which it must hold back.

Why: Kafka Streams processes a task that reads several partitions (a ``merge`` or ``cogroup`` of
co-partitioned topics) in one order over their whole content: each partition by offset, next
always the partition whose head record is oldest; when one partition's buffer runs dry, the task
waits while the broker has more records for it (``PartitionGroup``; ``max.task.idle.ms`` 0 waits
only while the lag is not known to be zero). A micro-batch hands a task a *slice* of each
partition. When one slice ends before the others — a rate limit (``maxOffsetsPerTrigger``), or
records that arrived after Spark planned the batch — merging each batch on its own takes records
of the other partitions that Kafka Streams would take only after the next records of the dry one,
and which records are late then depends on the batch size (conformance ``mergeWindowed``,
``cogroupWindowed``: late 22 and 17 against Kafka Streams' 13).

So :func:`take` stops where a partition runs dry while the broker has records for it beyond the
batch, and the task keeps the rest in its state for a later batch. That batch comes: the
partition's data lies beyond the offsets Spark committed, so Spark plans another batch and its
rate limit gives every partition with a lag at least one record. :class:`Frontier` tells the two
ends apart: the batch's end offset of each partition is in the query's offset log (written before
the batch runs; the task knows its batch from Spark's local property ``streaming.sql.batchId``),
the partition's end is the broker's high watermark (last stable offset under
``read_committed``). The answer is recorded under the checkpoint, so that a retried batch holds
back what its first attempt held (exactly-once output needs replays to be deterministic).

Not covered: a partition whose remaining records all vanish before the aggregation (a filter,
null keys) keeps the others' held records until the task gets another record.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import json
import os
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Frontier", "take"]

_BATCH_ID = "streaming.sql.batchId"


@dataclasses.dataclass(frozen=True)
class Frontier:
    """Where the current micro-batch ends, per input partition, against the broker's end.

    ``checkpoint``: the query's checkpoint location (a folder, ``file:`` or another URI pyarrow
    can open); ``client_config``: librdkafka settings, ``bootstrap.servers`` and the connection's
    security included."""

    checkpoint: str
    client_config: tuple[tuple[str, str], ...]
    #: The topics a task reads a partition of each (its task's partition number): set where a
    #: step uses the frontier (:meth:`over`), so a partition none of whose records reached the
    #: step yet is waited for too.
    topics: tuple[str, ...] = ()

    @classmethod
    def of(cls, checkpoint: str, client_config: Mapping[str, str]) -> Frontier:
        return cls(checkpoint, tuple(sorted(client_config.items())))

    def over(self, topics: Iterable[str]) -> Frontier:
        """This frontier for a step whose tasks read a partition of each of ``topics``."""
        return dataclasses.replace(self, topics=tuple(sorted(topics)))

    def caught_up(self, topic: str, partition: int) -> bool:
        """Whether the broker has no record of ``topic``/``partition`` beyond this batch.

        The first answer in a batch is recorded under the checkpoint (``frontier/<batch>/``) and
        a retried batch reads it back: a replay holds back exactly what the first attempt held,
        whatever arrived at the broker since (exactly-once output needs deterministic replays)."""
        batch = _batch_id()
        end = self.batch_ends(batch).get((topic, partition))
        if end is None:
            return True  # not read by this query's Kafka sources: nothing to wait for
        root = f"{self.checkpoint.rstrip('/')}/frontier"
        record = f"{root}/{batch}/{topic}-{partition}"
        recorded = _read(record, missing_ok=True)
        if recorded is not None:
            return recorded == "caught up"
        answer = self.log_end(topic, partition) <= end
        _record(root, int(batch), record, "caught up" if answer else "behind")
        return answer

    def batch_ends(self, batch: str) -> dict[tuple[str, int], int]:
        """The end offset of every Kafka partition in ``batch``, from the offset log (read on each
        question: a few small reads per batch, and never stale after a checkpoint is reset)."""
        text = _read(f"{self.checkpoint.rstrip('/')}/offsets/{batch}")
        assert text is not None
        return parse_offset_log(text)

    def log_end(self, topic: str, partition: int) -> int:
        """The partition's end as the source's consumer sees it (high watermark or last stable
        offset, by the configuration's ``isolation.level``)."""
        from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

        # A consumer per question, closed at once: asked only where a dry partition would let
        # another go first, and a kept one would outlive its broker in Spark's reused workers.
        consumer = Consumer(
            {
                "group.id": "streamapp-frontier",  # never joins, never commits
                "enable.auto.commit": "false",
                **dict(self.client_config),
            }
        )
        try:
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=30, cached=False
            )
        finally:
            consumer.close()
        return int(high)


def parse_offset_log(text: str) -> dict[tuple[str, int], int]:
    """A Spark offset-log entry (``v1``, the batch metadata, one line per source) as the end
    offset per Kafka (topic, partition); sources of other kinds are skipped."""
    ends: dict[tuple[str, int], int] = {}
    for line in (raw.strip() for raw in text.splitlines()[2:]):
        if not line.startswith("{"):
            continue  # "-": a source without an offset yet
        offsets = json.loads(line)
        for topic, partitions in offsets.items():
            if isinstance(partitions, dict):
                for partition, offset in partitions.items():
                    ends[(topic, int(partition))] = int(offset)
    return ends


def _batch_id() -> str:
    from pyspark import TaskContext  # noqa: PLC0415  # executors only

    context = TaskContext.get()
    batch = context.getLocalProperty(_BATCH_ID) if context is not None else None
    if batch is None:
        raise RuntimeError("the merge frontier needs a streaming micro-batch (no streaming.sql.batchId)")
    return str(batch)


def _filesystem(location: str) -> tuple[Any, str]:
    """pyarrow's file system for a checkpoint path: a folder, ``file:``, or an object store or
    HDFS URI (as Spark's checkpoint allows)."""
    from pyarrow import fs  # noqa: PLC0415

    if "://" not in location and not location.startswith("file:"):
        return fs.LocalFileSystem(), os.path.abspath(location)
    if location.startswith("file:"):
        return fs.LocalFileSystem(), urllib.parse.urlparse(location).path
    return fs.FileSystem.from_uri(location)


def _read(location: str, *, missing_ok: bool = False) -> str | None:
    filesystem, path = _filesystem(location)
    try:
        with filesystem.open_input_stream(path) as stream:
            return bytes(stream.read()).decode("utf-8")
    except FileNotFoundError:
        if missing_ok:
            return None
        raise


#: Recorded answers of this many batches back are kept (a retry re-runs only the last batch).
_KEEP = 100


def _record(root: str, batch: int, location: str, text: str) -> None:
    """Write ``text`` to ``location`` whole (a temporary file renamed), and drop the answers of
    batches more than :data:`_KEEP` behind."""
    filesystem, path = _filesystem(location)
    filesystem.create_dir(os.path.dirname(path), recursive=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    with filesystem.open_output_stream(temporary) as stream:
        stream.write(text.encode("utf-8"))
    filesystem.move(temporary, path)
    from pyarrow import fs  # noqa: PLC0415

    _, root_path = _filesystem(root)
    for info in filesystem.get_file_info(fs.FileSelector(root_path, allow_not_found=True)):
        if info.base_name.isdigit() and int(info.base_name) < batch - _KEEP:
            filesystem.delete_dir(info.path)


def take(
    batch: pd.DataFrame,
    held: pd.DataFrame | None,
    memory: dict[str, Any],
    caught_up: Callable[[str, int], bool],
    topics: Iterable[str] = (),
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """A task's records (``held`` from earlier batches, then ``batch``) split into those it
    processes now, in Kafka Streams' order, and those it holds back.

    Rows carry ``sub`` (the source partition's identity), ``topic``, ``partition``, ``offset`` and
    ``ts``, and may carry ``rank``. ``memory`` is the task's own (kept in its state, updated in
    place): ``subs``, every source partition it has seen, as (topic, partition), and ``last``, the
    one it took its latest record from. ``caught_up(topic, partition)`` asks whether a partition
    has no records beyond this batch (asked only when a dry partition would let another go first).
    ``topics``: every topic the task reads its partition of — one whose records have all vanished
    before the step so far (null keys, a filter) is waited for as one that ran dry.

    Timestamp ties are Kafka Streams' too: its ``PartitionGroup`` keeps the partitions in a
    priority queue by head timestamp, and a partition that just gave a record goes back in behind
    those with an equal head. So on a tie the partition that waited longer goes first; at the
    start of a batch the one taken last waits, then the lower ``rank`` (a join's table side), then
    the lower ``sub``."""
    known: dict[int, tuple[str, int]] = memory.setdefault("subs", {})
    rows = batch if held is None or not len(held) else pd.concat([held, batch], ignore_index=True)
    rows = rows.sort_values(["sub", "offset"], kind="stable", ignore_index=True)
    subs = rows["sub"].to_numpy()
    starts = [0, *(i for i in range(1, len(subs)) if subs[i] != subs[i - 1])] if len(subs) else []
    expected = tuple(topics)
    topic_of, partitions = rows["topic"].to_numpy(), rows["partition"].to_numpy()
    for a in starts:
        known[int(subs[a])] = (str(topic_of[a]), int(partitions[a]))
    answers: dict[tuple[str, int], bool] = {}

    def done(source: tuple[str, int]) -> bool:
        if source not in answers:
            answers[source] = caught_up(*source)
        return answers[source]

    def dry_is_done(sub: int) -> bool:
        return done(known[sub])

    present = {int(subs[a]) for a in starts}
    absent = {known[s] for s in known if s not in present}
    if present:
        task = int(partitions[starts[0]])
        absent |= {(t, task) for t in expected} - {known[s] for s in present}
    if present and any(not done(source) for source in sorted(absent)):
        return rows.iloc[:0], rows  # a partition with nothing here may still go first
    ts = rows["ts"].to_numpy()
    ranks = rows["rank"].to_numpy() if "rank" in rows.columns else np.zeros(len(rows), dtype=np.int64)
    last = memory.get("last")
    queues = sorted(
        itertools.pairwise([*starts, len(subs)]),
        key=lambda q: (int(subs[q[0]]) == last, int(ranks[q[0]]), int(subs[q[0]])),
    )
    heads = [(int(ts[a]), seq, a, b) for seq, (a, b) in enumerate(queues)]
    heapq.heapify(heads)
    pushed = len(heads)
    order: list[int] = []
    offsets = rows["offset"].to_numpy()
    while heads:
        _, _, i, end = heapq.heappop(heads)
        j = i + 1
        while j < end and offsets[j] == offsets[i]:
            j += 1  # one source record fanned out (flatMapValues): processed as one, as in Kafka Streams
        order.extend(range(i, j))
        memory["last"] = int(subs[i])
        if j < end:
            heapq.heappush(heads, (int(ts[j]), pushed, j, end))  # behind equal heads
            pushed += 1
        elif heads and not dry_is_done(int(subs[i])):
            break  # its next record, still at the broker, may be older than the others' heads
    taken = rows.iloc[order].reset_index(drop=True)
    if len(order) == len(rows):
        return taken, None
    rest = rows.drop(index=order).reset_index(drop=True)
    return taken, rest
