"""Aggregators as plain Python: what a KGroupedStream/KGroupedTable folds into each key's state.

Spark's built-in aggregate functions cannot express Kafka Streams' aggregations whole: an
``Aggregator`` is arbitrary Python (initializer + adder, and for table groupings a subtractor),
``reduce`` has no initializer, and every update must carry the max timestamp of its inputs. So
the stateful operators in this package keep each aggregate in their own state and fold records
into it with an :class:`Aggregator`; the declarative YAML aggregations (count, sum, min, max,
avg, latest) are just predefined aggregators. Everything here is pure Python (no Spark), so it
runs inside the Python workers and is unit-testable on its own.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["DECLARATIVE", "Aggregator", "aggregate", "cogroup", "count", "declarative", "reduce"]


def _arity(function: Callable[..., Any]) -> int:
    return len(
        [
            p
            for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    )


@dataclasses.dataclass(frozen=True)
class Aggregator:
    """How one aggregate is built: ``add(key, value, agg, ts)`` folds a record in.

    ``value_type`` is the Spark DDL type of the emitted value (a schema must be known before the
    query starts). ``result`` turns the internal aggregate into the emitted value (avg keeps
    (sum, count) and emits the quotient). ``subtract`` is needed only for KTable groupings.
    """

    initial: Callable[[], Any]
    add: Callable[[Any, Any, Any, int], Any]
    value_type: str
    subtract: Callable[[Any, Any, Any, int], Any] | None = None
    result: Callable[[Any], Any] = lambda agg: agg
    #: The declarative aggregation this is (count, sum, …), None for user functions: the JVM runs
    #: those itself (``TimeWindowAggregation.java``).
    name: str | None = None

    def fold(self, key: Any, records: list[tuple[int, Any]]) -> Any:
        """The aggregate of ``records`` ((timestamp, value) in arrival order) from scratch."""
        agg = self.initial()
        for ts, value in records:
            agg = self.add(key, value, agg, ts)
        return agg


def _user(function: Callable[..., Any]) -> Callable[[Any, Any, Any, int], Any]:
    # Kafka Streams' Aggregator is (key, value, aggregate); (value, aggregate) is accepted too.
    if _arity(function) == 2:
        return lambda key, value, agg, ts: function(value, agg)
    return lambda key, value, agg, ts: function(key, value, agg)


def aggregate(
    initializer: Callable[[], Any],
    adder: Callable[..., Any],
    *,
    value_type: str,
    subtractor: Callable[..., Any] | None = None,
) -> Aggregator:
    """Kafka Streams' ``aggregate(initializer, adder[, subtractor])`` with Python functions."""
    return Aggregator(
        initial=initializer,
        add=_user(adder),
        subtract=_user(subtractor) if subtractor else None,
        value_type=value_type,
    )


def reduce(
    reducer: Callable[[Any, Any], Any],
    *,
    value_type: str,
    subtractor: Callable[[Any, Any], Any] | None = None,
) -> Aggregator:
    """Kafka Streams' ``reduce(reducer[, subtractor])``: the first value is the aggregate."""

    def add(key: Any, value: Any, agg: Any, ts: int) -> Any:
        return value if agg is None else reducer(agg, value)

    def subtract(key: Any, value: Any, agg: Any, ts: int) -> Any:
        assert subtractor is not None
        return subtractor(agg, value)

    return Aggregator(
        initial=lambda: None, add=add, subtract=subtract if subtractor else None, value_type=value_type
    )


def cogroup(
    initializer: Callable[[], Any], adders: list[Callable[..., Any]], *, value_type: str
) -> Aggregator:
    """Kafka Streams' cogroup: records arrive as ``{"src": i, "v<i>": value}`` (one struct type for
    all the grouped streams) and are folded in by their stream's adder. As in Kafka Streams, a
    windowed cogroup hands a null value to the adder (the adder decides what it means); a
    non-windowed one never sees it (the compiler drops such records before, as KStreamAggregate
    skips them)."""
    users = [_user(a) for a in adders]

    def add(key: Any, value: Any, agg: Any, ts: int) -> Any:
        src = value["src"]
        return users[src](key, value[f"v{src}"], agg, ts)

    return Aggregator(initial=initializer, add=add, value_type=value_type)


def count() -> Aggregator:
    return Aggregator(
        initial=lambda: 0,
        add=lambda key, value, agg, ts: agg + 1,
        subtract=lambda key, value, agg, ts: agg - 1,
        value_type="bigint",
        name="count",
    )


def _sum(value_type: str) -> Aggregator:
    return Aggregator(
        initial=lambda: 0,
        add=lambda key, value, agg, ts: agg if value is None else agg + value,
        subtract=lambda key, value, agg, ts: agg if value is None else agg - value,
        value_type=value_type,
    )


def _extreme(pick: Callable[[Any, Any], Any], value_type: str) -> Aggregator:
    # No subtractor: a min/max cannot be undone without the other values (Kafka Streams alike).
    return Aggregator(
        initial=lambda: None,
        add=lambda key, value, agg, ts: agg if value is None else value if agg is None else pick(agg, value),
        value_type=value_type,
    )


def _avg() -> Aggregator:
    return Aggregator(
        initial=lambda: (0.0, 0),
        add=lambda key, value, agg, ts: agg if value is None else (agg[0] + value, agg[1] + 1),
        subtract=lambda key, value, agg, ts: agg if value is None else (agg[0] - value, agg[1] - 1),
        result=lambda agg: agg[0] / agg[1] if agg[1] else None,
        value_type="double",
    )


def _latest(value_type: str) -> Aggregator:
    # The value of the newest record; on equal timestamps the later arrival wins (last write).
    def add(key: Any, value: Any, agg: Any, ts: int) -> Any:
        if value is None:
            return agg
        return (ts, value) if agg is None or ts >= agg[0] else agg

    return Aggregator(
        initial=lambda: None,
        add=add,
        result=lambda agg: None if agg is None else agg[1],
        value_type=value_type,
    )


def _collect_list(value_type: str) -> Aggregator:
    return Aggregator(
        initial=list,
        add=lambda key, value, agg, ts: agg if value is None else [*agg, value],
        value_type=f"array<{value_type}>",
    )


#: The declarative aggregations of the YAML manifest. Except count, they skip null values (a
#: windowed aggregation hands them over, as Kafka Streams' does; count counts them there).
DECLARATIVE = ("count", "sum", "min", "max", "avg", "latest", "collect_list")
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")


def declarative(fn: str, value_type: str = "bigint") -> Aggregator:
    """A YAML aggregation by name; ``value_type`` is the type of the aggregated value."""
    return dataclasses.replace(_declarative(fn, value_type), name=fn)


def _declarative(fn: str, value_type: str) -> Aggregator:
    if fn == "count":
        return count()
    if fn == "sum":  # as Spark's sum: integers add up as bigint, anything else as double
        return _sum("bigint" if value_type in _INTEGRAL else "double")
    if fn == "min":
        return _extreme(min, value_type)
    if fn == "max":
        return _extreme(max, value_type)
    if fn == "avg":
        return _avg()
    if fn == "latest":
        return _latest(value_type)
    if fn == "collect_list":
        return _collect_list(value_type)
    raise ValueError(f"unknown aggregation {fn!r}; expected one of {', '.join(DECLARATIVE)}")
