"""The JVM half of StreamApp's Kafka sink, called per micro-batch.

``KafkaRecordWriter.java`` writes a batch's rows with explicit timestamps from the executors' JVMs
(``TransactionalRecordWriter.java`` does it exactly once) — no rows cross into Python, so the sink
costs what Spark's own Kafka sink costs. The classes are StreamApp's JVM library (``runtime/jvm``,
built by ``make setup``), which every session puts on ``spark.jars``
(:func:`streamapp.runtime.embedded.artifacts.runtime_jar`).
"""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "CLASS",
    "SINK_FORMAT",
    "SINK_OPTION",
    "TRANSACTIONAL_CLASS",
    "dry_run",
    "gate",
    "register",
    "warm_up",
    "write",
    "write_transactional",
    "written",
]

CLASS = "io.streamapp.spark.KafkaRecordWriter"
TRANSACTIONAL_CLASS = "io.streamapp.spark.TransactionalRecordWriter"


def _java_map(jvm: Any, mapping: Mapping[str, str]) -> Any:
    """A ``java.util.HashMap`` of ``mapping`` (the writers' Kafka client configuration)."""
    out = jvm.java.util.HashMap()
    for key, value in mapping.items():
        out.put(key, value)
    return out


#: Per writer class and configuration: (the JVM view, the class, the configuration as a Java map).
#: A micro-batch's write is then one py4j call; looking the class up (a round trip per name of
#: its package) and filling the map (one per entry) took a median 4-5 ms a batch in a driver's
#: first query. The writers copy the map, so sharing it is safe.
_PREPARED: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[Any, Any, Any]] = {}


def _prepared(jvm: Any, class_name: str, config: Mapping[str, str]) -> tuple[Any, Any]:
    """The writer class ``class_name`` and ``config`` as a Java map, made once per JVM view."""
    key = (class_name, tuple(sorted(config.items())))
    made = _PREPARED.get(key)
    if made is None or made[0] is not jvm:  # a new SparkContext brings a new view
        made = (jvm, functools.reduce(getattr, class_name.split("."), jvm), _java_map(jvm, config))
        _PREPARED[key] = made
    return made[1], made[2]


def gate(
    jvm: Any, producer_config: Mapping[str, str], *, transactional: tuple[str, ...] | None = None
) -> Any:
    """A new ``BatchGate`` around the at-least-once writer or, with ``transactional`` (prefix,
    marker topic, marker group, metadata head and tail), the exactly-once one."""
    gates = jvm.io.streamapp.spark.BatchGate
    config = _java_map(jvm, producer_config)
    return gates.kafka(config) if transactional is None else gates.exactlyOnce(config, *transactional)


#: ``writeStream.format`` of the at-least-once sink (``KafkaSink.java``), and its one option.
SINK_FORMAT = "io.streamapp.spark.KafkaSink"
SINK_OPTION = "streamapp.sink"


def register(jvm: Any, gate: Any, producer_config: Mapping[str, str]) -> str:
    """Register a query's gate and producer configuration with ``KafkaSink``; returns the value of
    :data:`SINK_OPTION`."""
    return str(jvm.io.streamapp.spark.KafkaSink.register(gate, _java_map(jvm, producer_config)))


#: Per topic, the records a micro-batch wrote and their largest timestamp (epoch ms).
Written = dict[str, tuple[int, int | None]]


def written(jvm: Any, registered: str, batch_id: int) -> Written | None:
    """What ``KafkaSink`` wrote in micro-batch ``batch_id``; None if the sink does not (or no
    longer) know the batch."""
    text = jvm.io.streamapp.spark.KafkaSink.written(registered, batch_id)
    return None if text is None else _written(json.loads(str(text)))


def reports_after(
    jvm: Any, query: Any, last: tuple[str, int], registered: str | None
) -> list[tuple[dict[str, Any], Written | None]]:
    """The progress reports of ``query`` (its JVM object) made after ``last`` (a report's
    timestamp and batch id), oldest first, each with what ``KafkaSink`` wrote in its batch when
    ``registered`` names the query's sink registration (else None): a py4j call per 6,000
    characters of reports (``ProgressReports.java``)."""
    reader = _READERS.get(jvm)
    if reader is None:  # looked up once: each step of ``jvm.io.streamapp…`` is a py4j call
        reader = _READERS[jvm] = jvm.io.streamapp.spark.ProgressReports
    found: list[tuple[dict[str, Any], Written | None]] = []
    while True:
        answer = json.loads(str(reader.after(query, last[0], last[1], registered)))
        for report, counts in answer["reports"]:
            found.append((report, None if counts is None else _written(counts)))
            last = (str(report["timestamp"]), int(report["batchId"]))
        if not answer["more"]:
            return found


def _written(parsed: Mapping[str, list[Any]]) -> Written:
    return {topic: (int(n), None if stamp is None else int(stamp)) for topic, (n, stamp) in parsed.items()}


#: jvm → its ``ProgressReports`` class
_READERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def write(batch: DataFrame, producer_config: Mapping[str, str]) -> None:
    """Write ``batch`` (the sink columns) to Kafka from the executors' JVMs."""
    jvm = batch.sparkSession.sparkContext._jvm
    assert jvm is not None
    writer, config = _prepared(jvm, CLASS, producer_config)
    writer.write(batch._jdf, config)


def write_transactional(
    batch: DataFrame,
    producer_config: Mapping[str, str],
    *,
    transactional_prefix: str,
    marker_topic: str,
    marker_group: str,
    batch_id: int,
    metadata: str,
) -> list[tuple[int, int, bool]]:
    """Write ``batch`` exactly once as micro-batch ``batch_id`` (see TransactionalRecordWriter);
    returns ``(partition, records written, skipped as already committed)`` per task with rows."""
    jvm = batch.sparkSession.sparkContext._jvm
    assert jvm is not None
    writer, config = _prepared(jvm, TRANSACTIONAL_CLASS, producer_config)
    outcomes = writer.write(
        batch._jdf, config, transactional_prefix, marker_topic, marker_group, batch_id, metadata
    )
    return [(int(o[0]), int(o[1]), bool(o[2])) for o in outcomes]


def dry_run(batch: DataFrame, producer_config: Mapping[str, str], *, marker_topic: str | None) -> int:
    """Run ``batch`` through the writers' own path, the rows made into records and none sent
    (``SinkWarmUp.dryRun``); with ``marker_topic`` (exactly once), its partitions are looked up
    on the driver as a write would, none made. Returns the number of records made."""
    jvm = batch.sparkSession.sparkContext._jvm
    assert jvm is not None
    return int(
        jvm.io.streamapp.spark.SinkWarmUp.dryRun(batch._jdf, _java_map(jvm, producer_config), marker_topic)
    )


def warm_up(
    spark: SparkSession,
    producer_config: Mapping[str, str],
    topics: list[str],
    *,
    marker_topic: str | None = None,
    marker_group: str | None = None,
) -> None:
    """Ready the sink on the executors before the query's first micro-batch (``SinkWarmUp.java``):
    the shared producer (at least once) or the marker reader (exactly once, with ``marker_topic``),
    connected, with the metadata of ``topics`` (existing ones: a missing topic would block)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    config = _java_map(jvm, producer_config)
    listed = jvm.java.util.ArrayList()
    for topic in topics:
        listed.add(topic)
    sc = spark.sparkContext
    tasks = 2 * max(sc.defaultParallelism, 1)  # every executor's task slots, twice
    jvm.io.streamapp.spark.SinkWarmUp.run(
        spark._jsparkSession, config, listed, marker_topic, marker_group, tasks
    )
