"""The compiler: logical topology → one streaming DataFrame of sink rows.

Nodes are compiled in build order (parents first) into record frames; every sink (``to``) becomes
rows that name their topic, and all sinks are unioned, so an application is one query with one
checkpoint that reads each source once. ``print`` branches join the union with no rows: they only
print. The source reader is a parameter — Kafka in production, Parquet files in the test driver —
so both run the same plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamapp.runtime import errors
from streamapp.runtime.spark import checkpoints, codecs, compilers, frames, runner, sink
from streamapp.runtime.spark.user_code import resolve_function
from streamapp.runtime.topology import aggregate_nodes, graph, state
from streamapp.runtime.topology import nodes as nd
from streamapp.runtime.topology.nodes import logic_params

if TYPE_CHECKING:
    from streamapp.runtime.spark.stateful.engine import Tasks

__all__ = ["Compiled", "compile_topology"]


class Reader(Protocol):
    """``read(topics)``: Kafka-shaped rows of those topics. A source's ``maxOffsetsPerTrigger``
    comes as a keyword, only when the manifest sets it (a reader that cannot honour it refuses it)."""

    def __call__(
        self, topics: Sequence[str], /, *, max_offsets_per_trigger: int | None = None
    ) -> DataFrame: ...


@dataclasses.dataclass(frozen=True)
class Compiled:
    plan: DataFrame
    trigger: runner.Trigger
    output_mode: str = "append"
    prints: bool = False  # has `print` steps: the sink must print (and skip) their rows
    #: windowed aggregation node → Spark accumulator of record-window contributions dropped as
    #: late (beyond grace); the runner reports them as a metric.
    late: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: observed-metric name → (``"skipped"`` or ``"dead_lettered"``, the source topics it counts
    #: per column ``t<i>``): records a deserializationErrors policy dropped or dead-lettered.
    error_counts: Mapping[str, tuple[str, tuple[str, ...]]] = dataclasses.field(default_factory=dict)


#: KIP-1034's dead-letter headers (Kafka Streams' names), on each record a source dead-letters.
DEAD_LETTER_HEADERS = (
    "__streams.errors.exception",
    "__streams.errors.message",
    "__streams.errors.topic",
    "__streams.errors.partition",
    "__streams.errors.offset",
)
#: The exception Kafka's own deserializers throw, named in the dead letter's exception header.
DESERIALIZATION_EXCEPTION = "org.apache.kafka.common.errors.SerializationException"


def _logic(params: Mapping[str, Any]) -> frames.Logic:
    if "function" in params:
        return frames.Logic(function=resolve_function(params["function"]), returns=params.get("returns"))
    return frames.Logic(expr=params["expr"])


def _condition(frame: frames.RecordFrame, params: Mapping[str, Any], *, negate: bool = False) -> Column:
    """Whether a record passes a predicate: TRUE passes (``negate``: FALSE does, filterNot); a
    NULL passes neither, SQL's three-valued logic, as ``RecordFrame.filter``."""
    condition = frame.evaluate(_logic(params), default_type="boolean")
    return F.coalesce(~condition if negate else condition, F.lit(False))


class _Compiler:
    def __init__(self, topology: graph.Topology, read: Reader, merge_frontier: Any = None) -> None:
        self.topology = topology
        self.read = read
        #: a stateful.frontier.Frontier when the query reads Kafka (not files): windowed
        #: aggregations over merged topics hold back records a dry partition may precede
        self.merge_frontier = merge_frontier
        self.frames: dict[str, frames.RecordFrame] = {}
        self.outputs: list[DataFrame] = []
        self.engine = any(state.needs_engine(topology, n) for n in topology.nodes)
        self.late: dict[str, Any] = {}
        #: per table node, its updates one row each (a table's own frame merges a key's updates
        #: per micro-batch): what a KTable groupBy re-aggregates, as Kafka Streams forwards every
        #: update to it (KTableRepartitionMap) — an update that lived only within a micro-batch
        #: still moved its old value out of its group at its own timestamp
        self.table_updates: dict[str, frames.RecordFrame] = {}
        #: per table source, its records as read (joins order them with the other side's)
        self.raw_tables: dict[str, frames.RecordFrame] = {}
        self.error_counts: dict[str, tuple[str, tuple[str, ...]]] = {}

    def read_source(self, node: nd.Source) -> frames.RecordFrame:
        """A source's records as read: decoded by its serdes, with its event time."""
        key, value = self.topology.key_serde(node), self.topology.value_serde(node)
        limit = node.max_offsets_per_trigger
        rows = (
            self.read(list(node.topics), max_offsets_per_trigger=limit)
            if limit
            else self.read(list(node.topics))
        )
        if node.deserialization_errors not in (None, "fail"):
            rows = self._readable(node, rows, key.name, value.name)
        frame = frames.RecordFrame.from_kafka(
            rows,
            key_serde=key.name,
            value_serde=value.name,
            key_schema=key.schema,
            value_schema=value.schema,
        )
        if node.timestamp is not None:
            frame = frame._with(timestamp=F.timestamp_millis(F.expr(node.timestamp).cast("bigint")))
        return frame

    def _readable(self, node: nd.Source, rows: DataFrame, key: str, value: str) -> DataFrame:
        """The source rows its serdes can read; the others are skipped or dead-lettered (an output
        of the plan, so under exactly_once_v2 in the batch's transaction), and counted per topic
        in an observed metric."""
        policy = node.deserialization_errors
        if self.topology.trigger()[0] == "real-time":
            raise errors.TopologyError(
                f"{node.name}: deserializationErrors: {policy} needs micro-batches to count what it "
                "drops; latency: low (Spark's real-time trigger) reports no counts: use fail there"
            )
        key_bad, value_bad = codecs.problem(F.col("key"), key), codecs.problem(F.col("value"), value)
        why_key = F.concat(F.lit(f"key cannot be read with the {key} serde: "), key_bad)
        why_value = F.concat(F.lit(f"value cannot be read with the {value} serde: "), value_bad)
        error = F.when(key_bad.isNotNull(), why_key).when(value_bad.isNotNull(), why_value)
        marked = rows.withColumn("_error", error)
        name = f"streamapp_{'skipped' if policy == 'skip' else 'dead_lettered'}_{len(self.error_counts)}"
        counts = [
            F.count_if((F.col("topic") == F.lit(t)) & F.col("_error").isNotNull()).alias(f"t{i}")
            for i, t in enumerate(node.topics)
        ]
        self.error_counts[name] = ("skipped" if policy == "skip" else "dead_lettered", tuple(node.topics))
        if policy == "skip":
            marked = marked.observe(name, *counts)
        else:
            assert node.dead_letter_topic is not None
            bad = marked.where(F.col("_error").isNotNull()).observe(name, *counts)
            self.outputs.append(_dead_letters(bad, node.dead_letter_topic))
        return marked.where(F.col("_error").isNull()).drop("_error")

    def _without_null_keys(self, node: graph.Node, frame: frames.RecordFrame) -> frames.RecordFrame:
        """``frame`` without its null-key records, which a key-dependent step (grouping, a table)
        drops as Kafka Streams does; counted per node in an observed metric (Kafka Streams'
        dropped-records), so that the run summary and ``streamapp_records_dropped_total`` show them."""
        return self._dropping(node, frame, "key")

    def _dropping(
        self, node: graph.Node, frame: frames.RecordFrame, column: str, *, keep: bool = False
    ) -> frames.RecordFrame:
        """``frame`` without the records whose ``column`` is null, counted as dropped at ``node``.
        A column whose type says it is never null (the words of ``explode(split(...))``) drops
        nothing, and is not observed: an observation costs every micro-batch an accumulator per
        task and splits the stage's generated code. ``keep``: counted, but left for a merged
        step to skip (:meth:`_merged`)."""
        if not frame.df.schema[column].nullable:
            return frame
        name = f"streamapp_dropped_{len(self.error_counts)}"
        self.error_counts[name] = ("dropped", (node.name,))
        dropped = F.col(column).isNull()
        if column == "value":  # a null-key record is the grouping's drop (kept for a merged step)
            dropped &= F.col("key").isNotNull()
        observed = frame.df.observe(name, F.count_if(dropped).alias("t0"))
        return frames.RecordFrame(observed if keep else observed.where(F.col(column).isNotNull()))

    def _merged(self, node: nd.Node) -> bool:
        """Whether aggregation ``node``'s tasks each read a partition of several topics through the
        merge frontier (a cogroup or merge without a key change). Such a step gets the records it
        skips (null key or value) too: Kafka Streams orders a task's partitions by their head
        records before its processors skip any, so a skipped record still decides which partition
        goes next (the randomized suite, seed 5003)."""
        if self.merge_frontier is None or any(self._rekeyed(self.topology.node(p)) for p in node.parents):
            return False
        return len(state.source_topics(self.topology, node)) > 1

    def _feeds_merged(self, node: nd.Node) -> bool:
        """Whether grouping ``node`` feeds only merged aggregations (:meth:`_merged`)."""
        children = self.topology.children(node.name)
        aggregations = aggregate_nodes.AGGREGATE_NODES
        return bool(children) and all(isinstance(c, aggregations) and self._merged(c) for c in children)

    def rekeyed(self, node: nd.Node) -> bool:
        return self._rekeyed(node)

    def without_null_keys(self, node: nd.Node, frame: frames.RecordFrame) -> frames.RecordFrame:
        return self._without_null_keys(node, frame)

    def tasks(self) -> Tasks:
        from streamapp.runtime.spark.stateful import engine  # noqa: PLC0415

        spark = next(iter(self.frames.values())).df.sparkSession
        # Kafka Streams serialises a re-keyed record with the default key serde (no Grouped serde
        # in a manifest).
        serde = self.topology.default_key_serde.name if self.topology.default_key_serde else "bytes"
        return engine.Tasks(checkpoints.tasks(spark), key_serde=serde)

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

    def _stateful(self, node: graph.Node) -> frames.RecordFrame | None:
        """Tables, windows and engine aggregations; None for the nodes :meth:`_node` compiles."""
        from streamapp.runtime.spark.stateful import ops  # noqa: PLC0415 - only stateful apps

        kind = self.topology.kind(node.parents[0]) if node.parents else graph.STREAM
        if isinstance(node, nd.ToTable):
            self.table_updates[node.name] = self._without_null_keys(node, self._parent(node))
            return ops.table(self.table_updates[node.name])
        if isinstance(node, (nd.Filter, nd.FilterNot, nd.MapValues)) and kind == graph.TABLE:
            if node.parents[0] in self.table_updates:
                updates = self.table_updates[node.parents[0]]
                self.table_updates[node.name] = self._table_step(node, updates)
            return self._table_step(node, self._parent(node))
        if isinstance(node, nd.GroupBy) and kind == graph.TABLE:
            # The aggregation re-keys the table's updates (its changelog where they are not known).
            return self.table_updates.get(node.parents[0], self._parent(node))
        if isinstance(node, aggregate_nodes.AGGREGATE_NODES) and (self.engine or node.windows):
            return self._engine_aggregate(node, emit=node.emit)
        if isinstance(node, nd.Suppress):
            agg = self.topology.node(node.parents[0])
            assert isinstance(agg, aggregate_nodes.AGGREGATE_NODES)
            # Suppress runs the aggregation itself (the node's own update stream is unused unless
            # something else reads it): its late records are the aggregation's, counted here.
            return self._engine_aggregate(agg, emit="suppress")
        return None

    def _table_step(
        self, node: nd.Filter | nd.FilterNot | nd.MapValues, parent: frames.RecordFrame
    ) -> frames.RecordFrame:
        """KTable filter/mapValues on a changelog ``parent``: a key whose value fails the filter is
        deleted (tombstone); tombstones pass through untouched and never reach user logic."""
        present = frames.RecordFrame(parent.df.where(F.col("value").isNotNull()))
        deleted = parent.df.where(F.col("value").isNull())
        if isinstance(node, nd.MapValues):
            mapped = present.map_values(_logic(logic_params(node.mapper)))
            value_type = mapped.df.schema["value"].dataType
            return frames.RecordFrame(
                mapped.df.unionByName(deleted.withColumn("value", F.lit(None).cast(value_type)))
            )
        keep = _condition(present, logic_params(node.predicate), negate=isinstance(node, nd.FilterNot))
        filtered = present._with(value=F.when(keep, F.col("value")))
        return frames.RecordFrame(filtered.df.unionByName(deleted))

    def _aggregator(
        self,
        node: aggregate_nodes.Count | aggregate_nodes.Aggregate | aggregate_nodes.Reduce,
        frame: frames.RecordFrame,
    ) -> Any:
        from streamapp.runtime.spark.stateful import aggregation  # noqa: PLC0415

        if isinstance(node, aggregate_nodes.Count):
            return aggregation.count()
        if isinstance(node, aggregate_nodes.Reduce):
            returns = node.returns or frame.df.schema["value"].dataType.simpleString()
            sub = resolve_function(node.subtractor.ref) if node.subtractor else None
            return aggregation.reduce(resolve_function(node.reducer.ref), value_type=returns, subtractor=sub)
        if node.fn is not None:
            value_type = frame.df.select(F.expr(node.expr)).schema[0].dataType.simpleString()
            return aggregation.declarative(node.fn, value_type)
        assert node.initializer is not None and node.adder is not None and node.returns is not None
        return aggregation.aggregate(
            resolve_function(node.initializer.ref),
            resolve_function(node.adder.ref),
            subtractor=resolve_function(node.subtractor.ref) if node.subtractor else None,
            value_type=node.returns,
        )

    def _cogrouped(self, node: aggregate_nodes.Cogroup) -> tuple[frames.RecordFrame, Any]:
        """The grouped streams as one frame whose value is ``struct(src, v0, v1, …)`` (one type
        for all), and the aggregator that hands each record to its stream's adder."""
        from streamapp.runtime.spark.stateful import aggregation  # noqa: PLC0415

        inputs = [self.frames[p] for p in node.parents]
        # Kafka Streams' KStreamAggregate and KStreamSlidingWindowAggregate skip a null value (no
        # adder call, no timestamp); time and session windows hand it to the adder. A skipped one
        # has a null struct below, so that a merged step (:meth:`_merged`) can order, then skip it.
        skips = node.windows is None or node.windows.kind == "sliding"
        if node.windows is not None:
            inputs = [self._windowed_input(node, f) for f in inputs]
        elif not self._merged(node):
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
            resolve_function(node.initializer.ref),
            [resolve_function(a.ref) for a in node.adders],
            value_type=node.returns,
        )
        return parts[0].merge(*parts[1:]), aggregator

    def _windowed_input(
        self,
        node: aggregate_nodes.Count
        | aggregate_nodes.Aggregate
        | aggregate_nodes.Reduce
        | aggregate_nodes.Cogroup,
        frame: frames.RecordFrame,
    ) -> frames.RecordFrame:
        """What a windowed aggregation's records are: KStreamSlidingWindowAggregate skips a null
        value (and counts it in its dropped-records metric); time and session windows hand it to
        the aggregator."""
        assert node.windows is not None
        if node.windows.kind != "sliding":
            return frame
        return self._dropping(node, frame, "value", keep=self._merged(node))

    def _engine_aggregate(
        self,
        node: aggregate_nodes.Count
        | aggregate_nodes.Aggregate
        | aggregate_nodes.Reduce
        | aggregate_nodes.Cogroup,
        *,
        emit: str,
    ) -> frames.RecordFrame:
        from streamapp.runtime.spark.stateful import ops, windows  # noqa: PLC0415

        grouped = self.topology.node(node.parents[0])
        assert isinstance(grouped, nd.GroupBy)
        value = node.expr if isinstance(node, aggregate_nodes.Aggregate) and node.fn is not None else None
        if isinstance(node, aggregate_nodes.Cogroup):
            frame, aggregator = self._cogrouped(node)
        else:
            frame = self._parent(node)
            if node.windows is not None:
                frame = self._windowed_input(node, frame)
            aggregator = self._aggregator(node, frame)
        if self.topology.kind(grouped.name) == graph.GROUPED_TABLE:
            assert grouped.selector is not None
            # A declarative aggregation's expression is the value each table row adds (or takes back).
            mapped = frames.Logic(expr=value) if value is not None else None
            return ops.table_aggregate(
                frame, aggregator, key=_logic(logic_params(grouped.selector)), value=mapped
            )
        rekeyed = any(self._rekeyed(self.topology.node(p)) for p in node.parents)
        # One task reads a partition of each merged topic (a cogroup, a merge): the frontier orders them.
        merged = None
        if self._merged(node):
            merged = self.merge_frontier.over(state.source_topics(self.topology, node))
        if node.windows is None:
            return ops.aggregate(frame, aggregator, value=value, merged=merged)
        tasks = None
        if rekeyed:
            # Kafka Streams' repartition topic: all records of a key in one task (one stream time).
            tasks = self.tasks()
        w = node.windows
        spec = windows.Windows(w.kind, w.size, w.advance or (w.size if w.kind == "tumbling" else 0), w.grace)
        spark = frame.df.sparkSession
        jvm = state.windows_on_jvm(self.topology, node)
        # One counter per aggregation node: suppress re-registers the one its aggregation had.
        counter = ops.JvmCounter(spark, f"late {node.name}") if jvm else spark.sparkContext.accumulator(0)
        self.late[node.name] = counter
        result = ops.windowed_aggregate(
            frame, spec, aggregator, emit=emit, value=value, late_counter=counter, tasks=tasks, merged=merged,
            jvm=jvm, per_input=isinstance(node, aggregate_nodes.Cogroup),
        )  # fmt: skip
        return result.table

    def _rekeyed(self, node: nd.Node) -> bool:
        """Whether the key may have changed since the source (then records of a key can sit in
        different input partitions, and Kafka Streams would repartition)."""
        if isinstance(node, (nd.SelectKey, nd.Map, nd.FlatMap)) or (
            isinstance(node, nd.GroupBy) and node.selector is not None
        ):
            return True
        if node.op == "process":
            return True  # a processor emits keys of its own
        return any(self._rekeyed(self.topology.node(p)) for p in node.parents)

    def _node(self, node: graph.Node) -> None:
        op, p = node.op, node.params
        if (compile_node := compilers.lookup(node)) is not None:
            self.frames[node.name] = compile_node(self, node)
            return
        stateful = self._stateful(node)
        if stateful is not None:
            self.frames[node.name] = stateful
            return
        if op == "source":
            assert isinstance(node, nd.Source)
            frame = self.read_source(node)
            if node.table:
                from streamapp.runtime.spark.stateful import ops  # noqa: PLC0415

                self.raw_tables[node.name] = frame
                self.table_updates[node.name] = self._without_null_keys(node, frame)
                frame = ops.table(self.table_updates[node.name])
            self.frames[node.name] = frame
        elif op in ("filter", "filterNot"):
            self.frames[node.name] = self._parent(node).filter(_logic(p), negate=op == "filterNot")
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
            # Kafka Streams' repartition drops records with a null key (its sink filters them,
            # uncounted: Kafka Streams 4.3.1; the randomized conformance suite found it).
            parent = self._parent(node).df.where(F.col("key").isNotNull())
            n = p.get("partitions")
            df = parent.repartition(n, "key") if n else parent.repartition("key")
            self.frames[node.name] = frames.RecordFrame(df)
        elif op == "groupBy":
            parent = self._parent(node)
            grouped = parent.select_key(_logic(p)) if p else parent
            # Kafka Streams drops records whose grouping key is null (and counts them).
            self.frames[node.name] = self._dropping(node, grouped, "key", keep=self._feeds_merged(node))
        elif op in ("count", "aggregate"):
            self.frames[node.name] = self._aggregate(node)
        elif op in ("split", "toStream", "suppress"):
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
        """A KTable: one row per key and update, stamped with the max timestamp of its inputs.

        Records with a null value are skipped, as Kafka Streams' aggregations (and the stateful
        engine's, :func:`ops.aggregate`) skip them: they neither count nor move the timestamp."""
        df = self._parent(node).df.where(F.col("value").isNotNull())
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

    def _sink_key(self, node: graph.Node, frame: frames.RecordFrame) -> Column:
        key = self.topology.key_serde(node)
        if self.topology.windowed(node.parents[0]):
            if key.name in ("string", "bytes"):
                from streamapp.runtime.spark.stateful import ops  # noqa: PLC0415

                return ops.windowed_key_text(F.col("key"))
            if key.name != "json":
                raise errors.TopologyError(
                    f"{node.name}{f' ({node.path})' if node.path else ''}: a windowed key "
                    f"(key, window start, window end) is written with keySerde string or json, not {key.name}"
                )
        return codecs.encode(F.col("key"), key.name, schema=_struct_hint(frame, "key", key.schema))

    def _sink_rows(self, node: graph.Node) -> DataFrame:
        frame = self._parent(node)
        value = self.topology.value_serde(node)
        return frame.df.select(
            self._sink_key(node, frame).alias("key"),
            codecs.encode(
                F.col("value"), value.name, schema=_struct_hint(frame, "value", value.schema)
            ).alias("value"),
            F.col("headers"),
            F.lit(node.params["topic"]).alias("topic"),
            F.col("timestamp"),
            self._partition(node, frame).alias("partition"),
        )

    def _partition(self, node: graph.Node, frame: frames.RecordFrame) -> Column:
        """The target partition: the sink's partitioner, else null (the producer's murmur2 of the key).

        A partitioner may return any int; it is taken modulo nothing — a partition the topic does
        not have fails the batch with the producer's error, as Kafka Streams would.
        """
        partitioner = node.params.get("partitioner")
        if partitioner is None:
            return F.lit(None).cast("int")
        return frame.evaluate(_logic(partitioner), default_type="int").cast("int")

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


def _dead_letters(bad: DataFrame, topic: str) -> DataFrame:
    """Sink rows for unreadable source rows: the original key, value, headers and timestamp, plus
    KIP-1034's headers saying which record it was and why it could not be read."""
    header = bad.schema["headers"].dataType
    errors_ = [
        (DEAD_LETTER_HEADERS[0], F.lit(DESERIALIZATION_EXCEPTION)),
        (DEAD_LETTER_HEADERS[1], F.col("_error")),
        (DEAD_LETTER_HEADERS[2], F.col("topic")),
        (DEAD_LETTER_HEADERS[3], F.col("partition").cast("string")),
        (DEAD_LETTER_HEADERS[4], F.col("offset").cast("string")),
    ]
    added = F.array(
        *[F.struct(F.lit(k).alias("key"), v.cast("binary").alias("value")) for k, v in errors_]
    ).cast(header)
    return bad.select(
        F.col("key"),
        F.col("value"),
        F.concat(F.coalesce(F.col("headers"), F.array().cast(header)), added).alias("headers"),
        F.lit(topic).alias("topic"),
        F.col("timestamp"),
        F.lit(None).cast("int").alias("partition"),
    )


def _struct_hint(frame: frames.RecordFrame, column: str, schema: str | None) -> str | None:
    # JSON: structs, arrays and maps are written with to_json; a string is written as it is.
    return frames._schema_marker(frame.df.schema[column].dataType)


def optimized(plan: DataFrame) -> DataFrame:
    """``plan`` as Spark's optimizer leaves it, analysed again as a DataFrame of its own.

    A streaming query's micro-batch optimizes the query's whole logical plan again, every batch
    (``IncrementalExecution``), until its rules change nothing more. The compiler's plan is
    written for composition, a projection of every record column per step; optimized once here,
    each micro-batch starts from the optimized plan (a word count: 7 nodes instead of 13) and its
    rules reach their fixed point in one pass. A word count at 500 lines a second, one in-process
    run each, 40 s after its start: the analyser and optimizer rules took 1.31 s in 20 s instead
    of 1.51 (the hand-written job 1.30; Spark's ``RuleExecutor`` metrics), query planning 7 ms a
    batch instead of 10 (the job 6). The batches run the same plan: an optimized plan is the
    optimizer's fixed point (Spark's own tests check that its run-once rules change nothing the
    second time; test_compiler_plan checks a word count's), and each batch still runs every rule.

    Except for the current time: each micro-batch replaces ``current_timestamp()``, ``now()``,
    ``current_date()`` … with its own batch time before it optimizes, and the optimizer would
    make them the compile time's literal, so a plan that has one is left as it is."""
    session = plan.sparkSession
    jsession = session._jsparkSession
    analyzed = plan._jdf.queryExecution().analyzed()
    if analyzed.containsPattern(session._jvm.org.apache.spark.sql.catalyst.trees.TreePattern.CURRENT_LIKE()):
        return plan
    once = jsession.sessionState().optimizer().execute(analyzed)
    return DataFrame(session._jvm.org.apache.spark.sql.classic.Dataset.ofRows(jsession, once), session)


def compile_topology(topology: graph.Topology, *, read: Reader, merge_frontier: Any = None) -> Compiled:
    """Compile ``topology``; ``read(topics)`` returns Kafka-shaped rows for those topics.

    ``merge_frontier`` (a :class:`stateful.frontier.Frontier` of the query's checkpoint and
    broker) makes windowed aggregations over merged topics order them as Kafka Streams does
    across micro-batches; without it each batch is merged on its own."""
    kind, _why = topology.trigger()
    compiler = _Compiler(topology, read, merge_frontier)
    plan = compiler.compile()
    # Spark's built-in aggregation emits table updates in update mode; the stateful engine emits
    # changelog rows in append mode (and then runs every aggregation of the app).
    native_stateful = topology.stateful() and not compiler.engine
    return Compiled(
        plan=optimized(plan),
        trigger=runner.Trigger(kind=kind),
        output_mode="update" if native_stateful else "append",
        prints=any(n.op == "print" for n in topology.nodes),
        late=compiler.late,
        error_counts=compiler.error_counts,
    )
