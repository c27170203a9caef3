"""Kafka's serdes as Spark column expressions: bytes on the wire ↔ typed columns in the plan.

Encodings match Kafka's own serializers byte for byte (``StringSerializer`` UTF-8,
``IntegerSerializer``/``LongSerializer`` big-endian two's complement, ``DoubleSerializer`` IEEE 754
big-endian), so topics are shared with Java Kafka Streams apps. Numbers are read and written by JVM UDFs
(``KafkaSerdes.java``): Spark SQL cannot reinterpret bytes as a number under ANSI mode.
A null stays null in both directions (a tombstone stays a tombstone).

Decoding is strict: an ``int``/``long``/``double`` of the wrong length, a ``string`` that is not
UTF-8 and a ``json`` value that is not JSON are errors (:func:`problem` says why), never a null or
a mis-decoded number: :func:`readable` fails the micro-batch on such a value, naming the record
(topic, partition, offset) and the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamapp.runtime.spark import jvm_udfs

__all__ = ["WIDTHS", "decode", "encode", "problem", "readable", "record_name", "windowed_key_text"]

#: Byte widths of the fixed-width serdes (Kafka's IntegerSerializer, LongSerializer, DoubleSerializer).
WIDTHS = {"int": 4, "long": 8, "double": 8}


def problem(col: Column, serde: str) -> Column:
    """Why ``col`` (binary) is not a valid ``serde`` encoding; null when it is valid (or null)."""
    if serde in WIDTHS:
        length = F.octet_length(col).cast("string")
        return F.when(
            col.isNotNull() & ~_valid(col, serde),
            F.concat(F.lit(f"a {serde} is {WIDTHS[serde]} bytes, this value has "), length),
        )
    if serde in ("string", "json"):
        text = col.cast("string")
        invalid_utf8 = col.isNotNull() & ~_valid(col, "string")
        if serde == "string":
            return F.when(invalid_utf8, F.lit("not valid UTF-8"))
        return F.when(invalid_utf8, F.lit("not valid UTF-8")).when(
            col.isNotNull() & F.try_parse_json(text).isNull(), F.lit("not valid JSON")
        )
    return F.lit(None).cast("string")  # bytes: anything goes


def record_name(part: str) -> Column:
    """``value of record <topic>/<partition>@<offset>``, for messages about a source record."""
    return F.concat(
        F.lit(f"{part} of record "),
        F.col("topic"),
        F.lit("/"),
        F.col("partition").cast("string"),
        F.lit("@"),
        F.col("offset").cast("string"),
    )


def decode(col: Column, serde: str, *, schema: str | None = None) -> Column:
    """The typed column a serde reads from ``col`` (binary); :func:`readable` checks it first."""
    return _decode(col, serde, schema=schema)


def readable(df: DataFrame, serdes: Mapping[str, str]) -> DataFrame:
    """``df`` failing the micro-batch at a record whose binary column (a key of ``serdes``) its
    serde cannot read, with a message naming the record (its ``topic``, ``partition`` and
    ``offset``) and the reason.

    The check is a filter that keeps every row it does not fail, so that the decoded columns stay
    plain expressions: Spark's optimizer copies a column's expression into each later step that
    reads it (a filter pushed below a projection, for one), and a check inside the decoded column
    ran once per copy. Later filters are combined after it, and Spark evaluates a Python function
    of a filter only on the rows that passed the filter's other conditions, so no user code sees a
    value its serde cannot read.

    Without a ``json`` serde the filter's condition is the check alone (a length or a UTF-8 test
    per column) and the message a JVM UDF (``SourceProblem.java``) evaluated only for a record
    that fails it: the message as SQL (a ``concat`` per column naming the record and the reason)
    is most of the check's expression nodes, which Spark's optimizer walks again every
    micro-batch."""
    checked = {column: serde for column, serde in serdes.items() if serde != "bytes"}
    if not checked:
        return df
    if "json" not in checked.values() and len(checked) <= 2:
        columns = [F.col(column) for column in checked]
        valid = functools.reduce(
            lambda a, b: a & b,
            [col.isNull() | _valid(col, serde) for col, serde in zip(columns, checked.values(), strict=True)],
        )
        spec = ";".join(f"{column}:{serde}" for column, serde in checked.items())
        second = columns[1] if len(columns) == 2 else F.lit(None).cast("binary")
        message = jvm_udfs.call(
            "source_problem",
            F.lit(spec),
            columns[0],
            second,
            F.col("topic"),
            F.col("partition"),
            F.col("offset"),
            spark=df.sparkSession,
        )
        return df.where(F.when(valid, F.lit(True)).otherwise(F.raise_error(message)))
    checks = []
    for column, serde in checked.items():
        bad = problem(F.col(column), serde)
        reason = F.concat(
            record_name(column),
            F.lit(f" cannot be read with the {serde} serde: "),
            bad,
            F.lit(" (deserializationErrors: fail)"),
        )
        checks.append(F.when(bad.isNotNull(), F.raise_error(reason)).otherwise(F.lit(True)))
    return df.where(functools.reduce(lambda a, b: a & b, checks))


def _valid(col: Column, serde: str) -> Column:
    """Whether a non-null ``col`` (binary) is a valid ``serde`` encoding (fixed-width, string)."""
    if serde in WIDTHS:
        return F.octet_length(col) == WIDTHS[serde]
    return F.is_valid_utf8(col.cast("string"))


def _decode(col: Column, serde: str, *, schema: str | None = None) -> Column:
    if serde == "bytes":
        return col
    if serde == "string":
        return col.cast("string")
    if serde in ("long", "int"):
        return jvm_udfs.call(f"bytes_{serde}", col)
    if serde == "double":
        return jvm_udfs.call("bytes_double", col)
    if serde == "json":
        text = col.cast("string")
        return F.from_json(text, schema) if schema else text
    raise ValueError(f"unknown serde {serde!r}")


def windowed_key_text(key: Column, start: Column, end: Column) -> Column:
    """The bytes of the readable windowed key ``<key>@<start>/<end>`` (UTF-8; epoch ms)."""
    return jvm_udfs.call("windowed_key_text", key.cast("string").cast("binary"), start, end)


def encode(col: Column, serde: str, *, schema: str | None = None) -> Column:
    """The bytes a serde writes for ``col`` (typed)."""
    if serde == "bytes":
        return col.cast("binary")
    if serde == "string":
        return col.cast("string").cast("binary")
    if serde in ("long", "int"):
        return jvm_udfs.call(f"{serde}_bytes", col.cast("bigint"))
    if serde == "double":
        return jvm_udfs.call("double_bytes", col.cast("double"))
    if serde == "json":
        # A declared schema means a struct column; a raw JSON string is written as it is.
        return (
            F.when(col.isNull(), F.lit(None))
            .otherwise(F.to_json(col) if schema else col.cast("string"))
            .cast("binary")
        )
    raise ValueError(f"unknown serde {serde!r}")
