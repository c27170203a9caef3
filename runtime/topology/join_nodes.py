"""The join nodes of the logical graph: ``join``, ``leftJoin`` and ``outerJoin`` of two parents.

Why a module of its own: a join is one node whose meaning depends on what its two parents are —
a stream with a table (the table is evolving state, the result a stream), two streams (windowed by
:class:`JoinWindows`), or two tables (the result a table) — and describe() names the state stores
and repartition topics Kafka Streams would create for it. Nothing here knows about Spark.

The first parent is the stream or table ``join`` was called on (the *left* side), the second the
one passed in (the *right* side). ``joiner`` computes the result value from ``left`` and
``right`` (the two values; either is null for a left or outer result without a match).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from streamapp.runtime.topology import nodes

__all__ = [
    "JOIN_KINDS",
    "JOIN_NODES",
    "GlobalTableSource",
    "Join",
    "JoinNode",
    "JoinWindows",
    "LeftJoin",
    "OuterJoin",
]

#: What a join joins, by the kinds of its two parents (see :meth:`graph.Topology.join_kind`).
JOIN_KINDS = ("stream-table", "stream-stream", "table-table", "table-table-fk", "stream-globalTable")


@dataclasses.dataclass(frozen=True, kw_only=True)
class GlobalTableSource(nodes.Source):
    """``builder.globalTable(topic)``: a table every task holds in full, joined from a stream by a
    key extractor without repartitioning the stream (Kafka Streams' GlobalKTable)."""

    op: ClassVar[str] = "globalTable"
    table: bool = True

    def detail(self) -> str:
        return f"topics: [{', '.join(self.topics)}], as: globalTable"


@dataclasses.dataclass(frozen=True)
class JoinWindows:
    """Kafka Streams' ``JoinWindows`` in milliseconds: a left record at time t joins right records
    in ``[t - before, t + after]``; ``grace`` is how long after that window's end out-of-order
    records are still accepted (and a left/outer result without match is held back)."""

    before: int
    after: int
    grace: int = 0

    @staticmethod
    def of_time_difference_and_grace(difference: int, grace: int) -> JoinWindows:
        return JoinWindows(difference, difference, grace)

    @staticmethod
    def of_time_difference_with_no_grace(difference: int) -> JoinWindows:
        return JoinWindows(difference, difference, 0)

    def with_before(self, before: int) -> JoinWindows:
        return dataclasses.replace(self, before=before)

    def with_after(self, after: int) -> JoinWindows:
        return dataclasses.replace(self, after=after)

    @property
    def size(self) -> int:
        return self.before + self.after

    @property
    def retention(self) -> int:
        """How long a side's window store keeps a record (Kafka Streams: size + grace)."""
        return self.before + self.after + self.grace

    def describe(self) -> str:
        return f"before: {self.before}ms, after: {self.after}ms, grace: {self.grace}ms"


@dataclasses.dataclass(frozen=True, kw_only=True)
class JoinNode(nodes.Node):
    """A join of ``parents[0]`` (left) with ``parents[1]`` (right); ``how`` is inner/left/outer."""

    how: ClassVar[str] = "inner"
    joiner: nodes.Logic
    windows: JoinWindows | None = None
    #: GlobalKTable joins: the table key to look up, computed from the stream record (KeyValueMapper).
    key: nodes.Logic | None = None
    #: Foreign-key table-table joins (KIP-213): the right table's key, computed from the left
    #: table's key and value (Kafka Streams' foreignKeyExtractor).
    foreign_key: nodes.Logic | None = None

    def detail(self) -> str:
        parts = [
            f"{name}: {logic.sql if isinstance(logic, nodes.Expr) else logic.ref}"
            for name, logic in (("key", self.key), ("foreignKey", self.foreign_key), ("joiner", self.joiner))
            if logic is not None
        ]
        if self.windows is not None:
            parts.append(f"windows: {self.windows.describe()}")
        return ", ".join(parts)

    def stores(self, kind: str) -> list[str]:
        """The state stores Kafka Streams would create for this join, named after the node."""
        if kind == "stream-stream":
            stores = [f"{self.name}-this-join-store", f"{self.name}-other-join-store"]
            return stores + ([f"{self.name}-outer-shared-join-store"] if self.how != "inner" else [])
        if kind == "stream-table":
            return [f"{self.parents[1]}-store"]
        if kind == "stream-globalTable":
            return [f"{self.parents[1]}-global-store"]
        if kind == "table-table-fk":
            # Named as Kafka Streams names them for TableJoined.as(<node name>).
            return [f"{self.name}-subscription-store", f"{self.parents[0]}-store", f"{self.parents[1]}-store"]
        return [f"{self.parents[0]}-store", f"{self.parents[1]}-store"]

    def foreign_key_lines(self) -> tuple[list[str], list[str]]:
        """describe() of a foreign-key join's internal topics, named as Kafka Streams names them
        for ``TableJoined.as(<node name>)``: the lines written in the left table's sub-topology
        before the join node, and those written in the right table's after the right table."""
        n = self.name
        registration, response = self.topics()
        left = [
            f"    Sink: {n}-subscription-registration-sink (topic: {registration})",
            f"      <-- {self.parents[0]}",
            f"    Source: {n}-subscription-response-source (topics: [{response}])",
            f"      --> {n}",
        ]
        right = [
            f"    Processor: {n}-foreign-join-subscription (stores: [{n}-subscription-store])",
            f"      --> {n}-subscription-response-sink",
            f"      <-- {self.parents[1]}",
            f"    Source: {n}-subscription-registration-source (topics: [{registration}])",
            f"      --> {n}-subscription-receive",
            f"    Processor: {n}-subscription-receive (stores: [{n}-subscription-store])",
            f"      --> {n}-subscription-join-foreign",
            f"      <-- {n}-subscription-registration-source",
            f"    Processor: {n}-subscription-join-foreign (stores: [{self.parents[1]}-store])",
            f"      --> {n}-subscription-response-sink",
            f"      <-- {n}-subscription-receive",
            f"    Sink: {n}-subscription-response-sink (topic: {response})",
            f"      <-- {n}-subscription-join-foreign, {n}-foreign-join-subscription",
        ]
        return left, right

    def topics(self) -> list[str]:
        """A foreign-key join's internal topics, as Kafka Streams names them for
        ``TableJoined.as(<node name>)``: subscriptions by foreign key, responses by left key."""
        if self.foreign_key is None:
            return []
        return [f"{self.name}-subscription-registration-topic", f"{self.name}-subscription-response-topic"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Join(JoinNode):
    op: ClassVar[str] = "join"
    word: ClassVar[str] = "JOIN"


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeftJoin(JoinNode):
    op: ClassVar[str] = "leftJoin"
    word: ClassVar[str] = "LEFTJOIN"
    how: ClassVar[str] = "left"


@dataclasses.dataclass(frozen=True, kw_only=True)
class OuterJoin(JoinNode):
    op: ClassVar[str] = "outerJoin"
    word: ClassVar[str] = "OUTERJOIN"
    how: ClassVar[str] = "outer"


JOIN_NODES: tuple[type[JoinNode], ...] = (Join, LeftJoin, OuterJoin)
