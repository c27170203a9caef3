"""State partitions are fixed and recorded when a checkpoint is created, and enforced afterwards;
a checkpoint of another layout is refused."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import pytest

from streamapp.runtime import Serdes, StreamsBuilder, errors
from streamapp.runtime.spark import checkpoints, execution, session
from streamapp.runtime.topology import TimeWindows, state

if TYPE_CHECKING:
    import pathlib
    from collections.abc import Iterator

    from pyspark.sql import SparkSession


@pytest.fixture(autouse=True)
def _task_confs_reset(spark: SparkSession) -> Iterator[None]:
    """The tests here set the session's task conf; the next test (another module's) starts without."""
    yield
    spark.conf.unset(checkpoints.TASKS_CONF)


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
    whatever the state partitions."""

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
    assert session.local_slots(master) == slots


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
        # A record without a fingerprint (or of another fingerprint version) gets this topology's,
        # then holds to it.
        old = tmp_path / "old"
        old.mkdir()
        (old / "streamapp.json").write_text(json.dumps({"statePartitions": 2, "tasks": 2, "layout": 1}))
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
    (checkpoint / "streamapp.json").write_text(
        json.dumps({"statePartitions": 2, "tasks": 2, "layout": 1, "state": written})
    )
    _refused_start(spark, b, checkpoint, errors.IncompatibleState, "changed from 0 to 1")


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


def test_a_new_checkpoint_records_its_layout(spark: SparkSession, tmp_path: pathlib.Path) -> None:
    """A new checkpoint records layout 1 and what it was created with; a restart keeps the record."""
    new = tmp_path / "new"
    checkpoints.state_partitions(spark, str(new), requested=None, default=2, tasks=4)
    created = _record(new)
    assert created == {"statePartitions": 2, "tasks": 4, "createdAtMs": created["createdAtMs"], "layout": 1}
    # A restart of a checkpoint that ran (Spark state beside its record) reads it as it is.
    (new / "offsets").mkdir()
    assert checkpoints.state_partitions(spark, str(new), requested=None, default=3, tasks=6) == 2
    assert _record(new) == created and checkpoints.tasks(spark) == 4


_NO_LAYOUT = "written by an earlier StreamApp, layout 0 (its streamapp.json records none)"


@pytest.mark.parametrize(
    ("record", "found"),
    [
        # Recorded by an earlier StreamApp: no layout (task keys, task hash, window keys and
        # listing each recorded on its own, or not at all).
        ({"statePartitions": 4}, _NO_LAYOUT),
        (
            {"statePartitions": 2, "taskKeys": "spread", "tasks": 4, "taskHash": "murmur2",
             "windowKeys": "bytes", "windowListing": "chunks"},
            _NO_LAYOUT,
        ),
        # Spark state and no record at all: from before the record existed.
        (None, "written by an earlier StreamApp, layout 0 (Spark state without a streamapp.json)"),
        ({"statePartitions": 2, "tasks": 2, "layout": 2}, "written by a later StreamApp, layout 2"),
        ({"statePartitions": 2, "tasks": 2, "layout": "1"}, 'written by another StreamApp, layout "1"'),
    ],
)  # fmt: skip
def test_a_checkpoint_of_another_layout_is_refused_with_how_to_reset(
    spark: SparkSession, tmp_path: pathlib.Path, record: dict[str, object] | None, found: str
) -> None:
    old = tmp_path / "old"
    (old / "offsets").mkdir(parents=True)
    if record is not None:
        (old / "streamapp.json").write_text(json.dumps(record))
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        for _start in range(2):  # refused again: the refusal writes nothing
            with pytest.raises(errors.CheckpointLayoutError) as err:
                checkpoints.state_partitions(spark, str(old), requested=None, default=2, tasks=4)
            message = str(err.value)
            assert message.startswith(f"the checkpoint {old} was {found}; ")
            assert "reads checkpoint layout 1 only" in message
            assert "spec.checkpointLocation" in message and "spec.deployment.reset" in message
        assert sorted(p.name for p in old.iterdir()) == ["offsets", *(["streamapp.json"] if record else [])]
        if record is not None:
            assert _record(old) == record
        assert spark.conf.get("spark.sql.shuffle.partitions") == before
        # A record of another layout is refused without Spark state too (a checkpoint that never
        # ran a batch); a folder without state or record is a new checkpoint.
        (old / "offsets").rmdir()
        if record is not None:
            with pytest.raises(errors.CheckpointLayoutError):
                checkpoints.state_partitions(spark, str(old), requested=None, default=2, tasks=4)
        else:
            assert checkpoints.state_partitions(spark, str(old), requested=None, default=3) == 3
            assert _record(old)["layout"] == 1
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before or "2")


def test_the_driver_refuses_a_checkpoint_of_another_layout_before_its_query_starts(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    """execution.start refuses Spark state without a record (the broker here is unreachable)."""
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    b.stream("in").group_by_key().count().to_stream().to("out")
    checkpoint = tmp_path / "ckpt"
    (checkpoint / "offsets").mkdir(parents=True)
    _refused_start(
        spark, b, checkpoint, errors.CheckpointLayoutError, "written by an earlier StreamApp, layout 0"
    )
    assert not (checkpoint / "streamapp.json").exists()


def _refused_start(
    spark: SparkSession, b: StreamsBuilder, checkpoint: pathlib.Path, error: type[Exception], match: str
) -> None:
    """execution.start refuses the checkpoint before any query starts (the broker is unreachable)."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        with pytest.raises(error, match=match):
            execution.start(
                b.build(),
                execution.RunConfig(
                    name="refused",
                    bootstrap="127.0.0.1:9",
                    checkpoint=str(checkpoint),
                    master=None,
                    spark=spark,
                ),
            )
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before or "2")
    assert spark.streams.active == []
