"""Kafka topics as streaming DataFrames: the only place that spells Spark's Kafka options.

A KStream is a streaming DataFrame with the columns of a Kafka record (key, value, topic,
partition, offset, timestamp, headers); the compiler builds on :func:`read_stream`, and the
real-time trigger's sink (:mod:`.runner`) takes :func:`client_options`. ``client_config`` is Java
client configuration (the connection's security, :meth:`security.Credentials.java`), passed to
Spark as ``kafka.*`` options: they travel with the plan to the executors, and Spark redacts the
secret ones (``spark.redaction.regex``, session.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "MICRO_BATCH_SOURCE_DEFAULTS",
    "RECORD_COLUMNS",
    "SOURCE_DEFAULTS",
    "client_options",
    "read_stream",
]

RECORD_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")

#: Consumer settings of the source (callers' options win). Spark's Kafka reader pays per poll, not
#: per record: each poll is a seek, the poll and two ListOffsets round trips to the broker (it
#: re-reads the partition's earliest and latest offset every time). With the client's default of
#: 500 records per poll that is 2,000 polls and 4,000 ListOffsets requests per million records;
#: with 100,000 a poll returns all that one fetch brought (max.partition.fetch.bytes, 1 MiB by
#: default), so the fetch size, not this, bounds the memory a poll holds.
SOURCE_DEFAULTS = {"kafka.max.poll.records": "100000"}

#: Consumer settings of the source under a micro-batch trigger (callers' options win). Those two
#: ListOffsets requests go out on the connection where the consumer's next fetch, sent ahead by the
#: poll, already waits at the broker, and a broker answers a connection's requests in order: they
#: wait until that fetch returns, at once while new records arrive, else after fetch.max.wait.ms
#: (500 ms by default). So the micro-batch that reads a partition's last records before the input
#: goes quiet (every micro-batch, when input is sparse) waited 500 ms per partition a task slot
#: reads in turn: measured at 4 records/s on 4 partitions and 2 slots, a record's latency p50 was
#: 1,040 ms against 100 ms with a 5 ms wait (tests/bench, `--rate 4`). A micro-batch reads only
#: offsets that exist, so it never needs the broker to wait for records. The real-time trigger
#: keeps the default: its long-lived tasks wait in the poll for new records, and a 5 ms wait made
#: them ask 200 times a second per partition (11x the executor CPU with sparse input) for no
#: shorter latency.
MICRO_BATCH_SOURCE_DEFAULTS = {"kafka.fetch.max.wait.ms": "5"}


def client_options(client_config: Mapping[str, str] | None) -> dict[str, str]:
    """Java client configuration as the options of Spark's Kafka source and sink (``kafka.`` prefix)."""
    return {f"kafka.{key}": value for key, value in (client_config or {}).items()}


def read_stream(
    spark: SparkSession,
    *,
    bootstrap: str,
    topics: Sequence[str],
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    options: Mapping[str, str] | None = None,
    client_config: Mapping[str, str] | None = None,
    micro_batch: bool = True,
) -> DataFrame:
    """A streaming DataFrame of the records of ``topics`` with headers included; ``micro_batch``:
    read by a micro-batch trigger (not the real-time one)."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", starting_offsets)
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "true")
    )
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    defaults = {**SOURCE_DEFAULTS, **(MICRO_BATCH_SOURCE_DEFAULTS if micro_batch else {})}
    for key, value in {**defaults, **client_options(client_config), **(options or {})}.items():
        reader = reader.option(key, value)
    return reader.load().select(*RECORD_COLUMNS)
