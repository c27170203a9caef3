"""Runs a join scenario in Kafka Streams (tests/joins_kstreams, Maven Central jars) on the real broker.

The join tests run each scenario in StreamApp and here, on the same input topics, and require the
same output records: Kafka Streams is the oracle. The Java main is built once (offline Maven from
the setup cache); a build or run that fails fails the test — it is never skipped.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import uuid

import pytest

MODULE = pathlib.Path(__file__).resolve().parents[2] / "joins_kstreams"


def _classpath() -> str:
    cp_file = MODULE / "target" / "classpath.txt"
    sources = [MODULE / "pom.xml", *MODULE.glob("src/main/java/**/*.java")]
    built = MODULE / "target" / "joins-kstreams-1.jar"
    if (
        not built.exists()
        or not cp_file.exists()
        or any(s.stat().st_mtime > built.stat().st_mtime for s in sources)
    ):
        cache = os.environ.get("STREAMAPP_CACHE", str(pathlib.Path.home() / ".cache" / "streamapp"))
        command = [
            "mvn", "-o", "-q", "-B", f"-Dmaven.repo.local={cache}/m2",
            "package", "dependency:build-classpath", "-Dmdep.outputFile=target/classpath.txt",
        ]  # fmt: skip
        done = subprocess.run(command, cwd=MODULE, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            pytest.fail(
                f"building the Kafka Streams oracle failed (run `make setup`):\n{done.stdout}{done.stderr}"
            )
    return f"{MODULE / 'target' / 'classes'}:{cp_file.read_text().strip()}"


def run(bootstrap: str, scenario: str, topics: dict[str, str], state_dir: pathlib.Path) -> int:
    """Run ``scenario`` until it has consumed its inputs; the records its tasks dropped
    (late window-store puts, or a null key or value)."""
    java = shutil.which("java")
    if java is None:
        pytest.fail("a JDK (java 17+) is needed to run Kafka Streams")
    command = [
        java, "-Xmx256m", "-cp", _classpath(), "streamapp.joins.JoinsOracle",
        scenario, bootstrap, f"joins-oracle-{uuid.uuid4().hex[:8]}", str(state_dir),
        *(f"{name}={topic}" for name, topic in topics.items()),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        pytest.fail(f"Kafka Streams ({scenario}) failed:\n{done.stdout}{done.stderr}")
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("dropped-records "), done.stdout
    return int(last.split()[-1])
