"""The plan a query runs: the topology compiled over its Kafka reads, and what counts its records.

:func:`build` compiles the topology (:mod:`.compiler`) over :class:`Reads`, the Kafka source of
each source node, and adds the sinks' observations; :func:`counted_topics` reads the counts back
from a micro-batch's progress. The query (:func:`.execution.start`) and the warm-up before it
(:mod:`.warm_up`) run the same plan.

Counting records per topic: each source frame and the sink rows carry a Spark observation
(``Dataset.observe``) — one ``count_if(topic = …)`` per topic — so every micro-batch's progress
reports exactly how many records it read from and wrote to each topic, computed in the same
pass that processes them (no second read, nothing collected to the driver).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamapp.runtime.kafka import security
from streamapp.runtime.spark import compiler, kafka_io, query_metrics
from streamapp.runtime.spark.stateful import frontier

if TYPE_CHECKING:
    from streamapp.runtime.topology.graph import Topology

__all__ = ["READ_PREFIX", "WRITTEN", "Reads", "build", "counted_topics", "source_description"]

#: Observation names in a progress's ``observedMetrics``: one per source frame, one for the sink
#: (WRITTEN where the metrics' own, :data:`query_metrics.OBSERVATION`, is not in the plan).
READ_PREFIX = "streamapp_read_"
WRITTEN = "streamapp_written"


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
    ``written``: the records written per topic as the sink counted them
    (:meth:`.execution.Execution.reports_after`)."""
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
class Reads:
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

    def again(self, starting: Callable[[Sequence[str]], str], **options: str) -> Reads:
        """The same reads from other offsets (and with ``options`` added), with observations of
        their own."""
        merged = {**self.options, **options}
        return dataclasses.replace(
            self, options=merged, starting=starting, observed={}, read_sources={}, _counted=set()
        )


def build(
    topology: Topology, reads: Reads, checkpoint: str, *, sink_counts: Callable[[compiler.Compiled], bool]
) -> tuple[compiler.Compiled, DataFrame]:
    """The topology compiled over ``reads``, and the plan the query runs: with the sinks'
    observations (metrics; with counting, the records per topic) unless ``sink_counts(compiled)``
    (the sink counts the records it writes: :func:`.runner.written`)."""
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
