"""A re-keyed record's task is the partition Kafka's own partitioner gives its serialised key.

Kafka Streams writes a record whose key changed to a repartition topic, with the producer's
default partitioner: murmur2 of the key's bytes, made positive, modulo the partitions. The task
(hence which keys share a stream time) follows. The oracle here is Kafka's own code, called in the
Spark JVM (``org.apache.kafka.common.utils.Utils``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from streamapp.runtime.spark import codecs
from streamapp.runtime.spark.stateful import engine

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _kafka_partition(spark: SparkSession, key: bytes, partitions: int) -> int:
    utils: Any = spark.sparkContext._jvm.org.apache.kafka.common.utils.Utils  # type: ignore[union-attr]
    return int(utils.toPositive(utils.murmur2(bytearray(key)))) % partitions


@pytest.mark.parametrize(
    ("ddl", "keys", "serde"),
    [
        ("k string", ["g0", "g1", "g2", "g3", "g4", "kafka", "", "ünï"], "string"),
        ("k bigint", [0, 1, 2, 42, -7, 1 << 40], "long"),
        ("k int", [0, 1, 2, 42, -7], "int"),
        ("k string", ["g0", "g1", "k9"], "bytes"),  # no default key serde: a text key's UTF-8
        ("k bigint", [3, 99], "bytes"),  # … and a number as its own serde writes it
    ],
)
def test_the_task_is_kafkas_partition_of_the_serialised_key(
    spark: SparkSession, ddl: str, keys: list[Any], serde: str
) -> None:
    df = spark.createDataFrame([(k,) for k in keys], ddl)
    for partitions in (3, 4, 7):
        tasks = engine.Tasks(partitions, key_serde=serde)
        got = df.select("k", engine.hash_task(df, "k", tasks).alias("t"))
        written = "long" if serde == "bytes" and ddl.endswith("bigint") else serde
        rows = got.select("k", "t", codecs.encode(got["k"], written).alias("b")).collect()
        assert [r["t"] for r in rows] == [_kafka_partition(spark, bytes(r["b"]), partitions) for r in rows]


def test_a_null_key_has_a_task_as_any_key(spark: SparkSession) -> None:
    """A left foreign-key join sends a row without a foreign key through the same tasks: a null
    task would be a group of its own, apart from the task's other records."""
    df = spark.createDataFrame([(None,), ("g1",)], "k string")
    for partitions in (1, 3):
        tasks = [
            r["t"]
            for r in df.select(engine.hash_task(df, "k", engine.Tasks(partitions)).alias("t")).collect()
        ]
        assert tasks[0] is not None and 0 <= tasks[0] < partitions
