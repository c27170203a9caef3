"""The word count, as YAML and as Python, on 100,000 lines through the real broker."""

from __future__ import annotations

import collections
import pathlib
import random
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from streamapp.runtime import Serdes, StreamApp, StreamsBuilder, StreamsConfig, manifest
from streamapp.runtime.app import State
from streamapp.runtime.kafka import admin

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

WORDS = ["kafka", "Streams", "spark", "table", "stream", "Join", "window", "grace", "late", "state", "key"]
LINES = 100_000
MANIFEST = pathlib.Path(__file__).parents[1] / "manifest" / "valid" / "wordcount.yaml"


def _lines() -> list[str]:
    rng = random.Random(4)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) + rng.choice(["", ".", "!?"])
        for _ in range(LINES)
    ]


def _python_builder() -> StreamsBuilder:
    b = StreamsBuilder(
        default_key_serde=Serdes.String(),
        default_value_serde=Serdes.String(),
        application_id="wordcount-application",
    )
    (
        b.stream("text-lines")
        .flat_map_values("explode(split(lower(value), '\\\\W+'))")
        .filter("value != ''")
        .group_by("value")
        .count()
        .to_stream()
        .to("words-with-counts", value_serde=Serdes.Long())
    )
    return b


def test_yaml_and_python_word_count_are_the_same_graph() -> None:
    from_yaml = manifest.build_topology(manifest.load_manifest(MANIFEST))
    from_python = _python_builder().build()
    assert from_yaml == from_python


def test_word_count_of_100k_lines_equals_a_python_reference(
    spark: SparkSession,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    streamapp_report: Callable[[str], None],
) -> None:
    source, sink = new_topic(4), new_topic(4)
    lines = _lines()
    admin.produce(
        kafka_bootstrap,
        source,
        [
            admin.Record(key=None, value=line.encode(), timestamp=1_700_000_000_000 + i)
            for i, line in enumerate(lines)
        ],
    )
    reference = collections.Counter(w for line in lines for w in re.split(r"\W+", line.lower()) if w)
    topology = manifest.build_topology(manifest.load_manifest(MANIFEST))
    topology = topology.rename_topics(
        {t: source for t in topology.source_topics()} | {t: sink for t in topology.sink_topics()}
    )
    started = time.monotonic()
    app = StreamApp(
        topology,
        StreamsConfig(
            bootstrap_servers=kafka_bootstrap,
            checkpoint_location=str(tmp_path),
            max_offsets_per_trigger=40_000,
            drain=True,
        ),
        spark=spark,
    )
    app.start()
    assert app.await_termination(300)
    assert app.state is State.NOT_RUNNING, app.error
    assert app.progress.records_read == {source: LINES}
    assert app.progress.batches >= LINES // 40_000
    latest: dict[str, tuple[int, int]] = {}
    out = admin.consume(kafka_bootstrap, sink, timeout=120)
    assert app.progress.records_written == {sink: len(out)}  # every update counted, exactly
    for record in out:
        word = (record.key or b"").decode()
        count = int.from_bytes(record.value or b"", "big", signed=True)
        # Per key, updates arrive in order on one partition: the last one is the table's value.
        latest[word] = (count, record.timestamp or 0)
    assert {w: c for w, (c, _) in latest.items()} == dict(reference)
    last_seen = {}
    for i, line in enumerate(lines):
        for w in re.split(r"\W+", line.lower()):
            if w:
                last_seen[w] = 1_700_000_000_000 + i
    assert {w: ts for w, (_, ts) in latest.items()} == last_seen  # max timestamp of the inputs
    streamapp_report(
        f"word count: {LINES} lines, {sum(reference.values())} words, {len(reference)} keys "
        f"through Kafka → Spark (RocksDB state) → Kafka in {time.monotonic() - started:.1f} s; "
        "final counts equal the Python reference"
    )
