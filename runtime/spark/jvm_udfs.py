"""StreamApp's Java UDFs (``runtime/spark/jvm``, in the jar :func:`jvm_sink.jar` builds and every
session loads) as Spark columns: one table of them, registered in the session where a plan uses
one (registering again replaces the same function; a query resolves it when its plan is analysed).
A source's readability check (:func:`source_check`) is registered per check, as UDF objects that
carry its columns and serdes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

__all__ = ["call", "source_check"]

_SERDES = "io.streamapp.spark.KafkaSerdes$"
#: name → (class, return type)
_UDFS = {
    "long_bytes": (f"{_SERDES}LongBytes", "binary"),
    "int_bytes": (f"{_SERDES}IntBytes", "binary"),
    "bytes_long": (f"{_SERDES}BytesLong", "bigint"),
    "bytes_int": (f"{_SERDES}BytesInt", "int"),
    "double_bytes": (f"{_SERDES}DoubleBytes", "binary"),
    "bytes_double": (f"{_SERDES}BytesDouble", "double"),
    "windowed_key_text": (f"{_SERDES}WindowedKeyText", "binary"),
    "kafka_partition": ("io.streamapp.spark.KafkaPartition", "int"),
    "task_key": ("io.streamapp.spark.TaskKey", "int"),
}


def call(name: str, *columns: Column, spark: SparkSession | None = None) -> Column:
    """UDF ``name`` of :data:`_UDFS` applied to ``columns``, registered in ``spark`` (default: the
    active session)."""
    cls, returns = _UDFS[name]
    registered = f"streamapp_{name}"
    (spark or SparkSession.active()).udf.registerJavaFunction(registered, cls, returns)
    return F.call_udf(registered, *columns)


def source_check(
    names: Sequence[str], serdes: Sequence[str], *, spark: SparkSession
) -> tuple[Callable[..., Column], Callable[..., Column]]:
    """The check of ``SourceCheck.java`` that columns ``names`` are readable by ``serdes`` (one or
    two; string and fixed-width serdes): ``valid(*columns)`` (boolean) and ``message(*columns,
    topic, partition, offset)`` (why the record is not readable, null if it is), registered in
    ``spark`` under names of that check."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    check_class = jvm.io.streamapp.spark.SourceCheck
    strings = spark.sparkContext._gateway.new_array(jvm.java.lang.String, len(names))
    kinds = spark.sparkContext._gateway.new_array(jvm.java.lang.String, len(serdes))
    for index, (name, serde) in enumerate(zip(names, serdes, strict=True)):
        strings[index], kinds[index] = name, serde
    check = check_class(strings, kinds)
    arity = len(names)
    suffix = "_".join(f"{name}_{serde}" for name, serde in zip(names, serdes, strict=True))
    types = jvm.org.apache.spark.sql.types.DataTypes
    registered = []
    for kind, returns in (("Valid", types.BooleanType), ("Message", types.StringType)):
        name = f"streamapp_{kind.lower()}_{suffix}"
        udf = getattr(jvm.io.streamapp.spark, f"SourceCheck${kind}{arity}")(check)
        spark._jsparkSession.udf().register(name, udf, returns)
        registered.append(name)
    valid, message = registered
    return (
        lambda *columns: F.call_udf(valid, *columns),
        lambda *columns: F.call_udf(message, *columns),
    )
