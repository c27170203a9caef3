"""The StreamApp manifest: schema, loading with path-named problems, conversion to the graph."""

from streamapp.runtime.manifest.convert import (
    build_topology,
    load_manifest,
    to_manifest_yaml,
    validate_manifest,
)
from streamapp.runtime.manifest.models import StreamApp, StreamAppSpec, TopologySpec

__all__ = [
    "StreamApp",
    "StreamAppSpec",
    "TopologySpec",
    "build_topology",
    "load_manifest",
    "to_manifest_yaml",
    "validate_manifest",
]
