"""The Python builder: Kafka Streams' DSL in snake_case, producing the logical graph.

    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    builder.stream("text-lines").filter("length(value) > 0").map_values("upper(value)").to("out")
    topology = builder.build()

Every call adds one node and returns a new stream object; nothing touches Spark. User logic is a
Spark SQL expression (a string), a module-level Python function, or ``Function("pkg.mod:fn")``.
Functions are recorded by import path so a topology can be written out as YAML and loaded again
(``streamapp.runtime.manifest.to_manifest_yaml(builder.build(), name=...)``: the manifest layer
builds on this one, never the reverse).
As with Kafka Streams' ``Named.as(...)``, every operation takes an optional ``name=`` that replaces
the generated node name (the counter still advances, so later generated names do not shift).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from streamapp.runtime import errors, serdes
from streamapp.runtime import processor as api
from streamapp.runtime.topology import durations, graph, join_nodes, nodes, process_nodes, validate

__all__ = [
    "BranchedKStream",
    "CogroupedKStream",
    "GlobalKTable",
    "JoinWindows",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Logic",
    "SessionWindows",
    "SlidingWindows",
    "StreamsBuilder",
    "TimeWindows",
    "WindowedKStream",
    "to_logic",
]

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


class StreamsBuilder:
    """Collects nodes in build order; ``build()`` returns the immutable :class:`graph.Topology`."""

    def __init__(
        self,
        *,
        default_key_serde: serdes.Serde | None = None,
        default_value_serde: serdes.Serde | None = None,
        latency: str = "default",
        application_id: str | None = None,
    ) -> None:
        if latency not in ("default", "low"):
            raise errors.TopologyError(f"latency is 'default' or 'low', not {latency!r}")
        self._nodes: list[nodes.Node] = []
        self.default_key_serde = default_key_serde
        self.default_value_serde = default_value_serde
        self.latency = latency
        self.application_id = application_id

    def _add(
        self, node_type: type[nodes.Node], parents: tuple[str, ...], name: str | None, **fields: Any
    ) -> str:
        node_name = name or node_type.generated_name(len(self._nodes))
        if any(n.name == node_name for n in self._nodes):
            raise errors.TopologyError(f"a node named {node_name!r} already exists; names must be unique")
        self._nodes.append(node_type(name=node_name, parents=parents, **fields))
        return node_name

    def stream(
        self,
        topics: str | list[str],
        *,
        key_serde: serdes.Serde | None = None,
        value_serde: serdes.Serde | None = None,
        timestamp: str | None = None,
        deserialization_errors: str = "fail",
        dead_letter_topic: str | None = None,
    ) -> KStream:
        """A KStream of one or more topics; ``timestamp`` is an expression giving event time (ms).

        ``deserialization_errors``: what a record its serdes cannot read does — ``"fail"`` stops
        the query naming it, ``"skip"`` drops it (counted), ``"deadLetter"`` writes its original
        bytes to ``dead_letter_topic`` with headers saying where it came from and why (counted)."""
        _check_policy(deserialization_errors, dead_letter_topic)
        node = self._add(
            nodes.Source,
            (),
            None,
            topics=(topics,) if isinstance(topics, str) else tuple(topics),
            key_serde=key_serde,
            value_serde=value_serde,
            timestamp=timestamp,
            deserialization_errors=None if deserialization_errors == "fail" else deserialization_errors,
            dead_letter_topic=dead_letter_topic,
        )
        return KStream(self, node)

    def table(
        self,
        topics: str | list[str],
        *,
        key_serde: serdes.Serde | None = None,
        value_serde: serdes.Serde | None = None,
        timestamp: str | None = None,
        deserialization_errors: str = "fail",
        dead_letter_topic: str | None = None,
    ) -> KTable:
        """A KTable of a changelog topic: the latest value per key; a null value deletes the key.
        An unreadable record is never a delete: ``deserialization_errors`` as for :meth:`stream`."""
        _check_policy(deserialization_errors, dead_letter_topic)
        node = self._add(
            nodes.Source,
            (),
            None,
            topics=(topics,) if isinstance(topics, str) else tuple(topics),
            key_serde=key_serde,
            value_serde=value_serde,
            timestamp=timestamp,
            table=True,
            deserialization_errors=None if deserialization_errors == "fail" else deserialization_errors,
            dead_letter_topic=dead_letter_topic,
        )
        return KTable(self, node)

    def global_table(
        self,
        topics: str | list[str],
        *,
        key_serde: serdes.Serde | None = None,
        value_serde: serdes.Serde | None = None,
    ) -> GlobalKTable:
        """A GlobalKTable: every task holds all of it; streams join it by a key extractor."""
        node = self._add(
            join_nodes.GlobalTableSource,
            (),
            None,
            topics=(topics,) if isinstance(topics, str) else tuple(topics),
            key_serde=key_serde,
            value_serde=value_serde,
        )
        return GlobalKTable(self, node)

    def build(self, *, check: bool = True) -> graph.Topology:
        """The topology; with ``check``, every problem (bad expression, missing serde…) raises at once."""
        topology = graph.Topology(
            nodes=tuple(self._nodes),
            default_key_serde=self.default_key_serde,
            default_value_serde=self.default_value_serde,
            latency=self.latency,
            application_id=self.application_id,
        )
        if check and (problems := validate.validate_topology(topology)):
            raise errors.TopologyError(
                "the topology is invalid:\n" + "\n".join(f"  {p}" for p in problems), problems=problems
            )
        return topology


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
        node = _join(
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
        node = _join(
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
        node = _join(
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


JoinWindows = join_nodes.JoinWindows


@dataclasses.dataclass(frozen=True)
class GlobalKTable:
    """A table every task holds in full; ``stream.join(table, joiner, key=...)`` looks it up."""

    builder: StreamsBuilder
    node: str


def _join(
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


def _function(logic: Logic | None, what: str) -> nodes.Function | None:
    if logic is None:
        return None
    converted = to_logic(logic)
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
    def of_size_and_grace(size: Any, grace: Any) -> nodes.Windows:
        d = _durations(size=size, grace=grace)
        return nodes.Windows("tumbling", d["size"], d["size"], d["grace"])

    @staticmethod
    def of_size_with_no_grace(size: Any) -> nodes.Windows:
        return TimeWindows.of_size_and_grace(size, 0)


class SlidingWindows:
    """Kafka Streams' SlidingWindows: windows ``[t - d, t]`` defined by record timestamps."""

    @staticmethod
    def of_time_difference_and_grace(time_difference: Any, grace: Any) -> nodes.Windows:
        d = _durations(time_difference=time_difference, grace=grace)
        return nodes.Windows("sliding", d["time_difference"], 0, d["grace"])


class SessionWindows:
    """Kafka Streams' SessionWindows: activity separated by at least ``gap``."""

    @staticmethod
    def of_inactivity_gap_and_grace(gap: Any, grace: Any) -> nodes.Windows:
        d = _durations(gap=gap, grace=grace)
        return nodes.Windows("session", d["gap"], 0, d["grace"])


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
        return self._table(nodes.Count, name)

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
            return self._table(nodes.Aggregate, name, fn=initializer, expr=adder)
        init = _function(
            nodes.Function(initializer) if isinstance(initializer, str) else initializer, "initializer"
        )
        add = _function(nodes.Function(adder) if isinstance(adder, str) and ":" in adder else adder, "adder")
        return self._table(
            nodes.Aggregate, name, initializer=init, adder=add,
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
            nodes.Reduce, name, reducer=fn, subtractor=_function(subtractor, "subtractor"), returns=returns
        )


@dataclasses.dataclass(frozen=True)
class KGroupedStream(_Aggregations):
    """Records grouped by key, ready to aggregate into a :class:`KTable` (or to window first)."""

    def windowed_by(self, windows: nodes.Windows) -> WindowedKStream:
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
    windows: nodes.Windows | None = None
    emit: str = "updates"

    def cogroup(self, grouped: KGroupedStream, adder: Logic) -> CogroupedKStream:
        fn = _function(adder, "adder")
        assert fn is not None
        return dataclasses.replace(self, streams=(*self.streams, (grouped.node, fn)))

    def windowed_by(self, windows: nodes.Windows) -> CogroupedKStream:
        return dataclasses.replace(self, windows=windows)

    def emit_strategy(self, emit: str) -> CogroupedKStream:
        if emit not in nodes.EMITS:
            raise errors.TopologyError(f"emit is one of {', '.join(nodes.EMITS)}, not {emit!r}")
        return dataclasses.replace(self, emit=emit)

    def aggregate(self, initializer: Logic, *, returns: str, name: str | None = None) -> KTable:
        init = _function(initializer, "initializer")
        node = self.builder._add(
            nodes.Cogroup,
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

    windows: nodes.Windows = dataclasses.field(default_factory=lambda: nodes.Windows("tumbling", 1))
    emit: str = "updates"

    def _window(self) -> dict[str, Any]:
        return {"windows": self.windows, "emit": self.emit}

    def emit_strategy(self, emit: str) -> WindowedKStream:
        """``"updates"`` (every change, the default) or ``"final"`` (once per window, when it closes)."""
        if emit not in nodes.EMITS:
            raise errors.TopologyError(f"emit is one of {', '.join(nodes.EMITS)}, not {emit!r}")
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
            self.builder, self._then(nodes.Filter, name, predicate=to_logic(predicate, returns="boolean"))
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
            self.builder, self._then(nodes.GroupBy, name, selector=to_logic(selector, returns=returns))
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
        node = _join(
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
        node = _join(
            self.builder, join_nodes.LeftJoin, self.node, other.node, joiner, None, returns, name,
            foreign_key=foreign_key,
        )  # fmt: skip
        return KTable(self.builder, node)

    def outer_join(
        self, other: KTable, joiner: Logic, *, returns: str | None = None, name: str | None = None
    ) -> KTable:
        node = _join(self.builder, join_nodes.OuterJoin, self.node, other.node, joiner, None, returns, name)
        return KTable(self.builder, node)


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


def _check_policy(policy: str, topic: str | None) -> None:
    if policy not in ("fail", "skip", "deadLetter"):
        raise errors.TopologyError(f"deserialization_errors must be fail, skip or deadLetter, not {policy!r}")
    if policy == "deadLetter" and not topic:
        raise errors.TopologyError("deserialization_errors='deadLetter' needs a dead_letter_topic")
    if topic and policy != "deadLetter":
        raise errors.TopologyError(
            f"dead_letter_topic is only used with deserialization_errors='deadLetter' (not {policy!r})"
        )
