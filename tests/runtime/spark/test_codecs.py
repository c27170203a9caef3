"""Spark-side serdes produce exactly the bytes Kafka's Java serializers produce."""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

CASES = {
    "int": ("i", [0, 1, -1, 256, 2**31 - 1, -(2**31), None]),
    "long": ("q", [0, 1, -1, 2**63 - 1, -(2**63), 1_700_000_000_000, None]),
    "double": ("d", [0.0, 1.5, -2.25, 1e300, -0.0, float("inf"), float("-inf"), 5e-324, None]),
}


@pytest.mark.parametrize("serde", sorted(CASES))
def test_numeric_serdes_match_kafka_big_endian(spark: SparkSession, serde: str) -> None:
    from pyspark.sql import functions as F

    from streamapp.runtime.spark import codecs

    fmt, values = CASES[serde]
    wire = [(None if v is None else struct.pack(f">{fmt}", v),) for v in values]
    df = spark.createDataFrame(wire, "b binary")
    decoded = df.select(codecs.decode(F.col("b"), serde).alias("v"))
    assert [r.v for r in decoded.collect()] == values
    reencoded = decoded.select(codecs.encode(F.col("v"), serde).alias("b"))
    assert [None if r.b is None else bytes(r.b) for r in reencoded.collect()] == [w[0] for w in wire]


def test_a_double_nan_is_written_as_kafka_writes_it_not_as_a_tombstone(spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    from streamapp.runtime.spark import codecs

    nan = struct.pack(">d", float("nan"))  # Java's canonical NaN, 0x7ff8000000000000
    df = spark.createDataFrame([(nan,)], "b binary").select(codecs.decode(F.col("b"), "double").alias("v"))
    assert [r.v != r.v for r in df.collect()] == [True]  # NaN, not null
    written = df.select(codecs.encode(F.col("v"), "double").alias("b")).collect()
    assert [bytes(r.b) for r in written] == [nan]
    # Kafka's DoubleSerializer writes every NaN as the one NaN (Double.doubleToLongBits).
    payload = bytes.fromhex("7ff0000000000001")
    again = (
        spark.createDataFrame([(payload,)], "b binary")
        .select(codecs.encode(codecs.decode(F.col("b"), "double"), "double").alias("b"))
        .collect()
    )
    assert [bytes(r.b) for r in again] == [nan]


def test_string_and_json_serdes(spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    from streamapp.runtime.spark import codecs

    doc = {"amount": 120.5, "name": "zoë"}
    df = spark.createDataFrame([(json.dumps(doc).encode(),), (None,)], "b binary")
    row = df.select(codecs.decode(F.col("b"), "json", schema="amount DOUBLE, name STRING").alias("v")).first()
    assert row is not None and row.v.amount == 120.5 and row.v.name == "zoë"
    text = df.select(codecs.decode(F.col("b"), "string").alias("v")).collect()
    assert [r.v for r in text] == [json.dumps(doc), None]
    out = df.select(
        codecs.encode(
            codecs.decode(F.col("b"), "json", schema="amount DOUBLE, name STRING"), "json", schema="x"
        ).alias("b")
    ).collect()
    assert json.loads(bytes(out[0].b)) == doc and out[1].b is None


POISON = [
    ("long", b"\x00" * 7, "a long is 8 bytes, this value has 7"),
    ("int", b"\x00\x01\x02", "a int is 4 bytes, this value has 3"),
    ("double", b"\x00" * 4, "a double is 8 bytes, this value has 4"),
    ("double", b"\x00" * 9, "a double is 8 bytes, this value has 9"),
    ("string", b"ok \xff\xfe", "not valid UTF-8"),
    ("json", b'{"amount": 1', "not valid JSON"),
    ("json", b"\xff", "not valid UTF-8"),
]


@pytest.mark.parametrize(("serde", "raw", "reason"), POISON)
def test_a_value_the_serde_cannot_read_fails_naming_the_record_and_the_reason(
    spark: SparkSession, serde: str, raw: bytes, reason: str
) -> None:
    """Never a silent null or a mis-decoded number: the batch fails with topic/partition@offset."""
    from pyspark.sql import functions as F

    from streamapp.runtime.spark import codecs

    good = {
        "long": struct.pack(">q", 5),
        "int": struct.pack(">i", 5),
        "double": struct.pack(">d", 5.0),
        "string": b"five",
        "json": b'{"amount": 5}',
    }[serde]
    df = spark.createDataFrame(
        [(good, "orders", 2, 40), (None, "orders", 2, 41), (raw, "orders", 2, 42)],
        "value binary, topic string, partition int, offset long",
    )
    schema = "amount DOUBLE" if serde == "json" else None

    def decoded(rows: DataFrame) -> list[Row]:
        return (
            codecs.readable(rows, {"value": serde})
            .select(codecs.decode(F.col("value"), serde, schema=schema))
            .collect()
        )

    assert len(decoded(df.where("offset < 42"))) == 2  # the valid value and the tombstone pass
    with pytest.raises(Exception) as failure:  # Spark wraps it: the message is what matters
        decoded(df)
    message = str(failure.value)
    assert f"value of record orders/2@42 cannot be read with the {serde} serde: {reason}" in message, message


@pytest.mark.parametrize(
    ("serdes", "reason"),
    [
        # the key is checked first: a record with both unreadable names its key
        ({"key": "string", "value": "long"}, "key of record orders/1@7 cannot be read with the string serde"),
        ({"key": "bytes", "value": "long"}, "value of record orders/1@7 cannot be read with the long serde"),
        ({"key": "json", "value": "int"}, "key of record orders/1@7 cannot be read with the json serde"),
    ],
)
def test_a_record_with_key_and_value_unreadable_is_named_by_its_first_unreadable_column(
    spark: SparkSession, serdes: dict[str, str], reason: str
) -> None:
    """The check names the key first, whatever the serdes, and lets readable records and nulls
    through."""
    from streamapp.runtime.spark import codecs

    df = spark.createDataFrame(
        [
            (
                b"k",
                struct.pack(">q", 5) if serdes["value"] == "long" else struct.pack(">i", 5),
                "orders",
                1,
                5,
            ),
            (None, None, "orders", 1, 6),
            (b"\xff", b"abc", "orders", 1, 7),
        ],
        "key binary, value binary, topic string, partition int, offset long",
    )
    if serdes["key"] == "json":
        df = df.selectExpr(
            "if(offset = 5, binary('{}'), key) as key", "value", "topic", "partition", "offset"
        )
    assert [r.offset for r in codecs.readable(df.where("offset < 7"), serdes).collect()] == [5, 6]
    with pytest.raises(Exception) as failure:
        codecs.readable(df, serdes).collect()
    assert reason in str(failure.value), str(failure.value)
