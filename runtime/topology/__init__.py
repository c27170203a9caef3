"""The logical topology graph and the Python builder that produces it (no Spark here)."""

from streamapp.runtime.topology.builder import BranchedKStream, Function, KStream, StreamsBuilder
from streamapp.runtime.topology.graph import Node, Topology

__all__ = ["BranchedKStream", "Function", "KStream", "Node", "StreamsBuilder", "Topology"]
