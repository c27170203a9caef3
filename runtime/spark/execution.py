"""The Spark half of :class:`streamapp.runtime.StreamApp`: session, checkpoint, plan, one query.

:mod:`streamapp.runtime.app` holds the public object (state, progress, stop, listeners), resolves
its configuration into a :class:`RunConfig` and imports this module only when an app starts, so
``import streamapp.runtime`` never imports pyspark. Everything that wires a topology to Kafka on
Spark is here, once: the session (:func:`session.build_session`), the checkpoint's state
partitions (:mod:`.checkpoints`), the plan reading Kafka with its counts (:mod:`.plan`), the
warm-up of a hand-over (:mod:`.warm_up`) and the query writing it (:mod:`.runner`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from streamapp.runtime.kafka import security
from streamapp.runtime.spark import (
    checkpoints,
    compiler,
    jvm_sink,
    plan,
    query_metrics,
    runner,
    session,
    sink,
    stopping,
    warm_up,
)
from streamapp.runtime.topology import nodes, state

if TYPE_CHECKING:
    from streamapp.runtime.topology.graph import Topology

__all__ = ["EXACTLY_ONCE_MAX_OFFSETS", "FAILURE_LOGGERS", "Execution", "RunConfig", "start"]


@dataclasses.dataclass
class Execution:
    """A started query and what is needed to read its counters and stop it."""

    spark: SparkSession
    query: StreamingQuery
    trigger: runner.Trigger
    state_partitions: int | None  # None for a stateless topology
    #: windowed aggregation node → Spark accumulator of late (beyond grace) contributions
    late: Mapping[str, Any]
    #: observation name → the topics its columns count, in column order (``t0``, ``t1``, …)
    observed: Mapping[str, Sequence[str]]
    #: progress source description → the topic whose records read are that source's input rows
    read_sources: Mapping[str, str]
    owns_session: bool  # the session was created for this app: stop it with the app
    listeners: list[Any] = dataclasses.field(default_factory=list)
    #: the Prometheus metrics (served when ``STREAMAPP_METRICS_PORT`` is set)
    metrics: query_metrics.Attached | None = None

    def reports_after(self, last: tuple[str, int]) -> list[tuple[dict[str, Any], jvm_sink.Written | None]]:
        """The query's progress reports made after ``last`` (timestamp, batch id), oldest first,
        each with the records its batch wrote per topic when the sink counts them (else they are
        observed in the plan): :func:`runner.reports_after`."""
        return runner.reports_after(self.spark.sparkContext._jvm, self.query, last)

    def late_by_node(self) -> dict[str, int]:
        return {node: int(counter.value) for node, counter in self.late.items()}

    def late_total(self) -> int:
        return sum(self.late_by_node().values())

    def stop_query(self) -> stopping.StopReport:
        """Stop the streaming query at a micro-batch boundary (called only by :meth:`StreamApp.stop`)."""
        return stopping.graceful_stop(self.query)

    def failure(self) -> BaseException | None:
        """The query's error, if it failed; a batch parked by a clean stop is not one."""
        if stopping.stopped_at_boundary(self.query):
            return None
        error: BaseException | None = self.query.exception()
        return error

    def release(self) -> None:
        """Detach the listeners, stop serving metrics; stop the session when this app created it."""
        if self.metrics is not None:
            self.metrics.stop_serving()
        with contextlib.suppress(Exception):  # the session may already be gone
            runner.forget(self.query)
        for listener in self.listeners:
            # The session may already be gone: then there is nothing to release.
            with contextlib.suppress(Exception):
                self.spark.streams.removeListener(listener)
        if self.owns_session:
            self.spark.stop()


#: Under exactly_once_v2 a micro-batch is one transaction per task, which must commit within
#: transaction.timeout.ms (600 s) or the broker aborts it, and the retry would be as large: so a
#: micro-batch reads at most this many records unless a maxOffsetsPerTrigger says otherwise (at
#: the 2-core benchmarks' word-count rate, about 5 s of work).
EXACTLY_ONCE_MAX_OFFSETS = 500_000

#: Loggers that print a failed query's Java stack traces on the driver (in local mode also the
#: executors' task failures). The app reports a failure itself — :attr:`StreamApp.error`, one line
#: from ``streamapp run``, the full text with ``--debug`` — so they are silenced.
FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
    "org.apache.spark.sql.execution.streaming.runtime.StreamExecution",
    # KafkaSink's write (a data source write of Spark's) aborting a failed micro-batch
    "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
)


def _quiet_failures(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    off = jvm.org.apache.logging.log4j.Level.OFF
    for name in FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, off)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """What :func:`start` runs a topology with: :class:`streamapp.runtime.StreamsConfig` resolved
    against the manifest and the input (by :class:`streamapp.runtime.StreamApp`, the one place that
    builds it), the session to run in, and the hooks of a hand-over.

    ``starting`` holds the Kafka source's start options (``startingOffsets`` or
    ``startingTimestamp``); Spark applies them only when the checkpoint is new. ``trigger``
    overrides the topology's (``available-now``: drain the input there is, then stop).
    ``commit_interval_ms`` spaces the micro-batches of the micro-batch trigger (Spark's
    processing-time interval); None runs them back to back. ``owns_session``: ``spark`` was built
    for this app (with ``spark_conf``), stop it with the app. ``before_query()`` is called once
    Spark is up and the plan compiled, just before the query starts (a standby driver waits there
    for its fence). ``warm_up()`` true (asked once the session is up): the plan runs once over the
    last input records first (:mod:`.warm_up`), so that the query's first micro-batch finds the JVMs
    warm — a standby driver's hand-over.
    """

    name: str  # the query's name
    bootstrap: str
    checkpoint: str
    master: str | None
    spark: SparkSession | None = None  # run in this session instead of building one
    owns_session: bool = False
    spark_conf: Mapping[str, str] | None = None
    driver_memory: str | None = None
    state_partitions: int | None = None
    starting: Mapping[str, str] | None = None
    max_offsets_per_trigger: int | None = None
    trigger: str | None = None
    commit_interval_ms: int | None = None
    credentials: security.Credentials = security.PLAINTEXT
    processing_guarantee: str = "at_least_once"
    namespace: str | None = None
    #: partitions per input topic: Kafka Streams' tasks (one per partition of the largest input)
    input_partitions: Mapping[str, int] | None = None
    listeners: Sequence[Any] = ()
    before_query: Callable[[], None] | None = None
    warm_up: Callable[[], bool] | None = None


def start(topology: Topology, config: RunConfig) -> Execution:
    """Build (or reuse) the session, fix the state partitions, compile and start the query."""
    spark = config.spark
    owns = config.owns_session or (spark is None and SparkContext._active_spark_context is None)
    if spark is None:
        spark = session.build_session(
            app_name=config.name,
            master=config.master,
            conf=dict(config.spark_conf or {}),
            driver_memory=config.driver_memory or session.DEFAULT_DRIVER_MEMORY,
        )
    elif config.spark_conf and not config.owns_session:  # an owned session was built with them
        for key, value in config.spark_conf.items():
            spark.conf.set(key, value)
    checkpoint, bootstrap, credentials = config.checkpoint, config.bootstrap, config.credentials
    trigger, guarantee = config.trigger, config.processing_guarantee
    partitions: int | None = None
    instrumented: query_metrics.Attached | None = None
    try:
        _quiet_failures(spark)
        global_topics = frozenset(
            t
            for n in topology.nodes
            if isinstance(n, nodes.Source) and n.op == "globalTable"
            for t in n.topics
        )
        # Kafka Streams' tasks: one per partition of the (largest) input, global tables aside.
        tasks = max(
            (n for t, n in (config.input_partitions or {}).items() if t not in global_topics), default=1
        )
        slots = session.local_slots(spark.sparkContext.master)
        record = checkpoints.read_record(spark, checkpoint)
        steps = state.fingerprint(topology)
        partitions = checkpoints.state_partitions(
            spark,
            checkpoint,
            requested=config.state_partitions,
            # Locally, a state partition per task slot at most: each costs every micro-batch time.
            default=tasks if slots is None else min(tasks, slots),
            tasks=tasks,
            steps=steps,
            record=record,
        )
        # The real-time trigger accepts no observations (it never ends a batch to report them).
        counting = topology.trigger()[0] != "real-time" and trigger != "real-time"
        reads = plan.Reads(
            spark,
            bootstrap=bootstrap,
            credentials=credentials,
            options=dict(config.starting or {}),
            max_offsets=config.max_offsets_per_trigger
            or (EXACTLY_ONCE_MAX_OFFSETS if guarantee == "exactly_once_v2" else None),
            global_topics=global_topics,
            counting=counting,
            micro_batch=(trigger or topology.trigger()[0]) != "real-time",
        )
        exactly_once = None
        if guarantee == "exactly_once_v2":
            fingerprint = hashlib.sha256(topology.describe().encode()).hexdigest()[:16]
            exactly_once = sink.ExactlyOnce.for_query(config.name, checkpoint, fingerprint)
        elif guarantee != "at_least_once":
            raise ValueError(f"processingGuarantee {guarantee!r}: at_least_once or exactly_once_v2")

        def sink_counts(compiled: compiler.Compiled) -> bool:
            chosen = compiled.trigger if trigger is None else runner.Trigger(trigger)
            return runner.sink_counts(chosen, prints=compiled.prints, exactly_once=exactly_once)

        compiled, frame = plan.build(topology, reads, checkpoint, sink_counts=sink_counts)
        chosen = compiled.trigger if trigger is None else runner.Trigger(trigger)
        if config.commit_interval_ms is not None:
            if chosen.kind != "micro-batch":
                raise ValueError(f"a commit interval needs the micro-batch trigger, not {chosen.kind}")
            chosen = dataclasses.replace(chosen, interval=f"{config.commit_interval_ms} milliseconds")
        if config.warm_up is not None and config.warm_up():
            warm_up.warm(
                spark, topology, reads=reads, checkpoint=checkpoint, trigger=chosen, prints=compiled.prints,
                exactly_once=exactly_once, sink_counts=sink_counts,
            )  # fmt: skip
        instrumented = query_metrics.attach(
            spark, compiled, topology=topology, name=config.name, namespace=config.namespace,
            checkpoint=checkpoint,
        )  # fmt: skip
        for listener in config.listeners:
            spark.streams.addListener(listener)
        if config.before_query is not None:
            config.before_query()  # standby: Spark up, plan compiled; the query starts when this returns
        query = runner.start_kafka(
            frame,
            exactly_once=exactly_once,
            bootstrap=bootstrap,
            checkpoint=checkpoint,
            trigger=chosen,
            query_name=config.name,
            output_mode=compiled.output_mode,
            prints=compiled.prints,
            producer_config=credentials.java(),
        )
    except BaseException:
        if instrumented is not None:
            instrumented.stop_serving()
        for listener in config.listeners:
            with contextlib.suppress(Exception):  # it may not have been added yet
                spark.streams.removeListener(listener)
        if owns:
            spark.stop()
        raise
    return Execution(
        spark=spark,
        query=query,
        trigger=chosen,
        state_partitions=partitions if topology.stateful() else None,
        late=compiled.late,
        observed=reads.observed,
        read_sources=reads.read_sources,
        owns_session=owns,
        listeners=list(config.listeners),
        metrics=instrumented,
    )
