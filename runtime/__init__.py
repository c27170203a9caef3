"""StreamApp runtime: Kafka Streams semantics on Apache Spark.

The public surface is small; everything else is internal. Importing it never imports pyspark:
``StreamApp(topology_or_manifest, StreamsConfig(...)).start()`` starts Spark only when called.

The names below load on first use: a Python process that needs one module of the runtime (each
pre-init process Spark starts per stateful operator: ``spark.stateful.blob_processor``) does not
pay for the topology builder and its SQL parser (0.2 s a process).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: Each module's public names (loaded by :func:`__getattr__`); ``ProcessorRecord`` is its ``Record``.
_MODULES = {
    "app": ("StreamApp", "StreamsConfig"),
    "errors": ("ManifestError", "Problem", "StreamAppError", "TopologyError"),
    "processor": ("Processor", "ProcessorContext", "ProcessorRecord", "Timer"),
    "serdes": ("Serde", "Serdes"),
    "topology": (
        "BranchedKStream",
        "Function",
        "KGroupedStream",
        "KStream",
        "KTable",
        "StreamsBuilder",
        "Topology",
    ),
}
_PUBLIC = {name: module for module, names in _MODULES.items() for name in names}

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


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_PUBLIC[name]}")
    value = getattr(module, "Record" if name == "ProcessorRecord" else name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
