"""Compiles aggregations — count, aggregate, reduce and cogroup, windowed or not — into tables.

Why a module of its own: an aggregation has two ways to run, chosen by the sequencer
(:mod:`..compiler`): Spark's built-in aggregation (:func:`spark_aggregate`, a KTable in update
mode) when no step of the app needs the stateful engine, else the engine's
(:func:`engine_aggregate`: the aggregator, the cogrouped streams as one frame, the windows on the
JVM or in Python, the tasks of re-keyed records, the merge frontier of merged topics, and a late
counter per windowed node that the runner reports).
"""

from __future__ import annotations

from typing import Any, TypeAlias

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamapp.runtime.spark import frames, user_code
from streamapp.runtime.spark.compilers import context, logic
from streamapp.runtime.topology import aggregate_nodes, graph, state
from streamapp.runtime.topology import nodes as nd
from streamapp.runtime.topology.nodes import logic_params

__all__ = ["Aggregation", "engine_aggregate", "spark_aggregate"]

Aggregation: TypeAlias = (
    aggregate_nodes.Count | aggregate_nodes.Aggregate | aggregate_nodes.Reduce | aggregate_nodes.Cogroup
)


def engine_aggregate(ctx: context.Context, node: Aggregation, *, emit: str) -> frames.RecordFrame:
    """``node`` run by the stateful engine: a changelog of its table (``emit``: every update,
    ``final`` or ``suppress``: once a window closes)."""
    from streamapp.runtime.spark.stateful import ops, windows  # noqa: PLC0415

    grouped = ctx.topology.node(node.parents[0])
    assert isinstance(grouped, nd.GroupBy)
    value = node.expr if isinstance(node, aggregate_nodes.Aggregate) and node.fn is not None else None
    if isinstance(node, aggregate_nodes.Cogroup):
        frame, aggregator = _cogrouped(ctx, node)
    else:
        frame = ctx.frames[node.parents[0]]
        if node.windows is not None:
            frame = _windowed_input(ctx, node, frame)
        aggregator = _aggregator(node, frame)
    if ctx.topology.kind(grouped.name) == graph.GROUPED_TABLE:
        assert grouped.selector is not None
        # A declarative aggregation's expression is the value each table row adds (or takes back).
        mapped = frames.Logic(expr=value) if value is not None else None
        key = logic.of(logic_params(grouped.selector))
        return ops.table_aggregate(frame, aggregator, key=key, value=mapped)
    rekeyed = any(ctx.rekeyed(ctx.topology.node(p)) for p in node.parents)
    # One task reads a partition of each merged topic (a cogroup, a merge): the frontier orders them.
    merged = None
    if ctx.merged(node):
        merged = ctx.merge_frontier.over(state.source_topics(ctx.topology, node))
    if node.windows is None:
        return ops.aggregate(frame, aggregator, value=value, merged=merged)
    tasks = None
    if rekeyed:
        # Kafka Streams' repartition topic: all records of a key in one task (one stream time).
        tasks = ctx.tasks()
    w = node.windows
    spec = windows.Windows(w.kind, w.size, w.advance or (w.size if w.kind == "tumbling" else 0), w.grace)
    spark = frame.df.sparkSession
    jvm = state.windows_on_jvm(ctx.topology, node)
    # One counter per aggregation node: suppress re-registers the one its aggregation had.
    counter = ops.JvmCounter(spark, f"late {node.name}") if jvm else spark.sparkContext.accumulator(0)
    ctx.late[node.name] = counter
    result = ops.windowed_aggregate(
        frame, spec, aggregator, emit=emit, value=value, late_counter=counter, tasks=tasks, merged=merged,
        jvm=jvm, per_input=isinstance(node, aggregate_nodes.Cogroup),
    )  # fmt: skip
    return result.table


def spark_aggregate(node: graph.Node, parent: frames.RecordFrame) -> frames.RecordFrame:
    """A KTable by Spark's built-in aggregation: one row per key and update, stamped with the max
    timestamp of its inputs.

    Records with a null value are skipped, as Kafka Streams' aggregations (and the stateful
    engine's, :func:`ops.aggregate`) skip them: they neither count nor move the timestamp."""
    df = parent.df.where(F.col("value").isNotNull())
    if node.op == "count":
        value = F.count(F.lit(1))
    else:
        expr = F.expr(node.params["expr"])
        fn = node.params["fn"]
        value = (
            {
                "sum": F.sum,
                "min": F.min,
                "max": F.max,
                "avg": F.avg,
                "collect_list": F.collect_list,
            }[fn](expr)
            if fn != "latest"
            else F.max_by(expr, F.col("timestamp"))
        )
    table = df.groupBy("key").agg(value.alias("value"), F.max("timestamp").alias("timestamp"))
    return frames.RecordFrame(
        table.select(
            "key",
            "value",
            "timestamp",
            F.array().cast(frames.HEADERS).alias("headers"),
            F.lit(None).cast("int").alias("partition"),
            F.lit(None).cast("long").alias("offset"),
            F.lit(None).cast("string").alias("topic"),
        )
    )


def _aggregator(
    node: aggregate_nodes.Count | aggregate_nodes.Aggregate | aggregate_nodes.Reduce,
    frame: frames.RecordFrame,
) -> Any:
    from streamapp.runtime.spark.stateful import aggregation  # noqa: PLC0415

    resolve = user_code.resolve_function
    if isinstance(node, aggregate_nodes.Count):
        return aggregation.count()
    if isinstance(node, aggregate_nodes.Reduce):
        returns = node.returns or frame.df.schema["value"].dataType.simpleString()
        sub = resolve(node.subtractor.ref) if node.subtractor else None
        return aggregation.reduce(resolve(node.reducer.ref), value_type=returns, subtractor=sub)
    if node.fn is not None:
        value_type = frame.df.select(F.expr(node.expr)).schema[0].dataType.simpleString()
        return aggregation.declarative(node.fn, value_type)
    assert node.initializer is not None and node.adder is not None and node.returns is not None
    return aggregation.aggregate(
        resolve(node.initializer.ref),
        resolve(node.adder.ref),
        subtractor=resolve(node.subtractor.ref) if node.subtractor else None,
        value_type=node.returns,
    )


def _cogrouped(ctx: context.Context, node: aggregate_nodes.Cogroup) -> tuple[frames.RecordFrame, Any]:
    """The grouped streams as one frame whose value is ``struct(src, v0, v1, …)`` (one type
    for all), and the aggregator that hands each record to its stream's adder."""
    from streamapp.runtime.spark.stateful import aggregation  # noqa: PLC0415

    inputs = [ctx.frames[p] for p in node.parents]
    # Kafka Streams' KStreamAggregate and KStreamSlidingWindowAggregate skip a null value (no
    # adder call, no timestamp); time and session windows hand it to the adder. A skipped one
    # has a null struct below, so that a merged step (ctx.merged) can order, then skip it.
    skips = node.windows is None or node.windows.kind == "sliding"
    if node.windows is not None:
        inputs = [_windowed_input(ctx, node, f) for f in inputs]
    elif not ctx.merged(node):
        inputs = [frames.RecordFrame(f.df.where(F.col("value").isNotNull())) for f in inputs]
    types = [f.df.schema["value"].dataType for f in inputs]

    def tagged(i: int) -> Column:
        value = F.struct(
            F.lit(i).alias("src"),
            *[
                (F.col("value") if j == i else F.lit(None).cast(t)).alias(f"v{j}")
                for j, t in enumerate(types)
            ],
        )
        return F.when(F.col("value").isNotNull(), value) if skips else value

    parts = [f._with(value=tagged(i)) for i, f in enumerate(inputs)]
    aggregator = aggregation.cogroup(
        user_code.resolve_function(node.initializer.ref),
        [user_code.resolve_function(a.ref) for a in node.adders],
        value_type=node.returns,
    )
    return parts[0].merge(*parts[1:]), aggregator


def _windowed_input(ctx: context.Context, node: Aggregation, frame: frames.RecordFrame) -> frames.RecordFrame:
    """What a windowed aggregation's records are: KStreamSlidingWindowAggregate skips a null
    value (and counts it in its dropped-records metric); time and session windows hand it to
    the aggregator."""
    assert node.windows is not None
    if node.windows.kind != "sliding":
        return frame
    return ctx.dropping(node, frame, "value", keep=ctx.merged(node))
