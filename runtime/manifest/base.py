"""The base of every manifest and status model: camelCase in YAML, snake_case in Python, strict."""

from __future__ import annotations

import pydantic
from pydantic import JsonValue, alias_generators

__all__ = ["CamelModel", "cel_rules"]


class CamelModel(pydantic.BaseModel):
    """Unknown fields are errors (a typo never passes silently); aliases follow Kubernetes' style."""

    model_config = pydantic.ConfigDict(
        extra="forbid", populate_by_name=True, alias_generator=alias_generators.to_camel
    )


def cel_rules(*rules: tuple[str, str]) -> pydantic.ConfigDict:
    """A model's checks again as CEL rules in the CRD, so the API server rejects what they reject."""
    cel: list[JsonValue] = [{"rule": rule, "message": message} for rule, message in rules]
    return pydantic.ConfigDict(**CamelModel.model_config, json_schema_extra={"x-kubernetes-validations": cel})
