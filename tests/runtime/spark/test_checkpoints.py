"""State partitions are fixed and recorded when a checkpoint is created, and enforced afterwards."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import pytest

from streamapp.runtime import Serdes, StreamsBuilder, errors
from streamapp.runtime.spark import checkpoints, execution
from streamapp.runtime.topology import TimeWindows, state

if TYPE_CHECKING:
    import pathlib
    from collections.abc import Iterator

    from pyspark.sql import SparkSession


@pytest.fixture(autouse=True)
def _task_confs_reset(spark: SparkSession) -> Iterator[None]:
    """The tests here set the session's task confs; the next test (another module's) starts without."""
    yield
    spark.conf.unset(checkpoints.TASKS_CONF)
    spark.conf.unset(checkpoints.TASK_HASH_CONF)
    spark.conf.unset(checkpoints.WINDOW_KEYS_CONF)
    spark.conf.unset(checkpoints.WINDOW_LISTING_CONF)
    spark.conf.set(checkpoints.TASK_KEYS_CONF, checkpoints.SPREAD)


def _record(folder: pathlib.Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((folder / "streamapp.json").read_text())
    return loaded


def test_state_partitions_are_recorded_then_kept_and_a_change_is_refused(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    before = spark.conf.get("spark.sql.shuffle.partitions")
    checkpoint = str(tmp_path / "ckpt")
    try:
        assert checkpoints.state_partitions(spark, checkpoint, requested=None, default=6) == 6
        assert spark.conf.get("spark.sql.shuffle.partitions") == "6"
        assert json.loads((tmp_path / "ckpt" / "streamapp.json").read_text())["statePartitions"] == 6
        # Written atomically through the checkpoint file manager: no temporary file, no .crc left.
        assert [p.name for p in (tmp_path / "ckpt").iterdir()] == ["streamapp.json"]
        # A restart keeps the recorded number whatever the default (the input gained partitions).
        assert checkpoints.state_partitions(spark, checkpoint, requested=None, default=12) == 6
        assert checkpoints.state_partitions(spark, checkpoint, requested=6, default=1) == 6
        with pytest.raises(errors.StreamAppError) as err:
            checkpoints.state_partitions(spark, checkpoint, requested=8, default=1)
        assert "spec.statePartitions is 8" in str(err.value) and "created with 6" in str(err.value)
        # A URI works too (Hadoop's FileSystem), and a requested number wins on a new checkpoint.
        uri = (tmp_path / "other").as_uri()
        assert checkpoints.state_partitions(spark, uri, requested=3, default=1) == 3
        assert checkpoints.read_record(spark, uri) is not None
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before or "2")


def test_tasks_are_recorded_beside_and_independent_of_the_state_partitions(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    """Kafka Streams' task count (its repartition topics' partitions) is fixed with the checkpoint,
    whatever the state partitions; an older record's tasks were its state partitions."""

    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        new = tmp_path / "new"
        assert checkpoints.state_partitions(spark, str(new), requested=None, default=2, tasks=6) == 2
        assert _record(new)["tasks"] == 6 and _record(new)["statePartitions"] == 2
        assert spark.conf.get(checkpoints.TASKS_CONF) == "6" and checkpoints.tasks(spark) == 6
        # A restart keeps them, whatever the input has now.
        checkpoints.state_partitions(spark, str(new), requested=None, default=4, tasks=8)
        assert checkpoints.tasks(spark) == 6 and _record(new)["tasks"] == 6
        # Without a task count, as many tasks as state partitions.
        alone = tmp_path / "alone"
        checkpoints.state_partitions(spark, str(alone), requested=3, default=1)
        assert _record(alone)["tasks"] == 3 and checkpoints.tasks(spark) == 3
        # Recorded before tasks were (spread keys or not): the tasks were the state partitions.
        for keys in ("spread", "task"):
            old = tmp_path / f"old-{keys}"
            (old / "offsets").mkdir(parents=True)
            (old / "streamapp.json").write_text(json.dumps({"statePartitions": 4, "taskKeys": keys}))
            assert checkpoints.state_partitions(spark, str(old), requested=None, default=2, tasks=6) == 4
            assert _record(old) == {
                "statePartitions": 4, "taskKeys": keys, "tasks": 4, "taskHash": "spark", "windowKeys": "text",
                "windowListing": "ring",
            }  # fmt: skip
            assert checkpoints.tasks(spark) == 4
        # A plan compiled without a checkpoint record: its state partitions.
        spark.conf.unset(checkpoints.TASKS_CONF)
        spark.conf.set("spark.sql.shuffle.partitions", "5")
        assert checkpoints.tasks(spark) == 5
        with pytest.raises(ValueError, match="tasks must be at least 1"):
            checkpoints.state_partitions(spark, str(tmp_path / "bad"), requested=None, default=1, tasks=0)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before or "2")


@pytest.mark.parametrize(
    ("master", "slots"),
    [("local", 1), ("local[2]", 2), ("local[3,4]", 3), ("local[*]", os.cpu_count()),
     ("local[*,2]", os.cpu_count()), ("local-cluster[2,1,1024]", None), ("k8s://https://h:443", None),
     ("spark://h:7077", None)],
)  # fmt: skip
def test_local_slots_are_read_from_the_master(master: str, slots: int | None) -> None:
    assert execution.local_slots(master) == slots


def test_a_checkpoint_refuses_a_topology_whose_state_it_cannot_hold(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    def per_window(size: str) -> list[dict[str, object]]:
        b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
        windows = TimeWindows.of_size_and_grace(size, "0s")
        b.stream("in").group_by_key().windowed_by(windows).count().to_stream().to("out")
        return state.fingerprint(b.build())

    before = spark.conf.get("spark.sql.shuffle.partitions")
    checkpoint = str(tmp_path / "ckpt")
    try:
        checkpoints.state_partitions(spark, checkpoint, requested=None, default=2, steps=per_window("1m"))
        recorded = json.loads((tmp_path / "ckpt" / "streamapp.json").read_text())["state"]
        assert recorded == {"version": state.VERSION, "steps": per_window("1m")}
        checkpoints.state_partitions(spark, checkpoint, requested=None, default=2, steps=per_window("1m"))
        with pytest.raises(errors.IncompatibleState) as err:
            checkpoints.state_partitions(spark, checkpoint, requested=None, default=2, steps=per_window("5m"))
        assert "windows was 'tumbling 60000 ms', now 'tumbling 300000 ms'" in str(err.value)
        assert "spec.deployment.reset" in str(err.value)
        # A checkpoint recorded before fingerprints existed gets this topology's, then holds to it.
        old = tmp_path / "old"
        old.mkdir()
        (old / "streamapp.json").write_text(json.dumps({"statePartitions": 2}))
        checkpoints.state_partitions(spark, str(old), requested=None, default=2, steps=per_window("5m"))
        assert json.loads((old / "streamapp.json").read_text())["state"]["steps"] == per_window("5m")
        with pytest.raises(errors.IncompatibleState):
            checkpoints.state_partitions(spark, str(old), requested=None, default=2, steps=per_window("1m"))
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before or "2")


def test_the_driver_refuses_before_its_query_reads_the_state(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    """execution.start checks the fingerprint before it reads Kafka (the broker here is unreachable)."""
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    b.stream("in").group_by_key().count().to_stream().to("out")
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    written = {"version": state.VERSION, "steps": []}  # a stateless app wrote this checkpoint
    (checkpoint / "streamapp.json").write_text(json.dumps({"statePartitions": 2, "state": written}))
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        with pytest.raises(errors.IncompatibleState, match="changed from 0 to 1"):
            execution.start(
                b.build(), name="refused", bootstrap="127.0.0.1:9", checkpoint=str(checkpoint),
                master=None, spark=spark,
            )  # fmt: skip
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before or "2")
    assert spark.streams.active == []


def test_task_keys_are_spread_on_a_new_checkpoint_and_kept_by_task_on_an_old_one_with_state(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        new = tmp_path / "new"
        checkpoints.state_partitions(spark, str(new), requested=None, default=4)
        assert _record(new)["taskKeys"] == "spread" and spark.conf.get(checkpoints.TASK_KEYS_CONF) == "spread"
        # Recorded before task keys existed, with Spark state (an offset log): its groups stay keyed
        # by task number, and the record says so from now on.
        old = tmp_path / "old"
        (old / "offsets").mkdir(parents=True)
        (old / "streamapp.json").write_text(json.dumps({"statePartitions": 4}))
        checkpoints.state_partitions(spark, str(old), requested=None, default=4)
        assert _record(old)["taskKeys"] == "task" and spark.conf.get(checkpoints.TASK_KEYS_CONF) == "task"
        checkpoints.state_partitions(spark, str(old), requested=None, default=4)
        assert spark.conf.get(checkpoints.TASK_KEYS_CONF) == "task"
        # The same without state (never ran a batch): nothing is keyed yet, it takes the spread keys.
        empty = tmp_path / "empty"
        empty.mkdir()
        (empty / "streamapp.json").write_text(json.dumps({"statePartitions": 4}))
        checkpoints.state_partitions(spark, str(empty), requested=None, default=4)
        assert _record(empty)["taskKeys"] == "spread"
        assert spark.conf.get(checkpoints.TASK_KEYS_CONF) == "spread"
        # Older still (no record at all, but state): by task.
        older = tmp_path / "older"
        (older / "offsets").mkdir(parents=True)
        checkpoints.state_partitions(spark, str(older), requested=None, default=4)
        assert _record(older)["taskKeys"] == "task"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before or "2")
        spark.conf.unset(checkpoints.TASKS_CONF)


def test_spread_task_keys_put_task_t_in_state_partition_t_mod_n(spark: SparkSession) -> None:
    """Spark's hash partitioning (Murmur3, seed 42: the SQL ``hash``) of the task key, for every
    number of state partitions; grouped by the task number itself, tasks pile up."""
    from pyspark.sql import functions as F

    from streamapp.runtime.spark.stateful import engine

    tasks = spark.range(64).select(F.col("id").cast("int").alias("t"))
    n_values = range(1, 9)
    rows = tasks.select(
        "t",
        engine.task_key(spark, F.col("t")).alias("k"),
        *[F.pmod(F.hash(engine.task_key(spark, F.col("t"))), F.lit(n)).alias(f"b{n}") for n in n_values],
        F.pmod(F.hash("t"), F.lit(4)).alias("by_task4"),
    ).collect()
    assert len({r["k"] for r in rows}) == 64
    for r in rows:
        assert [r[f"b{n}"] for n in n_values] == [r["t"] % n for n in n_values]
    # What the spread keys fix: tasks 0-3 by their own number use 2 of 4 partitions.
    assert sorted({r["by_task4"] for r in rows if r["t"] < 4}) == [2, 3]
    spark.conf.set(checkpoints.TASK_KEYS_CONF, "task")
    try:
        same = tasks.select(engine.task_key(spark, F.col("t")).alias("k")).collect()
        assert [r["k"] for r in same] == list(range(64))
    finally:
        spark.conf.set(checkpoints.TASK_KEYS_CONF, "spread")


def test_a_new_checkpoint_places_re_keyed_records_as_kafka_does_and_an_older_one_as_it_did(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    """Kafka's partitioner on the serialised key (Kafka Streams' repartition topic) for a new
    checkpoint; Spark's hash for one recorded before (its task-grouped state was placed so)."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        new = tmp_path / "new"
        checkpoints.state_partitions(spark, str(new), requested=None, default=2, tasks=4)
        assert _record(new)["taskHash"] == "murmur2" and checkpoints.task_hash(spark) == "murmur2"
        checkpoints.state_partitions(spark, str(new), requested=None, default=2, tasks=4)
        assert checkpoints.task_hash(spark) == "murmur2"
        older = tmp_path / "older"  # recorded by the previous release: tasks, but no task hash
        (older / "offsets").mkdir(parents=True)
        (older / "streamapp.json").write_text(
            json.dumps({"statePartitions": 2, "taskKeys": "spread", "tasks": 4})
        )
        checkpoints.state_partitions(spark, str(older), requested=None, default=2, tasks=4)
        assert _record(older)["taskHash"] == "spark" and checkpoints.task_hash(spark) == "spark"
        spark.conf.unset(checkpoints.TASK_HASH_CONF)
        assert checkpoints.task_hash(spark) == "murmur2"  # a plan compiled without a checkpoint
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before or "2")


def test_a_new_checkpoint_keys_window_state_by_a_text_keys_bytes_and_an_older_one_by_strings(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    """The JVM's windowed aggregations keep a text key as its bytes in a new checkpoint's state;
    a checkpoint recorded before keeps strings (its state holds them: Spark refuses another key
    schema), also after a restart."""
    new = tmp_path / "new"
    checkpoints.state_partitions(spark, str(new), requested=None, default=2, tasks=4)
    assert _record(new)["windowKeys"] == "bytes" and checkpoints.window_keys(spark) == "bytes"
    older = tmp_path / "older"  # recorded by the previous release: everything but the window keys
    (older / "offsets").mkdir(parents=True)
    recorded = {"statePartitions": 2, "taskKeys": "spread", "tasks": 4, "taskHash": "murmur2"}
    (older / "streamapp.json").write_text(json.dumps(recorded))
    for _restart in range(2):
        checkpoints.state_partitions(spark, str(older), requested=None, default=2, tasks=4)
        assert _record(older) == {**recorded, "windowKeys": "text", "windowListing": "ring"}
        assert checkpoints.window_keys(spark) == "text"
    checkpoints.state_partitions(spark, str(new), requested=None, default=2, tasks=4)
    assert checkpoints.window_keys(spark) == "bytes"
    spark.conf.unset(checkpoints.WINDOW_KEYS_CONF)
    assert checkpoints.window_keys(spark) == "bytes"  # a plan compiled without a checkpoint


def test_a_new_checkpoint_lists_window_keys_in_chunks_and_an_older_one_in_its_ring(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    """Sessions and sliding windows on the JVM list their keys by time bucket in chunks in a new
    checkpoint; a checkpoint recorded before keeps its ring of map states (its state is laid out
    that way), also after a restart."""
    new = tmp_path / "new"
    checkpoints.state_partitions(spark, str(new), requested=None, default=2, tasks=4)
    assert _record(new)["windowListing"] == "chunks" and checkpoints.window_listing(spark) == "chunks"
    older = tmp_path / "older"  # recorded by the previous release: everything but the listing
    (older / "offsets").mkdir(parents=True)
    recorded = {
        "statePartitions": 2,
        "taskKeys": "spread",
        "tasks": 4,
        "taskHash": "murmur2",
        "windowKeys": "bytes",
    }
    (older / "streamapp.json").write_text(json.dumps(recorded))
    for _restart in range(2):
        checkpoints.state_partitions(spark, str(older), requested=None, default=2, tasks=4)
        assert _record(older) == {**recorded, "windowListing": "ring"}
        assert checkpoints.window_listing(spark) == "ring"
    checkpoints.state_partitions(spark, str(new), requested=None, default=2, tasks=4)
    assert checkpoints.window_listing(spark) == "chunks"
    spark.conf.unset(checkpoints.WINDOW_LISTING_CONF)
    assert checkpoints.window_listing(spark) == "chunks"  # a plan compiled without a checkpoint
