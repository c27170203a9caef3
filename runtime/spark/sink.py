"""StreamApp's Kafka sink: writes each micro-batch with the record timestamps Kafka Streams would.

Spark's own Kafka sink cannot set a record's timestamp (it writes key, value, headers, topic and
partition; the broker stamps the write time), but Kafka Streams semantics give every output
record the timestamp of the input record it came from, or the max over an aggregate's inputs.
So each micro-batch goes to a writer that sets it, with the headers, and the explicit partition
or else the Java client's murmur2 of the key:

- ``engine="jvm"`` (the default): Java classes produce from the executors' JVMs, one idempotent
  producer per executor and configuration, reused across batches. At least once, the query writes
  to ``KafkaSink.java``, a streaming sink of Spark's as Spark's own Kafka sink is (the write is
  planned with the micro-batch; each task counts what it wrote per topic, for the metrics);
  exactly once, a ``foreachBatch`` function hands the batch's Dataset to
  ``TransactionalRecordWriter.java`` (:mod:`.jvm_sink`). No rows cross into Python: it costs what
  Spark's own sink costs.
- ``engine="python"``: the first implementation, librdkafka producers in the executors' Python
  workers (Arrow batches in), one per task. Kept as a reference for the JVM writer's behaviour
  (tests run both); nothing in the runtime selects it.

`print` rows are printed on the driver (:func:`print_rows`) and never reach either writer.

By default delivery is at-least-once, like Spark's own sink: the producers are idempotent (no
duplicates from the producer's own retries) but not transactional. A task waits until every record
is acknowledged and fails the micro-batch if any send failed, so the batch is never committed with
records missing; a batch that is retried or replayed after a crash is written again, so consumers
may see duplicates. With :class:`ExactlyOnce` (``processingGuarantee: exactly_once_v2``) each task
writes its part of the batch in a Kafka transaction with a marker, and a replayed part that is
already committed is not written again (``TransactionalRecordWriter.java``; the design is argued
in EXACTLY_ONCE.md beside this module). Spark's native sink is still used for the real-time
trigger, which accepts nothing else (and there output timestamps are write times; exactly-once is
refused there).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

__all__ = ["PRINT_PREFIX", "SINK_COLUMNS", "ExactlyOnce", "KafkaBatchWriter", "print_rows"]

#: Rows whose topic starts with this come from `print` steps: printed on the driver, never produced.
PRINT_PREFIX = "\x00print:"

#: Columns a frame handed to the sink carries: encoded key/value, headers, topic, timestamp
#: (Spark timestamp) and an optional partition (null: route by key).
SINK_COLUMNS = ("key", "value", "headers", "topic", "timestamp", "partition")

_RESULT_SCHEMA = "task_records long"

_log = logging.getLogger("streamapp.execution")


@dataclasses.dataclass(frozen=True)
class ExactlyOnce:
    """The names an exactly-once query writes under, stable for the life of its checkpoint: the
    transactional ids ``<prefix>-<task partition>``, and the member-less group that holds each
    partition's marker (the last batch id committed + 1) for partitions of ``marker_topic``."""

    transactional_prefix: str
    marker_topic: str
    marker_group: str
    fingerprint: str  # of the topology: recorded with each marker, to tell plans apart

    @classmethod
    def for_query(cls, app: str, checkpoint: str, fingerprint: str) -> ExactlyOnce:
        # A query is its checkpoint: a reset (new checkpoint) starts new ids and markers, a restart
        # on the same checkpoint gets the same ones and so fences the previous driver's producers.
        query = hashlib.sha256(checkpoint.encode()).hexdigest()[:12]
        name = f"streamapp.{app}.{query}"
        return cls(name, f"{name}.markers", f"{name}.markers", fingerprint)

    def metadata(self, batch_id: int) -> str:
        head, tail = self.metadata_parts()
        return f"{head}{batch_id}{tail}"

    def metadata_parts(self) -> tuple[str, str]:
        """The marker's metadata of batch ``n`` is ``head + str(n) + tail`` (the JVM gate builds it)."""
        head, tail = json.dumps(
            {"query": self.transactional_prefix, "batch": 0, "plan": self.fingerprint}
        ).split('"batch": 0', 1)
        return head + '"batch": ', tail


@dataclasses.dataclass(frozen=True)
class KafkaBatchWriter:
    """A ``foreachBatch`` function writing the batch's rows to Kafka; picklable to executors."""

    bootstrap: str
    #: Java client configuration for the JVM engine (librdkafka's for the Python engine); it may
    #: carry credentials, so it stays out of repr.
    producer_config: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False)
    prints: bool = False  # the plan has `print` rows: print them here, produce the rest
    #: ``jvm``: the executors' JVMs produce (jvm_sink; no rows cross into Python); ``python``:
    #: librdkafka producers in the Python workers (the first implementation, kept to compare).
    engine: str = "jvm"
    #: Set: write each batch exactly once (the JVM engine only).
    exactly_once: ExactlyOnce | None = None
    #: Set: the rows become records on the executors, through the writer's own path, and
    #: nothing is sent or printed (a standby driver's warm-up; the JVM engine only).
    dry_run: bool = False

    def __post_init__(self) -> None:
        if self.engine not in ("jvm", "python"):
            raise ValueError(f"unknown sink engine {self.engine!r} (jvm or python)")
        if self.dry_run and self.engine != "jvm":
            raise ValueError("a dry run needs the jvm engine")
        if self.exactly_once is not None and self.engine != "jvm":
            raise ValueError("exactly-once writes need the jvm engine (the python engine is at-least-once)")

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.dry_run:
            made = self.write(batch, batch_id)
            _log.info("warm-up: the sink's dry run made %d records of micro-batch %d", made, batch_id)
            return
        if not self.prints:
            self.write(batch, batch_id)
            return
        # Two actions on one batch: cache it so the sources are read once, not twice.
        batch.persist()
        try:
            self.write(print_rows(batch), batch_id)
        finally:
            batch.unpersist()

    def jvm_gate(self, jvm: Any) -> Any | None:
        """This writer as a ``foreachBatch`` function of the JVM (``BatchGate.java``: the stop gate
        and the fence around the JVM writer, no Python call per batch); None when the batches must
        come to Python (`print` rows, a dry run, the Python engine)."""
        if self.prints or self.dry_run or self.engine != "jvm":
            return None
        from streamapp.runtime.spark import jvm_sink  # noqa: PLC0415

        config = self.jvm_config()
        eos = self.exactly_once
        if eos is None:
            return jvm_sink.gate(jvm, config)
        names = (eos.transactional_prefix, eos.marker_topic, eos.marker_group)
        return jvm_sink.gate(jvm, config, transactional=(*names, *eos.metadata_parts()))

    def jvm_config(self) -> dict[str, str]:
        """The JVM writers' producer configuration."""
        return {"bootstrap.servers": self.bootstrap, **self.producer_config}

    def write(self, batch: DataFrame, batch_id: int | None = None) -> int | None:
        """Write every row (the Python engine returns the number of records acknowledged);
        exactly-once writes need the ``batch_id`` and return the number of records written, a
        dry run the number of records made."""
        bootstrap = self.bootstrap
        config = dict(self.producer_config)
        if self.engine == "jvm":
            from streamapp.runtime.spark import jvm_sink  # noqa: PLC0415

            if self.dry_run:
                eos = self.exactly_once
                return jvm_sink.dry_run(
                    batch,
                    {"bootstrap.servers": bootstrap, **config},
                    marker_topic=eos.marker_topic if eos else None,
                )
            if self.exactly_once is None:
                jvm_sink.write(batch, {"bootstrap.servers": bootstrap, **config})
                return None
            if batch_id is None:
                raise ValueError("an exactly-once write needs the micro-batch id")
            eos = self.exactly_once
            outcomes = jvm_sink.write_transactional(
                batch,
                {"bootstrap.servers": bootstrap, **config},
                transactional_prefix=eos.transactional_prefix,
                marker_topic=eos.marker_topic,
                marker_group=eos.marker_group,
                batch_id=batch_id,
                metadata=eos.metadata(batch_id),
            )
            skipped = sorted(partition for partition, _, skip in outcomes if skip)
            if skipped:
                # Why a replay wrote nothing for these: their transaction committed before a crash.
                print(
                    f"micro-batch {batch_id}: partition(s) {skipped} were committed before a restart; "
                    "not written again",
                    flush=True,
                )
            return sum(written for _, written, _ in outcomes)

        def produce(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            yield pa.RecordBatch.from_pydict({"task_records": [_produce_all(bootstrap, config, batches)]})

        counts = batch.mapInArrow(produce, _RESULT_SCHEMA).collect()
        return sum(int(row.task_records) for row in counts)


def print_rows(batch: DataFrame) -> DataFrame:
    """Print the batch's `print` rows as Kafka Streams does (``[label]: key, value``); return the rest."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    is_print = F.col("topic").startswith(PRINT_PREFIX)
    for row in batch.where(is_print).select("topic", "key", "value").collect():
        label = row.topic[len(PRINT_PREFIX) :]
        key = None if row.key is None else bytes(row.key).decode(errors="replace")
        value = None if row.value is None else bytes(row.value).decode(errors="replace")
        print(f"[{label}]: {key}, {value}", flush=True)
    return batch.where(~is_print | F.col("topic").isNull())


def _millis(column: pa.Array) -> list[int | None]:
    micros = column.cast(pa.timestamp("us")).cast(pa.int64()).to_pylist()
    return [None if m is None else m // 1000 for m in micros]


def _produce_all(bootstrap: str, config: dict[str, str], batches: Iterator[pa.RecordBatch]) -> int:
    from confluent_kafka import Producer  # noqa: PLC0415 - runs in the executor's Python worker

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 500000,
            "log_level": 3,
            **config,
        }
    )
    failures: list[str] = []
    sent = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for batch in batches:
        columns: dict[str, list[Any]] = {
            # Spark hands timestamps over as microseconds; Kafka wants epoch milliseconds.
            name: (_millis(batch.column(name)) if name == "timestamp" else batch.column(name).to_pylist())
            for name in batch.schema.names
        }
        keys, values, topics = columns["key"], columns["value"], columns["topic"]
        headers = columns.get("headers") or [None] * batch.num_rows
        stamps = columns.get("timestamp") or [None] * batch.num_rows
        partitions = columns.get("partition") or [None] * batch.num_rows
        for i in range(batch.num_rows):
            kwargs: dict[str, Any] = {"key": keys[i], "value": values[i], "on_delivery": on_delivery}
            if headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            if stamps[i] is not None:
                kwargs["timestamp"] = stamps[i]
            if partitions[i] is not None:
                kwargs["partition"] = partitions[i]
            while True:
                try:
                    producer.produce(topics[i], **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
            sent += 1
        producer.poll(0)
    unflushed = producer.flush(60)
    if unflushed or failures:
        raise RuntimeError(
            f"Kafka sink on {bootstrap}: {unflushed} records unacknowledged, {len(failures)} failed "
            f"(first: {failures[:1]}); the micro-batch will be retried"
        )
    return sent
