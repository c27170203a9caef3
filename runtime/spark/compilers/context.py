"""What a per-node compile function may read from the compiler (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from streamapp.runtime.spark.frames import RecordFrame
from streamapp.runtime.topology import graph, nodes

if TYPE_CHECKING:
    from streamapp.runtime.spark.stateful.engine import Tasks

__all__ = ["Compile", "Context"]


class Context(Protocol):
    @property
    def topology(self) -> graph.Topology: ...

    @property
    def frames(self) -> Mapping[str, RecordFrame]:
        """Every node compiled so far (the parents are), by name."""
        ...

    @property
    def raw_tables(self) -> Mapping[str, RecordFrame]:
        """Table sources' records as read (before they became a changelog), by node name."""
        ...

    @property
    def late(self) -> dict[str, Any]:
        """Node name → Spark accumulator of records dropped as late (the runner reports them)."""
        ...

    def read_source(self, node: nodes.Source) -> RecordFrame:
        """A source's records as read: decoded by its serdes, with its event time."""
        ...

    def without_null_keys(self, node: nodes.Node, frame: RecordFrame) -> RecordFrame:
        """``frame`` without null-key records, counted as dropped at ``node`` (Kafka Streams'
        dropped-records): what a step that keeps state per key does with them."""
        ...

    def dropping(
        self, node: nodes.Node, frame: RecordFrame, column: str, *, keep: bool = False
    ) -> RecordFrame:
        """``frame`` without the records whose ``column`` is null, counted as dropped at ``node``
        (``keep``: counted, but left for a :meth:`merged` step to skip)."""
        ...

    def merged(self, node: nodes.Node) -> bool:
        """Whether aggregation ``node``'s tasks each read a partition of several topics through
        the merge frontier (a cogroup or merge without a key change)."""
        ...

    def rekeyed(self, node: nodes.Node) -> bool:
        """Whether the key may have changed since the source (Kafka Streams would repartition)."""
        ...

    def tasks(self) -> Tasks:
        """The tasks a step groups re-keyed records into (Kafka Streams' repartition-topic
        partitions): the checkpoint's, independent of the state partitions, and how a record
        finds its task."""
        ...

    @property
    def merge_frontier(self) -> Any:
        """A ``stateful.frontier.Frontier`` when the query reads Kafka (None: files): a step whose
        task reads several partitions holds back records a dry partition may precede."""
        ...


Compile = Callable[[Context, Any], RecordFrame]
