"""The logical topology graph and the Python builder that produces it (no Spark here).

``nodes`` holds the node types, ``graph`` the immutable :class:`Topology`, ``builder`` the DSL and
``validate`` the checks both the builder and the manifest loader run.
"""

from streamapp.runtime.topology.builder import (
    BranchedKStream,
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    WindowedKStream,
)
from streamapp.runtime.topology.graph import Topology
from streamapp.runtime.topology.join_nodes import JoinWindows
from streamapp.runtime.topology.nodes import Expr, Function, Node, Windows
from streamapp.runtime.topology.validate import validate_topology

__all__ = [
    "BranchedKStream",
    "Expr",
    "Function",
    "JoinWindows",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Node",
    "SessionWindows",
    "SlidingWindows",
    "StreamsBuilder",
    "TimeWindows",
    "Topology",
    "WindowedKStream",
    "Windows",
    "validate_topology",
]
