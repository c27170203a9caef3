"""Following a running query: what an app has done (:class:`Progress`), batch by batch.

:class:`Monitor` runs in the app's monitor thread while the query runs: after every micro-batch it
updates the app's :class:`Progress` (records read and written per topic, batches, late, skipped
and dropped records), commits the batch's end offsets to the app's consumer group
(:mod:`streamapp.runtime.kafka.progress`) and calls the progress callbacks; it stops a query that
has waited for input longer than ``stop_when_idle``. When the query ends the runner
(:mod:`.runner`) finishes the app, and :meth:`Monitor.close` gives the last progress.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamapp.runtime.kafka import security
    from streamapp.runtime.spark import execution

__all__ = ["Monitor", "Progress", "ProgressCallback", "reporter"]

_log = logging.getLogger("streamapp.app")


@dataclasses.dataclass(frozen=True)
class Progress:
    """What an app has done since it started (a snapshot; :attr:`StreamApp.progress`)."""

    batches: int = 0  # micro-batches that ran
    records_read: Mapping[str, int] = dataclasses.field(default_factory=dict)  # per input topic
    records_written: Mapping[str, int] = dataclasses.field(default_factory=dict)  # per output topic
    late: int = 0  # record-window contributions dropped beyond grace
    late_by_node: Mapping[str, int] = dataclasses.field(default_factory=dict)  # per windowed node
    skipped: int = 0  # unreadable records a source's deserializationErrors: skip dropped
    dead_lettered: int = 0  # unreadable records a source's deserializationErrors: deadLetter wrote
    #: both per source topic
    skipped_by_topic: Mapping[str, int] = dataclasses.field(default_factory=dict)
    dead_lettered_by_topic: Mapping[str, int] = dataclasses.field(default_factory=dict)
    #: records dropped as Kafka Streams drops them (its dropped-records metric): a null key into
    #: a key-dependent step (grouping, a table), a null value into a sliding-window aggregation;
    #: in all and per node
    dropped: int = 0
    dropped_by_node: Mapping[str, int] = dataclasses.field(default_factory=dict)
    last_batch_id: int | None = None
    elapsed: float = 0.0  # seconds since start()
    #: counts per topic are not known for the real-time trigger (it reports no observations)
    counted: bool = True


ProgressCallback = Callable[[Progress, Mapping[str, Any]], None]


def reporter(
    bootstrap: str,
    credentials: security.Credentials,
    *,
    name: str,
    namespace: str | None,
    group: str | None,
    instance: str | None,
) -> Any:
    """The :class:`streamapp.runtime.kafka.progress.Reporter` committing app ``name``'s progress to
    ``group`` (default ``streamapp.<namespace>.<name>``), as driver ``instance``."""
    from streamapp.runtime.kafka import progress  # noqa: PLC0415

    group = group or progress.group_id(name, namespace)
    return progress.Reporter(bootstrap, group, config=credentials.librdkafka(), instance=instance)


class Monitor:
    """Follows one query (:meth:`follow`) and keeps its app's :attr:`progress` (see the module)."""

    def __init__(
        self,
        name: str,
        run: execution.Execution,
        reporter: Any,
        *,
        callbacks: Sequence[ProgressCallback],
        stop_when_idle: float | None,
        started: float,
        progress: Progress,
    ) -> None:
        self.name, self.run, self.reporter = name, run, reporter
        self.callbacks, self.stop_when_idle, self.started = callbacks, stop_when_idle, started
        self.progress = progress
        #: the query has completed a micro-batch, or looked for input and found none
        self.keeping_up = False

    def follow(self, stop: Callable[[], object]) -> None:
        """Follow the query until it terminates; ``stop()`` stops the app once it has been idle
        for ``stop_when_idle`` seconds."""
        run = self.run
        last = ("", -1)  # the timestamp and batch id of the last progress report read
        #: since when the query has been waiting for input with nothing to do; None while it starts,
        #: runs a batch or has just read records (a resumed query with no new input runs no batch)
        idle_since: float | None = None
        try:
            while True:
                active = run.query.isActive
                now = time.monotonic()
                for raw, written in run.reports_after(last):
                    last = (str(raw["timestamp"]), int(raw["batchId"]))
                    # Idle reports (no batch ran) carry no addBatch phase: nothing to count.
                    ran = "addBatch" in (raw.get("durationMs") or {})
                    if run.metrics is not None:
                        run.metrics.feed.progress(raw, written=written)
                    if not ran:
                        continue
                    self._record(raw, written)
                    self.keeping_up = True
                    if raw.get("numInputRows"):
                        idle_since = None
                idleness = _idleness(run.query) if active else "waiting"
                if active and idleness == "waiting":
                    self.keeping_up = True
                if idleness == "working":
                    idle_since = None
                elif idleness == "waiting" and idle_since is None:
                    idle_since = now
                if not active:
                    break
                self._commit(None)  # a commit the throttle held back
                idle = self.stop_when_idle
                if idle is not None and idle_since is not None and time.monotonic() - idle_since > idle:
                    stop()
                try:
                    run.query.awaitTermination(0.5)
                except Exception:  # noqa: BLE001 - the query failed: the next round sees it inactive
                    continue
        except Exception as exc:  # noqa: BLE001 - the monitor must always finish the app
            _log.warning("%s: following the query failed: %s", self.name, exc)

    def close(self) -> Progress:
        """The query has ended: the last progress, committed (if the throttle held it back)."""
        self.progress = dataclasses.replace(
            self.progress,
            late=self.run.late_total(),
            late_by_node=self.run.late_by_node(),
            elapsed=time.monotonic() - self.started,
        )
        self.reporter.min_interval = 0
        self._commit(None)  # the last batch, if the throttle held it back
        self.reporter.close()
        return self.progress

    def _record(self, raw: Mapping[str, Any], written: Mapping[str, tuple[int, int | None]] | None) -> None:
        from streamapp.runtime.kafka import progress  # noqa: PLC0415
        from streamapp.runtime.spark import plan  # noqa: PLC0415

        run = self.run
        counts = plan.counted_topics(
            raw.get("observedMetrics") or {},
            run.observed,
            sources=raw.get("sources") or (),
            read_sources=run.read_sources,
            written=written,
        )
        old = self.progress
        self.progress = dataclasses.replace(
            old,
            batches=old.batches + 1,
            records_read=_add(old.records_read, counts["read"]),
            records_written=_add(old.records_written, counts["written"]),
            skipped=old.skipped + sum(counts["skipped"].values()),
            dead_lettered=old.dead_lettered + sum(counts["dead_lettered"].values()),
            skipped_by_topic=_add(old.skipped_by_topic, counts["skipped"]),
            dead_lettered_by_topic=_add(old.dead_lettered_by_topic, counts["dead_lettered"]),
            dropped=old.dropped + sum(counts["dropped"].values()),
            dropped_by_node=_add(old.dropped_by_node, counts["dropped"]),
            late=run.late_total(),
            late_by_node=run.late_by_node(),
            last_batch_id=int(raw["batchId"]),
            elapsed=time.monotonic() - self.started,
        )
        self._commit(progress.from_spark_progress(raw))
        for callback in self.callbacks:
            try:
                callback(self.progress, raw)
            except Exception as exc:  # noqa: BLE001 - a callback never stops the app
                _log.warning("%s: progress callback failed: %s", self.name, exc)

    def _commit(self, batch: Any) -> None:
        """Hand a batch's progress to the reporter; a failure is logged once, never raised: the
        checkpoint, not the group, is where processing resumes."""
        from confluent_kafka import KafkaException  # noqa: PLC0415

        try:
            self.reporter.report(batch)
        except (KafkaException, TimeoutError) as exc:
            if not self.reporter.warned:
                _log.warning(
                    "progress of %s could not be committed to consumer group %r (lag in status and "
                    "Kafka tools stays stale): %s",
                    self.name,
                    self.reporter.group,
                    exc,
                )
                self.reporter.warned = True


def _idleness(query: Any) -> str:
    """What Spark's status says about the query's input: ``"working"``, ``"waiting"`` or ``"polling"``.

    ``waiting``: it looked for input and found none. ``polling``: a trigger is asking the sources
    for their offsets — idle if it was waiting before (a 1 s trigger polling several topics on a
    loaded machine spends much of each second so, and counting that as work kept an idle query
    running forever), not yet idle if it never found the input empty (before its first batch a
    slow offset fetch is not idleness). Starting up and processing new data are work.
    """
    try:
        status = query.status
    except Exception:  # noqa: BLE001 - the query is ending: not idle
        return "working"
    message = str(status.get("message", ""))
    if status.get("isDataAvailable", True) or message.startswith(("Initializing", "Processing")):
        return "working"
    return "waiting" if message.startswith("Waiting") else "polling"


def _add(total: Mapping[str, int], more: Mapping[str, int]) -> dict[str, int]:
    merged = dict(total)
    for topic, n in more.items():
        merged[topic] = merged.get(topic, 0) + n
    return merged
