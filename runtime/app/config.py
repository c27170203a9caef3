"""How an app is configured (:class:`StreamsConfig`), where it is in its life (:class:`State`), and
the topology or manifest it runs (:func:`load`). No Spark here: importing it never imports pyspark.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import pathlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streamapp.runtime import errors
from streamapp.runtime.topology import graph

if TYPE_CHECKING:
    from streamapp.runtime.kafka import security
    from streamapp.runtime.manifest import models

__all__ = ["State", "StreamsConfig", "load"]


class State(enum.Enum):
    """Where an app is in its life (Kafka Streams' ``KafkaStreams.State`` names)."""

    CREATED = "CREATED"
    STARTING = "STARTING"  # Spark and the query are starting
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    ERROR = "ERROR"


@dataclasses.dataclass(frozen=True)
class StreamsConfig:
    """How to run an app. Every field left ``None`` comes from the manifest, else the default.

    - ``bootstrap_servers``: Kafka (default ``spec.kafka.bootstrapServers``; required).
    - ``checkpoint_location``: a folder or Hadoop URI (default ``spec.checkpointLocation``, else a
      fresh temporary folder removed when the app stops: the input is read from the beginning).
    - ``application_id``: the query's name and the progress group's (default the topology's
      ``applicationId``, else ``metadata.name``); ``namespace`` adds to the group name.
    - ``master``: Spark master (default ``local[2]``; with the real-time trigger one local task slot
      per input partition); ``spark_conf``, ``driver_memory`` (default 2g).
    - ``state_partitions``: fixed when the checkpoint is created (default ``spec.statePartitions``,
      else the largest input partition count, at most a local master's task slots; the tasks stay
      one per input partition).
    - ``starting_offsets`` (``earliest``/``latest``) or ``starting_timestamp`` (epoch ms): where a
      new checkpoint starts reading.
    - ``max_offsets_per_trigger``: bound a micro-batch's input (default: unbounded; 500,000 under
      ``exactly_once_v2``, whose batch must commit within the transactions' timeout).
    - ``drain``: process what the input topics hold, then stop (Spark's available-now trigger).
    - ``stop_when_idle``: stop after the query has waited this many seconds for input with nothing
      to do (also when it never runs a batch: a resumed query with no new input).
    - ``processing_guarantee``: ``at_least_once`` or ``exactly_once_v2`` (default
      ``spec.processingGuarantee``, else ``at_least_once``): with ``exactly_once_v2`` each micro-batch
      is written in Kafka transactions, once, however often it is replayed (read it ``read_committed``).
    - ``commit_interval_ms``: start a micro-batch at most this often (Kafka Streams'
      ``commit.interval.ms``; default ``spec.commitIntervalMs``, else back to back).
    - ``credentials``: how to connect (default: the material ``spec.kafka.tls``/``sasl`` names,
      from the ``STREAMAPP_KAFKA_*`` variables).
    - ``progress_group``: the consumer group progress is committed to (default
      ``streamapp.<namespace>.<application_id>``).
    - ``instance``: who runs the query (a driver Pod's name), recorded with each committed batch so
      that the operator tells a new driver's first batch from its predecessor's last.
    """

    bootstrap_servers: str | None = None
    checkpoint_location: str | None = None
    application_id: str | None = None
    namespace: str | None = None
    master: str | None = None
    spark_conf: Mapping[str, str] | None = None
    driver_memory: str | None = None
    state_partitions: int | None = None
    starting_offsets: str | None = None
    starting_timestamp: int | None = None
    max_offsets_per_trigger: int | None = None
    drain: bool = False
    stop_when_idle: float | None = None
    processing_guarantee: str | None = None
    commit_interval_ms: int | None = None
    credentials: security.Credentials | None = None
    progress_group: str | None = None
    instance: str | None = None

    def __post_init__(self) -> None:
        if self.starting_offsets not in (None, "earliest", "latest"):
            raise errors.StreamAppError(
                f"starting_offsets must be earliest or latest, not {self.starting_offsets!r}"
            )
        if self.starting_offsets is not None and self.starting_timestamp is not None:
            raise errors.StreamAppError("give starting_offsets or starting_timestamp, not both")
        for name in ("state_partitions", "max_offsets_per_trigger", "commit_interval_ms"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise errors.StreamAppError(f"{name} must be at least 1, not {value}")
        if self.stop_when_idle is not None and self.stop_when_idle <= 0:
            raise errors.StreamAppError(f"stop_when_idle must be positive, not {self.stop_when_idle}")
        if self.processing_guarantee not in (None, "at_least_once", "exactly_once_v2"):
            raise errors.StreamAppError(
                "processing_guarantee must be at_least_once or exactly_once_v2, "
                f"not {self.processing_guarantee!r}"
            )


def load(app: graph.Topology | models.StreamApp | str | os.PathLike[str]) -> tuple[Any, graph.Topology]:
    """The manifest (None for a topology) and the topology it describes."""
    # The manifest layer (pydantic, sqlglot) is imported only when a manifest is given.
    from streamapp.runtime.manifest import convert, loader, models  # noqa: PLC0415

    if isinstance(app, graph.Topology):
        return None, app
    if isinstance(app, models.StreamApp):
        return app, convert.build_topology(app)
    loaded = loader.load_manifest(pathlib.Path(app) if isinstance(app, os.PathLike) else app)
    return loaded, convert.build_topology(loaded)
