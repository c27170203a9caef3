"""The runtime's public surface is exactly what is intended (everything else is internal)."""

from streamapp import runtime


def test_exported_names_are_pinned_and_sorted() -> None:
    assert runtime.__all__ == sorted(runtime.__all__)
    assert runtime.__all__ == [
        "BranchedKStream",
        "Function",
        "KGroupedStream",
        "KStream",
        "KTable",
        "ManifestError",
        "Problem",
        "Processor",
        "ProcessorContext",
        "ProcessorRecord",
        "Serde",
        "Serdes",
        "StreamApp",
        "StreamAppError",
        "StreamsBuilder",
        "StreamsConfig",
        "Timer",
        "Topology",
        "TopologyError",
    ]
    for name in runtime.__all__:
        assert getattr(runtime, name) is not None


def test_importing_the_runtime_and_making_an_app_never_imports_pyspark() -> None:
    """The operator and `streamapp validate` import the runtime: Spark must not come with it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from streamapp.runtime import Serdes, StreamApp, StreamsBuilder, StreamsConfig\n"
        "from streamapp.runtime.app import State\n"
        "b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())\n"
        "b.stream('a').to('b')\n"
        "app = StreamApp(b.build(), StreamsConfig(bootstrap_servers='127.0.0.1:9'))\n"
        "assert app.state is State.CREATED\n"
        "assert 'pyspark' not in sys.modules, 'pyspark imported'\n"
        "assert 'streamapp.runtime.spark' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_commit_interval_is_refused_where_no_batches_are_spaced() -> None:
    """commit_interval_ms needs micro-batches: a drain run and latency: low are refused by name,
    and so is an interval below 1 ms; nothing starts (no pyspark needed)."""
    import pytest

    from streamapp.runtime import Serdes, StreamApp, StreamsBuilder, StreamsConfig, errors

    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    b.stream("in").to("out")
    with pytest.raises(errors.StreamAppError, match="commit_interval_ms must be at least 1, not 0"):
        StreamsConfig(commit_interval_ms=0)
    with pytest.raises(errors.StreamAppError, match=r"a drain run .* cannot space them out"):
        StreamApp(b.build(), StreamsConfig(commit_interval_ms=500, drain=True))
    low = StreamsBuilder(
        default_key_serde=Serdes.String(), default_value_serde=Serdes.String(), latency="low"
    )
    low.stream("in").to("out")
    with pytest.raises(errors.StreamAppError, match="cannot be combined with latency: low"):
        StreamApp(low.build(), StreamsConfig(commit_interval_ms=500))


def test_the_topology_s_application_id_names_the_app_and_its_progress_group() -> None:
    from streamapp.runtime import StreamApp, StreamsConfig

    manifest = """
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: counts}
spec:
  topology:
    %s
    defaults: {keySerde: string, valueSerde: string}
    streams:
      - from: {topic: in}
        steps: [{to: {topic: out}}]
"""
    named = StreamApp(manifest % "applicationId: counts-v2")
    assert named.application_id == "counts-v2"
    assert StreamApp(manifest % "").application_id == "counts"
    chosen = StreamApp(manifest % "applicationId: counts-v2", StreamsConfig(application_id="mine"))
    assert chosen.application_id == "mine"
