"""The benchmark harness, run short (the brief: `make test` runs a shorter version of each benchmark).

`make bench` takes half an hour and runs by hand; without this, a change to the runtime's CLI, its
progress file or the harness itself would leave the benchmark broken until someone next ran it.
Kafka Streams' side needs a Maven build of tests/bench/kstreams (`make bench-kstreams`) and is
covered by the conformance suite's own Kafka Streams runs; this drives the two Spark variants.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.long  # 2 minutes: make test-long; make test runs the start-up-only run below
def test_a_short_benchmark_run_measures_every_phase_of_both_spark_variants(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "results"
    argv = [
        sys.executable, "-m", "tests.bench.run", "--variants", "streamapp,pyspark",
        "--topologies", "stateless,wordcount", "--records", "20000", "--repeats", "1",
        "--rate", "200", "--latency-seconds", "4", "--warm-seconds", "4", "--sparse-rate", "4",
        "--sparse-seconds", "4", "--settle-seconds", "3", "--no-warm-up-run", "--out", str(out),
    ]  # fmt: skip
    proc = subprocess.run(argv, check=False, cwd=ROOT, capture_output=True, text=True, timeout=540)
    log = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, log
    doc = json.loads((out / "results.json").read_text())
    runs = {(r["topology"], r["variant"]): r for r in doc["runs"]}
    assert set(runs) == {(t, v) for t in ("stateless", "wordcount") for v in ("streamapp", "pyspark")}, log
    for (topology, variant), r in runs.items():
        assert r["status"] == "ok", f"{topology} {variant}: {r['status']}\n{r.get('log_tail')}"
        assert r["throughput_rps"] > 0 and r["cpu_s_per_million"] > 0, r
        assert 0 < r["startup_s"] < 120, r
        assert 0 < r["startup_jit_cpu_s"] < r["startup_cpu_s"], r
        assert r["stopped_with"] == "SIGTERM", r
        # The Spark progress the per-batch tables come from was read, in both phases.
        assert r["spark_drain_batches"]["batches"] >= 1, r
        assert r["warm_batch_p99_ms"] > 0, r
        # The warm phase's collections were read from the JVM (a 4 s phase may have none).
        assert r["warm_gc"] is not None and min(r["warm_gc"].values()) >= 0, r
        # Before the warm phase, one 3 s step of input and the JIT compiler's share of a core in it.
        assert r["settle_s"] >= 3 and len(r["settle_jit_shares"]) == 1 and r["settle_jit_shares"][0] >= 0, r
        if topology == "stateless":
            for phase in ("", "warm_", "sparse_"):
                assert r[f"{phase}latency_samples"] > 0 and f"{phase}latency_note" not in r, (phase, r)
    # A record into a quiet input is met by a micro-batch of its own within a fraction of a second
    # (~0.1 s measured); a broker that holds the reader's fetch made it ~1 s.
    assert runs["stateless", "streamapp"]["sparse_latency_p50_ms"] < 600, runs["stateless", "streamapp"]
    results_md = (out / "RESULTS.md").read_text()
    assert "## stateless" in results_md and "## wordcount" in results_md
    assert "| latency p50 of sparse input" in results_md
    assert "| first micro-batch | CPU (JIT) |" in results_md
    assert "GC young / full (ms)" in results_md
    assert "settle s (JIT share)" in results_md
    assert doc["ratios"]["wordcount"]["throughput_rps"]["streamapp/pyspark"] > 0
    assert (out / "chart.png").stat().st_size > 0


def test_a_startup_only_run_measures_start_up_and_ends_at_the_warm_up_output(tmp_path: pathlib.Path) -> None:
    """`make bench-startup`: each run ends once the warm-up lines' output is complete."""
    out = tmp_path / "results"
    argv = [
        sys.executable, "-m", "tests.bench.run", "--startup-only", "--variants", "streamapp",
        "--topologies", "stateless", "--repeats", "1", "--no-warm-up-run", "--out", str(out),
    ]  # fmt: skip
    proc = subprocess.run(argv, check=False, cwd=ROOT, capture_output=True, text=True, timeout=300)
    log = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, log
    (run,) = json.loads((out / "results.json").read_text())["runs"]
    assert run["status"] == "ok", f"{run['status']}\n{run.get('log_tail')}"
    assert 0 < run["startup_s"] <= run["warmup_done_s"] < 120, run
    assert 0 < run["startup_jit_cpu_s"] < run["startup_cpu_s"], run
    phases = run["startup_phases"]
    assert phases["first_batch_rows"] > 0, phases
    parts = phases["session_s"] + phases["to_first_trigger_s"] + phases["output_in_batch_s"]
    assert abs(parts - run["startup_s"]) < 0.1, run
    # Nothing after start-up ran: no latency phase, drain or warm phase.
    assert not {"throughput_rps", "latency_p50_ms", "warm_batch_p99_ms"} & set(run), sorted(run)
    results_md = (out / "RESULTS.md").read_text()
    assert "start-up only (1,000 lines present before launch" in results_md
    assert "| start-up to first output, s (lower is better) |" in results_md
    assert "## Start-up: where the time goes" in results_md
