"""KStream operations as DataFrame operations on a record frame.

A KStream compiles to a streaming DataFrame whose columns are those of a Kafka record — ``key``,
``value`` (typed by their serdes), ``timestamp``, ``headers``, ``partition``, ``offset``,
``topic``. Every operation here returns a new frame with the same columns, so operations compose
in any order and the sink always finds what it writes. Kafka Streams' timestamp rule holds
throughout: stateless operations, and every record a flatMap emits, keep the input record's
timestamp; headers pass through.

User logic is a Spark SQL expression over those columns, or a Python function run as a vectorised
pandas UDF: a function with one parameter receives the values (a pandas Series), one with two
receives keys and values, like Kafka Streams' ``ValueMapper`` and ``ValueMapperWithKey``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamapp.runtime.spark import codecs

__all__ = ["HEADERS", "RECORD_COLUMNS", "Logic", "RecordFrame"]

#: The Kafka headers column's type (``array<struct<key:string,value:binary>>``) as a type object:
#: casting to it as that DDL string parses it with Spark's SQL parser, whose first parse of a
#: nested type costs ~300 ms on a new driver JVM (20 ms from the object), before the first trigger.
HEADERS = T.ArrayType(
    T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
)

RECORD_COLUMNS = ("key", "value", "timestamp", "headers", "partition", "offset", "topic")


@dataclasses.dataclass(frozen=True)
class Logic:
    """User logic: exactly one of a SQL expression or a Python function (with its result type)."""

    expr: str | None = None
    function: Callable[..., Any] | None = None
    returns: str | None = None  # Spark DDL type of a function's result; None: same as the input

    def __post_init__(self) -> None:
        if (self.expr is None) == (self.function is None):
            raise ValueError("logic needs exactly one of an expression or a function")


def _arity(function: Callable[..., Any]) -> int:
    params = [
        p
        for p in inspect.signature(function).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return len(params)


@dataclasses.dataclass(frozen=True)
class RecordFrame:
    """A streaming (or, in tests, static) DataFrame of records plus the type of key and value."""

    df: DataFrame

    @staticmethod
    def from_kafka(
        df: DataFrame,
        *,
        key_serde: str,
        value_serde: str,
        value_schema: str | None = None,
        key_schema: str | None = None,
    ) -> RecordFrame:
        """Decode the binary key/value of Kafka source rows with their serdes."""
        return RecordFrame(
            codecs.readable(df, {"key": key_serde, "value": value_serde}).select(
                codecs.decode(F.col("key"), key_serde, schema=key_schema).alias("key"),
                codecs.decode(F.col("value"), value_serde, schema=value_schema).alias("value"),
                F.col("timestamp"),
                F.col("headers"),
                F.col("partition"),
                F.col("offset"),
                F.col("topic"),
            )
        )

    def _type(self, column: str) -> T.DataType:
        return self.df.schema[column].dataType

    # -- evaluation of user logic --------------------------------------------------------------

    def evaluate(self, logic: Logic, *, default_type: str | None = None) -> Column:
        """The column user logic computes for each record."""
        if logic.expr is not None:
            return F.expr(logic.expr)
        assert logic.function is not None
        returns = logic.returns or default_type or self._type("value").simpleString()
        return self._udf(logic.function, returns)

    def _udf(self, function: Callable[..., Any], returns: str) -> Column:
        arity = _arity(function)
        name = getattr(function, "__qualname__", "function")
        if arity == 1:

            def one(values: pd.Series) -> pd.Series:
                return pd.Series(function(values))

            one.__name__ = name
            return F.pandas_udf(one, returns)(F.col("value"))
        if arity == 2:

            def two(keys: pd.Series, values: pd.Series) -> pd.Series:
                return pd.Series(function(keys, values))

            two.__name__ = name
            return F.pandas_udf(two, returns)(F.col("key"), F.col("value"))
        raise TypeError(f"{name} takes {arity} parameters; expected (value) or (key, value)")

    def _with(self, **columns: Column) -> RecordFrame:
        return RecordFrame(self.df.select(*[columns.get(c, F.col(c)).alias(c) for c in RECORD_COLUMNS]))

    # -- KStream operations ----------------------------------------------------------------------

    def filter(self, predicate: Logic, *, negate: bool = False) -> RecordFrame:
        condition = self.evaluate(predicate, default_type="boolean")
        # SQL three-valued logic: a null predicate drops the record in both filter and filterNot.
        return RecordFrame(self.df.where(~condition if negate else condition))

    def map_values(self, mapper: Logic) -> RecordFrame:
        return self._with(value=self.evaluate(mapper))

    def select_key(self, mapper: Logic) -> RecordFrame:
        key_type = self._type("key").simpleString()
        column = F.expr(mapper.expr) if mapper.expr else self._udf_key(mapper, key_type)
        return self._with(key=column)

    def _udf_key(self, mapper: Logic, default: str) -> Column:
        assert mapper.function is not None
        return self._udf(mapper.function, mapper.returns or default)

    def map(self, key: Logic, value: Logic) -> RecordFrame:
        key_col = F.expr(key.expr) if key.expr else self._udf_key(key, self._type("key").simpleString())
        return self._with(key=key_col, value=self.evaluate(value))

    def flat_map_values(self, mapper: Logic) -> RecordFrame:
        """One output record per element of the array the mapper returns (same key, timestamp)."""
        if mapper.expr is not None:
            values = F.expr(mapper.expr)
            # `explode(...)` in an expression is a generator; anything else must be an array.
            if mapper.expr.strip().lower().startswith(("explode(", "explode_outer(", "posexplode(")):
                exploded = self.df.select(*[c for c in RECORD_COLUMNS if c != "value"], values.alias("value"))
                return RecordFrame(exploded.select(*RECORD_COLUMNS))
        else:
            element = mapper.returns or self._type("value").simpleString()
            values = self._udf(mapper.function, f"array<{element}>")  # type: ignore[arg-type]
        return self._with(value=F.explode(values))

    def flat_map(self, mapper: Logic) -> RecordFrame:
        """The mapper returns an array of (key, value) structs; one record per element."""
        pairs = self.evaluate(mapper)
        exploded = self.df.select(
            *[c for c in RECORD_COLUMNS if c not in ("key", "value")], F.explode(pairs).alias("_kv")
        )
        return self._from_pairs(exploded)

    def _from_pairs(self, df: DataFrame) -> RecordFrame:
        return RecordFrame(
            df.select(
                F.col("_kv.key").alias("key"),
                F.col("_kv.value").alias("value"),
                *[c for c in RECORD_COLUMNS if c not in ("key", "value")],
            )
        )

    def peek(self, action: Callable[..., Any]) -> RecordFrame:
        """Call ``action`` on each batch of records (pandas), passing them through unchanged."""
        arity = _arity(action)
        schema = self.df.schema

        def run(batches: Any) -> Any:
            for batch in batches:
                if len(batch):
                    action(batch["key"], batch["value"]) if arity == 2 else action(batch["value"])
                yield batch

        return RecordFrame(self.df.mapInPandas(run, schema))

    def merge(self, *others: RecordFrame) -> RecordFrame:
        df = self.df
        for other in others:
            df = df.unionByName(other.df)
        return RecordFrame(df)

    def to_kafka_rows(
        self, *, topic: str, key_serde: str, value_serde: str, partition: Column | None = None
    ) -> DataFrame:
        """Rows for Spark's Kafka sink: encoded key/value, headers, target topic (and partition)."""
        cols = [
            codecs.encode(F.col("key"), key_serde, schema=_schema_marker(self._type("key"))).alias("key"),
            codecs.encode(F.col("value"), value_serde, schema=_schema_marker(self._type("value"))).alias(
                "value"
            ),
            F.col("headers"),
            F.lit(topic).alias("topic"),
        ]
        if partition is not None:
            cols.append(partition.cast("int").alias("partition"))
        return self.df.select(*cols)


def _schema_marker(data_type: T.DataType) -> str | None:
    """JSON serde: structs, arrays and maps are written with to_json, plain strings as they are."""
    return "struct" if isinstance(data_type, (T.StructType, T.ArrayType, T.MapType)) else None
