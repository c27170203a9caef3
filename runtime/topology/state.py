"""What a topology keeps in its checkpoint, and whether another topology can read it.

Spark identifies a stateful operator's state by its position in the query plan (operator 0, 1, …)
and reads the bytes it finds there with the new plan's code. It refuses only a few changes itself
(a different number of operators, a native aggregation's schema); most edits of a stateful step
would be read silently and wrongly: a window of another size or kind, an aggregation function
that keeps another accumulator, a key change in front of a windowed step (its state is grouped by
input partition, after a key change by task), a value of another type in a table. Kafka Streams
has the same hazard (its stores are named by position unless the user names them).

:func:`fingerprint` lists the stateful steps a topology compiles to, in build order (the order the
compiler creates Spark's operators in), each with the properties its state's layout and meaning
depend on — not the user functions' code, not grace or names, which a redeploy may change.
A custom processor's stores count by name and kind where its class can be imported (the driver):
a store that changes kind is caught, one added or dropped is not a change.
:func:`changes` says, step by step, why two fingerprints differ; equal fingerprints can share a
checkpoint. The driver records the fingerprint next to the checkpoint and the operator in the
StreamApp's status; both refuse a different one unless the app resets (a fresh checkpoint).

Nothing here imports Spark or a user's code: the operator runs it too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streamapp.runtime.topology import aggregate_nodes, graph, join_nodes, process_nodes
from streamapp.runtime.topology import nodes as nd

__all__ = [
    "VERSION",
    "changes",
    "fingerprint",
    "needs_engine",
    "source_topics",
    "windows_on_jvm",
]

#: Bumped when what a fingerprint holds changes: a record of another version is rewritten, not compared.
VERSION = 1


def needs_engine(topology: graph.Topology, node: nd.Node) -> bool:
    """Whether ``node`` runs on the stateful engine (transformWithStateInPandas) because Spark's
    built-in aggregation cannot give Kafka Streams' semantics; then every aggregation of the app
    runs there (one changelog format), and its state is the engine's, not Spark's."""
    if isinstance(node, (join_nodes.JoinNode, join_nodes.GlobalTableSource, process_nodes.ProcessNode)):
        return True  # joins and processors: append-mode changelogs, like the engine's aggregations
    if isinstance(node, nd.Source):
        return node.table
    if isinstance(node, (nd.ToTable, nd.Suppress, aggregate_nodes.Reduce, aggregate_nodes.Cogroup)):
        return True
    if isinstance(node, (aggregate_nodes.Count, aggregate_nodes.Aggregate)):
        return (
            node.windows is not None
            or (isinstance(node, aggregate_nodes.Aggregate) and node.fn is None)
            or topology.kind(node.parents[0]) == graph.GROUPED_TABLE
            # A merge of topics: Spark's aggregation would fold each micro-batch's share of every
            # topic at once, not in Kafka Streams' order across them (ops._merged_aggregate).
            or len(source_topics(topology, node)) > 1
        )
    return False


def windows_on_jvm(topology: graph.Topology, node: nd.Node) -> bool:
    """Whether a windowed aggregation runs on the JVM, with its state per key and window
    (``TimeWindowAggregation.java``, ``SlidingWindowAggregation.java``,
    ``SessionWindowAggregation.java``) rather than in the Python engine: every window kind with a
    declarative aggregator (count, sum, min, max, avg, latest; collect_list too, except for
    sessions, whose merge would have to order the merged lists' values by timestamp) over one
    input topic or after a key change. Merges of several topics into one task (their records held
    back by the merge frontier) and user functions stay in Python. The compiler and the
    fingerprint decide with this one rule: the two keep different state (a checkpoint whose state
    the other engine wrote is refused as a changed step, with how to reset)."""
    if not isinstance(node, (aggregate_nodes.Count, aggregate_nodes.Aggregate)) or node.windows is None:
        return False
    if isinstance(node, aggregate_nodes.Aggregate) and (
        node.fn is None or (node.windows.kind == "session" and node.fn == "collect_list")
    ):
        return False
    if topology.kind(node.parents[0]) == graph.GROUPED_TABLE:
        return False
    return any(topology.rekeyed(p) for p in node.parents) or len(source_topics(topology, node)) == 1


def source_topics(topology: graph.Topology, node: nd.Node) -> set[str]:
    """The topics whose records reach ``node`` (more than one, without a key change: a merge,
    whose tasks the compiler feeds through the merge frontier)."""
    if isinstance(node, nd.Source):
        return set(node.topics)
    return set().union(*(source_topics(topology, topology.node(p)) for p in node.parents))


def _reaches_output(topology: graph.Topology) -> set[str]:
    """Nodes with a path to a sink or print: only those are in the query plan."""
    live: set[str] = set()
    for node in reversed(topology.nodes):
        if isinstance(node, (nd.Sink, nd.Print)) or any(c.name in live for c in topology.children(node.name)):
            live.add(node.name)
    return live


def _source_values(topology: graph.Topology, node: nd.Node) -> str:
    """The value serdes of the sources whose records reach ``node`` (what its state holds)."""
    if isinstance(node, nd.Source):
        return topology.value_serde(node).name
    found = dict.fromkeys(_source_values(topology, p) for p in topology.parents(node))
    return ", ".join(found)


def _key(topology: graph.Topology, node: nd.Node) -> str:
    """What the state is keyed and grouped by: the key as read, or a key the app computed."""
    if any(topology.rekeyed(p) for p in node.parents):
        return "computed in the app (repartitioned)"
    sources = dict.fromkeys(
        topology.key_serde(n).name
        for n in topology.nodes
        if isinstance(n, nd.Source) and n.name in _ancestors(topology, node) | {node.name}
    )
    return "as read: " + ", ".join(sources)


def _ancestors(topology: graph.Topology, node: nd.Node) -> set[str]:
    out: set[str] = set()
    todo = list(node.parents)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo.extend(topology.node(name).parents)
    return out


def _windows(windows: aggregate_nodes.Windows | None) -> str:
    if windows is None:
        return "none"
    if windows.kind == "hopping":
        return f"hopping {windows.size} ms advancing {windows.advance} ms"
    return f"{windows.kind} {windows.size} ms"


def _aggregator(topology: graph.Topology, node: nd.Node) -> str:
    if isinstance(node, aggregate_nodes.Count):
        return "count"
    if isinstance(node, aggregate_nodes.Aggregate) and node.fn is not None:
        return f"{node.fn}({node.expr}) of {_source_values(topology, node)}"
    if isinstance(node, aggregate_nodes.Aggregate):
        return f"initializer/adder{'/subtractor' if node.subtractor else ''} returning {node.returns}"
    if isinstance(node, aggregate_nodes.Reduce):
        returns = node.returns or _source_values(topology, node)
        return f"reducer{'/subtractor' if node.subtractor else ''} of {returns}"
    assert isinstance(node, aggregate_nodes.Cogroup)
    return f"cogroup of {len(node.adders)} streams returning {node.returns}"


def _implementation(topology: graph.Topology, node: nd.Node, *, engine: bool) -> str:
    """Whose state an aggregation keeps: the JVM's, the Python engine's or Spark's own."""
    assert isinstance(node, aggregate_nodes.AGGREGATE_NODES)
    if windows_on_jvm(topology, node):
        return "jvm"
    return "engine" if engine or node.windows is not None else "spark"


def _aggregation(topology: graph.Topology, node: nd.Node, *, engine: bool, emit: str) -> dict[str, str]:
    assert isinstance(node, aggregate_nodes.AGGREGATE_NODES)
    grouped = topology.node(node.parents[0])
    if topology.kind(grouped.name) == graph.GROUPED_TABLE:
        grouping = "key (re-aggregating a table)"
    elif node.windows is not None:
        grouping = "task" if any(topology.rekeyed(p) for p in node.parents) else "input partition"
    else:
        grouping = "key"
    return {
        "operation": "aggregation",
        "implementation": _implementation(topology, node, engine=engine),
        "aggregator": _aggregator(topology, node),
        "windows": _windows(node.windows),
        "emit": emit,
        "grouping": grouping,
        "key": _key(topology, node),
    }


def _step(topology: graph.Topology, node: nd.Node, engine: bool) -> dict[str, str] | None:
    """The state shape of one node; None when it keeps none."""
    if isinstance(node, join_nodes.GlobalTableSource):
        return None  # held by the joins that look it up (their step)
    if (isinstance(node, nd.Source) and node.table) or isinstance(node, nd.ToTable):
        return {"operation": "table", "key": _key(topology, node), "value": _source_values(topology, node)}
    if isinstance(node, nd.Suppress):
        aggregation = topology.node(node.parents[0])
        return _aggregation(topology, aggregation, engine=True, emit="final")
    if isinstance(node, aggregate_nodes.AGGREGATE_NODES):
        return _aggregation(topology, node, engine=engine, emit=node.emit)
    if isinstance(node, join_nodes.JoinNode):
        kind = topology.join_kind(node)
        windows = node.windows
        sides = [
            f"{_source_values(topology, p)} keyed {_key(topology, node) if i == 0 else 'by the table'}"
            if kind == "stream-globalTable"
            else f"{_source_values(topology, p)}"
            for i, p in enumerate(topology.parents(node))
        ]
        return {
            "operation": f"{kind} {node.how} join",
            "windows": "none" if windows is None else f"before {windows.before} ms, after {windows.after} ms",
            "values": " | ".join(sides),
            "key": _key(topology, node),
            "foreignKey": "yes" if node.foreign_key is not None else "no",
        }
    if isinstance(node, process_nodes.ProcessNode):
        shape = {"operation": "processor", "processor": node.processor.ref, "key": _key(topology, node)}
        if node.stores:  # known where the class can be imported (the driver), not in the operator
            shape["stores"] = ", ".join(f"{s.name}: {s.kind}" for s in sorted(node.stores))
        return shape
    return None


def fingerprint(topology: graph.Topology) -> list[dict[str, Any]]:
    """The stateful steps of the compiled plan, in order: ``{"node", "path", "shape"}`` each,
    where ``shape`` (what is compared) maps a property to a readable value."""
    live = _reaches_output(topology)
    engine = any(needs_engine(topology, n) for n in topology.nodes)
    out: list[dict[str, Any]] = []
    for node in topology.nodes:
        if node.name not in live:
            continue
        if isinstance(node, aggregate_nodes.AGGREGATE_NODES) and all(
            isinstance(c, nd.Suppress) for c in topology.children(node.name) if c.name in live
        ):
            continue  # a suppress runs its aggregation itself (its step)
        shape = _step(topology, node, engine)
        if shape is not None:
            out.append({"node": node.name, "path": node.path, "shape": shape})
    return out


def _where(step: Mapping[str, Any]) -> str:
    return f"{step['node']}" + (f" ({step['path']})" if step.get("path") else "")


def _listing(steps: Sequence[Mapping[str, Any]]) -> str:
    return "; ".join(f"{_where(s)}: {s['shape'].get('operation')}" for s in steps) or "none"


def _store_changes(was: str | None, now: str | None) -> list[str]:
    """A processor's stores (``name: kind, …``): one whose kind changed would be read as the
    other kind's entries. Stores added or dropped are fine (a task's state keeps each store apart),
    and a side that could not import the processor (the operator) knows none."""
    if not was or not now:
        return []
    before = dict(item.split(": ") for item in was.split(", "))
    after = dict(item.split(": ") for item in now.split(", "))
    return [
        f"store {name!r} was {kind} state, now {after[name]} state"
        for name, kind in before.items()
        if name in after and after[name] != kind
    ]


def changes(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why state written by ``before`` cannot be read by ``after``, one line per difference;
    empty when it can (the same stateful steps, in the same order, with the same shapes)."""
    if len(before) != len(after):
        return [
            f"the stateful steps changed from {len(before)} to {len(after)} (Spark finds operator state by "
            f"position): before {_listing(before)}; now {_listing(after)}"
        ]
    found = []
    for i, (old, new) in enumerate(zip(before, after, strict=True), start=1):
        was, now = old.get("shape") or {}, new.get("shape") or {}
        differ = [
            f"{field} was {was.get(field, 'absent')!r}, now {now.get(field, 'absent')!r}"
            for field in dict.fromkeys([*was, *now])
            if field != "stores" and was.get(field) != now.get(field)
        ]
        differ += _store_changes(was.get("stores"), now.get("stores"))
        if differ:
            found.append(f"stateful step {i}, {_where(new)}: {', '.join(differ)}")
    return found
