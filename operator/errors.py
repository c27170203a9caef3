"""The operator's errors, one tree, each mapped to what kopf should do with it.

    OperatorError
    ├── InvalidSpecError   the spec cannot run as written; carries every Problem by field path
    │                      → kopf.PermanentError: not retried until the spec changes
    └── RetryableError     the world is not ready yet; carries the delay before the next try
        ├── ClusterError   the API server refused or failed a call (conflict, timeout, 5xx)
        ├── KafkaProbeError the brokers did not answer a metadata request
        ├── KafkaSecretError a Secret (or key) spec.kafka.tls/sasl names is missing or unusable
        ├── DriverStopping the previous driver is still terminating (one driver per checkpoint)
        └── DriverBackOff  a failed driver's replacement waits out the crash-loop back-off
                           → kopf.TemporaryError(delay=…)

Handlers catch these at the boundary (:func:`to_kopf`) so inner modules never import kopf.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamapp.runtime import errors as runtime_errors

__all__ = [
    "ClusterError",
    "DriverBackOff",
    "DriverStopping",
    "InvalidSpecError",
    "KafkaProbeError",
    "KafkaSecretError",
    "OperatorError",
    "RetryableError",
]


class OperatorError(Exception):
    """Root of the operator's errors."""


class InvalidSpecError(OperatorError):
    """The spec is invalid; ``problems`` names each field (``spec.topology.streams[0].steps[1]``)."""

    def __init__(self, problems: Sequence[runtime_errors.Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


class RetryableError(OperatorError):
    """Worth retrying after ``delay`` seconds."""

    def __init__(self, message: str, *, delay: float = 10.0) -> None:
        self.delay = delay
        super().__init__(message)


class ClusterError(RetryableError):
    """A Kubernetes API call failed in a way that may pass."""


class KafkaProbeError(RetryableError):
    """The Kafka brokers did not answer."""


class KafkaSecretError(RetryableError):
    """A Secret spec.kafka.tls/sasl refers to is missing or unusable; names field, Secret and key."""


class DriverStopping(RetryableError):
    """The old driver Pod still exists; the new one waits so two never share a checkpoint."""


class DriverBackOff(RetryableError):
    """The driver failed again: its replacement waits out the crash-loop back-off."""
