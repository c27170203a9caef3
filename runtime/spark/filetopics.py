"""Topics as folders of Parquet files: the broker-less source and sink of the test driver.

A topology compiled for the test driver reads the same Kafka-shaped rows (binary key and value,
topic, partition, offset, timestamp, headers) it would read from Kafka, from one Parquet file per
``pipe_input`` call, through Spark's streaming file source, so the plan, its state and its
watermarks behave as they do on Kafka. Each file is one micro-batch (``maxFilesPerTrigger=1``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import pathlib
import time
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

__all__ = ["KAFKA_ROW_SCHEMA", "FileTopics", "InputRecord"]

KAFKA_ROW_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>"
)

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
)


@dataclasses.dataclass(frozen=True)
class InputRecord:
    """One record piped into a test topic (already serialized)."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...] = ()
    partition: int = 0


class FileTopics:
    """Folders of Parquet files under ``root``, one folder per topic."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self._offsets: dict[tuple[str, int], int] = {}
        self._files = 0
        self._last_mtime_ms = 0

    def folder(self, topic: str) -> pathlib.Path:
        path = self.root / topic
        path.mkdir(parents=True, exist_ok=True)
        return path

    def append(self, topic: str, records: Sequence[InputRecord]) -> None:
        """Write one file (one future micro-batch) of records to ``topic``."""
        rows: dict[str, list[object]] = {name: [] for name in _ARROW_SCHEMA.names}
        for record in records:
            offset = self._offsets.get((topic, record.partition), 0)
            self._offsets[topic, record.partition] = offset + 1
            rows["key"].append(record.key)
            rows["value"].append(record.value)
            rows["topic"].append(topic)
            rows["partition"].append(record.partition)
            rows["offset"].append(offset)
            rows["timestamp"].append(_EPOCH + dt.timedelta(milliseconds=record.timestamp_ms))
            rows["timestampType"].append(0)
            rows["headers"].append([{"key": k, "value": v} for k, v in record.headers])
        self._files += 1
        table = pa.Table.from_pydict(rows, schema=_ARROW_SCHEMA)
        path = self.folder(topic) / f"batch-{self._files:08d}.parquet"
        pq.write_table(table, path)
        # Spark's file source takes the oldest files first, by modification time in milliseconds,
        # and files written within one millisecond in directory order, which is no order at all:
        # micro-batches then came out of write order (a flaky "same result whatever the batch
        # sizes" test). Each file gets a later millisecond than the one before.
        stamp = max(time.time_ns() // 1_000_000, self._last_mtime_ms + 1)
        self._last_mtime_ms = stamp
        os.utime(path, ns=(stamp * 1_000_000, stamp * 1_000_000))

    def read_stream(self, spark: SparkSession, topics: Sequence[str]) -> DataFrame:
        frames = [
            spark.readStream.schema(KAFKA_ROW_SCHEMA)
            .option("maxFilesPerTrigger", "1")
            .parquet(str(self.folder(topic)))
            for topic in topics
        ]
        df = frames[0]
        for other in frames[1:]:
            df = df.unionByName(other)
        return df
