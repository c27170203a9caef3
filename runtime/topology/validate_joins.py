"""The graph checks of joins: what may be joined with what, and the joiner's logic.

Kept apart from :mod:`.validate` so that module stays a walk over the common operations; it calls
:func:`problems` for every join node. Each problem is ``(suffix, message)``, the suffix appended
to the node's manifest path or name as :mod:`.validate` does for its own problems.
"""

from __future__ import annotations

import difflib

import sqlglot
from sqlglot import exp

from streamapp.runtime.expressions import check
from streamapp.runtime.topology import graph, join_nodes, nodes

__all__ = [
    "FOREIGN_KEY_COLUMNS",
    "JOINER_COLUMNS",
    "foreign_key_problem",
    "global_table_problem",
    "joiner_problem",
    "problems",
]

#: What a joiner expression may read: the join key and the two sides' values.
JOINER_COLUMNS = ("key", "left", "right")
#: What a foreign-key extractor may read: the left table's key and value.
FOREIGN_KEY_COLUMNS = ("key", "value")

_SUPPORTED = {
    "stream-table": ("join", "leftJoin"),
    "stream-stream": ("join", "leftJoin", "outerJoin"),
    "table-table": ("join", "leftJoin", "outerJoin"),
    "table-table-fk": ("join", "leftJoin"),
    "stream-globalTable": ("join", "leftJoin"),
}


def joiner_problem(logic: nodes.Logic) -> str | None:
    """None when the joiner parses and reads only key, left and right."""
    return _columns_problem(logic, JOINER_COLUMNS, "a joiner reads key, left and right: the two values")


def foreign_key_problem(logic: nodes.Logic) -> str | None:
    """None when the foreign-key extractor parses and reads only the left table's key and value."""
    return _columns_problem(logic, FOREIGN_KEY_COLUMNS, "a foreignKey reads the left table's key and value")


def _columns_problem(logic: nodes.Logic, columns: tuple[str, ...], reads: str) -> str | None:
    if isinstance(logic, nodes.Function):
        return check.check_function_ref(logic.ref)
    try:
        tree = sqlglot.parse_one(logic.sql, read="spark")
    except sqlglot.errors.ParseError as err:
        return f"not a valid Spark SQL expression ({str(err).splitlines()[0]}): {logic.sql!r}"
    bound = {ident.name for lam in tree.find_all(exp.Lambda) for ident in lam.expressions}
    for column in tree.find_all(exp.Column):
        root = column.parts[0].name if column.parts else column.name
        if root in bound or root.lower() in columns:
            continue
        hint = difflib.get_close_matches(root, columns, n=1)
        return f"unknown column '{root}' ({reads})" + (f"; did you mean '{hint[0]}'?" if hint else "")
    return None


def problems(topology: graph.Topology, node: join_nodes.JoinNode) -> list[tuple[str, str]]:
    """Every problem of one join node: its inputs' kinds, its windows, its joiner."""
    out: list[tuple[str, str]] = []
    if len(node.parents) != 2:
        return [("", f"{node.op} joins exactly two inputs, not {len(node.parents)}")]
    kind = topology.join_kind(node)
    if kind not in _SUPPORTED:
        left, right = (topology.kind(p) for p in node.parents)
        return [
            (
                "",
                f"{node.op} of a {left} with a {right} is not a join Kafka Streams has: join a stream "
                "with a stream (windowed), a stream with a table, or a table with a table",
            )
        ]
    if node.op not in _SUPPORTED[kind]:
        what = "foreign-key" if kind == "table-table-fk" else kind
        out.append(("", f"a {what} join is join or leftJoin (Kafka Streams has no {what} {node.op})"))
    if node.foreign_key is not None and kind != "table-table-fk":
        out.append(
            (
                ".foreignKey",
                f"only a table-table join takes a foreignKey (a foreign-key join), this is a {kind} join",
            )
        )
    elif node.foreign_key is not None and (message := foreign_key_problem(node.foreign_key)):
        suffix = ".foreignKey.function" if isinstance(node.foreign_key, nodes.Function) else ".foreignKey"
        out.append((suffix, message))
    if kind == "stream-stream":
        w = node.windows
        if w is None:
            out.append((".windows", "a stream-stream join needs windows (before/after or timeDifference)"))
        elif w.before < 0 or w.after < 0 or w.grace < 0 or w.before + w.after < 0:
            out.append((".windows", f"before, after and grace must not be negative ({w.describe()})"))
    elif node.windows is not None:
        out.append((".windows", f"only a stream-stream join is windowed, this is a {kind} join"))
    if kind == "stream-globalTable" and node.key is None:
        out.append((".key", "a GlobalKTable join needs key: the table key, computed from the stream record"))
    elif kind != "stream-globalTable" and node.key is not None:
        out.append((".key", f"only a GlobalKTable join takes a key extractor, this is a {kind} join"))
    if node.key is not None:
        message = (
            check.check_function_ref(node.key.ref)
            if isinstance(node.key, nodes.Function)
            else check.check_expression(node.key.sql)
        )
        if message:
            out.append((".key", message))
    if message := joiner_problem(node.joiner):
        suffix = ".joiner.function" if isinstance(node.joiner, nodes.Function) else ".joiner"
        out.append((suffix, message))
    return out


def global_table_problem(topology: graph.Topology, node: nodes.Node) -> str | None:
    """A GlobalKTable is only joined from a stream (Kafka Streams has no other operation on it)."""
    for k, parent in enumerate(node.parents):
        if isinstance(topology.node(parent), join_nodes.GlobalTableSource) and not (
            isinstance(node, join_nodes.JoinNode) and k == 1
        ):
            return (
                f"{parent} is a globalTable: it can only be joined from a stream (join or leftJoin with key)"
            )
    return None
