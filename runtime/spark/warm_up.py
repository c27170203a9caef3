"""The warm-up a hand-over's new driver runs in standby, before its query starts.

A driver taking over from a running one (a rolling hand-over: :mod:`streamapp.runtime.app.handover`)
has Spark up and the plan compiled while the other still writes. :func:`warm` then runs the query's
own plan once over the last input records (:func:`run`) and readies the sink's producers on the
executors (:func:`ready_sink`), so that the query's first micro-batch costs what a later one does.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from streamapp.runtime import errors
from streamapp.runtime.kafka import admin, security
from streamapp.runtime.spark import checkpoints, compiler, jvm_sink, plan, runner, session, sink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamapp.runtime.topology.graph import Topology

__all__ = [
    "EXECUTORS_TIMEOUT_S",
    "WARM_UP_TIMEOUT_S",
    "WarmUpFailed",
    "ready_sink",
    "run",
    "task_slots",
    "warm",
]

#: The name the warm-up has always logged under (the sink's dry run logs there too: :mod:`.sink`).
_log = logging.getLogger("streamapp.execution")

#: How long a warm-up run may take before the query starts without it.
WARM_UP_TIMEOUT_S = 120

#: How long a warm-up waits for the executors the driver asked for to register.
EXECUTORS_TIMEOUT_S = 60


class WarmUpFailed(errors.RunFailed):
    """The plan failed on the last input records: this revision would fail on them too."""


def warm(
    spark: SparkSession,
    topology: Topology,
    *,
    reads: plan.Reads,
    checkpoint: str,
    trigger: runner.Trigger,
    prints: bool,
    exactly_once: sink.ExactlyOnce | None,
    sink_counts: Callable[[compiler.Compiled], bool],
) -> None:
    """The plan once over the last input records through a dry run of the sink (:func:`run`),
    then the sink's producers readied (:func:`ready_sink`); a real-time query (Spark's own sink)
    runs the plan into Spark's ``noop`` sink and readies nothing."""
    writer = None
    if trigger.kind != "real-time":  # real-time writes with Spark's own sink
        writer = sink.KafkaBatchWriter(
            bootstrap=reads.bootstrap,
            producer_config=reads.credentials.java(),
            prints=prints,
            exactly_once=exactly_once,
            dry_run=True,
        )
    run(spark, topology, reads=reads, checkpoint=checkpoint, writer=writer, sink_counts=sink_counts)
    if writer is not None:
        ready_sink(
            spark, topology, bootstrap=reads.bootstrap, credentials=reads.credentials, eos=exactly_once
        )


def ready_sink(
    spark: SparkSession,
    topology: Topology,
    *,
    bootstrap: str,
    credentials: security.Credentials,
    eos: sink.ExactlyOnce | None,
) -> None:
    """The sink's producers ready on the executors (``SinkWarmUp.java``); a failure only warns:
    the first micro-batch then connects as it would have."""
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


def task_slots(spark: SparkSession, timeout_s: float = EXECUTORS_TIMEOUT_S) -> int:
    """The task slots of the executors the driver asked for (``spark.executor.instances`` ×
    ``spark.executor.cores``), once they have registered — at most ``timeout_s``, after which the
    registered ones count (a warning says so). Local mode: its cores."""
    if (local := session.local_slots(spark.sparkContext.master)) is not None:
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


def run(
    spark: SparkSession,
    topology: Topology,
    *,
    reads: plan.Reads,
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
    began = time.monotonic()
    slots = task_slots(spark)
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
        compiled, frame = plan.build(
            topology, reads.again(last, minPartitions=str(slots)), folder, sink_counts=sink_counts
        )
        stream = (
            frame.writeStream.format("noop") if writer is None else frame.writeStream.foreachBatch(writer)
        )
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
