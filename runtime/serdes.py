"""Serde declarations, compatible with Kafka's own serializers (no Spark here).

A serde names how a key or value is written on the wire: ``string`` (UTF-8), ``bytes``, ``int``,
``long`` and ``double`` (Kafka's big-endian encodings), ``json`` (a declared schema, as a Spark
DDL string such as ``"amount DOUBLE, name STRING"``, gives struct columns; without one the value
is the raw JSON string). The Spark layer turns these into column expressions.
"""

from __future__ import annotations

import dataclasses

__all__ = ["SERDE_NAMES", "Serde", "Serdes"]

SERDE_NAMES = ("string", "bytes", "int", "long", "double", "json")


@dataclasses.dataclass(frozen=True)
class Serde:
    name: str
    schema: str | None = None

    def __post_init__(self) -> None:
        if self.name not in SERDE_NAMES:
            raise ValueError(f"unknown serde {self.name!r}; expected one of {', '.join(SERDE_NAMES)}")
        if self.schema is not None and self.name != "json":
            raise ValueError(f"only the json serde takes a schema, not {self.name!r}")


class Serdes:
    """Kafka Streams-style constructors: ``Serdes.String()``, ``Serdes.Json("a INT")``."""

    @staticmethod
    def String() -> Serde:
        return Serde("string")

    @staticmethod
    def Bytes() -> Serde:
        return Serde("bytes")

    @staticmethod
    def Integer() -> Serde:
        return Serde("int")

    @staticmethod
    def Long() -> Serde:
        return Serde("long")

    @staticmethod
    def Double() -> Serde:
        return Serde("double")

    @staticmethod
    def Json(schema: str | None = None) -> Serde:
        return Serde("json", schema)
