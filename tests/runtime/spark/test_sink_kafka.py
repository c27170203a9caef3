"""StreamApp's Kafka sink, both engines: explicit timestamps, headers, partitions; failures fail the batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from streamapp.runtime.kafka import admin

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

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


def test_a_failed_send_fails_the_batch_in_the_jvm_writer(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    from streamapp.runtime.spark import sink

    topic = new_topic(partitions=1)
    writer = sink.KafkaBatchWriter(kafka_bootstrap, producer_config={"max.block.ms": "1500"})
    with pytest.raises(
        Exception, match=r"Kafka sink: \d+ record\(s\) failed \(first: .*not present in metadata"
    ):
        writer.write(_rows(spark, topic, 5))  # the topic has no partition 5
