"""The CRD schema comes from the models: structural, described, and strict where it can be.

The checks read the CRD that ships (``crds/``, written by ``make crds``), not a schema computed on
the side: a second converter once drifted from the one tested here, and the shipped CRD said
``x-kubernetes-preserve-unknown-fields`` for ``grace`` instead of int-or-string."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pydantic
import yaml

from streamapp.runtime import manifest
from streamapp.runtime.manifest import models, topology_spec

HERE = pathlib.Path(__file__).parent
SHIPPED = HERE.parents[2] / "crds" / "streamapp.io_streamapps.yaml"


def _shipped_spec() -> dict[str, Any]:
    crd = yaml.safe_load(SHIPPED.read_text())
    spec: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def _walk(node: Any, path: str = "spec") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for name, sub in node.get("properties", {}).items():
            yield from _walk(sub, f"{path}.{name}")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                yield from _walk(node[key], f"{path}[]")


def test_openapi_schema_is_structural() -> None:
    schema = _shipped_spec()
    for path, node in _walk(schema):
        assert not {"$ref", "anyOf", "oneOf", "allOf", "$defs"} & set(node), path
        assert (
            "type" in node
            or node.get("x-kubernetes-preserve-unknown-fields")
            or node.get("x-kubernetes-int-or-string")
        ), path
    assert schema["required"] == ["topology"]


def test_the_shipped_crd_is_the_schema_of_the_models() -> None:
    assert _shipped_spec() == {**manifest.openapi_schema(), "description": _shipped_spec()["description"]}


def test_durations_are_int_or_string() -> None:
    durations = {
        path.split(".", 1)[1]
        for path, node in _walk(_shipped_spec())
        if node.get("x-kubernetes-int-or-string")
    }
    steps = "topology.streams[].steps[].windowedBy"
    joins = {
        f"topology.streams[].steps[].{op}.windows.{f}"
        for op in ("join", "leftJoin", "outerJoin")
        for f in ("timeDifference", "before", "after", "grace")
    }
    assert (
        durations
        == {
            f"{steps}.{f}"
            for f in ("tumbling", "sliding", "session", "grace", "hopping.size", "hopping.advance")
        }
        | joins
    )


def test_every_field_is_described_for_kubectl_explain() -> None:
    undescribed = [
        path
        for path, node in _walk(_shipped_spec())
        if "description" not in node and not path.endswith("[]")  # list items: their field says it
    ]
    assert undescribed == []  # the CRD generator describes spec itself


def test_only_fields_that_take_two_shapes_preserve_unknown_fields() -> None:
    loose = {
        path.split(".")[-1].removesuffix("[]")
        for path, node in _walk(_shipped_spec())
        if node.get("x-kubernetes-preserve-unknown-fields")
    }
    # A serde name or {name, schema}; an expression or {function}; a topic or {topic, ...}.
    assert loose == {
        "keySerde",
        "valueSerde",
        "filter",
        "filterNot",
        "mapValues",
        "flatMap",
        "flatMapValues",
        "selectKey",
        "peek",
        "groupBy",
        "key",
        "value",
        "predicate",
        "joiner",
        "foreignKey",
        "to",  # its partitioner is inside: the operator checks it with the models
    }


def test_every_model_field_has_a_description() -> None:
    missing = [
        f"{model.__name__}.{name}"
        for module in (models, topology_spec)
        for model in vars(module).values()
        if isinstance(model, type)
        and issubclass(model, pydantic.BaseModel)
        and model.__module__ == module.__name__
        for name, field in model.model_fields.items()
        if not field.description
    ]
    assert missing == []


def test_load_manifest_accepts_a_path_or_the_text() -> None:
    path = HERE / "valid" / "named.yaml"
    assert manifest.load_manifest(str(path)) == manifest.load_manifest(path.read_text())
    app = manifest.load_manifest(path)
    assert app.spec.kafka is not None and app.spec.kafka.sasl is not None
    assert app.spec.kafka.sasl.password.name == "kafka-user"
