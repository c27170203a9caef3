"""State partitions are fixed and recorded when a checkpoint is created, and enforced afterwards."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from streamapp.runtime import errors
from streamapp.runtime.spark import checkpoints

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
