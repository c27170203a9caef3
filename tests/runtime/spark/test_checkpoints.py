"""State partitions are fixed and recorded when a checkpoint is created, and enforced afterwards."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from streamapp.runtime import Serdes, StreamsBuilder, errors
from streamapp.runtime.spark import checkpoints, execution
from streamapp.runtime.topology import TimeWindows, state

if TYPE_CHECKING:
    import pathlib

    from pyspark.sql import SparkSession


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
