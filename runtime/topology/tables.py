"""The table side of the builder's DSL: :class:`KTable` and the groupings that aggregate into one.

A grouped stream (:class:`KGroupedStream`), optionally windowed (:class:`WindowedKStream`, by
:class:`TimeWindows`, :class:`SlidingWindows` or :class:`SessionWindows`) or cogrouped with others
(:class:`CogroupedKStream`), and a regrouped table (:class:`KGroupedTable`) count, aggregate or
reduce into a :class:`KTable`; ``KTable.to_stream()`` leads back to
:mod:`streamapp.runtime.topology.streams`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from streamapp.runtime import errors
from streamapp.runtime.topology import aggregate_nodes, durations, graph, join_nodes, nodes, streams

if TYPE_CHECKING:
    from streamapp.runtime.topology.builder import StreamsBuilder
    from streamapp.runtime.topology.streams import Logic

__all__ = [
    "CogroupedKStream",
    "KGroupedStream",
    "KGroupedTable",
    "KTable",
    "SessionWindows",
    "SlidingWindows",
    "TimeWindows",
    "WindowedKStream",
]


def _function(logic: Logic | None, what: str) -> nodes.Function | None:
    if logic is None:
        return None
    converted = streams.to_logic(logic)
    if not isinstance(converted, nodes.Function):
        raise errors.TopologyError(f"the {what} must be a Python function, not the expression {logic!r}")
    return converted


def _durations(**values: Any) -> dict[str, int]:
    out = {}
    for name, value in values.items():
        try:
            out[name] = durations.to_ms(value)
        except ValueError as err:
            raise errors.TopologyError(f"{name}: {err}") from None
    return out


class TimeWindows:
    """Kafka Streams' TimeWindows: ``of_size_and_grace(size, grace)`` (tumbling), then
    ``.advance_by(advance)`` for hopping windows. Durations: ms, ``"10s"`` or timedelta."""

    @staticmethod
    def of_size_and_grace(size: Any, grace: Any) -> aggregate_nodes.Windows:
        d = _durations(size=size, grace=grace)
        return aggregate_nodes.Windows("tumbling", d["size"], d["size"], d["grace"])

    @staticmethod
    def of_size_with_no_grace(size: Any) -> aggregate_nodes.Windows:
        return TimeWindows.of_size_and_grace(size, 0)


class SlidingWindows:
    """Kafka Streams' SlidingWindows: windows ``[t - d, t]`` defined by record timestamps."""

    @staticmethod
    def of_time_difference_and_grace(time_difference: Any, grace: Any) -> aggregate_nodes.Windows:
        d = _durations(time_difference=time_difference, grace=grace)
        return aggregate_nodes.Windows("sliding", d["time_difference"], 0, d["grace"])


class SessionWindows:
    """Kafka Streams' SessionWindows: activity separated by at least ``gap``."""

    @staticmethod
    def of_inactivity_gap_and_grace(gap: Any, grace: Any) -> aggregate_nodes.Windows:
        d = _durations(gap=gap, grace=grace)
        return aggregate_nodes.Windows("session", d["gap"], 0, d["grace"])


@dataclasses.dataclass(frozen=True)
class _Aggregations:
    """count / aggregate / reduce, shared by grouped streams, windowed streams and grouped tables."""

    builder: StreamsBuilder
    node: str

    def _window(self) -> dict[str, Any]:
        return {}

    def _table(self, node_type: type[nodes.Node], name: str | None, **fields: Any) -> KTable:
        return KTable(
            self.builder, self.builder._add(node_type, (self.node,), name, **fields, **self._window())
        )

    def count(self, *, name: str | None = None) -> KTable:
        return self._table(aggregate_nodes.Count, name)

    def aggregate(
        self,
        initializer: Logic | str,
        adder: Logic | str = "value",
        subtractor: Logic | None = None,
        *,
        returns: str | None = None,
        name: str | None = None,
    ) -> KTable:
        """Kafka Streams' ``aggregate(initializer, adder[, subtractor])`` with Python functions
        (``returns``: the aggregate's Spark type), or a declarative aggregate:
        ``aggregate("sum", "length(value)")`` — sum, min, max, avg, latest or collect_list."""
        if isinstance(initializer, str) and ":" not in initializer:
            if initializer not in graph.AGGREGATE_FUNCTIONS:
                raise errors.TopologyError(
                    f"unknown aggregate {initializer!r}; "
                    f"expected one of {', '.join(graph.AGGREGATE_FUNCTIONS)}"
                )
            if not isinstance(adder, str):
                raise errors.TopologyError(
                    f"a declarative {initializer} aggregates an expression, not {adder!r}"
                )
            return self._table(aggregate_nodes.Aggregate, name, fn=initializer, expr=adder)
        init = _function(
            nodes.Function(initializer) if isinstance(initializer, str) else initializer, "initializer"
        )
        add = _function(nodes.Function(adder) if isinstance(adder, str) and ":" in adder else adder, "adder")
        return self._table(
            aggregate_nodes.Aggregate, name, initializer=init, adder=add,
            subtractor=_function(subtractor, "subtractor"), returns=returns,
        )  # fmt: skip

    def reduce(
        self,
        reducer: Logic,
        subtractor: Logic | None = None,
        *,
        returns: str | None = None,
        name: str | None = None,
    ) -> KTable:
        """Combine a key's values with ``reducer(aggregate, value)``; the first value starts it."""
        fn = _function(reducer, "reducer")
        assert fn is not None
        return self._table(
            aggregate_nodes.Reduce,
            name,
            reducer=fn,
            subtractor=_function(subtractor, "subtractor"),
            returns=returns,
        )


@dataclasses.dataclass(frozen=True)
class KGroupedStream(_Aggregations):
    """Records grouped by key, ready to aggregate into a :class:`KTable` (or to window first)."""

    def windowed_by(self, windows: aggregate_nodes.Windows) -> WindowedKStream:
        """Aggregate per key and window (TimeWindows, SlidingWindows or SessionWindows)."""
        return WindowedKStream(self.builder, self.node, windows)

    def cogroup(self, adder: Logic) -> CogroupedKStream:
        """Start a cogroup: this grouped stream folded in with ``adder(key, value, aggregate)``."""
        fn = _function(adder, "adder")
        assert fn is not None
        return CogroupedKStream(self.builder, ((self.node, fn),))


@dataclasses.dataclass(frozen=True)
class CogroupedKStream:
    """Kafka Streams' CogroupedKStream: grouped streams with one adder each, one aggregate per key."""

    builder: StreamsBuilder
    streams: tuple[tuple[str, nodes.Function], ...]
    windows: aggregate_nodes.Windows | None = None
    emit: str = "updates"

    def cogroup(self, grouped: KGroupedStream, adder: Logic) -> CogroupedKStream:
        fn = _function(adder, "adder")
        assert fn is not None
        return dataclasses.replace(self, streams=(*self.streams, (grouped.node, fn)))

    def windowed_by(self, windows: aggregate_nodes.Windows) -> CogroupedKStream:
        return dataclasses.replace(self, windows=windows)

    def emit_strategy(self, emit: str) -> CogroupedKStream:
        if emit not in aggregate_nodes.EMITS:
            raise errors.TopologyError(f"emit is one of {', '.join(aggregate_nodes.EMITS)}, not {emit!r}")
        return dataclasses.replace(self, emit=emit)

    def aggregate(self, initializer: Logic, *, returns: str, name: str | None = None) -> KTable:
        init = _function(initializer, "initializer")
        node = self.builder._add(
            aggregate_nodes.Cogroup,
            tuple(n for n, _ in self.streams),
            name,
            adders=tuple(a for _, a in self.streams),
            initializer=init,
            returns=returns,
            windows=self.windows,
            emit=self.emit,
        )
        return KTable(self.builder, node)


@dataclasses.dataclass(frozen=True)
class WindowedKStream(_Aggregations):
    """A grouped stream with windows; its aggregations are tables keyed by (key, window)."""

    windows: aggregate_nodes.Windows = dataclasses.field(
        default_factory=lambda: aggregate_nodes.Windows("tumbling", 1)
    )
    emit: str = "updates"

    def _window(self) -> dict[str, Any]:
        return {"windows": self.windows, "emit": self.emit}

    def emit_strategy(self, emit: str) -> WindowedKStream:
        """``"updates"`` (every change, the default) or ``"final"`` (once per window, when it closes)."""
        if emit not in aggregate_nodes.EMITS:
            raise errors.TopologyError(f"emit is one of {', '.join(aggregate_nodes.EMITS)}, not {emit!r}")
        return dataclasses.replace(self, emit=emit)


@dataclasses.dataclass(frozen=True)
class KGroupedTable(_Aggregations):
    """A table regrouped by a new key: aggregations add a key's new value and subtract its old one."""


@dataclasses.dataclass(frozen=True)
class KTable:
    """A changelog: the latest value per key; each update carries the max timestamp of its inputs."""

    builder: StreamsBuilder
    node: str

    def _then(self, node_type: type[nodes.Node], name: str | None, **fields: Any) -> str:
        return self.builder._add(node_type, (self.node,), name, **fields)

    def filter(self, predicate: Logic, *, name: str | None = None) -> KTable:
        """Keys whose value fails ``predicate`` are deleted (a tombstone is emitted)."""
        return KTable(
            self.builder,
            self._then(nodes.Filter, name, predicate=streams.to_logic(predicate, returns="boolean")),
        )

    def filter_not(self, predicate: Logic, *, name: str | None = None) -> KTable:
        pred = streams.to_logic(predicate, returns="boolean")
        return KTable(self.builder, self._then(nodes.FilterNot, name, predicate=pred))

    def map_values(self, mapper: Logic, *, returns: str | None = None, name: str | None = None) -> KTable:
        return KTable(
            self.builder, self._then(nodes.MapValues, name, mapper=streams.to_logic(mapper, returns=returns))
        )

    def group_by(
        self, selector: Logic, *, returns: str | None = None, name: str | None = None
    ) -> KGroupedTable:
        """Regroup by a new key (Kafka Streams' KTable.groupBy with a key selector)."""
        return KGroupedTable(
            self.builder,
            self._then(nodes.GroupBy, name, selector=streams.to_logic(selector, returns=returns)),
        )

    def suppress(self, *, name: str | None = None) -> KTable:
        """``suppress(Suppressed.untilWindowCloses(...))``: one final result per window."""
        return KTable(self.builder, self._then(nodes.Suppress, name))

    def to_stream(self, *, name: str | None = None) -> streams.KStream:
        return streams.KStream(self.builder, self._then(nodes.ToStream, name))

    def join(
        self,
        other: KTable,
        joiner: Logic,
        *,
        foreign_key: Logic | None = None,
        returns: str | None = None,
        name: str | None = None,
    ) -> KTable:
        """Table-table inner join on the key: a changelog, with a tombstone when a result goes away.

        With ``foreign_key`` (an expression over ``key`` and ``value``, or a Python function
        ``fn(value)`` / ``fn(key, value)``), a foreign-key join (KIP-213): each row of this table
        joins the row of ``other`` whose key its foreign key is; the result keeps this table's key.
        """
        node = streams.add_join(
            self.builder, join_nodes.Join, self.node, other.node, joiner, None, returns, name,
            foreign_key=foreign_key,
        )  # fmt: skip
        return KTable(self.builder, node)

    def left_join(
        self,
        other: KTable,
        joiner: Logic,
        *,
        foreign_key: Logic | None = None,
        returns: str | None = None,
        name: str | None = None,
    ) -> KTable:
        """Like :meth:`join`, and a row without a match is joined with ``right`` null."""
        node = streams.add_join(
            self.builder, join_nodes.LeftJoin, self.node, other.node, joiner, None, returns, name,
            foreign_key=foreign_key,
        )  # fmt: skip
        return KTable(self.builder, node)

    def outer_join(
        self, other: KTable, joiner: Logic, *, returns: str | None = None, name: str | None = None
    ) -> KTable:
        node = streams.add_join(
            self.builder, join_nodes.OuterJoin, self.node, other.node, joiner, None, returns, name
        )
        return KTable(self.builder, node)
