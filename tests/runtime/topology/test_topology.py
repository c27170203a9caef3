"""The logical graph: golden describe() output, builder ↔ YAML round trip for every op, names."""

from __future__ import annotations

import pathlib

import pytest

from streamapp.runtime import Function, Serdes, StreamsBuilder, TopologyError, manifest
from streamapp.runtime.topology import graph

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
        .peek(Function("os.path:join"))
        .repartition(partitions=3)
        .to("out", value_serde=Serdes.Long())
    )
    s.group_by("value").count().to_stream().to("counts", value_serde=Serdes.Long())
    s.group_by_key().aggregate("sum", "length(value)").to_stream().to("sums", value_serde=Serdes.Long())
    return b


def test_builder_and_yaml_give_the_same_graph_for_every_operation() -> None:
    builder = _every_op()
    topology = builder.build()
    assert {n.op for n in topology.nodes} == set(graph.OPS)
    loaded = manifest.build_topology(manifest.load_manifest(builder.to_manifest("every-op")))
    assert loaded == topology


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
