"""What StreamApp records next to Spark's checkpoint, in ``<checkpoint>/streamapp.json``: the
layout of the checkpoint, its number of state partitions and of tasks, and the stateful steps
whose state it holds.

The layout (``"layout": 1``, :data:`LAYOUT`) is how StreamApp lays its state out in Spark's, one
way for all of it: a step grouped by task groups task ``t`` by the key Spark places in state
partition ``t mod n`` (``io.streamapp.spark.TaskKey``: the tasks spread over the state
partitions); a re-keyed record finds its task by Kafka's partitioner (murmur2) on its serialised
key, as Kafka Streams' repartition topic places it; the JVM's windowed aggregations key their
state by a text key's UTF-8 bytes, and their sessions and sliding windows list their keys by time
bucket in chunks (``KeyListing``). A checkpoint in any other layout — a record without a
layout or with another one, or Spark state without a record — was written by another StreamApp
(no released one: the layouts before 1 are gone), whose state Spark would read silently and
wrongly, or fail on somewhere in a micro-batch; a start refuses it with
:class:`errors.CheckpointLayoutError`, which says what it found and how to reset (a fresh
checkpoint reprocesses the input).

Spark fixes ``spark.sql.shuffle.partitions`` — the number of state store partitions of every
stateful step — when a checkpoint is created, and silently keeps it on every restart whatever the
configuration says. Every state partition costs time in every micro-batch (measured here: a
RocksDB groupBy-count batch takes ≈ 270 ms with 2 partitions, ≈ 6.3 s with Spark's default 200),
so the number is chosen deliberately: ``spec.statePartitions``, else the largest partition count
of the input topics (Kafka Streams' task count, and the most executors the operator will run),
at most a local master's task slots (a partition more than there are slots only adds its cost).
It is recorded when the checkpoint is created; a later start asking for a different number fails
with an error that says why, instead of being ignored.

The record holds the number of *tasks* (``tasks``, see :data:`TASKS_CONF`) too: Kafka Streams'
task count, the partitions of its repartition topics, by which a step after a key change groups
its records (each task keeps its own stream time). It is the input's largest partition count,
fixed like the state partitions, and independent of them: any number of tasks spreads over any
number of state partitions.

And it holds the topology's state fingerprint (:mod:`streamapp.runtime.topology.state`): a start
whose stateful steps differ from the recorded ones fails with :class:`errors.IncompatibleState`
before the query reads a byte of that state, since Spark would mostly read it silently and
wrongly. A record without one, or with one of another fingerprint version, gets the topology's.

The checkpoint may be a local path or any Hadoop-compatible URI (the file goes through Hadoop's
FileSystem, like Spark's own checkpoint files).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from streamapp.runtime import errors
from streamapp.runtime.topology import state

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "FILE",
    "LAYOUT",
    "TASKS_CONF",
    "read_record",
    "recorded_steps",
    "state_partitions",
    "tasks",
]

FILE = "streamapp.json"

#: The layout of the checkpoints this StreamApp writes and reads (``layout`` in the record; see
#: the module's description). Another is refused, not converted.
LAYOUT = 1

#: The session conf that holds the checkpoint's task count (see the module's description).
TASKS_CONF = "streamapp.tasks"


def tasks(spark: SparkSession) -> int:
    """The tasks a step groups re-keyed records into: the checkpoint's (set by
    :func:`state_partitions`), else, for a plan compiled without one, the state partitions."""
    return int(spark.conf.get(TASKS_CONF, None) or spark.conf.get("spark.sql.shuffle.partitions") or "1")


def recorded_steps(record: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The stateful steps of a checkpoint's ``record`` (:func:`read_record`; its fingerprint);
    None without one (a new checkpoint, or one recorded in another fingerprint version)."""
    recorded = (record or {}).get("state") or {}
    return recorded.get("steps") if recorded.get("version") == state.VERSION else None


def _record_file(spark: SparkSession, checkpoint: str) -> tuple[Any, Any]:
    """The checkpoint file manager Spark's own checkpoint files go through (session.py sets
    StreamApp's for local disks), made ready for ``checkpoint``, and the record's path."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    folder = jvm.org.apache.hadoop.fs.Path(checkpoint.rstrip("/"))
    managers = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    manager = managers.create(folder, spark._jsparkSession.sessionState().newHadoopConf())
    return manager, jvm.org.apache.hadoop.fs.Path(folder, FILE)


def read_record(spark: SparkSession, checkpoint: str) -> dict[str, Any] | None:
    """The record of ``checkpoint``, or None when it has none yet."""
    manager, path = _record_file(spark, checkpoint)
    if not manager.exists(path):
        return None
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    stream = manager.open(path)
    try:
        text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
    record: dict[str, Any] = json.loads(text)
    return record


def _write_record(spark: SparkSession, checkpoint: str, record: dict[str, Any]) -> None:
    """Write the record atomically: a crash mid-write leaves the previous one."""
    manager, path = _record_file(spark, checkpoint)
    manager.mkdirs(path.getParent())
    out = manager.createAtomic(path, True)
    try:
        out.write(bytearray(json.dumps(record, indent=2).encode()))
    except BaseException:
        out.cancel()
        raise
    out.close()


def delete(spark: SparkSession, location: str) -> None:
    """Remove a folder under a checkpoint, wherever it is (Hadoop's file systems); none is fine."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(location)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if fs.exists(path):
        fs.delete(path, True)


class _Unread:
    """The record not read yet (:func:`state_partitions`)."""


_UNREAD = _Unread()


def _has_spark_state(spark: SparkSession, checkpoint: str) -> bool:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    offsets = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/offsets")
    return bool(offsets.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(offsets))


def _refuse_another_layout(spark: SparkSession, checkpoint: str, record: dict[str, Any] | None) -> None:
    """Raise :class:`errors.CheckpointLayoutError` unless ``checkpoint`` is new or of :data:`LAYOUT`."""
    if record is None:
        if _has_spark_state(spark, checkpoint):
            found = f"written by an earlier StreamApp, layout 0 (Spark state without a {FILE})"
            raise errors.CheckpointLayoutError(checkpoint, found, layout=LAYOUT)
        return
    layout = record.get("layout")
    number = layout if isinstance(layout, int) and not isinstance(layout, bool) else None
    if number == LAYOUT:
        return
    if layout is None:
        found = f"written by an earlier StreamApp, layout 0 (its {FILE} records none)"
    elif number is None:
        found = f"written by another StreamApp, layout {json.dumps(layout)}"
    else:
        found = f"written by {'a later' if number > LAYOUT else 'an earlier'} StreamApp, layout {number}"
    raise errors.CheckpointLayoutError(checkpoint, found, layout=LAYOUT)


def state_partitions(
    spark: SparkSession,
    checkpoint: str,
    *,
    requested: int | None,
    default: int,
    tasks: int | None = None,
    field: str = "spec.statePartitions",
    steps: list[dict[str, Any]] | None = None,
    record: dict[str, Any] | _Unread | None = _UNREAD,
) -> int:
    """The state partitions to run with; sets them on the session (call before the query starts).

    A new checkpoint records ``requested`` (else ``default``); an existing one keeps its number,
    and a different ``requested`` is an error naming ``field``. ``tasks`` (default: as many as
    state partitions) is recorded for a new checkpoint and kept for an existing one; both are set
    on the session. ``steps`` (the topology's state fingerprint) is recorded likewise; different
    recorded steps raise :class:`errors.IncompatibleState`. A checkpoint of another layout than
    :data:`LAYOUT` (or with Spark state and no record) raises :class:`errors.CheckpointLayoutError`
    before anything is written. ``record``: the checkpoint's record as the caller read it
    (:func:`read_record`), else it is read here.
    """
    if tasks is not None and tasks < 1:
        raise ValueError(f"tasks must be at least 1, not {tasks}")
    if requested is not None and requested < 1:
        raise errors.StreamAppError(f"{field} must be at least 1, not {requested}")
    if isinstance(record, _Unread):
        record = read_record(spark, checkpoint)
    _refuse_another_layout(spark, checkpoint, record)
    if record is None:
        partitions = requested or default
        record = {
            "statePartitions": partitions,
            "tasks": tasks or partitions,
            "createdAtMs": int(time.time() * 1000),
            "layout": LAYOUT,
        }
        if steps is not None:
            record["state"] = {"version": state.VERSION, "steps": steps}
        _write_record(spark, checkpoint, record)
    else:
        partitions = int(record["statePartitions"])
        if requested is not None and requested != partitions:
            raise errors.StreamAppError(
                f"{field} is {requested}, but the checkpoint {checkpoint} was created with {partitions} "
                "state partitions, and Spark cannot change that for an existing checkpoint: keep "
                f"{partitions}, or reset the app (a new checkpoint location, reprocessing the input)"
            )
        if steps is not None:
            recorded = record.get("state") or {}
            if recorded.get("version") == state.VERSION:
                found = state.changes(recorded.get("steps") or [], steps)
                if found:
                    raise errors.IncompatibleState(checkpoint, found)
            else:
                _write_record(
                    spark, checkpoint, {**record, "state": {"version": state.VERSION, "steps": steps}}
                )
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    spark.conf.set(TASKS_CONF, str(record["tasks"]))
    return partitions
