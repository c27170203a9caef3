"""The one way to run a topology: ``StreamApp(topology_or_manifest, config).start()``.

Kafka Streams runs a topology with ``new KafkaStreams(topology, props).start()``; this is the
same for StreamApp. ``streamapp run``, the in-cluster driver, the demo, the benchmarks and the
tests all go through :class:`StreamApp` rather than wiring session, checkpoint, source and sink
themselves (those live once, in :mod:`streamapp.runtime.spark.execution`, imported only when an
app starts: importing this module never imports pyspark).

Life cycle, with Kafka Streams' state names::

    CREATED ──start()──► STARTING ──► RUNNING ──stop()──► PENDING_SHUTDOWN ──► NOT_RUNNING
                            │  (the input drained, with ``drain``)  ──────────► NOT_RUNNING
                            └──── the query failed ─────────────────────────► ERROR

:meth:`StreamApp.stop` is the only place that stops the query. A monitor thread follows the
query: after every micro-batch it updates :attr:`StreamApp.progress` (records read and written
per topic, batches, late and skipped records), commits the batch's end offsets to the app's
consumer group (:mod:`streamapp.runtime.kafka.progress`), and calls the progress callbacks.
Spark's own ``StreamingQueryListener`` objects (metrics exporters) are attached with
:meth:`StreamApp.add_query_listener`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import logging
import os
import pathlib
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from streamapp.runtime import errors
from streamapp.runtime.topology import graph

if TYPE_CHECKING:
    from streamapp.runtime.kafka import security
    from streamapp.runtime.manifest import models
    from streamapp.runtime.spark import execution

__all__ = ["Progress", "State", "StreamApp", "StreamsConfig"]

_log = logging.getLogger("streamapp.app")


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


def _load(app: graph.Topology | models.StreamApp | str | os.PathLike[str]) -> tuple[Any, graph.Topology]:
    # The manifest layer (pydantic, sqlglot) is imported only when a manifest is given.
    from streamapp.runtime.manifest import convert, models  # noqa: PLC0415

    if isinstance(app, graph.Topology):
        return None, app
    if isinstance(app, models.StreamApp):
        return app, convert.build_topology(app)
    loaded = convert.load_manifest(pathlib.Path(app) if isinstance(app, os.PathLike) else app)
    return loaded, convert.build_topology(loaded)


class StreamApp:
    """A topology (or a ``StreamApp`` manifest: the model, YAML text or a path) and how to run it.

    ``spark``: run in this existing SparkSession (tests share one) instead of building one; it is
    left running at :meth:`stop`. Nothing starts until :meth:`start`.
    """

    def __init__(
        self,
        app: graph.Topology | models.StreamApp | str | os.PathLike[str],
        config: StreamsConfig | None = None,
        *,
        spark: Any = None,
    ) -> None:
        self.manifest, self.topology = _load(app)
        self.config = config or StreamsConfig()
        self._spark = spark
        if spark is not None:
            fixed = [n for n in ("master", "driver_memory") if getattr(self.config, n) is not None]
            if fixed:
                raise errors.StreamAppError(
                    f"{', '.join(fixed)}: set when a session is built, but a running SparkSession was "
                    "given (it keeps its own); leave them out or let StreamApp build the session"
                )
        spec = self.manifest.spec if self.manifest is not None else None
        name = self.config.application_id or self.topology.application_id
        self.application_id: str = (
            name or (self.manifest.metadata.name if self.manifest else None) or "streamapp"
        )
        kafka = spec.kafka if spec is not None else None
        self.bootstrap_servers = self.config.bootstrap_servers or (kafka.bootstrap_servers if kafka else None)
        self.checkpoint_location = self.config.checkpoint_location or (
            spec.checkpoint_location if spec is not None else None
        )
        #: the checkpoint is a fresh temporary folder, removed when the app stops
        self.fresh_checkpoint = self.checkpoint_location is None
        self.processing_guarantee: str = self.config.processing_guarantee or (
            spec.processing_guarantee if spec is not None else "at_least_once"
        )
        #: micro-batches start at most this often (Kafka Streams' commit.interval.ms); None: back to back
        self.commit_interval_ms: int | None = self.config.commit_interval_ms or (
            spec.commit_interval_ms if spec is not None else None
        )
        if self.commit_interval_ms is not None and self.config.drain:
            raise errors.StreamAppError(
                f"commit interval {self.commit_interval_ms} ms: a drain run (Spark's available-now "
                "trigger) runs its batches back to back and cannot space them out; leave out one of "
                "the two (spec.commitIntervalMs / commit_interval_ms, or drain)"
            )
        if self.commit_interval_ms is not None and self.topology.trigger()[0] == "real-time":
            raise errors.StreamAppError(
                f"commit interval {self.commit_interval_ms} ms cannot be combined with latency: low: "
                "the real-time trigger runs no micro-batches to space out"
            )
        #: how :meth:`stop` ended the query (between batches, or a batch interrupted), once stopped
        self.stop_report: Any = None
        self._state = State.CREATED
        self._lock = threading.Lock()
        self._terminated = threading.Event()
        self._query_stopped = threading.Event()
        self._execution: execution.Execution | None = None
        self._monitor: threading.Thread | None = None
        self._error: BaseException | None = None
        self._progress = Progress()
        self._callbacks: list[ProgressCallback] = []
        self._keeping_up = False
        self._listeners: list[Any] = []
        self._started = 0.0
        self._stop_requested = False
        self._finishing = False

    # -- what it is -------------------------------------------------------------------------------

    @property
    def state(self) -> State:
        return self._state

    @property
    def progress(self) -> Progress:
        """Counts so far (updated after each micro-batch, and a last time when the app stops)."""
        if self._state in (State.RUNNING, State.PENDING_SHUTDOWN):
            return dataclasses.replace(self._progress, elapsed=time.monotonic() - self._started)
        return self._progress

    @property
    def keeping_up(self) -> bool:
        """The query has completed a micro-batch, or looked for input and found none."""
        return self._keeping_up

    @property
    def error(self) -> BaseException | None:
        """Why the app is in ERROR (the query's failure), else None."""
        return self._error

    @property
    def trigger(self) -> str:
        """The trigger the query runs with (``micro-batch``, ``real-time``, ``available-now``)."""
        if self._execution is not None:
            return self._execution.trigger.kind
        return "available-now" if self.config.drain else self.topology.trigger()[0]

    @property
    def state_partitions(self) -> int | None:
        """The checkpoint's state partitions once started (None for a stateless topology)."""
        return self._execution.state_partitions if self._execution else None

    def describe(self) -> str:
        return self.topology.describe()

    # -- hooks ----------------------------------------------------------------------------------

    def on_progress(self, callback: ProgressCallback) -> None:
        """Call ``callback(progress, spark_progress)`` after each micro-batch (in the monitor thread)."""
        self._callbacks.append(callback)

    def add_query_listener(self, listener: Any) -> None:
        """Attach a pyspark ``StreamingQueryListener`` to the app's session before the query starts
        (metrics exporters); it is removed when the app stops."""
        if self._state is not State.CREATED:
            raise errors.StreamAppError("add query listeners before start()")
        self._listeners.append(listener)

    # -- life cycle -------------------------------------------------------------------------------

    def start(
        self, before_query: Callable[[], None] | None = None, warm_up: Callable[[], bool] | None = None
    ) -> None:
        """Start Spark and the query, and return (the query runs until :meth:`stop`).

        ``before_query`` is called once Spark is up and the plan compiled, just before the query
        starts: a driver in standby waits there for its fence (see :mod:`.lease`). ``warm_up()``,
        asked once Spark is up, true: the plan first runs once over the last input records into
        a discarding sink, so that the query's first micro-batch finds everything warm (a
        hand-over's new driver, while the running one still holds the fence)."""
        with self._lock:
            if self._state is not State.CREATED:
                raise errors.StreamAppError(f"{self.application_id}: start() in state {self._state.name}")
            self._state = State.STARTING
        try:
            self._start(before_query, warm_up)
        except BaseException:
            if self._execution is not None and self._monitor is None:  # failed after the query started
                with contextlib.suppress(Exception):
                    self._execution.stop_query()
                self._execution.release()
            self._cleanup_checkpoint()
            self._state = State.NOT_RUNNING
            self._terminated.set()
            raise

    def _start(
        self, before_query: Callable[[], None] | None = None, warm_up: Callable[[], bool] | None = None
    ) -> None:
        from streamapp.runtime.kafka import admin, security  # noqa: PLC0415

        if not self.bootstrap_servers:
            raise errors.StreamAppError(
                f"{self.application_id}: no Kafka bootstrap servers: set spec.kafka.bootstrapServers "
                "or StreamsConfig.bootstrap_servers"
            )
        spec = self.manifest.spec if self.manifest is not None else None
        conf = {**dict((spec.spark_conf if spec else None) or {}), **dict(self.config.spark_conf or {})}
        # The real-time trigger runs one long-lived task per input partition, all at once: a local
        # run needs that many task slots (threads; the cores are shared), known once the input is.
        sized_by_input = (
            self.config.master is None and self.topology.trigger()[0] == "real-time" and not self.config.drain
        )
        launch = None
        if self._spark is None and not sized_by_input:
            from streamapp.runtime.spark import session  # noqa: PLC0415

            # Spark's JVM starts (2-3 s, mostly waiting for it) while this thread imports the
            # compiler and looks the input up in Kafka.
            launch = session.Launch.begin(
                app_name=self.application_id,
                master=self.config.master or "local[2]",
                conf=conf,
                driver_memory=self.config.driver_memory or session.DEFAULT_DRIVER_MEMORY,
            )
        try:
            from streamapp.runtime.spark import execution  # noqa: PLC0415 - pyspark: only when an app starts

            credentials = self.config.credentials
            if credentials is None:
                credentials = security.from_env(spec.kafka if spec is not None else None)
            inputs = admin.partition_counts(
                self.bootstrap_servers, self.topology.source_topics(), client_config=credentials.librdkafka()
            )
        except BaseException:
            if launch is not None:
                launch.discard()
            raise
        master = self.config.master or "local[2]"
        if sized_by_input:
            master = f"local[{max(2, sum(inputs.values()))}]"
        if self.checkpoint_location is None:
            self.checkpoint_location = tempfile.mkdtemp(prefix=f"streamapp-{self.application_id}-")
        starting: dict[str, str] = {}
        if self.config.starting_timestamp is not None:
            starting["startingTimestamp"] = str(self.config.starting_timestamp)
        elif self.config.starting_offsets is not None:
            starting["startingOffsets"] = self.config.starting_offsets
        self._started = time.monotonic()
        run_config = execution.RunConfig(
            name=self.application_id,
            bootstrap=self.bootstrap_servers,
            checkpoint=self.checkpoint_location,
            master=master,
            spark=self._spark if launch is None else launch.session(),
            owns_session=launch is not None,
            spark_conf=conf,
            driver_memory=self.config.driver_memory,
            state_partitions=self.config.state_partitions or (spec.state_partitions if spec else None),
            starting=starting,
            max_offsets_per_trigger=self.config.max_offsets_per_trigger,
            trigger="available-now" if self.config.drain else None,
            commit_interval_ms=self.commit_interval_ms,
            credentials=credentials,
            processing_guarantee=self.processing_guarantee,
            namespace=self.config.namespace or (self.manifest.metadata.namespace if self.manifest else None),
            input_partitions=inputs,
            listeners=self._listeners,
            before_query=before_query,
            warm_up=warm_up,
        )
        self._execution = execution.start(self.topology, run_config)
        self._progress = Progress(
            counted=bool(self._execution.observed or self._execution.read_sources)
            or not self.topology.source_topics()
        )
        reporter = self._reporter(credentials)
        self._monitor = threading.Thread(
            target=self._follow, args=(self._execution, reporter), name=f"streamapp-{self.application_id}"
        )
        self._monitor.daemon = True
        with self._lock:
            stop_now = self._stop_requested
            self._state = State.RUNNING
        self._monitor.start()
        if stop_now:  # stop() was called while Spark was starting
            self.stop(timeout=0)

    def stop(
        self, timeout: float | None = None, *, on_query_stopped: Callable[[], None] | None = None
    ) -> bool:
        """Stop the query and wait until the app is NOT_RUNNING; True when it stopped in time.

        The one place that stops the query: signals, ``stop_when_idle`` and callers all end here
        (a ``drain`` run ends by itself when the input is processed). ``on_query_stopped()`` is
        called once this call stopped the query, before the session is released: its checkpoint
        is free for another driver then (a rolling hand-over's old driver hands over there).
        """
        with self._lock:
            if self._state is State.CREATED:
                self._state = State.NOT_RUNNING
                self._terminated.set()
                return True
            starting = self._state is State.STARTING
            self._stop_requested = starting  # start() stops the query as soon as it exists
            running = self._state is State.RUNNING and not self._finishing
            if running:
                self._state = State.PENDING_SHUTDOWN
        if running and self._execution is not None:
            _log.info("stopping %s", self.application_id)
            try:
                self.stop_report = self._execution.stop_query()
                _log.info("stopped %s: %s", self.application_id, self.stop_report)
                if on_query_stopped is not None:
                    on_query_stopped()
            finally:
                self._query_stopped.set()  # the monitor may now release the session
        if threading.current_thread() is self._monitor:
            return True  # the monitor finishes the shutdown once this returns
        return self._terminated.wait(timeout)

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until the app stopped or failed; True when it did within ``timeout`` seconds."""
        return self._terminated.wait(timeout)

    def close(self) -> None:
        self.stop()

    def __enter__(self) -> StreamApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the monitor ------------------------------------------------------------------------------

    def _reporter(self, credentials: security.Credentials) -> Any:
        from streamapp.runtime.kafka import progress  # noqa: PLC0415

        assert self.bootstrap_servers is not None
        namespace = self.config.namespace or (self.manifest.metadata.namespace if self.manifest else None)
        group = self.config.progress_group or progress.group_id(self.application_id, namespace)
        return progress.Reporter(
            self.bootstrap_servers, group, config=credentials.librdkafka(), instance=self.config.instance
        )

    def _follow(self, run: execution.Execution, reporter: Any) -> None:
        """Follow the query until it terminates; then finish the app (monitor thread)."""
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
                    self._record(run, raw, reporter, written)
                    self._keeping_up = True
                    if raw.get("numInputRows"):
                        idle_since = None
                idleness = _idleness(run.query) if active else "waiting"
                if active and idleness == "waiting":
                    self._keeping_up = True
                if idleness == "working":
                    idle_since = None
                elif idleness == "waiting" and idle_since is None:
                    idle_since = now
                if not active:
                    break
                self._commit(reporter, None)  # a commit the throttle held back
                idle = self.config.stop_when_idle
                if idle is not None and idle_since is not None and time.monotonic() - idle_since > idle:
                    self.stop()
                try:
                    run.query.awaitTermination(0.5)
                except Exception:  # noqa: BLE001 - the query failed: the next round sees it inactive
                    continue
        except Exception as exc:  # noqa: BLE001 - the monitor must always finish the app
            _log.warning("%s: following the query failed: %s", self.application_id, exc)
        self._finish(run, reporter)

    def _record(
        self,
        run: execution.Execution,
        raw: Mapping[str, Any],
        reporter: Any,
        written: Mapping[str, tuple[int, int | None]] | None,
    ) -> None:
        from streamapp.runtime.kafka import progress  # noqa: PLC0415
        from streamapp.runtime.spark import plan  # noqa: PLC0415

        counts = plan.counted_topics(
            raw.get("observedMetrics") or {},
            run.observed,
            sources=raw.get("sources") or (),
            read_sources=run.read_sources,
            written=written,
        )
        old = self._progress
        self._progress = dataclasses.replace(
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
            elapsed=time.monotonic() - self._started,
        )
        self._commit(reporter, progress.from_spark_progress(raw))
        for callback in self._callbacks:
            try:
                callback(self._progress, raw)
            except Exception as exc:  # noqa: BLE001 - a callback never stops the app
                _log.warning("%s: progress callback failed: %s", self.application_id, exc)

    def _commit(self, reporter: Any, batch: Any) -> None:
        """Hand a batch's progress to the reporter; a failure is logged once, never raised: the
        checkpoint, not the group, is where processing resumes."""
        from confluent_kafka import KafkaException  # noqa: PLC0415

        try:
            reporter.report(batch)
        except (KafkaException, TimeoutError) as exc:
            if not reporter.warned:
                _log.warning(
                    "progress of %s could not be committed to consumer group %r (lag in status and "
                    "Kafka tools stays stale): %s",
                    self.application_id,
                    reporter.group,
                    exc,
                )
                reporter.warned = True

    def _finish(self, run: execution.Execution, reporter: Any) -> None:
        with self._lock:
            self._finishing = True  # from now on stop() only waits: the query has ended
            stopping = self._state is State.PENDING_SHUTDOWN
        if stopping:
            # The query ended while stop() is still inside query.stop(): the session must outlive it.
            self._query_stopped.wait()
        failure = None
        try:
            failure = run.failure()
        except Exception as exc:  # noqa: BLE001 - the session is already gone
            failure = exc
        if failure is not None and run.metrics is not None:
            run.metrics.feed.failed()
        self._progress = dataclasses.replace(
            self._progress,
            late=run.late_total(),
            late_by_node=run.late_by_node(),
            elapsed=time.monotonic() - self._started,
        )
        reporter.min_interval = 0
        self._commit(reporter, None)  # the last batch, if the throttle held it back
        reporter.close()
        try:
            run.release()
        finally:
            self._cleanup_checkpoint()
            if failure is not None:
                self._error = failure
                self._state = State.ERROR
            else:
                self._state = State.NOT_RUNNING
            self._terminated.set()

    def _cleanup_checkpoint(self) -> None:
        if self.fresh_checkpoint and self.checkpoint_location:
            shutil.rmtree(self.checkpoint_location, ignore_errors=True)


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
