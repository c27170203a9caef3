"""StreamApp runtime: Kafka Streams semantics on Apache Spark.

The public surface is small; everything else is internal. Importing it never imports pyspark.
"""

from streamapp.runtime.errors import ManifestError, Problem, StreamAppError, TopologyError
from streamapp.runtime.serdes import Serde, Serdes
from streamapp.runtime.topology import (
    BranchedKStream,
    Function,
    KGroupedStream,
    KStream,
    KTable,
    StreamsBuilder,
    Topology,
)

__all__ = [
    "BranchedKStream",
    "Function",
    "KGroupedStream",
    "KStream",
    "KTable",
    "ManifestError",
    "Problem",
    "Serde",
    "Serdes",
    "StreamAppError",
    "StreamsBuilder",
    "Topology",
    "TopologyError",
]
