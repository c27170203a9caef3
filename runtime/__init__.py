"""StreamApp runtime: Kafka Streams semantics on Apache Spark.

The public surface is small; everything else is internal. Importing it never imports pyspark:
``StreamApp(topology_or_manifest, StreamsConfig(...)).start()`` starts Spark only when called.
"""

from streamapp.runtime.app import StreamApp, StreamsConfig
from streamapp.runtime.errors import ManifestError, Problem, StreamAppError, TopologyError
from streamapp.runtime.processor import Processor, ProcessorContext, Timer
from streamapp.runtime.processor import Record as ProcessorRecord
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
    "Processor",
    "ProcessorContext",
    "ProcessorRecord",
    "Serde",
    "Serdes",
    "StreamApp",
    "StreamAppError",
    "StreamsBuilder",
    "StreamsConfig",
    "Timer",
    "Topology",
    "TopologyError",
]
