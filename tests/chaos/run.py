"""Fault injection: kill -9 the driver again and again under continuous input, then check the output.

``python -m tests.chaos.run --kills 50 --broker-restarts 2`` (``make chaos``) starts the embedded
broker, produces numbered lines into a 2-partition topic without pause, and runs
:mod:`tests.chaos.driver` (four queries: stateless and word count, ``exactly_once_v2`` and
``at_least_once``). Each round waits for the restarted driver's first completed micro-batch (the
recovery time), then kills its whole process group with SIGKILL at one of three moments, in turn:

- ``in-transaction``: a task of an exactly-once query has sent its records and its marker and not
  committed (the writer's fault hook announces it and holds 400 ms);
- ``committed``: a task has committed its transaction and Spark has not yet written its commit log
  (the batch is replayed on restart: the marker must make it write nothing);
- ``written``: a task of an at-least-once query has written and flushed its records, Spark has
  not committed the batch (the replay duplicates them: the check is shown able to fail);
- ``random``: 0.5-4 s after recovery.

The broker is restarted (SIGTERM, same log dirs and port) during the run as asked. Finally input
stops, the driver drains it and is stopped with SIGTERM, and every output topic is read with
``read_committed`` and compared with the exact expected output: for the stateless query every line
upper-cased exactly once; for the word count, per word, the updates must be the counts 1..n with
none repeated and none missing from the final value. Results go to ``--out`` (JSON and Markdown).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import os
import pathlib
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from streamapp.runtime.embedded import broker as embedded
from streamapp.runtime.kafka import admin
from tests.chaos import driver as chaos_driver

MOMENTS = ("in-transaction", "committed", "written", "random")
QUERIES = [f"{k}.{g}" for g in chaos_driver.GUARANTEES for k in chaos_driver.KINDS]


class Driver:
    """One run of the driver process, its log in a file."""

    def __init__(self, bootstrap: str, source: str, workdir: pathlib.Path, index: int) -> None:
        self.log = workdir / "logs" / f"driver-{index:03d}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "STREAMAPP_FAULT_DIR": str(workdir / "fault"),
            "PYTHONSAFEPATH": "1",
        }
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                # As a script, so the checkout's operator/ folder never shadows the standard
                # library's operator (PYTHONSAFEPATH keeps the script's folder off sys.path too).
                [
                    sys.executable,
                    str(pathlib.Path(chaos_driver.__file__)),
                    "--bootstrap",
                    bootstrap,
                    "--source",
                    source,
                    "--workdir",
                    str(workdir),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=pathlib.Path(__file__).parents[2],
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_progress(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "\nprogress " in self.text():
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)

    def terminate(self, timeout: float = 90) -> int:
        # Only the Python process, as Kubernetes signals a container's PID 1: a SIGTERM to the
        # whole group would also end the JVM under the graceful stop.
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9


def _wait_fault(
    fault: pathlib.Path, point: str, since: float, proc: subprocess.Popen[Any], timeout: float
) -> bool:
    path = fault / point
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(FileNotFoundError, ValueError):
            if int(path.read_text()) / 1e9 > since:
                return True
        time.sleep(0.01)
    return False


class Input:
    """Numbered lines, produced without pause; every line sent is remembered."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        self.sent: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(bootstrap, topic, rate), daemon=True)
        self._thread.start()

    def _run(self, bootstrap: str, topic: str, rate: int) -> None:
        i = 0
        while not self._stop.is_set():
            lines = [f"w{n % 13} w{n % 5} n{n}" for n in range(i, i + rate // 10)]
            try:
                admin.produce(bootstrap, topic, [admin.Record(None, line.encode()) for line in lines])
            except Exception:  # noqa: BLE001 - the broker is restarting: those lines were not sent
                time.sleep(0.5)
                continue
            self.sent.extend(lines)
            i += len(lines)
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def verify(bootstrap: str, source: str, sent: list[str]) -> dict[str, dict[str, int]]:
    """Lost and duplicated records per output, against the exact expected output."""
    results: dict[str, dict[str, int]] = {}
    words = collections.Counter(w for line in sent for w in re.split(r"\W+", line.lower()) if w)
    for guarantee in chaos_driver.GUARANTEES:
        out = admin.consume(bootstrap, chaos_driver.output_topic(source, "stateless", guarantee), timeout=600)
        seen = collections.Counter(bytes(r.value or b"").decode() for r in out)
        expected = collections.Counter(line.upper() for line in sent)
        results[f"stateless.{guarantee}"] = {
            "expected": sum(expected.values()),
            "lost": sum((expected - seen).values()),
            "duplicated": sum((seen - expected).values()),
        }
        updates: dict[str, list[int]] = collections.defaultdict(list)
        for r in admin.consume(
            bootstrap, chaos_driver.output_topic(source, "counts", guarantee), timeout=600
        ):
            updates[bytes(r.key or b"").decode()].append(int.from_bytes(r.value or b"", "big", signed=True))
        lost = duplicated = 0
        for word, total in words.items():
            got = updates.get(word, [])
            # Updates of one key are in order (one partition); each batch emits the new count once.
            duplicated += len(got) - len(set(got)) + sum(1 for a, b in itertools.pairwise(got) if b < a)
            lost += 0 if got and max(got) == total else 1
        results[f"counts.{guarantee}"] = {"expected": len(words), "lost": lost, "duplicated": duplicated}
    return results


def run(*, kills: int, broker_restarts: int, rate: int, seed: int, out: pathlib.Path) -> dict[str, Any]:
    rng = random.Random(seed)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="streamapp-chaos-") as tmp:
        workdir = pathlib.Path(tmp)
        (workdir / "fault").mkdir()
        kafka = embedded.EmbeddedKafka(workdir=workdir / "kafka")
        bootstrap = kafka.start()
        source = "chaos-lines"
        admin.create_topics(
            bootstrap,
            {source: 2}
            | {
                chaos_driver.output_topic(source, k, g): 2
                for k in chaos_driver.KINDS
                for g in chaos_driver.GUARANTEES
            },
        )
        feed = Input(bootstrap, source, rate)
        recoveries: list[float] = []
        moments: collections.Counter[str] = collections.Counter()
        crashed_by_itself = 0
        restart_at = {round((i + 1) * kills / (broker_restarts + 1)) for i in range(broker_restarts)}
        index = 0
        try:
            killed_at: float | None = None
            done = 0
            while done < kills:
                driver = Driver(bootstrap, source, workdir, index)
                index += 1
                if not driver.wait_progress(timeout=300):
                    if crashed_by_itself > 2 * kills:
                        raise RuntimeError(f"the driver keeps failing:\n{driver.text()[-3000:]}")
                    crashed_by_itself += 1  # e.g. the broker restarted under it: start again
                    driver.kill()
                    continue
                if killed_at is not None:
                    recoveries.append(time.monotonic() - killed_at)
                moment = MOMENTS[done % len(MOMENTS)]
                since = time.monotonic()
                if moment == "random" or not _wait_fault(workdir / "fault", moment, since, driver.proc, 60):
                    time.sleep(rng.uniform(0.5, 4.0))
                    moment = "random"
                driver.kill()
                killed_at = time.monotonic()
                moments[moment] += 1
                done += 1
                print(f"kill {done}/{kills} ({moment}); recovery so far {recoveries[-1:]}", flush=True)
                if done in restart_at:
                    kafka.stop()
                    kafka.start()
                    print("broker restarted", flush=True)
            feed.stop()
            final = Driver(bootstrap, source, workdir, index)
            if final.wait_progress(timeout=300) and killed_at is not None:
                recoveries.append(time.monotonic() - killed_at)
            # Drain: every query must report a batch that reached the end of the input.
            mark = len(final.text())
            deadline = time.monotonic() + 1800
            while time.monotonic() < deadline and final.proc.poll() is None:
                tail = final.text()[mark:]
                if all(f"caught-up {q} " in tail for q in QUERIES):
                    break
                time.sleep(1)
            stop_started = time.monotonic()
            code = final.terminate()
            stop_seconds = time.monotonic() - stop_started
            out.mkdir(parents=True, exist_ok=True)
            (out / "final-driver.log").write_text(final.text())
            results = verify(bootstrap, source, feed.sent)
        finally:
            feed.stop()
            kafka.stop()
    summary = {
        "command": " ".join(sys.argv),
        "kills": kills,
        "moments": dict(moments),
        "broker_restarts": broker_restarts,
        "driver_exits_without_kill": crashed_by_itself,
        "lines": len(feed.sent),
        "recovery_s": {
            "median": round(statistics.median(recoveries), 1) if recoveries else None,
            "max": round(max(recoveries), 1) if recoveries else None,
            "all": [round(r, 1) for r in recoveries],
        },
        "final_stop": {"exit": code, "seconds": round(stop_seconds, 1)},
        "outputs": results,
        "wall_s": round(time.monotonic() - started, 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "chaos.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        "# Chaos run",
        "",
        f"`{summary['command']}`",
        "",
        f"{kills} kill -9 of the driver ({dict(moments)}), {broker_restarts} broker restarts, "
        f"{len(feed.sent)} input lines, {summary['wall_s']} s.",
        "",
        f"Recovery after a kill (kill → first micro-batch of the restarted driver): median "
        f"{summary['recovery_s']['median']} s, max {summary['recovery_s']['max']} s.",
        "",
        "| output | expected | lost | duplicated |",
        "|---|---|---|---|",
        *(f"| {k} | {v['expected']} | {v['lost']} | {v['duplicated']} |" for k, v in results.items()),
    ]
    (out / "CHAOS.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--broker-restarts", type=int, default=2)
    parser.add_argument("--rate", type=int, default=200, help="input lines per second")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--out", default="tests/chaos/results")
    args = parser.parse_args()
    summary = run(
        kills=args.kills,
        broker_restarts=args.broker_restarts,
        rate=args.rate,
        seed=args.seed,
        out=pathlib.Path(args.out),
    )
    eos = [v for k, v in summary["outputs"].items() if k.endswith("exactly_once_v2")]
    sys.exit(0 if all(v["lost"] == 0 and v["duplicated"] == 0 for v in eos) else 1)


if __name__ == "__main__":
    main()
