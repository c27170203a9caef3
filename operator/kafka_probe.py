"""Partition counts of an app's input topics, read from the brokers (a thin confluent-kafka adapter).

Scaling needs one number per topic; this module is the only place the operator talks to Kafka, so
tests replace it with a dict and the reconciler stays pure. Topics that do not exist yet are left
out (Spark waits for them); brokers that do not answer raise :class:`errors.KafkaProbeError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from streamapp.operator import errors

__all__ = ["AdminProbe", "Probe"]


class Probe(Protocol):
    def partitions(self, bootstrap: str, topics: Sequence[str]) -> dict[str, int]: ...


class AdminProbe:
    """Asks the brokers through confluent-kafka's AdminClient (a metadata request, no consumer group)."""

    def __init__(self, *, timeout: float = 5.0) -> None:
        self.timeout = timeout

    def partitions(self, bootstrap: str, topics: Sequence[str]) -> dict[str, int]:
        from confluent_kafka import KafkaException  # noqa: PLC0415 - only the live probe needs it

        from streamapp.runtime.kafka import admin  # noqa: PLC0415

        try:
            return admin.partition_counts(bootstrap, topics, timeout=self.timeout)
        except KafkaException as exc:
            raise errors.KafkaProbeError(
                f"Kafka at {bootstrap} did not answer a metadata request for {', '.join(topics)}: {exc}",
                delay=30,
            ) from exc
