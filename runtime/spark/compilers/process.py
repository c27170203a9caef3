"""Compiles ``process`` nodes: a user's Processor class run per task (see :mod:`..stateful.process_ops`).

Picks the task of each record as joins do — the input partition while records still sit in the
partition Kafka put them in, else the key's hash modulo the state partitions — and the value
type: the node's ``returns``, else the class's, else the input's.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamapp.runtime import errors
from streamapp.runtime.spark import user_code
from streamapp.runtime.spark.compilers import context, joins
from streamapp.runtime.spark.frames import RecordFrame
from streamapp.runtime.topology import nodes, process_nodes

__all__ = ["COMPILERS", "compile_process"]


def compile_process(ctx: context.Context, node: process_nodes.ProcessNode) -> RecordFrame:
    from streamapp.runtime.spark.stateful import engine, process_ops  # noqa: PLC0415 - only apps with processors

    user_code.resolve_function(node.processor.ref)  # ships the user's module to the executors
    target = process_nodes.resolve(node.processor.ref)
    if isinstance(target, str):
        raise errors.TopologyError(target)
    parent = ctx.without_null_keys(node, ctx.frames[node.parents[0]])
    direct = joins.direct(ctx.topology, ctx.topology.node(node.parents[0]))
    task: Column = (
        F.coalesce(F.col("partition"), F.lit(0)).cast("int")
        if direct
        else engine.hash_task(parent.df, "key", ctx.tasks())
    )
    value_type = node.processor.returns or target.returns or parent.df.schema["value"].dataType.simpleString()
    return process_ops.process(parent, target, task=task, value_type=value_type)


COMPILERS: Mapping[type[nodes.Node], context.Compile] = {process_nodes.ProcessNode: compile_process}
