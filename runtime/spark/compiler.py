"""The compiler: logical topology → one streaming DataFrame of sink rows.

Nodes are compiled in build order (parents first) into record frames; every sink (``to``) becomes
rows that name their topic, and all sinks are unioned, so an application is one query with one
checkpoint that reads each source once. ``print`` branches join the union with no rows: they only
print. The source reader is a parameter — Kafka in production, Parquet files in the test driver —
so both run the same plan.
"""

from __future__ import annotations

import dataclasses
import importlib
import site
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyspark import cloudpickle
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamapp.runtime import errors
from streamapp.runtime.spark import codecs, frames, runner, sink
from streamapp.runtime.topology import graph

__all__ = ["Compiled", "compile_topology", "resolve_function"]

Reader = Callable[[Sequence[str]], DataFrame]


@dataclasses.dataclass(frozen=True)
class Compiled:
    plan: DataFrame
    trigger: runner.Trigger
    output_mode: str = "append"
    prints: bool = False  # has `print` steps: the sink must print (and skip) their rows


def resolve_function(ref: str) -> Callable[..., Any]:
    """Import ``package.module:function``; ship its module by value unless it is installed."""
    module_name, qualname = ref.split(":")
    module = importlib.import_module(module_name)
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part)
    # Executors import installed packages themselves; a user's own module (next to the manifest,
    # in a notebook, in tests) travels with the function instead.
    origin = getattr(module, "__file__", None) or ""
    installed = any(origin.startswith(p) for p in (*site.getsitepackages(), sys.prefix + "/lib"))
    if not installed and module_name not in sys.builtin_module_names:
        cloudpickle.register_pickle_by_value(module)
    return target


def _logic(params: Mapping[str, Any]) -> frames.Logic:
    if "function" in params:
        return frames.Logic(function=resolve_function(params["function"]), returns=params.get("returns"))
    return frames.Logic(expr=params["expr"])


def _condition(frame: frames.RecordFrame, params: Mapping[str, Any]) -> Column:
    return F.coalesce(frame.evaluate(_logic(params), default_type="boolean"), F.lit(False))


class _Compiler:
    def __init__(self, topology: graph.Topology, read: Reader) -> None:
        self.topology = topology
        self.read = read
        self.frames: dict[str, frames.RecordFrame] = {}
        self.outputs: list[DataFrame] = []

    def compile(self) -> DataFrame:
        for node in self.topology.nodes:
            try:
                self._node(node)
            except errors.StreamAppError:
                raise
            except Exception as exc:
                where = f" ({node.path})" if node.path else ""
                raise errors.TopologyError(f"{node.name}{where}: {exc}") from exc
        if not self.outputs:
            raise errors.TopologyError("the topology has no sink: add a `to` (or `print`) step")
        plan = self.outputs[0]
        for other in self.outputs[1:]:
            plan = plan.unionByName(other)
        return plan

    def _parent(self, node: graph.Node, index: int = 0) -> frames.RecordFrame:
        return self.frames[node.parents[index]]

    def _node(self, node: graph.Node) -> None:
        op, p = node.op, node.params
        if op == "source":
            key, value = self.topology.key_serde(node), self.topology.value_serde(node)
            frame = frames.RecordFrame.from_kafka(
                self.read(p["topics"]),
                key_serde=key.name,
                value_serde=value.name,
                key_schema=key.schema,
                value_schema=value.schema,
            )
            if "timestamp" in p:
                frame = frame._with(timestamp=F.timestamp_millis(F.expr(p["timestamp"]).cast("bigint")))
            self.frames[node.name] = frame
        elif op in ("filter", "filterNot"):
            parent = self._parent(node)
            condition = _condition(parent, p)
            self.frames[node.name] = frames.RecordFrame(
                parent.df.where(~condition if op == "filterNot" else condition)
            )
        elif op == "mapValues":
            self.frames[node.name] = self._parent(node).map_values(_logic(p))
        elif op == "flatMapValues":
            self.frames[node.name] = self._parent(node).flat_map_values(_logic(p))
        elif op == "selectKey":
            self.frames[node.name] = self._parent(node).select_key(_logic(p))
        elif op == "map":
            self.frames[node.name] = self._parent(node).map(_logic(p["key"]), _logic(p["value"]))
        elif op == "flatMap":
            self.frames[node.name] = self._parent(node).flat_map(_logic(p))
        elif op == "peek":
            self.frames[node.name] = self._parent(node).peek(_logic(p).function)  # type: ignore[arg-type]
        elif op == "merge":
            first, *rest = (self.frames[name] for name in node.parents)
            self.frames[node.name] = first.merge(*rest)
        elif op == "repartition":
            parent = self._parent(node)
            n = p.get("partitions")
            df = parent.df.repartition(n, "key") if n else parent.df.repartition("key")
            self.frames[node.name] = frames.RecordFrame(df)
        elif op == "groupBy":
            parent = self._parent(node)
            grouped = parent.select_key(_logic(p)) if p else parent
            # Kafka Streams drops records whose grouping key is null.
            self.frames[node.name] = frames.RecordFrame(grouped.df.where(F.col("key").isNotNull()))
        elif op in ("count", "aggregate"):
            self.frames[node.name] = self._aggregate(node)
        elif op in ("split", "toStream"):
            self.frames[node.name] = self._parent(node)
        elif op == "branch":
            self.frames[node.name] = self._branch(node)
        elif op == "to":
            self.outputs.append(self._sink_rows(node))
        elif op == "print":
            self.outputs.append(self._print_rows(node))
        else:  # pragma: no cover - the graph only holds known operations
            raise errors.TopologyError(f"{node.name}: no Spark compilation for operation {op!r}")

    def _aggregate(self, node: graph.Node) -> frames.RecordFrame:
        """A KTable: one row per key and update, stamped with the max timestamp of its inputs."""
        df = self._parent(node).df
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
                F.array().cast("array<struct<key:string,value:binary>>").alias("headers"),
                F.lit(None).cast("int").alias("partition"),
                F.lit(None).cast("long").alias("offset"),
                F.lit(None).cast("string").alias("topic"),
            )
        )

    def _branch(self, node: graph.Node) -> frames.RecordFrame:
        split = self.topology.node(node.parents[0])
        parent = self.frames[split.name]
        conditions = [(b["name"], _condition(parent, b["predicate"])) for b in split.params["branches"]]
        name = node.params["branch"]
        earlier: Column = F.lit(False)
        for branch, condition in conditions:
            if branch == name:
                return frames.RecordFrame(parent.df.where(condition & ~earlier))
            earlier = earlier | condition
        return frames.RecordFrame(parent.df.where(~earlier))  # the default branch

    def _sink_rows(self, node: graph.Node) -> DataFrame:
        frame = self._parent(node)
        key, value = self.topology.key_serde(node), self.topology.value_serde(node)
        return frame.df.select(
            codecs.encode(F.col("key"), key.name, schema=_struct_hint(frame, "key", key.schema)).alias("key"),
            codecs.encode(
                F.col("value"), value.name, schema=_struct_hint(frame, "value", value.schema)
            ).alias("value"),
            F.col("headers"),
            F.lit(node.params["topic"]).alias("topic"),
            F.col("timestamp"),
            F.lit(None).cast("int").alias("partition"),
        )

    def _print_rows(self, node: graph.Node) -> DataFrame:
        """Rows the sink prints on the driver's stdout instead of producing (see sink.PRINT_PREFIX)."""
        frame = self._parent(node)
        label = node.params.get("label") or node.name
        return frame.df.select(
            F.col("key").cast("string").cast("binary").alias("key"),
            F.col("value").cast("string").cast("binary").alias("value"),
            F.col("headers"),
            F.lit(f"{sink.PRINT_PREFIX}{label}").alias("topic"),
            F.col("timestamp"),
            F.lit(None).cast("int").alias("partition"),
        )


def _struct_hint(frame: frames.RecordFrame, column: str, schema: str | None) -> str | None:
    # JSON: structs, arrays and maps are written with to_json; a string is written as it is.
    return frames._schema_marker(frame.df.schema[column].dataType)


def compile_topology(topology: graph.Topology, *, read: Reader) -> Compiled:
    """Compile ``topology``; ``read(topics)`` returns Kafka-shaped rows for those topics."""
    kind, _why = topology.trigger()
    stateful = any(n.op in graph.STATEFUL_OPS for n in topology.nodes)
    return Compiled(
        plan=_Compiler(topology, read).compile(),
        trigger=runner.Trigger(kind=kind),
        output_mode="update" if stateful else "append",
        prints=any(n.op == "print" for n in topology.nodes),
    )
