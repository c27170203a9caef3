"""What the compiler puts in a plan, read from the plan itself (a static frame stands for Kafka)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_a_grouping_observes_null_keys_only_where_the_key_can_be_null(spark: SparkSession) -> None:
    """Kafka Streams drops (and counts) null-key records at a grouping: an observation counts them.
    A key that cannot be null (the words of explode(split(...))) is not observed: nothing to drop."""
    from streamapp.runtime import Serdes, StreamsBuilder
    from streamapp.runtime.spark import compiler

    kafka_rows = spark.createDataFrame(
        [],
        "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
        "timestampType int, headers array<struct<key:string,value:binary>>",
    )

    def dropped(words: bool) -> list[str]:
        b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
        stream = b.stream("in")
        if words:
            grouped = stream.flat_map_values("explode(split(lower(value), ' '))").group_by("value")
        else:
            grouped = stream.group_by_key()
        grouped.count().to_stream().to("out")
        compiled = compiler.compile_topology(b.build(), read=lambda _topics, **_: kafka_rows)
        return [name for name, (kind, _) in compiled.error_counts.items() if kind == "dropped"]

    assert dropped(words=False) == ["streamapp_dropped_0"]
    assert dropped(words=True) == []


def test_the_compiled_plan_is_the_optimizers_so_each_micro_batch_starts_from_it(spark: SparkSession) -> None:
    """Each micro-batch optimizes the query's plan again: the compiler hands Spark the optimized plan
    (a word count: its projections per step collapsed), which another optimization leaves as it is."""
    from streamapp.runtime import Serdes, StreamsBuilder
    from streamapp.runtime.spark import compiler

    kafka_rows = spark.readStream.format("rate").load().selectExpr(
        "cast(null as binary) key", "cast(cast(value as string) as binary) value", "'in' topic",
        "0 partition", "value offset", "timestamp", "0 timestampType",
        "cast(array() as array<struct<key:string,value:binary>>) headers",
    )  # fmt: skip
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    words = b.stream("in").flat_map_values("explode(split(lower(value), ' '))").filter("value != ''")
    words.group_by("value").count().to_stream().to("out", value_serde=Serdes.Long())
    plan = compiler.compile_topology(b.build(), read=lambda _topics, **_: kafka_rows).plan
    analyzed = plan._jdf.queryExecution().analyzed()
    again = spark._jsparkSession.sessionState().optimizer().execute(analyzed)
    assert again.toString() == analyzed.toString()
    operators = analyzed.toString().count("+- ")
    assert operators <= 6, analyzed.toString()
