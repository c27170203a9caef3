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
        "Serde",
        "Serdes",
        "StreamAppError",
        "StreamsBuilder",
        "Topology",
        "TopologyError",
    ]
    for name in runtime.__all__:
        assert getattr(runtime, name) is not None
