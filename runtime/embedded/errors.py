"""Errors of the embedded components (the local Kafka broker and the JVM artifacts).

EmbeddedError
├── SetupError      a component is missing or could not be downloaded; says what to run
└── BrokerError     the embedded broker failed to start or stop; carries its log tail
"""

from __future__ import annotations

__all__ = ["BrokerError", "EmbeddedError", "SetupError"]


class EmbeddedError(RuntimeError):
    """Root of the embedded components' errors."""


class SetupError(EmbeddedError):
    """A component is missing or could not be obtained; the message says what to run."""


class BrokerError(EmbeddedError):
    """The embedded Kafka broker failed; the message carries the tail of its log."""
