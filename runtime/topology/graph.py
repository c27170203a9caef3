"""The logical topology: the one graph both the YAML manifest and the Python builder produce.

Nodes know nothing about Spark. Each has a stable generated name in Kafka Streams' style
(``KSTREAM-FILTER-0000000003``: operation and build-order counter), its parents, its parameters
(user logic as ``{"expr": ...}`` or ``{"function": "module:qualname", "returns": ...}``), and the
manifest path it came from, so every error can point at the line the user wrote.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from streamapp.runtime import serdes

__all__ = ["OPS", "Node", "Topology", "node_name"]

#: Operation → the word Kafka Streams uses in generated processor names.
OPS: Mapping[str, str] = {
    "source": "SOURCE",
    "filter": "FILTER",
    "filterNot": "FILTER",
    "map": "MAP",
    "mapValues": "MAPVALUES",
    "flatMap": "FLATMAP",
    "flatMapValues": "FLATMAPVALUES",
    "selectKey": "KEY-SELECT",
    "peek": "PEEK",
    "split": "BRANCH",
    "branch": "BRANCHCHILD",
    "merge": "MERGE",
    "repartition": "REPARTITION",
    "to": "SINK",
    "print": "PRINTER",
    "groupBy": "GROUPBY",
    "count": "AGGREGATE",
    "aggregate": "AGGREGATE",
    "toStream": "KTABLE-TOSTREAM",
}

#: Operations that keep state: the query runs in update mode and its checkpoint holds the tables.
STATEFUL_OPS = frozenset({"count", "aggregate"})
AGGREGATE_FUNCTIONS = ("sum", "min", "max", "avg", "latest", "collect_list")

#: Operations Spark's real-time trigger can run (stateless, expressions only, Kafka in and out).
REALTIME_OPS = frozenset(
    {
        "source",
        "filter",
        "filterNot",
        "map",
        "mapValues",
        "flatMapValues",
        "selectKey",
        "merge",
        "split",
        "branch",
        "to",
    }
)


def node_name(op: str, index: int) -> str:
    word = OPS[op]
    return f"{word if word.startswith('KTABLE-') else 'KSTREAM-' + word}-{index:010d}"


@dataclasses.dataclass(frozen=True)
class Node:
    """One operation of the graph."""

    name: str
    op: str
    parents: tuple[str, ...] = ()
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    path: str = dataclasses.field(default="", compare=False)

    def detail(self) -> str:
        """The node's parameters as describe() shows them."""
        p = self.params
        if self.op == "source":
            return f"topics: [{', '.join(p['topics'])}]"
        if self.op == "to":
            return f"topic: {p['topic']}"
        parts = []
        for key in ("fn", "expr", "function", "key", "value", "predicate", "label", "partitions", "branch"):
            value = p.get(key)
            if isinstance(value, Mapping):
                value = value.get("expr") or value.get("function")
            if value is not None:
                parts.append(f"{key}: {value}")
        return ", ".join(parts)


@dataclasses.dataclass(frozen=True)
class Topology:
    """An immutable graph plus the application's defaults."""

    nodes: tuple[Node, ...]
    default_key_serde: serdes.Serde | None = None
    default_value_serde: serdes.Serde | None = None
    latency: str = "default"
    application_id: str | None = None

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def children(self, name: str) -> list[Node]:
        return [n for n in self.nodes if name in n.parents]

    def source_topics(self) -> list[str]:
        return list(dict.fromkeys(t for n in self.nodes if n.op == "source" for t in n.params["topics"]))

    def sink_topics(self) -> list[str]:
        return list(dict.fromkeys(n.params["topic"] for n in self.nodes if n.op == "to"))

    def key_serde(self, node: Node) -> serdes.Serde:
        return _serde(node.params.get("keySerde")) or self.default_key_serde or serdes.Serde("bytes")

    def value_serde(self, node: Node) -> serdes.Serde:
        return _serde(node.params.get("valueSerde")) or self.default_value_serde or serdes.Serde("bytes")

    def source_serdes(self, topic: str) -> tuple[str, str]:
        for node in self.nodes:
            if node.op == "source" and topic in node.params["topics"]:
                return self.key_serde(node).name, self.value_serde(node).name
        raise KeyError(f"no source reads topic {topic!r}")

    def sink_serdes(self, topic: str) -> tuple[str, str]:
        for node in self.nodes:
            if node.op == "to" and node.params["topic"] == topic:
                return self.key_serde(node).name, self.value_serde(node).name
        raise KeyError(f"no sink writes topic {topic!r}")

    def trigger(self) -> tuple[str, str]:
        """(trigger kind, why) — real-time only where every operation allows it."""
        if self.latency != "low":
            return "micro-batch", "latency: default"
        for node in self.nodes:
            if node.op not in REALTIME_OPS:
                return "micro-batch", f"latency: low asked, but {node.name} ({node.op}) needs micro-batches"
            if any(isinstance(v, Mapping) and "function" in v for v in node.params.values()):
                return "micro-batch", f"latency: low asked, but {node.name} runs a Python function"
        return "real-time", (
            "latency: low; every operation is stateless, Kafka to Kafka; output records "
            "carry their write time, as Spark's real-time Kafka sink sets no timestamps"
        )

    def subtopologies(self) -> Iterator[list[Node]]:
        """Connected groups of nodes, in build order (Kafka Streams' sub-topologies)."""
        group_of: dict[str, int] = {}
        groups: list[list[Node]] = []
        for node in self.nodes:
            linked = sorted({group_of[p] for p in node.parents if p in group_of})
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
        for index, group in enumerate(self.subtopologies()):
            lines.append(f"   Sub-topology: {index}")
            for node in group:
                kind = {"source": "Source", "to": "Sink"}.get(node.op, "Processor")
                detail = node.detail()
                lines.append(f"    {kind}: {node.name}" + (f" ({detail})" if detail else ""))
                kids = [c.name for c in self.children(node.name)]
                if kids:
                    lines.append(f"      --> {', '.join(kids)}")
                if node.parents:
                    lines.append(f"      <-- {', '.join(node.parents)}")
            lines.append("")
        kind, why = self.trigger()
        lines.append(f"Execution: {kind} trigger ({why})")
        return "\n".join(lines) + "\n"


def _serde(raw: Any) -> serdes.Serde | None:
    if raw is None:
        return None
    if isinstance(raw, serdes.Serde):
        return raw
    if isinstance(raw, Mapping):
        return serdes.Serde(raw["name"], raw.get("schema"))
    return serdes.Serde(str(raw))
