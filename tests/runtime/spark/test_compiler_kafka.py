"""Every stateless operation, compiled from the graph and run Kafka → Spark → Kafka for real.

Outputs are compared exactly: keys, values, timestamps (inherited from the input record, also by
every record a flatMap emits), headers, and the partition a key is routed to (Kafka's murmur2).
"""

from __future__ import annotations

import json
import pathlib
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from streamapp.runtime import Function, Serdes, StreamApp, StreamsBuilder, StreamsConfig
from streamapp.runtime.app import State
from streamapp.runtime.kafka import admin

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamapp.runtime.topology import Topology

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import udfs

T0 = 1_700_000_000_000
INPUT = [
    (b"k0", b"alpha beta", T0 + 1, (("trace", b"0"),)),
    (b"k1", b"apple", T0 + 2, (("trace", b"1"),)),
    (b"k2", b"drop me", T0 + 3, ()),
    (b"k3", b"zeta eta", T0 + 4, (("trace", b"3"),)),
]


def murmur2_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner (Utils.murmur2 & 0x7fffffff) % partitions."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    h = (0x9747B28C ^ len(key)) & mask
    n4 = len(key) // 4
    for i in range(n4):
        k = int.from_bytes(key[4 * i : 4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = key[4 * n4 :]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def unstarted(
    spark: SparkSession, bootstrap: str, topology: Topology, checkpoint: pathlib.Path, *, drain: bool = False
) -> StreamApp:
    """The app of ``topology`` on ``spark``, checkpointing into ``checkpoint``, not started."""
    config = StreamsConfig(bootstrap_servers=bootstrap, checkpoint_location=str(checkpoint), drain=drain)
    return StreamApp(topology, config, spark=spark)


def run(spark: SparkSession, bootstrap: str, topology: Topology, checkpoint: pathlib.Path) -> None:
    app = unstarted(spark, bootstrap, topology, checkpoint, drain=True)
    app.start()
    assert app.await_termination(180)
    assert app.state is State.NOT_RUNNING, app.error


def read(bootstrap: str, topic: str, n: int) -> list[admin.Record]:
    return admin.consume(bootstrap, topic, expected=n, timeout=60)


def triples(records: list[admin.Record]) -> list[tuple[object, ...]]:
    return sorted((r.key, r.value, r.timestamp, r.headers) for r in records)


@pytest.fixture(scope="module")
def all_ops(
    spark: SparkSession, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], list[admin.Record]]:
    """One topology using every stateless operation, run once; returns a reader per sink topic."""
    stem = f"ops-{tmp_path_factory.getbasetemp().name}"
    topics = {name: f"{stem}-{name}" for name in ("in", "t1", "t2", "t3", "t4", "t5")}
    admin.create_topics(
        kafka_bootstrap, {topics["in"]: 4, **{topics[t]: 3 for t in ("t1", "t2", "t3", "t4", "t5")}}
    )
    admin.produce(kafka_bootstrap, topics["in"], [admin.Record(k, v, h, ts) for k, v, ts, h in INPUT])

    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    s = builder.stream(topics["in"])
    s.filter("value NOT LIKE 'drop%'").filter_not("key = 'k0'").map_values(udfs.shout).to(topics["t1"])
    s.flat_map_values("explode(split(value, ' '))").select_key("value").to(topics["t2"])
    s.map(key="upper(key)", value="concat(value, '!')").to(topics["t3"])
    s.flat_map(
        "array(named_struct('key', key, 'value', value),"
        " named_struct('key', concat(key, '-2'), 'value', 'x'))"
    ).to(topics["t4"])
    branches = s.split().branch("value LIKE 'a%'", "a").default_branch("rest")
    rest = branches["rest"].map_values("'R'")
    branches["a"].merge(rest).repartition(partitions=2).peek(Function("udfs:note")).to(topics["t5"])
    run(spark, kafka_bootstrap, builder.build(), tmp_path_factory.mktemp("ckpt"))
    counts = {"t1": 2, "t2": 7, "t3": 4, "t4": 8, "t5": 4}
    return lambda name: read(kafka_bootstrap, topics[name], counts[name])


def test_filter_filter_not_and_python_map_values(all_ops: Callable[[str], list[admin.Record]]) -> None:
    assert triples(all_ops("t1")) == [
        (b"k1", b"APPLE!", T0 + 2, (("trace", b"1"),)),
        (b"k3", b"ZETA ETA!", T0 + 4, (("trace", b"3"),)),
    ]


def test_flat_map_values_and_select_key_route_by_the_new_key(
    all_ops: Callable[[str], list[admin.Record]],
) -> None:
    out = all_ops("t2")
    words = [
        (b"alpha", T0 + 1),
        (b"beta", T0 + 1),
        (b"apple", T0 + 2),
        (b"drop", T0 + 3),
        (b"me", T0 + 3),
        (b"zeta", T0 + 4),
        (b"eta", T0 + 4),
    ]
    assert sorted((r.key, r.value, r.timestamp) for r in out) == sorted((w, w, ts) for w, ts in words)
    assert all(r.partition == murmur2_partition(r.key or b"", 3) for r in out)


def test_map_changes_key_and_value(all_ops: Callable[[str], list[admin.Record]]) -> None:
    assert [(r.key, r.value, r.timestamp) for r in sorted(all_ops("t3"), key=lambda r: r.key or b"")] == [
        (b"K0", b"alpha beta!", T0 + 1),
        (b"K1", b"apple!", T0 + 2),
        (b"K2", b"drop me!", T0 + 3),
        (b"K3", b"zeta eta!", T0 + 4),
    ]


def test_flat_map_emits_siblings_with_the_input_timestamp(
    all_ops: Callable[[str], list[admin.Record]],
) -> None:
    out = sorted((r.key, r.value, r.timestamp) for r in all_ops("t4"))
    expected = []
    for key, value, ts, _ in INPUT:
        expected += [(key, value, ts), (key + b"-2", b"x", ts)]
    assert out == sorted(expected)


def test_split_merge_repartition_peek(all_ops: Callable[[str], list[admin.Record]]) -> None:
    assert triples(all_ops("t5")) == [
        (b"k0", b"alpha beta", T0 + 1, (("trace", b"0"),)),
        (b"k1", b"apple", T0 + 2, (("trace", b"1"),)),
        (b"k2", b"R", T0 + 3, ()),
        (b"k3", b"R", T0 + 4, (("trace", b"3"),)),
    ]


def test_json_serde_with_schema_and_event_time_from_a_value_field(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    src, dst = new_topic(2), new_topic(2)
    docs = [
        {"amount": 120.5, "ts": T0 + 500},
        {"amount": 80.0, "ts": T0 + 600},
        {"amount": 300.0, "ts": T0 + 700},
    ]
    admin.produce(
        kafka_bootstrap,
        src,
        [
            admin.Record(key=f"o{i}".encode(), value=json.dumps(d).encode(), timestamp=T0)
            for i, d in enumerate(docs)
        ],
    )
    builder = StreamsBuilder(default_key_serde=Serdes.String())
    (
        builder.stream(src, value_serde=Serdes.Json("amount DOUBLE, ts BIGINT"), timestamp="value.ts")
        .filter("value.amount > 100")
        .map_values("named_struct('doubled', value.amount * 2)")
        .to(dst, value_serde=Serdes.Json())
    )
    run(spark, kafka_bootstrap, builder.build(), tmp_path)
    out = sorted((r.key, json.loads(r.value or b""), r.timestamp) for r in read(kafka_bootstrap, dst, 2))
    assert out == [(b"o0", {"doubled": 241.0}, T0 + 500), (b"o2", {"doubled": 600.0}, T0 + 700)]


def test_long_serde_round_trip_through_kafka(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    src, dst = new_topic(1), new_topic(1)
    admin.produce(
        kafka_bootstrap,
        src,
        [
            admin.Record(key=b"n", value=(v).to_bytes(8, "big", signed=True), timestamp=T0 + i)
            for i, v in enumerate([5, -7, 2**40])
        ],
    )
    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.Long())
    builder.stream(src).map_values("value * 3").to(dst)
    run(spark, kafka_bootstrap, builder.build(), tmp_path)
    values = [int.from_bytes(r.value or b"", "big", signed=True) for r in read(kafka_bootstrap, dst, 3)]
    assert values == [15, -21, 3 * 2**40]


def test_a_record_into_a_quiet_input_is_not_held_by_the_brokers_fetch_wait(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """Spark's Kafka reader asks for the partition's offsets after every poll, on the connection
    where the poll's next fetch already waits at the broker for new records (fetch.max.wait.ms,
    500 ms by default): each micro-batch of sparse input took 0.5-1 s. The source asks the
    broker not to wait (kafka_io.MICRO_BATCH_SOURCE_DEFAULTS), so a one-record batch takes what
    its work takes."""
    src, dst = new_topic(2), new_topic(2)
    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    builder.stream(src).map_values("upper(value)").to(dst)
    app = unstarted(spark, kafka_bootstrap, builder.build(), tmp_path)
    reports: list[Mapping[str, Any]] = []
    app.on_progress(lambda _progress, report: reports.append(report))
    app.start()
    try:
        for i in range(6):
            admin.produce(kafka_bootstrap, src, [admin.Record(f"k{i}".encode(), f"v{i}".encode())])
            assert len(read(kafka_bootstrap, dst, i + 1)) == i + 1
            deadline = time.monotonic() + 30
            while sum(r["numInputRows"] for r in reports) <= i and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.7)  # the input stays quiet: the consumer's next fetch waits at the broker
    finally:
        assert app.stop(timeout=120)
    single = [r["durationMs"]["addBatch"] for r in reports if r["numInputRows"] == 1]
    assert len(single) == 6, [r["numInputRows"] for r in reports]
    warm = sorted(single[1:])  # the first batch meets a cold JVM
    # Waiting for the fetch costs 500 ms a batch at least (568-668 ms measured), the work 97-156.
    assert warm[len(warm) // 2] < 450, single


def test_latency_low_runs_stateless_plans_on_the_real_time_trigger(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    src, dst = new_topic(1), new_topic(1)
    builder = StreamsBuilder(
        default_key_serde=Serdes.String(), default_value_serde=Serdes.String(), latency="low"
    )
    builder.stream(src).filter("value != 'skip'").map_values("upper(value)").to(dst)
    topology = builder.build()
    assert "Execution: real-time trigger" in topology.describe()
    app = unstarted(spark, kafka_bootstrap, topology, tmp_path)
    app.start()
    try:
        assert app.trigger == "real-time"
        admin.produce(
            kafka_bootstrap,
            src,
            [admin.Record(b"a", b"fast"), admin.Record(b"b", b"skip"), admin.Record(b"c", b"lane")],
        )
        out = read(kafka_bootstrap, dst, 2)
        assert sorted((r.key, r.value) for r in out) == [(b"a", b"FAST"), (b"c", b"LANE")]
    finally:
        assert app.stop(timeout=120)
    assert app.state is State.NOT_RUNNING, app.error


def test_the_current_time_in_an_expression_is_each_micro_batchs(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """current_timestamp() is the micro-batch's time, as in Spark: the compiler leaves a plan that
    reads the current time unoptimized (compiler.optimized), where it would become a literal."""
    src, dst = new_topic(1), new_topic(1)
    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    builder.stream(src).map_values("cast(unix_millis(current_timestamp()) as string)").to(dst)
    app = unstarted(spark, kafka_bootstrap, builder.build(), tmp_path)
    app.start()
    try:
        admin.produce(kafka_bootstrap, src, [admin.Record(b"a", b"x")])
        first = read(kafka_bootstrap, dst, 1)
        time.sleep(1.5)
        admin.produce(kafka_bootstrap, src, [admin.Record(b"b", b"x")])
        both = read(kafka_bootstrap, dst, 2)
    finally:
        assert app.stop(timeout=120)
    times = [int(r.value or b"0") for r in both]
    assert int(first[0].value or b"0") == times[0]
    assert times[1] - times[0] >= 1_400, times
