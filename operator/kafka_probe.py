"""Partition counts of an app's input topics, read from the brokers (a thin confluent-kafka adapter).

Scaling needs one number per topic, and the status wants the app's lag, throughput and last batch,
which its driver commits to the app's consumer group (:mod:`streamapp.runtime.kafka.progress`).
This module is the only place the operator talks to Kafka, so tests replace it with a dict and the
reconciler stays pure. Topics that do not exist yet are left out (Spark waits for them); brokers
that do not answer raise :class:`errors.KafkaProbeError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Protocol

from streamapp.operator import errors

__all__ = ["AdminProbe", "Probe", "Standing"]


@dataclasses.dataclass(frozen=True)
class Standing:
    """Where the app's last committed micro-batch left it in its input topics."""

    lag: int  # records between the committed offsets and the ends of the input partitions
    batch_id: int | None = None
    time: str | None = None  # when that batch ran (RFC 3339)
    rate: float | None = None  # input records per second around then
    by: str | None = None  # the driver Pod that ran that batch, when it said
    end: int | None = None  # the input partitions' end offsets added up (records ever written)


class Probe(Protocol):
    """``config``: librdkafka settings of the app's connection (TLS, SASL; see :mod:`kafka_auth`)."""

    def partitions(
        self, bootstrap: str, topics: Sequence[str], *, config: Mapping[str, str] | None = None
    ) -> dict[str, int]: ...

    def standing(
        self, bootstrap: str, group: str, topics: Sequence[str], *, config: Mapping[str, str] | None = None
    ) -> Standing | None:
        """None: the app never committed progress (its driver has not finished a batch yet)."""
        ...


class AdminProbe:
    """Asks the brokers through confluent-kafka's AdminClient (a metadata request, no consumer group)."""

    def __init__(self, *, timeout: float = 5.0) -> None:
        self.timeout = timeout

    def partitions(
        self, bootstrap: str, topics: Sequence[str], *, config: Mapping[str, str] | None = None
    ) -> dict[str, int]:
        from confluent_kafka import KafkaException  # noqa: PLC0415 - only the live probe needs it

        from streamapp.runtime.kafka import admin  # noqa: PLC0415

        try:
            return admin.partition_counts(bootstrap, topics, timeout=self.timeout, client_config=config)
        except KafkaException as exc:
            raise errors.KafkaProbeError(
                f"Kafka at {bootstrap} did not answer a metadata request for {', '.join(topics)}: {exc}",
                delay=30,
            ) from exc

    def standing(
        self, bootstrap: str, group: str, topics: Sequence[str], *, config: Mapping[str, str] | None = None
    ) -> Standing | None:
        from confluent_kafka import KafkaException  # noqa: PLC0415

        from streamapp.runtime.kafka import progress  # noqa: PLC0415

        try:
            found = progress.standing(bootstrap, group, topics, config=config, timeout=self.timeout)
        except (KafkaException, TimeoutError) as exc:
            raise errors.KafkaProbeError(
                f"Kafka at {bootstrap} did not give the offsets of consumer group {group}: {exc}", delay=30
            ) from exc
        if found is None:
            return None
        return Standing(
            lag=found.lag,
            batch_id=found.batch_id,
            time=found.time,
            rate=found.rate,
            by=found.by,
            end=found.end,
        )
