"""AppMetrics turns Spark's progress JSON into Prometheus series (no JVM: the arithmetic alone)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from streamapp.runtime import metrics


def _samples(app_metrics: metrics.AppMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = app_metrics.exposition().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    key = (name, tuple(sorted({"app": "wc", "namespace": "apps", **labels}.items())))
    assert key in samples, f"{name}{labels} missing from {sorted(k for k in samples if k[0] == name)}"
    return samples[key]


def _progress(batch: int, start: object, end: dict[str, dict[str, int]], latest: object, rows: int) -> dict:
    return {
        "name": "wc",
        "batchId": batch,
        "timestamp": "2026-11-23T19:40:00.000Z",
        "numInputRows": rows,
        "inputRowsPerSecond": 12.5,
        "processedRowsPerSecond": float("nan"),
        "durationMs": {"addBatch": 800, "latestOffset": 10, "triggerExecution": 1000, "walCommit": 50},
        "stateOperators": [
            {"operatorName": "transformWithStateExec", "numRowsTotal": 7, "memoryUsedBytes": 4096}
        ],
        "sources": [
            {
                "description": "KafkaV2[Subscribe[a,b]]",
                "startOffset": start,
                "endOffset": end,
                "latestOffset": latest,
                "numInputRows": rows,
            }
        ],
    }


def test_every_series_exists_before_the_first_batch() -> None:
    app_metrics = metrics.AppMetrics(app="wc", namespace="apps", sources=["a", "b"], sinks=["out"])
    samples = _samples(app_metrics)
    assert _value(samples, "streamapp_records_in_total", topic="a") == 0
    assert _value(samples, "streamapp_records_out_total", topic="out") == 0
    assert _value(samples, "streamapp_records_skipped_total", topic="b") == 0
    assert _value(samples, "streamapp_records_dead_lettered_total", topic="b") == 0
    assert _value(samples, "streamapp_errors_total", kind="query") == 0
    assert _value(samples, "streamapp_batch_duration_seconds_count") == 0


def test_progress_becomes_counts_lag_durations_and_state() -> None:
    app_metrics = metrics.AppMetrics(app="wc", namespace="apps", sources=["a", "b"], sinks=["out"])
    # First batch of a new checkpoint: Spark's startOffset is null; the source began at these.
    initial = {("a", 0): 0, ("a", 1): 5, ("b", 0): 0}
    app_metrics.on_progress(
        _progress(
            0, None, {"a": {"0": 10, "1": 8}, "b": {"0": 4}}, {"a": {"0": 12, "1": 8}, "b": {"0": 4}}, 17
        ),
        initial_offsets=lambda i: initial if i == 0 else None,
        outputs={"out": (6, 1_700_000_000.5)},
    )
    app_metrics.on_progress(
        _progress(
            1,
            {"a": {"0": 10, "1": 8}, "b": {"0": 4}},
            {"a": {"0": 12, "1": 8}, "b": {"0": 9}},
            {"a": {"0": 12, "1": 8}, "b": {"0": 9}},
            7,
        ),
        outputs={"out": (2, 1_700_000_001.0)},
    )
    app_metrics.count("late", "KSTREAM-AGGREGATE-0003", 2)
    app_metrics.count("late", "KSTREAM-AGGREGATE-0003", 5)  # a running total: +3
    app_metrics.count("skipped", "a", 1)
    samples = _samples(app_metrics)
    assert _value(samples, "streamapp_records_in_total", topic="a") == 10 + 3 + 2
    assert _value(samples, "streamapp_records_in_total", topic="b") == 4 + 5
    assert _value(samples, "streamapp_records_out_total", topic="out") == 8
    assert _value(samples, "streamapp_consumer_lag_records", topic="a", partition="0") == 0
    assert _value(samples, "streamapp_consumer_offset", topic="b", partition="0") == 9
    assert _value(samples, "streamapp_batches_total") == 2
    assert _value(samples, "streamapp_batch_duration_seconds_count") == 2
    assert _value(samples, "streamapp_batch_duration_seconds_sum") == 2.0
    assert _value(samples, "streamapp_batch_phase_seconds_total", phase="addBatch") == 1.6
    assert _value(samples, "streamapp_input_records_per_second") == 12.5
    assert _value(samples, "streamapp_processed_records_per_second") == 0  # NaN from Spark
    assert _value(samples, "streamapp_state_rows", operator="0:transformWithStateExec") == 7
    assert _value(samples, "streamapp_state_bytes", operator="0:transformWithStateExec") == 4096
    assert _value(samples, "streamapp_stream_time_seconds", topic="out") == 1_700_000_001.0
    assert _value(samples, "streamapp_late_records_dropped_total", node="KSTREAM-AGGREGATE-0003") == 5
    assert _value(samples, "streamapp_records_skipped_total", topic="a") == 1


def test_lag_is_what_the_source_saw_beyond_the_batch() -> None:
    app_metrics = metrics.AppMetrics(app="wc", namespace="apps", sources=["a"], sinks=[])
    app_metrics.on_progress(_progress(3, {"a": {"0": 0}}, {"a": {"0": 100}}, {"a": {"0": 250}}, 100))
    samples = _samples(app_metrics)
    assert _value(samples, "streamapp_consumer_lag_records", topic="a", partition="0") == 150
    # One topic in the source: Spark's row count is taken as is.
    assert _value(samples, "streamapp_records_in_total", topic="a") == 100


def test_a_first_batch_whose_start_is_unknown_counts_nothing_for_several_topics() -> None:
    app_metrics = metrics.AppMetrics(app="wc", namespace="apps", sources=["a", "b"], sinks=[])
    app_metrics.on_progress(_progress(0, None, {"a": {"0": 3}, "b": {"0": 4}}, None, 7))
    samples = _samples(app_metrics)
    assert _value(samples, "streamapp_records_in_total", topic="a") == 0


def test_state_rows_have_no_series_where_the_stores_do_not_count_them() -> None:
    # Spark reports numRowsTotal 0 when RocksDB does not track its rows (StreamApp's default).
    app_metrics = metrics.AppMetrics(
        app="wc", namespace="apps", sources=["a", "b"], sinks=["out"], state_rows=False
    )
    app_metrics.on_progress(_progress(0, None, {"a": {"0": 1}}, {"a": {"0": 1}}, 1))
    samples = _samples(app_metrics)
    assert not [key for key in samples if key[0] == "streamapp_state_rows"]
    assert _value(samples, "streamapp_state_bytes", operator="0:transformWithStateExec") == 4096
