"""The Kafka Streams side of the suite: build the Java module, run many scenarios in one JVM.

One JVM (``streamapp.conformance.Oracle``) runs every scenario as its own KafkaStreams instance
on the shared broker, so the suite pays for one JVM start; :class:`OracleRun` starts it, feeds it
the runs, and collects one result per run (its dropped-records count and its
TopologyDescription) while StreamApp's side runs in Spark.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import threading

__all__ = ["OracleRun", "RunResult", "classpath"]

HERE = pathlib.Path(__file__).parent
MODULE = HERE / "kstreams"


def classpath() -> str:
    """The module's jar and dependencies, built with Maven when the sources are newer."""
    jar, deps = MODULE / "target" / "kstreams-conformance-1.jar", MODULE / "target" / "classpath.txt"
    sources = [MODULE / "pom.xml", *MODULE.glob("src/**/*.java")]
    if not (jar.exists() and deps.exists()) or max(s.stat().st_mtime for s in sources) > jar.stat().st_mtime:
        m2 = pathlib.Path(os.environ.get("STREAMAPP_CACHE", pathlib.Path.home() / ".cache/streamapp")) / "m2"
        subprocess.run(
            ["mvn", "-q", "-B", f"-Dmaven.repo.local={m2}", "package", "dependency:build-classpath",
             "-Dmdep.outputFile=target/classpath.txt"],
            cwd=MODULE, check=True,
        )  # fmt: skip
    return f"{jar}{os.pathsep}{deps.read_text().strip()}"


@dataclasses.dataclass(frozen=True)
class RunResult:
    scenario: str
    dropped: int  # Kafka Streams' dropped-records-total over the run's tasks
    description: str  # Topology.describe()


class OracleRun:
    """The Oracle JVM, started on runs ``(scenario, app_id, output, inputs)``; :meth:`wait`
    returns the results by app id once every run has consumed all of its input."""

    def __init__(
        self, bootstrap: str, state_dir: pathlib.Path, runs: list[tuple[str, str, str, list[str]]]
    ) -> None:
        self._proc = subprocess.Popen(
            ["java", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-cp", classpath(),
             "streamapp.conformance.Oracle", bootstrap, str(state_dir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self._proc.stdin is not None
        self._proc.stdin.write("".join(f"{s} {app} {out} {' '.join(ins)}\n" for s, app, out, ins in runs))
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
                self.results[r["run"]] = RunResult(r["scenario"], int(r["dropped"]), r["description"])

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        self._stderr.extend(self._proc.stderr)

    def wait(self, timeout: float) -> dict[str, RunResult]:
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
            raise AssertionError(f"Kafka Streams runs did not finish in {timeout} s") from None
        for t in self._threads:
            t.join(10)
        if code != 0:
            raise AssertionError(f"the Kafka Streams oracle failed ({code}):\n{''.join(self._stderr[-40:])}")
        return self.results

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
