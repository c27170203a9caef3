"""The logical topology: the one graph both the YAML manifest and the Python builder produce.

A :class:`Topology` is an immutable tuple of nodes (:mod:`streamapp.runtime.topology.nodes`) in
build order, which is a topological order: every node comes after all of its parents, so a
compiler walks ``topology.nodes`` front to back and finds each parent already compiled. It also
carries the application's defaults (serdes, latency) and answers what a compiler, the CLI and the
operator ask: serdes per node, topics, the trigger and why, and ``describe()``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

from streamapp.runtime import serdes

# Imported as `nd`: `Topology.nodes` (the field) would shadow the module inside the class.
from streamapp.runtime.topology import aggregate_nodes, join_nodes, process_nodes
from streamapp.runtime.topology import nodes as nd

__all__ = [
    "AGGREGATE_FUNCTIONS",
    "GROUPED_STREAM",
    "GROUPED_TABLE",
    "OPS",
    "REALTIME_OPS",
    "STATEFUL_OPS",
    "STREAM",
    "TABLE",
    "Node",
    "Topology",
    "node_name",
]

Node = nd.Node

#: Every node type: the common ones, the aggregations, the joins and the custom processor (the
#: last three in modules of their own).
_NODE_TYPES: tuple[type[nd.Node], ...] = (
    nd.Source,
    nd.Filter,
    nd.FilterNot,
    nd.Map,
    nd.MapValues,
    nd.FlatMap,
    nd.FlatMapValues,
    nd.SelectKey,
    nd.Peek,
    nd.Split,
    nd.BranchChild,
    nd.Merge,
    nd.Repartition,
    nd.Sink,
    nd.Print,
    nd.GroupBy,
    aggregate_nodes.Count,
    aggregate_nodes.Aggregate,
    aggregate_nodes.Reduce,
    aggregate_nodes.Cogroup,
    nd.ToTable,
    nd.Suppress,
    nd.ToStream,
    *join_nodes.JOIN_NODES,
    join_nodes.GlobalTableSource,
    process_nodes.ProcessNode,
)
#: Node type by operation (as written in YAML).
_TYPES: Mapping[str, type[nd.Node]] = {t.op: t for t in _NODE_TYPES}
#: Operation → the word Kafka Streams uses in generated processor names.
OPS: Mapping[str, str] = {op: t.word for op, t in _TYPES.items()}

#: Operations that keep state (a table source is one too): the checkpoint holds their stores.
STATEFUL_OPS = (
    frozenset({"count", "aggregate", "reduce", "cogroup", "toTable", "suppress"})
    | frozenset(t.op for t in join_nodes.JOIN_NODES)
    | {process_nodes.ProcessNode.op}
)

#: What a node's output is: a record stream, a table (a changelog), or a grouping of either.
STREAM, TABLE, GROUPED_STREAM, GROUPED_TABLE = "stream", "table", "grouped stream", "grouped table"
AGGREGATE_FUNCTIONS = ("sum", "min", "max", "avg", "latest", "collect_list")

#: Operations Spark's real-time trigger can run (stateless, expressions only, Kafka in and out).
REALTIME_OPS = frozenset(
    {"source", "filter", "filterNot", "map", "mapValues", "flatMapValues", "selectKey", "merge"}
    | {"split", "branch", "to"}
)


def node_name(op: str, index: int) -> str:
    """The generated name of the ``index``-th node (``KSTREAM-FILTER-0000000003``)."""
    return _TYPES[op].generated_name(index)


@dataclasses.dataclass(frozen=True)
class Topology:
    """An immutable graph plus the application's defaults."""

    nodes: tuple[nd.Node, ...]
    default_key_serde: serdes.Serde | None = None
    default_value_serde: serdes.Serde | None = None
    latency: str = "default"
    application_id: str | None = None

    def kind(self, name: str) -> str:
        """Whether ``name`` outputs a stream, a table or a grouped stream/table (see :data:`STREAM`).

        A table is what ``as: table`` sources, ``toTable`` and aggregations give; ``filter``,
        ``filterNot`` and ``mapValues`` of a table are tables; ``toStream`` makes a stream again.
        """
        node = self.node(name)
        parent = self.kind(node.parents[0]) if node.parents else STREAM
        if isinstance(node, nd.Source):
            return TABLE if node.table else STREAM
        if isinstance(node, nd.GroupBy):
            return GROUPED_TABLE if parent == TABLE else GROUPED_STREAM
        if isinstance(node, (*aggregate_nodes.AGGREGATE_NODES, nd.ToTable, nd.Suppress)):
            return TABLE
        if isinstance(node, (nd.Filter, nd.FilterNot, nd.MapValues)) and parent == TABLE:
            return TABLE
        if isinstance(node, join_nodes.JoinNode):
            return TABLE if self.join_kind(node) in ("table-table", "table-table-fk") else STREAM
        return STREAM

    def join_kind(self, node: join_nodes.JoinNode) -> str:
        """``stream-table``, ``stream-stream`` or ``table-table`` (else the two parents' kinds)."""
        kinds = [self.kind(p) for p in node.parents]
        if kinds == [STREAM, TABLE] and isinstance(self.node(node.parents[1]), join_nodes.GlobalTableSource):
            return "stream-globalTable"
        if kinds == [STREAM, TABLE]:
            return "stream-table"
        if kinds == [STREAM, STREAM]:
            return "stream-stream"
        if kinds == [TABLE, TABLE]:
            return "table-table-fk" if node.foreign_key is not None else "table-table"
        return "-".join(kinds)

    def windowed(self, name: str) -> bool:
        """Whether ``name`` outputs windowed keys (a windowed aggregation, or derived from one)."""
        node = self.node(name)
        if isinstance(node, aggregate_nodes.AGGREGATE_NODES):
            return node.windows is not None
        return bool(node.parents) and self.windowed(node.parents[0]) and not isinstance(node, nd.GroupBy)

    def stateful(self) -> bool:
        return any(n.op in STATEFUL_OPS or (isinstance(n, nd.Source) and n.table) for n in self.nodes)

    def node(self, name: str) -> nd.Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def parents(self, node: nd.Node) -> list[nd.Node]:
        """The parent nodes, in order (for a merge, the stream it was called on comes first)."""
        return [self.node(p) for p in node.parents]

    def children(self, name: str) -> list[nd.Node]:
        return [n for n in self.nodes if name in n.parents]

    def source_topics(self) -> list[str]:
        return list(dict.fromkeys(t for n in self.nodes if isinstance(n, nd.Source) for t in n.topics))

    def sink_topics(self) -> list[str]:
        """Topics the app writes: its sinks', then its sources' dead-letter topics."""
        sinks = [n.topic for n in self.nodes if isinstance(n, nd.Sink)]
        dead = [n.dead_letter_topic for n in self.nodes if isinstance(n, nd.Source) and n.dead_letter_topic]
        return list(dict.fromkeys([*sinks, *dead]))

    def rename_topics(self, renames: Mapping[str, str]) -> Topology:
        """The same graph on other topics (tests run one manifest against fresh topics)."""
        out: list[nd.Node] = []
        for node in self.nodes:
            if isinstance(node, nd.Source):
                dead = node.dead_letter_topic
                out.append(
                    dataclasses.replace(
                        node,
                        topics=tuple(renames.get(t, t) for t in node.topics),
                        dead_letter_topic=renames.get(dead, dead) if dead else None,
                    )
                )
            elif isinstance(node, nd.Sink):
                out.append(dataclasses.replace(node, topic=renames.get(node.topic, node.topic)))
            else:
                out.append(node)
        return dataclasses.replace(self, nodes=tuple(out))

    def key_serde(self, node: nd.Node) -> serdes.Serde:
        """A source's or sink's key serde: its own, else the default (bytes when neither is set)."""
        own = node.key_serde if isinstance(node, (nd.Source, nd.Sink)) else None
        return own or self.default_key_serde or serdes.Serde("bytes")

    def value_serde(self, node: nd.Node) -> serdes.Serde:
        own = node.value_serde if isinstance(node, (nd.Source, nd.Sink)) else None
        return own or self.default_value_serde or serdes.Serde("bytes")

    def source_serdes(self, topic: str) -> tuple[str, str]:
        for node in self.nodes:
            if isinstance(node, nd.Source) and topic in node.topics:
                return self.key_serde(node).name, self.value_serde(node).name
        raise KeyError(f"no source reads topic {topic!r}")

    def sink_serdes(self, topic: str) -> tuple[str, str]:
        for node in self.nodes:
            if isinstance(node, nd.Sink) and node.topic == topic:
                return self.key_serde(node).name, self.value_serde(node).name
        raise KeyError(f"no sink writes topic {topic!r}")

    def trigger(self) -> tuple[str, str]:
        """(trigger kind, why) — real-time only where every operation allows it."""
        if self.latency != "low":
            return "micro-batch", "latency: default"
        for node in self.nodes:
            if node.op not in REALTIME_OPS:
                return "micro-batch", f"latency: low asked, but {node.name} ({node.op}) needs micro-batches"
            if any(isinstance(logic, nd.Function) for logic in node.logic()):
                return "micro-batch", f"latency: low asked, but {node.name} runs a Python function"
        return "real-time", (
            "latency: low; every operation is stateless, Kafka to Kafka; output records "
            "carry their write time, as Spark's real-time Kafka sink sets no timestamps"
        )

    def key_changed(self, name: str) -> bool:
        """Whether records leaving ``name`` may no longer be partitioned by their key: a
        ``selectKey``/``map``/``flatMap`` since the last source, aggregation or repartition."""
        node = self.node(name)
        if isinstance(node, (nd.SelectKey, nd.Map, nd.FlatMap, process_nodes.ProcessNode)):
            return True
        if isinstance(node, (nd.Source, nd.Repartition, *aggregate_nodes.AGGREGATE_NODES)):
            return False
        return any(self.key_changed(p) for p in node.parents)

    def repartitions(self, node: nd.Node) -> bool:
        """Whether Kafka Streams feeds ``node`` through a repartition topic (a new sub-topology
        whose tasks have their own stream time): an explicit ``repartition``, a table's
        ``groupBy``, a stream's key-changing ``groupBy``, or ``groupByKey`` after a key change."""
        if isinstance(node, nd.Repartition):
            return True
        if not isinstance(node, nd.GroupBy):
            return False
        if node.selector is not None or self.kind(node.parents[0]) == TABLE:
            return True
        return self.key_changed(node.parents[0])

    def rekeyed(self, name: str) -> bool:
        """Whether ``name``'s key may differ from the one its records were written with (a join or
        aggregation after it needs Kafka Streams' repartition topic)."""
        node = self.node(name)
        if isinstance(node, (nd.SelectKey, nd.Map, nd.FlatMap, process_nodes.ProcessNode)) or (
            isinstance(node, nd.GroupBy) and node.selector is not None
        ):
            return True
        return any(self.rekeyed(p) for p in node.parents)

    def _join_detail(self, node: join_nodes.JoinNode) -> list[str]:
        """A join's state stores and the repartition topics Kafka Streams would add for it."""
        kind = self.join_kind(node)
        out = [f"stores: [{', '.join(node.stores(kind))}]"]
        topics = [
            f"{node.name}-{side}-repartition"
            for side, parent in zip(("left", "right"), node.parents, strict=True)
            if self.kind(parent) == STREAM and self.rekeyed(parent)
        ]
        out += [f"internal topics: [{', '.join(node.topics())}]"] if node.topics() else []
        return out + ([f"repartition topics: [{', '.join(topics)}]"] if topics else [])

    def subtopologies(self) -> Iterator[list[nd.Node]]:
        """Connected groups of nodes, in build order (Kafka Streams' sub-topologies); what reads
        a repartition topic (the children of a repartitioning node) starts a group of its own."""
        group_of: dict[str, int] = {}
        groups: list[list[nd.Node]] = []
        for node in self.nodes:
            parents = [
                p
                for p in node.parents
                # A global table is a sub-topology of its own (its global store's; no tasks).
                if not self.repartitions(self.node(p))
                and not isinstance(self.node(p), join_nodes.GlobalTableSource)
            ]
            if isinstance(node, join_nodes.JoinNode) and node.foreign_key is not None:
                # The right table meets its subscriptions in a sub-topology of its own (Kafka
                # Streams' subscription-registration and response topics join the two).
                parents = parents[:1]
            linked = sorted({group_of[p] for p in parents if p in group_of})
            if not linked:
                groups.append([node])
                group_of[node.name] = len(groups) - 1
                continue
            target = linked[0]
            for other in linked[1:]:
                for moved in groups[other]:
                    group_of[moved.name] = target
                groups[target].extend(groups[other])
                groups[other] = []
            groups[target].append(node)
            group_of[node.name] = target
        order = {n.name: i for i, n in enumerate(self.nodes)}
        for group in groups:
            if group:
                yield sorted(group, key=lambda n: order[n.name])

    def describe(self) -> str:
        """Readable text in the shape of Kafka Streams' TopologyDescription."""
        lines = ["Topologies:"]
        # Foreign-key joins: the two tables meet through topics (join_nodes.foreign_key_lines).
        fk = [n for n in self.nodes if isinstance(n, join_nodes.JoinNode) and n.foreign_key is not None]
        instead = {(n.parents[0], n.name): f"{n.name}-subscription-registration-sink" for n in fk}
        instead |= {(n.parents[1], n.name): f"{n.name}-foreign-join-subscription" for n in fk}
        for index, group in enumerate(self.subtopologies()):
            if all(isinstance(n, join_nodes.GlobalTableSource) for n in group):
                lines.append(f"   Sub-topology: {index} for global store (will not generate tasks)")
            else:
                lines.append(f"   Sub-topology: {index}")
            sources: set[str] = set()
            for node in group:
                shuffled = [p for p in node.parents if self.repartitions(self.node(p))]
                for parent in shuffled:  # this sub-topology reads the parent's repartition topic
                    if parent not in sources:
                        sources.add(parent)
                        lines.append(
                            f"    Source: {parent}-repartition-source (topics: [{parent}-repartition])"
                        )
                        lines.append(f"      --> {', '.join(c.name for c in self.children(parent))}")
                fk_join = isinstance(node, join_nodes.JoinNode) and node.foreign_key is not None
                if isinstance(node, join_nodes.JoinNode) and node.foreign_key is not None:
                    lines.extend(node.foreign_key_lines()[0])
                detail = node.detail()
                if isinstance(node, join_nodes.JoinNode):
                    detail = ", ".join([detail, *self._join_detail(node)])
                lines.append(f"    {node.kind}: {node.name}" + (f" ({detail})" if detail else ""))
                repartitions = self.repartitions(node)
                kids = (
                    [f"{node.name}-repartition-sink"]
                    if repartitions
                    else [instead.get((node.name, c.name), c.name) for c in self.children(node.name)]
                )
                if kids:
                    lines.append(f"      --> {', '.join(kids)}")
                if fk_join:
                    lines.append(f"      <-- {node.name}-subscription-response-source")
                elif node.parents:
                    parents = [f"{p}-repartition-source" if p in shuffled else p for p in node.parents]
                    lines.append(f"      <-- {', '.join(parents)}")
                if repartitions:
                    lines.append(f"    Sink: {node.name}-repartition-sink (topic: {node.name}-repartition)")
                    lines.append(f"      <-- {node.name}")
                for join in fk:
                    if join.parents[1] == node.name:
                        lines.extend(join.foreign_key_lines()[1])
            lines.append("")
        kind, why = self.trigger()
        lines.append(f"Execution: {kind} trigger ({why})")
        return "\n".join(lines) + "\n"
