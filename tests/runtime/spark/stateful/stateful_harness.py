"""The stateful Spark tests' harness: records into file topics, a query drained to rows."""

from __future__ import annotations

import itertools
import pathlib
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamapp.runtime.spark.frames import RecordFrame

#: (key, value, timestamp ms[, partition])
Rec = tuple[Any, ...]

_runs = itertools.count()


class Harness:
    """Write records as Parquet file topics and run a plan over them to completion."""

    def __init__(self, spark: SparkSession, root: pathlib.Path) -> None:
        self.spark, self.root = spark, root

    def frame(
        self,
        records: Sequence[Rec],
        *,
        split: Sequence[int] | None = None,
        per_trigger: int = 1,
        key_serde: str = "string",
    ) -> RecordFrame:
        """A record frame of ``records`` (string values; keys of ``key_serde``, string or long) in
        files of ``split`` records each."""
        from streamapp.runtime.spark import filetopics, frames

        topics = filetopics.FileTopics(self.root / f"topics-{next(_runs)}")
        sizes = list(split or [len(records)])
        pos = 0
        for size in sizes:
            chunk = records[pos : pos + size]
            pos += size
            topics.append(
                "in",
                [
                    filetopics.InputRecord(
                        key=None if r[0] is None else _key_bytes(r[0], key_serde),
                        value=None if r[1] is None else str(r[1]).encode(),
                        timestamp_ms=r[2],
                        partition=r[3] if len(r) > 3 else 0,
                    )
                    for r in chunk
                ],
            )
        assert pos == len(records)
        raw = (
            self.spark.readStream.schema(filetopics.KAFKA_ROW_SCHEMA)
            .option("maxFilesPerTrigger", str(per_trigger))
            .parquet(str(topics.folder("in")))
        )
        return frames.RecordFrame.from_kafka(raw, key_serde=key_serde, value_serde="string")

    def drain(self, df: DataFrame) -> list[dict[str, Any]]:
        """Run ``df`` (available-now) and return every row, with ``timestamp`` as epoch ms."""
        from pyspark.sql import functions as F

        rows: list[dict[str, Any]] = []

        def collect(batch: DataFrame, batch_id: int) -> None:
            if "timestamp" in batch.columns:
                batch = batch.withColumn("timestamp", F.unix_millis("timestamp"))
            rows.extend(r.asDict(recursive=True) | {"_batch": batch_id} for r in batch.collect())

        #: The last run's checkpoint (its state can be read with Spark's state data source).
        self.checkpoint = str(self.root / f"ckpt-{next(_runs)}")
        query = (
            df.writeStream.foreachBatch(collect)
            .outputMode("append")
            .option("checkpointLocation", self.checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
        self.batches = query.lastProgress["batchId"] + 1 if query.lastProgress else 0
        return rows


def table_view(rows: Sequence[dict[str, Any]], key: Callable[[dict[str, Any]], Any]) -> dict[Any, Any]:
    """The latest value per key of a changelog (tombstones delete)."""
    view: dict[Any, Any] = {}
    for row in rows:
        view[key(row)] = row["value"]
    return {k: v for k, v in view.items() if v is not None}


def _key_bytes(key: Any, serde: str) -> bytes:
    """A key as Kafka's serializer for ``serde`` writes it."""
    if serde == "long":
        return struct.pack(">q", key)
    assert serde == "string", serde
    return str(key).encode()
