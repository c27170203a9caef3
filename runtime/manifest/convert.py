"""Manifest → logical graph: the source and steps of each stream of a loaded manifest become nodes.

:class:`Converter` reports what only the structure shows and the graph checks' problems by manifest
path; :mod:`streamapp.runtime.manifest.loader` puts them together with the schema's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from streamapp.runtime import errors, serdes
from streamapp.runtime.manifest import models, topology_spec
from streamapp.runtime.topology import (
    aggregate_nodes,
    durations,
    graph,
    join_nodes,
    nodes,
    process_nodes,
    validate,
)

__all__ = ["Converter", "build_topology"]

_TERMINAL = ("to", "print", "split")
_ENDED = {
    "split": "nothing can follow split: start a new stream from one of its branches ('{stream}.<branch>')",
    "to": "nothing can follow to: it ends the stream (to write and go on, start two streams from this one)",
    "print": "nothing can follow print: it ends the stream (to print and go on, use peek, or two streams)",
}
_AGGREGATIONS = ("count", "aggregate", "reduce", "cogroup")
_JOINS: Mapping[str, type[join_nodes.JoinNode]] = {t.op: t for t in join_nodes.JOIN_NODES}
_LOGIC_NODES: Mapping[str, tuple[type[nodes.Node], str]] = {
    "filter": (nodes.Filter, "predicate"),
    "filterNot": (nodes.FilterNot, "predicate"),
    "mapValues": (nodes.MapValues, "mapper"),
    "flatMapValues": (nodes.FlatMapValues, "mapper"),
    "selectKey": (nodes.SelectKey, "mapper"),
    "flatMap": (nodes.FlatMap, "mapper"),
    "peek": (nodes.Peek, "action"),
}


def _order(problem: errors.Problem) -> list[Any]:
    """Sort key: manifest order (``steps[10]`` after ``steps[2]``), so problems read top to bottom."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", problem.path)]


def build_topology(app: models.StreamApp) -> graph.Topology:
    """The logical graph of a loaded manifest."""
    topology, problems = Converter(app).run()
    if problems or topology is None:
        raise errors.ManifestError(problems)
    return topology


def _serde(spec: topology_spec.SerdeSpec | None) -> serdes.Serde | None:
    if spec is None:
        return None
    if isinstance(spec, topology_spec.SerdeObject):
        return serdes.Serde(spec.name, spec.schema_)
    return serdes.Serde(spec)


class Converter:
    """Walks the manifest's streams in order, building nodes and collecting structural problems."""

    def __init__(self, app: models.StreamApp) -> None:
        self.topo = app.spec.topology
        self.nodes: list[nodes.Node] = []
        self.problems: list[errors.Problem] = []
        #: stream name (or '<stream>.<branch>') → its last node, and what that node is
        self.tails: dict[str, tuple[str, str]] = {}
        #: a windowedBy step waiting for its aggregation: (windows, emit, manifest path)
        self.windowing: tuple[aggregate_nodes.Windows | None, str, str] | None = None

    def problem(self, path: str, message: str) -> None:
        self.problems.append(errors.Problem(path, message))

    def add(
        self,
        node_type: type[nodes.Node],
        parents: tuple[str, ...],
        path: str,
        name: str | None,
        **fields: Any,
    ) -> str:
        node_name = name or node_type.generated_name(len(self.nodes))
        if name and any(n.name == name for n in self.nodes):
            self.problem(f"{path.rsplit('.', 1)[0]}.name", f"a node named {name!r} is already defined")
        self.nodes.append(node_type(name=node_name, parents=parents, path=path, **fields))
        return node_name

    def logic(self, spec: topology_spec.LogicSpec, path: str, *, returns: str | None = None) -> nodes.Logic:
        if isinstance(spec, str):
            return nodes.Expr(spec)
        if (spec.expr is None) == (spec.function is None):
            self.problem(path, "give exactly one of expr or function")
        if spec.function is not None:
            return nodes.Function(spec.function, spec.returns or returns)
        return nodes.Expr(spec.expr or "")

    def run(self) -> tuple[graph.Topology | None, list[errors.Problem]]:
        defaults = self.topo.defaults
        for i, stream in enumerate(self.topo.streams):
            path = f"spec.topology.streams[{i}]"
            name = stream.name or f"stream-{i}"
            if name in self.tails:
                self.problem(f"{path}.name", f"a stream named {name!r} is already defined")
            tail = self.start(stream, path)
            if tail is None:
                continue
            last_op = "source"
            self.windowing = None
            for j, step in enumerate(stream.steps):
                op, spec = step.operation()
                if last_op in _TERMINAL:
                    self.problem(f"{path}.steps[{j}]", _ENDED[last_op].format(op=last_op, stream=name))
                    break
                here = f"{path}.steps[{j}].{op}"
                if self.windowing is not None and op not in _AGGREGATIONS:
                    self.problem(
                        self.windowing[2], "windowedBy must be followed by count, aggregate or reduce"
                    )
                    self.windowing = None
                if op == "windowedBy":
                    self.windowed_by(spec, tail, here, step.name)
                    last_op = op
                    continue
                tail = self.step(op, spec, tail, here, step.name, name)
                last_op = op
            if self.windowing is not None:
                self.problem(self.windowing[2], "windowedBy must be followed by count, aggregate or reduce")
            self.tails[name] = (tail, last_op)
        topology = graph.Topology(
            nodes=tuple(self.nodes),
            default_key_serde=_serde(defaults.key_serde),
            default_value_serde=_serde(defaults.value_serde),
            latency=self.topo.latency,
            application_id=self.topo.application_id,
        )
        problems = sorted(self.problems + validate.validate_topology(topology), key=_order)
        return (None, problems) if problems else (topology, [])

    def start(self, stream: topology_spec.StreamSpec, path: str) -> str | None:
        src = stream.from_
        if len([x for x in (src.topic, src.topics, src.stream) if x]) != 1:
            self.problem(f"{path}.from", "give exactly one of topic, topics or stream")
            return None
        if src.as_ in ("table", "globalTable") and src.stream:
            self.problem(
                f"{path}.from.as", f"as: {src.as_} reads topics; to make a stream a table, use a toTable step"
            )
            return None
        if src.as_ == "globalTable" and src.max_offsets_per_trigger is not None:
            self.problem(
                f"{path}.from.maxOffsetsPerTrigger",
                "a globalTable is read to its end in every micro-batch, before the streams that look it "
                "up (Kafka Streams bootstraps a GlobalKTable in full first): it takes no rate limit; set "
                "it on the streams",
            )
        if src.stream:
            if src.stream not in self.tails:
                self.problem(
                    f"{path}.from.stream",
                    f"unknown stream {src.stream!r} (streams are referred to "
                    f"after they are defined; known: {', '.join(self.tails) or 'none'})",
                )
                return None
            tail, last_op = self.tails[src.stream]
            if last_op in _TERMINAL:
                more = [b for b in self.tails if b.startswith(f"{src.stream}.")]
                hint = (
                    f"; continue from one of its branches: {', '.join(more)}"
                    if more
                    else f" (nothing can follow it: end {src.stream!r} before its {last_op} and start "
                    "two streams from it)"
                )
                self.problem(f"{path}.from.stream", f"stream {src.stream!r} ends with {last_op}{hint}")
                return None
            return tail
        return self.add(
            join_nodes.GlobalTableSource if src.as_ == "globalTable" else nodes.Source,
            (),
            f"{path}.from",
            None,
            topics=(src.topic,) if src.topic else tuple(src.topics or ()),
            key_serde=_serde(src.key_serde),
            value_serde=_serde(src.value_serde),
            timestamp=src.timestamp,
            table=src.as_ != "stream",
            max_offsets_per_trigger=None if src.as_ == "globalTable" else src.max_offsets_per_trigger,
            **self.error_policy(src, path),
        )

    def error_policy(self, src: topology_spec.FromSpec, path: str) -> dict[str, Any]:
        """The source's deserializationErrors and deadLetterTopic, checked together."""
        policy, topic = src.deserialization_errors, src.dead_letter_topic
        if policy == "deadLetter" and not topic:
            self.problem(
                f"{path}.from.deadLetterTopic", "deserializationErrors: deadLetter needs a deadLetterTopic"
            )
        if topic and policy != "deadLetter":
            self.problem(
                f"{path}.from.deadLetterTopic",
                f"only used with deserializationErrors: deadLetter (this source's is {policy})",
            )
        if policy != "fail" and src.as_ == "globalTable":
            self.problem(
                f"{path}.from.deserializationErrors",
                "a globalTable is read in full by every task, outside the micro-batch's counts: only fail",
            )
            return {}
        if src.as_ == "globalTable":
            return {}
        return {"deserialization_errors": None if policy == "fail" else policy, "dead_letter_topic": topic}

    def duration(self, value: topology_spec.Duration, path: str) -> int:
        try:
            return durations.to_ms(value)
        except ValueError as err:
            self.problem(path, str(err))
            return 0

    def windowed_by(self, spec: topology_spec.WindowsSpec, tail: str, path: str, name: str | None) -> None:
        """Remember the windows for the aggregation that must come next (no node of its own)."""
        if name:
            self.problem(f"{path.rsplit('.', 1)[0]}.name", "windowedBy adds no node; name its aggregation")
        parent = next((n for n in self.nodes if n.name == tail), None)
        if not isinstance(parent, nodes.GroupBy):
            self.problem(path, "windowedBy must directly follow groupBy or groupByKey")
        kinds = [k for k in aggregate_nodes.WINDOW_KINDS if getattr(spec, k) is not None]
        if len(kinds) != 1:
            self.problem(path, f"give exactly one of {', '.join(aggregate_nodes.WINDOW_KINDS)}")
            self.windowing = (None, spec.emit, path)
            return
        kind = kinds[0]
        grace = self.duration(spec.grace, f"{path}.grace")
        if kind == "hopping":
            assert spec.hopping is not None
            size = self.duration(spec.hopping.size, f"{path}.hopping.size")
            advance = self.duration(spec.hopping.advance, f"{path}.hopping.advance")
        else:
            size = self.duration(getattr(spec, kind), f"{path}.{kind}")
            advance = size if kind == "tumbling" else 0
        if size <= 0 and not any(p.path.startswith(f"{path}.{kind}") for p in self.problems):
            self.problem(f"{path}.{kind}", f"must be a positive duration, not {getattr(spec, kind)!r}")
        if kind == "hopping" and size > 0 and not 0 < advance <= size:
            self.problem(
                f"{path}.hopping.advance",
                f"must be positive and at most the size ({size} ms), not {advance} ms",
            )
        if grace < 0:
            self.problem(f"{path}.grace", f"must not be negative, not {spec.grace!r}")
        self.windowing = (aggregate_nodes.Windows(kind, size, advance, grace), spec.emit, path)

    def aggregation(self, op: str, spec: Any, tail: str, path: str, name: str | None) -> str:
        windows, emit, _ = self.windowing or (None, "updates", "")
        self.windowing = None
        window = {"windows": windows, "emit": emit}
        if op == "count":
            return self.add(aggregate_nodes.Count, (tail,), path, name, **window)
        if op == "cogroup":
            parents = [tail]
            for k, other in enumerate(spec.with_):
                if other.stream not in self.tails:
                    self.problem(f"{path}.with[{k}].stream", f"unknown stream {other.stream!r}")
                else:
                    parents.append(self.tails[other.stream][0])
            adders = (nodes.Function(spec.adder), *(nodes.Function(o.adder) for o in spec.with_))
            return self.add(
                aggregate_nodes.Cogroup, tuple(parents), path, name, adders=adders[: len(parents)],
                initializer=nodes.Function(spec.initializer), returns=spec.returns, **window,
            )  # fmt: skip
        if op == "reduce":
            reducer = nodes.Function(spec.reducer)
            sub = nodes.Function(spec.subtractor) if spec.subtractor else None
            return self.add(
                aggregate_nodes.Reduce,
                (tail,),
                path,
                name,
                reducer=reducer,
                subtractor=sub,
                returns=spec.returns,
                **window,
            )
        functions = {
            field: nodes.Function(ref) if (ref := getattr(spec, field)) else None
            for field in ("initializer", "adder", "subtractor")
        }
        return self.add(
            aggregate_nodes.Aggregate, (tail,), path, name, fn=spec.fn, expr=spec.expr, returns=spec.returns,
            **functions, **window,
        )  # fmt: skip

    def join(
        self,
        node_type: type[join_nodes.JoinNode],
        spec: topology_spec.JoinSpec,
        tail: str,
        path: str,
        name: str | None,
    ) -> str:
        """A join node whose second parent is the tail of the stream named in ``with``."""
        other = self.tails.get(spec.with_)
        if other is None:
            known = ", ".join(self.tails) or "none"
            self.problem(f"{path}.with", f"unknown stream {spec.with_!r} (streams defined so far: {known})")
            return tail  # no join node: the graph checks would only repeat the problem
        if other[1] in _TERMINAL:
            self.problem(f"{path}.with", f"stream {spec.with_!r} ends with {other[1]}; it cannot be joined")
        windows = None
        if spec.windows is not None:
            w, where = spec.windows, f"{path}.windows"
            if w.time_difference is not None and (w.before is not None or w.after is not None):
                self.problem(where, "give timeDifference, or before and/or after, not both")
            if w.time_difference is None and w.before is None and w.after is None:
                self.problem(where, "give timeDifference, or before and/or after")
            difference = (
                0
                if w.time_difference is None
                else self.duration(w.time_difference, f"{where}.timeDifference")
            )
            before = self.duration(w.before, f"{where}.before") if w.before is not None else None
            after = self.duration(w.after, f"{where}.after") if w.after is not None else None
            windows = join_nodes.JoinWindows(
                before=before if before is not None else (after if after is not None else difference),
                after=after if after is not None else (before if before is not None else difference),
                grace=self.duration(w.grace, f"{where}.grace"),
            )
        parents = (tail, other[0])
        key = None if spec.key is None else self.logic(spec.key, f"{path}.key")
        foreign_key = None if spec.foreign_key is None else self.logic(spec.foreign_key, f"{path}.foreignKey")
        joiner = self.logic(spec.joiner, f"{path}.joiner")
        return self.add(
            node_type, parents, path, name, joiner=joiner, windows=windows, key=key, foreign_key=foreign_key
        )

    def step(self, op: str, spec: Any, tail: str, path: str, name: str | None, stream: str) -> str:
        if op in _LOGIC_NODES:
            node_type, field = _LOGIC_NODES[op]
            returns = "boolean" if op in ("filter", "filterNot") else None
            return self.add(
                node_type, (tail,), path, name, **{field: self.logic(spec, path, returns=returns)}
            )
        if op == "map":
            key, value = self.logic(spec.key, f"{path}.key"), self.logic(spec.value, f"{path}.value")
            return self.add(nodes.Map, (tail,), path, name, key=key, value=value)
        if op == "merge":
            parents = [tail]
            for k, other in enumerate(spec):
                if other not in self.tails:
                    self.problem(f"{path}[{k}]", f"unknown stream {other!r}")
                elif (ended := self.tails[other][1]) in _TERMINAL:
                    self.problem(f"{path}[{k}]", f"stream {other!r} ends with {ended}; it cannot be merged")
                else:
                    parents.append(self.tails[other][0])
            return self.add(nodes.Merge, tuple(parents), path, name)
        if op == "repartition":
            return self.add(
                nodes.Repartition, (tail,), path, name, partitions=spec.partitions, repartition_name=spec.name
            )
        if op == "print":
            return self.add(nodes.Print, (tail,), path, name, label=spec.label)
        if op == "to":
            to = topology_spec.ToSpec(topic=spec) if isinstance(spec, str) else spec
            by = (
                None
                if to.partitioner is None
                else self.logic(to.partitioner, f"{path}.partitioner", returns="int")
            )
            return self.add(
                nodes.Sink,
                (tail,),
                path,
                name,
                topic=to.topic,
                key_serde=_serde(to.key_serde),
                value_serde=_serde(to.value_serde),
                partitioner=by,
            )
        if op in ("groupBy", "groupByKey"):
            selector = None if op == "groupByKey" else self.logic(spec, path)
            return self.add(nodes.GroupBy, (tail,), path, name, selector=selector)
        if op in _AGGREGATIONS:
            return self.aggregation(op, spec, tail, path, name)
        if op in _JOINS:
            return self.join(_JOINS[op], spec, tail, path, name)
        if op == "process":
            processor = nodes.Function(spec.function, spec.returns)
            stores = process_nodes.stores_of(spec.function)
            return self.add(
                process_nodes.ProcessNode, (tail,), path, name, processor=processor, stores=stores
            )
        if op in ("toStream", "toTable", "suppress"):
            node_type = {"toStream": nodes.ToStream, "toTable": nodes.ToTable, "suppress": nodes.Suppress}[op]
            return self.add(node_type, (tail,), path, name)
        if op == "split":
            branches = tuple(
                nodes.Branch(
                    b.name, self.logic(b.predicate, f"{path}.branches[{k}].predicate", returns="boolean")
                )
                for k, b in enumerate(spec.branches)
            )
            names = [b.name for b in branches] + ([spec.default] if spec.default else [])
            for dup in sorted({n for n in names if names.count(n) > 1}):
                self.problem(path, f"branch name {dup!r} is used more than once")
            split = self.add(nodes.Split, (tail,), path, name, branches=branches, default=spec.default)
            for branch in names:
                child = self.add(nodes.BranchChild, (split,), path, None, branch=branch)
                self.tails[f"{stream}.{branch}"] = (child, "branch")
            return split
        raise AssertionError(op)
