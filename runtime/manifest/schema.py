"""The manifest's OpenAPI v3 schema in the structural form a Kubernetes CRD requires.

The CRD (``make crds``), ``kubectl explain`` and the API server's validation all come from the
pydantic models through :func:`openapi_schema`, so they cannot drift from what the runtime accepts.
Pydantic's JSON schema is made structural: ``$ref`` inlined, ``Optional`` unwrapped (a CRD field
is optional by not being required, never by ``anyOf`` with null), ``const`` as a one-value enum.
A field that accepts two shapes — a serde name or ``{name, schema}``, an expression or
``{function: ...}`` — cannot be described structurally, so only those keep
``x-kubernetes-preserve-unknown-fields``; the operator validates them with these same models.
Durations (milliseconds or text such as ``10s``) are ``x-kubernetes-int-or-string``.
"""

from __future__ import annotations

from typing import Any

import pydantic

from streamapp.runtime.manifest import models

__all__ = ["openapi_schema"]

_DROP = {"title", "default"}


def _structural(node: Any, defs: dict[str, Any]) -> Any:
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].split("/")[-1]]
        # A field's own description wins over its type's.
        return _structural({**target, **{k: v for k, v in node.items() if k != "$ref"}}, defs)
    if "anyOf" in node or "oneOf" in node:
        alternatives: list[Any] = node.get("anyOf") or node.get("oneOf") or []
        options = [o for o in alternatives if o.get("type") != "null"]
        extra = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf", *_DROP)}
        if len(options) == 1:
            return _structural({**options[0], **extra}, defs)
        if sorted(o.get("type", "") for o in options) == ["integer", "string"]:
            return {"x-kubernetes-int-or-string": True, **_description(extra)}  # durations
        return {"x-kubernetes-preserve-unknown-fields": True, **_description(extra)}
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
    if out.get("additionalProperties") is False:
        del out["additionalProperties"]  # structural schemas reject unknown fields by pruning
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True  # e.g. status, a free-form object
    return out


def _description(extra: dict[str, Any]) -> dict[str, Any]:
    return {"description": extra["description"]} if "description" in extra else {}


def openapi_schema(model: type[pydantic.BaseModel] = models.StreamAppSpec) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of ``model`` (by default ``spec``), camelCase names."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    schema: dict[str, Any] = _structural(raw, raw.get("$defs", {}))
    return schema
