"""A stop lands between micro-batches: the batch being written finishes and is committed, the next
one is held before it reads anything, and a restart neither repeats nor skips a record."""

from __future__ import annotations

import itertools
import pathlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from streamapp.runtime.kafka import admin

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery


class _SlowSink:
    """Collects each batch's values and takes ``seconds`` over it, so a stop lands mid-write."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.batches: list[tuple[int, list[bytes]]] = []
        self.started: list[int] = []

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.started.append(batch_id)
        values = [bytes(r.value) for r in batch.select("value").collect()]
        time.sleep(self.seconds)
        self.batches.append((batch_id, values))


def _producing(bootstrap: str, topic: str, stop: threading.Event, sent: list[bytes]) -> None:
    i = 0
    while not stop.is_set():
        chunk = [f"v{i + j:05d}".encode() for j in range(5)]
        admin.produce(bootstrap, topic, [admin.Record(None, v) for v in chunk])
        sent.extend(chunk)
        i += 5
        time.sleep(0.1)


class _JavaSink:
    """A Python sink as a Java ``VoidFunction2`` (a py4j callback), for the JVM gate to wrap."""

    def __init__(self, spark: SparkSession, sink: Callable[[DataFrame, int], None]) -> None:
        self.spark, self.sink = spark, sink

    def call(self, jdf: object, batch_id: int) -> None:
        from pyspark.sql import DataFrame

        self.sink(DataFrame(jdf, self.spark), int(batch_id))  # type: ignore[arg-type]

    class Java:
        implements = ["org.apache.spark.api.java.function.VoidFunction2"]  # noqa: RUF012 - py4j's


def _start(
    spark: SparkSession, bootstrap: str, topic: str, checkpoint: str, sink: _SlowSink, gate_kind: str
) -> StreamingQuery:
    from pyspark.java_gateway import ensure_callback_server_started

    from streamapp.runtime.spark import kafka_io, stopping

    rows = kafka_io.read_stream(spark, bootstrap=bootstrap, topics=[topic])
    writer = rows.writeStream.option("checkpointLocation", checkpoint)
    gate: stopping.Gate | stopping.JvmGate
    if gate_kind == "python":
        gate = stopping.Gate(sink)
        writer = writer.foreachBatch(gate)
    else:  # the gate in the JVM (BatchGate.java) around the same sink
        gateway = spark.sparkContext._gateway
        assert gateway is not None
        ensure_callback_server_started(gateway)
        gate = stopping.JvmGate(gateway.jvm.io.streamapp.spark.BatchGate(_JavaSink(spark, sink)))
        writer._jwrite.foreachBatch(gate.java)
    query = writer.start()
    stopping.register(query, gate)
    return query


def _wait(predicate: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _committed_batches(checkpoint: pathlib.Path) -> Iterator[int]:
    return (int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


@pytest.mark.parametrize("gate_kind", ["python", "jvm"])
def test_graceful_stop_lets_the_running_batch_finish_and_restarts_without_repeats(
    spark: SparkSession,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    gate_kind: str,
) -> None:
    from streamapp.runtime.spark import stopping

    topic = new_topic(partitions=1)
    checkpoint = tmp_path / "checkpoint"
    sent: list[bytes] = []
    producing = threading.Event()
    producer = threading.Thread(target=_producing, args=(kafka_bootstrap, topic, producing, sent))
    producer.start()
    sinks: list[_SlowSink] = []
    reports = []
    try:
        for _ in range(3):
            sink = _SlowSink(seconds=1.5)
            sinks.append(sink)
            query = _start(spark, kafka_bootstrap, topic, str(checkpoint), sink, gate_kind)
            _wait(lambda s=sink: len(s.started) >= 2)  # a batch is being written now  # type: ignore[misc]
            report = stopping.graceful_stop(query, timeout_s=30)
            reports.append(report)
            assert not query.isActive
            assert report.clean, report
            # The batch that was writing when the stop came finished, and Spark committed it.
            assert report.waited_for_batch is not None, report
            assert report.last_batch == report.waited_for_batch == sink.batches[-1][0], (report, sink.started)
            assert max(_committed_batches(checkpoint)) == report.last_batch
            if report.how == "parked":
                assert stopping.stopped_at_boundary(query)
            else:
                assert query.exception() is None
    finally:
        producing.set()
        producer.join()
    # Drain what is left with a fresh query on the same checkpoint.
    last = _SlowSink(seconds=0)
    sinks.append(last)
    query = _start(spark, kafka_bootstrap, topic, str(checkpoint), last, gate_kind)
    _wait(lambda: sum(len(v) for s in sinks for _, v in s.batches) >= len(sent))
    stopping.graceful_stop(query, timeout_s=30)
    # Each restart begins with the batch after the last committed one: none ran twice, none lost.
    for before, after in itertools.pairwise(sinks):
        assert after.batches[0][0] == before.batches[-1][0] + 1, (before.started, after.started)
    written = [v for s in sinks for _, values in s.batches for v in values]
    assert sorted(written) == sorted(sent) and len(written) == len(set(written))
    # Each stop waited for at most one 1.5 s batch (plus polling), never for a timeout.
    assert all(r.seconds < 10 for r in reports), reports
    print("stop times:", [(r.how, round(r.seconds, 2)) for r in reports])


def test_the_stop_and_spark_shutdown_fit_in_the_driver_pods_grace_period() -> None:
    from streamapp.operator import desired
    from streamapp.runtime.spark import stopping

    assert stopping.DEFAULT_TIMEOUT_S + stopping.SHUTDOWN_BUDGET_S <= desired.GRACE_SECONDS


class _Fence:
    """A fence whose deadline the test sets (the Lease's, without an API server: e2e/test_fence
    checks the Lease itself)."""

    def __init__(self) -> None:
        self.seconds, self.reason = 60.0, "the test's deadline passed"
        self.listeners: list[Callable[[], None]] = []

    def check(self, batch_id: int) -> None:
        if self.seconds <= 0:
            raise RuntimeError(f"micro-batch {batch_id} not written: {self.reason}")

    def writable_for(self) -> tuple[float, str]:
        return self.seconds, self.reason

    def on_change(self, listener: Callable[[], None]) -> None:
        self.listeners.append(listener)

    def set(self, seconds: float, reason: str) -> None:
        self.seconds, self.reason = seconds, reason
        for listener in self.listeners:
            listener()


def test_the_jvm_gate_writes_until_the_fences_deadline_and_not_after_a_lost_lease(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """The sink of ``start_kafka`` is the JVM gate; the fence it was given decides each batch."""
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F

    from streamapp.runtime.spark import kafka_io, runner, stopping

    source, out = new_topic(partitions=1, suffix="in"), new_topic(partitions=1, suffix="out")
    fence = _Fence()
    stopping.set_fence(fence)
    try:
        rows = kafka_io.read_stream(spark, bootstrap=kafka_bootstrap, topics=[source])
        plan = rows.select("key", "value", F.lit(out).alias("topic"), "timestamp")
        query = runner.start_kafka(
            plan,
            bootstrap=kafka_bootstrap,
            checkpoint=str(tmp_path / "checkpoint"),
            trigger=runner.Trigger("micro-batch", interval="100 milliseconds"),
        )
    finally:
        stopping.set_fence(None)
    try:
        assert isinstance(stopping._GATES[str(query.id)], stopping.JvmGate)
        admin.produce(kafka_bootstrap, source, [admin.Record(None, b"first")])
        assert [r.value for r in admin.consume(kafka_bootstrap, out, expected=1, timeout=60)] == [b"first"]
        # A renewal pushed before the deadline extends it: the batch after the first deadline writes.
        fence.set(1.0, "Lease ns/app not renewed for 1.0 s")
        time.sleep(0.5)
        fence.set(60.0, "Lease ns/app not renewed for 60.0 s")
        time.sleep(0.7)
        admin.produce(kafka_bootstrap, source, [admin.Record(None, b"renewed")])
        written = admin.consume(kafka_bootstrap, out, expected=2, timeout=60)
        assert [r.value for r in written] == [b"first", b"renewed"]
        # No renewal: past the deadline the next batch fails before it writes.
        fence.set(1.0, "Lease ns/app not renewed for 1.0 s")
        time.sleep(1.2)
        admin.produce(kafka_bootstrap, source, [admin.Record(None, b"late")])
        refused = r"micro-batch \d+ not written: Lease ns/app not renewed for 1.0 s"
        with pytest.raises(StreamingQueryException, match=refused):
            query.awaitTermination(60)
    finally:
        stopping.graceful_stop(query, timeout_s=10)
    assert [r.value for r in admin.consume(kafka_bootstrap, out)] == [b"first", b"renewed"]
