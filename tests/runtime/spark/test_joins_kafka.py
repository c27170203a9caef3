"""Joins compiled from manifests and builders, through the real broker, with exact expected output.

Each app runs over the same input with micro-batches of every record available (one batch) and
of one record per source (``maxOffsetsPerTrigger`` 1), and must give the same records: a task
processes its inputs in Kafka Streams' order (the partition whose head record is oldest first;
ties to the table side), not in Spark's batch order.
"""

from __future__ import annotations

import pathlib
import sys
from typing import TYPE_CHECKING, Any

from streamapp.runtime import manifest
from streamapp.runtime.kafka import admin
from streamapp.runtime.serdes import Serdes
from streamapp.runtime.topology import JoinWindows, StreamsBuilder

sys.path.insert(0, str(pathlib.Path(__file__).parent))
sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "conformance"))
import oracle as ks_oracle

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from streamapp.runtime.topology import Topology

S = 1000
T0 = 28_333_333 * 60_000  # a multiple of 60 s

STREAM_TABLE = """
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: views-with-users}
spec:
  topology:
    defaults: {keySerde: string, valueSerde: string}
    streams:
      - name: users
        from: {topic: users, as: table}
      - name: views
        from: {topic: views}
      - from: {stream: views}
        steps:
          - join: {with: users, joiner: "concat(left, '@', right)"}
          - to: {topic: joined}
      - from: {stream: views}
        steps:
          - leftJoin: {with: users, joiner: "concat(left, '@', coalesce(right, '-'))"}
          - to: {topic: left-joined}
"""

#: (key, value, timestamp in s) in offset order, one partition each. Table record i and view i
#: are read in the same one-record micro-batch; every view must see the same table either way.
USERS = [
    ("u1", "alice", 0),
    ("u2", "bob", 10),
    ("u1", "alice2", 20),
    ("u2", None, 30),  # u2 deleted
    ("u3", "carol", 40),
    ("u1", "alice3", 50),
]
VIEWS = [
    ("u1", "a", 5),
    ("u2", "b", 15),
    ("u1", "c", 20),  # same timestamp as alice2: the table update comes first
    ("u1", "d", 12),  # out of order: processed after c, so it sees alice2 too
    ("u2", "e", 35),  # u2 is deleted: no inner result, a left result with right null
    ("u3", "f", 45),
    ("u1", "g", 55),
    ("u1", None, 56),  # a null value is dropped by both joins
    (None, "h", 58),  # a null key: dropped by join, kept by leftJoin (KIP-962)
]


def _records(rows: list[tuple[str | None, str | None, int]], partition: int = 0) -> list[admin.Record]:
    return [
        admin.Record(
            None if k is None else k.encode(),
            None if v is None else v.encode(),
            timestamp=T0 + t * S,
            partition=partition,
        )
        for k, v, t in rows
    ]


def _run(
    spark: SparkSession, bootstrap: str, topology: Topology, checkpoint: pathlib.Path, max_offsets: int | None
) -> dict[str, int]:
    """Drain the input through :class:`StreamApp`, the path every app takes; the late records per
    windowed node."""
    from streamapp.runtime import StreamApp, StreamsConfig
    from streamapp.runtime.app import State

    config = StreamsConfig(
        bootstrap_servers=bootstrap,
        checkpoint_location=str(checkpoint),
        drain=True,
        max_offsets_per_trigger=max_offsets,
    )
    app = StreamApp(topology, config, spark=spark)
    app.start()
    assert app.await_termination(300)
    assert app.state is State.NOT_RUNNING, app.error
    return dict(app.progress.late_by_node)


def _decode(records: list[admin.Record]) -> list[tuple[Any, Any, int]]:
    out = []
    for r in records:
        assert r.timestamp is not None
        key = None if r.key is None else r.key.decode()
        out.append((key, None if r.value is None else r.value.decode(), (r.timestamp - T0) // S))
    return out


def _outputs(
    spark: SparkSession,
    bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    topology: Topology,
    inputs: dict[str, str],
    outputs: list[str],
    max_offsets: int | None,
) -> tuple[dict[str, list[Any]], dict[str, int]]:
    topics = {name: new_topic(partitions=1) for name in outputs}
    app = topology.rename_topics({**inputs, **topics})
    late = _run(spark, bootstrap, app, tmp_path / f"ckpt-{max_offsets}", max_offsets)
    got = {name: _decode(admin.consume(bootstrap, topic, timeout=20)) for name, topic in topics.items()}
    return got, late


def _kstreams(
    bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    topology: Topology,
    inputs: dict[str, str],
    outputs: list[str],
) -> tuple[dict[str, list[Any]], int]:
    """The same topology in Kafka Streams (the conformance suite's oracle): its output per topic,
    and its dropped records (late window-store puts, or a null key or value)."""
    topics = {name: new_topic(partitions=1) for name in outputs}
    result = ks_oracle.run(bootstrap, topology.rename_topics({**inputs, **topics}), tmp_path / "kstreams")
    got = {name: _decode(admin.consume(bootstrap, topic, timeout=20)) for name, topic in topics.items()}
    return got, result.dropped


def test_stream_table_join_sees_the_table_as_it_evolves_whatever_the_batch_size(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    users, views = new_topic(partitions=1), new_topic(partitions=1)
    admin.produce(kafka_bootstrap, users, _records(USERS))
    admin.produce(kafka_bootstrap, views, _records(VIEWS))
    topology = manifest.build_topology(manifest.load_manifest(STREAM_TABLE))
    inputs = {"users": users, "views": views}
    runs = [
        _outputs(spark, kafka_bootstrap, new_topic, tmp_path, topology, inputs, ["joined", "left-joined"], n)
        for n in (None, 1)
    ]
    assert runs[1] == runs[0]
    got, _ = runs[0]
    oracle, _ = _kstreams(kafka_bootstrap, new_topic, tmp_path, topology, inputs, ["joined", "left-joined"])
    assert got == oracle
    # Each result carries the stream record's timestamp, as in Kafka Streams.
    assert got["joined"] == [
        ("u1", "a@alice", 5),
        ("u2", "b@bob", 15),
        ("u1", "c@alice2", 20),
        ("u1", "d@alice2", 12),
        ("u3", "f@carol", 45),
        ("u1", "g@alice3", 55),
    ]
    assert got["left-joined"] == [
        ("u1", "a@alice", 5),
        ("u2", "b@bob", 15),
        ("u1", "c@alice2", 20),
        ("u1", "d@alice2", 12),
        ("u2", "e@-", 35),
        ("u3", "f@carol", 45),
        ("u1", "g@alice3", 55),
        (None, "h@-", 58),
    ]


def _views_with_users() -> Topology:
    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    users = builder.table("users")
    views = builder.stream("views")
    views.join(users, "concat(left, '@', right)").to("joined")
    views.left_join(users, "concat(left, '@', coalesce(right, '-'))").to("left-joined")
    return builder.build()


def test_the_builder_gives_the_manifest_graph_and_describe_names_the_store() -> None:
    topology = _views_with_users()
    assert topology == manifest.build_topology(manifest.load_manifest(STREAM_TABLE))
    text = topology.describe()
    assert "Processor: KSTREAM-JOIN-0000000002 (joiner: concat(left, '@', right), " in text
    assert "stores: [KSTREAM-SOURCE-0000000000-store])" in text
    assert "<-- KSTREAM-SOURCE-0000000001, KSTREAM-SOURCE-0000000000" in text


STREAM_STREAM = """
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: clicks-with-impressions}
spec:
  topology:
    defaults: {keySerde: string, valueSerde: string}
    streams:
      - name: impressions
        from: {topic: impressions}
      - name: clicks
        from: {topic: clicks}
      - from: {stream: impressions}
        steps:
          - join:
              with: clicks
              joiner: "concat(left, '+', right)"
              windows: {timeDifference: 10s, grace: 5s}
          - to: {topic: inner}
      - from: {stream: impressions}
        steps:
          - leftJoin:
              with: clicks
              joiner: "concat(left, '+', coalesce(right, '-'))"
              windows: {timeDifference: 10s, grace: 5s}
          - to: {topic: left}
      - from: {stream: impressions}
        steps:
          - outerJoin:
              with: clicks
              joiner: "concat(coalesce(left, '-'), '+', coalesce(right, '-'))"
              windows: {timeDifference: 10s, grace: 5s}
          - to: {topic: outer}
"""

#: (key, value, timestamp in s), one partition each, read pairwise in one-record batches.
IMPRESSIONS = [
    ("a", "A1", 100),
    ("b", "B1", 101),
    ("d", "D1", 104),
    ("b", "B2", 118),
    ("q", "Q1", 300),  # stream time 300 s
    ("a", "A0", 30),  # beyond grace: joins nothing, and its 60 s store segment is gone (late)
]
CLICKS = [
    ("a", "a1", 105),  # joins A1: timestamp max(100, 105)
    ("c", "c1", 102),  # never matched: an outer result once its window closes
    ("z", "z1", 117),  # stream time 117 > B1's 101 + 10 + 5: B1 is emitted with right null, once
    ("b", "b1", 112),  # out of order, within grace: joins B2 (B1 was already emitted)
    ("d", "d1", 120),  # 16 s after D1: outside the window
    ("z", "z2", 400),  # stream time 400: d1 and Q1 close
]


def test_stream_stream_joins_emit_null_sides_only_once_windows_closed(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    impressions, clicks = new_topic(partitions=1), new_topic(partitions=1)
    admin.produce(kafka_bootstrap, impressions, _records(IMPRESSIONS))
    admin.produce(kafka_bootstrap, clicks, _records(CLICKS))
    topology = manifest.build_topology(manifest.load_manifest(STREAM_STREAM))
    inputs = {"impressions": impressions, "clicks": clicks}
    runs = [
        _outputs(spark, kafka_bootstrap, new_topic, tmp_path, topology, inputs, ["inner", "left", "outer"], n)
        for n in (None, 1)
    ]
    assert runs[1] == runs[0]
    got, late = runs[0]
    oracle, dropped = _kstreams(
        kafka_bootstrap, new_topic, tmp_path, topology, inputs, ["inner", "left", "outer"]
    )
    assert got == oracle
    assert sorted(late.values()) == [1, 1, 1]  # A0's put, in each of the three joins
    assert dropped == 3
    # Inner results carry the max of both timestamps, as in Kafka Streams.
    assert got["inner"] == [("a", "A1+a1", 105), ("b", "B2+b1", 118)]
    assert got["left"] == [
        ("a", "A1+a1", 105),
        ("b", "B1+-", 101),
        ("b", "B2+b1", 118),
        ("d", "D1+-", 104),
        ("a", "A0+-", 30),  # its window ended long ago: emitted at once
        ("q", "Q1+-", 300),
    ]
    # Both sides' unmatched records, each once stream time passes its window end plus grace.
    assert got["outer"] == [
        ("a", "A1+a1", 105),
        ("b", "B1+-", 101),
        ("b", "B2+b1", 118),
        ("c", "-+c1", 102),
        ("d", "D1+-", 104),
        ("z", "-+z1", 117),
        ("d", "-+d1", 120),
        ("a", "A0+-", 30),
        ("q", "Q1+-", 300),
    ]  # z2 (400) is still waiting for its window to close


def test_stream_stream_builder_form_and_describe() -> None:
    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    impressions, clicks = builder.stream("impressions"), builder.stream("clicks")
    windows = JoinWindows.of_time_difference_and_grace(10_000, 5_000)
    impressions.join(clicks, "concat(left, '+', right)", windows).to("inner")
    impressions.left_join(clicks, "concat(left, '+', coalesce(right, '-'))", windows).to("left")
    impressions.outer_join(clicks, "concat(coalesce(left, '-'), '+', coalesce(right, '-'))", windows).to(
        "outer"
    )
    topology = builder.build()
    assert topology == manifest.build_topology(manifest.load_manifest(STREAM_STREAM))
    text = topology.describe()
    name = "KSTREAM-OUTERJOIN-0000000006"
    stores = [f"{name}-this-join-store", f"{name}-other-join-store", f"{name}-outer-shared-join-store"]
    assert (
        f"Processor: {name} (joiner: concat(coalesce(left, '-'), '+', coalesce(right, '-')), "
        f"windows: before: 10000ms, after: 10000ms, grace: 5000ms, stores: [{', '.join(stores)}])"
    ) in text


TABLE_TABLE = """
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: tables}
spec:
  topology:
    defaults: {keySerde: string, valueSerde: string}
    streams:
      - name: left-table
        from: {topic: left-table, as: table}
      - name: right-table
        from: {topic: right-table, as: table}
      - from: {stream: left-table}
        steps:
          - join: {with: right-table, joiner: "concat(left, '=', right)"}
          - toStream: {}
          - to: {topic: inner}
      - from: {stream: left-table}
        steps:
          - leftJoin: {with: right-table, joiner: "concat(left, '=', coalesce(right, '-'))"}
          - toStream: {}
          - to: {topic: left}
      - from: {stream: left-table}
        steps:
          - outerJoin: {with: right-table, joiner: "concat(coalesce(left, '-'), '=', coalesce(right, '-'))"}
          - toStream: {}
          - to: {topic: outer}
"""

LEFT_TABLE = [
    ("k1", "a1", 1),
    ("k2", "x1", 2),
    ("k1", "a2", 10),
    ("k3", "c1", 12),
    ("k1", None, 20),
    ("k2", None, 25),
]
RIGHT_TABLE = [
    ("k1", "b1", 5),
    ("k2", "y1", 6),
    ("k3", None, 11),
    ("k1", "b2", 15),
    ("k2", None, 22),
    ("k1", "b3", 30),
]


def _by_key(records: list[tuple[Any, Any, int]]) -> dict[Any, list[tuple[Any, int]]]:
    """Per key, in order: a table's changelog is ordered per key (keys interleave by batch)."""
    out: dict[Any, list[tuple[Any, int]]] = {}
    for key, value, ts in records:
        out.setdefault(key, []).append((value, ts))
    return out


def test_table_table_joins_emit_a_changelog_with_tombstones(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    left, right = new_topic(partitions=1), new_topic(partitions=1)
    admin.produce(kafka_bootstrap, left, _records(LEFT_TABLE))
    admin.produce(kafka_bootstrap, right, _records(RIGHT_TABLE))
    topology = manifest.build_topology(manifest.load_manifest(TABLE_TABLE))
    inputs = {"left-table": left, "right-table": right}
    names = ["inner", "left", "outer"]
    runs = [
        _outputs(spark, kafka_bootstrap, new_topic, tmp_path, topology, inputs, names, n) for n in (None, 1)
    ]
    per_key = [{name: _by_key(records) for name, records in got.items()} for got, _ in runs]
    assert per_key[1] == per_key[0]
    oracle, _ = _kstreams(kafka_bootstrap, new_topic, tmp_path, topology, inputs, names)
    assert {name: _by_key(records) for name, records in oracle.items()} == per_key[0]
    got = per_key[0]
    # Results carry the max of both sides' timestamps; a result that goes away is a tombstone.
    assert got["inner"] == {
        "k1": [("a1=b1", 5), ("a2=b1", 10), ("a2=b2", 15), (None, 20)],
        "k2": [("x1=y1", 6), (None, 22)],
    }


STREAM_GLOBAL = """
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: orders-with-regions}
spec:
  topology:
    defaults: {keySerde: string, valueSerde: string}
    streams:
      - name: regions
        from: {topic: regions, as: globalTable}
      - name: orders
        from: {topic: orders}
      - from: {stream: orders}
        steps:
          - join: {with: regions, key: value, joiner: "concat(key, ':', left, '@', right)"}
          - to: {topic: joined}
      - from: {stream: orders}
        steps:
          - leftJoin: {with: regions, key: value, joiner: "concat(key, ':', left, '@', coalesce(right, '-'))"}
          - to: {topic: left-joined}
"""

REGIONS = [("r1", "north", 0), ("r2", "south", 1), ("r1", "north2", 2), ("r2", None, 3), ("r3", "east", 4)]
#: Orders keyed by order id in two partitions; the value is the region to look up.
ORDERS = [
    ("o1", "r1", 10, 0),
    ("o2", "r2", 11, 1),
    ("o3", "r3", 12, 0),
    ("o4", "r9", 13, 1),
    ("o5", "r1", 5, 1),
]


def test_global_table_join_looks_up_a_key_from_the_record_without_repartitioning(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    regions, orders = new_topic(partitions=1), new_topic(partitions=2)
    admin.produce(kafka_bootstrap, regions, _records(REGIONS))
    admin.produce(
        kafka_bootstrap,
        orders,
        [admin.Record(k.encode(), v.encode(), timestamp=T0 + t * S, partition=p) for k, v, t, p in ORDERS],
    )
    topology = manifest.build_topology(manifest.load_manifest(STREAM_GLOBAL))
    assert "repartition" not in topology.describe()
    inputs = {"regions": regions, "orders": orders}
    names = ["joined", "left-joined"]
    got, _ = _outputs(spark, kafka_bootstrap, new_topic, tmp_path, topology, inputs, names, None)
    oracle, _ = _kstreams(kafka_bootstrap, new_topic, tmp_path, topology, inputs, names)
    assert {k: sorted(v, key=str) for k, v in got.items()} == {
        k: sorted(v, key=str) for k, v in oracle.items()
    }
    # The global table is complete before the first order: r1 is north2, r2 deleted.
    assert sorted(got["joined"]) == [
        ("o1", "o1:r1@north2", 10),
        ("o3", "o3:r3@east", 12),
        ("o5", "o5:r1@north2", 5),
    ]
    assert sorted(got["left-joined"]) == sorted(
        [*got["joined"], ("o2", "o2:r2@-", 11), ("o4", "o4:r9@-", 13)]
    )


REKEYED = """
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: rekeyed-views}
spec:
  topology:
    defaults: {keySerde: string, valueSerde: string}
    streams:
      - name: users
        from: {topic: users, as: table}
      - from: {topic: views}
        steps:
          - selectKey: "split(value, '[|]')[0]"
          - leftJoin: {with: users, joiner: {function: "join_udfs:describe_view", returns: string}}
          - to: {topic: left-joined}
"""


def test_a_rekeyed_stream_joins_a_table_with_a_python_joiner(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    users, views = new_topic(partitions=1), new_topic(partitions=1)
    admin.produce(kafka_bootstrap, users, _records([("u1", "Ann", 0), ("u2", "Bob", 1)]))
    rows = [("v1", "u1|home", 5), ("v2", "u2|cart", 15), ("v3", "u3|home", 20), ("v4", "u1|buy", 35)]
    admin.produce(kafka_bootstrap, views, _records(rows))
    topology = manifest.build_topology(manifest.load_manifest(REKEYED))
    assert "repartition topics: [KSTREAM-LEFTJOIN-0000000003-left-repartition]" in topology.describe()
    inputs = {"users": users, "views": views}
    got, _ = _outputs(spark, kafka_bootstrap, new_topic, tmp_path, topology, inputs, ["left-joined"], None)
    oracle, _ = _kstreams(kafka_bootstrap, new_topic, tmp_path, topology, inputs, ["left-joined"])
    assert sorted(got["left-joined"]) == sorted(oracle["left-joined"])
    assert sorted(got["left-joined"]) == [
        ("u1", "u1:buy@Ann", 35),
        ("u1", "u1:home@Ann", 5),
        ("u2", "u2:cart@Bob", 15),
        ("u3", "u3:home@-", 20),
    ]


FOREIGN_KEY = """
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: orders-with-customers}
spec:
  topology:
    defaults: {keySerde: string, valueSerde: string}
    streams:
      - name: customers
        from: {topic: customers, as: table}
      - name: orders
        from: {topic: orders, as: table}
      - from: {stream: orders}
        steps:
          - join:
              with: customers
              foreignKey: "nullif(split(value, ':')[0], '')"
              joiner: "concat(left, '@', right)"
          - toStream: {}
          - to: {topic: inner}
      - from: {stream: orders}
        steps:
          - leftJoin:
              with: customers
              foreignKey: {function: "join_udfs:customer_of"}
              joiner: "concat(left, '@', coalesce(right, '-'))"
          - toStream: {}
          - to: {topic: left}
"""

#: Orders (value "customer:item") and customers; order i and customer update i are read in the
#: same one-record micro-batch, the order first (every pair is later than the one before).
ORDERS_TABLE = [
    ("o1", "c1:apple", 1),  # c1 not there yet: no inner result, a left result with right null
    ("o2", "c2:pear", 11),
    ("o3", "c1:fig", 21),
    ("o1", "c2:apple", 31),  # re-pointed from c1 to c2: c1's later updates must not reach o1
    ("o3", None, 41),  # deleted: a tombstone
    ("o2", ":pear", 51),  # a null foreign key: the inner result goes, the left one has right null
    ("o4", "c3:kiwi", 61),  # c3 never exists
]
CUSTOMERS = [
    ("c1", "ann", 2),
    ("c2", "bob", 15),
    ("c1", "ann2", 25),  # both o1 and o3 point at c1
    ("c1", "ann3", 35),  # only o3 does now
    ("c2", None, 45),  # deleted: o1 and o2 lose their right side
    ("c9", None, 55),  # deleting a customer nobody has: nothing
    ("c2", "bob2", 65),  # back: only o1 points at c2 now
]


def _foreign_key_builder() -> Topology:
    from join_udfs import customer_of

    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    customers, orders = builder.table("customers"), builder.table("orders")
    orders.join(
        customers, "concat(left, '@', right)", foreign_key="nullif(split(value, ':')[0], '')"
    ).to_stream().to("inner")
    orders.left_join(
        customers, "concat(left, '@', coalesce(right, '-'))", foreign_key=customer_of
    ).to_stream().to("left")
    return builder.build()


def test_foreign_key_builder_form_and_describe() -> None:
    topology = _foreign_key_builder()
    assert topology == manifest.build_topology(manifest.load_manifest(FOREIGN_KEY))
    text = topology.describe()
    name = "KSTREAM-JOIN-0000000002"
    assert (
        f"Processor: {name} (foreignKey: nullif(split(value, ':')[0], ''), joiner: concat(left, '@', right), "
        f"stores: [{name}-subscription-store, KSTREAM-SOURCE-0000000001-store, "
        "KSTREAM-SOURCE-0000000000-store], "
        f"internal topics: [{name}-subscription-registration-topic, {name}-subscription-response-topic])"
    ) in text
    assert "foreignKey: join_udfs:customer_of" in text
    # The right table meets the subscriptions in a sub-topology of its own, as in Kafka Streams.
    assert text.count("Sub-topology:") == 2
    right, left = text.split("Sub-topology: 1")
    assert (
        f"    Source: {name}-subscription-registration-source "
        f"(topics: [{name}-subscription-registration-topic])\n"
    ) in right
    assert (
        f"    Sink: {name}-subscription-response-sink (topic: {name}-subscription-response-topic)\n" in right
    )
    assert (
        f"    Sink: {name}-subscription-registration-sink (topic: {name}-subscription-registration-topic)\n"
        in left
    )
    assert f"      <-- {name}-subscription-response-source\n" in left


def test_foreign_key_joins_follow_repointed_and_deleted_rows_without_stale_results(
    spark: SparkSession, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    orders, customers = new_topic(partitions=1), new_topic(partitions=1)
    admin.produce(kafka_bootstrap, orders, _records(ORDERS_TABLE))
    admin.produce(kafka_bootstrap, customers, _records(CUSTOMERS))
    topology = manifest.build_topology(manifest.load_manifest(FOREIGN_KEY))
    inputs = {"orders": orders, "customers": customers}
    names = ["inner", "left"]
    runs = [
        _outputs(spark, kafka_bootstrap, new_topic, tmp_path, topology, inputs, names, n) for n in (None, 1)
    ]
    per_key = [{name: _by_key(records) for name, records in got.items()} for got, _ in runs]
    assert per_key[1] == per_key[0]
    got = per_key[0]
    # A row's result carries the max of both sides' timestamps when the row changed, the right
    # update's own when the right side changed (KIP-213: SubscriptionJoin / ForeignTableJoin).
    assert got["inner"] == {
        "o1": [("c1:apple@ann", 2), ("c1:apple@ann2", 25), ("c2:apple@bob", 31), (None, 45),
               ("c2:apple@bob2", 65)],
        "o2": [("c2:pear@bob", 15), (None, 45), (None, 51)],
        "o3": [("c1:fig@ann", 21), ("c1:fig@ann2", 25), ("c1:fig@ann3", 35), (None, 41)],
    }  # fmt: skip
    assert got["left"] == {
        "o1": [("c1:apple@-", 1), ("c1:apple@ann", 2), ("c1:apple@ann2", 25), ("c2:apple@bob", 31),
               ("c2:apple@-", 45), ("c2:apple@bob2", 65)],
        "o2": [("c2:pear@-", 11), ("c2:pear@bob", 15), ("c2:pear@-", 45), (":pear@-", 51)],
        "o3": [("c1:fig@ann", 21), ("c1:fig@ann2", 25), ("c1:fig@ann3", 35), (None, 41)],
        "o4": [("c3:kiwi@-", 61)],
    }  # fmt: skip
    # Kafka Streams runs the join asynchronously (through its subscription and response topics),
    # so its intermediate results depend on timing, and so does a final tombstone's timestamp (o2's
    # was 51 or 65: when c2's re-creation at 65 reached the right task before o2's unsubscription,
    # SubscriptionJoin stamps the tombstone max(51, 65)); its final table must be ours.
    oracle, _ = _kstreams(kafka_bootstrap, new_topic, tmp_path, topology, inputs, names)

    def final(table: dict[Any, list[tuple[Any, int]]]) -> dict[Any, tuple[Any, int]]:
        return {k: v[-1] for k, v in table.items() if v[-1][0] is not None}  # a tombstone: absent

    assert {name: final(_by_key(records)) for name, records in oracle.items()} == {
        name: final(table) for name, table in got.items()
    }
