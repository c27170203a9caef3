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
