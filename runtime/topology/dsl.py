"""The DSL's handles: what each of the builder's calls returns, each call adding one node.

:class:`KStream` (split into :class:`BranchedKStream`), :class:`KTable` and :class:`GlobalKTable`; a
grouped stream (:class:`KGroupedStream`), optionally windowed (:class:`WindowedKStream`) or
cogrouped with others (:class:`CogroupedKStream`), and a regrouped table (:class:`KGroupedTable`)
count, aggregate or reduce into a KTable, and ``KTable.to_stream()`` leads back to a KStream.
Why one module: these types return one another, so split across modules they would import one
another. A handle names its node and the builder holding the graph, which it reaches only through
:class:`~streamapp.runtime.topology.logic.GraphBuilder`: this module never imports the builder.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from streamapp.runtime import errors, serdes
from streamapp.runtime import processor as api
from streamapp.runtime.topology import aggregate_nodes, graph, join_nodes, nodes, process_nodes
from streamapp.runtime.topology.logic import GraphBuilder, Logic, add_join, to_function, to_logic

__all__ = [
    "BranchedKStream",
    "CogroupedKStream",
    "GlobalKTable",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "WindowedKStream",
]


@dataclasses.dataclass(frozen=True)
class KStream:
    """A stream of records; every method returns a new KStream (or ends the chain)."""

    builder: GraphBuilder
    node: str

    def _then(
        self, node_type: type[nodes.Node], name: str | None, *others: KStream, **fields: Any
    ) -> KStream:
        parents = (self.node, *(o.node for o in others))
        return KStream(self.builder, self.builder._add(node_type, parents, name, **fields))

    def filter(self, predicate: Logic, *, name: str | None = None) -> KStream:
        return self._then(nodes.Filter, name, predicate=to_logic(predicate, returns="boolean"))

    def filter_not(self, predicate: Logic, *, name: str | None = None) -> KStream:
        return self._then(nodes.FilterNot, name, predicate=to_logic(predicate, returns="boolean"))

    def map_values(self, mapper: Logic, *, returns: str | None = None, name: str | None = None) -> KStream:
        return self._then(nodes.MapValues, name, mapper=to_logic(mapper, returns=returns))

    def flat_map_values(
        self, mapper: Logic, *, returns: str | None = None, name: str | None = None
    ) -> KStream:
        return self._then(nodes.FlatMapValues, name, mapper=to_logic(mapper, returns=returns))

    def select_key(self, mapper: Logic, *, returns: str | None = None, name: str | None = None) -> KStream:
        return self._then(nodes.SelectKey, name, mapper=to_logic(mapper, returns=returns))

    def map(self, key: Logic, value: Logic, *, name: str | None = None) -> KStream:
        """New key and value per record (two pieces of logic, each over the input record)."""
        return self._then(nodes.Map, name, key=to_logic(key), value=to_logic(value))

    def flat_map(self, mapper: Logic, *, returns: str | None = None, name: str | None = None) -> KStream:
        """``mapper`` returns an array of ``struct(key, value)``; one record per element."""
        return self._then(nodes.FlatMap, name, mapper=to_logic(mapper, returns=returns))

    def peek(self, action: Logic, *, name: str | None = None) -> KStream:
        return self._then(nodes.Peek, name, action=to_logic(action))

    def merge(self, *others: KStream, name: str | None = None) -> KStream:
        return self._then(nodes.Merge, name, *others)

    def repartition(
        self, *, partitions: int | None = None, topic_name: str | None = None, name: str | None = None
    ) -> KStream:
        """Shuffle by key; ``topic_name`` is Kafka Streams' ``Repartitioned.as`` (the topic's name)."""
        if partitions is not None and partitions < 1:
            raise errors.TopologyError(f"repartition needs at least 1 partition, not {partitions}")
        return self._then(nodes.Repartition, name, partitions=partitions, repartition_name=topic_name)

    def group_by(
        self, selector: Logic, *, returns: str | None = None, name: str | None = None
    ) -> KGroupedStream:
        """Group by a new key (records whose new key is null are dropped, as in Kafka Streams)."""
        grouped = self._then(nodes.GroupBy, name, selector=to_logic(selector, returns=returns))
        return KGroupedStream(self.builder, grouped.node)

    def group_by_key(self, *, name: str | None = None) -> KGroupedStream:
        return KGroupedStream(self.builder, self._then(nodes.GroupBy, name).node)

    def split(self, *, name: str | None = None) -> BranchedKStream:
        return BranchedKStream(self, (), name)

    def to_table(self, *, name: str | None = None) -> KTable:
        """The stream as a table: the latest value per key; a null value deletes the key."""
        return KTable(self.builder, self._then(nodes.ToTable, name).node)

    def to(
        self,
        topic: str,
        *,
        key_serde: serdes.Serde | None = None,
        value_serde: serdes.Serde | None = None,
        partitioner: Logic | None = None,
        name: str | None = None,
    ) -> None:
        """Write to ``topic``; ``partitioner`` gives the partition (default: murmur2 of the key bytes)."""
        self._then(
            nodes.Sink,
            name,
            topic=topic,
            key_serde=key_serde,
            value_serde=value_serde,
            partitioner=None if partitioner is None else to_logic(partitioner, returns="int"),
        )

    def print(self, *, label: str | None = None, name: str | None = None) -> None:
        self._then(nodes.Print, name, label=label)

    def join(
        self,
        other: KStream | KTable | GlobalKTable,
        joiner: Logic,
        windows: join_nodes.JoinWindows | None = None,
        *,
        key: Logic | None = None,
        returns: str | None = None,
        name: str | None = None,
    ) -> KStream:
        """Inner join with a table (each record sees the table as it is then), with a global
        table (``key``: the table key computed from the record), or, with ``windows``, with
        another stream (records within the join window of each other)."""
        node = add_join(
            self.builder, join_nodes.Join, self.node, other.node, joiner, windows, returns, name, key
        )
        return KStream(self.builder, node)

    def left_join(
        self,
        other: KStream | KTable | GlobalKTable,
        joiner: Logic,
        windows: join_nodes.JoinWindows | None = None,
        *,
        key: Logic | None = None,
        returns: str | None = None,
        name: str | None = None,
    ) -> KStream:
        """Like :meth:`join`, and a record without a match is emitted with ``right`` null (for a
        windowed join: once its window has closed)."""
        node = add_join(
            self.builder, join_nodes.LeftJoin, self.node, other.node, joiner, windows, returns, name, key
        )
        return KStream(self.builder, node)

    def outer_join(
        self,
        other: KStream,
        joiner: Logic,
        windows: join_nodes.JoinWindows,
        *,
        returns: str | None = None,
        name: str | None = None,
    ) -> KStream:
        """Windowed outer join of two streams: unmatched records of either side are emitted with
        the other side null once their window has closed."""
        node = add_join(
            self.builder, join_nodes.OuterJoin, self.node, other.node, joiner, windows, returns, name
        )
        return KStream(self.builder, node)

    def process(
        self,
        processor: type[api.Processor] | str | nodes.Function,
        *,
        returns: str | None = None,
        name: str | None = None,
    ) -> KStream:
        """Run a custom :class:`~streamapp.runtime.Processor` over the stream, per key with state
        and timers (see :mod:`streamapp.runtime.processor`); ``processor`` is the class itself or
        its ``package.module:Class``; ``returns`` overrides the class's value type."""
        if isinstance(processor, type):
            if not api.is_processor(processor):
                raise errors.TopologyError(
                    f"{processor.__qualname__} is not a Processor class "
                    "(subclass streamapp.runtime.Processor)"
                )
            logic = to_logic(processor, returns=returns)
        elif isinstance(processor, str):
            logic = nodes.Function(processor, returns)
        else:
            logic = processor if processor.returns or not returns else nodes.Function(processor.ref, returns)
        assert isinstance(logic, nodes.Function)
        stores = process_nodes.stores_of(logic.ref)
        return self._then(process_nodes.ProcessNode, name, processor=logic, stores=stores)


@dataclasses.dataclass(frozen=True)
class GlobalKTable:
    """A table every task holds in full; ``stream.join(table, joiner, key=...)`` looks it up."""

    builder: GraphBuilder
    node: str


@dataclasses.dataclass(frozen=True)
class BranchedKStream:
    """``stream.split().branch(pred, "name").default_branch("rest")`` → dict of named streams.

    As in Kafka Streams, a record goes to the first branch whose predicate holds; records that
    match no branch go to the default branch, or are dropped by ``no_default_branch()``. Nothing
    is added to the graph until one of those two is called.
    """

    stream: KStream
    branches: tuple[tuple[str, Logic], ...]
    name: str | None = None

    def branch(self, predicate: Logic, name: str) -> BranchedKStream:
        if any(name == n for n, _ in self.branches):
            raise errors.TopologyError(f"a branch named {name!r} already exists in this split")
        return BranchedKStream(self.stream, (*self.branches, (name, predicate)), self.name)

    def default_branch(self, name: str = "default") -> dict[str, KStream]:
        return self._close(name)

    def no_default_branch(self) -> dict[str, KStream]:
        return self._close(None)

    def _close(self, default: str | None) -> dict[str, KStream]:
        builder = self.stream.builder
        spec = tuple(nodes.Branch(n, to_logic(p, returns="boolean")) for n, p in self.branches)
        split = builder._add(nodes.Split, (self.stream.node,), self.name, branches=spec, default=default)
        names = [n for n, _ in self.branches] + ([default] if default else [])
        return {n: KStream(builder, builder._add(nodes.BranchChild, (split,), None, branch=n)) for n in names}


@dataclasses.dataclass(frozen=True)
class _Aggregations:
    """count / aggregate / reduce, shared by grouped streams, windowed streams and grouped tables."""

    builder: GraphBuilder
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
        init = to_function(
            nodes.Function(initializer) if isinstance(initializer, str) else initializer, "initializer"
        )
        add = to_function(
            nodes.Function(adder) if isinstance(adder, str) and ":" in adder else adder, "adder"
        )
        return self._table(
            aggregate_nodes.Aggregate, name, initializer=init, adder=add,
            subtractor=to_function(subtractor, "subtractor"), returns=returns,
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
        fn = to_function(reducer, "reducer")
        assert fn is not None
        return self._table(
            aggregate_nodes.Reduce,
            name,
            reducer=fn,
            subtractor=to_function(subtractor, "subtractor"),
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
        fn = to_function(adder, "adder")
        assert fn is not None
        return CogroupedKStream(self.builder, ((self.node, fn),))


@dataclasses.dataclass(frozen=True)
class CogroupedKStream:
    """Kafka Streams' CogroupedKStream: grouped streams with one adder each, one aggregate per key."""

    builder: GraphBuilder
    streams: tuple[tuple[str, nodes.Function], ...]
    windows: aggregate_nodes.Windows | None = None
    emit: str = "updates"

    def cogroup(self, grouped: KGroupedStream, adder: Logic) -> CogroupedKStream:
        fn = to_function(adder, "adder")
        assert fn is not None
        return dataclasses.replace(self, streams=(*self.streams, (grouped.node, fn)))

    def windowed_by(self, windows: aggregate_nodes.Windows) -> CogroupedKStream:
        return dataclasses.replace(self, windows=windows)

    def emit_strategy(self, emit: str) -> CogroupedKStream:
        if emit not in aggregate_nodes.EMITS:
            raise errors.TopologyError(f"emit is one of {', '.join(aggregate_nodes.EMITS)}, not {emit!r}")
        return dataclasses.replace(self, emit=emit)

    def aggregate(self, initializer: Logic, *, returns: str, name: str | None = None) -> KTable:
        init = to_function(initializer, "initializer")
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

    builder: GraphBuilder
    node: str

    def _then(self, node_type: type[nodes.Node], name: str | None, **fields: Any) -> str:
        return self.builder._add(node_type, (self.node,), name, **fields)

    def filter(self, predicate: Logic, *, name: str | None = None) -> KTable:
        """Keys whose value fails ``predicate`` are deleted (a tombstone is emitted)."""
        return KTable(
            self.builder,
            self._then(nodes.Filter, name, predicate=to_logic(predicate, returns="boolean")),
        )

    def filter_not(self, predicate: Logic, *, name: str | None = None) -> KTable:
        pred = to_logic(predicate, returns="boolean")
        return KTable(self.builder, self._then(nodes.FilterNot, name, predicate=pred))

    def map_values(self, mapper: Logic, *, returns: str | None = None, name: str | None = None) -> KTable:
        return KTable(
            self.builder, self._then(nodes.MapValues, name, mapper=to_logic(mapper, returns=returns))
        )

    def group_by(
        self, selector: Logic, *, returns: str | None = None, name: str | None = None
    ) -> KGroupedTable:
        """Regroup by a new key (Kafka Streams' KTable.groupBy with a key selector)."""
        return KGroupedTable(
            self.builder,
            self._then(nodes.GroupBy, name, selector=to_logic(selector, returns=returns)),
        )

    def suppress(self, *, name: str | None = None) -> KTable:
        """``suppress(Suppressed.untilWindowCloses(...))``: one final result per window."""
        return KTable(self.builder, self._then(nodes.Suppress, name))

    def to_stream(self, *, name: str | None = None) -> KStream:
        return KStream(self.builder, self._then(nodes.ToStream, name))

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
        node = add_join(
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
        node = add_join(
            self.builder, join_nodes.LeftJoin, self.node, other.node, joiner, None, returns, name,
            foreign_key=foreign_key,
        )  # fmt: skip
        return KTable(self.builder, node)

    def outer_join(
        self, other: KTable, joiner: Logic, *, returns: str | None = None, name: str | None = None
    ) -> KTable:
        node = add_join(
            self.builder, join_nodes.OuterJoin, self.node, other.node, joiner, None, returns, name
        )
        return KTable(self.builder, node)
