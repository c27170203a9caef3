"""Checks a whole graph without a JVM, so a bad topology fails in milliseconds, every problem at once.

The same checks serve both front ends: a graph loaded from a manifest names each problem by the
manifest path its node came from (``spec.topology.streams[0].steps[3].mapValues``); a graph built
in Python names the node (``KSTREAM-MAPVALUES-0000000003``). The walk follows build order and
tracks what is known about each stream's key and value — a serde name, or the fields of a JSON
schema — so that ``value.amount`` is checked against the declared schema, and no longer checked
once a ``mapValues`` has replaced the value with something the checker cannot know.
"""

from __future__ import annotations

import dataclasses
import difflib

from streamapp.runtime import errors, serdes
from streamapp.runtime.expressions import check
from streamapp.runtime.topology import (
    aggregate_nodes,
    graph,
    join_nodes,
    nodes,
    process_nodes,
    validate_joins,
)

__all__ = ["validate_topology"]

#: What is known of a key or value: the fields of a JSON schema, a serde name, or nothing (None).
Shape = tuple[str, ...] | str | None


@dataclasses.dataclass(frozen=True)
class _Record:
    key: Shape
    value: Shape


def _shape(serde: serdes.Serde | None) -> Shape:
    if serde is None:
        return None
    if serde.name == "json" and serde.schema is not None:
        fields = check.schema_fields(serde.schema)
        return fields if isinstance(fields, tuple) else None
    return serde.name


_PEEK_EXPRESSION = (
    "peek calls a Python function on each record and passes the record on ({function: module:name} in "
    "a manifest, Function('module:name') in Python); "
    "an expression computes a value and has nothing to call. To see records go by, peek with a "
    "function that logs them, or print"
)


class _Checker:
    def __init__(self, topology: graph.Topology) -> None:
        self.topology = topology
        self.problems: list[errors.Problem] = []
        self.records: dict[str, _Record] = {}

    def problem(self, node: nodes.Node, suffix: str, message: str) -> None:
        where = f"{node.path}{suffix}" if node.path else f"{node.name}{suffix}"
        self.problems.append(errors.Problem(where, message))

    def run(self) -> list[errors.Problem]:
        for node in self.topology.nodes:
            parents = [self.records[p] for p in node.parents if p in self.records]
            if len(parents) != len(node.parents):
                missing = [p for p in node.parents if p not in self.records]
                self.problem(node, "", f"parent {missing[0]!r} is not an earlier node of the topology")
                continue
            self.records[node.name] = self.node(node, parents)
        return self.problems

    def node(self, node: nodes.Node, parents: list[_Record]) -> _Record:
        into = parents[0] if parents else _Record(None, None)
        if node.parents and all(p in self.records for p in node.parents):
            self.kinds(node)
        if isinstance(node, nodes.Source):
            return self.source(node)
        if isinstance(node, nodes.Sink):
            self.serdes(node, "keySerde", "valueSerde")
            if node.partitioner is not None:
                self.logic(node, ".partitioner", node.partitioner, into)
        elif isinstance(node, (nodes.Filter, nodes.FilterNot)):
            self.logic(node, "", node.predicate, into, boolean=True)
        elif isinstance(node, nodes.Split):
            for k, branch in enumerate(node.branches):
                self.logic(node, f".branches[{k}].predicate", branch.predicate, into, boolean=True)
        elif isinstance(node, nodes.Peek):
            if isinstance(node.action, nodes.Function):
                self.logic(node, "", node.action, into)
            else:
                self.problem(node, "", _PEEK_EXPRESSION)
        elif isinstance(node, (nodes.MapValues, nodes.FlatMapValues)):
            self.logic(node, "", node.mapper, into)
            return _Record(into.key, None)
        elif isinstance(node, nodes.SelectKey):
            self.logic(node, "", node.mapper, into)
            return _Record(None, into.value)
        elif isinstance(node, nodes.Map):
            self.logic(node, ".key", node.key, into)
            self.logic(node, ".value", node.value, into)
            return _Record(None, None)
        elif isinstance(node, nodes.FlatMap):
            self.logic(node, "", node.mapper, into)
            return _Record(None, None)
        elif isinstance(node, nodes.GroupBy) and node.selector is not None:
            self.logic(node, "", node.selector, into)
            return _Record(None, into.value)
        elif isinstance(node, aggregate_nodes.Count):
            return _Record(None if node.windows else into.key, "long")
        elif isinstance(node, aggregate_nodes.Aggregate):
            self.aggregate(node, into)
            return _Record(None if node.windows else into.key, None)
        elif isinstance(node, aggregate_nodes.Cogroup):
            for k, adder in enumerate(node.adders):
                self.function(node, f".streams[{k}].adder" if node.path else f".adders[{k}]", adder)
            self.function(node, ".initializer", node.initializer)
            if message := check.check_type(node.returns):
                self.problem(node, ".returns", message)
            return _Record(None if node.windows else into.key, None)
        elif isinstance(node, aggregate_nodes.Reduce):
            self.function(node, ".reducer", node.reducer)
            if node.subtractor is not None:
                self.function(node, ".subtractor", node.subtractor)
            return _Record(None if node.windows else into.key, None)
        elif isinstance(node, join_nodes.JoinNode):
            return _Record(into.key, None)  # the joiner makes a value the checker cannot know
        elif isinstance(node, process_nodes.ProcessNode):
            for suffix, message in process_nodes.problems(node):
                self.problem(node, suffix, message)
            return _Record(None, None)  # the processor's keys and values are its own
        elif isinstance(node, nodes.Merge):
            return _Record(
                into.key if all(p.key == into.key for p in parents) else None,
                into.value if all(p.value == into.value for p in parents) else None,
            )
        return into

    def kinds(self, node: nodes.Node) -> None:
        """Which operation may follow which: streams, tables and groupings, as in Kafka Streams."""
        topology = self.topology
        if message := validate_joins.global_table_problem(topology, node):
            self.problem(node, "", message)
            return
        if isinstance(node, join_nodes.JoinNode):
            for suffix, message in validate_joins.problems(topology, node):
                self.problem(node, suffix, message)
            return
        parent = topology.kind(node.parents[0])
        op = node.op
        if isinstance(node, (aggregate_nodes.Count, aggregate_nodes.Aggregate, aggregate_nodes.Reduce)):
            if parent not in (graph.GROUPED_STREAM, graph.GROUPED_TABLE):
                self.problem(node, "", f"{op} aggregates a grouping: put groupBy or groupByKey before it")
                return
            if node.windows is not None and not node.path:  # a manifest's windowedBy is checked where written
                self.windows(node, node.windows, node.emit)
                if parent == graph.GROUPED_TABLE:
                    self.problem(
                        node, ".windows", "a grouped table cannot be windowed (only grouped streams)"
                    )
            if parent == graph.GROUPED_TABLE:
                self.subtractable(node)
        elif isinstance(node, aggregate_nodes.Cogroup):
            for k, name in enumerate(node.parents):
                if (kind := topology.kind(name)) != graph.GROUPED_STREAM:
                    self.problem(
                        node,
                        f".streams[{k}]",
                        f"cogroup combines grouped streams, but this input is a {kind}",
                    )
            if len(node.adders) != len(node.parents):
                self.problem(node, ".adders", f"{len(node.parents)} grouped streams need as many adders")
            if node.windows is not None and not node.path:
                self.windows(node, node.windows, node.emit)
        elif isinstance(node, nodes.Suppress):
            agg = topology.node(node.parents[0])
            if not isinstance(agg, aggregate_nodes.AGGREGATE_NODES) or agg.windows is None:
                self.problem(
                    node, "", "suppress (until the window closes) must directly follow a windowed aggregation"
                )
            elif agg.emit == "final":
                self.problem(node, "", "the aggregation already emits final results only")
        elif isinstance(node, nodes.ToStream):
            if parent != graph.TABLE:
                self.problem(node, "", f"toStream turns a table into a stream, but its input is a {parent}")
        elif isinstance(node, nodes.GroupBy) and parent == graph.TABLE:
            if node.selector is None:
                self.problem(node, "", "a table is grouped with groupBy (a new key), not groupByKey")
        elif isinstance(node, (nodes.Filter, nodes.FilterNot, nodes.MapValues)):
            if parent not in (graph.STREAM, graph.TABLE):
                self.problem(
                    node, "", f"{op} needs a stream or a table, but its input is a {parent}: aggregate first"
                )
        elif parent != graph.STREAM:
            hint = {
                graph.TABLE: "turn the table into a stream with toStream first",
                graph.GROUPED_STREAM: "aggregate it first (count, reduce or aggregate)",
                graph.GROUPED_TABLE: "aggregate it first (count, reduce or aggregate)",
            }[parent]
            self.problem(node, "", f"{op} needs a stream, but its input is a {parent}: {hint}")

    def windows(self, node: nodes.Node, windows: aggregate_nodes.Windows, emit: str) -> None:
        if windows.kind not in aggregate_nodes.WINDOW_KINDS:
            self.problem(
                node,
                ".windows",
                f"unknown window kind {windows.kind!r}; "
                f"expected one of {', '.join(aggregate_nodes.WINDOW_KINDS)}",
            )
        if windows.size <= 0:
            what = {"sliding": "time difference", "session": "inactivity gap"}.get(windows.kind, "size")
            self.problem(node, ".windows", f"the window {what} must be positive, not {windows.size} ms")
        if windows.kind == "hopping" and not 0 < windows.advance <= windows.size:
            self.problem(
                node,
                ".windows.advance",
                f"a hopping window's advance must be in (0, size], not {windows.advance} ms",
            )
        if windows.grace < 0:
            self.problem(node, ".windows.grace", f"grace must not be negative, not {windows.grace} ms")
        if emit not in aggregate_nodes.EMITS:
            self.problem(node, ".emit", f"emit is one of {', '.join(aggregate_nodes.EMITS)}, not {emit!r}")

    def subtractable(
        self, node: aggregate_nodes.Count | aggregate_nodes.Aggregate | aggregate_nodes.Reduce
    ) -> None:
        """A grouped table's aggregate must undo a key's old value when it changes (Kafka's subtractor)."""
        if (
            isinstance(node, aggregate_nodes.Aggregate)
            and node.fn is not None
            and node.fn not in ("sum", "avg")
        ):
            self.problem(
                node,
                ".fn",
                f"{node.fn} of a grouped table cannot be undone when a value changes: "
                "use count, sum or avg, or initializer, adder and subtractor functions",
            )
        elif (
            isinstance(node, (aggregate_nodes.Aggregate, aggregate_nodes.Reduce))
            and node.subtractor is None
            and not (isinstance(node, aggregate_nodes.Aggregate) and node.fn is not None)
        ):
            self.problem(
                node,
                ".subtractor",
                "a grouped table's aggregation needs a subtractor (it runs when a key's value changes)",
            )

    def aggregate(self, node: aggregate_nodes.Aggregate, into: _Record) -> None:
        if node.fn is not None:
            if node.adder is not None or node.initializer is not None:
                self.problem(
                    node, "", "give either fn (a declarative aggregate) or initializer and adder, not both"
                )
            if node.fn not in graph.AGGREGATE_FUNCTIONS:
                known = ", ".join(graph.AGGREGATE_FUNCTIONS)
                self.problem(node, ".fn", f"unknown aggregate {node.fn!r}; expected one of {known}")
            self.logic(node, ".expr", nodes.Expr(node.expr), into)
            return
        if node.initializer is None and node.adder is None:
            self.problem(
                node, "", "give fn (sum, min, max, avg, latest, collect_list) or initializer and adder"
            )
            return
        for field in ("initializer", "adder"):
            if getattr(node, field) is None:
                self.problem(node, f".{field}", f"an aggregate without fn needs an {field} function")
        for field in ("initializer", "adder", "subtractor"):
            if (fn := getattr(node, field)) is not None:
                self.function(node, f".{field}", fn)
        if not node.returns:
            self.problem(
                node,
                ".returns",
                "an aggregate of Python functions needs returns: the Spark type of the aggregate",
            )
        elif message := check.check_type(node.returns):
            self.problem(node, ".returns", message)

    def function(self, node: nodes.Node, suffix: str, function: nodes.Function) -> None:
        if message := check.check_function_ref(function.ref):
            self.problem(node, suffix, message)

    def source(self, node: nodes.Source) -> _Record:
        self.serdes(node, "keySerde", "valueSerde")
        record = _Record(
            _shape(node.key_serde or self.topology.default_key_serde),
            _shape(node.value_serde or self.topology.default_value_serde),
        )
        if node.timestamp is not None:
            self.logic(node, ".timestamp", nodes.Expr(node.timestamp), record)
        return record

    def serdes(self, node: nodes.Source | nodes.Sink, key: str, value: str) -> None:
        topology = self.topology
        for which, own, default in (
            (key, node.key_serde, topology.default_key_serde),
            (value, node.value_serde, topology.default_value_serde),
        ):
            if own is None and default is None:
                hint = (
                    "set it here or in spec.topology.defaults"
                    if node.path
                    else f"pass {which[:-5]}_serde= or StreamsBuilder(default_{which[:-5]}_serde=...)"
                )
                self.problem(node, f".{which}", f"no {which}: {hint}")
            if own is not None and own.schema is not None:
                fields = check.schema_fields(own.schema)
                if isinstance(fields, str):
                    self.problem(node, f".{which}.schema", fields)

    def logic(
        self, node: nodes.Node, suffix: str, logic: nodes.Logic, record: _Record, *, boolean: bool = False
    ) -> None:
        if isinstance(logic, nodes.Function):
            if message := check.check_function_ref(logic.ref):
                self.problem(node, f"{suffix}.function", message)
            return
        expr = logic.sql
        if message := check.check_expression(expr):
            self.problem(node, suffix, message)
            return
        if boolean and check.is_boolean_expression(expr) is False:
            self.problem(node, suffix, f"type mismatch: a predicate must be boolean, {expr!r} is not")
        for column, field in check.struct_fields(expr):
            shape = record.key if column == "key" else record.value
            if message := _field_problem(expr, column, field, shape):
                self.problem(node, suffix, message)
                return


def _field_problem(expr: str, column: str, field: str, shape: Shape) -> str | None:
    if shape is None:
        return None
    serde = f"{column}Serde"
    if isinstance(shape, str):
        return (
            f"type mismatch: {expr!r} reads {column}.{field}, but the {column} is {shape} "
            f"(declare {serde} json with a schema to read fields)"
        )
    if field.lower() in (f.lower() for f in shape):
        return None
    hint = difflib.get_close_matches(field, shape, n=1)
    return (
        f"type mismatch: {expr!r} reads {column}.{field}, but the {serde} schema declares "
        f"{', '.join(shape)}" + (f"; did you mean '{hint[0]}'?" if hint else "")
    )


def validate_topology(topology: graph.Topology) -> list[errors.Problem]:
    """Every problem of the graph, in build order; empty when it is valid."""
    return _Checker(topology).run()
