"""StreamApp's Java UDFs (in its JVM library, ``runtime/jvm``, which every session loads) as Spark
columns: one table of them, registered in the session where a plan uses one (registering again
replaces the same function; a query resolves it when its plan is analysed).
"""

from __future__ import annotations

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = ["call"]

_SERDES = "io.streamapp.spark.KafkaSerdes$"
#: name → (class, return type): type objects, not DDL strings, which Spark's SQL parser would parse
#: (tens of ms each on a new driver JVM, before the first trigger)
_UDFS = {
    "long_bytes": (f"{_SERDES}LongBytes", T.BinaryType()),
    "int_bytes": (f"{_SERDES}IntBytes", T.BinaryType()),
    "bytes_long": (f"{_SERDES}BytesLong", T.LongType()),
    "bytes_int": (f"{_SERDES}BytesInt", T.IntegerType()),
    "double_bytes": (f"{_SERDES}DoubleBytes", T.BinaryType()),
    "bytes_double": (f"{_SERDES}BytesDouble", T.DoubleType()),
    "windowed_key_text": (f"{_SERDES}WindowedKeyText", T.BinaryType()),
    "kafka_partition": ("io.streamapp.spark.KafkaPartition", T.IntegerType()),
    "task_key": ("io.streamapp.spark.TaskKey", T.IntegerType()),
    "source_problem": ("io.streamapp.spark.SourceProblem", T.StringType()),
}


def call(name: str, *columns: Column, spark: SparkSession | None = None) -> Column:
    """UDF ``name`` of :data:`_UDFS` applied to ``columns``, registered in ``spark`` (default: the
    active session)."""
    cls, returns = _UDFS[name]
    registered = f"streamapp_{name}"
    (spark or SparkSession.active()).udf.registerJavaFunction(registered, cls, returns)
    return F.call_udf(registered, *columns)
