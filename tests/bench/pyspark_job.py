"""Variant (b): the benchmark topologies hand-written in PySpark Structured Streaming.

What a PySpark user would write without StreamApp: Spark's own Kafka source and sink, no headers,
no record-timestamp handling, the same session configuration as the runtime (``build_session``:
local[2], the connector jars, RocksDB state, 2 shuffle partitions). Runs until SIGTERM, then stops
the query and the session.

The join is Spark's stream-static join, what a PySpark user reaches for: the table topic is read
once, at start, as a batch (the latest value per key) and every micro-batch joins with that
snapshot. It is not a KTable — an update of the table during the run is never seen — but the
benchmark writes the whole table before it launches a variant, so the output is the same.

Usage: python tests/bench/pyspark_job.py BOOTSTRAP TOPOLOGY INPUT OUTPUT CHECKPOINT [PROGRESS]
(TOPOLOGY: stateless, wordcount, join, tumbling or session; join reads the table's topic from
STREAMAPP_BENCH_TABLE; STREAMAPP_BENCH_MAX_OFFSETS bounds a micro-batch's records)
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sys
import threading
import time

from pyspark.sql import functions as F

from streamapp.runtime.spark import session as spark_session

sys.path.insert(0, str(pathlib.Path(__file__).with_name("probe")))
import bench_progress


def main(argv: list[str]) -> int:
    bootstrap, topology, source_topic, sink_topic, checkpoint = argv[:5]
    progress = argv[5] if len(argv) > 5 else None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    # --spark-conf of the harness: the same extra configuration as the StreamApp variants get.
    conf = json.loads(os.environ.get("STREAMAPP_BENCH_SPARK_CONF") or "{}")
    spark = spark_session.build_session(app_name=f"bench-pyspark-{topology}", conf=conf)
    if progress:
        bench_progress.install(spark, progress)
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source_topic)
        .option("startingOffsets", "earliest")
        # Generic tuning of Spark's Kafka reader that StreamApp's source also uses (kafka_io.py),
        # so the job is not handicapped against (a): 100,000 records per poll instead of 500, and
        # a broker that does not hold the next fetch 500 ms when no record is new (a micro-batch
        # reading the last records before the input went quiet waited for it: ~1 s).
        .option("kafka.max.poll.records", "100000")
        .option("kafka.fetch.max.wait.ms", "5")
    )
    if os.environ.get("STREAMAPP_BENCH_MAX_OFFSETS"):  # the windowed benchmark's bounded micro-batches
        reader = reader.option("maxOffsetsPerTrigger", os.environ["STREAMAPP_BENCH_MAX_OFFSETS"])
    reader = reader.load()
    lines = reader.select("key", F.col("value").cast("string").alias("value"))
    if topology == "stateless":
        out = lines.where(F.instr("value", "a") > 0).select("key", F.upper("value").alias("value"))
        mode = "append"
    elif topology == "wordcount":
        words = lines.select(F.explode(F.split(F.lower("value"), r"\W+")).alias("word")).where("word != ''")
        # The value as Kafka's LongSerializer writes it (8 bytes big-endian), like Kafka Streams.
        out = (
            words.groupBy("word")
            .count()
            .select(F.col("word").alias("key"), F.unhex(F.lpad(F.hex("count"), 16, "0")).alias("value"))
        )
        mode = "update"
    elif topology == "join":
        table = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", os.environ["STREAMAPP_BENCH_TABLE"])
            .option("startingOffsets", "earliest")
            .load()
            .groupBy("key")
            .agg(F.max_by(F.col("value").cast("string"), "offset").alias("right"))
            .where("right is not null")
            .cache()  # read once: Spark would otherwise re-read the topic for every micro-batch
        )
        out = lines.join(F.broadcast(table), "key").select(
            "key", F.concat("value", F.lit("@"), "right").alias("value")
        )
        mode = "append"
    elif topology in ("tumbling", "session"):
        # Spark's own event-time windows over the record timestamp, watermark = the 10 s grace.
        # A session window is append-only in Spark: written once the watermark passes its end.
        records = reader.select(F.col("key").cast("string").alias("key"), "timestamp").withWatermark(
            "timestamp", "10 seconds"
        )
        if topology == "tumbling":
            window, mode = F.window("timestamp", "1 minute"), "update"
        else:
            window, mode = F.session_window("timestamp", "5 minutes"), "append"
        counts = records.groupBy(window.alias("w"), "key").count()
        out = counts.select(
            F.concat_ws(
                "", "key", F.lit("@"), F.unix_millis("w.start").cast("string"), F.lit("/"),
                F.unix_millis("w.end").cast("string"),
            ).alias("key"),
            F.unhex(F.lpad(F.hex("count"), 16, "0")).alias("value"),
        )  # fmt: skip
    else:
        raise SystemExit(f"unknown topology {topology!r}")
    query = (
        out.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink_topic)
        .option("checkpointLocation", checkpoint)
        .outputMode(mode)
        .trigger(processingTime="0 seconds")
        .queryName(f"bench-{topology}")
        .start()
    )
    print(f"started {topology}", flush=True)
    try:
        while not stop.wait(0.5):
            if not query.isActive:
                print(f"query ended: {query.exception()}", file=sys.stderr, flush=True)
                return 1
    finally:
        time.sleep(1.0)  # let the progress probe write the last batches
        query.stop()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
