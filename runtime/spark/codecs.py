"""Kafka's serdes as Spark column expressions: bytes on the wire ↔ typed columns in the plan.

Encodings match Kafka's own serializers byte for byte (``StringSerializer`` UTF-8,
``IntegerSerializer``/``LongSerializer`` big-endian two's complement, ``DoubleSerializer`` IEEE 754
big-endian), so topics are shared with Java Kafka Streams apps. Integers are converted in the JVM
with SQL functions; doubles, which Spark SQL cannot reinterpret, through a vectorised pandas UDF.
A null stays null in both directions (a tombstone stays a tombstone).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["decode", "encode"]


@F.pandas_udf(T.DoubleType())
def _bytes_to_double(data: pd.Series) -> pd.Series:
    out = np.full(len(data), np.nan)
    mask = data.notna().to_numpy()
    if mask.any():
        out[mask] = np.frombuffer(b"".join(data[mask]), dtype=">f8")
    result = pd.Series(out)
    result[~mask] = None
    return result


@F.pandas_udf(T.BinaryType())
def _double_to_bytes(data: pd.Series) -> pd.Series:
    mask = data.notna().to_numpy()
    raw = data.to_numpy(dtype="float64", na_value=0.0).astype(">f8").tobytes()
    return pd.Series([raw[8 * i : 8 * i + 8] if mask[i] else None for i in range(len(mask))], dtype=object)


def decode(col: Column, serde: str, *, schema: str | None = None) -> Column:
    """The typed column a serde reads from ``col`` (binary)."""
    hexed = F.hex(col)
    if serde == "bytes":
        return col
    if serde == "string":
        return col.cast("string")
    if serde == "long":
        return F.conv(hexed, 16, -10).cast("bigint")
    if serde == "int":
        sign = F.when(F.substring(hexed, 1, 1) >= F.lit("8"), F.lit("FFFFFFFF")).otherwise(F.lit("00000000"))
        return F.when(col.isNull(), F.lit(None)).otherwise(F.conv(F.concat(sign, hexed), 16, -10).cast("int"))
    if serde == "double":
        return _bytes_to_double(col)
    if serde == "json":
        text = col.cast("string")
        return F.from_json(text, schema) if schema else text
    raise ValueError(f"unknown serde {serde!r}")


def encode(col: Column, serde: str, *, schema: str | None = None) -> Column:
    """The bytes a serde writes for ``col`` (typed)."""
    if serde == "bytes":
        return col.cast("binary")
    if serde == "string":
        return col.cast("string").cast("binary")
    if serde == "long":
        return F.unhex(F.lpad(F.hex(col.cast("bigint")), 16, "0"))
    if serde == "int":
        return F.unhex(F.substring(F.lpad(F.hex(col.cast("bigint")), 16, "0"), 9, 8))
    if serde == "double":
        return _double_to_bytes(col.cast("double"))
    if serde == "json":
        # A declared schema means a struct column; a raw JSON string is written as it is.
        return (
            F.when(col.isNull(), F.lit(None))
            .otherwise(F.to_json(col) if schema else col.cast("string"))
            .cast("binary")
        )
    raise ValueError(f"unknown serde {serde!r}")
