"""Benchmarks side by side: StreamApp vs hand-written PySpark vs Kafka Streams (issue 6).

    .venv/bin/python -m tests.bench.run --records 2000000 --repeats 3

Starts one embedded Kafka broker, then runs every (topology, variant) pair ``--repeats`` times,
interleaved (A B C, B C A, C A B …) so drift of the machine, and whatever a run leaves behind for
the next (the broker deleting its topics), hits every variant alike. One run:

1. fresh input and output topics (4 partitions each), a fresh checkpoint/state dir and app id;
2. ``--warmup`` lines are written, the variant is launched → **start-up** = launch → first output;
3. stateless only: probes at ``--rate`` records/s for ``--latency-seconds`` carry their send time
   in the value → **latency** p50/p99 = send → arrival at the harness's consumer of the output;
4. the variant's process tree is paused (SIGSTOP), ``--records`` lines are written, CPU time is
   sampled, the tree resumed → **throughput** = records / (resume → output complete), where complete
   means the expected record count (stateless) or every word's latest count equal to the reference
   count computed in Python (word count); **CPU** = the tree's utime+stime over that drain;
5. input at the same rate until the JVM's JIT compiler settles (``--settle-seconds``, ``--settle-jit``),
   then the probes of 3. again (word count: its fixed-rate lines) for ``--warm-seconds``, the
   process warm → **warm latency** and the warm micro-batches;
6. SIGTERM (SIGKILL after 30 s), check that no process of the tree is left, verify the whole
   output against the reference, delete the run's topics.

The stream-table join (``--topologies join``, ``make bench-join``) writes its table of
``--table-keys`` users before the warm-up, and its stream records each find their user: the drain
is complete when one output record per input record arrived (contents verified after the run).

Results go to ``--out``/results.json and RESULTS.md (see tests/bench/report.py).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shlex
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient

from streamapp.runtime.embedded import broker
from streamapp.runtime.kafka import admin
from tests.bench import procs, profiling, report, workload

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
KSTREAMS = HERE / "kstreams"
VARIANTS = {"streamapp": "a", "pyspark": "b", "kstreams": "c", "streamapp-rt": "d", "streamapp-eos": "e"}
TOPOLOGIES = ("stateless", "wordcount", "join")
#: (d) is the stateless manifest with `latency: low` (Spark's real-time trigger); word count is
#: stateful, where that trigger does not apply.
ONLY = {"streamapp-rt": ("stateless",)}
#: Seconds of input per step of the settling phase (the JIT's share is checked after each).
SETTLE_STEP = 10.0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tests.bench.run", description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=2_000_000, help="lines drained per run (default 2e6)")
    p.add_argument("--repeats", type=int, default=3, help="runs per (topology, variant) (default 3)")
    p.add_argument(
        "--variants",
        default="streamapp,pyspark,kstreams,streamapp-rt",
        help="comma list (or a,b,c,d,e; d = StreamApp with latency: low, stateless only; e = StreamApp "
        "with processingGuarantee: exactly_once_v2)",
    )
    p.add_argument(
        "--topologies",
        default="stateless,wordcount",
        help="comma list of stateless, wordcount, join (default stateless,wordcount; join: make bench-join)",
    )
    p.add_argument("--rate", type=int, default=1000, help="latency probes per second (default 1000)")
    p.add_argument(
        "--latency-seconds", type=float, default=20.0, help="first latency phase's length (default 20)"
    )
    p.add_argument(
        "--warm-seconds",
        type=float,
        default=60.0,
        help="warm latency phase's length (default 60: its micro-batch p99 is then the 7th-15th slowest of "
        "700-1,500 batches, not the 2nd-5th of 200-500 in 20 s, which one full collection sets)",
    )
    p.add_argument(
        "--sparse-rate", type=float, default=4.0, help="probes per second of the sparse phase (default 4)"
    )
    p.add_argument(
        "--sparse-seconds",
        type=float,
        default=15.0,
        help="length of the stateless topology's last phase, probes at --sparse-rate (default 15; 0: none)",
    )
    p.add_argument(
        "--settle-seconds",
        type=float,
        default=240.0,
        help="before the warm phase, input at --rate until the JIT compiler settles, at most this long "
        "(default 240; 0: none)",
    )
    p.add_argument(
        "--settle-jit",
        type=float,
        default=0.1,
        help="settled: the JIT compiler threads used less than this share of a core in the last "
        f"{SETTLE_STEP:g} s of input (default 0.1)",
    )
    p.add_argument("--warmup", type=int, default=1000, help="lines present before launch (default 1000)")
    p.add_argument(
        "--warm-drain",
        type=int,
        default=0,
        help="lines drained (unmeasured) before the measured drain, so that it runs JIT-compiled code "
        "(default 0)",
    )
    p.add_argument(
        "--commit-interval-ms",
        type=int,
        default=None,
        help="spec.commitIntervalMs of (a) and (e) (default: none, batches back to back); the "
        "exactly-once cost target is stated at 1000",
    )
    p.add_argument("--partitions", type=int, default=4, help="partitions of input/output topics")
    p.add_argument(
        "--table-keys", type=int, default=100_000, help="keys of the join's table (default 100,000)"
    )
    p.add_argument(
        "--kstreams-commit-ms", type=int, default=1000, help="Kafka Streams commit.interval.ms (default 1000)"
    )
    p.add_argument("--startup-timeout", type=float, default=300.0, help="seconds to first complete warm-up")
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Spark configuration for both Spark variants, (a)/(d) and (b) alike (repeatable; "
        "spark.driver.extraJavaOptions is added to StreamApp's own)",
    )
    p.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=None,
        help="StreamApp variants: maxOffsetsPerTrigger on the input (the same micro-batches for every "
        "variant; exactly_once_v2 bounds a batch at 500,000 records without one)",
    )
    p.add_argument(
        "--no-warm-up-run",
        dest="warm_up_run",
        action="store_false",
        help="skip the unrecorded run that warms the fresh broker up before the measured runs",
    )
    p.add_argument(
        "--startup-only",
        action="store_true",
        help="measure start-up alone: each run ends once the warm-up lines' output is complete (no "
        "latency, drain or warm phases; make bench-startup)",
    )
    p.add_argument("--out", type=pathlib.Path, default=HERE / "results", help="results folder")
    p.add_argument("--keep-workdirs", action="store_true", help="keep logs/checkpoints of every run")
    p.add_argument(
        "--profile",
        type=pathlib.Path,
        help="profile each drain (per-thread CPU and a JFR recording of the JVM) into this folder; "
        "see tests/bench/profiling.py. Profiled numbers carry JFR's overhead: keep them out of RESULTS.md",
    )
    return p


def _kstreams_classpath() -> str:
    jar, classpath = KSTREAMS / "target" / "kstreams-bench-1.jar", KSTREAMS / "target" / "classpath.txt"
    if not (jar.exists() and classpath.exists()):
        m2 = pathlib.Path(os.environ.get("STREAMAPP_CACHE", pathlib.Path.home() / ".cache/streamapp")) / "m2"
        print("bench: building the Kafka Streams side (mvn package)", flush=True)
        subprocess.run(
            ["mvn", "-q", "-B", f"-Dmaven.repo.local={m2}", "package", "dependency:build-classpath",
             "-Dmdep.outputFile=target/classpath.txt"],
            cwd=KSTREAMS, check=True,
        )  # fmt: skip
    return f"{jar}{os.pathsep}{classpath.read_text().strip()}"


def _command(
    variant: str, topology: str, *, bootstrap: str, topics: tuple[str, str], app_id: str,
    workdir: pathlib.Path, args: argparse.Namespace, kstreams_cp: str | None, table: str = "",
) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    source, sink = topics
    progress = str(workdir / "progress.jsonl")
    if variant in ("streamapp", "streamapp-rt", "streamapp-eos"):
        template = string.Template((HERE / "manifests" / f"{topology}.yaml").read_text())
        manifest = workdir / "app.yaml"
        text = template.substitute(
            APP_ID=app_id,
            BOOTSTRAP=bootstrap,
            INPUT=source,
            OUTPUT=sink,
            STATE_DIR=workdir / "state",
            TABLE=table,
        )
        if args.max_offsets_per_trigger:
            source_line = f'from: {{topic: "{source}"}}'
            assert source_line in text, text
            text = text.replace(
                source_line,
                f'from: {{topic: "{source}", maxOffsetsPerTrigger: {args.max_offsets_per_trigger}}}',
            )
        if variant == "streamapp-rt":
            text = text.replace("\n  topology:\n", "\n  topology:\n    latency: low\n", 1)
            assert "latency: low" in text
        spec = []
        if variant == "streamapp-eos":
            spec.append("  processingGuarantee: exactly_once_v2\n")
        if args.commit_interval_ms and variant != "streamapp-rt":
            spec.append(f"  commitIntervalMs: {args.commit_interval_ms}\n")
        if spec:
            text = text.replace("\nspec:\n", "\nspec:\n" + "".join(spec), 1)
        conf = _spark_conf(args)
        if conf:
            lines = "".join(f"    {json.dumps(k)}: {json.dumps(v)}\n" for k, v in conf.items())
            text = text.replace("\nspec:\n", f"\nspec:\n  sparkConf:\n{lines}", 1)
        manifest.write_text(text)
        probe = str(HERE / "probe")
        path = os.pathsep.join(p for p in (probe, os.environ.get("PYTHONPATH", "")) if p)
        exe = pathlib.Path(sys.executable).parent / "streamapp"
        return [str(exe), "run", str(manifest), "--bootstrap", bootstrap], {
            "PYTHONPATH": path,
            "STREAMAPP_BENCH_PROGRESS": progress,
        }
    if variant == "pyspark":
        job = HERE / "pyspark_job.py"
        return [sys.executable, str(job), bootstrap, topology, source, sink, str(workdir / "checkpoint"),
                progress], {"STREAMAPP_BENCH_SPARK_CONF": json.dumps(_spark_conf(args)),
                            "STREAMAPP_BENCH_TABLE": table}  # fmt: skip
    assert kstreams_cp is not None
    return [
        "java", "-Xmx2g", "-cp", kstreams_cp, "streamapp.bench.KStreamsBench", bootstrap, topology,
        source, sink, app_id, str(workdir / "state"), str(args.kstreams_commit_ms),
        *([table] if table else []),
    ], {}  # fmt: skip


def _spark_conf(args: argparse.Namespace) -> dict[str, str]:
    """--spark-conf as a mapping; JVM options are added to those build_session always sets."""
    conf = dict(item.split("=", 1) for item in args.spark_conf)
    key = "spark.driver.extraJavaOptions"
    if key in conf:
        from streamapp.runtime.spark import session  # imports pyspark: only when asked

        conf[key] = f"{session.base_conf()[key]} {conf[key]}"
    return conf


def _wait(monitor: workload.Monitor, variant: procs.Variant, timeout: float) -> str | None:
    """Wait for the monitor's target; returns why not, or None when it was reached."""
    deadline = time.monotonic() + timeout
    while not monitor.done.wait(0.1):
        if monitor.errors:
            return f"output consumer: {monitor.errors[0]}"
        code = variant.exited
        if code is not None:
            monitor.done.wait(1.0)  # records already written may still be on their way
            if monitor.done.is_set():
                return None
            return f"exit code {code}: {_last_error(variant.log_tail(40))}"
        if time.monotonic() > deadline:
            return f"timed out after {timeout:.0f} s"
    return None


def _last_error(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for line in reversed(lines):
        if any(m in line for m in ("Error", "error:", "Exception", "invalid choice", "No such")):
            return line[:300]
    return (lines[-1] if lines else "no output")[:300]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def _produce_paced(
    bootstrap: str, topic: str, rate: float, seconds: float, record: Callable[[int], tuple[bytes, int]]
) -> int:
    """Write ``record(i)`` (value, partition) for i < ``rate`` × ``seconds``, ``rate`` a second;
    returns how many."""
    from confluent_kafka import Producer

    # linger.ms=0 caps a loaded single broker near 1000 produce requests/s and queues the records
    # for seconds; 2 ms batches them at no visible cost. Metadata and connection are set up first.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "log_level": 3})
    producer.list_topics(topic, timeout=10)
    total = int(rate * seconds)
    began = time.monotonic()
    for i in range(total):
        delay = began + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        value, partition = record(i)
        producer.produce(topic, value, partition=partition)
        producer.poll(0)
    producer.flush(30)
    return total


def _latency_phase(
    bootstrap: str, topic: str, monitor: workload.Monitor, args: argparse.Namespace, expect_before: int,
    *, rate: float, seconds: float,
) -> dict[str, Any]:  # fmt: skip
    """Probes at ``rate`` a second for ``seconds``, each carrying its send time; their latency."""
    total = int(rate * seconds)
    first = len(monitor.latencies_ms)  # the probes of an earlier phase are not this one's
    monitor.set_target(count=expect_before + total)
    _produce_paced(
        bootstrap, topic, rate, seconds,
        lambda seq: (b"lat %d %d" % (seq, time.monotonic_ns()), seq % args.partitions),
    )  # fmt: skip
    arrived = monitor.done.wait(60)
    skip = int(min(2.0, seconds * 0.2) * rate)  # the first probes meet a cold path
    samples = [ms for seq, ms in list(monitor.latencies_ms)[first:] if seq >= skip]
    result: dict[str, Any] = {"latency_probes": total, "latency_samples": len(samples)}
    if samples:
        result |= {
            "latency_p50_ms": round(_percentile(samples, 50), 1),
            "latency_p99_ms": round(_percentile(samples, 99), 1),
            "latency_max_ms": round(max(samples), 1),
        }
    if not arrived:
        result["latency_note"] = f"{len(monitor.latencies_ms) - first} of {total} probes arrived within 60 s"
    return result


def _rate_phase(
    bootstrap: str, topic: str, pool: workload.Pool, monitor: workload.Monitor, args: argparse.Namespace,
    *, start: int, seconds: float | None = None,
) -> int:  # fmt: skip
    """Word count at a fixed rate: ``--rate`` lines of the pool a second for ``seconds`` (default
    ``--latency-seconds``; records ``start …``), then until the output has every count; returns the
    lines written. Its micro-batches (each brings what arrived while the last ran) are the word
    count's latency."""
    lines, n = pool.lines, len(pool.lines)
    total = _produce_paced(
        bootstrap,
        topic,
        args.rate,
        args.latency_seconds if seconds is None else seconds,
        lambda i: (lines[(start + i) % n], (start + i) % args.partitions),
    )
    monitor.set_target(words=pool.word_counts(0, start + total))
    monitor.done.wait(60)
    return total


def _settle(
    variant: procs.Variant, args: argparse.Namespace, feed: Callable[[float], None]
) -> dict[str, Any]:
    """Input at the warm phase's rate (``feed(seconds)``), SETTLE_STEP seconds at a time, until the
    variant's JIT compiler threads used less than ``--settle-jit`` of a core in the last step, or
    ``--settle-seconds`` have passed. A JVM a minute old still compiles Spark's per-micro-batch code
    (planning, task serialisation): its compiler threads took half a core of the 2 in the warm phase
    that followed the drains, 9-11 CPU-s in 20 s, competing with the micro-batches it measured; a
    long-running app's micro-batches run after that, on compiled code."""
    began = time.monotonic()
    shares: list[float] = []
    while time.monotonic() - began < args.settle_seconds:
        before, step_began = profiling.thread_cpu(variant.members()), time.monotonic()
        feed(min(SETTLE_STEP, args.settle_seconds))
        jit = profiling.jit_seconds(before, profiling.thread_cpu(variant.members()))
        shares.append(round(jit / (time.monotonic() - step_began), 3))
        if shares[-1] < args.settle_jit or variant.exited is not None:
            break
    return {
        "settle_s": round(time.monotonic() - began, 1),
        "settle_jit_shares": shares,
        "settled": bool(shares) and shares[-1] < args.settle_jit,
    }


def _breakdown(
    path: pathlib.Path, since: float, until: float, *, whole: bool = False
) -> dict[str, Any] | None:
    """Sum of Spark's durationMs over the micro-batches that started in a wall-clock window (with
    ``whole``: that ran entirely inside it)."""
    if not path.exists():
        return None
    from datetime import datetime

    totals: dict[str, int] = {}
    triggers: list[float] = []
    batches = rows = 0
    for line in path.read_text().splitlines():
        try:
            progress = json.loads(line)
            started = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
        except (ValueError, KeyError):
            continue
        ended = started + progress.get("durationMs", {}).get("triggerExecution", 0) / 1000
        inside = since <= started and ended <= until if whole else since - 1.0 <= started <= until
        if inside and progress.get("numInputRows", 0) > 0:
            batches += 1
            rows += progress["numInputRows"]
            triggers.append(progress.get("durationMs", {}).get("triggerExecution", 0))
            for key, value in progress.get("durationMs", {}).items():
                totals[key] = totals.get(key, 0) + int(value)
    if not batches:
        return None
    return {
        "batches": batches,
        "input_rows": rows,
        "duration_ms": totals,
        "trigger_p50_ms": round(_percentile(triggers, 50), 1),
        "trigger_p99_ms": round(_percentile(triggers, 99), 1),
    }


def _startup(path: pathlib.Path, launched: float, first_output: float) -> dict[str, Any] | None:
    """Launch → first output in phases (s): the session up (Python imports, the JVM, the
    SparkContext: the probe's note), the query's first trigger (planning, the query's start), and
    when the harness saw the first output, counted from that trigger (it sees records before the
    micro-batch ends: as they are written, or at the transaction's commit with exactly once);
    besides, the first micro-batch's own durationMs."""
    if not path.exists():
        return None
    from datetime import datetime

    session, first = None, None
    for line in path.read_text().splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if doc.get("event") == "session":
            session = doc["t"] if session is None else min(session, doc["t"])
        elif "timestamp" in doc:
            doc["_t"] = datetime.fromisoformat(doc["timestamp"].replace("Z", "+00:00")).timestamp()
            first = doc if first is None or doc["_t"] < first["_t"] else first
    if session is None or first is None:
        return None
    took = first.get("durationMs", {}).get("triggerExecution", 0) / 1000
    phases = {
        "session_s": session - launched,
        "to_first_trigger_s": first["_t"] - session,
        "output_in_batch_s": first_output - (first["_t"] - launched),
        "first_batch_s": took,
    }
    return {k: round(v, 2) for k, v in phases.items()} | {
        "first_batch_rows": first.get("numInputRows", 0),
        "first_batch_ms": first.get("durationMs", {}),
    }


def _delete_topics(bootstrap: str, prefixes: tuple[str, ...]) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    names = [t for t in client.list_topics(timeout=10).topics if t.startswith(prefixes)]
    for future in client.delete_topics(names, operation_timeout=30).values() if names else ():
        try:
            future.result(timeout=30)
        except Exception as exc:  # noqa: BLE001 - a left-over topic only costs disk
            print(f"bench: deleting a topic failed: {exc}", file=sys.stderr)


def _progress_written(variant_name: str) -> None:
    """Give a Spark variant's progress probe (it polls twice a second) time to write the last
    micro-batches before the variant is stopped."""
    if variant_name != "kstreams":
        time.sleep(1.5)


def run_one(
    topology: str, variant_name: str, rep: int, *, kafka: broker.EmbeddedKafka, pool: workload.Pool,
    args: argparse.Namespace, scratch: pathlib.Path, kstreams_cp: str | None,
) -> dict[str, Any]:  # fmt: skip
    bootstrap, parts = kafka.bootstrap, args.partitions
    app_id = f"bench-{topology}-{variant_name}-{rep}-{int(time.time())}"
    source, sink, table = f"{app_id}-in", f"{app_id}-out", f"{app_id}-table"
    workdir = scratch / app_id
    workdir.mkdir(parents=True)
    result: dict[str, Any] = {"topology": topology, "variant": variant_name, "rep": rep, "app_id": app_id}
    result["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    wordcount, join = topology == "wordcount", topology == "join"
    users = workload.JoinWorkload(args.table_keys, parts)
    admin.create_topics(bootstrap, {source: parts, sink: parts} | ({table: parts} if join else {}))
    if join:
        result["table_produce_s"] = round(users.produce_table(bootstrap, table), 2)
        users.produce_stream(bootstrap, source, start=0, count=args.warmup)
    else:
        workload.produce_lines(bootstrap, source, pool, start=0, count=args.warmup, partitions=parts)
    monitor = workload.Monitor(bootstrap, sink, parts, wordcount=wordcount)
    argv, env = _command(
        variant_name, topology, bootstrap=bootstrap, topics=(source, sink), app_id=app_id,
        workdir=workdir, args=args, kstreams_cp=kstreams_cp, table=table if join else "",
    )  # fmt: skip
    variant = procs.Variant(name=app_id, argv=argv, workdir=workdir, env=env)
    result["command"] = shlex.join(argv)
    probes = 0
    loaded = args.warmup  # input records written so far (besides latency probes)
    window: tuple[float, float] | None = None
    latency_window: tuple[float, float] | None = None
    warm_window: tuple[float, float] | None = None
    profiled: dict[str, Any] | None = None
    try:
        if wordcount:
            monitor.set_target(words=pool.word_counts(0, args.warmup))
        elif join:
            monitor.set_target(count=args.warmup)
        else:
            monitor.set_target(count=pool.stateless_count(0, args.warmup))
        monitor.start()
        variant.start()
        problem = _wait(monitor, variant, args.startup_timeout)
        if problem is not None:
            crashed = problem.startswith("exit code")
            prefix = "unavailable" if crashed and variant_name.startswith("streamapp") else "failed"
            result["status"] = f"{prefix}: {problem}"
            return result
        assert monitor.first_at is not None and monitor.done_at is not None
        # What the start-up cost in CPU (launch → warm-up output complete), and how much of it the
        # JVMs' JIT compiler threads took: on 2 cores they compete with the start-up itself.
        started_threads = profiling.thread_cpu(variant.members())
        result["startup_cpu_s"] = round(variant.cpu(), 2)
        result["startup_jit_cpu_s"] = round(profiling.jit_seconds({}, started_threads), 2)
        result["startup_s"] = round(monitor.first_at - variant.launched_at, 2)
        result["warmup_done_s"] = round(monitor.done_at - variant.launched_at, 2)
        if args.startup_only:
            _progress_written(variant_name)  # the first batch's phases
            result["status"] = "ok"
            return result

        if topology == "stateless":
            began = time.time()
            result |= _latency_phase(
                bootstrap, source, monitor, args, monitor.count, rate=args.rate, seconds=args.latency_seconds
            )
            probes = result["latency_probes"]
            latency_window = (began, time.time())
        elif wordcount:
            began = time.time()
            loaded += _rate_phase(bootstrap, source, pool, monitor, args, start=loaded)
            latency_window = (began, time.time())

        # Throughput: pause the tree, pre-load the backlog, resume, time the drain. A warm-up drain
        # first (--warm-drain) lets the JIT compile the drain's hot code before the measured one.
        for count, measured in ((args.warm_drain, False), (args.records, True)):
            if count <= 0:
                continue
            before = monitor.count
            session = None
            if measured and args.profile:
                session = profiling.start(variant.members(), args.profile / f"{app_id}.jfr")
            variant.pause()
            paused_wall = time.time()
            if join:
                seconds = users.produce_stream(bootstrap, source, start=loaded, count=count)
            else:
                seconds = workload.produce_lines(
                    bootstrap, source, pool, start=loaded, count=count, partitions=parts
                )
            loaded += count
            result["produce_s" if measured else "warm_drain_produce_s"] = round(seconds, 2)
            written = workload.topic_record_count(bootstrap, source, parts)
            if written != loaded + probes:
                result["status"] = f"failed: input topic holds {written} records, expected {loaded + probes}"
                return result
            if wordcount:
                monitor.set_target(words=pool.word_counts(0, loaded))
            elif join:
                monitor.set_target(count=before + count)
            else:
                monitor.set_target(count=before + pool.stateless_count(loaded - count, count))
            broker_cpu0 = procs.cpu_seconds([kafka._proc.pid]) if kafka._proc else 0.0
            cpu0 = variant.cpu()
            threads0 = profiling.thread_cpu(variant.members())
            if session is not None:
                profiling.resumed(session, variant.members())
            variant.resume()
            resumed, resumed_wall = time.monotonic(), time.time()
            problem = _wait(monitor, variant, max(300.0, count / 2000))
            cpu1 = variant.cpu()
            jit = profiling.jit_seconds(threads0, profiling.thread_cpu(variant.members()))
            if session is not None:
                profiled = profiling.finish(session, variant.members()) | {"cpu_s": round(cpu1 - cpu0, 2)}
            broker_cpu1 = procs.cpu_seconds([kafka._proc.pid]) if kafka._proc else 0.0
            if problem is not None:
                result["status"] = f"failed: {'drain' if measured else 'warm-up drain'}: {problem}"
                return result
            assert monitor.done_at is not None
            drain = monitor.done_at - resumed
            if not measured:
                result |= {"warm_drain_s": round(drain, 3), "warm_drain_cpu_s": round(cpu1 - cpu0, 2)}
                continue
            millions = args.records / 1e6
            result |= {
                "drain_s": round(drain, 3),
                "throughput_rps": round(args.records / drain),
                "cpu_s": round(cpu1 - cpu0, 2),
                "cpu_s_per_million": round((cpu1 - cpu0) / millions, 2),
                "jit_cpu_s": round(jit, 2),
                "cpu_s_per_million_excl_jit": round((cpu1 - cpu0 - jit) / millions, 2),
                "broker_cpu_s_per_million": round((broker_cpu1 - broker_cpu0) / millions, 2),
                "output_records": monitor.count,
                "load_average_after_drain": [round(x, 2) for x in os.getloadavg()],
            }
        # From the pause: a trigger that was looking for new offsets when the tree was paused
        # becomes the drain's first batch (its latestOffset then includes the pause).
        window = (paused_wall, time.time())
        result["resumed_wall"] = resumed_wall
        if args.settle_seconds > 0 and (wordcount or topology == "stateless"):
            fed = {"probes": 0, "lines": 0}

            def feed(seconds: float) -> None:
                if wordcount:
                    fed["lines"] += _rate_phase(
                        bootstrap, source, pool, monitor, args, start=loaded + fed["lines"], seconds=seconds
                    )
                else:
                    fed["probes"] += _latency_phase(
                        bootstrap, source, monitor, args, monitor.count, rate=args.rate, seconds=seconds
                    )["latency_probes"]

            result |= _settle(variant, args, feed)
            loaded, probes = loaded + fed["lines"], probes + fed["probes"]
        # Where the warm phase's CPU goes, by thread (the driver's Python, the stream thread, the
        # tasks, GC, JIT …): what competes with the micro-batches for the 2 cores.
        warm_threads0, warm_cpu0 = profiling.thread_cpu(variant.members()), variant.cpu()
        # The collections during the phase: a full one lengthens a micro-batch (gc_counts).
        warm_gc0 = profiling.gc_counts(variant.members())
        if topology == "stateless":
            # The same probes again, the process warm: the first phase, right after start-up,
            # meets code the JIT has not compiled yet (a start-up cost, there as with any JVM); a
            # long-running app's latency is this one.
            began = time.time()
            warm = _latency_phase(
                bootstrap, source, monitor, args, monitor.count, rate=args.rate, seconds=args.warm_seconds
            )
            result |= {f"warm_{key}": value for key, value in warm.items()}
            probes += warm["latency_probes"]
            warm_window = (began, time.time())
        elif wordcount:
            began = time.time()
            loaded += _rate_phase(
                bootstrap, source, pool, monitor, args, start=loaded, seconds=args.warm_seconds
            )
            warm_window = (began, time.time())
        if warm_window is not None:
            result["warm_cpu_s"] = round(variant.cpu() - warm_cpu0, 2)
            result["warm_threads"] = profiling.thread_delta(
                warm_threads0, profiling.thread_cpu(variant.members())
            )[:12]
            result["warm_gc"] = profiling.gc_delta(warm_gc0, profiling.gc_counts(variant.members()))
        if topology == "stateless" and args.sparse_seconds > 0:
            # Sparse input, as a demo or a quiet app sees it: a record every 1/--sparse-rate s, each
            # found by a micro-batch of its own (a fixed cost per record, not per busy batch).
            sparse = _latency_phase(
                bootstrap, source, monitor, args, monitor.count, rate=args.sparse_rate,
                seconds=args.sparse_seconds,
            )  # fmt: skip
            result |= {f"sparse_{key}": value for key, value in sparse.items()}
            probes += sparse["latency_probes"]
        _progress_written(variant_name)
        result["status"] = "ok"
        return result
    finally:
        try:
            killed = variant.stop()
            result["stopped_with"] = "SIGKILL" if killed else "SIGTERM"
        except RuntimeError as exc:
            result["status"] = f"failed: {exc}"
        monitor.stop()
        breakdown = _breakdown(workdir / "progress.jsonl", *window) if window else None
        if breakdown:
            result["spark_drain_batches"] = breakdown
        during = (
            _breakdown(workdir / "progress.jsonl", *latency_window, whole=True) if latency_window else None
        )
        if during:
            result["spark_latency_batches"] = during
            result |= {"batch_p50_ms": during["trigger_p50_ms"], "batch_p99_ms": during["trigger_p99_ms"]}
        warm_during = (
            _breakdown(workdir / "progress.jsonl", *warm_window, whole=True) if warm_window else None
        )
        if warm_during:
            result["spark_warm_latency_batches"] = warm_during
            result |= {
                "warm_batch_p50_ms": warm_during["trigger_p50_ms"],
                "warm_batch_p99_ms": warm_during["trigger_p99_ms"],
            }
        if "startup_s" in result and variant_name != "kstreams":
            phases = _startup(workdir / "progress.jsonl", variant.launched_wall, result["startup_s"])
            if phases:
                result["startup_phases"] = phases
        if result.get("status") == "ok":
            if wordcount:
                extra = sorted(set(monitor.latest) - set(pool.word_counts(0, loaded)))
                if extra:
                    result["status"] = f"failed: unexpected words in the output, e.g. {extra[:3]}"
            elif join:
                problems = workload.verify_join(bootstrap, sink, parts, users.expected(0, loaded))
                if problems:
                    result["status"] = "failed: verify: " + "; ".join(problems)
            else:
                problems = workload.verify_stateless(
                    bootstrap, sink, parts, pool.stateless_expected(0, loaded), probes
                )
                if problems:
                    result["status"] = "failed: verify: " + "; ".join(problems)
        if variant.workdir.exists():
            result["log_tail"] = variant.log_tail(8) if result.get("status") != "ok" else ""
        _delete_topics(bootstrap, (app_id,))
        if profiled is not None:
            _write_profile(args.profile, result, profiled)
        if not args.keep_workdirs:
            shutil.rmtree(workdir, ignore_errors=True)


def _write_profile(folder: pathlib.Path, result: dict[str, Any], profiled: dict[str, Any]) -> None:
    """Summarise the drain's recording (after the variant stopped: jfr costs CPU) next to it."""
    if "recording" in profiled:
        try:
            profiled["jfr"] = profiling.jfr_summary(pathlib.Path(profiled["recording"]))
        except (RuntimeError, subprocess.CalledProcessError, ValueError) as exc:
            profiled["jfr_error"] = repr(exc)[:300]
    keys = ("topology", "variant", "rep", "app_id", "status", "throughput_rps", "cpu_s_per_million")
    doc = {k: result.get(k) for k in keys} | profiled
    (folder / f"{result['app_id']}.profile.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(f"bench:   profile: {folder / (result['app_id'] + '.profile.json')}", flush=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    aliases = {v: k for k, v in VARIANTS.items()}
    variants = [aliases.get(v.strip(), v.strip()) for v in args.variants.split(",") if v.strip()]
    topologies = [t.strip() for t in args.topologies.split(",") if t.strip()]
    unknown = [v for v in variants if v not in VARIANTS] + [t for t in topologies if t not in TOPOLOGIES]
    if unknown:
        raise SystemExit(f"unknown variants/topologies: {unknown}")
    if args.max_offsets_per_trigger and {"pyspark", "kstreams"} & set(variants):
        raise SystemExit(
            "--max-offsets-per-trigger bounds the StreamApp variants' micro-batches only: leave out "
            "pyspark and kstreams (their jobs take no such setting)"
        )
    command = shlex.join(
        [".venv/bin/python", "-m", "tests.bench.run", *(sys.argv[1:] if argv is None else argv)]
    )
    signal.signal(signal.SIGTERM, _interrupt)  # stop the running variant and the broker, as on ^C
    kstreams_cp = _kstreams_classpath() if "kstreams" in variants else None
    pool = workload.Pool.generate()
    results: list[dict[str, Any]] = []
    meta = report.environment(
        command=command, args=vars(args) | {"variants": variants, "topologies": topologies}
    )
    args.out.mkdir(parents=True, exist_ok=True)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="streamapp-bench-"))
    started = time.monotonic()
    try:
        with broker.EmbeddedKafka(heap="1g") as kafka:
            meta["broker_startup_s"] = round(kafka.startup_seconds or 0, 1)
            if args.warm_up_run:
                # A fresh broker's request paths are interpreted until its JIT compiles them: the
                # first run after its start had micro-batch p99s 2-3x those of any later run of the
                # same variant (measured: 593-828 vs 223-310 ms). A smaller run, not recorded, takes
                # that cost so that no variant's first run pays it.
                first = f"{topologies[0]} {variants[0]}"
                print(f"bench: warm-up run of the broker ({first}, not recorded) …", flush=True)
                warm = argparse.Namespace(**vars(args) | {
                    "records": min(args.records, 200_000), "latency_seconds": min(args.latency_seconds, 10.0),
                    "warm_seconds": min(args.warm_seconds, 10.0),
                    "profile": None, "warm_drain": 0, "sparse_seconds": 0, "settle_seconds": 0,
                })  # fmt: skip
                result = run_one(
                    topologies[0], variants[0], 0, kafka=kafka, pool=pool, args=warm, scratch=scratch,
                    kstreams_cp=kstreams_cp,
                )  # fmt: skip
                print("bench:   (warm-up) " + report.one_line(result), flush=True)
                meta["broker_warm_up_run"] = first
            for rep in range(1, args.repeats + 1):
                # Each repeat starts the order one variant later (a b c, b c a, c a b …), so that no
                # variant always runs first after a start or right after a given other one.
                shift = (rep - 1) % len(variants)
                order = variants[shift:] + variants[:shift]
                for topology in topologies:
                    for variant in order:
                        if topology not in ONLY.get(variant, TOPOLOGIES):
                            continue
                        print(f"bench: {topology} {variant} run {rep}/{args.repeats} …", flush=True)
                        try:
                            result = run_one(
                                topology, variant, rep, kafka=kafka, pool=pool, args=args, scratch=scratch,
                                kstreams_cp=kstreams_cp,
                            )  # fmt: skip
                        except Exception as exc:  # noqa: BLE001 - one broken run must not end the rest
                            result = {"topology": topology, "variant": variant, "rep": rep,
                                      "status": f"failed: harness error: {exc!r}"}  # fmt: skip
                        results.append(result)
                        print("bench:   " + report.one_line(result), flush=True)
                        meta["wall_s"] = round(time.monotonic() - started)
                        report.write(args.out, meta, results)
    finally:
        if not args.keep_workdirs:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"bench: results in {args.out / 'RESULTS.md'} and {args.out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
