"""errors.one_line: the line of a Spark failure that says what went wrong."""

from __future__ import annotations

from streamapp.runtime import errors

#: What a micro-batch failing inside foreachBatch looks like: py4j's proxy, a Python traceback,
#: and Spark's error (qualified, with its class) near the end.
PROXIED = """An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/venv/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
pyspark.errors.exceptions.captured.NumberFormatException: [CAST_INVALID_INPUT] The value 'oops!' of \
the type "STRING" cannot be cast to "INT" because it is malformed. SQLSTATE: 22018
== SQL (line 1, position 47) ==
...lower(if(value LIKE '%!%', cast(value AS int), value))
"""


def test_a_spark_error_behind_py4j_s_proxy_is_named_by_its_class() -> None:
    assert errors.one_line(Exception(PROXIED)) == (
        """[CAST_INVALID_INPUT] The value 'oops!' of the type "STRING" cannot be cast to "INT" because """
        "it is malformed."
    )


def test_a_user_function_s_own_error_still_wins() -> None:
    text = PROXIED.replace("== SQL", "ValueError: no closing quotation\n== SQL")
    assert errors.one_line(Exception(text)) == "ValueError: no closing quotation"


#: A task's failure as Spark reports the job (the JVM sink's error, no Python between).
TASK = """Job aborted due to stage failure: Task 0 in stage 0.0 failed 1 times, most recent failure: \
Lost task 0.0 in stage 0.0 (TID 0) (localhost executor driver): java.lang.RuntimeException: Kafka sink: \
1 record(s) failed (first: to topic out: org.apache.kafka.common.errors.RecordTooLargeException: The \
message is 2097241 bytes); not transient: the query stops
\tat io.streamapp.spark.KafkaRecordWriter.writePartition(KafkaRecordWriter.java:260)

Driver stacktrace:
=== Streaming Query ===
"""


def test_a_failed_tasks_own_error_is_the_line() -> None:
    assert errors.one_line(Exception(TASK)) == (
        "Kafka sink: 1 record(s) failed (first: to topic out: org.apache.kafka.common.errors."
        "RecordTooLargeException: The message is 2097241 bytes); not transient: the query stops"
    )
    # A Spark error in the task still reads by its class.
    classed = TASK.replace(
        "java.lang.RuntimeException: Kafka sink:",
        "org.apache.spark.SparkNumberFormatException: [CAST_INVALID_INPUT] x",
    )
    assert errors.one_line(Exception(classed)).startswith("[CAST_INVALID_INPUT] x 1 record(s)")
