"""The Spark half of :class:`streamapp.runtime.StreamApp`: session, checkpoint, plan, one query.

:mod:`streamapp.runtime.app` holds the public object (state, progress, stop, listeners) and
imports this module only when an app starts, so ``import streamapp.runtime`` never imports
pyspark. Everything that wires a topology to Kafka on Spark is here, once: the session
(:func:`session.build_session`), the checkpoint's state partitions (:mod:`.checkpoints`), the
compiled plan reading Kafka (:mod:`.compiler`, :mod:`.kafka_io`) and the query writing it
(:mod:`.runner`).

Counting records per topic: each source frame and the sink rows carry a Spark observation
(``Dataset.observe``) — one ``count_if(topic = …)`` per topic — so every micro-batch's progress
reports exactly how many records it read from and wrote to each topic, computed in the same
pass that processes them (no second read, nothing collected to the driver).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from streamapp.runtime import errors
from streamapp.runtime.kafka import security
from streamapp.runtime.spark import (
    checkpoints,
    compiler,
    jvm_sink,
    kafka_io,
    query_metrics,
    runner,
    session,
    sink,
    stopping,
)
from streamapp.runtime.spark.stateful import frontier
from streamapp.runtime.topology import nodes, state

_log = logging.getLogger("streamapp.execution")

if TYPE_CHECKING:
    from streamapp.runtime.topology.graph import Topology

__all__ = [
    "FAILURE_LOGGERS",
    "READ_PREFIX",
    "WRITTEN",
    "Execution",
    "counted_topics",
    "source_description",
    "start",
]

#: Observation names in a progress's ``observedMetrics``: one per source frame, one for the sink
#: (WRITTEN where the metrics' own, :data:`query_metrics.OBSERVATION`, is not in the plan).
READ_PREFIX = "streamapp_read_"
WRITTEN = "streamapp_written"


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


def _observe(
    frame: DataFrame, name: str, topics: Sequence[str], observed: dict[str, Sequence[str]]
) -> DataFrame:
    if not topics:
        return frame
    observed[name] = list(topics)
    columns = [F.count_if(F.col("topic") == F.lit(t)).alias(f"t{i}") for i, t in enumerate(topics)]
    return frame.observe(name, *columns)


def source_description(topic: str) -> str:
    """How Spark's progress names a Kafka source subscribed to ``topic`` alone."""
    return f"KafkaV2[Subscribe[{topic}]]"


def counted_topics(
    metrics: Mapping[str, Any],
    observed: Mapping[str, Sequence[str]],
    *,
    sources: Sequence[Mapping[str, Any]] = (),
    read_sources: Mapping[str, str] | None = None,
    written: Mapping[str, tuple[int, int | None]] | None = None,
) -> dict[str, dict[str, int]]:
    """``{"read": …, "written": …, "skipped": …, "dead_lettered": …, "dropped": …}`` (each
    ``{topic: n}``) from one progress's ``observedMetrics`` and ``sources``; skipped and
    dead-lettered records are counted per source topic, records dropped (a null key, or a null
    value into sliding windows) per node (``{node: n}``). ``read_sources`` maps the description of
    a source that reads one topic to the topic: its records read are the source's
    ``numInputRows`` (the first source so described: a topic two nodes read is counted once).
    ``written``: the records written per topic as the sink counted them (:meth:`Execution.reports_after`)."""
    counts: dict[str, dict[str, int]] = {
        "read": {},
        "written": {},
        "skipped": {},
        "dead_lettered": {},
        "dropped": {},
    }
    for sink_topic, (records, _stamp) in (written or {}).items():
        if records:
            counts["written"][sink_topic] = records
    described = set()
    for source in sources:
        read = (read_sources or {}).get(str(source.get("description")))
        if read is not None and read not in described:
            described.add(read)
            if source.get("numInputRows"):
                counts["read"][read] = counts["read"].get(read, 0) + int(source["numInputRows"])
    for name, topics in observed.items():
        row = metrics.get(name)
        if not row:
            continue
        # Each topic's count: column t<i>, or out_<i> (every other column) in the metrics' own.
        column, stride = ("out_", 2) if name == query_metrics.OBSERVATION else ("t", 1)
        if name in (WRITTEN, query_metrics.OBSERVATION):
            side = counts["written"]
        elif name.startswith("streamapp_skipped_"):
            side = counts["skipped"]
        elif name.startswith("streamapp_dead_lettered_"):
            side = counts["dead_lettered"]
        elif name.startswith("streamapp_dropped_"):
            side = counts["dropped"]
        else:
            side = counts["read"]
        for i, topic in enumerate(topics):
            # The progress's JSON gives the observed Row as a list of values; a Row object (or a
            # dict) by column name.
            if isinstance(row, (list, tuple)):
                value = row[stride * i] if stride * i < len(row) else None
            else:
                value = row.get(f"{column}{i}") if isinstance(row, Mapping) else None
            if value:
                side[topic] = side.get(topic, 0) + int(value)
    return counts


@dataclasses.dataclass
class _Reads:
    """The plan's Kafka reads (the compiler's ``read``), each source frame with its count.

    A frame of one topic is counted by Spark itself (its source's ``numInputRows`` in the
    progress: ``read_sources``); a frame of several topics by an observation of the records per
    topic. (An observation is a CollectMetrics node: its accumulator and projections go with each
    task, 5-7 ms of a small micro-batch's 30-40 on 2 cores.)

    Global tables are read to their end in every micro-batch (Kafka Streams bootstraps a
    GlobalKTable in full before the streams that look it up): the app-wide limit skips them. A
    source's own ``maxOffsetsPerTrigger`` (manifest) wins over the app-wide one (config).
    """

    spark: SparkSession
    bootstrap: str
    credentials: security.Credentials
    options: Mapping[str, str]  # the start options: startingOffsets or startingTimestamp
    max_offsets: int | None
    global_topics: frozenset[str]
    counting: bool
    micro_batch: bool  # read by a micro-batch trigger, not the real-time one (kafka_io.read_stream)
    #: Set: each topic's start offsets (JSON), whatever the checkpoint says (the warm-up's).
    starting: Callable[[Sequence[str]], str] | None = None
    observed: dict[str, Sequence[str]] = dataclasses.field(default_factory=dict)
    #: progress source description → the one topic that source reads
    read_sources: dict[str, str] = dataclasses.field(default_factory=dict)
    _counted: set[str] = dataclasses.field(default_factory=set)

    def __call__(self, topics: Sequence[str], /, *, max_offsets_per_trigger: int | None = None) -> DataFrame:
        app_wide = None if set(topics) <= self.global_topics else self.max_offsets
        options = dict(self.options)
        starting = options.pop("startingOffsets", "earliest")
        if self.starting is not None:
            starting = self.starting(topics)
            options.pop("startingTimestamp", None)
        frame = kafka_io.read_stream(
            self.spark,
            bootstrap=self.bootstrap,
            topics=topics,
            starting_offsets=starting,
            max_offsets_per_trigger=max_offsets_per_trigger or app_wide,
            options=options,
            client_config=self.credentials.java(),
            micro_batch=self.micro_batch,
        )
        # A topic two source nodes read is read twice by Spark; count its records once.
        new = [t for t in topics if t not in self._counted]
        if self.counting and new:
            if len(topics) == 1:
                self.read_sources[source_description(topics[0])] = topics[0]
            else:
                reads = sum(1 for n in self.observed if n.startswith(READ_PREFIX))
                frame = _observe(frame, f"{READ_PREFIX}{reads}", new, self.observed)
            self._counted.update(new)
        return frame

    def again(self, starting: Callable[[Sequence[str]], str], **options: str) -> _Reads:
        """The same reads from other offsets (and with ``options`` added), with observations of
        their own."""
        merged = {**self.options, **options}
        return dataclasses.replace(
            self, options=merged, starting=starting, observed={}, read_sources={}, _counted=set()
        )


def _plan(
    topology: Topology, reads: _Reads, checkpoint: str, *, sink_counts: Callable[[compiler.Compiled], bool]
) -> tuple[compiler.Compiled, DataFrame]:
    """The topology compiled over ``reads``, and the plan the query runs: with the sinks'
    observations (metrics; with counting, the records per topic) unless ``sink_counts(compiled)``
    (the sink counts the records it writes: :func:`runner.written`)."""
    merge_frontier = frontier.Frontier.of(
        checkpoint, {"bootstrap.servers": reads.bootstrap, **reads.credentials.librdkafka()}
    )
    compiled = compiler.compile_topology(topology, read=reads, merge_frontier=merge_frontier)
    if reads.counting:
        reads.observed.update({name: list(topics) for name, (_kind, topics) in compiled.error_counts.items()})
    if sink_counts(compiled):
        return compiled, compiled.plan
    plan = query_metrics.observe(compiled, topology)
    if reads.counting:
        if plan is compiled.plan:
            plan = _observe(plan, WRITTEN, topology.sink_topics(), reads.observed)
        else:  # the metrics' observation counts the records per sink topic already: one node, not two
            reads.observed[query_metrics.OBSERVATION] = list(topology.sink_topics())
    return compiled, plan


def start(
    topology: Topology,
    *,
    name: str,
    bootstrap: str,
    checkpoint: str,
    master: str | None,
    spark: SparkSession | None = None,
    owns_session: bool = False,
    spark_conf: Mapping[str, str] | None = None,
    driver_memory: str | None = None,
    state_partitions: int | None = None,
    starting: Mapping[str, str] | None = None,
    max_offsets_per_trigger: int | None = None,
    trigger: str | None = None,
    commit_interval_ms: int | None = None,
    credentials: security.Credentials = security.PLAINTEXT,
    processing_guarantee: str = "at_least_once",
    namespace: str | None = None,
    input_partitions: Mapping[str, int] | None = None,
    listeners: Sequence[Any] = (),
    count: bool = True,
    before_query: Callable[[], None] | None = None,
    warm_up: Callable[[], bool] | None = None,
) -> Execution:
    """Build (or reuse) the session, fix the state partitions, compile and start the query.

    ``starting`` holds the Kafka source's start options (``startingOffsets`` or
    ``startingTimestamp``); Spark applies them only when the checkpoint is new. ``trigger``
    overrides the topology's (``available-now``: drain the input there is, then stop).
    ``commit_interval_ms`` spaces the micro-batches of the micro-batch trigger (Spark's
    processing-time interval); None runs them back to back. ``warm_up()`` true (asked once the
    session is up): the plan runs once over the last input records first (:func:`_warm_up`), so
    that the query's first micro-batch finds the JVMs warm — a standby driver's hand-over.
    ``owns_session``: ``spark`` was built for this app (with ``spark_conf``), stop it with the app.
    """
    owns = owns_session or (spark is None and SparkContext._active_spark_context is None)
    if spark is None:
        spark = session.build_session(
            app_name=name,
            master=master,
            conf=dict(spark_conf or {}),
            driver_memory=driver_memory or session.DEFAULT_DRIVER_MEMORY,
        )
    elif spark_conf and not owns_session:  # an owned session was built with them
        for key, value in spark_conf.items():
            spark.conf.set(key, value)
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
        tasks = max((n for t, n in (input_partitions or {}).items() if t not in global_topics), default=1)
        slots = local_slots(spark.sparkContext.master)
        record = checkpoints.read_record(spark, checkpoint)
        steps = state.fingerprint(topology)
        partitions = checkpoints.state_partitions(
            spark,
            checkpoint,
            requested=state_partitions,
            # Locally, a state partition per task slot at most: each costs every micro-batch time.
            default=tasks if slots is None else min(tasks, slots),
            tasks=tasks,
            steps=steps,
            record=record,
        )
        # The real-time trigger accepts no observations (it never ends a batch to report them).
        counting = count and topology.trigger()[0] != "real-time" and trigger != "real-time"
        reads = _Reads(
            spark,
            bootstrap=bootstrap,
            credentials=credentials,
            options=dict(starting or {}),
            max_offsets=max_offsets_per_trigger
            or (EXACTLY_ONCE_MAX_OFFSETS if processing_guarantee == "exactly_once_v2" else None),
            global_topics=global_topics,
            counting=counting,
            micro_batch=(trigger or topology.trigger()[0]) != "real-time",
        )
        exactly_once = None
        if processing_guarantee == "exactly_once_v2":
            fingerprint = hashlib.sha256(topology.describe().encode()).hexdigest()[:16]
            exactly_once = sink.ExactlyOnce.for_query(name, checkpoint, fingerprint)
        elif processing_guarantee != "at_least_once":
            raise ValueError(
                f"processingGuarantee {processing_guarantee!r}: at_least_once or exactly_once_v2"
            )

        def sink_counts(compiled: compiler.Compiled) -> bool:
            chosen = compiled.trigger if trigger is None else runner.Trigger(trigger)
            return runner.sink_counts(chosen, prints=compiled.prints, exactly_once=exactly_once)

        compiled, plan = _plan(topology, reads, checkpoint, sink_counts=sink_counts)
        chosen = compiled.trigger if trigger is None else runner.Trigger(trigger)
        if commit_interval_ms is not None:
            if chosen.kind != "micro-batch":
                raise ValueError(f"a commit interval needs the micro-batch trigger, not {chosen.kind}")
            chosen = dataclasses.replace(chosen, interval=f"{commit_interval_ms} milliseconds")
        if warm_up is not None and warm_up():
            sinking = None
            if chosen.kind != "real-time":  # real-time writes with Spark's own sink
                sinking = sink.KafkaBatchWriter(
                    bootstrap=bootstrap,
                    producer_config=credentials.java(),
                    prints=compiled.prints,
                    exactly_once=exactly_once,
                    dry_run=True,
                )
            _warm_up(
                spark, topology, reads=reads, checkpoint=checkpoint, writer=sinking, sink_counts=sink_counts
            )
            if sinking is not None:
                _warm_up_sink(spark, topology, bootstrap=bootstrap, credentials=credentials, eos=exactly_once)
        instrumented = query_metrics.attach(
            spark, compiled, topology=topology, name=name, namespace=namespace, checkpoint=checkpoint
        )
        for listener in listeners:
            spark.streams.addListener(listener)
        if before_query is not None:
            before_query()  # standby: Spark up, plan compiled; the query starts when this returns
        query = runner.start_kafka(
            plan,
            exactly_once=exactly_once,
            bootstrap=bootstrap,
            checkpoint=checkpoint,
            trigger=chosen,
            query_name=name,
            output_mode=compiled.output_mode,
            prints=compiled.prints,
            producer_config=credentials.java(),
        )
    except BaseException:
        if instrumented is not None:
            instrumented.stop_serving()
        for listener in listeners:
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
        listeners=list(listeners),
        metrics=instrumented,
    )


def _warm_up_sink(
    spark: SparkSession,
    topology: Topology,
    *,
    bootstrap: str,
    credentials: security.Credentials,
    eos: sink.ExactlyOnce | None,
) -> None:
    """The sink's producers ready on the executors (``SinkWarmUp.java``); a failure only warns:
    the first micro-batch then connects as it would have."""
    import time  # noqa: PLC0415

    from streamapp.runtime.kafka import admin  # noqa: PLC0415
    from streamapp.runtime.spark import jvm_sink  # noqa: PLC0415

    began = time.monotonic()
    try:
        sinks = list(topology.sink_topics())
        existing = admin.partition_counts(bootstrap, sinks, client_config=credentials.librdkafka())
        jvm_sink.warm_up(
            spark,
            {"bootstrap.servers": bootstrap, **credentials.java()},
            [t for t in sinks if t in existing],
            marker_topic=eos.marker_topic if eos else None,
            marker_group=eos.marker_group if eos else None,
        )
    except Exception as exc:  # noqa: BLE001 - an optimisation: the query runs without it
        _log.warning(
            "warm-up of the sink failed (the first micro-batch connects itself): %s", errors.one_line(exc)
        )
        return
    _log.info("sink warmed up on the executors in %.1f s", time.monotonic() - began)


#: How long a warm-up run may take before the query starts without it.
WARM_UP_TIMEOUT_S = 120


#: How long a warm-up waits for the executors the driver asked for to register.
EXECUTORS_TIMEOUT_S = 60


def local_slots(master: str) -> int | None:
    """The task slots of a local master (``local``: 1, ``local[N]``/``local[N,F]``: N,
    ``local[*]``: the cores), None for a cluster (``local-cluster[…]`` included)."""
    if master == "local":
        return 1
    found = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master)
    if found is None:
        return None
    return (os.cpu_count() or 1) if found[1] == "*" else max(1, int(found[1]))


def _task_slots(spark: SparkSession, timeout_s: float = EXECUTORS_TIMEOUT_S) -> int:
    """The task slots of the executors the driver asked for (``spark.executor.instances`` ×
    ``spark.executor.cores``), once they have registered — at most ``timeout_s``, after which the
    registered ones count (a warning says so). Local mode: its cores."""
    import time  # noqa: PLC0415

    if (local := local_slots(spark.sparkContext.master)) is not None:
        return local
    sc = spark.sparkContext
    conf = sc.getConf()
    wanted = int(conf.get("spark.executor.instances", "0") or 0)
    cores = int(conf.get("spark.executor.cores", "1") or 1)
    tracker = sc._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout_s
    while (registered := len(tracker.getExecutorInfos()) - 1) < wanted:  # the driver is listed too
        if time.monotonic() > deadline:
            _log.warning("warm-up: %d of %d executors registered after %d s", registered, wanted, timeout_s)
            break
        time.sleep(0.2)
    return max(1, registered * cores)


class WarmUpFailed(errors.RunFailed):
    """The plan failed on the last input records: this revision would fail on them too."""


def _warm_up(
    spark: SparkSession,
    topology: Topology,
    *,
    reads: _Reads,
    checkpoint: str,
    writer: sink.KafkaBatchWriter | None,
    sink_counts: Callable[[compiler.Compiled], bool],
) -> None:
    """Run the query's plan once over the last records of each input partition (as many as the
    executors have task slots), each stage in a task per slot, on a throw-away checkpoint inside
    the app's (``warm-up/``, on storage the executors share; removed after): JVM classes,
    generated code, Kafka consumers, state stores and Python workers are then warm on the driver
    and on every executor, and the query's first micro-batch costs what a later one does,
    wherever its tasks go. The plan is the query's own, observations included, and it runs
    through the sink's own path with ``writer`` (a dry run: rows become records, nothing is
    sent; None: Spark's ``noop`` sink) — a plan that differs is compiled again on every executor
    in the first batch (measured in an e2e hand-over before this: 0.7 s of CPU in the first
    batch's state-and-sink task, in code generation, the observations' first use and the
    writer's classes). User functions see those records once more, as after a failover. A
    failure of the plan raises :class:`WarmUpFailed` (the revision would fail on these records);
    a timeout only warns."""
    import time  # noqa: PLC0415
    import uuid  # noqa: PLC0415

    from streamapp.runtime.kafka import admin  # noqa: PLC0415

    began = time.monotonic()
    slots = _task_slots(spark)
    ends = admin.end_offsets(
        reads.bootstrap, topology.source_topics(), client_config=reads.credentials.librdkafka()
    )
    root = f"{checkpoint.rstrip('/')}/warm-up"
    folder = f"{root}/{uuid.uuid4().hex[:8]}"
    checkpoints.delete(spark, root)  # what a driver stopped during its warm-up left

    def last(topics: Sequence[str]) -> str:
        return json.dumps(
            {t: {str(p): max(0, end - slots) for p, end in ends.get(t, {}).items()} for t in topics}
        )

    shuffle = "spark.sql.shuffle.partitions"
    partitions = spark.conf.get(shuffle)
    try:
        # Every executor runs every stage of the plan once. Reading: `minPartitions` splits the
        # last records into a task per slot without a preferred executor (the Kafka source
        # otherwise places a partition's task on one executor by a hash, and new partitions'
        # tasks then go to executors the warm-up never reached: measured in an e2e rescale to 3
        # executors, cold source tasks of 6.6-6.9 s, an 8.0 s output gap). State: as many state
        # partitions as slots, on this throw-away checkpoint (the query's plan is compiled
        # already; the dry run grows no marker topic to the warm-up's task count).
        spark.conf.set(shuffle, str(slots))
        compiled, plan = _plan(
            topology, reads.again(last, minPartitions=str(slots)), folder, sink_counts=sink_counts
        )
        stream = plan.writeStream.format("noop") if writer is None else plan.writeStream.foreachBatch(writer)
        query = (
            stream.outputMode(compiled.output_mode)
            .option("checkpointLocation", folder)
            .trigger(availableNow=True)
            .start()
        )
        try:
            if not query.awaitTermination(WARM_UP_TIMEOUT_S):
                _log.warning("warm-up: not done in %d s; the query starts without it", WARM_UP_TIMEOUT_S)
        except Exception as exc:  # Spark's StreamingQueryException, via py4j
            raise WarmUpFailed(f"the plan failed on the last input records: {errors.one_line(exc)}") from exc
        finally:
            query.stop()
        tasks = _tasks_per_stage(spark, str(query.runId))
    finally:
        spark.conf.set(shuffle, partitions)
        checkpoints.delete(spark, root)
    _log.info(
        "warm-up: the query's plan ran over the last input records in %.1f s (%d task slots; "
        "tasks per stage: %s)", time.monotonic() - began, slots, ", ".join(map(str, tasks)) or "none",
    )  # fmt: skip


def _tasks_per_stage(spark: SparkSession, run_id: str) -> list[int]:
    """The task count of each stage a query's run ran (its jobs' group is its run id)."""
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(j) for j in sorted(tracker.getJobIdsForGroup(run_id))]
    stages = [tracker.getStageInfo(s) for job in jobs if job is not None for s in sorted(job.stageIds)]
    return [stage.numTasks for stage in stages if stage is not None]
