"""The broker-less TopologyTestDriver runs the same compiled plan on Parquet-file topics."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamapp.runtime import Serdes, StreamsBuilder
from streamapp.runtime.testing.driver import TopologyTestDriver

if TYPE_CHECKING:
    import pathlib

    from pyspark.sql import SparkSession


def test_driver_pipes_records_through_stateless_ops(spark: SparkSession, tmp_path: pathlib.Path) -> None:
    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    branches = (
        builder.stream("in")
        .filter_not("value = ''")
        .map_values("upper(value)")
        .split()
        .branch("length(value) > 5", "long")
        .default_branch("short")
    )
    branches["long"].to("long-out")
    branches["short"].select_key("value").map_values("length(value)").to(
        "short-out", value_serde=Serdes.Long()
    )
    with TopologyTestDriver(builder.build(), spark=spark, workdir=tmp_path) as driver:
        source = driver.input_topic("in")
        source.pipe_records([("a", "hello world", 10), ("b", "", 11), ("c", "hi", 12, (("h", b"x"),))])
        long_out = driver.output_topic("long-out")
        short_out = driver.output_topic("short-out")
        assert [(r.key, r.value, r.timestamp) for r in long_out.read_records()] == [("a", "HELLO WORLD", 10)]
        short = short_out.read_records()
        assert [(r.key, r.value, r.timestamp, r.headers) for r in short] == [("HI", 2, 12, (("h", b"x"),))]
        # State of the query carries over: new input, only new output.
        source.pipe_input("d", "streaming!", timestamp=20)
        assert long_out.read_key_values() == [("d", "STREAMING!")]
        assert short_out.read_key_values() == []


def test_driver_runs_a_custom_processor_and_its_timers(spark: SparkSession, tmp_path: pathlib.Path) -> None:
    """The silent-keys processor without a broker: each pipe is a micro-batch; the alerts of the
    keys it left silent come from the no-data batch after it."""
    from streamapp.runtime.cli.examples import silence

    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    builder.stream("heartbeats").process(silence.SilenceAlert).to("silent")
    with TopologyTestDriver(builder.build(), spark=spark, workdir=tmp_path) as driver:
        beats = driver.input_topic("heartbeats")
        alerts = driver.output_topic("silent")
        beats.pipe_records([("a", "beat", 0), ("b", "beat", 5_000), ("a", "beat", 2_000)])
        assert alerts.read_records() == []
        beats.pipe_input("c", "beat", timestamp=30_000)
        got = [(r.key, r.value, r.timestamp) for r in alerts.read_records()]
        assert got == [("a", "a silent since 2000", 12_000), ("b", "b silent since 5000", 15_000)]
