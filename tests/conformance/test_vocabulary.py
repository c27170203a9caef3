"""The oracle's own correctness: every vocabulary entry's Java twin gives what Spark gives.

The oracle builds each topology in Kafka Streams with Java twins of the SQL expressions and Python
functions (Vocabulary.java); a twin that differs from its expression would make the oracle agree
with a wrong answer. Each entry is evaluated on a table of values by its twin in the JVM, by
Spark (an expression, in the tests' session with StreamApp's settings) or by Python (a function),
and the results must be equal, row by row.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import pathlib
import re
import sys
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import oracle

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEYS = [None, "a", "f", "u1"]
#: The values the suites produce (decimal digits, null); TEXT adds the shapes some expressions
#: parse (split on '|' and ':') and text whose case mapping depends on Unicode tables. An entry
#: that cannot take a TEXT value (a cast) must fail there on both sides or give the same.
DIGITS = [None, *map(str, range(10))]
TEXT = ["p|x", "c1:pear", ":pear", "ΟΔΟΣ", "Straße ﬃ", "İstanbul", "ǅemal"]
LONGS = [None, 0, 1, 7, -3, 2**40]
OTHERS = [None, "2", "y"]
FUNCTION = re.compile(r"[\w.]+:[\w.]+")  # a Python function's import path, not an expression


def _rows(entry: dict[str, Any]) -> list[dict[str, Any]]:
    role, kind = entry["role"], entry["in"]
    if role in ("adder", "subtractor"):
        return [
            {"key": k, "value": v, "other": a} for k, v, a in itertools.product(["a"], DIGITS, [0, 5, -2])
        ]
    if role == "reducer":
        return [{"key": None, "value": v, "other": a} for v, a in itertools.product(DIGITS[1:], ["3", "8"])]
    if role == "initializer":
        return [{"key": None, "value": None, "other": None}]
    values = LONGS if kind in ("long", "bigint") else DIGITS + TEXT
    if role == "foreignKey":
        # A null left value is a deletion: neither engine asks the extractor for its foreign key.
        # (Spark 4.2's generated code gives element_at(array literal, NULL index) a value there,
        # where interpreted Spark gives NULL.)
        values = [v for v in values if v is not None]
    others = OTHERS if role == "joiner" else [None]
    return [{"key": k, "value": v, "other": o} for k, v, o in itertools.product(KEYS, values, others)]


def _spark(spark: SparkSession, entry: dict[str, Any], rows: list[dict[str, Any]]) -> list[Any]:
    from pyspark.sql import functions as F

    kind = "bigint" if entry["in"] in ("long", "bigint") else "string"
    df = spark.createDataFrame(
        [(r["key"], r["value"], r["value"], r["other"]) for r in rows],
        f"key string, value {kind}, left {kind}, right string",
    )
    out = []
    for row in df.select(F.expr(entry["text"]).alias("r")).collect():
        value = row["r"]
        if isinstance(value, list):
            value = [v.asDict() if hasattr(v, "asDict") else v for v in value]
        out.append(value)
    return out


def _python(entry: dict[str, Any], rows: list[dict[str, Any]]) -> list[Any]:
    module, name = entry["text"].split(":")
    function = getattr(importlib.import_module(module), name)
    role = entry["role"]
    vectorized = "Series" in str(getattr(function, "__annotations__", {}).get("return", ""))
    arity = len(inspect.signature(function).parameters)
    out = []
    for r in rows:
        try:
            if vectorized:  # a pandas UDF (join_udfs): one row as Series of one element
                import pandas as pd

                # (value), (key, value) or (key, value, other), by the function's parameters
                columns = ("value",) if arity == 1 else ("key", "value", "other")[:arity]
                result = function(*(pd.Series([r[c]], dtype=object) for c in columns))[0]
                out.append(None if pd.isna(result) else result)
            elif role == "initializer":
                out.append(function())
            elif role == "reducer":
                out.append(function(r["other"], r["value"]))
            else:
                out.append(function(r["key"], r["value"], r["other"]))
        except Exception as exc:  # noqa: BLE001 - compared with the twin's failure
            out.append(f"ERROR: {type(exc).__name__}")
    return out


def test_every_java_twin_gives_what_spark_or_python_gives(spark: SparkSession) -> None:
    sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "runtime" / "spark"))  # join_udfs
    entries = oracle.vocabulary()
    assert len({e["text"] for e in entries}) == len(entries), "an entry is listed twice"
    rows = {e["text"]: _rows(e) for e in entries}
    java: dict[str, list[Any]] = {}
    shapes: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        shapes.setdefault(repr(rows[e["text"]]), rows[e["text"]])
    for shape in shapes.values():
        results = oracle.evaluate(shape)
        for e in entries:
            if rows[e["text"]] == shape:
                java[e["text"]] = results[e["text"]]
    wrong = []
    for e in entries:
        text, shape = e["text"], rows[e["text"]]
        theirs = java[text]
        if FUNCTION.fullmatch(text):
            ours = _python(e, shape)
            pairs = list(zip(shape, ours, theirs, strict=True))
        else:
            strict = [r for r in shape if r["value"] not in TEXT]
            loose = [r for r in shape if r["value"] in TEXT]
            ours = _spark(spark, e, strict)
            pairs = [
                (r, a, b)
                for r, a, b in zip(strict, ours, [theirs[shape.index(r)] for r in strict], strict=True)
            ]
            try:
                loose_ours = _spark(spark, e, loose) if loose else []
            except Exception:  # noqa: BLE001 - Spark refuses the value: the twin must fail too
                loose_ours = ["ERROR"] * len(loose)
            for r, a in zip(loose, loose_ours, strict=True):
                b = theirs[shape.index(r)]
                if not (a == "ERROR" and (b is None or str(b).startswith("ERROR"))):
                    pairs.append((r, a, b))
        for row, a, b in pairs:
            if isinstance(a, str) and a.startswith("ERROR") and isinstance(b, str) and b.startswith("ERROR"):
                continue
            if a != b:
                wrong.append(f"{e['role']} {text!r} on {row}: Spark/Python {a!r}, Java twin {b!r}")
    assert not wrong, f"{len(wrong)} disagreements:\n" + "\n".join(wrong[:40])
    print(f"vocabulary: {len(entries)} entries, {sum(len(r) for r in rows.values())} evaluations agree")
