"""The logical graph: golden describe() output, builder ↔ YAML round trip for every op, names."""

from __future__ import annotations

import dataclasses
import datetime
import pathlib

import pytest

from streamapp.runtime import Function, Serdes, StreamsBuilder, TopologyError, manifest
from streamapp.runtime.topology import JoinWindows, SessionWindows, SlidingWindows, TimeWindows, graph, nodes

HERE = pathlib.Path(__file__).parent
MANIFESTS = HERE.parent / "manifest" / "valid"
GOLDEN = sorted((HERE / "golden").glob("*.txt"))


@pytest.mark.parametrize("golden", GOLDEN, ids=[g.stem for g in GOLDEN])
def test_describe_matches_golden(golden: pathlib.Path) -> None:
    topology = manifest.build_topology(manifest.load_manifest(MANIFESTS / f"{golden.stem}.yaml"))
    assert topology.describe() == golden.read_text()


def _every_op() -> StreamsBuilder:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    s = b.stream("in", timestamp="timestamp_millis(1)")
    f = s.filter("length(value) > 3")
    f.print(label="seen")
    m = f.filter_not("key IS NULL").map_values("upper(value)").select_key("value")
    other = b.stream(["a", "b"], value_serde=Serdes.Json("amount DOUBLE"), key_serde=Serdes.Bytes())
    branches = (
        m.merge(other.map_values("cast(value.amount as string)", returns="string"))
        .split()
        .branch("value LIKE 'A%'", "a")
        .branch(Function("os.path:isabs", returns="boolean"), "abs")
        .default_branch("rest")
    )
    branches["a"].to("out-a", key_serde=Serdes.String())
    branches["abs"].flat_map("array(named_struct('key', key, 'value', value))").to("out-abs")
    (
        branches["rest"]
        .flat_map_values("explode(split(value, ' '))")
        .map(key="value", value="key")
        .peek(Function("os.path:join"), name="audit")
        .repartition(partitions=3, topic_name="by-word")
        .to("out", value_serde=Serdes.Long(), partitioner="pmod(hash(key), 3)", name="words-out")
    )
    s.group_by("value").count().to_stream().to("counts", value_serde=Serdes.Long())
    s.group_by_key().aggregate("sum", "length(value)").to_stream().to("sums", value_serde=Serdes.Long())
    grouped = s.group_by_key()
    (
        grouped.windowed_by(TimeWindows.of_size_and_grace("1m", "10s"))
        .count()
        .suppress()
        .to_stream()
        .to("per-minute", value_serde=Serdes.Long())
    )
    hopping = TimeWindows.of_size_and_grace(60_000, 0).advance_by(15_000)
    # The advance is a duration like the size: "15s" and a timedelta mean the same.
    assert TimeWindows.of_size_and_grace("1m", 0).advance_by("15s") == hopping
    assert TimeWindows.of_size_and_grace("1m", 0).advance_by(datetime.timedelta(seconds=15)) == hopping
    windowed = grouped.windowed_by(hopping).emit_strategy("final")
    windowed.aggregate("max", "length(value)").to_stream().to("longest", value_serde=Serdes.Json())
    sessions = grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace("5m", "1m"))
    sessions.reduce(Function("builtins:max")).to_stream().to("sessions")
    sliding = grouped.windowed_by(
        SlidingWindows.of_time_difference_and_grace(datetime.timedelta(seconds=30), 0)
    )
    sliding.aggregate(
        Function("builtins:list"), Function("builtins:divmod"), returns="array<string>"
    ).to_stream().to("slides", value_serde=Serdes.Json())
    users = b.table("users").filter("value != ''").map_values("upper(value)")
    users.group_by("value").count().to_stream().to("per-name", value_serde=Serdes.Long())
    s.to_table().group_by("value").reduce(Function("builtins:max"), Function("builtins:min")).to_stream().to(
        "r"
    )
    views = b.stream("views").group_by_key()
    co = s.group_by_key().cogroup(Function("builtins:max")).cogroup(views, Function("builtins:min"))
    co.windowed_by(TimeWindows.of_size_and_grace("1h", "1m")).aggregate(
        Function("builtins:int"), returns="bigint"
    )
    profiles, clicks = b.table("profiles"), b.stream("clicks")
    clicks.join(profiles, "concat(left, right)").to("enriched")
    clicks.left_join(b.stream("shows"), "concat(left, right)", JoinWindows(5_000, 2_000, 1_000)).to("shown")
    profiles.outer_join(b.table("scores"), Function("builtins:max"), returns="string").to_stream().to("both")
    clicks.left_join(b.global_table("regions"), "concat(left, right)", key="value").to("regional")
    clicks.process("streamapp.runtime.cli.examples.silence:SilenceAlert").to("silences")
    return b


def test_builder_and_yaml_give_the_same_graph_for_every_operation() -> None:
    builder = _every_op()
    topology = builder.build()
    assert {n.op for n in topology.nodes} == set(graph.OPS)
    loaded = manifest.build_topology(
        manifest.load_manifest(manifest.to_manifest_yaml(topology, name="every-op"))
    )
    assert loaded == topology
    assert [n.name for n in loaded.nodes] == [n.name for n in topology.nodes]
    assert {"audit", "words-out"} <= {n.name for n in loaded.nodes}


def test_names_follow_kafka_streams_and_calls_return_new_streams() -> None:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    source = b.stream("in")
    filtered = source.filter("value != ''")
    assert filtered is not source and source.node == "KSTREAM-SOURCE-0000000000"
    assert filtered.node == "KSTREAM-FILTER-0000000001"


def shout(value: object) -> object:
    return value


def test_functions_are_recorded_by_import_path_and_lambdas_are_refused() -> None:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    stream = b.stream("in").map_values(shout, returns="string")
    assert b.build().node(stream.node).params == {"function": f"{__name__}:shout", "returns": "string"}
    with pytest.raises(TopologyError, match="use a module-level function"):
        b.stream("in").map_values(lambda v: v)


def test_trigger_choice_is_explained() -> None:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String(), latency="low")
    b.stream("in").peek(Function("os.path:join")).to("out")
    kind, why = b.build().trigger()
    assert kind == "micro-batch" and "peek" in why


def test_nodes_are_immutable_typed_and_hashable() -> None:
    topology = _every_op().build()
    assert len(set(topology.nodes)) == len(topology.nodes)
    assert hash(topology) == hash(_every_op().build())
    sink = topology.node("words-out")
    assert isinstance(sink, nodes.Sink)
    assert sink.partitioner == nodes.Expr("pmod(hash(key), 3)")
    with pytest.raises(dataclasses.FrozenInstanceError):
        sink.topic = "elsewhere"  # type: ignore[misc]


def test_build_order_is_a_topological_order() -> None:
    seen: set[str] = set()
    for node in _every_op().build().nodes:
        assert set(node.parents) <= seen
        seen.add(node.name)


def test_user_names_replace_generated_ones_without_shifting_the_counter() -> None:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    upper = b.stream("in").filter("value != ''", name="non-empty").map_values("upper(value)")
    assert upper.node == "KSTREAM-MAPVALUES-0000000002"
    with pytest.raises(TopologyError, match="'non-empty' already exists"):
        upper.filter("true", name="non-empty")


def test_params_keep_the_mapping_shape_the_compiler_reads() -> None:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    s = b.stream("in", value_serde=Serdes.Json("amount DOUBLE"), timestamp="timestamp_millis(1)")
    s.filter("value.amount > 1").map(key="key", value=Function("os.path:join", returns="string")).to("out")
    branches = s.split().branch("value.amount > 9", "big").default_branch("rest")
    branches["big"].repartition(partitions=2).print(label="big")
    t = b.build()
    assert [dict(n.params) for n in t.nodes] == [
        {"topics": ["in"], "valueSerde": Serdes.Json("amount DOUBLE"), "timestamp": "timestamp_millis(1)"},
        {"expr": "value.amount > 1"},
        {"key": {"expr": "key"}, "value": {"function": "os.path:join", "returns": "string"}},
        {"topic": "out"},
        {"branches": [{"name": "big", "predicate": {"expr": "value.amount > 9"}}], "default": "rest"},
        {"branch": "big"},
        {"branch": "rest"},
        {"partitions": 2},
        {"label": "big"},
    ]


def test_build_checks_the_graph_and_names_the_node() -> None:
    b = StreamsBuilder(default_key_serde=Serdes.String())
    b.stream("in").map_values("upper(vlaue)").to("out", value_serde=Serdes.String())
    with pytest.raises(TopologyError) as caught:
        b.build()
    assert [str(p) for p in caught.value.problems] == [
        "KSTREAM-SOURCE-0000000000.valueSerde: no valueSerde: pass value_serde= or "
        "StreamsBuilder(default_value_serde=...)",
        "KSTREAM-MAPVALUES-0000000001: unknown column 'vlaue' (a record has key, value, timestamp, "
        "headers, partition, offset, topic); did you mean 'value'?",
    ]


def test_fields_are_checked_against_the_schema_only_while_it_still_applies() -> None:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.Json("amount DOUBLE"))
    s = b.stream("in").filter("value.amount > 1")
    # After mapValues the value is whatever the expression made; its fields are not known here.
    s.map_values("named_struct('total', value.amount)").filter("value.total > 2").to("out")
    b.build()
    s.filter("value.total > 2")
    with pytest.raises(TopologyError, match="schema declares amount"):
        b.build()


def test_rename_topics_keeps_everything_else() -> None:
    topology = _every_op().build()
    renamed = topology.rename_topics({"in": "in-1", "out": "out-1"})
    assert renamed.source_topics() == [
        "in-1",
        "a",
        "b",
        "users",
        "views",
        "profiles",
        "clicks",
        "shows",
        "scores",
        "regions",
    ]
    assert "out-1" in renamed.sink_topics() and "out" not in renamed.sink_topics()
    assert [n.name for n in renamed.nodes] == [n.name for n in topology.nodes]
