"""Windows, KTables and Python aggregators compiled from manifests and builders, through real Kafka.

The windowed app is run several times over the same input with different ``maxOffsetsPerTrigger``
(so micro-batch boundaries fall elsewhere each time) and must give the same output every time:
lateness is decided per record against the task's stream time, as Kafka Streams decides it.
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import TYPE_CHECKING

from streamapp.runtime import StreamApp, StreamsConfig, manifest
from streamapp.runtime.app import State
from streamapp.runtime.kafka import admin
from streamapp.runtime.spark.stateful import engine

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from streamapp.runtime.topology import Topology

sys.path.insert(0, str(pathlib.Path(__file__).parent))

S = 1000
T0 = 28_333_333 * 60_000  # a multiple of 60 s: one-minute windows start at T0

WINDOWED = """
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: clicks-per-minute}
spec:
  topology:
    defaults: {keySerde: string, valueSerde: string}
    streams:
      - name: clicks
        from: {topic: clicks}
      - from: {stream: clicks}
        steps:
          - groupByKey: {}
          - windowedBy: {tumbling: 1m, grace: 10s, emit: final}
          - count: {}
          - toStream: {}
          - to: {topic: final, valueSerde: long}
      - from: {stream: clicks}
        steps:
          - groupByKey: {}
          - windowedBy: {hopping: {size: 1m, advance: 30s}, grace: 10s}
          - aggregate: {fn: sum, expr: "cast(value as int)"}
          - toStream: {}
          - to: {topic: updates, valueSerde: long}
"""

#: (key, value, timestamp offset in s, partition) in production order. Each key is its own task
#: (partition), with its own stream time, as in Kafka Streams.
CLICKS = [
    ("a", "1", 10, 0),
    ("d", "2", 50, 1),
    ("a", "3", 65, 0),  # a's stream time: 65 s
    ("a", "4", 55, 0),  # out of order, inside grace: [0, 60) closes at 60 + 10 s
    ("a", "5", 75, 0),  # stream time 75 s: [0, 60) closes
    ("a", "6", 40, 0),  # beyond grace for [0, 60): dropped and counted; hopping [30, 90) still open
    ("d", "7", 59, 1),  # d's stream time is only 50 s: in time
    ("a", "8", 130, 0),
    ("d", "9", 200, 1),
    ("a", "10", 250, 0),
]


def _run(
    spark: SparkSession,
    bootstrap: str,
    topology: Topology,
    checkpoint: pathlib.Path,
    *,
    max_offsets: int | None = None,
) -> dict[str, int]:
    """Drain the input through the topology; returns the late count per windowed node."""
    app = StreamApp(
        topology,
        StreamsConfig(
            bootstrap_servers=bootstrap,
            checkpoint_location=str(checkpoint),
            max_offsets_per_trigger=max_offsets,
            drain=True,
        ),
        spark=spark,
    )
    app.start()
    assert app.await_termination(300)
    assert app.state is State.NOT_RUNNING, app.error
    assert app.progress.late == sum(app.progress.late_by_node.values())
    return dict(app.progress.late_by_node)


def _decode(records: list[admin.Record]) -> list[tuple[str, int | None, int]]:
    out = []
    for r in records:
        assert r.key is not None and r.timestamp is not None
        value = None if r.value is None else int.from_bytes(r.value, "big", signed=True)
        out.append((r.key.decode(), value, r.timestamp - T0))
    return out


def _window_key(key: str, start: int, end: int) -> str:
    return f"{key}@{T0 + start * S}/{T0 + end * S}"


def test_windows_with_grace_give_the_same_output_whatever_the_batch_size(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    clicks = new_topic(partitions=2)
    admin.produce(
        kafka_bootstrap,
        clicks,
        [admin.Record(k.encode(), v.encode(), timestamp=T0 + t * S, partition=p) for k, v, t, p in CLICKS],
    )
    runs = []
    for max_offsets in (None, 3, 1):
        final, updates = new_topic(partitions=1), new_topic(partitions=1)
        app = manifest.build_topology(manifest.load_manifest(WINDOWED))
        topology = app.rename_topics({"clicks": clicks, "final": final, "updates": updates})
        late = _run(
            spark, kafka_bootstrap, topology, tmp_path / f"ckpt-{max_offsets}", max_offsets=max_offsets
        )
        finals = _decode(admin.consume(kafka_bootstrap, final, timeout=20))
        changes = _decode(admin.consume(kafka_bootstrap, updates, timeout=20))
        latest = {k: (v, ts) for k, v, ts in changes}
        runs.append((sorted(finals), latest, sorted(late.values())))
    assert runs[1] == runs[0], runs
    assert runs[2] == runs[0], runs
    finals, latest, late = runs[0]
    # Emit-final: exactly one result per closed window, stamped with its newest record; a's 40 s
    # record came after its task's stream time passed 70 s, so it counts in no tumbling window.
    assert finals == sorted(
        [
            (_window_key("a", 0, 60), 2, 55 * S),
            (_window_key("a", 60, 120), 2, 75 * S),
            (_window_key("a", 120, 180), 1, 130 * S),
            (_window_key("d", 0, 60), 2, 59 * S),
        ]
    )  # [240, 300) for a and [180, 240) for d are still open
    assert late == [1, 1]  # one dropped contribution in each app: a's 40 s record to [0, 60)
    # Hopping windows, every update: the latest sum per window, stamped with its max timestamp.
    assert latest[_window_key("a", -30, 30)] == (1, 10 * S)
    assert latest[_window_key("a", 0, 60)] == (1 + 4, 55 * S)
    assert latest[_window_key("a", 30, 90)] == (3 + 4 + 5 + 6, 75 * S)  # 40 s was in time here
    assert latest[_window_key("d", 0, 60)] == (2 + 7, 59 * S)
    assert latest[_window_key("d", 30, 90)] == (2 + 7, 59 * S)
    assert len(latest) == 12


REKEYED = """
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: rekeyed-windows}
spec:
  topology:
    defaults: {keySerde: string, valueSerde: string}
    streams:
      - from: {topic: in}
        steps:
          - groupBy: "value"
          - windowedBy: {tumbling: 10s, grace: 0s}
          - count: {}
          - toStream: {}
          - to: {topic: out, valueSerde: long}
"""


def test_after_a_key_change_there_are_as_many_tasks_as_input_partitions_whatever_the_state_partitions(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """Kafka Streams' repartition topic has the input's partition count, and each of its tasks its
    own stream time. A 4-partition input on local[2] gets 2 state partitions (a slot each) but
    still 4 tasks: two keys in different tasks of 4 — and the same task of 2 — keep their own
    stream time, so the second key's old record is not late."""
    assert spark.sparkContext.master == "local[2]"
    candidates = spark.createDataFrame([(f"k{i}",) for i in range(40)], "k string")
    # Kafka's partitioner on the key's UTF-8 bytes: the repartition topic's partition, the task.
    task = dict(
        candidates.select("k", engine.hash_task(candidates, "k", engine.Tasks(4)).alias("t")).collect()
    )
    first = next(k for k in task if task[k] == 0)
    second = next(k for k in task if task[k] == 2)  # task 2 of 4; task 0 of 2, as `first`
    source, out = new_topic(partitions=4), new_topic(partitions=1)
    admin.produce(
        kafka_bootstrap,
        source,
        [
            admin.Record(b"x", first.encode(), timestamp=T0 + 100 * S, partition=0),
            admin.Record(b"y", second.encode(), timestamp=T0 + 1 * S, partition=0),
        ],
    )
    topology = manifest.build_topology(manifest.load_manifest(REKEYED)).rename_topics(
        {"in": source, "out": out}
    )
    late = _run(spark, kafka_bootstrap, topology, tmp_path / "ckpt")
    record = json.loads((tmp_path / "ckpt" / "streamapp.json").read_text())
    assert (record["statePartitions"], record["tasks"]) == (2, 4)
    assert sorted(late.values()) == [0]
    counts = sorted(_decode(admin.consume(kafka_bootstrap, out, timeout=20)))
    assert counts == sorted(
        [(_window_key(first, 100, 110), 1, 100 * S), (_window_key(second, 0, 10), 1, 1 * S)]
    )
