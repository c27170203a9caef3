"""The stream side of the builder's DSL: :class:`KStream`, its branches and :class:`GlobalKTable`.

A stream object names its node and the :class:`~streamapp.runtime.topology.builder.StreamsBuilder`
that holds the graph; grouping a stream or reading it as a table leads to
:mod:`streamapp.runtime.topology.tables`. :func:`to_logic` turns what a user passes as logic into a
graph value, on both sides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamapp.runtime import errors, serdes
from streamapp.runtime import processor as api
from streamapp.runtime.topology import join_nodes, nodes, process_nodes, tables

if TYPE_CHECKING:
    from streamapp.runtime.topology.builder import StreamsBuilder

__all__ = ["BranchedKStream", "GlobalKTable", "KStream", "Logic", "add_join", "to_logic"]

#: What a user may pass as logic: an expression, ``Function(...)`` or a module-level callable.
Logic = str | nodes.Function | Callable[..., Any]


def to_logic(logic: Logic, *, returns: str | None = None) -> nodes.Logic:
    """User logic as a graph value; a callable is recorded by its import path ``module:qualname``."""
    if isinstance(logic, str):
        return nodes.Expr(logic)
    if isinstance(logic, nodes.Function):
        return logic if logic.returns or not returns else nodes.Function(logic.ref, returns)
    if callable(logic):
        qualname = getattr(logic, "__qualname__", "")
        module = getattr(logic, "__module__", None)
        if not module or "<lambda>" in qualname or "<locals>" in qualname:
            raise errors.TopologyError(
                f"{qualname or logic!r} cannot be referenced by import path: use a module-level "
                "function (a lambda or a nested function cannot be written to a manifest)"
            )
        return nodes.Function(f"{module}:{qualname}", returns)
    raise errors.TopologyError(
        f"user logic must be an expression, a function or Function(...), not {logic!r}"
    )


@dataclasses.dataclass(frozen=True)
class KStream:
    """A stream of records; every method returns a new KStream (or ends the chain)."""

    builder: StreamsBuilder
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
    ) -> tables.KGroupedStream:
        """Group by a new key (records whose new key is null are dropped, as in Kafka Streams)."""
        grouped = self._then(nodes.GroupBy, name, selector=to_logic(selector, returns=returns))
        return tables.KGroupedStream(self.builder, grouped.node)

    def group_by_key(self, *, name: str | None = None) -> tables.KGroupedStream:
        return tables.KGroupedStream(self.builder, self._then(nodes.GroupBy, name).node)

    def split(self, *, name: str | None = None) -> BranchedKStream:
        return BranchedKStream(self, (), name)

    def to_table(self, *, name: str | None = None) -> tables.KTable:
        """The stream as a table: the latest value per key; a null value deletes the key."""
        return tables.KTable(self.builder, self._then(nodes.ToTable, name).node)

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
        other: KStream | tables.KTable | GlobalKTable,
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
        other: KStream | tables.KTable | GlobalKTable,
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

    builder: StreamsBuilder
    node: str


def add_join(
    builder: StreamsBuilder,
    node_type: type[join_nodes.JoinNode],
    left: str,
    right: str,
    joiner: Logic,
    windows: join_nodes.JoinWindows | None,
    returns: str | None,
    name: str | None,
    key: Logic | None = None,
    foreign_key: Logic | None = None,
) -> str:
    """One join node; ``joiner`` reads ``left`` and ``right`` (an expression) or is a Python
    function ``(left, right)`` / ``(key, left, right)`` run as a vectorised UDF."""
    return builder._add(
        node_type,
        (left, right),
        name,
        joiner=to_logic(joiner, returns=returns),
        windows=windows,
        key=None if key is None else to_logic(key),
        foreign_key=None if foreign_key is None else to_logic(foreign_key),
    )


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
