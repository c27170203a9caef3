"""The logical graph as plain data (JSON): what another engine needs to build the same topology.

Why it exists: the conformance suite's oracle builds each topology in Kafka Streams itself from
this form, so a scenario is written once (a manifest or the Python builder) and never twinned by
hand. Every node is a mapping with ``op``, ``name``, ``parents`` and its own fields in camelCase
(user logic as ``{"expr": sql}`` or ``{"function": ref, "returns": type}``, windows and join
windows as mappings of milliseconds), plus what the graph knows of it: ``kind`` (stream, table,
grouped stream, grouped table), ``windowed``, ``joinKind`` for joins, and the resolved
``keySerde``/``valueSerde`` of sources and sinks.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from streamapp.runtime import serdes
from streamapp.runtime.topology import aggregate_nodes, graph, join_nodes
from streamapp.runtime.topology import nodes as nd

__all__ = ["to_dict", "to_json"]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _value(value: Any) -> Any:
    if isinstance(value, nd.Expr | nd.Function):
        return nd.logic_params(value)
    if isinstance(value, serdes.Serde):
        return value.name if value.schema is None else {"name": value.name, "schema": value.schema}
    if isinstance(value, nd.Branch):
        return {"name": value.name, "predicate": _value(value.predicate)}
    if isinstance(value, aggregate_nodes.Windows | join_nodes.JoinWindows):
        return {_camel(f.name): getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_value(v) for v in value]
    return value


def to_dict(topology: graph.Topology) -> dict[str, Any]:
    """The graph as a JSON-ready mapping: ``{"applicationId": ..., "nodes": [...]}`` in build order."""
    out = []
    for node in topology.nodes:
        entry: dict[str, Any] = {"op": node.op, "name": node.name, "parents": list(node.parents)}
        entry |= {_camel(k): _value(v) for k, v in node.own_fields() if k != "stores"}
        entry["kind"] = topology.kind(node.name)
        entry["windowed"] = topology.windowed(node.name)
        if isinstance(node, nd.Source | nd.Sink):
            entry["keySerde"] = _value(topology.key_serde(node))
            entry["valueSerde"] = _value(topology.value_serde(node))
        if isinstance(node, join_nodes.JoinNode):
            entry["joinKind"] = topology.join_kind(node)
        out.append(entry)
    return {"applicationId": topology.application_id, "nodes": out}


def to_json(topology: graph.Topology) -> str:
    return json.dumps(to_dict(topology), sort_keys=True)
