"""The SQL that derives a foreign-key join's subscription messages agrees with the pure rules
(:func:`fk_join_logic.subscriptions`, whose unit tests pin them to Kafka Streams)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from streamapp.runtime.spark.stateful import fk_join_logic, fk_join_ops

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_the_sql_messages_are_the_rules_for_every_case(spark: SparkSession) -> None:
    values = [(None, None), ("x", None), ("x", "a"), ("y", "b")]  # (value, its foreign key)
    rows = [
        ("k", new, old, new_fk, old_fk, n)
        for n, ((old, old_fk), (new, new_fk)) in enumerate(itertools.product(values, values))
        if old is not None or new is not None
    ]
    df = spark.createDataFrame(
        [(*r[:5], 1, 100, 0, r[5]) for r in rows],
        "key string, value string, old string, new_fk string, old_fk string, ver bigint, ts bigint, "
        "partition int, offset bigint",
    )
    for left_join in (False, True):
        got: dict[int, list[tuple[str | None, int]]] = {}
        for m in fk_join_ops._messages(df, left_join=left_join).collect():
            got.setdefault(m["offset"] // 2, []).append((m["offset"] % 2, m["fk"], m["instr"]))
        for _, new, old, new_fk, old_fk, n in rows:
            expected = fk_join_logic.subscriptions(
                old_fk, new_fk, old=old is not None, new=new is not None, left_join=left_join
            )
            assert [(fk, instr) for _, fk, instr in sorted(got.get(n, []))] == expected, (old, new, left_join)
