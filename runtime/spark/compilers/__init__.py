"""Per-node-kind compilation: a registry from graph node type to the function compiling it.

Why: Kafka Streams' graph nodes each write themselves into the topology
(``GraphNode.writeToTopology``); here each newer node kind (joins first) has its own compile
function in its own module, registered by node type, and :mod:`..compiler` stays a sequencer
that asks :func:`lookup` before its built-in cases. A compile function receives the
:class:`context.Context` (the compiled parents, the topology, the settings) and the node, and
returns the node's record frame.

Beside the registry, the built-in cases that are more than a step on a record frame compile here
too, as functions the sequencer calls: :mod:`.sources` (reading, deserialization-error policies),
:mod:`.sinks` (``to`` and ``print`` rows), :mod:`.aggregations` (Spark's or the stateful
engine's), and :mod:`.logic`, the user logic they all read from a node's parameters.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamapp.runtime.spark.compilers import context, joins, process
from streamapp.runtime.topology import nodes

__all__ = ["REGISTRY", "lookup"]

REGISTRY: Mapping[type[nodes.Node], context.Compile] = {**joins.COMPILERS, **process.COMPILERS}


def lookup(node: nodes.Node) -> context.Compile | None:
    """The compile function registered for ``node``'s type (or a base type of it), if any."""
    for node_type in type(node).__mro__:
        if node_type in REGISTRY:
            return REGISTRY[node_type]
    return None
