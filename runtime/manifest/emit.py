"""Logical graph → StreamApp manifest (YAML), so a topology built in Python can be deployed.

Loading the emitted YAML gives an equal graph: streams are written in node order, a step joins
the current stream only when it continues it, anything else starts a new stream ``from`` the
stream (or split branch) it continues, and a node name is written only when the user chose it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from streamapp.runtime import serdes
from streamapp.runtime.topology import aggregate_nodes, graph, join_nodes, nodes, process_nodes

__all__ = ["to_manifest_yaml"]

_TERMINAL = ("to", "print", "split")


def _serde(serde: serdes.Serde) -> Any:
    return {"name": serde.name, "schema": serde.schema} if serde.schema else serde.name


def _logic(logic: nodes.Logic) -> Any:
    return logic.sql if isinstance(logic, nodes.Expr) else nodes.logic_params(logic)


def _serdes(out: dict[str, Any], node: nodes.Source | nodes.Sink) -> None:
    if node.key_serde:
        out["keySerde"] = _serde(node.key_serde)
    if node.value_serde:
        out["valueSerde"] = _serde(node.value_serde)


def _step(node: nodes.Node, stream_of: Mapping[str, str]) -> Any:
    if isinstance(node, (nodes.Filter, nodes.FilterNot)):
        return _logic(node.predicate)
    if isinstance(node, (nodes.MapValues, nodes.FlatMapValues, nodes.SelectKey, nodes.FlatMap)):
        return _logic(node.mapper)
    if isinstance(node, nodes.Peek):
        return _logic(node.action)
    if isinstance(node, nodes.Map):
        return {"key": _logic(node.key), "value": _logic(node.value)}
    if isinstance(node, nodes.Merge):
        return [stream_of[parent] for parent in node.parents[1:]]
    if isinstance(node, nodes.Repartition):
        out = {"partitions": node.partitions, "name": node.repartition_name}
        return {k: v for k, v in out.items() if v is not None}
    if isinstance(node, nodes.Print):
        return {"label": node.label} if node.label else {}
    if isinstance(node, nodes.Sink):
        to: dict[str, Any] = {"topic": node.topic}
        _serdes(to, node)
        if node.partitioner is not None:
            to["partitioner"] = _logic(node.partitioner)
        return to
    if isinstance(node, nodes.GroupBy):
        return _logic(node.selector) if node.selector else {}
    if isinstance(node, aggregate_nodes.Aggregate):
        if node.fn is not None:
            return {"fn": node.fn, "expr": node.expr}
        fields = {
            "initializer": node.initializer.ref if node.initializer else None,
            "adder": node.adder.ref if node.adder else None,
            "subtractor": node.subtractor.ref if node.subtractor else None,
            "returns": node.returns,
        }
        return {k: v for k, v in fields.items() if v is not None}
    if isinstance(node, aggregate_nodes.Reduce):
        reduce = {
            "reducer": node.reducer.ref,
            "subtractor": node.subtractor.ref if node.subtractor else None,
            "returns": node.returns,
        }
        return {k: v for k, v in reduce.items() if v is not None}
    if isinstance(node, aggregate_nodes.Cogroup):
        return {
            "adder": node.adders[0].ref,
            "with": [
                {"stream": stream_of[p], "adder": a.ref}
                for p, a in zip(node.parents[1:], node.adders[1:], strict=True)
            ],
            "initializer": node.initializer.ref,
            "returns": node.returns,
        }
    if isinstance(node, join_nodes.JoinNode):
        join: dict[str, Any] = {"with": stream_of[node.parents[1]], "joiner": _logic(node.joiner)}
        if node.key is not None:
            join["key"] = _logic(node.key)
        if node.foreign_key is not None:
            join["foreignKey"] = _logic(node.foreign_key)
        if node.windows is not None:
            w = node.windows
            join["windows"] = {"before": w.before, "after": w.after, "grace": w.grace}
        return join
    if isinstance(node, process_nodes.ProcessNode):
        process = {"function": node.processor.ref, "returns": node.processor.returns}
        return {k: v for k, v in process.items() if v is not None}
    if isinstance(node, nodes.Suppress):
        return "untilWindowCloses"
    if isinstance(node, nodes.Split):
        split: dict[str, Any] = {
            "branches": [{"name": b.name, "predicate": _logic(b.predicate)} for b in node.branches]
        }
        if node.default:
            split["default"] = node.default
        return split
    return {}  # count, toStream, toTable


def _windowed_by(windows: aggregate_nodes.Windows, emit: str) -> dict[str, Any]:
    spec: dict[str, Any] = (
        {"hopping": {"size": windows.size, "advance": windows.advance}}
        if windows.kind == "hopping"
        else {windows.kind: windows.size}
    )
    spec["grace"] = windows.grace
    if emit != "updates":
        spec["emit"] = emit
    return spec


def _op(node: nodes.Node) -> str:
    if isinstance(node, nodes.GroupBy) and node.selector is None:
        return "groupByKey"
    return node.op


def to_manifest_yaml(topology: graph.Topology, *, name: str, spec: Mapping[str, Any] | None = None) -> str:
    """The topology as a StreamApp manifest; ``spec`` adds other fields of the spec (kafka, …)."""
    streams: list[dict[str, Any]] = []
    stream_of: dict[str, str] = {}  # node → name of the stream whose tail it is (or a split branch)
    open_tail: str | None = None  # the tail of the last stream, if steps may still be appended
    children = {n.name: len(topology.children(n.name)) for n in topology.nodes}
    for index, node in enumerate(topology.nodes):
        if isinstance(node, nodes.BranchChild):
            stream_of[node.name] = f"{stream_of[node.parents[0]]}.{node.branch}"
            open_tail = None
            continue
        if isinstance(node, nodes.Source):
            src: dict[str, Any] = (
                {"topic": node.topics[0]} if len(node.topics) == 1 else {"topics": list(node.topics)}
            )
            _serdes(src, node)
            if node.timestamp is not None:
                src["timestamp"] = node.timestamp
            if node.table:
                src["as"] = "globalTable" if isinstance(node, join_nodes.GlobalTableSource) else "table"
            streams.append({"name": f"stream-{len(streams)}", "from": src, "steps": []})
        else:
            if node.parents[0] != open_tail:
                start = {"stream": stream_of[node.parents[0]]}
                streams.append({"name": f"stream-{len(streams)}", "from": start, "steps": []})
            if isinstance(node, aggregate_nodes.AGGREGATE_NODES) and node.windows:
                streams[-1]["steps"].append({"windowedBy": _windowed_by(node.windows, node.emit)})
            step: dict[str, Any] = {_op(node): _step(node, stream_of)}
            if node.name != node.generated_name(index):
                step["name"] = node.name
            streams[-1]["steps"].append(step)
        stream_of[node.name] = streams[-1]["name"]
        open_tail = node.name if children[node.name] == 1 and node.op not in _TERMINAL else None
    topo: dict[str, Any] = {}
    if topology.application_id:
        topo["applicationId"] = topology.application_id
    if topology.latency != "default":
        topo["latency"] = topology.latency
    defaults = {
        k: _serde(v)
        for k, v in (("keySerde", topology.default_key_serde), ("valueSerde", topology.default_value_serde))
        if v
    }
    if defaults:
        topo["defaults"] = defaults
    topo["streams"] = [{k: v for k, v in s.items() if k != "steps" or v} for s in streams]
    doc = {
        "apiVersion": "streamapp.io/v1alpha1",
        "kind": "StreamApp",
        "metadata": {"name": name},
        "spec": {**(spec or {}), "topology": topo},
    }
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
