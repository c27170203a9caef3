"""Python functions the conformance manifests reference (``conformance_functions:name``): the
same arithmetic as the lambdas of Scenarios.java. Values arrive as the decimal strings of the
input topics; aggregates are ints (bigint). A windowed aggregation hands a null value to its adder,
as Kafka Streams does: the adders add nothing for it, as the Java lambdas do."""

from __future__ import annotations


def zero() -> int:
    return 0


def add(key: str, value: str | None, aggregate: int) -> int:
    return aggregate if value is None else aggregate + int(value)


def subtract(key: str, value: str, aggregate: int) -> int:
    return aggregate - int(value)


def add_tenfold(key: str, value: str | None, aggregate: int) -> int:
    return aggregate if value is None else aggregate + 10 * int(value)


def keep_larger(aggregate: str, value: str) -> str:
    return value if int(value) > int(aggregate) else aggregate


def sum_text(aggregate: str, value: str) -> str:
    return str(int(aggregate) + int(value))


def minus_text(aggregate: str, value: str) -> str:
    return str(int(aggregate) - int(value))
