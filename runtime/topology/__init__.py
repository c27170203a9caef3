"""The logical topology graph and the Python builder that produces it (no Spark here)."""

from streamapp.runtime.topology.builder import (
    BranchedKStream,
    Function,
    KGroupedStream,
    KStream,
    KTable,
    StreamsBuilder,
)
from streamapp.runtime.topology.graph import Node, Topology

__all__ = [
    "BranchedKStream",
    "Function",
    "KGroupedStream",
    "KStream",
    "KTable",
    "Node",
    "StreamsBuilder",
    "Topology",
]
