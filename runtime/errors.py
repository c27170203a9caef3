"""The runtime's errors, one tree, so callers catch what they can act on.

    StreamAppError
    ├── KafkaCredentialsError  the Secret material spec.kafka.tls/sasl names is missing or unusable;
    │                          says which field, Secret and key, and where it was looked for
    ├── ManifestError     a manifest is invalid; ``problems`` lists every Problem found
    └── TopologyError     a graph cannot be built or is invalid (a lambda as user logic, a duplicate
                          node name, a bad expression); ``problems`` when there are several

A :class:`Problem` names where (a manifest path such as ``spec.topology.streams[0].steps[2].filter``,
or a node name for graphs built in Python) and what is wrong. The embedded components have their own
small tree (:mod:`streamapp.runtime.embedded.errors`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

__all__ = ["KafkaCredentialsError", "ManifestError", "Problem", "StreamAppError", "TopologyError"]


class StreamAppError(Exception):
    """Root of the runtime's errors."""


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with a manifest, named by its path (``spec.topology.streams[0].steps[2]``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class KafkaCredentialsError(StreamAppError):
    """Kafka credentials the manifest refers to are missing or unusable; the message names the field."""


class ManifestError(StreamAppError):
    """The manifest is invalid; ``problems`` lists everything found, not just the first."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in problems))


class TopologyError(StreamAppError):
    """A builder call cannot form a valid topology; ``problems`` lists them when there are several."""

    def __init__(self, message: str, *, problems: Sequence[Problem] = ()) -> None:
        self.problems = list(problems)
        super().__init__(message)
