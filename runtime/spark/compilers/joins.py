"""Compiles ``join``, ``leftJoin`` and ``outerJoin`` nodes (stream-table, stream-stream, table-table,
foreign-key table-table: :mod:`..stateful.fk_join_ops`).

Picks each side's frame — a table source's records as read, so updates and stream records are
ordered record by record; a derived table's changelog otherwise — decides whether the sides are
co-partitioned Kafka tasks or must be regrouped by key, and hands both to
:func:`..stateful.join_ops.join`. Stream-stream joins get a late-record counter, reported by the
runner like a windowed aggregation's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamapp.runtime.spark import user_code
from streamapp.runtime.spark.compilers import context
from streamapp.runtime.spark.frames import Logic, RecordFrame
from streamapp.runtime.topology import graph, join_nodes, nodes, state

__all__ = ["COMPILERS", "compile_global_table", "compile_join", "direct"]

#: Operations that keep Kafka's partitions and keys: records stay in the task they were read in.
_KEEPS_PARTITIONS = frozenset(
    {"filter", "filterNot", "mapValues", "flatMapValues", "peek", "merge", "split", "branch"}
)


def direct(topology: graph.Topology, node: nodes.Node) -> bool:
    """Whether ``node``'s records still sit in the input partition their key was written to."""
    if isinstance(node, nodes.Source):
        return True
    return node.op in _KEEPS_PARTITIONS and all(direct(topology, p) for p in topology.parents(node))


def _side(ctx: context.Context, name: str) -> Any:
    from streamapp.runtime.spark.stateful import join_ops  # noqa: PLC0415 - only apps with joins

    if name in ctx.raw_tables:
        return join_ops.Side(ctx.raw_tables[name], partitioned=True)
    node = ctx.topology.node(name)
    if not direct(ctx.topology, node):
        return join_ops.Side(ctx.frames[name], partitioned=False)
    sources = [s for s in _sources(ctx.topology, node) if s is not node]
    read = tuple(ctx.raw_tables.get(s.name) or ctx.frames[s.name] for s in sources)
    return join_ops.Side(ctx.frames[name], partitioned=True, sources=read)


def _sources(topology: graph.Topology, node: nodes.Node) -> list[nodes.Source]:
    if isinstance(node, nodes.Source):
        return [node]
    return [s for p in topology.parents(node) for s in _sources(topology, p)]


def _joiner(logic: nodes.Logic) -> Logic:
    if isinstance(logic, nodes.Expr):
        return Logic(expr=logic.sql)
    return Logic(function=user_code.resolve_function(logic.ref), returns=logic.returns)


def compile_global_table(ctx: context.Context, node: join_nodes.GlobalTableSource) -> RecordFrame:
    """A global table's records as read: the joins that look it up hold it in every task."""
    return ctx.read_source(node)


def compile_join(ctx: context.Context, node: join_nodes.JoinNode) -> RecordFrame:
    from streamapp.runtime.spark.stateful import join_ops  # noqa: PLC0415 - only apps with joins

    kind = ctx.topology.join_kind(node)
    if kind == "stream-globalTable":
        assert node.key is not None
        return join_ops.global_join(
            ctx.frames[node.parents[0]],
            ctx.frames[node.parents[1]],
            key=_joiner(node.key),
            joiner=_joiner(node.joiner),
            left_join=node.how == "left",
            tasks=ctx.tasks(),
        )
    left, right = (_side(ctx, p) for p in node.parents)
    if kind == "table-table-fk":
        from streamapp.runtime.spark.stateful import fk_join_ops  # noqa: PLC0415 - only apps with FK joins

        assert node.foreign_key is not None
        return fk_join_ops.foreign_key_join(
            left.frame,
            right,
            extractor=_joiner(node.foreign_key),
            joiner=_joiner(node.joiner),
            left_join=node.how == "left",
            tasks=ctx.tasks(),
            merged=ctx.merge_frontier,
        )
    counter = None
    if kind == "stream-stream":
        counter = left.frame.df.sparkSession.sparkContext.accumulator(0)
        ctx.late[node.name] = counter
    return join_ops.join(
        kind,
        node.how,
        left,
        right,
        _joiner(node.joiner),
        windows=node.windows,
        tasks=ctx.tasks(),
        late_counter=counter,
        merged=ctx.merge_frontier and ctx.merge_frontier.over(state.source_topics(ctx.topology, node)),
    )


COMPILERS: Mapping[type[nodes.Node], context.Compile] = {
    join_nodes.JoinNode: compile_join,
    join_nodes.GlobalTableSource: compile_global_table,
}
