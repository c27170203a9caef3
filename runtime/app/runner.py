""":class:`StreamApp`: one topology run on Spark against Kafka, through its whole life cycle.

It resolves its :class:`~.config.StreamsConfig` against the manifest into the
:class:`streamapp.runtime.spark.execution.RunConfig` the Spark layer starts a query with, follows
the query (:mod:`.monitor`), and, given the driver's Lease, hands the query over (:mod:`.handover`).
See :mod:`streamapp.runtime.app` for the states.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamapp.runtime import errors
from streamapp.runtime.app import config as config_
from streamapp.runtime.app import monitor as monitor_
from streamapp.runtime.app.config import State

if TYPE_CHECKING:
    from streamapp.runtime import lease as lease_
    from streamapp.runtime.app import handover
    from streamapp.runtime.manifest import models
    from streamapp.runtime.spark import execution
    from streamapp.runtime.topology import graph

__all__ = ["StreamApp"]

_log = logging.getLogger("streamapp.app")


class StreamApp:
    """A topology (or a ``StreamApp`` manifest: the model, YAML text or a path) and how to run it.

    ``spark``: run in this existing SparkSession (tests share one) instead of building one; it is
    left running at :meth:`stop`. ``lease``: the driver's :class:`streamapp.runtime.lease.Lease` (in
    a cluster): the query starts only once this driver holds it, every batch checks it before
    writing, losing it stops the app (:attr:`lease_lost`), and a stop hands it over
    (:mod:`.handover`). Nothing starts until :meth:`start`.
    """

    def __init__(
        self,
        app: graph.Topology | models.StreamApp | str | os.PathLike[str],
        config: config_.StreamsConfig | None = None,
        *,
        spark: Any = None,
        lease: lease_.Lease | None = None,
    ) -> None:
        self.manifest, self.topology = config_.load(app)
        self.config = config or config_.StreamsConfig()
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
        self._stop_asked = threading.Event()  # request_stop(): a signal's
        self._execution: execution.Execution | None = None
        self._monitor: monitor_.Monitor | None = None
        self._thread: threading.Thread | None = None  # the monitor's
        self._error: BaseException | None = None
        self._progress = monitor_.Progress()
        self._callbacks: list[monitor_.ProgressCallback] = []
        self._hand_over_callbacks: list[Callable[[str], None]] = []
        self._listeners: list[Any] = []
        self._started = 0.0
        self._stop_requested = False
        self._finishing = False
        self._handover: handover.HandOver | None = None
        if lease is not None:
            from streamapp.runtime.app import handover  # noqa: PLC0415

            self._handover = handover.HandOver(lease, self.application_id, self._say)

    # -- what it is -------------------------------------------------------------------------------

    @property
    def state(self) -> State:
        return self._state

    @property
    def progress(self) -> monitor_.Progress:
        """Counts so far (updated after each micro-batch, and a last time when the app stops)."""
        progress = self._monitor.progress if self._monitor is not None else self._progress
        if self._state in (State.RUNNING, State.PENDING_SHUTDOWN):
            return dataclasses.replace(progress, elapsed=time.monotonic() - self._started)
        return progress

    @property
    def keeping_up(self) -> bool:
        """The query has completed a micro-batch, or looked for input and found none."""
        return self._monitor is not None and self._monitor.keeping_up

    @property
    def error(self) -> BaseException | None:
        """Why the app is in ERROR (the query's failure), else None."""
        return self._error

    @property
    def lease_lost(self) -> str | None:
        """Why the app's Lease was lost (the app then stops), else None."""
        return self._handover.lost if self._handover is not None else None

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

    def on_progress(self, callback: monitor_.ProgressCallback) -> None:
        """Call ``callback(progress, spark_progress)`` after each micro-batch (in the monitor thread)."""
        self._callbacks.append(callback)

    def on_hand_over(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(line)`` with each step of the hand-over (standby, the Lease held, warming
        up, released, the successor keeping up); without one they are logged."""
        self._hand_over_callbacks.append(callback)

    def _say(self, line: str) -> None:
        if not self._hand_over_callbacks:
            _log.info("%s", line)
        for callback in self._hand_over_callbacks:
            callback(line)

    def add_query_listener(self, listener: Any) -> None:
        """Attach a pyspark ``StreamingQueryListener`` to the app's session before the query starts
        (metrics exporters); it is removed when the app stops."""
        if self._state is not State.CREATED:
            raise errors.StreamAppError("add query listeners before start()")
        self._listeners.append(listener)

    # -- life cycle -------------------------------------------------------------------------------

    def start(self, warm_up: Callable[[], bool] | None = None) -> None:
        """Start Spark and the query, and return (the query runs until :meth:`stop`).

        With a Lease the query starts once this driver holds it (standby, Spark up and the plan
        compiled), warmed up first when another driver runs it (:mod:`.handover`); a
        :meth:`request_stop` meanwhile raises :class:`streamapp.runtime.lease.Cancelled`.
        ``warm_up()`` true (asked once Spark is up; without a Lease): the plan first runs once over
        the last input records through a dry run of the sink, as a hand-over's new driver does."""
        with self._lock:
            if self._state is not State.CREATED:
                raise errors.StreamAppError(f"{self.application_id}: start() in state {self._state.name}")
            self._state = State.STARTING
        before_query = None
        if self._handover is not None:
            if warm_up is not None:
                raise errors.StreamAppError(f"{self.application_id}: a Lease decides the warm-up")
            self._handover.begin(cancelled=self._stop_asked.is_set)
            before_query, warm_up = self._handover.fence, self._handover.warm_up
        try:
            self._start(before_query, warm_up)
        except BaseException:
            if self._execution is not None and self._thread is None:  # failed after the query started
                with contextlib.suppress(Exception):
                    self._execution.stop_query()
                self._execution.release()
            self._cleanup_checkpoint()
            self._release_lease()
            self._state = State.NOT_RUNNING
            self._terminated.set()
            raise

    def _start(self, before_query: Callable[[], None] | None, warm_up: Callable[[], bool] | None) -> None:
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
        namespace = self.config.namespace or (self.manifest.metadata.namespace if self.manifest else None)
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
            namespace=namespace,
            input_partitions=inputs,
            listeners=self._listeners,
            before_query=before_query,
            warm_up=warm_up,
        )
        self._execution = execution.start(self.topology, run_config)
        counted = bool(self._execution.observed or self._execution.read_sources)
        self._monitor = monitor_.Monitor(
            self.application_id,
            self._execution,
            monitor_.reporter(
                self.bootstrap_servers, credentials, name=self.application_id, namespace=namespace,
                group=self.config.progress_group, instance=self.config.instance,
            ),
            callbacks=self._callbacks,
            stop_when_idle=self.config.stop_when_idle,
            started=self._started,
            progress=monitor_.Progress(counted=counted or not self.topology.source_topics()),
        )  # fmt: skip
        self._thread = threading.Thread(target=self._follow, name=f"streamapp-{self.application_id}")
        self._thread.daemon = True
        with self._lock:
            stop_now = self._stop_requested
            self._state = State.RUNNING
        self._thread.start()
        if stop_now:  # stop() was called while Spark was starting
            self.stop(timeout=0)

    def request_stop(self) -> None:
        """Ask the app to stop, without waiting (a signal handler's): :meth:`start` waiting for the
        Lease gives up, and :meth:`run_until_stopped` stops the app."""
        self._stop_asked.set()

    def run_until_stopped(self) -> None:
        """Block until the app ends by itself, a stop is asked (:meth:`request_stop`, Ctrl-C) or
        its Lease is lost; then :meth:`stop` it. Notes on the Lease when the query keeps up."""
        try:
            while not self.await_termination(0.1):  # a stop asked is acted on within 0.1 s
                if self._stop_asked.is_set() or self.lease_lost is not None:
                    break
                if self._handover is not None and self.keeping_up:
                    self._handover.note_keeping_up()  # the driver this one took over from shuts down now
        except KeyboardInterrupt:
            pass
        self.stop()  # at a micro-batch boundary; a second Ctrl-C interrupts it

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the query and wait until the app is NOT_RUNNING; True when it stopped in time.

        The one place that stops the query: signals, ``stop_when_idle`` and callers all end here
        (a ``drain`` run ends by itself when the input is processed). With a Lease, once the query
        stopped and before the session is released, the Lease is handed over (:mod:`.handover`):
        the checkpoint is free for another driver then.
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
                if self._handover is not None:
                    self._handover.hand_over()
            finally:
                self._query_stopped.set()  # the monitor may now release the session
        if threading.current_thread() is self._thread:
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

    # -- the monitor thread -----------------------------------------------------------------------

    def _follow(self) -> None:
        """Follow the query until it terminates; then finish the app."""
        assert self._monitor is not None
        self._monitor.follow(self.stop)
        self._finish(self._monitor)

    def _finish(self, monitor: monitor_.Monitor) -> None:
        run = monitor.run
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
        monitor.close()
        try:
            run.release()
        finally:
            self._cleanup_checkpoint()
            self._release_lease()
            if failure is not None:
                self._error = failure
                self._state = State.ERROR
            else:
                self._state = State.NOT_RUNNING
            self._terminated.set()

    def _release_lease(self) -> None:
        """The app has ended: its Lease goes back unless the hand-over gave it back or it was lost."""
        if self._handover is not None:
            try:
                self._handover.release()
            except Exception as exc:  # noqa: BLE001 - it expires by itself: the app must still end
                _log.warning("%s: releasing the Lease failed: %s", self.application_id, exc)

    def _cleanup_checkpoint(self) -> None:
        if self.fresh_checkpoint and self.checkpoint_location:
            shutil.rmtree(self.checkpoint_location, ignore_errors=True)
