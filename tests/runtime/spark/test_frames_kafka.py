"""KStream operations on record frames, through the real broker and StreamApp's Kafka sink."""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import pandas as pd
from pyspark import cloudpickle

from streamapp.runtime.kafka import admin

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T0 = 1_700_000_000_000


def shout(values: pd.Series) -> pd.Series:
    return values.str.upper() + "!"


def key_len(keys: pd.Series, values: pd.Series) -> pd.Series:
    return keys.str.len() + values.str.len()


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _run(
    spark: SparkSession,
    bootstrap: str,
    source: str,
    sink: str,
    ckpt: pathlib.Path,
    build: Callable[..., object],
) -> None:
    from pyspark.sql import functions as F

    from streamapp.runtime.spark import frames, kafka_io
    from streamapp.runtime.spark import sink as sink_mod

    raw = kafka_io.read_stream(spark, bootstrap=bootstrap, topics=[source])
    frame = frames.RecordFrame.from_kafka(raw, key_serde="string", value_serde="string")
    out: frames.RecordFrame = build(frame)  # type: ignore[assignment]
    rows = out.df.select(
        F.col("key").cast("binary").alias("key"),
        F.col("value").cast("string").cast("binary").alias("value"),
        "headers",
        F.lit(sink).alias("topic"),
        "timestamp",
    )
    query = (
        rows.writeStream.foreachBatch(sink_mod.KafkaBatchWriter(bootstrap))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None


def _feed(bootstrap: str, topic: str) -> None:
    admin.produce(
        bootstrap,
        topic,
        [
            admin.Record(key=b"alice", value=b"hello world", headers=(("h", b"1"),), timestamp=T0 + 1),
            admin.Record(key=b"bob", value=b"bye", headers=(("h", b"2"),), timestamp=T0 + 2),
            admin.Record(key=b"carol", value=b"hello again you", timestamp=T0 + 3),
        ],
    )


def _out(bootstrap: str, topic: str, n: int) -> list[tuple[object, ...]]:
    records = admin.consume(bootstrap, topic, expected=n, timeout=60)
    return sorted((r.key, r.value, r.timestamp, r.headers) for r in records)


def test_filter_and_map_values_keep_timestamps_and_headers(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    from streamapp.runtime.spark.frames import Logic

    src, dst = new_topic(2), new_topic(2)
    _feed(kafka_bootstrap, src)
    _run(
        spark,
        kafka_bootstrap,
        src,
        dst,
        tmp_path,
        lambda f: f.filter(Logic(expr="value LIKE 'hello%'")).map_values(Logic(function=shout)),
    )
    assert _out(kafka_bootstrap, dst, 2) == [
        (b"alice", b"HELLO WORLD!", T0 + 1, (("h", b"1"),)),
        (b"carol", b"HELLO AGAIN YOU!", T0 + 3, ()),
    ]


def test_flat_map_values_select_key_and_keyed_function(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    from streamapp.runtime.spark.frames import Logic

    src, dst = new_topic(1), new_topic(1)
    _feed(kafka_bootstrap, src)
    _run(
        spark,
        kafka_bootstrap,
        src,
        dst,
        tmp_path,
        lambda f: (
            f.filter_not(Logic(expr="key = 'bob'"))
            if hasattr(f, "filter_not")
            else f.filter(Logic(expr="key = 'bob'"), negate=True)
            .flat_map_values(Logic(expr="explode(split(value, ' '))"))
            .select_key(Logic(expr="value"))
            .map_values(Logic(function=key_len, returns="int"))
        ),
    )
    got = _out(kafka_bootstrap, dst, 5)
    assert [(k, v, ts) for k, v, ts, _ in got] == [
        (b"again", b"10", T0 + 3),
        (b"hello", b"10", T0 + 1),
        (b"hello", b"10", T0 + 3),
        (b"world", b"10", T0 + 1),
        (b"you", b"6", T0 + 3),
    ]
