"""results.json and RESULTS.md: the environment, every run, medians per variant, and the ratios.

RESULTS.md is rewritten after every run (a long benchmark that is interrupted still leaves its
numbers); the text between the analysis markers is kept, so the analysis written by hand survives
the next ``make bench``.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import pathlib
import platform
import re
import statistics
import subprocess
from typing import Any

from tests.bench import chart

__all__ = ["environment", "one_line", "write"]

_HERE = pathlib.Path(__file__).resolve().parent
_NAMES = {
    "streamapp": "(a) StreamApp",
    "pyspark": "(b) PySpark",
    "kstreams": "(c) Kafka Streams",
    "streamapp-rt": "(d) StreamApp, latency: low",
    "streamapp-eos": "(e) StreamApp, exactly_once_v2",
}
VARIANT_LETTERS = {
    "streamapp": "a",
    "pyspark": "b",
    "kstreams": "c",
    "streamapp-rt": "d",
    "streamapp-eos": "e",
}
_OURS = ("streamapp", "streamapp-rt", "streamapp-eos")


def _pairs(variants: dict[str, Any]) -> list[tuple[str, str]]:
    """The ratios shown: each StreamApp variant over (b) and (c), and exactly-once over (a) (its cost)."""
    pairs = [(x, y) for x in _OURS for y in ("pyspark", "kstreams")]
    pairs.append(("streamapp-eos", "streamapp"))
    return [(x, y) for x, y in pairs if x in variants and y in variants]


#: (key, label, which direction is better)
MEASURES = (
    ("throughput_rps", "throughput, records/s (drain)", "higher"),
    ("cpu_s_per_million", "CPU-seconds per million records", "lower"),
    ("cpu_s_per_million_excl_jit", "CPU-seconds per million records, JIT compiler threads excluded", "lower"),
    ("latency_p50_ms", "latency p50, ms (stateless, fixed rate)", "lower"),
    ("latency_p99_ms", "latency p99, ms (stateless, fixed rate)", "lower"),
    ("warm_latency_p50_ms", "latency p50 after the drains (warm), ms", "lower"),
    ("warm_latency_p99_ms", "latency p99 after the drains (warm), ms", "lower"),
    ("sparse_latency_p50_ms", "latency p50 of sparse input (warm, a few records/s), ms", "lower"),
    ("sparse_latency_p99_ms", "latency p99 of sparse input (warm, a few records/s), ms", "lower"),
    ("batch_p50_ms", "micro-batch p50 at a fixed rate, ms (Spark)", "lower"),
    ("batch_p99_ms", "micro-batch p99 at a fixed rate, ms (Spark)", "lower"),
    ("warm_batch_p50_ms", "micro-batch p50 at a fixed rate after the drains (warm), ms", "lower"),
    ("warm_batch_p99_ms", "micro-batch p99 at a fixed rate after the drains (warm), ms", "lower"),
    ("startup_s", "start-up to first output, s", "lower"),
    ("startup_cpu_s", "CPU-seconds of the process tree until the warm-up's output was complete", "lower"),
    ("warmup_done_s", "start-up to the warm-up's output complete, s", "lower"),
)
_BEGIN, _END = "<!-- analysis:begin -->", "<!-- analysis:end -->"
_PLACEHOLDER = """\
_To be written by the lead after a full run on a quiet machine:_ where StreamApp's time goes (the
Spark durationMs breakdown above: addBatch is the work of the batch — source read, operators,
sink; latestOffset/getBatch talk to Kafka; queryPlanning is Catalyst per batch; walCommit and
commitOffsets write the checkpoint), the slowest stage and what to try, and how far each measure
is from the targets (≤ 1.05× PySpark cost, ≥ 1.0× Kafka Streams throughput, stateless p99 < 300 ms
where the real-time trigger applies)."""


def _run(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    return (done.stdout + done.stderr).strip()


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment(*, command: str, args: dict[str, Any]) -> dict[str, Any]:
    from streamapp.runtime.embedded import artifacts

    pom = (_HERE / "kstreams" / "pom.xml").read_text()
    streams = re.search(r"<kafka.version>([^<]+)</kafka.version>", pom)
    meminfo = pathlib.Path("/proc/meminfo").read_text()
    mem_kb = int(re.search(r"MemTotal:\s+(\d+)", meminfo).group(1))  # type: ignore[union-attr]
    model = re.search(r"model name\s*:\s*(.+)", pathlib.Path("/proc/cpuinfo").read_text())
    return {
        "command": command,
        "args": {k: str(v) if isinstance(v, pathlib.Path) else v for k, v in args.items()},
        "started_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "versions": {
            "kafka_broker": artifacts.KAFKA_VERSION,
            "kafka_streams": streams.group(1) if streams else "unknown",
            "spark": _version("pyspark"),
            "spark_sql_kafka": artifacts.spark_version(),
            "java": _run(["java", "-version"]).splitlines()[0],
            "python": platform.python_version(),
            "confluent_kafka": _version("confluent-kafka"),
            "streamapp": _version("streamapp"),
            "git": _run(["git", "-C", str(_HERE), "describe", "--always", "--dirty"]),
        },
        "machine": {
            "nproc": os.cpu_count(),
            "usable_cpus": len(os.sched_getaffinity(0)),
            "cpu_model": model.group(1).strip() if model else "unknown",
            "memory_gib": round(mem_kb / 1024 / 1024, 1),
            "kernel": platform.release(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        },
    }


def one_line(r: dict[str, Any]) -> str:
    if r.get("status") != "ok":
        return f"{r['topology']} {r['variant']}: {r.get('status')}"
    parts: list[str] = []
    if "throughput_rps" in r:  # not in a --startup-only run
        parts += [f"{r['throughput_rps']:,} rec/s", f"{r['cpu_s_per_million']} cpu-s/M"]
    if "latency_p99_ms" in r:
        parts.append(f"p50 {r['latency_p50_ms']} ms p99 {r['latency_p99_ms']} ms")
    if "warm_latency_p99_ms" in r:
        parts.append(f"warm p50 {r['warm_latency_p50_ms']} ms p99 {r['warm_latency_p99_ms']} ms")
    if "sparse_latency_p99_ms" in r:
        parts.append(f"sparse p50 {r['sparse_latency_p50_ms']} ms p99 {r['sparse_latency_p99_ms']} ms")
    parts.append(f"start-up {r['startup_s']} s ({r['startup_cpu_s']} CPU-s)")
    return f"{r['topology']} {r['variant']}: " + ", ".join(parts)


def summarise(results: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """topology → variant → {measure: {median, min, max, n}} plus the status of failed runs."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in results:
        cell = out.setdefault(r["topology"], {}).setdefault(r["variant"], {"failures": []})
        if r.get("status") != "ok":
            cell["failures"].append(r.get("status"))
            continue
        for key, _, _ in MEASURES:
            if key in r:
                cell.setdefault(key, {"values": []})["values"].append(r[key])
    for variants in out.values():
        for cell in variants.values():
            for key, _, _ in MEASURES:
                if key in cell:
                    vals = cell[key]["values"]
                    cell[key] |= {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
    return out


def _ratio(
    summary: dict[str, dict[str, Any]], key: str, other: str, *, ours: str = "streamapp"
) -> float | None:
    a, b = summary.get(ours, {}).get(key), summary.get(other, {}).get(key)
    if not a or not b or not b["median"]:
        return None
    return round(a["median"] / b["median"], 3)


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:g}"


def _cell(cell: dict[str, Any] | None, key: str) -> str:
    if not cell:
        return "—"
    if key not in cell:
        if cell.get("failures"):
            return str(cell["failures"][0]).split(":")[0]  # the reason is listed under the table
        return "—"
    m = cell[key]
    spread = f" ({_fmt(m['min'])}–{_fmt(m['max'])})" if len(m["values"]) > 1 else ""
    return f"{_fmt(m['median'])}{spread}"


def _run_loads(results: list[dict[str, Any]]) -> str:
    """The 1-minute load average when each run started (other work on the machine shows here)."""
    loads = [r["load_average_at_start"][0] for r in results if r.get("load_average_at_start")]
    if not loads:
        return ""
    return (
        f"; 1-minute load average at the start of each run {min(loads):g}–{max(loads):g} "
        f"(median {statistics.median(loads):g})"
    )


def _short(status: str) -> str:
    return status if len(status) <= 90 else status[:87] + "…"


def _markdown(
    meta: dict[str, Any], results: list[dict[str, Any]], summary: dict[str, Any], analysis: str
) -> str:
    v, m, a = meta["versions"], meta["machine"], meta["args"]
    sparse = (
        f" (sparse: {a['sparse_rate']:g}/s for {a['sparse_seconds']:g} s)" if a.get("sparse_seconds") else ""
    )
    warm = f", warm {a['warm_seconds']:g} s" if a.get("warm_seconds") is not None else ""
    probes = f"latency probes at {a['rate']}/s for {a['latency_seconds']:g} s{warm}{sparse}; "
    lines = [
        "# Benchmarks: StreamApp vs hand-written PySpark vs Kafka Streams",
        "",
        f"Generated {meta['started_utc']} by:",
        "",
        f"    {meta['command']}",
        "",
        f"- Versions: Kafka broker {v['kafka_broker']} (embedded KRaft), Kafka Streams {v['kafka_streams']}, "
        f"Spark {v['spark']} + spark-sql-kafka {v['spark_sql_kafka']}, {v['java']}, Python {v['python']}, "
        f"confluent-kafka {v['confluent_kafka']}, streamapp {v['streamapp']} ({v['git']})",
        f"- Machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB memory, "
        f"Linux {m['kernel']}, load average at start {m['load_average_at_start']}" + _run_loads(results),
        (
            f"- Workload: start-up only ({a['warmup']:,} lines present before launch, each run ends "
            f"when their output is complete), {a['partitions']} partitions, "
            if a.get("startup_only")
            else f"- Workload: {a['records']:,} records drained per run, {a['partitions']} partitions, "
        )
        + f"{a['repeats']} runs per variant interleaved, "
        + (probes if "stateless" in a.get("topologies", ("stateless",)) and not a.get("startup_only") else "")
        + (f"join table of {a['table_keys']:,} keys; " if "join" in a.get("topologies", ()) else "")
        + f"cells are median (min–max) over the runs; total wall time {meta.get('wall_s', '?')} s",
        "",
        "![medians with min–max whiskers](chart.png)",
        "",
    ]
    for topology, variants in summary.items():
        names = [x for x in _NAMES if x in variants]
        pairs = _pairs(variants)
        ratio_names = [f"{VARIANT_LETTERS[x]}/{VARIANT_LETTERS[y]}" for x, y in pairs]
        header = " | ".join([_NAMES[x] for x in names] + ratio_names)
        lines += [
            f"## {topology}",
            "",
            f"| measure | {header} |",
            "|---" * (1 + len(names) + len(ratio_names)) + "|",
        ]
        for key, label, better in MEASURES:
            if not any(key in c for c in variants.values()):
                continue
            ratios = [_ratio(variants, key, y, ours=x) for x, y in pairs]
            lines.append(
                f"| {label} ({better} is better) | "
                + " | ".join(_cell(variants.get(x), key) for x in names)
                + " | "
                + " | ".join("—" if r is None else f"{r:g}×" for r in ratios)
                + " |"
            )
        failures = [f"{_NAMES[x]}: {_short(s)}" for x, c in variants.items() for s in c["failures"]]
        if failures:
            lines += ["", "Runs without numbers: " + "; ".join(sorted(set(failures)))]
        lines.append("")
    lines += _startup_table(results)
    lines += _breakdown_table(results)
    lines += [
        "## Analysis",
        "",
        _BEGIN,
        analysis.strip() or _PLACEHOLDER,
        _END,
        "",
        "## Method",
        "",
        "Every run uses fresh topics, a fresh checkpoint/state dir and consumer group/application id, and",
        "its own process tree (started in a new session). Before the first measured run, a smaller run",
        "that is not recorded warms the fresh broker up (`broker_warm_up_run` in results.json; its JIT",
        "had made the first run after its start 2-3x slower in micro-batch p99 than any later run).",
        "Start-up: launch → first output record (the",
        "input holds the warm-up lines before launch). Latency (stateless): probes sent at a fixed rate",
        "carry their send time (monotonic clock of the harness; producer linger.ms=2) in the value;",
        "latency is send → arrival at the harness's read_committed consumer of the output topic; the",
        "first 2 s are discarded. The probes run twice: right after start-up (the JIT has compiled",
        "little yet) and again after the throughput drains (*warm*: what a long-running app sees).",
        "Then, stateless only, sparse input: probes a few a second (--sparse-rate, --sparse-seconds),",
        "each met by a micro-batch of its own: the fixed cost per batch a quiet app or a demo sees.",
        "Throughput: the variant's process tree is paused (SIGSTOP), the backlog is written, the CPU time",
        "of the tree is sampled (utime+stime of every process, /proc), the tree is resumed (SIGCONT) and",
        "the drain ends when the output is complete: the expected record count (stateless; contents are",
        "verified against the reference after the run) or, for the word count, every word's latest count",
        "equal to the reference count computed in Python. CPU per million = the tree's CPU-seconds over",
        'the drain / millions of input records; "JIT compiler threads excluded" subtracts the CPU of the',
        "JVMs' C1/C2 compiler threads over the same drain (/proc/<pid>/task), which on 2 cores is a large",
        "and noisy part of a Spark drain (see the analysis).",
        *(
            [f"Before the measured drain, {a['warm_drain']:,} lines were drained unmeasured (--warm-drain)."]
            if a.get("warm_drain")
            else []
        ),
        *(
            [
                f"Join: the table of {a.get('table_keys', 0):,} users is written before the warm-up; every",
                "stream record finds its user, so the drain ends when one output record per input record",
                "arrived (values verified after the run). (b) joins each micro-batch with a snapshot of",
                "the table read at start (Spark's stream-static join, cached), not an evolving table.",
            ]
            if "join" in a.get("topologies", ())
            else []
        ),
        "Kafka Streams runs with 2 stream threads, -Xmx2g and",
        f"commit.interval.ms={meta['args']['kstreams_commit_ms']} (its record cache is flushed on commit);",
        "the Spark variants use build_session (local[2], RocksDB state) and a "
        + (
            f"{a['commit_interval_ms']} ms processing-time trigger for StreamApp (spec.commitIntervalMs, "
            "--commit-interval-ms) and a 0-second one for (b)"
            if a.get("commit_interval_ms")
            else "0-second processing-time trigger"
        )
        + "; (e) writes with processingGuarantee: exactly_once_v2 (its output read read_committed,",
        "as every variant's is); (b) uses 2 shuffle partitions, StreamApp's word count its default",
        "state partitions (the input's 4 tasks on at most a state partition per task slot: 2), and both",
        "read with",
        "kafka.max.poll.records=100000 and, under a micro-batch trigger, kafka.fetch.max.wait.ms=5",
        "(StreamApp's source defaults; generic tuning of Spark's Kafka reader, given to (b) as well:",
        "without the second, the micro-batch that read the last records of a latency phase took",
        "~1.1 s in every variant, and at 4 records/s a record's latency p50 was 1.04 s, not 0.1 s).",
        *(
            [f"Extra Spark configuration for both Spark variants: {a['spark_conf']}."]
            if a.get("spark_conf")
            else []
        ),
        "Raw numbers of every run: results.json.",
        "",
    ]
    return "\n".join(lines)


def _startup_table(results: list[dict[str, Any]]) -> list[str]:
    rows = []
    for r in results:
        p = r.get("startup_phases")
        if not p:
            continue
        ms = p.get("first_batch_ms", {})
        parts = ", ".join(f"{k} {ms[k] / 1000:.1f}" for k in _PHASES if ms.get(k, 0) >= 100)
        rows.append(
            f"| {r['topology']} | {_NAMES[r['variant']]} | {r['rep']} | {p['session_s']:.1f} | "
            f"{p['to_first_trigger_s']:.1f} | {p['output_in_batch_s']:.1f} | {r['startup_s']:.1f} | "
            f"{p['first_batch_s']:.1f} ({p['first_batch_rows']:,} rows{'; ' + parts if parts else ''}) | "
            + (
                f"{r['startup_cpu_s']:.1f} ({r['startup_jit_cpu_s']:.1f}) |"
                if "startup_cpu_s" in r
                else "— |"
            )
        )
    if not rows:
        return []
    return [
        "## Start-up: where the time goes",
        "",
        "Launch → first output record (s), split by what the process reports: the SparkSession up",
        "(Python imports, the JVM, the SparkContext; noted by tests/bench/probe), then the query's first",
        "trigger (topology compiled, query started), then the first output record seen by the harness's",
        "consumer (it is written during the first micro-batch, before the batch ends). Last column: the",
        "whole first micro-batch (the warm-up lines) by its durationMs, phases of 0.1 s or more. CPU:",
        "CPU-seconds of the process tree from launch until the warm-up's output was complete, in",
        "brackets those of the JVM's JIT compiler threads (C1/C2 CompilerThread, /proc).",
        "",
        "| topology | variant | run | session up | → first trigger | → first output | total "
        "| first micro-batch | CPU (JIT) |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


_PHASES = ("latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def _breakdown_table(results: list[dict[str, Any]]) -> list[str]:
    rows, per_batch = [], []
    for r in results:
        b = r.get("spark_drain_batches")
        if b:
            d = b["duration_ms"]
            trigger = d.get("triggerExecution", 0) or 1
            cells = [f"{d.get(k, 0):,} ({100 * d.get(k, 0) / trigger:.0f}%)" for k in _PHASES]
            rows.append(
                f"| {r['topology']} | {_NAMES[r['variant']]} | {r['rep']} | {b['batches']} | "
                f"{d.get('triggerExecution', 0):,} | " + " | ".join(cells) + " |"
            )
        for phase, key in (("first", "spark_latency_batches"), ("warm", "spark_warm_latency_batches")):
            b = r.get(key)
            if not b:
                continue
            n, d = b["batches"], b["duration_ms"]
            cells = [f"{d.get(k, 0) / n:,.0f}" for k in ("triggerExecution", *_PHASES)]
            spread = "–"
            if "trigger_p99_ms" in b:
                spread = f"{b['trigger_p50_ms']:,.0f} / {b['trigger_p99_ms']:,.0f}"
            gc = r.get("warm_gc") if phase == "warm" else None
            collections = "–"
            if gc:
                collections = f"{gc['young']} ({gc['young_ms']:,}) / {gc['full']} ({gc['full_ms']:,})"
            settle = "–"
            if phase == "warm" and r.get("settle_jit_shares"):
                settle = f"{r['settle_s']:g} ({r['settle_jit_shares'][-1]:.2f})"
            per_batch.append(
                f"| {r['topology']} | {_NAMES[r['variant']]} | {r['rep']} | {phase} | {n} | "
                + f"{b['input_rows'] / n:,.0f} | {spread} | {collections} | {settle} | "
                + " | ".join(cells)
                + " |"
            )
    lines: list[str] = []
    if rows:
        lines += [
            "## Where Spark's time goes during the drain",
            "",
            "Sum of StreamingQueryProgress.durationMs over the micro-batches of each drain (ms, share of",
            "triggerExecution), polled from the query by tests/bench/probe; no profiler involved.",
            "",
            "| topology | variant | run | batches | triggerExecution | " + " | ".join(_PHASES) + " |",
            "|---|---|---|---|---|" + "---|" * len(_PHASES),
            *rows,
            "",
        ]
    if per_batch:
        lines += [
            "## Micro-batches during the latency phase",
            "",
            "Mean durationMs per micro-batch (ms) while input arrived at a fixed rate (stateless: the",
            "latency probes; wordcount: lines of the pool, as many a second): a record waits for the batch",
            "in progress, then for its own, so the micro-batch latency follows these numbers. Phase",
            "*first*: right after start-up; *warm*: the same input again after the throughput drains.",
            "GC: the main JVM's young and full collections in the warm phase (their pauses, ms; jstat);",
            "a full one of the parallel collector lengthens the micro-batch it falls in by its pause.",
            "Settle: before the warm phase, seconds of input at the same rate until the JIT compiler",
            "threads used less than `--settle-jit` of a core in 10 s (their share in the last 10 s).",
            "",
            "| topology | variant | run | phase | batches | rows/batch | triggerExecution p50 / p99 | "
            "GC young / full (ms) | settle s (JIT share) | triggerExecution | " + " | ".join(_PHASES) + " |",
            "|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(_PHASES),
            *per_batch,
            "",
        ]
    return lines


def write(out: pathlib.Path, meta: dict[str, Any], results: list[dict[str, Any]]) -> None:
    summary = summarise(results)
    ratios = {
        topology: {
            key: {f"{ours}/{other}": _ratio(v, key, other, ours=ours) for ours, other in _pairs(v)}
            for key, _, _ in MEASURES
        }
        for topology, v in summary.items()
    }
    doc = {"meta": meta, "summary": summary, "ratios": ratios, "runs": results}
    (out / "results.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    md = out / "RESULTS.md"
    analysis = ""
    if md.exists():
        text = md.read_text()
        if _BEGIN in text and _END in text:
            analysis = text.split(_BEGIN, 1)[1].split(_END, 1)[0]
            if analysis.strip() == _PLACEHOLDER.strip():
                analysis = ""
    md.write_text(_markdown(meta, results, summary, analysis))
    chart.draw(summary, out / "chart.png", subtitle=chart.subtitle(meta))
