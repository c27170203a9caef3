"""The runtime's errors, one tree, so callers catch what they can act on.

    StreamAppError
    ├── ManifestError     a manifest or topology is invalid; carries every Problem found
    └── TopologyError     a builder call cannot form a valid graph (e.g. a lambda as user logic)

The embedded components have their own small tree (:mod:`streamapp.runtime.embedded.errors`).
"""

from __future__ import annotations

import dataclasses

__all__ = ["ManifestError", "Problem", "StreamAppError", "TopologyError"]


class StreamAppError(Exception):
    """Root of the runtime's errors."""


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with a manifest, named by its path (``spec.topology.streams[0].steps[2]``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ManifestError(StreamAppError):
    """The manifest is invalid; ``problems`` lists everything found, not just the first."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class TopologyError(StreamAppError):
    """A builder call cannot form a valid topology."""
