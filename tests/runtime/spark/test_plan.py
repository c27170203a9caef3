"""How a micro-batch's observed metrics become records read and written per topic (no Spark run)."""

from __future__ import annotations

from streamapp.runtime.spark import plan, query_metrics

NOTHING = {"skipped": {}, "dead_lettered": {}, "dropped": {}}


def test_observed_counts_are_read_per_topic_in_either_form_spark_reports() -> None:
    observed = {"streamapp_read_0": ["a", "b"], "streamapp_read_1": ["c"], plan.WRITTEN: ["out"]}
    # The progress's JSON: each observation a list of values, in column order.
    as_json = {"streamapp_read_0": [2, 0], "streamapp_read_1": [5], plan.WRITTEN: [7]}
    assert plan.counted_topics(as_json, observed) == {
        "read": {"a": 2, "c": 5},
        "written": {"out": 7},
        **NOTHING,
    }
    # A Row-like mapping by column name; a batch without the observation counts nothing.
    as_rows = {"streamapp_read_0": {"t0": 1, "t1": 3}}
    assert plan.counted_topics(as_rows, observed) == {
        "read": {"a": 1, "b": 3},
        "written": {},
        **NOTHING,
    }


def test_records_written_are_read_from_the_metrics_observation_when_it_is_in_the_plan() -> None:
    """The sink's metrics observation (out_<i>, ts_<i> per sink topic) counts the records written."""
    observed = {"streamapp_read_0": ["in"], query_metrics.OBSERVATION: ["x", "y"]}
    as_json = {"streamapp_read_0": [4], query_metrics.OBSERVATION: [3, 1700000000000, 1, 1700000000001]}
    assert plan.counted_topics(as_json, observed)["written"] == {"x": 3, "y": 1}
    as_rows = {query_metrics.OBSERVATION: {"out_0": None, "ts_0": None, "out_1": 2, "ts_1": 5}}
    assert plan.counted_topics(as_rows, observed)["written"] == {"y": 2}


def test_skipped_dead_lettered_and_dropped_records_are_counted_apart_from_reads() -> None:
    observed = {
        "streamapp_read_0": ["a"],
        "streamapp_skipped_0": ["a"],
        "streamapp_dead_lettered_0": ["b"],
        "streamapp_dropped_0": ["KSTREAM-AGGREGATE-0000000002"],
    }
    metrics = {
        "streamapp_read_0": [10],
        "streamapp_skipped_0": [2],
        "streamapp_dead_lettered_0": [3],
        "streamapp_dropped_0": [1],
    }
    assert plan.counted_topics(metrics, observed) == {
        "read": {"a": 10},
        "written": {},
        "skipped": {"a": 2},
        "dead_lettered": {"b": 3},
        "dropped": {"KSTREAM-AGGREGATE-0000000002": 1},
    }


def test_a_source_of_one_topic_is_counted_by_its_input_rows_once_per_topic() -> None:
    """A frame reading one topic carries no observation: its source's numInputRows count it; a
    topic two sources read is counted once; a source of several topics is counted by observation."""
    read_sources = {plan.source_description("a"): "a", plan.source_description("b"): "b"}
    observed = {"streamapp_read_0": ["c", "d"]}
    sources = [
        {"description": "KafkaV2[Subscribe[a]]", "numInputRows": 4},
        {"description": "KafkaV2[Subscribe[c, d]]", "numInputRows": 9},
        {"description": "KafkaV2[Subscribe[a]]", "numInputRows": 4},  # a read a second time
        {"description": "KafkaV2[Subscribe[b]]", "numInputRows": 0},
    ]
    counts = plan.counted_topics(
        {"streamapp_read_0": [6, 3]}, observed, sources=sources, read_sources=read_sources
    )
    assert counts["read"] == {"a": 4, "c": 6, "d": 3}
