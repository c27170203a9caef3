"""The StreamApp manifest: schema, loading with path-named problems, conversion to and from the graph.

``models`` is the schema (pydantic; with ``topology_spec`` and ``deployment``), ``loader`` loads and
validates, ``convert`` builds the graph (manifest → graph), ``emit`` writes a graph back out as YAML
and ``schema`` gives the structural OpenAPI schema for the CRD.
"""

from streamapp.runtime.manifest.convert import build_topology
from streamapp.runtime.manifest.emit import to_manifest_yaml
from streamapp.runtime.manifest.loader import load_manifest, validate_manifest
from streamapp.runtime.manifest.models import StreamApp, StreamAppSpec
from streamapp.runtime.manifest.schema import openapi_schema
from streamapp.runtime.manifest.topology_spec import TopologySpec

__all__ = [
    "StreamApp",
    "StreamAppSpec",
    "TopologySpec",
    "build_topology",
    "load_manifest",
    "openapi_schema",
    "to_manifest_yaml",
    "validate_manifest",
]
