"""The warm-up a hand-over's new driver runs in standby, on the real broker: the query's plan once
over the last records of each input partition, through the sink's dry run. It writes nothing, leaves nothing
in the checkpoint, the query then resumes where the checkpoint says, and a revision whose plan
fails on those records is refused before it could take over."""

from __future__ import annotations

import collections
import hashlib
import logging
import pathlib
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from confluent_kafka.admin import AdminClient

from streamapp.runtime import Function, Serdes, StreamApp, StreamsBuilder, StreamsConfig, manifest
from streamapp.runtime.app import State
from streamapp.runtime.kafka import admin

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

sys.path.insert(0, str(pathlib.Path(__file__).parent))

WORDCOUNT = pathlib.Path(__file__).parents[1] / "manifest" / "valid" / "wordcount.yaml"


def _markers(bootstrap: str, checkpoint: pathlib.Path) -> dict[str, int]:
    """The exactly-once marker topics of the query on ``checkpoint``, with their partitions."""
    query = hashlib.sha256(str(checkpoint).encode()).hexdigest()[:12]
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return {n: len(t.partitions) for n, t in topics.items() if n.endswith(f".{query}.markers")}


def _drain(spark: SparkSession, topology: object, bootstrap: str, checkpoint: pathlib.Path,
           warm: bool, guarantee: str = "at_least_once") -> StreamApp:  # fmt: skip
    config = StreamsConfig(
        bootstrap_servers=bootstrap, checkpoint_location=str(checkpoint), drain=True,
        processing_guarantee=guarantee,
    )  # fmt: skip
    app = StreamApp(topology, config, spark=spark)  # type: ignore[arg-type]
    app.start(warm_up=(lambda: True) if warm else None)
    assert app.await_termination(300)
    assert app.state is State.NOT_RUNNING, app.error
    return app


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_a_warm_up_writes_nothing_and_the_query_resumes_from_its_checkpoint(
    spark: SparkSession,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    guarantee: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The warm-up also readies the sink on the executors (SinkWarmUp.java: the shared producer,
    # or the marker reader and a producer without a transactional id): it must write nothing
    # either, and exactly once must still skip nothing and duplicate nothing.
    # One input partition: one state partition, fewer than the warm-up's tasks (local[2]: 2).
    source, sink = new_topic(1), new_topic(1)
    topology = manifest.build_topology(manifest.load_manifest(WORDCOUNT))
    topology = topology.rename_topics(
        {t: source for t in topology.source_topics()} | {t: sink for t in topology.sink_topics()}
    )
    first, second = ["the quick fox", "the lazy dog", "a fox"], ["the end"]
    admin.produce(kafka_bootstrap, source, [admin.Record(None, v.encode()) for v in first])
    _drain(spark, topology, kafka_bootstrap, tmp_path, warm=False, guarantee=guarantee)
    before = admin.consume(kafka_bootstrap, sink, timeout=60)
    markers = _markers(kafka_bootstrap, tmp_path) if guarantee == "exactly_once_v2" else {}
    assert guarantee != "exactly_once_v2" or list(markers.values()) == [1], markers
    admin.produce(kafka_bootstrap, source, [admin.Record(None, v.encode()) for v in second])
    with caplog.at_level(logging.INFO, logger="streamapp.execution"):
        app = _drain(spark, topology, kafka_bootstrap, tmp_path, warm=True, guarantee=guarantee)
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("sink warmed up on the executors") for m in messages), messages
    # The plan ran through the sink's own path: the last line of each partition, split and
    # counted, made records (none sent: the output check below).
    made = [int(m.split()[6]) for m in messages if m.startswith("warm-up: the sink's dry run made")]
    assert made and made[0] >= 2, messages
    # Every stage ran a task per slot (local[2]: 2), whichever partitions the last records are in:
    # on a cluster, every executor then runs every stage once, not only those the Kafka source's
    # hash of a partition picks.
    ran = next(m for m in messages if m.startswith("warm-up: the query's plan ran"))
    assert re.search(r"\(2 task slots; tasks per stage: 2, 2\)$", ran), ran
    after = admin.consume(kafka_bootstrap, sink, timeout=60)
    # The warm-up ran the plan over the last records of each partition again and wrote nothing:
    # the output grew by the new line's two updates only, and the counts are exact.
    assert len(after) - len(before) == 2, [(r.key, r.value) for r in after[len(before) :]]
    latest = {(r.key or b"").decode(): int.from_bytes(r.value or b"", "big") for r in after}
    words = collections.Counter(w for line in first + second for w in re.split(r"\W+", line) if w)
    assert latest == dict(words)
    assert app.progress.records_read == {source: 1}  # the query itself read only the new line
    assert not (tmp_path / "warm-up").exists()
    # The dry run looked the marker topic up but grew it to none of the warm-up's 2 tasks.
    assert _markers(kafka_bootstrap, tmp_path) == markers


def test_a_revision_that_fails_on_the_last_records_is_refused_by_its_warm_up(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    from streamapp.runtime.spark import warm_up

    source, sink = new_topic(1), new_topic(1)
    admin.produce(kafka_bootstrap, source, [admin.Record(None, v.encode()) for v in ["fine", "boom"]])
    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    builder.stream(source).map_values(Function("udfs:refuse_boom"), returns="string").to(sink)
    config = StreamsConfig(bootstrap_servers=kafka_bootstrap, checkpoint_location=str(tmp_path))
    app = StreamApp(builder.build(), config, spark=spark)
    with pytest.raises(warm_up.WarmUpFailed, match="refuse_boom: 'boom' is not accepted"):
        app.start(warm_up=lambda: True)
    assert admin.consume(kafka_bootstrap, sink, timeout=30) == []
    assert not (tmp_path / "offsets").exists()  # the query never started
