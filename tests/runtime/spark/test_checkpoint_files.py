"""Checkpoint files on a local disk go through StreamApp's manager (java.nio, no side files, no
process per file) with Spark's contract: atomic publish, no silent overwrite, cancel leaves
nothing. A checkpoint begun with Spark's own manager goes on with ours, and back."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from py4j.protocol import Py4JJavaError

if TYPE_CHECKING:
    import pathlib

    from pyspark.sql import SparkSession

KEY = "spark.sql.streaming.checkpointFileManagerClass"
SPARKS_OWN = "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager"


def _manager(spark: SparkSession, folder: pathlib.Path) -> tuple[Any, Any]:
    """The manager Spark itself makes for ``folder`` from the session's conf, and Hadoop's Path."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    factory = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    return factory.create(path(str(folder)), conf), path


def _write(manager: Any, path: Any, data: bytes, *, overwrite: bool) -> None:
    out = manager.createAtomic(path, overwrite)
    out.write(bytearray(data))
    out.close()


def _java_error(err: pytest.ExceptionInfo[Py4JJavaError]) -> str:
    return str(err.value.java_exception.getClass().getName())


def test_local_checkpoint_files_keep_sparks_contract(spark: SparkSession, tmp_path: pathlib.Path) -> None:
    fm, path = _manager(spark, tmp_path)
    assert fm.getClass().getName() == "io.streamapp.spark.LocalCheckpointFileManager"
    assert fm.isLocal()

    first = tmp_path / "offsets" / "0"  # its folder does not exist yet
    _write(fm, path(str(first)), b"one", overwrite=False)
    assert first.read_bytes() == b"one"
    assert fm.exists(path(str(first)))

    # No silent overwrite: Hadoop's FileAlreadyExistsException, the file as it was, no temp left.
    with pytest.raises(Py4JJavaError) as err:
        _write(fm, path(str(first)), b"two", overwrite=False)
    assert _java_error(err) == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert first.read_bytes() == b"one"
    assert sorted(p.name for p in first.parent.iterdir()) == ["0"]

    # Overwrite replaces, and drops a checksum Hadoop wrote for the replaced file.
    stale = first.parent / ".0.crc"
    stale.write_bytes(b"crc of 'one'")
    _write(fm, path(str(first)), b"two", overwrite=True)
    assert first.read_bytes() == b"two"
    assert not stale.exists()

    # Cancel: neither the file nor the temporary one.
    out = fm.createAtomic(path(str(tmp_path / "offsets" / "1")), False)
    out.write(bytearray(b"partial"))
    out.cancel()
    assert sorted(p.name for p in first.parent.iterdir()) == ["0"]

    stream = fm.open(path(str(first)))
    try:
        assert stream.read() == ord("t")
    finally:
        stream.close()
    with pytest.raises(Py4JJavaError) as err:
        fm.open(path(str(tmp_path / "offsets" / "9")))
    assert _java_error(err) == "java.io.FileNotFoundException"
    assert [s.getPath().getName() for s in fm.list(path(str(first.parent)))] == ["0"]

    fm.delete(path(str(tmp_path / "offsets")))
    assert not (tmp_path / "offsets").exists()
    fm.delete(path(str(tmp_path / "offsets")))  # already gone: no error
    assert not fm.exists(path(str(first)))


def _counts(spark: SparkSession, source: pathlib.Path, checkpoint: pathlib.Path, name: str) -> dict[str, int]:
    """One availableNow run of a stateful count over the JSON files in ``source``."""
    frame = spark.readStream.schema("k STRING").json(str(source))
    query = (
        frame.groupBy("k")
        .count()
        .writeStream.format("memory")
        .queryName(name)
        .outputMode("complete")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
        assert query.exception() is None
    finally:
        query.stop()
    return {row["k"]: row["count"] for row in spark.table(name).collect()}


def test_a_checkpoint_moves_between_sparks_manager_and_ours(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    ours = spark.conf.get(KEY)
    source, checkpoint = tmp_path / "in", tmp_path / "ckpt"
    source.mkdir()

    def add(name: str, keys: str) -> None:
        (source / name).write_text("".join(json.dumps({"k": k}) + "\n" for k in keys))

    try:
        spark.conf.set(KEY, SPARKS_OWN)
        add("1.json", "aab")
        assert _counts(spark, source, checkpoint, "by_spark") == {"a": 2, "b": 1}
        assert (checkpoint / "commits" / ".0.crc").exists()  # Hadoop's side file: Spark's manager

        spark.conf.set(KEY, ours)
        add("2.json", "ab")
        assert _counts(spark, source, checkpoint, "by_ours") == {"a": 3, "b": 2}
        assert (checkpoint / "commits" / "1").exists()
        assert not (checkpoint / "commits" / ".1.crc").exists()

        spark.conf.set(KEY, SPARKS_OWN)
        add("3.json", "c")
        assert _counts(spark, source, checkpoint, "by_spark_again") == {"a": 3, "b": 2, "c": 1}
    finally:
        spark.conf.set(KEY, ours)
