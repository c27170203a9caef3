"""The process step in the graph: builder and YAML give the same node; describe() names the
processor and its stores; after it the key counts as changed; no import where imports are off."""

from __future__ import annotations

import pytest

from streamapp.runtime import Serdes, StreamsBuilder, TopologyError, manifest
from streamapp.runtime.cli import examples
from streamapp.runtime.cli.examples import silence
from streamapp.runtime.expressions import check

REF = "streamapp.runtime.cli.examples.silence:SilenceAlert"


def _builder() -> StreamsBuilder:
    return StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())


def test_builder_and_yaml_give_the_same_graph_and_describe() -> None:
    b = _builder()
    b.stream("heartbeats").process(silence.SilenceAlert).to("silent-devices")
    built = b.build()
    loaded = manifest.build_topology(manifest.load_manifest(examples.find("silent-keys")))
    assert built == loaded
    assert built.describe() == loaded.describe()
    assert (
        f"    Processor: KSTREAM-PROCESSOR-0000000001 (processor: {REF}, stores: [last-seen (value)])\n"
        in built.describe()
    )
    again = manifest.build_topology(
        manifest.load_manifest(manifest.to_manifest_yaml(built, name="silent-keys"))
    )
    assert again == built


def test_a_grouping_after_a_processor_repartitions_and_returns_is_described() -> None:
    b = _builder()
    b.stream("in").process(REF, returns="bigint").group_by_key().count().to_stream().to("out")
    text = b.build().describe()
    assert f"(processor: {REF}, returns: bigint, stores: [last-seen (value)])" in text
    assert "Sink: KSTREAM-GROUPBY-0000000002-repartition-sink" in text


def test_the_builder_refuses_what_is_not_a_processor() -> None:
    with pytest.raises(TopologyError, match="Serde is not a Processor class"):
        _builder().stream("in").process(Serdes.String().__class__)  # type: ignore[arg-type]
    b = _builder()
    b.stream("in").process("streamapp.runtime.serdes:Serde").to("out")
    with pytest.raises(TopologyError, match="is not a Processor class"):
        b.build()


def test_where_imports_are_off_the_reference_is_checked_for_form_and_no_store_is_known() -> None:
    with check.functions_by_form_only():
        loaded = manifest.build_topology(manifest.load_manifest(examples.find("silent-keys")))
        assert "stores" not in loaded.describe()
        bad = examples.find("silent-keys").read_text().replace(REF, "not a reference")
        problems = [str(p) for p in manifest.validate_manifest(bad)]
    assert problems == [
        "spec.topology.streams[0].steps[0].process.function: a function reference is "
        "'package.module:function', not 'not a reference'"
    ]
