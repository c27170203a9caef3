"""Generate the StreamApp CRD from the pydantic models, so schema, validator and docs never drift.

Run ``python -m streamapp.operator._crdgen`` (``make crds``): it writes ``crds/`` and the chart's copy
(``charts/streamapp-operator/crds/``); CI regenerates and fails on a diff.
Pydantic's JSON schema is made structural for Kubernetes: references inlined, optional fields
unwrapped, and fields that accept several shapes (a serde name or object, an expression or a
function reference) kept as ``x-kubernetes-preserve-unknown-fields`` — the operator validates them
with the same models and reports the field path.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import yaml

from streamapp.operator import models as status_models
from streamapp.runtime.manifest import models

__all__ = ["CHART_COPY", "GROUP", "KIND", "OUTPUT", "PLURAL", "crd", "main", "render"]

GROUP, VERSION, KIND, PLURAL, SHORT = (
    status_models.GROUP,
    status_models.VERSION,
    status_models.KIND,
    status_models.PLURAL,
    status_models.SHORT_NAME,
)
OUTPUT = pathlib.Path("crds/streamapp.io_streamapps.yaml")
CHART_COPY = pathlib.Path("charts/streamapp-operator/crds/streamapp.io_streamapps.yaml")
#: `kubectl scale sapp/x --replicas=N` pins the executor count; the scale status shows the ready ones.
SCALE = {
    "specReplicasPath": ".spec.deployment.executors.replicas",
    "statusReplicasPath": ".status.executors.ready",
}
_DROP = {"title", "default"}


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _structural(
            {**defs[node["$ref"].split("/")[-1]], **{k: v for k, v in node.items() if k != "$ref"}}, defs
        )
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        extra = {k: v for k, v in node.items() if k not in ("anyOf", *_DROP)}
        if len(options) == 1:
            return _structural({**options[0], **extra}, defs)
        return {
            "x-kubernetes-preserve-unknown-fields": True,
            **{k: v for k, v in extra.items() if k == "description"},
        }
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP or key == "$defs":
            continue
        if key == "const":
            out["enum"] = [value]
            out.setdefault("type", "string")
        elif key == "properties":
            out[key] = {name: _structural(sub, defs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _structural(value, defs)
        else:
            out[key] = value
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    if "additionalProperties" in out and out["additionalProperties"] is False:
        del out["additionalProperties"]
    return out


def _schema(model: type[Any]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True)
    return _structural(raw, raw.get("$defs", {}))  # type: ignore[no-any-return]


def crd() -> dict[str, Any]:
    columns = [
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Executors", "type": "integer", "jsonPath": ".status.executors.ready"},
        {"name": "Lag", "type": "integer", "jsonPath": ".status.lag"},
        {
            "name": "Desired",
            "type": "integer",
            "priority": 1,
            "jsonPath": ".status.executors.desired",
            "description": "Executors the operator asked for (kubectl get -o wide).",
        },
        {"name": "Revision", "type": "string", "priority": 1, "jsonPath": ".status.currentRevision"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    spec = _schema(models.StreamAppSpec)
    spec["description"] = "What the app processes and how it runs."
    status = _schema(status_models.StreamAppStatus)
    status["description"] = "What the operator observed."
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "plural": PLURAL,
                "singular": "streamapp",
                "shortNames": [SHORT],
                "listKind": f"{KIND}List",
                "categories": ["streamapp"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}, "scale": SCALE},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "A Kafka Streams-style app, run on Spark by the operator.",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string", "description": "streamapp.io/v1alpha1"},
                                "kind": {"type": "string", "description": "StreamApp"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                        }
                    },
                }
            ],
        },
    }


def render() -> str:
    header = "# Generated by `make crds` (python -m streamapp.operator._crdgen) from the pydantic models.\n"
    return (
        header + "# Do not edit: change the models and regenerate.\n" + yaml.safe_dump(crd(), sort_keys=False)
    )


def main(argv: list[str] | None = None) -> int:
    """Write the CRD to the given paths (default: ``crds/`` and the chart's copy, from the checkout)."""
    targets = [pathlib.Path(a) for a in (sys.argv[1:] if argv is None else argv)] or [OUTPUT, CHART_COPY]
    text = render()
    for out in targets:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
