"""Where a variant's CPU goes during the drain: per-thread CPU from /proc and a JFR sampling profile.

``python -m tests.bench.run --profile DIR …`` calls :func:`start` when the drain begins and
:func:`finish` when it ends. Two views, both of the drain only:

- **threads**: utime+stime of every thread of the variant's process tree (``/proc/<pid>/task``),
  grouped by process and thread name with digits folded (``Executor task launch worker`` threads
  are Spark's tasks; ``C2 CompilerThread``, ``GC Thread``, ``kafka-producer-network-thread``, the
  Python driver …). Exact, and it sees native work (GC, JIT, RocksDB) a Java profiler misses.
- **JFR**: Java Flight Recorder (built into the JDK) started in the running JVM with ``jcmd
  <pid> JFR.start settings=profile`` (a Java sample every 10 ms per running thread) and stopped
  when the output is complete. Samples are counted by *stage* — the first frame from the top of
  the stack that belongs to a known part of the pipeline (:data:`STAGES`) — and by top frame.

In local mode Spark's executors are threads of the driver JVM, so one recording covers source,
operators and sink. ``python -m tests.bench.profiling DIR`` prints the tables of every summary in
DIR (the ``*.profile.json`` files the harness wrote); recordings (``*.jfr``) stay in DIR for
``jfr print`` / JDK Mission Control and are never committed.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["GENERIC", "STAGES", "Session", "finish", "jfr_summary", "jit_seconds", "start", "thread_cpu"]

_TICK = os.sysconf("SC_CLK_TCK")
_NAME = "streamapp-bench"

#: (stage, patterns): a sample belongs to the stage of the first frame, scanning its stack from the
#: top down, whose ``class.method`` starts with one of the patterns. Helpers that every stage calls
#: (rows, strings, projections, the Kafka client's common code) are in :data:`GENERIC` and decide
#: only when no frame of the stack belongs to a stage here.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("windowed aggregation (TimeWindowAggregation)", ("io.streamapp.spark.TimeWindowAggregation",)),
    ("sink: Kafka producer (send: serialize, partition, append)", ("org.apache.kafka.clients.producer.",)),
    (
        "sink: row → record (KafkaRecordWriter / Spark's KafkaWriteTask)",
        (
            "io.streamapp.spark.",
            "org.apache.spark.sql.kafka010.KafkaWriteTask",
            "org.apache.spark.sql.kafka010.KafkaDataWriter",
            "org.apache.spark.sql.kafka010.KafkaRowWriter",
        ),
    ),
    (
        "source: Kafka consumer (fetch, decode batches)",
        ("org.apache.kafka.clients.consumer.", "org.apache.spark.sql.kafka010.consumer."),
    ),
    (
        "source: record → row (KafkaRecordToRowConverter, headers)",
        (
            "org.apache.spark.sql.kafka010.KafkaRecordToRowConverter",
            "org.apache.spark.sql.kafka010.KafkaBatchPartitionReader",
            "org.apache.spark.sql.kafka010.KafkaSourceRDD",
        ),
    ),
    ("state store (RocksDB)", ("org.rocksdb.", "org.apache.spark.sql.execution.streaming.state.")),
    (
        "shuffle (write, read, sort, serialise)",
        (
            "org.apache.spark.shuffle.",
            "org.apache.spark.storage.",
            "org.apache.spark.util.collection.",
            "org.apache.spark.sql.execution.UnsafeRowSerializer",
            "org.apache.spark.network.",
            "org.apache.spark.sql.execution.UnsafeKVExternalSorter",
            "org.apache.spark.io.",
        ),
    ),
    (
        "operators: whole-stage generated code (decode, filter, map, split, aggregate)",
        (
            "org.apache.spark.sql.catalyst.expressions.GeneratedClass$GeneratedIterator",
            "org.apache.spark.sql.execution.WholeStageCodegen",
            "org.apache.spark.sql.execution.aggregate.",
            "org.apache.spark.sql.execution.UnsafeFixedWidthAggregationMap",
            "org.apache.spark.unsafe.map.",
        ),
    ),
    (
        "Python bridge (py4j, Python workers, Arrow)",
        ("py4j.", "org.apache.spark.api.python.", "org.apache.arrow."),
    ),
    (
        "planning and code generation (Catalyst, Janino)",
        (
            "org.apache.spark.sql.catalyst.analysis.",
            "org.apache.spark.sql.catalyst.optimizer.",
            "org.apache.spark.sql.catalyst.rules.",
            "org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator",
            "org.codehaus.",
            "org.apache.spark.sql.execution.QueryExecution",
            "org.apache.spark.sql.execution.SparkPlan",
        ),
    ),
    ("streaming engine (triggers, offsets, checkpoint)", ("org.apache.spark.sql.execution.streaming.",)),
    ("Kafka Streams (processing, caches, commit)", ("org.apache.kafka.streams.",)),
)

#: Helpers that decide a sample's stage only when no frame of its stack is in :data:`STAGES`.
GENERIC: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "expressions and rows (outside a known stage)",
        ("org.apache.spark.sql.catalyst.", "org.apache.spark.unsafe."),
    ),
    ("Kafka client (other)", ("org.apache.kafka.",)),
    ("Spark scheduler / task runtime", ("org.apache.spark.",)),
)

_DIGITS = re.compile(r"\d+")

#: (pid, tid) → (process name, thread name, CPU-seconds so far)
Threads = dict[tuple[int, int], tuple[str, str, float]]


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def thread_cpu(pids: Iterable[int]) -> Threads:
    """(pid, tid) → (process name, thread name, CPU-seconds so far) of every live thread."""
    found: Threads = {}
    for pid in pids:
        process = (_read(f"/proc/{pid}/comm") or "?").strip()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            raw = _read(f"/proc/{pid}/task/{tid}/stat")
            if raw is None:
                continue
            fields = raw[raw.rfind(")") + 2 :].split()
            name = raw[raw.find("(") + 1 : raw.rfind(")")]
            found[(pid, int(tid))] = (process, name, (int(fields[11]) + int(fields[12])) / _TICK)
    return found


def _fold(name: str) -> str:
    return _DIGITS.sub("#", name).strip()


def thread_delta(
    before: Threads,
    after: Threads,
) -> list[dict[str, Any]]:
    """CPU-seconds per (process, folded thread name) between two :func:`thread_cpu` snapshots.

    Threads that ended in between are missed (their time went to the process's exited-thread
    account, which /proc does not split); the total of the tree is measured separately.
    """
    groups: dict[tuple[str, str], float] = collections.defaultdict(float)
    counts: dict[tuple[str, str], int] = collections.Counter()
    for key, (process, name, cpu) in after.items():
        spent = cpu - (before[key][2] if key in before else 0.0)
        if spent > 0:
            groups[(process, _fold(name))] += spent
            counts[(process, _fold(name))] += 1
    rows = [
        {"process": p, "thread": t, "threads": counts[(p, t)], "cpu_s": round(s, 2)}
        for (p, t), s in groups.items()
    ]
    return sorted(rows, key=lambda r: -r["cpu_s"])


def jit_seconds(before: Threads, after: Threads) -> float:
    """CPU-seconds of the JVMs' JIT compiler threads (HotSpot names them ``C1/C2 CompilerThread<n>``)."""
    return sum(
        cpu - (before[key][2] if key in before else 0.0)
        for key, (_, name, cpu) in after.items()
        if name.startswith(("C1 CompilerThre", "C2 CompilerThre"))
    )


class Session:
    """One profiled drain: the JVM being recorded and the thread snapshot at its start."""

    def __init__(self, pids: Sequence[int], recording: pathlib.Path) -> None:
        self.pids = list(pids)
        self.recording = recording
        self.jvm = _jvm(self.pids)
        self.threads_before: Threads = {}
        self.jfr_error: str | None = None


def _jvm(pids: Sequence[int]) -> int | None:
    """The variant's main JVM: the java process of the tree with the most CPU so far."""
    best: tuple[float, int] | None = None
    for pid in pids:
        if (_read(f"/proc/{pid}/comm") or "").strip() != "java":
            continue
        stat = _read(f"/proc/{pid}/stat")
        if stat is None:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        cpu = int(fields[11]) + int(fields[12])
        if best is None or cpu > best[0]:
            best = (cpu, pid)
    return None if best is None else best[1]


def gc_counts(pids: Sequence[int]) -> dict[str, float] | None:
    """The garbage collections of the variant's main JVM so far (``jstat -gc``): young and full
    collections, and the seconds they paused it; None without a JVM or ``jstat``. A full
    collection of the parallel collector stopped a driver 0.2-0.3 s (Spark's ~180 MB of live
    objects): the micro-batch it falls in is that much longer."""
    pid, jstat = _jvm(pids), shutil.which("jstat")
    if pid is None or jstat is None:
        return None
    done = subprocess.run([jstat, "-gc", str(pid)], capture_output=True, text=True, check=False, timeout=60)
    lines = done.stdout.split("\n")
    if done.returncode != 0 or len(lines) < 2:
        return None
    row = dict(zip(lines[0].split(), lines[1].split(), strict=False))
    try:
        return {
            "young": int(row["YGC"]), "young_s": float(row["YGCT"]),
            "full": int(row["FGC"]), "full_s": float(row["FGCT"]),
        }  # fmt: skip
    except (KeyError, ValueError):
        return None


def gc_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float] | None:
    """The collections between two :func:`gc_counts` (pause seconds as milliseconds)."""
    if before is None or after is None:
        return None
    return {
        "young": int(after["young"] - before["young"]),
        "young_ms": round(1000 * (after["young_s"] - before["young_s"])),
        "full": int(after["full"] - before["full"]),
        "full_ms": round(1000 * (after["full_s"] - before["full_s"])),
    }


def _jcmd(pid: int, *args: str) -> str | None:
    """Run ``jcmd pid args…``; returns an error text, or None when it worked."""
    jcmd = shutil.which("jcmd")
    if jcmd is None:
        return "jcmd is not on PATH"
    done = subprocess.run([jcmd, str(pid), *args], capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0 or "Could not" in done.stdout or "error" in done.stdout.lower():
        return (done.stdout + done.stderr).strip()[:300]
    return None


def _settings(folder: pathlib.Path) -> str:
    """The JDK's ``profile`` settings with every JIT compilation recorded (not only those over
    100 ms): the drain's compiler threads are a large share of its CPU."""
    java = shutil.which("java")
    jfc = pathlib.Path(java).resolve().parents[1] / "lib" / "jfr" / "profile.jfc" if java else None
    if jfc is None or not jfc.exists():
        return "profile"
    text = re.sub(
        r'(<event name="jdk\.Compilation">.*?<setting name="threshold"[^>]*>)[^<]*(<)',
        r"\g<1>0 ms\g<2>",
        jfc.read_text(),
        count=1,
        flags=re.S,
    )
    target = folder / "bench-profile.jfc"
    target.write_text(text)
    return str(target)


def start(pids: Sequence[int], recording: pathlib.Path) -> Session:
    """Start a JFR recording in the tree's JVM (before the drain's backlog is written)."""
    session = Session(pids, recording.resolve())  # the JVM writes it, from its own cwd
    if session.jvm is None:
        session.jfr_error = "no JVM in the process tree"
    else:
        session.recording.parent.mkdir(parents=True, exist_ok=True)
        settings = _settings(session.recording.parent)
        session.jfr_error = _jcmd(session.jvm, "JFR.start", f"name={_NAME}", f"settings={settings}")
    return session


def resumed(session: Session, pids: Sequence[int]) -> None:
    """The drain begins: snapshot the threads' CPU."""
    session.pids = list(pids)
    session.threads_before = thread_cpu(pids)


def finish(session: Session, pids: Sequence[int]) -> dict[str, Any]:
    """The drain is over: thread CPU since :func:`resumed`, the recording written and summarised."""
    threads = thread_delta(session.threads_before, thread_cpu(pids))
    result: dict[str, Any] = {"threads": threads}
    if session.jvm is not None and session.jfr_error is None:
        error = _jcmd(session.jvm, "JFR.stop", f"name={_NAME}", f"filename={session.recording}")
        if error is None and session.recording.exists():
            result["recording"] = str(session.recording)
        else:
            session.jfr_error = error or "the recording was not written"
    if session.jfr_error:
        result["jfr_error"] = session.jfr_error
    return result


# -- reading a recording ------------------------------------------------------------------------


def _frame_name(frame: dict[str, Any]) -> str:
    method = frame.get("method") or {}
    cls = (method.get("type") or {}).get("name", "?").replace("/", ".")  # JFR writes a/b/C
    return f"{cls}.{method.get('name', '?')}"


def _stage(frames: Sequence[str], thread: str) -> str:
    if thread.startswith("kafka-producer-network-thread"):
        return "sink: Kafka producer I/O thread (batches → broker)"
    for table in (STAGES, GENERIC):
        for frame in frames:
            for stage, patterns in table:
                if frame.startswith(patterns):
                    return stage
    top = frames[0] if frames else "?"
    return "other: " + ".".join(top.split(".")[:3])


def _short_frame(name: str) -> str:
    """``org.apache.spark.unsafe.types.UTF8String.toUpperCase`` → ``UTF8String.toUpperCase``;
    generated classes keep their stage suffix."""
    cls, _, method = name.rpartition(".")
    simple = cls.rsplit(".", 1)[-1]
    return f"{simple}.{method}"


def jfr_summary(recording: pathlib.Path, *, top: int = 25) -> dict[str, Any]:
    """Java execution samples of ``recording`` by stage, by top frame, and by thread, and the JIT
    compilations over 100 ms (``settings=profile``'s threshold) by method."""
    jfr = shutil.which("jfr")
    if jfr is None:
        raise RuntimeError("the JDK's jfr tool is not on PATH")
    done = subprocess.run(
        [
            jfr,
            "print",
            "--json",
            "--events",
            "jdk.ExecutionSample,jdk.Compilation,jdk.Deoptimization",
            str(recording),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    events = json.loads(done.stdout)["recording"]["events"]
    compiled: collections.Counter[str] = collections.Counter()  # milliseconds, rounded
    compiles: collections.Counter[str] = collections.Counter()
    by_kind: collections.Counter[str] = collections.Counter()  # milliseconds, rounded
    deoptimized = 0
    samples = []
    for event in events:
        if event["type"] == "jdk.Compilation":
            values = event["values"]
            name = _short_frame(_frame_name({"method": values.get("method")}))
            ms = round(_millis(values.get("duration")))
            compiled[name] += ms
            compiles[name] += 1
            tier = "C2" if int(values.get("compileLevel") or 0) == 4 else "C1"
            generated = "Spark generated code" if "GeneratedClass" in name else "other code"
            by_kind[f"{tier}, {generated}{', OSR' if values.get('isOsr') else ''}"] += ms
        elif event["type"] == "jdk.Deoptimization":
            deoptimized += 1
        else:
            samples.append(event)
    events = samples
    stages: collections.Counter[str] = collections.Counter()
    tops: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    truncated = 0
    for event in events:
        values = event["values"]
        trace = values.get("stackTrace") or {}
        frames = [_frame_name(f) for f in trace.get("frames") or []]
        truncated += bool(trace.get("truncated"))
        thread = ((values.get("sampledThread") or {}).get("javaName")) or "?"
        stages[_stage(frames, thread)] += 1
        tops[_short_frame(frames[0]) if frames else "?"] += 1
        threads[_fold(thread.split(" (TID")[0].split(" for task")[0])] += 1
    total = sum(stages.values()) or 1

    def table(counter: collections.Counter[str], n: int | None = None) -> list[dict[str, Any]]:
        return [{"name": k, "samples": v, "share": round(v / total, 4)} for k, v in counter.most_common(n)]

    return {
        "samples": sum(stages.values()),
        "truncated_stacks": truncated,
        "stages": table(stages),
        "top_frames": table(tops, top),
        "threads": table(threads),
        "compilations": {
            "count": sum(compiles.values()),
            "methods": len(compiles),
            "total_ms": round(sum(compiled.values())),
            "by_kind_ms": {k: round(v) for k, v in by_kind.most_common()},
            "top": [{"name": k, "ms": round(v), "times": compiles[k]} for k, v in compiled.most_common(10)],
            "most_recompiled": [{"name": k, "times": n} for k, n in compiles.most_common(5) if n > 1],
        },
        "deoptimizations": deoptimized,
    }


def _millis(duration: object) -> float:
    """JFR's JSON durations are ISO-8601 (``PT0.25S``)."""
    match = re.fullmatch(r"PT(?:(\d+)M)?([\d.]+)S", str(duration or ""))
    return 0.0 if match is None else (int(match.group(1) or 0) * 60 + float(match.group(2))) * 1000


# -- the tables ---------------------------------------------------------------------------------


def markdown(summaries: Sequence[dict[str, Any]], *, top: int = 12) -> str:
    """Tables for the summaries the harness wrote: stages side by side per topology, then detail."""
    lines: list[str] = []
    by_topology: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for s in summaries:
        by_topology[s["topology"]].append(s)
    for topology, runs in by_topology.items():
        lines += [f"### {topology}: Java samples by stage (share of the JVM's samples during the drain)", ""]
        names = [f"{r['variant']} #{r['rep']}" for r in runs]
        stages: dict[str, dict[str, float]] = collections.defaultdict(dict)
        for name, r in zip(names, runs, strict=True):
            for row in (r.get("jfr") or {}).get("stages", []):
                stages[row["name"]][name] = row["share"]
        lines += ["| stage | " + " | ".join(names) + " |", "|---" * (1 + len(names)) + "|"]
        # Unattributed top frames (JDK, Scala collections, …) under 1 % each are summed in one row.
        rest: dict[str, float] = collections.defaultdict(float)
        for stage in [s for s in stages if s.startswith("other: ") and max(stages[s].values()) < 0.01]:
            for name, share in stages.pop(stage).items():
                rest[name] += share
        if rest:
            stages["other (JDK, Scala, unattributed; each under 1 %)"] = dict(rest)
        for stage in sorted(stages, key=lambda s: -max(stages[s].values())):
            cells = [f"{100 * stages[stage][n]:.1f} %" if n in stages[stage] else "—" for n in names]
            lines.append(f"| {stage} | " + " | ".join(cells) + " |")
        lines += [
            "| samples / CPU-s of the tree in the drain | "
            + " | ".join(f"{(r.get('jfr') or {}).get('samples', 0)} / {r.get('cpu_s', '?')}" for r in runs)
            + " |",
            "",
        ]
        for name, r in zip(names, runs, strict=True):
            lines += [f"#### {topology}, {name}: CPU-seconds by thread (/proc), top frames (JFR)", ""]
            lines += ["| process | thread | threads | CPU-s |", "|---|---|---|---|"]
            lines += [
                f"| {t['process']} | {t['thread']} | {t['threads']} | {t['cpu_s']} |"
                for t in r.get("threads", [])[:top]
                if t["cpu_s"] >= 0.05
            ]
            jit = (r.get("jfr") or {}).get("compilations")
            if jit:
                lines += [
                    "",
                    f"JIT: {jit['count']:,} compilations of {jit['methods']:,} methods, "
                    f"{jit['total_ms']:,} ms (wall time of the compiler threads) — "
                    + ", ".join(f"{k} {v:,} ms" for k, v in jit["by_kind_ms"].items())
                    + f"; {(r.get('jfr') or {}).get('deoptimizations', 0)} deoptimizations; longest: "
                    + ", ".join(f"`{c['name']}` {c['ms']:,} ms ×{c['times']}" for c in jit["top"][:3]),
                ]
            frames = (r.get("jfr") or {}).get("top_frames", [])[:top]
            if frames:
                lines += ["", "| top frame | share |", "|---|---|"]
                lines += [f"| `{f['name']}` | {100 * f['share']:.1f} % |" for f in frames]
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m tests.bench.profiling DIR [--top N] [--again]", file=sys.stderr)
        return 2
    folder = pathlib.Path(argv[0])
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 12
    summaries = [json.loads(p.read_text()) for p in sorted(folder.glob("*.profile.json"))]
    if "--again" in argv:  # summarise the recordings anew (after a change to STAGES)
        for s in summaries:
            if s.get("recording") and pathlib.Path(s["recording"]).exists():
                s["jfr"] = jfr_summary(pathlib.Path(s["recording"]))
    if not summaries:
        print(f"no *.profile.json in {folder}", file=sys.stderr)
        return 1
    print(markdown(summaries, top=top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
