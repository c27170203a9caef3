"""StreamApp's Java UDFs (``runtime/spark/jvm``, in the jar :func:`jvm_sink.jar` builds and every
session loads) as Spark columns: one table of them, registered in the session where a plan uses
one (registering again replaces the same function; a query resolves it when its plan is analysed).
"""

from __future__ import annotations

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

__all__ = ["call"]

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
    "source_problem": ("io.streamapp.spark.SourceProblem", "string"),
}


def call(name: str, *columns: Column, spark: SparkSession | None = None) -> Column:
    """UDF ``name`` of :data:`_UDFS` applied to ``columns``, registered in ``spark`` (default: the
    active session)."""
    cls, returns = _UDFS[name]
    registered = f"streamapp_{name}"
    (spark or SparkSession.active()).udf.registerJavaFunction(registered, cls, returns)
    return F.call_udf(registered, *columns)
