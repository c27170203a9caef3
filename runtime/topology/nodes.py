"""The node types of the logical graph: one frozen dataclass per operation, nothing about Spark.

Every node has a ``name`` (generated in Kafka Streams' style, ``KSTREAM-FILTER-0000000003``, or
given by the user), the names of its ``parents`` and the manifest ``path`` it came from (not part
of equality: a graph built in Python equals the same graph loaded from YAML). The rest are typed
fields. User logic is an :class:`Expr` (a Spark SQL expression) or a :class:`Function` (a Python
function by import path), so a graph is hashable and can be written back out as YAML. The
aggregations, the joins and the custom processor have modules of their own (``aggregate_nodes``,
``join_nodes``, ``process_nodes``).

``Node.params`` is a plain-mapping view of the fields in the shape the first compiler consumed
(``{"expr": ...}`` / ``{"function": ..., "returns": ...}``); new code should read the fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from streamapp.runtime import serdes

__all__ = [
    "Branch",
    "BranchChild",
    "Expr",
    "Filter",
    "FilterNot",
    "FlatMap",
    "FlatMapValues",
    "Function",
    "GroupBy",
    "Logic",
    "Map",
    "MapValues",
    "Merge",
    "Node",
    "Peek",
    "Print",
    "Repartition",
    "SelectKey",
    "Sink",
    "Source",
    "Split",
    "Suppress",
    "ToStream",
    "ToTable",
    "logic_params",
]


@dataclasses.dataclass(frozen=True)
class Expr:
    """A Spark SQL expression over a record's columns (``"upper(value)"``)."""

    sql: str


@dataclasses.dataclass(frozen=True)
class Function:
    """A Python function by import path, ``"package.module:function"``; ``returns`` is its Spark type."""

    ref: str
    returns: str | None = None


Logic = Expr | Function


def logic_params(logic: Logic) -> dict[str, Any]:
    """The mapping form of user logic (``{"expr": ...}`` or ``{"function": ..., "returns": ...}``)."""
    if isinstance(logic, Expr):
        return {"expr": logic.sql}
    out: dict[str, Any] = {"function": logic.ref}
    if logic.returns:
        out["returns"] = logic.returns
    return out


#: Fields that hold an operation's only logic: describe() shows them as ``expr:``/``function:``
#: and ``params`` spreads them into the top level, as the first compiler expects.
_SPREAD = frozenset({"predicate", "mapper", "action", "selector"})
_CAMEL = {
    "key_serde": "keySerde",
    "value_serde": "valueSerde",
    "repartition_name": "name",
    "deserialization_errors": "deserializationErrors",
    "dead_letter_topic": "deadLetterTopic",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Node:
    """What every operation has: a name, its parents (in order) and where it was written."""

    op: ClassVar[str]
    #: The word Kafka Streams uses in generated names (``KSTREAM-<word>-0000000003``).
    word: ClassVar[str]
    prefix: ClassVar[str] = "KSTREAM"
    kind: ClassVar[str] = "Processor"  # describe(): Source, Processor or Sink

    name: str
    parents: tuple[str, ...] = ()
    path: str = dataclasses.field(default="", compare=False)

    @classmethod
    def generated_name(cls, index: int) -> str:
        return f"{cls.prefix}-{cls.word}-{index:010d}"

    def own_fields(self) -> Iterator[tuple[str, Any]]:
        """The operation's own fields (not name, parents, path), in declaration order."""
        for field in dataclasses.fields(self):
            if field.name not in ("name", "parents", "path"):
                yield field.name, getattr(self, field.name)

    def logic(self) -> Iterator[Logic]:
        """Every piece of user logic the node runs (the trigger choice looks at these)."""
        for _, value in self.own_fields():
            if isinstance(value, (Expr, Function)):
                yield value
            elif isinstance(value, tuple):
                yield from (b.predicate for b in value if isinstance(b, Branch))

    def detail(self) -> str:
        """The node's parameters as describe() shows them (``expr: upper(value)``)."""
        parts = []
        for key, value in self.own_fields():
            if isinstance(value, Expr):
                parts.append(f"{'expr' if key in _SPREAD else key}: {value.sql}")
            elif isinstance(value, Function):
                parts.append(f"{'function' if key in _SPREAD else key}: {value.ref}")
            elif isinstance(value, (str, int)) and not isinstance(value, bool):
                parts.append(f"{key}: {value}")
        return ", ".join(parts)

    @property
    def params(self) -> Mapping[str, Any]:
        """The fields as the mapping the first compiler read (camelCase keys, logic as mappings)."""
        out: dict[str, Any] = {}
        for key, value in self.own_fields():
            if value is None or value is False:
                continue
            camel = _CAMEL.get(key, key)
            if isinstance(value, (Expr, Function)):
                if key in _SPREAD:
                    out.update(logic_params(value))
                else:
                    out[camel] = logic_params(value)
            elif isinstance(value, tuple) and value and isinstance(value[0], Branch):
                out[camel] = [{"name": b.name, "predicate": logic_params(b.predicate)} for b in value]
            elif isinstance(value, tuple):
                out[camel] = list(value)
            else:
                out[camel] = value
        if isinstance(self, Split):
            out.setdefault("default", None)
        return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class Source(Node):
    """A KStream read from one or more topics; ``timestamp`` (an expression, epoch ms) is event time."""

    op: ClassVar[str] = "source"
    word: ClassVar[str] = "SOURCE"
    kind: ClassVar[str] = "Source"
    topics: tuple[str, ...]
    key_serde: serdes.Serde | None = None
    value_serde: serdes.Serde | None = None
    timestamp: str | None = None
    #: Read as a KTable (``builder.table``): the latest value per key, a null value deletes it.
    table: bool = False
    #: Records of these topics per micro-batch at most (Spark's maxOffsetsPerTrigger); None: all.
    max_offsets_per_trigger: int | None = None
    #: A record its serdes cannot read: None or "fail" (the query stops), "skip" or "deadLetter".
    deserialization_errors: str | None = None
    #: Where "deadLetter" writes unreadable records (original bytes and headers, plus the error's).
    dead_letter_topic: str | None = None

    def detail(self) -> str:
        policy = (
            ""
            if self.deserialization_errors in (None, "fail")
            else f", on bad records: {self.deserialization_errors}"
        )
        target = f" to {self.dead_letter_topic}" if self.dead_letter_topic else ""
        return f"topics: [{', '.join(self.topics)}]" + (", as: table" if self.table else "") + policy + target


@dataclasses.dataclass(frozen=True, kw_only=True)
class Filter(Node):
    op: ClassVar[str] = "filter"
    word: ClassVar[str] = "FILTER"
    predicate: Logic


@dataclasses.dataclass(frozen=True, kw_only=True)
class FilterNot(Node):
    op: ClassVar[str] = "filterNot"
    word: ClassVar[str] = "FILTER"
    predicate: Logic


@dataclasses.dataclass(frozen=True, kw_only=True)
class Map(Node):
    """New key and value, each computed from the input record."""

    op: ClassVar[str] = "map"
    word: ClassVar[str] = "MAP"
    key: Logic
    value: Logic


@dataclasses.dataclass(frozen=True, kw_only=True)
class MapValues(Node):
    op: ClassVar[str] = "mapValues"
    word: ClassVar[str] = "MAPVALUES"
    mapper: Logic


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlatMap(Node):
    """``mapper`` gives an array of ``struct(key, value)``; one output record per element."""

    op: ClassVar[str] = "flatMap"
    word: ClassVar[str] = "FLATMAP"
    mapper: Logic


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlatMapValues(Node):
    """``mapper`` gives an array of values (or is an ``explode(...)``); the key is kept."""

    op: ClassVar[str] = "flatMapValues"
    word: ClassVar[str] = "FLATMAPVALUES"
    mapper: Logic


@dataclasses.dataclass(frozen=True, kw_only=True)
class SelectKey(Node):
    op: ClassVar[str] = "selectKey"
    word: ClassVar[str] = "KEY-SELECT"
    mapper: Logic


@dataclasses.dataclass(frozen=True, kw_only=True)
class Peek(Node):
    op: ClassVar[str] = "peek"
    word: ClassVar[str] = "PEEK"
    action: Logic


@dataclasses.dataclass(frozen=True)
class Branch:
    """One named branch of a split; a record takes the first branch whose predicate holds."""

    name: str
    predicate: Logic


@dataclasses.dataclass(frozen=True, kw_only=True)
class Split(Node):
    """Routes records to its :class:`BranchChild` nodes; ``default`` takes the rest (or they drop)."""

    op: ClassVar[str] = "split"
    word: ClassVar[str] = "BRANCH"
    branches: tuple[Branch, ...]
    default: str | None = None

    def detail(self) -> str:
        return ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BranchChild(Node):
    """The stream of one branch (``branch`` names it; the default branch too)."""

    op: ClassVar[str] = "branch"
    word: ClassVar[str] = "BRANCHCHILD"
    branch: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Merge(Node):
    """All records of all parents (the first parent is the stream ``merge`` was called on)."""

    op: ClassVar[str] = "merge"
    word: ClassVar[str] = "MERGE"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Repartition(Node):
    """A shuffle by key into ``partitions`` (default: the app's state partitions).

    ``repartition_name`` is Kafka Streams' ``Repartitioned.as``. StreamApp shuffles inside Spark,
    so no repartition topic is created in Kafka: the name labels the step in ``describe()``.
    """

    op: ClassVar[str] = "repartition"
    word: ClassVar[str] = "REPARTITION"
    partitions: int | None = None
    repartition_name: str | None = None

    def detail(self) -> str:
        parts = [f"partitions: {self.partitions}"] if self.partitions else []
        return ", ".join(parts + ([f"topic: {self.repartition_name}"] if self.repartition_name else []))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sink(Node):
    """Writes to ``topic``; ``partitioner`` (an int expression) overrides Kafka's murmur2 of the key."""

    op: ClassVar[str] = "to"
    word: ClassVar[str] = "SINK"
    kind: ClassVar[str] = "Sink"
    topic: str
    key_serde: serdes.Serde | None = None
    value_serde: serdes.Serde | None = None
    partitioner: Logic | None = None

    def detail(self) -> str:
        by = self.partitioner
        if by is None:
            return f"topic: {self.topic}"
        return f"topic: {self.topic}, partitioner: {by.sql if isinstance(by, Expr) else by.ref}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Print(Node):
    op: ClassVar[str] = "print"
    word: ClassVar[str] = "PRINTER"
    label: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class GroupBy(Node):
    """Re-keys by ``selector`` (``None``: groupByKey); records with a null key are dropped."""

    op: ClassVar[str] = "groupBy"
    word: ClassVar[str] = "GROUPBY"
    selector: Logic | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToTable(Node):
    """A stream read as a table: the latest value per key; a null value deletes the key."""

    op: ClassVar[str] = "toTable"
    word: ClassVar[str] = "TOTABLE"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Suppress(Node):
    """``suppress(untilWindowCloses)``: a windowed table emits one final result per window."""

    op: ClassVar[str] = "suppress"
    word: ClassVar[str] = "SUPPRESS"
    prefix: ClassVar[str] = "KTABLE"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToStream(Node):
    op: ClassVar[str] = "toStream"
    word: ClassVar[str] = "TOSTREAM"
    prefix: ClassVar[str] = "KTABLE"
