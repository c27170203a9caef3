"""What StreamApp records next to Spark's checkpoint: the number of state partitions, and the
stateful steps whose state the checkpoint holds.

Spark fixes ``spark.sql.shuffle.partitions`` — the number of state store partitions of every
stateful step — when a checkpoint is created, and silently keeps it on every restart whatever the
configuration says. Every state partition costs time in every micro-batch (measured here: a
RocksDB groupBy-count batch takes ≈ 270 ms with 2 partitions, ≈ 6.3 s with Spark's default 200),
so the number is chosen deliberately: ``spec.statePartitions``, else the largest partition count
of the input topics (Kafka Streams' task count, and the most executors the operator will run),
at most a local master's task slots (a partition more than there are slots only adds its cost).
It is written to ``<checkpoint>/streamapp.json`` when the checkpoint is created; a later start
asking for a different number fails with an error that says why, instead of being ignored.

The record also holds the topology's state fingerprint (:mod:`streamapp.runtime.topology.state`):
a start whose stateful steps differ from the recorded ones fails with
:class:`errors.IncompatibleState` before the query reads a byte of that state, since Spark would
mostly read it silently and wrongly. A record without one (an older checkpoint) gets it.
The record also says how task-grouped state is keyed (``taskKeys``, see :data:`TASK_KEYS_CONF`):
``spread`` for a checkpoint created since the tasks of a stateful step are spread over the state
partitions, ``task`` for an older checkpoint holding state, whose groups stay where they are.
And it holds the number of *tasks* (``tasks``, see :data:`TASKS_CONF`): Kafka Streams' task count,
the partitions of its repartition topics, by which a step after a key change groups its records
(each task keeps its own stream time). It is the input's largest partition count, fixed like the
state partitions, and independent of them: any number of tasks spreads over any number of state
partitions. An older checkpoint, whose tasks were its state partitions, records that. How a
record finds its task (``taskHash``, :data:`TASK_HASH_CONF`) is Kafka's partitioner on the
serialised key, as Kafka Streams' repartition topic; an older checkpoint keeps Spark's hash.
The JVM's windowed aggregations key their state by a text key's bytes (``windowKeys``,
:data:`WINDOW_KEYS_CONF`); an older checkpoint keeps the strings its state holds. Their sessions
and sliding windows list keys by time bucket in chunks (``windowListing``,
:data:`WINDOW_LISTING_CONF`); an older checkpoint keeps its ring of per-key listings.

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
    "BYTES_KEYS",
    "ENGINE_WINDOWS_CONF",
    "FILE",
    "MURMUR2",
    "SPARK_HASH",
    "TASKS_CONF",
    "TASK_HASH_CONF",
    "TASK_KEYS_CONF",
    "TEXT_KEYS",
    "WINDOW_KEYS_CONF",
    "WINDOW_LISTING_CONF",
    "engine_windows",
    "read_record",
    "recorded_steps",
    "state_partitions",
    "task_hash",
    "tasks",
    "window_keys",
    "window_listing",
]

FILE = "streamapp.json"

#: The session conf that tells the compiler how to key a step grouped by task (an input partition,
#: or a hash bucket of keys): ``spread`` (the default) groups task ``t`` by the key Spark places in
#: state partition ``t mod n`` (``io.streamapp.spark.TaskKey``); ``task`` by ``t`` itself, where
#: Spark's hash piles tasks up (with 4 state partitions, tasks 0, 1 and 3 share partition 3, so
#: one core ran three quarters of a 4-partition windowed aggregation). Only a checkpoint that
#: already holds state keyed the old way keeps ``task``: its state stays readable.
TASK_KEYS_CONF = "streamapp.taskKeys"
SPREAD, BY_TASK = "spread", "task"

#: The session conf that holds the checkpoint's task count (see the module's description).
TASKS_CONF = "streamapp.tasks"

#: The session conf that says how a re-keyed record finds its task (``taskHash`` in the record):
#: ``murmur2``, Kafka's default partitioner on the serialised key, as Kafka Streams' repartition
#: topic places it (which keys share a task decides which share a stream time); ``spark``, Spark's
#: hash of the key, for a checkpoint created before, whose state is grouped that way.
TASK_HASH_CONF = "streamapp.taskHash"
MURMUR2, SPARK_HASH = "murmur2", "spark"

#: The session conf that says how the JVM's windowed aggregations key their state by a text
#: record key (``windowKeys`` in the record): ``bytes``, its UTF-8 bytes as read from Kafka (no
#: decoding into a Java string and encoding back for every state read, write and output row);
#: ``text``, a string, for a checkpoint recorded before, whose state holds string keys.
WINDOW_KEYS_CONF = "streamapp.windowKeys"
BYTES_KEYS, TEXT_KEYS = "bytes", "text"

#: The session conf that says how the JVM's sessions and sliding windows list their keys by time
#: bucket (``windowListing`` in the record): ``chunks``, one map-state value per bucket and batch
#: holding the keys the batch listed there; ``ring``, one entry per key and bucket in a ring of
#: eight map states, for a checkpoint recorded before, whose state is laid out that way.
WINDOW_LISTING_CONF = "streamapp.windowListing"
CHUNKS, RING = "chunks", "ring"

#: The session conf naming the windowed aggregations (comma-separated node names) whose state the
#: checkpoint's Python engine wrote, though the JVM would run them today: they stay on the engine
#: (:func:`streamapp.runtime.topology.state.kept_on_engine`).
ENGINE_WINDOWS_CONF = "streamapp.engineWindows"


def task_hash(spark: SparkSession) -> str:
    """How re-keyed records find their task (:data:`TASK_HASH_CONF`; Kafka's way without a checkpoint)."""
    return str(spark.conf.get(TASK_HASH_CONF, None) or MURMUR2)


def window_keys(spark: SparkSession) -> str:
    """How the JVM's windowed aggregations key their state by a text key (:data:`WINDOW_KEYS_CONF`;
    bytes without a checkpoint)."""
    return str(spark.conf.get(WINDOW_KEYS_CONF, None) or BYTES_KEYS)


def window_listing(spark: SparkSession) -> str:
    """How the JVM's sessions and sliding windows list their keys (:data:`WINDOW_LISTING_CONF`;
    chunks without a checkpoint)."""
    return str(spark.conf.get(WINDOW_LISTING_CONF, None) or CHUNKS)


def tasks(spark: SparkSession) -> int:
    """The tasks a step groups re-keyed records into: the checkpoint's (set by
    :func:`state_partitions`), else, for a plan compiled without one, the state partitions."""
    return int(spark.conf.get(TASKS_CONF, None) or spark.conf.get("spark.sql.shuffle.partitions") or "1")


def engine_windows(spark: SparkSession) -> frozenset[str]:
    """The windowed aggregations kept on the Python engine (set by the driver before it compiles)."""
    names = spark.conf.get(ENGINE_WINDOWS_CONF, None) or ""
    return frozenset(n for n in names.split(",") if n)


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
    recorded steps raise :class:`errors.IncompatibleState`. ``record``: the checkpoint's record
    as the caller read it (:func:`read_record`), else it is read here.
    """
    if tasks is not None and tasks < 1:
        raise ValueError(f"tasks must be at least 1, not {tasks}")
    if requested is not None and requested < 1:
        raise errors.StreamAppError(f"{field} must be at least 1, not {requested}")
    if isinstance(record, _Unread):
        record = read_record(spark, checkpoint)
    # Whether Spark state exists matters only for a checkpoint whose record is missing or older.
    has_state = (record is None or "taskKeys" not in record) and _has_spark_state(spark, checkpoint)
    if record is None and has_state:
        # A checkpoint from before this record existed: Spark kept whatever it was created with.
        current = spark.conf.get("spark.sql.shuffle.partitions")
        record = {"statePartitions": int(current or default), "recordedAfterCreation": True}
    if record is not None:
        # What an older record lacks, as it was then. Before task keys were spread, a checkpoint
        # with state kept it keyed by task (one without takes the spread keys); before tasks were
        # recorded, the tasks after a key change were the state partitions; before the task hash
        # was recorded, it was Spark's; before the window keys were, the JVM's windows kept
        # string keys; before the window listing was, a ring.
        then = {
            "taskKeys": BY_TASK if has_state else SPREAD,
            "tasks": int(record["statePartitions"]),
            "taskHash": SPARK_HASH,
            "windowKeys": TEXT_KEYS,
            "windowListing": RING,
        }
        if not then.keys() <= record.keys():
            record = {**then, **record}
            _write_record(spark, checkpoint, record)
    if record is None:
        partitions = requested or default
        record = {
            "statePartitions": partitions,
            "tasks": tasks or partitions,
            "createdAtMs": int(time.time() * 1000),
            "taskKeys": SPREAD,
            "taskHash": MURMUR2,
            "windowKeys": BYTES_KEYS,
            "windowListing": CHUNKS,
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
    spark.conf.set(TASK_KEYS_CONF, str(record["taskKeys"]))
    spark.conf.set(TASKS_CONF, str(record["tasks"]))
    spark.conf.set(TASK_HASH_CONF, str(record["taskHash"]))
    spark.conf.set(WINDOW_KEYS_CONF, str(record["windowKeys"]))
    spark.conf.set(WINDOW_LISTING_CONF, str(record["windowListing"]))
    return partitions
