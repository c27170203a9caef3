"""KTables (updates, tombstones, the subtractor), session windows and Python aggregators,
through the TopologyTestDriver: each ``pipe_records`` call is one micro-batch."""

from __future__ import annotations

import pathlib
import sys
from typing import TYPE_CHECKING

from streamapp.runtime import Serdes, StreamsBuilder, manifest
from streamapp.runtime.testing.driver import TopologyTestDriver
from streamapp.runtime.topology import SessionWindows, TimeWindows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import udfs

S = 1000
T0 = 28_333_333 * 60_000  # a multiple of 60 s


def test_ktable_updates_tombstones_and_a_regrouped_count_with_its_subtractor(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    users = b.table("users")  # user -> region
    users.filter("value != 'banned'").map_values("upper(value)").to_stream().to("active")
    users.group_by("value").count().to_stream().to("per-region", value_serde=Serdes.Long())
    with TopologyTestDriver(b.build(), spark=spark, workdir=tmp_path) as driver:
        source = driver.input_topic("users")
        active, per_region = driver.output_topic("active"), driver.output_topic("per-region")

        source.pipe_records([("u1", "eu", 1), ("u2", "us", 2), ("u3", "eu", 3), ("u1", "eu", 4)])
        assert sorted(active.read_key_values()) == [("u1", "EU"), ("u2", "US"), ("u3", "EU")]
        assert per_region.read_key_value_map() == {"eu": 2, "us": 1}

        # u1 moves: the subtractor takes it out of eu, the adder puts it into us; u2 is deleted.
        source.pipe_records([("u1", "us", 5), ("u2", None, 6)])
        assert sorted(active.read_key_values(), key=str) == [("u1", "US"), ("u2", None)]
        assert per_region.read_key_value_map() == {"eu": 1, "us": 1}
        changes = per_region.read_records()  # nothing new since the last read
        assert changes == []

        # A value failing the table's filter deletes the key downstream (a tombstone).
        source.pipe_records([("u3", "banned", 7), ("u9", None, 8)])  # u9 never existed: no output
        assert active.read_key_values() == [("u3", None)]
        records = per_region.read_records()
        assert {(r.key, r.value, r.timestamp) for r in records} == {("eu", 0, 7), ("banned", 1, 7)}


def test_stream_to_table_keeps_the_latest_value_per_key(spark: SparkSession, tmp_path: pathlib.Path) -> None:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    b.stream("in").to_table().to_stream().to("latest")
    with TopologyTestDriver(b.build(), spark=spark, workdir=tmp_path) as driver:
        source, latest = driver.input_topic("in"), driver.output_topic("latest")
        source.pipe_records([("k", "1", 1), ("j", "x", 2), ("k", "2", 3), ("j", None, 4)])
        # One update per key and micro-batch, with the net change (as Kafka Streams' record cache
        # coalesces): j was created and deleted within the batch, so the table never changed.
        assert [(r.key, r.value, r.timestamp) for r in latest.read_records()] == [("k", "2", 3)]
        source.pipe_records([("j", "y", 5), ("k", None, 6)])
        assert sorted(latest.read_key_values(), key=str) == [("j", "y"), ("k", None)]


def test_session_windows_merge_on_a_bridging_record_and_python_aggregators(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    grouped = b.stream("in").group_by_key()
    # Grace 15 s: [0, 0] is still in the session store (retention gap + grace) when 15 s bridges it.
    sessions = grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace("20s", "15s"))
    sessions.aggregate(udfs.zero, udfs.add_length, returns="bigint").to_stream().to(
        "lengths", value_serde=Serdes.Long()
    )
    minutes = grouped.windowed_by(TimeWindows.of_size_and_grace("1m", 0))
    minutes.reduce(udfs.longer).to_stream().to("longest")
    with TopologyTestDriver(b.build(), spark=spark, workdir=tmp_path) as driver:
        source = driver.input_topic("in")
        lengths, longest = driver.output_topic("lengths"), driver.output_topic("longest")

        def key(start: int, end: int) -> str:
            return f"k@{T0 + start * S}/{T0 + end * S}"

        source.pipe_records([("k", "abc", T0), ("k", "de", T0 + 30 * S)])
        assert lengths.read_key_value_map() == {key(0, 0): 3, key(30, 30): 2}
        source.pipe_records([("k", "fghi", T0 + 15 * S)])  # within 20 s of both: one session
        merged = lengths.read_records()
        # The two old sessions are deleted (tombstones), the merged one carries its end as time.
        assert {(r.key, r.value, r.timestamp) for r in merged} == {
            (key(0, 0), None, T0),
            (key(30, 30), None, T0 + 30 * S),
            (key(0, 30), 9, T0 + 30 * S),
        }
        assert longest.read_key_value_map() == {key(0, 60): "fghi"}


def test_cogroup_folds_several_grouped_streams_into_one_aggregate(
    spark: SparkSession, tmp_path: pathlib.Path
) -> None:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    clicks = b.stream("clicks").group_by_key()
    views = b.stream("views").select_key("value").group_by_key()  # re-keyed: repartitioned by key
    scores = clicks.cogroup(udfs.add_one).cogroup(views, udfs.add_ten).aggregate(udfs.zero, returns="bigint")
    scores.to_stream().to("scores", value_serde=Serdes.Long())
    topology = b.build()
    emitted = manifest.to_manifest_yaml(topology, name="scores")
    assert manifest.build_topology(manifest.load_manifest(emitted)) == topology
    with TopologyTestDriver(topology, spark=spark, workdir=tmp_path) as driver:
        driver.input_topic("clicks").pipe_records([("u1", "c", 1), ("u2", "c", 2), ("u1", "c", 3)])
        driver.input_topic("views").pipe_records([("x", "u1", 4), ("y", "u3", 5)])
        records = driver.output_topic("scores").read_records()
        latest = {r.key: (r.value, r.timestamp) for r in records}
        assert latest == {"u1": (12, 4), "u2": (1, 2), "u3": (10, 5)}
