"""Kafka Streams is the oracle: any StreamApp topology, built in Kafka Streams itself, on the real broker.

The Java module ``kstreams`` builds a Kafka Streams topology from StreamApp's logical graph (the
JSON of :mod:`streamapp.runtime.topology.export`), with every piece of user logic taken from one
fixed vocabulary (``Vocabulary.java``: each Spark SQL expression or Python function of the
vocabulary beside its Java twin). One JVM runs many topologies at once, one KafkaStreams each,
so a suite pays for one JVM start: :class:`OracleRun` starts it on the runs and collects one
result per run (dropped-records, the TopologyDescription, or why the graph was refused).
:func:`vocabulary` and :func:`evaluate` expose the table so that each twin can be checked
against Spark (test_vocabulary.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from streamapp.runtime.topology import export, graph

__all__ = ["OracleRun", "RunResult", "classpath", "evaluate", "run", "vocabulary"]

HERE = pathlib.Path(__file__).parent
MODULE = HERE / "kstreams"
_BUILD_LOCK = threading.Lock()


def classpath() -> str:
    """The module's jar and dependencies, built with Maven when the sources are newer."""
    jar, deps = MODULE / "target" / "kstreams-conformance-1.jar", MODULE / "target" / "classpath.txt"
    with _BUILD_LOCK:
        sources = [MODULE / "pom.xml", *MODULE.glob("src/**/*.java")]
        if (
            not (jar.exists() and deps.exists())
            or max(s.stat().st_mtime for s in sources) > jar.stat().st_mtime
        ):
            m2 = (
                pathlib.Path(os.environ.get("STREAMAPP_CACHE", pathlib.Path.home() / ".cache/streamapp"))
                / "m2"
            )
            done = subprocess.run(
                ["mvn", "-q", "-B", f"-Dmaven.repo.local={m2}", "package", "dependency:build-classpath",
                 "-Dmdep.outputFile=target/classpath.txt"],
                cwd=MODULE, capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise AssertionError(f"building the Kafka Streams oracle failed:\n{done.stdout}{done.stderr}")
    return f"{jar}{os.pathsep}{deps.read_text().strip()}"


def _java(main: str, *args: str, heap: str = "384m") -> list[str]:
    return ["java", f"-Xmx{heap}", "-XX:TieredStopAtLevel=1", "-cp", classpath(), main, *args]


@dataclasses.dataclass(frozen=True)
class RunResult:
    run: str
    dropped: int  # Kafka Streams' dropped-records-total over the run's tasks
    description: str  # Topology.describe()
    error: str | None = None  # why the oracle could not build the graph (then nothing ran)


class OracleRun:
    """The Oracle JVM, started on runs ``(app_id, topology)`` (topics already the real ones);
    :meth:`wait` returns the results by app id once every run has consumed all of its input."""

    def __init__(
        self, bootstrap: str, state_dir: pathlib.Path, runs: Sequence[tuple[str, graph.Topology]]
    ) -> None:
        graphs = state_dir / "graphs"
        graphs.mkdir(parents=True, exist_ok=True)
        lines = []
        for app_id, topology in runs:
            path = graphs / f"{app_id}.json"
            path.write_text(export.to_json(topology))
            lines.append(f"{app_id} {path}\n")
        self._proc = subprocess.Popen(
            _java("streamapp.conformance.Oracle", bootstrap, str(state_dir), heap="768m"),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self._proc.stdin is not None
        self._proc.stdin.write("".join(lines))
        self._proc.stdin.close()
        self.results: dict[str, RunResult] = {}
        self._stderr: list[str] = []
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            if line.startswith("{"):
                r = json.loads(line)
                self.results[r["run"]] = RunResult(
                    r["run"], int(r.get("dropped", 0)), r.get("description", ""), r.get("error")
                )

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        self._stderr.extend(self._proc.stderr)

    def wait(self, timeout: float) -> dict[str, RunResult]:
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"Kafka Streams runs did not finish in {timeout} s:\n{''.join(self._stderr[-40:])}"
            ) from None
        for t in self._threads:
            t.join(10)
        if code != 0:
            raise AssertionError(f"the Kafka Streams oracle failed ({code}):\n{''.join(self._stderr[-40:])}")
        return self.results

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def run(
    bootstrap: str, topology: graph.Topology, state_dir: pathlib.Path, *, timeout: float = 300
) -> RunResult:
    """One topology in Kafka Streams until it has consumed its input; fails if it was refused."""
    app_id = f"oracle-{uuid.uuid4().hex[:12]}"
    oracle = OracleRun(bootstrap, state_dir, [(app_id, topology)])
    try:
        result = oracle.wait(timeout)[app_id]
    finally:
        oracle.kill()
    assert result.error is None, f"the oracle refused the topology: {result.error}"
    return result


def vocabulary() -> list[dict[str, Any]]:
    """Every entry of the vocabulary: ``{"role", "in", "text", "returns"}``."""
    command = _java("streamapp.conformance.Vocabulary", "list")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    entries: list[dict[str, Any]] = json.loads(done.stdout)
    return entries


def evaluate(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Each entry's Java twin on ``rows`` (``{"key", "value", "other"}``): text → results."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(list(rows), f)
    try:
        done = subprocess.run(
            _java("streamapp.conformance.Vocabulary", "eval", f.name),
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        os.unlink(f.name)
    assert done.returncode == 0, done.stderr
    results: dict[str, list[Any]] = json.loads(done.stdout)
    return results
