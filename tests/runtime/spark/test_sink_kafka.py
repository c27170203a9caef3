"""StreamApp's Kafka sink, both engines: explicit timestamps, headers, partitions; failures fail the batch."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from streamapp.runtime.kafka import admin

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

T0 = 1_700_000_000_000


def _rows(spark: SparkSession, topic: str, partition: int | None) -> DataFrame:
    from pyspark.sql import functions as F

    base = spark.createDataFrame(
        [(b"k1", b"v1", T0 + 1), (None, b"v2", T0 + 2), (b"k3", None, T0 + 3)],
        "key binary, value binary, ts bigint",
    )
    headers = F.array(F.struct(F.lit("h").alias("key"), F.col("key").alias("value")))
    return base.select(
        "key",
        "value",
        F.when(F.col("key").isNotNull(), headers)
        .otherwise(F.array().cast("array<struct<key:string,value:binary>>"))
        .alias("headers"),
        F.lit(topic).alias("topic"),
        F.timestamp_millis("ts").alias("timestamp"),
        F.lit(partition).cast("int").alias("partition"),
    )


@pytest.mark.parametrize("engine", ["jvm", "python"])
def test_sink_writes_timestamps_headers_tombstones_and_explicit_partitions(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], engine: str
) -> None:
    from streamapp.runtime.spark import sink

    topic = new_topic(partitions=3)
    sink.KafkaBatchWriter(kafka_bootstrap, engine=engine).write(_rows(spark, topic, 2))
    records = sorted(
        admin.consume(kafka_bootstrap, topic, expected=3, timeout=60), key=lambda r: r.timestamp or 0
    )
    assert [(r.key, r.value, r.timestamp, r.headers, r.partition) for r in records] == [
        (b"k1", b"v1", T0 + 1, (("h", b"k1"),), 2),
        (None, b"v2", T0 + 2, (), 2),
        (b"k3", None, T0 + 3, (("h", b"k3"),), 2),  # a null value: a tombstone
    ]


def test_a_failed_send_fails_the_batch_in_the_jvm_writer_and_its_producer_is_closed(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    from streamapp.runtime.spark import sink

    topic = new_topic(partitions=1)
    client = f"{topic}-producer"
    writer = sink.KafkaBatchWriter(
        kafka_bootstrap, producer_config={"max.block.ms": "1500", "client.id": client}
    )
    with pytest.raises(
        Exception, match=r"Kafka sink: \d+ record\(s\) failed \(first: .*not present in metadata"
    ):
        writer.write(_rows(spark, topic, 5))  # the topic has no partition 5
    # local[2]: the executors' producers live in this JVM; the failed one is retired and closed.
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    threads = [str(t.getName()) for t in jvm.java.lang.Thread.getAllStackTraces().keySet().toArray()]
    assert not [name for name in threads if name.endswith(f"| {client}")]


def test_a_failed_batch_is_not_committed_and_is_written_when_the_query_restarts(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """Through a streaming query: the send failure fails the micro-batch (the query stops with it),
    the checkpoint does not commit it, and a restart writes its records with the input timestamps."""
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F

    from streamapp.runtime.spark import kafka_io, runner

    source, out = new_topic(partitions=1, suffix="in"), new_topic(partitions=1, suffix="out")
    sent = [
        admin.Record(key=f"k{i}".encode(), value=f"v{i}".encode(), headers=(("h", b"x"),), timestamp=T0 + i)
        for i in range(3)
    ]
    assert admin.produce(kafka_bootstrap, source, sent) == 3

    def start(partition: int, config: dict[str, str]) -> StreamingQuery:
        rows = kafka_io.read_stream(spark, bootstrap=kafka_bootstrap, topics=[source])
        plan = rows.select(
            "key",
            "value",
            "headers",
            F.lit(out).alias("topic"),
            "timestamp",
            F.lit(partition).cast("int").alias("partition"),
        )
        return runner.start_kafka(
            plan,
            bootstrap=kafka_bootstrap,
            checkpoint=str(tmp_path / "checkpoint"),
            trigger=runner.Trigger("available-now"),
            producer_config=config,
        )

    failing = start(5, {"max.block.ms": "1500"})  # the output topic has no partition 5
    with pytest.raises(StreamingQueryException, match=r"record\(s\) failed"):
        failing.awaitTermination(120)
    assert runner.written(failing, 0) is None  # the sink counts only what a committed batch wrote

    restarted = start(0, {})
    restarted.awaitTermination(120)
    assert restarted.exception() is None
    records = admin.consume(kafka_bootstrap, out, expected=3, timeout=60)
    assert sorted((r.key, r.value, r.timestamp, r.headers, r.partition) for r in records) == [
        (s.key, s.value, s.timestamp, s.headers, 0) for s in sent
    ]
    # Micro-batch 0 again: what it wrote, per topic, with the largest record timestamp.
    assert runner.written(restarted, 0) == {out: (3, T0 + 2)}


def test_the_monitor_reads_every_new_progress_report_with_what_its_batch_wrote(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """``runner.reports_after``: the reports after the one named, oldest first, each batch with the
    records the sink wrote; the reports of a query outgrow one py4j answer (6,000 characters), and
    reading them in several answers neither loses nor repeats one."""
    import json
    import time

    from pyspark.sql import functions as F

    from streamapp.runtime.spark import runner

    out = new_topic(partitions=1, suffix="out")
    rate = spark.readStream.format("rate").option("rowsPerSecond", 200).load()
    plan = rate.select(
        F.col("value").cast("string").cast("binary").alias("key"),
        F.col("value").cast("string").cast("binary").alias("value"),
        F.array().cast("array<struct<key:string,value:binary>>").alias("headers"),
        F.lit(out).alias("topic"),
        "timestamp",
        F.lit(None).cast("int").alias("partition"),
    )
    query = runner.start_kafka(
        plan, bootstrap=kafka_bootstrap, checkpoint=str(tmp_path / "checkpoint"), trigger=runner.Trigger()
    )
    try:
        deadline = time.monotonic() + 120
        while len(query._jsq.recentProgress()) < 15 and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        query.stop()
    jvm = spark.sparkContext._jvm
    expected = [json.loads(report.json()) for report in query._jsq.recentProgress()]
    assert len(expected) >= 15 and len(json.dumps(expected)) > 6000

    pairs = runner.reports_after(jvm, query, ("", -1))
    assert [report for report, _ in pairs] == expected
    ran = [(report, written) for report, written in pairs if report["numInputRows"]]
    assert ran
    for report, written in ran:
        assert written is not None and written[out][0] == report["numInputRows"], report["batchId"]
    named = expected[-5]
    later = runner.reports_after(jvm, query, (named["timestamp"], named["batchId"]))
    assert [report for report, _ in later] == expected[-4:]
    assert runner.reports_after(jvm, query, (expected[-1]["timestamp"], expected[-1]["batchId"])) == []
