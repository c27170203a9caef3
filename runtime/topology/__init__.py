"""The logical topology graph and the Python builder that produces it (no Spark here).

``nodes`` holds the node types (with ``aggregate_nodes``, ``join_nodes`` and ``process_nodes``),
``graph`` the immutable :class:`Topology`, ``builder`` the DSL's :class:`StreamsBuilder` (``dsl``: the
streams and tables its calls return; ``logic``: what they take from the user) and ``validate`` the
checks both the builder and the manifest loader run.
"""

from streamapp.runtime.topology.aggregate_nodes import Windows
from streamapp.runtime.topology.builder import StreamsBuilder
from streamapp.runtime.topology.dsl import (
    BranchedKStream,
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    WindowedKStream,
)
from streamapp.runtime.topology.graph import Topology
from streamapp.runtime.topology.join_nodes import JoinWindows
from streamapp.runtime.topology.logic import SessionWindows, SlidingWindows, TimeWindows
from streamapp.runtime.topology.nodes import Expr, Function, Node
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
