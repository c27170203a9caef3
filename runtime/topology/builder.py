"""The Python builder: Kafka Streams' DSL in snake_case, producing the logical graph.

    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    builder.stream("text-lines").filter("length(value) > 0").map_values("upper(value)").to("out")
    topology = builder.build()

Every call adds one node and returns a new stream object; nothing touches Spark. User logic is a
Spark SQL expression (a string), a module-level Python function, or ``Function("pkg.mod:fn")``.
Functions are recorded by import path so a topology can be written out as YAML and loaded again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from streamapp.runtime import errors, serdes
from streamapp.runtime.topology import graph

__all__ = [
    "BranchedKStream",
    "Function",
    "KGroupedStream",
    "KStream",
    "KTable",
    "Logic",
    "StreamsBuilder",
    "logic_params",
]


@dataclasses.dataclass(frozen=True)
class Function:
    """A Python function by import path, ``"package.module:function"``; ``returns`` is its Spark type."""

    ref: str
    returns: str | None = None


Logic = str | Function | Callable[..., Any]


def logic_params(logic: Logic, *, returns: str | None = None) -> dict[str, Any]:
    """User logic as graph parameters: ``{"expr": ...}`` or ``{"function": ..., "returns": ...}``."""
    if isinstance(logic, str):
        return {"expr": logic}
    if isinstance(logic, Function):
        out: dict[str, Any] = {"function": logic.ref}
        if logic.returns or returns:
            out["returns"] = logic.returns or returns
        return out
    if callable(logic):
        qualname = getattr(logic, "__qualname__", "")
        module = getattr(logic, "__module__", None)
        if not module or "<lambda>" in qualname or "<locals>" in qualname:
            raise errors.TopologyError(
                f"{qualname or logic!r} cannot be referenced by import path: use a module-level "
                "function (a lambda or a nested function cannot be written to a manifest)"
            )
        out = {"function": f"{module}:{qualname}"}
        if returns:
            out["returns"] = returns
        return out
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
        self._nodes: list[graph.Node] = []
        self.default_key_serde = default_key_serde
        self.default_value_serde = default_value_serde
        self.latency = latency
        self.application_id = application_id

    def _add(self, op: str, parents: tuple[str, ...], params: Mapping[str, Any]) -> str:
        name = graph.node_name(op, len(self._nodes))
        self._nodes.append(graph.Node(name=name, op=op, parents=parents, params=dict(params)))
        return name

    def stream(
        self,
        topics: str | list[str],
        *,
        key_serde: serdes.Serde | None = None,
        value_serde: serdes.Serde | None = None,
        timestamp: str | None = None,
    ) -> KStream:
        """A KStream of one or more topics; ``timestamp`` is an expression giving event time (ms)."""
        params: dict[str, Any] = {"topics": [topics] if isinstance(topics, str) else list(topics)}
        if key_serde:
            params["keySerde"] = key_serde
        if value_serde:
            params["valueSerde"] = value_serde
        if timestamp:
            params["timestamp"] = timestamp
        return KStream(self, self._add("source", (), params))

    def build(self) -> graph.Topology:
        return graph.Topology(
            nodes=tuple(self._nodes),
            default_key_serde=self.default_key_serde,
            default_value_serde=self.default_value_serde,
            latency=self.latency,
            application_id=self.application_id,
        )

    def to_manifest(self, name: str, **spec: Any) -> str:
        """The topology as a StreamApp manifest (YAML); loading it gives an equal graph."""
        from streamapp.runtime.manifest import convert  # noqa: PLC0415 - manifest builds on topology

        return convert.to_manifest_yaml(self.build(), name=name, spec=spec)


@dataclasses.dataclass(frozen=True)
class KStream:
    """A stream of records; every method returns a new KStream (or ends the chain)."""

    builder: StreamsBuilder
    node: str

    def _then(self, op: str, params: Mapping[str, Any], *others: KStream) -> KStream:
        parents = (self.node, *(o.node for o in others))
        return KStream(self.builder, self.builder._add(op, parents, params))

    def filter(self, predicate: Logic) -> KStream:
        return self._then("filter", logic_params(predicate, returns="boolean"))

    def filter_not(self, predicate: Logic) -> KStream:
        return self._then("filterNot", logic_params(predicate, returns="boolean"))

    def map_values(self, mapper: Logic, *, returns: str | None = None) -> KStream:
        return self._then("mapValues", logic_params(mapper, returns=returns))

    def flat_map_values(self, mapper: Logic, *, returns: str | None = None) -> KStream:
        return self._then("flatMapValues", logic_params(mapper, returns=returns))

    def select_key(self, mapper: Logic, *, returns: str | None = None) -> KStream:
        return self._then("selectKey", logic_params(mapper, returns=returns))

    def map(self, key: Logic, value: Logic) -> KStream:
        """New key and value per record (two pieces of logic, each over the input record)."""
        return self._then("map", {"key": logic_params(key), "value": logic_params(value)})

    def flat_map(self, mapper: Logic, *, returns: str | None = None) -> KStream:
        """``mapper`` returns an array of ``struct(key, value)``; one record per element."""
        return self._then("flatMap", logic_params(mapper, returns=returns))

    def peek(self, action: Logic) -> KStream:
        return self._then("peek", logic_params(action))

    def merge(self, *others: KStream) -> KStream:
        return self._then("merge", {}, *others)

    def repartition(self, *, partitions: int | None = None) -> KStream:
        return self._then("repartition", {"partitions": partitions} if partitions else {})

    def group_by(self, selector: Logic, *, returns: str | None = None) -> KGroupedStream:
        """Group by a new key (records whose new key is null are dropped, as in Kafka Streams)."""
        return KGroupedStream(
            self.builder, self.builder._add("groupBy", (self.node,), logic_params(selector, returns=returns))
        )

    def group_by_key(self) -> KGroupedStream:
        return KGroupedStream(self.builder, self.builder._add("groupBy", (self.node,), {}))

    def split(self) -> BranchedKStream:
        return BranchedKStream(self, [], None)

    def to(
        self, topic: str, *, key_serde: serdes.Serde | None = None, value_serde: serdes.Serde | None = None
    ) -> None:
        params: dict[str, Any] = {"topic": topic}
        if key_serde:
            params["keySerde"] = key_serde
        if value_serde:
            params["valueSerde"] = value_serde
        self._then("to", params)

    def print(self, *, label: str | None = None) -> None:
        self._then("print", {"label": label} if label else {})


@dataclasses.dataclass(frozen=True)
class KGroupedStream:
    """Records grouped by key, ready to aggregate into a :class:`KTable`."""

    builder: StreamsBuilder
    node: str

    def count(self) -> KTable:
        return KTable(self.builder, self.builder._add("count", (self.node,), {}))

    def aggregate(self, fn: str, expr: str = "value") -> KTable:
        """A declarative aggregate per key: sum, min, max, avg, latest or collect_list of ``expr``."""
        if fn not in graph.AGGREGATE_FUNCTIONS:
            raise errors.TopologyError(
                f"unknown aggregate {fn!r}; expected one of {', '.join(graph.AGGREGATE_FUNCTIONS)}"
            )
        return KTable(self.builder, self.builder._add("aggregate", (self.node,), {"fn": fn, "expr": expr}))


@dataclasses.dataclass(frozen=True)
class KTable:
    """A changelog: the latest value per key; each update carries the max timestamp of its inputs."""

    builder: StreamsBuilder
    node: str

    def to_stream(self) -> KStream:
        return KStream(self.builder, self.builder._add("toStream", (self.node,), {}))


@dataclasses.dataclass
class BranchedKStream:
    """``stream.split().branch(pred, "name").default_branch("rest")`` → dict of named streams.

    As in Kafka Streams, a record goes to the first branch whose predicate holds.
    """

    stream: KStream
    branches: list[tuple[str, Logic]]
    default: str | None

    def branch(self, predicate: Logic, name: str) -> BranchedKStream:
        return BranchedKStream(self.stream, [*self.branches, (name, predicate)], self.default)

    def default_branch(self, name: str = "default") -> dict[str, KStream]:
        return BranchedKStream(self.stream, self.branches, name).no_default_branch()

    def no_default_branch(self) -> dict[str, KStream]:
        builder = self.stream.builder
        spec = [{"name": n, "predicate": logic_params(p, returns="boolean")} for n, p in self.branches]
        split = builder._add("split", (self.stream.node,), {"branches": spec, "default": self.default})
        out: dict[str, KStream] = {}
        for name in [n for n, _ in self.branches] + ([self.default] if self.default else []):
            out[name] = KStream(builder, builder._add("branch", (split,), {"branch": name}))
        return out
