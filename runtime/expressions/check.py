"""Check user logic without a JVM, so `streamapp validate` and the operator answer in milliseconds.

Spark SQL expressions are parsed with sqlglot's Spark dialect; a syntax error or a column that is
not one of a record's (key, value, timestamp, headers, partition, offset, topic) is reported with
a suggestion. Function references are checked for form and, where the module can be imported
here, for existence — except under :func:`functions_by_form_only`: the operator validates specs
whose functions live in the app's runtime image, not in its own, and must never run a user's code.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import importlib
import re
from collections.abc import Iterator

import sqlglot
from sqlglot import exp

__all__ = [
    "RECORD_COLUMNS",
    "check_expression",
    "check_function_ref",
    "check_type",
    "functions_by_form_only",
    "imports_allowed",
    "is_boolean_expression",
    "schema_fields",
    "struct_fields",
]

_IMPORT_FUNCTIONS = contextvars.ContextVar("streamapp_import_functions", default=True)

RECORD_COLUMNS = ("key", "value", "timestamp", "headers", "partition", "offset", "topic")
_REF = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_BOOLEAN = (
    exp.Predicate,
    exp.Not,
    exp.And,
    exp.Or,
    exp.Boolean,
    exp.In,
    exp.Between,
    exp.Is,
    exp.Like,
    exp.ILike,
    exp.RegexpLike,
)


def _parse(expr: str) -> exp.Expression:
    tree: exp.Expression = sqlglot.parse_one(expr, read="spark")  # type: ignore[assignment]
    return tree


def check_expression(expr: str) -> str | None:
    """None when ``expr`` parses and uses only record columns; else the problem in words."""
    try:
        tree = _parse(expr)
    except sqlglot.errors.ParseError as err:
        first = err.errors[0] if err.errors else {}
        detail = first.get("description") or str(err).splitlines()[0]
        return f"not a valid Spark SQL expression ({detail}): {expr!r}"
    bound = {ident.name for lam in tree.find_all(exp.Lambda) for ident in lam.expressions}
    for column in tree.find_all(exp.Column):
        root = column.parts[0].name if column.parts else column.name
        if root in bound or root.lower() in RECORD_COLUMNS:
            continue
        hint = difflib.get_close_matches(root, RECORD_COLUMNS, n=1)
        suggestion = f"; did you mean '{hint[0]}'?" if hint else ""
        return f"unknown column '{root}' (a record has {', '.join(RECORD_COLUMNS)}){suggestion}"
    return None


def is_boolean_expression(expr: str) -> bool | None:
    """True/False when the expression's type is evident without a schema; None when unknown."""
    try:
        tree = _parse(expr)
    except sqlglot.errors.ParseError:
        return None
    if isinstance(tree, exp.Paren):
        tree = tree.this
    if isinstance(tree, _BOOLEAN):
        return True
    if isinstance(tree, (exp.Literal, exp.Binary)) and not isinstance(tree, exp.Connector):
        return isinstance(tree, exp.Boolean)
    return None


def struct_fields(expr: str) -> list[tuple[str, str]]:
    """Struct fields read from the key or value (``value.amount`` → ``("value", "amount")``)."""
    try:
        tree = _parse(expr)
    except sqlglot.errors.ParseError:
        return []
    out = []
    for column in tree.find_all(exp.Column):
        parts = column.parts
        if len(parts) >= 2 and parts[0].name.lower() in ("key", "value"):
            out.append((parts[0].name.lower(), parts[1].name))
    return out


@contextlib.contextmanager
def functions_by_form_only() -> Iterator[None]:
    """Within this block (this thread or task), function references are checked for form only."""
    token = _IMPORT_FUNCTIONS.set(False)
    try:
        yield
    finally:
        _IMPORT_FUNCTIONS.reset(token)


def imports_allowed() -> bool:
    """Whether references are imported here (False within :func:`functions_by_form_only`)."""
    return _IMPORT_FUNCTIONS.get()


def check_function_ref(ref: str) -> str | None:
    """None when ``ref`` looks like ``package.module:function`` and resolves (if importable here)."""
    if not _REF.match(ref):
        return f"a function reference is 'package.module:function', not {ref!r}"
    if not _IMPORT_FUNCTIONS.get():
        return None
    module_name, qualname = ref.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        return f"cannot import module {module_name!r} for {ref!r}: {err}"
    target: object = module
    for part in qualname.split("."):
        if not hasattr(target, part):
            return f"module {module_name!r} has no {qualname!r}"
        target = getattr(target, part)
    if not callable(target):
        return f"{ref!r} is not callable"
    return None


def _top_level_parts(ddl: str) -> list[str]:
    """Split at commas outside ``<>`` and ``()`` (``a MAP<STRING, INT>, b DECIMAL(10, 2)``)."""
    depth, start, parts = 0, 0, []
    for i, char in enumerate(ddl):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(ddl[start:i])
            start = i + 1
    return [*parts, ddl[start:]]


def schema_fields(ddl: str) -> tuple[str, ...] | str:
    """The field names of a Spark DDL schema (``"amount DOUBLE, name STRING"``), or the problem."""
    parts = [p.strip() for p in _top_level_parts(ddl)]
    fields: list[str] = []
    for part in parts:
        try:
            struct = exp.DataType.build(f"STRUCT<{part}>", dialect="spark")
        except (sqlglot.errors.ParseError, ValueError) as err:
            return f"not a Spark DDL schema ({err}): {ddl!r}"
        columns = struct.expressions
        unknown = [c for c in columns if c.args.get("kind") is None or c.args["kind"].is_type("userdefined")]
        if len(columns) != 1 or unknown:
            return f"not a Spark DDL schema (expected 'name TYPE, ...', got {part!r}): {ddl!r}"
        fields.append(columns[0].name)
    return tuple(fields)


def check_type(ddl: str) -> str | None:
    """None when ``ddl`` is a Spark SQL type (``bigint``, ``array<string>``, ``struct<a: int>``)."""
    try:
        built = exp.DataType.build(ddl, dialect="spark")
    except (sqlglot.errors.ParseError, ValueError) as err:
        return f"not a Spark SQL type ({err}): {ddl!r}"
    unknown = [t for t in built.find_all(exp.DataType) if t.this.name not in _SPARK_TYPES]
    if unknown:
        return f"not a Spark SQL type: {ddl!r} (e.g. bigint, double, string, array<string>)"
    return None


#: sqlglot's names of the types Spark SQL has.
_SPARK_TYPES = frozenset(
    {
        *("BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"),
        *("TEXT", "VARCHAR", "CHAR", "BINARY", "DATE", "INTERVAL", "NULL", "VARIANT"),
        *("TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMPNTZ", "TIMESTAMPLTZ", "ARRAY", "MAP", "STRUCT"),
    }
)
