"""The base of every manifest and status model: camelCase in YAML, snake_case in Python, strict."""

from __future__ import annotations

import pydantic
from pydantic import alias_generators

__all__ = ["CamelModel"]


class CamelModel(pydantic.BaseModel):
    """Unknown fields are errors (a typo never passes silently); aliases follow Kubernetes' style."""

    model_config = pydantic.ConfigDict(
        extra="forbid", populate_by_name=True, alias_generator=alias_generators.to_camel
    )
