"""Windowed aggregation at scale (issue 13): StreamApp vs Spark's own window aggregation vs Kafka Streams.

    .venv/bin/python -m tests.bench.windowed --keys 10000,100000,1000000 --repeats 1   (make bench-windowed)

Two topologies, each over 10 k, 100 k and 1 M distinct keys:

- **tumbling**: a count per key and 1-minute tumbling window, grace 10 s, emitting updates;
- **session**: a count per key and session (inactivity gap 5 minutes, grace 10 s).

The input is keyed: record ``i`` has key ``k<(i * 7919) % keys>`` (a prime step: every key comes
round once per ``keys`` records, in an order no cache likes), is written to partition ``key % 4``
(a keyed stream, as ``groupByKey`` expects) and carries the event time ``T0 + i * 60000 //
--window-records`` ms: a 1-minute window holds ``--window-records`` records (default 1 M), so with
1 M keys every open window holds up to a million keys, and every key's session stays open for the
whole run (a key recurs every ``keys × 0.06`` ms of event time, under the 5-minute gap).

One run (fresh topics, state and app id): ``--warmup`` records are written and the variant is
launched (start-up = launch → first output); the process tree is paused, ``--records`` records
(``--session-records`` for the session count) are written, and the tree resumed: **throughput** =
records / (resume → every window's latest count equals the reference), **CPU** = the tree's CPU time
over the drain. Both Spark variants read at most ``--batch-records`` per micro-batch
(maxOffsetsPerTrigger), so every micro-batch of the drain brings the same input, and **micro-batch
duration as state grows** compares the first 10 full micro-batches with the last 10. **State on
disk** is the size of the checkpoint's state folder (Spark) or of the state directory (Kafka
Streams) after the drain; **peak memory** is sampled from the process tree twice a second (in
Spark's local mode the driver and the executor are one JVM; the Python workers are counted apart).

What each variant emits, and what the reference is:
- (a) StreamApp and (c) Kafka Streams follow Kafka Streams' semantics: updates per window, session
  merges retract the merged sessions (a tombstone), a session's end is its last record's time;
- (b) PySpark: ``window`` with a 10 s watermark in update mode; ``session_window`` supports only
  append mode in Spark (a session is written once, when the watermark passes its end), and Spark's
  session end is the last record's time plus the gap. Its sessions are complete only once a later
  record moves the watermark on: after the drain's records the harness writes one record per
  partition 20 minutes later (key ``flush``), to every variant alike.

Results: ``--out``/results.json and RESULTS.md (default tests/bench/results/windowed).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import os
import pathlib
import shlex
import shutil
import statistics
import string
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

from streamapp.runtime.embedded import broker
from streamapp.runtime.kafka import admin
from tests.bench import procs, profiling, report, workload
from tests.bench import run as bench_run

HERE = pathlib.Path(__file__).resolve().parent
VARIANTS = ("streamapp", "pyspark", "kstreams")
TOPOLOGIES = ("tumbling", "session")
WINDOW_MS = 60_000
SESSION_GAP_MS = 5 * 60_000
GRACE_MS = 10_000
#: How far past the last drain record the closing records go (beyond every session's gap + grace).
FLUSH_AFTER_MS = 20 * 60_000
_STEP = 7919  # prime: (i * _STEP) % keys visits every key once per `keys` records


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tests.bench.windowed", description=__doc__.split("\n")[0])
    p.add_argument("--keys", default="10000,100000,1000000", help="comma list of distinct key counts")
    p.add_argument("--topologies", default="tumbling,session", help="comma list of tumbling, session")
    p.add_argument(
        "--variants", default=",".join(VARIANTS), help="comma list of streamapp, pyspark, kstreams"
    )
    p.add_argument("--records", type=int, default=2_000_000, help="records drained per run (default 2e6)")
    p.add_argument(
        "--session-records",
        type=int,
        default=500_000,
        help="records drained per session run (default 5e5): Kafka Streams' session count drained "
        "2e6 records at 10k keys in over 8 minutes, so the full set would take hours",
    )
    p.add_argument(
        "--window-records",
        type=int,
        default=1_000_000,
        help="records per minute of event time, i.e. per tumbling window (default 1e6)",
    )
    p.add_argument(
        "--batch-records",
        type=int,
        default=100_000,
        help="maxOffsetsPerTrigger of both Spark variants (default 100,000)",
    )
    p.add_argument("--repeats", type=int, default=1, help="runs per (topology, keys, variant)")
    p.add_argument("--warmup", type=int, default=1000, help="records present before launch")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--kstreams-commit-ms", type=int, default=1000)
    p.add_argument("--startup-timeout", type=float, default=300.0)
    p.add_argument("--out", type=pathlib.Path, default=HERE / "results" / "windowed")
    p.add_argument("--keep-workdirs", action="store_true")
    p.add_argument(
        "--profile",
        type=pathlib.Path,
        help="profile each drain (per-thread CPU and a JFR recording of the JVM) into this folder; "
        "see tests/bench/profiling.py. Profiled numbers carry JFR's overhead: keep them out of RESULTS.md",
    )
    return p


@dataclasses.dataclass(frozen=True)
class Segment:
    """Records ``start .. start+count`` of the key sequence, their event times from ``t0`` on."""

    start: int
    count: int
    t0: int


@dataclasses.dataclass(frozen=True)
class Workload:
    """Record ``i``: key ``(i * 7919) % keys`` on partition ``key % partitions``; within a segment
    the event time grows by ``60000 / window_records`` ms per record. Segments (the warm-up, the
    drain) are 20 minutes of event time apart, with one closing record per partition (key
    ``flush``) after each: no window or session spans two segments."""

    keys: int
    partitions: int
    window_records: int

    def key(self, i: int) -> int:
        return (i * _STEP) % self.keys

    def ts(self, seg: Segment, i: int) -> int:
        return seg.t0 + (i - seg.start) * WINDOW_MS // self.window_records

    def next_segment(self, seg: Segment, count: int) -> Segment:
        """The segment after ``seg`` (and its closing records)."""
        return Segment(seg.start + seg.count, count, self.flush_ts(seg) + WINDOW_MS)

    def flush_ts(self, seg: Segment) -> int:
        return self.ts(seg, seg.start + seg.count - 1) + FLUSH_AFTER_MS

    def records(self, seg: Segment) -> Iterator[tuple[bytes, bytes, int, int]]:
        """(key, value, partition, timestamp ms) of the segment's records, then its closing records."""
        for i in range(seg.start, seg.start + seg.count):
            k = self.key(i)
            yield b"k%d" % k, b"v", k % self.partitions, self.ts(seg, i)
        closing = self.flush_ts(seg)
        for p in range(self.partitions):
            yield b"flush", b"v", p, closing

    def tumbling(self, segments: list[Segment]) -> dict[bytes, int]:
        """Count per ``k<key>@<start>/<end>`` (epoch ms)."""
        counts: collections.Counter[tuple[int, int]] = collections.Counter()
        for seg in segments:
            for i in range(seg.start, seg.start + seg.count):
                counts[(self.key(i), self.ts(seg, i) // WINDOW_MS * WINDOW_MS)] += 1
        return {b"k%d@%d/%d" % (k, s, s + WINDOW_MS): c for (k, s), c in counts.items()}

    def sessions(self, segments: list[Segment], *, spark: bool) -> dict[bytes, int]:
        """Count per session ``k<key>@<start>/<end>``: the end is the session's last record's time
        (Kafka Streams), plus the gap for Spark's ``session_window``."""
        out: dict[bytes, int] = {}
        extra = SESSION_GAP_MS if spark else 0
        for seg in segments:  # a session never spans two segments
            open_: dict[int, list[int]] = {}  # key -> [start, last, count]
            for i in range(seg.start, seg.start + seg.count):
                k, ts = self.key(i), self.ts(seg, i)
                s = open_.get(k)
                if s is not None and ts - s[1] <= SESSION_GAP_MS:
                    s[1], s[2] = ts, s[2] + 1
                    continue
                if s is not None:
                    out[b"k%d@%d/%d" % (k, s[0], s[1] + extra)] = s[2]
                open_[k] = [ts, ts, 1]
            out.update({b"k%d@%d/%d" % (k, s[0], s[1] + extra): s[2] for k, s in open_.items()})
        return out


class MemorySampler(threading.Thread):
    """Peak resident memory of a variant's process tree, sampled twice a second: the JVM(s) and
    the other processes (Python driver and workers) apart."""

    def __init__(self, variant: procs.Variant) -> None:
        super().__init__(name=f"memory-{variant.name}", daemon=True)
        self.variant = variant
        self.peak_jvm_mb = 0.0
        self.peak_other_mb = 0.0
        self.peak_total_mb = 0.0
        self._halt = threading.Event()

    def run(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE") / 2**20
        while not self._halt.wait(0.5):
            jvm = other = 0.0
            for pid in self.variant.members():
                try:
                    rss = int(pathlib.Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
                    exe = os.readlink(f"/proc/{pid}/exe")
                except (OSError, IndexError, ValueError):
                    continue
                if exe.endswith("/java"):
                    jvm += rss
                else:
                    other += rss
            self.peak_jvm_mb = max(self.peak_jvm_mb, jvm)
            self.peak_other_mb = max(self.peak_other_mb, other)
            self.peak_total_mb = max(self.peak_total_mb, jvm + other)

    def stop(self) -> dict[str, float]:
        self._halt.set()
        self.join(timeout=5)
        return {
            "peak_jvm_rss_mb": round(self.peak_jvm_mb),
            "peak_python_rss_mb": round(self.peak_other_mb),
            "peak_total_rss_mb": round(self.peak_total_mb),
        }


def _folder_bytes(root: pathlib.Path, name: str | None = None) -> int:
    """Bytes under ``root`` (only inside folders called ``name``, when given)."""
    total = 0
    for folder, _dirs, files in os.walk(root):
        if name is not None and name not in pathlib.Path(folder).relative_to(root).parts:
            continue
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, f)).st_size
    return total


def _command(
    variant: str, topology: str, *, bootstrap: str, source: str, sink: str, app_id: str,
    workdir: pathlib.Path, args: argparse.Namespace, kstreams_cp: str | None,
) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    progress = str(workdir / "progress.jsonl")
    if variant == "streamapp":
        text = string.Template((HERE / "manifests" / f"{topology}.yaml").read_text()).substitute(
            APP_ID=app_id, BOOTSTRAP=bootstrap, INPUT=source, OUTPUT=sink, STATE_DIR=workdir / "state",
            MAX_OFFSETS=args.batch_records,
        )  # fmt: skip
        manifest = workdir / "app.yaml"
        manifest.write_text(text)
        path = os.pathsep.join(p for p in (str(HERE / "probe"), os.environ.get("PYTHONPATH", "")) if p)
        exe = pathlib.Path(sys.executable).parent / "streamapp"
        return [str(exe), "run", str(manifest), "--bootstrap", bootstrap], {
            "PYTHONPATH": path,
            "STREAMAPP_BENCH_PROGRESS": progress,
        }
    if variant == "pyspark":
        return [sys.executable, str(HERE / "pyspark_job.py"), bootstrap, topology, source, sink,
                str(workdir / "checkpoint"), progress], {
                    "STREAMAPP_BENCH_MAX_OFFSETS": str(args.batch_records)}  # fmt: skip
    assert kstreams_cp is not None
    return [
        "java", "-Xmx2g", "-cp", kstreams_cp, "streamapp.bench.KStreamsBench", bootstrap, topology,
        source, sink, app_id, str(workdir / "state"), str(args.kstreams_commit_ms),
    ], {}  # fmt: skip


def _state_bytes(variant: str, workdir: pathlib.Path) -> int:
    if variant == "streamapp":
        return _folder_bytes(workdir / "state" / "checkpoint", "state")
    if variant == "pyspark":
        return _folder_bytes(workdir / "checkpoint", "state")
    return _folder_bytes(workdir / "state")


def batch_phases(path: pathlib.Path, since: float, full: int) -> dict[str, Any] | None:
    """The drain's full micro-batches (``numInputRows`` ≥ 90 % of ``full``, started after
    ``since``): duration of the first 10 against the last 10, and each phase's mean."""
    if not path.exists():
        return None
    from datetime import datetime

    batches = []
    for line in path.read_text().splitlines():
        try:
            doc = json.loads(line)
            started = datetime.fromisoformat(doc["timestamp"].replace("Z", "+00:00")).timestamp()
        except (ValueError, KeyError):
            continue
        if started >= since - 1.0 and doc.get("numInputRows", 0) >= 0.9 * full:
            batches.append((started, doc))
    batches.sort(key=lambda b: b[0])
    docs = [d for _, d in batches]
    if len(docs) < 2:
        return None
    n = min(10, len(docs) // 2)

    def mean_ms(group: list[dict[str, Any]], key: str = "triggerExecution") -> float:
        return statistics.fmean(int(d.get("durationMs", {}).get(key, 0)) for d in group)

    first, last = docs[:n], docs[-n:]
    phases = sorted({k for d in docs for k in d.get("durationMs", {})})
    return {
        "full_batches": len(docs),
        "compared": n,
        "first_ms": round(mean_ms(first)),
        "last_ms": round(mean_ms(last)),
        "last_over_first": round(mean_ms(last) / max(1.0, mean_ms(first)), 2),
        "phases_first_ms": {k: round(mean_ms(first, k)) for k in phases},
        "phases_last_ms": {k: round(mean_ms(last, k)) for k in phases},
        # None where the state stores do not count their rows (session.TRACK_STATE_ROWS, off by default)
        "state_rows_last": sum(int(op.get("numRowsTotal", 0)) for op in docs[-1].get("stateOperators", []))
        or None,
    }


def run_one(
    topology: str, keys: int, variant_name: str, rep: int, *, kafka: broker.EmbeddedKafka,
    args: argparse.Namespace, scratch: pathlib.Path, kstreams_cp: str | None,
) -> dict[str, Any]:  # fmt: skip
    bootstrap, parts = kafka.bootstrap, args.partitions
    app_id = f"bench-{topology}-{keys}-{variant_name}-{rep}-{int(time.time())}"
    source, sink = f"{app_id}-in", f"{app_id}-out"
    workdir = scratch / app_id
    workdir.mkdir(parents=True)
    t0 = int(time.time() * 1000) // WINDOW_MS * WINDOW_MS - 60 * WINDOW_MS
    load = Workload(keys, parts, args.window_records)
    warm = Segment(0, args.warmup, t0)
    records = args.session_records if topology == "session" else args.records
    drain = load.next_segment(warm, records)
    result: dict[str, Any] = {"topology": topology, "keys": keys, "variant": variant_name, "rep": rep}
    result["app_id"] = app_id
    admin.create_topics(bootstrap, {source: parts, sink: parts})
    workload.produce_records(bootstrap, source, load.records(warm))

    def target(segments: list[Segment]) -> dict[bytes, int]:
        if topology == "tumbling":
            return load.tumbling(segments)
        return load.sessions(segments, spark=variant_name == "pyspark")

    monitor = workload.Monitor(bootstrap, sink, parts, wordcount=True)
    argv, env = _command(
        variant_name, topology, bootstrap=bootstrap, source=source, sink=sink, app_id=app_id,
        workdir=workdir, args=args, kstreams_cp=kstreams_cp,
    )  # fmt: skip
    variant = procs.Variant(name=app_id, argv=argv, workdir=workdir, env=env)
    result["command"] = shlex.join(argv)
    memory = MemorySampler(variant)
    try:
        monitor.set_target(words=target([warm]))
        monitor.start()
        variant.start()
        memory.start()
        problem = bench_run._wait(monitor, variant, args.startup_timeout)
        if problem is not None:
            result["status"] = f"failed: start-up: {problem}"
            return result
        assert monitor.first_at is not None
        result["startup_s"] = round(monitor.first_at - variant.launched_at, 2)

        session = None
        if args.profile and variant_name != "kstreams":
            session = profiling.start(variant.members(), args.profile / f"{app_id}.jfr")
        variant.pause()
        paused_wall = time.time()
        result["produce_s"] = round(workload.produce_records(bootstrap, source, load.records(drain)), 2)
        began = time.monotonic()
        expected = target([warm, drain])
        result["reference_s"] = round(time.monotonic() - began, 2)
        result["windows"] = len(expected)
        monitor.set_target(words=expected)
        cpu0 = variant.cpu()
        if session is not None:
            profiling.resumed(session, variant.members())
        variant.resume()
        resumed = time.monotonic()
        problem = bench_run._wait(monitor, variant, max(600.0, records / 1000))
        cpu1 = variant.cpu()
        if session is not None:
            profiled = profiling.finish(session, variant.members()) | {"cpu_s": round(cpu1 - cpu0, 2)}
        if problem is not None:
            result["status"] = f"failed: drain: {problem}"
            return result
        assert monitor.done_at is not None
        seconds = monitor.done_at - resumed
        result |= {
            "drain_s": round(seconds, 2),
            "throughput_rps": round(records / seconds),
            "cpu_s": round(cpu1 - cpu0, 2),
            "cpu_s_per_million": round((cpu1 - cpu0) / (records / 1e6), 2),
            "output_records": monitor.count,
        }
        if session is not None:
            bench_run._write_profile(args.profile, result, profiled)
        if variant_name != "kstreams":
            time.sleep(1.5)  # the progress probe polls twice a second
            phases = batch_phases(workdir / "progress.jsonl", paused_wall, args.batch_records)
            if phases:
                result["batches"] = phases
        unexpected = [
            k
            for k, v in monitor.latest.copy().items()
            if k not in expected and v >= 0 and not k.startswith(b"flush@")
        ]
        result["status"] = f"failed: unexpected windows, e.g. {unexpected[:3]}" if unexpected else "ok"
        result["state_mb"] = round(_state_bytes(variant_name, workdir) / 2**20, 1)
        return result
    finally:
        result |= memory.stop() if memory.ident else {}
        try:
            variant.stop()
        except RuntimeError as exc:
            result["status"] = f"failed: {exc}"
        monitor.stop()
        if result.get("status") != "ok" and variant.workdir.exists():
            result["log_tail"] = variant.log_tail(8)
        bench_run._delete_topics(bootstrap, (app_id,))
        if not args.keep_workdirs:
            shutil.rmtree(workdir, ignore_errors=True)


def _markdown(meta: dict[str, Any], results: list[dict[str, Any]]) -> str:
    lines = [
        "# Windowed aggregation at scale (issue 13)",
        "",
        f"Command: `{meta['command']}`  ",
        f"Started {meta['started_utc']}; git {meta['versions']['git']}; Spark {meta['versions']['spark']}, "
        f"Kafka Streams {meta['versions']['kafka_streams']}; {meta['machine']['usable_cpus']} CPUs "
        f"({meta['machine']['cpu_model']}); wall {meta.get('wall_s', '?')} s",
        "",
        f"Records drained per run: {meta['args']['records']:,} (session count: "
        f"{meta['args'].get('session_records', meta['args']['records']):,}). "
        "Drain of the records below after a warm-up; see tests/bench/windowed.py for what each column "
        "measures. Spark variants read at most the given records per micro-batch; *batch first/last* "
        "is the mean duration of the drain's first and last 10 full micro-batches. *State rows*: "
        "counted only where RocksDB tracks them (`trackTotalNumberOfRows`, off by default).",
        "",
        "| topology | keys | variant | throughput rec/s | CPU-s / M | batch first → last ms (ratio) "
        "| state rows | state on disk MB | peak JVM / Python MB | start-up s | status |",
        "|---|---:|---|---:|---:|---|---:|---:|---|---:|---|",
    ]
    for r in results:
        b = r.get("batches") or {}
        batch = f"{b['first_ms']} → {b['last_ms']} ({b['last_over_first']}×)" if b else "–"
        lines.append(
            f"| {r['topology']} | {r['keys']:,} | {r['variant']} | {r.get('throughput_rps', '–'):,} "
            f"| {r.get('cpu_s_per_million', '–')} | {batch} | {b.get('state_rows_last') or '–'} "
            f"| {r.get('state_mb', '–')} | {r.get('peak_jvm_rss_mb', '–')} / "
            f"{r.get('peak_python_rss_mb', '–')} "
            f"| {r.get('startup_s', '–')} | {r.get('status', '?')[:80]} |"
            if isinstance(r.get("throughput_rps"), int)
            else f"| {r['topology']} | {r['keys']:,} | {r['variant']} | – | – | – | – | – | – | "
            f"{r.get('startup_s', '–')} | {r.get('status', '?')[:120]} |"
        )
    phase_rows = [r for r in results if r.get("batches")]
    if phase_rows:
        lines += ["", "## Micro-batch phases, first 10 → last 10 full batches (mean ms)", ""]
        for r in phase_rows:
            b = r["batches"]
            parts = ", ".join(
                f"{k} {b['phases_first_ms'][k]} → {b['phases_last_ms'][k]}"
                for k in b["phases_first_ms"]
                if k != "triggerExecution"
            )
            lines.append(f"- {r['topology']} {r['keys']:,} keys, {r['variant']}: {parts}")
    return "\n".join(lines) + "\n"


_BRIEF = ("status", "throughput_rps", "cpu_s_per_million", "startup_s", "state_mb", "peak_total_rss_mb")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    keys = [int(k) for k in args.keys.split(",") if k.strip()]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    topologies = [t.strip() for t in args.topologies.split(",") if t.strip()]
    unknown = [v for v in variants if v not in VARIANTS] + [t for t in topologies if t not in TOPOLOGIES]
    if unknown:
        raise SystemExit(f"unknown variants/topologies: {unknown}")
    command = shlex.join(
        [".venv/bin/python", "-m", "tests.bench.windowed", *(sys.argv[1:] if argv is None else argv)]
    )
    kstreams_cp = bench_run._kstreams_classpath() if "kstreams" in variants else None
    meta = report.environment(command=command, args=vars(args) | {"out": str(args.out)})
    args.out.mkdir(parents=True, exist_ok=True)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="streamapp-windowed-"))
    results: list[dict[str, Any]] = []
    started = time.monotonic()
    plan = []
    for rep in range(1, args.repeats + 1):  # each repeat starts one variant later (a b c, b c a …)
        order = variants[(rep - 1) % len(variants) :] + variants[: (rep - 1) % len(variants)]
        plan += [(rep, t, n, v) for t in topologies for n in keys for v in order]
    try:
        with broker.EmbeddedKafka(heap="1g") as kafka:
            for rep, topology, n, variant in plan:
                print(f"windowed: {topology} {n:,} keys {variant} run {rep}/{args.repeats} …", flush=True)
                try:
                    result = run_one(
                        topology, n, variant, rep, kafka=kafka, args=args, scratch=scratch,
                        kstreams_cp=kstreams_cp,
                    )  # fmt: skip
                except Exception as exc:  # noqa: BLE001 - one broken run must not end the rest
                    result = {"topology": topology, "keys": n, "variant": variant, "rep": rep,
                              "status": f"failed: harness error: {exc!r}"}  # fmt: skip
                results.append(result)
                brief = {k: result.get(k) for k in _BRIEF}
                print(
                    f"windowed:   {brief} batches={result.get('batches', {}).get('last_over_first')}",
                    flush=True,
                )
                meta["wall_s"] = round(time.monotonic() - started)
                (args.out / "results.json").write_text(
                    json.dumps({"meta": meta, "results": results}, indent=2) + "\n"
                )
                (args.out / "RESULTS.md").write_text(_markdown(meta, results))
    finally:
        if not args.keep_workdirs:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"windowed: results in {args.out / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
