"""Resolve the JVM artifacts StreamApp needs from Maven Central, once, into one cache folder.

Neither the Kafka broker nor Spark's Kafka connector is on PyPI, so both come from Maven Central:
a tiny generated pom per artifact set, resolved by Maven into ``<cache>/m2`` and its runtime
classpath written to ``<cache>/classpath/<name>-<version>.txt``. A second call reads that file and
touches no network, which keeps ``make setup`` and every test session start fast.

StreamApp's own JVM library (``runtime/jvm``, a Maven module whose dependencies come through the
same local repository) is built by ``make setup`` and shipped in the wheel: :func:`runtime_jar`
finds it.

This module must not import pyspark (the operator imports the runtime's light modules).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import pathlib
import shutil
import subprocess
import time

from streamapp.runtime.embedded import errors

__all__ = [
    "KAFKA_VERSION",
    "ArtifactSet",
    "cache_dir",
    "kafka_broker_classpath",
    "runtime_jar",
    "spark_kafka_connector_jars",
    "spark_version",
]

#: The Apache Kafka release the embedded broker runs (KRaft mode).
KAFKA_VERSION = "4.3.1"
_LOG4J_VERSION = "2.25.4"


def cache_dir() -> pathlib.Path:
    """The one folder every download lands in: ``$STREAMAPP_CACHE`` or ``~/.cache/streamapp``.

    It lives outside the checkout by default so that fresh clones on the same machine (CI runs in
    one) reuse it; point ``STREAMAPP_CACHE`` elsewhere to isolate it.
    """
    env = os.environ.get("STREAMAPP_CACHE")
    base = pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "streamapp"
    base.mkdir(parents=True, exist_ok=True)
    return base


#: StreamApp's JVM library: its Maven module in a checkout, the built jar in ``target`` (the wheel
#: ships the jar alone, at the same place in the package).
JVM_MODULE = pathlib.Path(__file__).resolve().parents[1] / "jvm"


def runtime_jar() -> pathlib.Path:
    """StreamApp's JVM library (window engines, Kafka sink, batch gate, checkpoint file manager,
    UDFs): ``runtime/jvm/target/streamapp-runtime-jvm-<version>.jar``, which ``make setup`` builds
    with Maven. In a checkout it must be newer than its sources: a jar older than an edited source
    would run the old code, so it is refused, naming the newer file."""
    try:
        version = importlib.metadata.version("streamapp")
    except importlib.metadata.PackageNotFoundError as exc:  # pragma: no cover - install defect
        raise errors.SetupError("streamapp is not installed in this environment; run `make setup`") from exc
    jar = JVM_MODULE / "target" / f"streamapp-runtime-jvm-{version}.jar"
    if not jar.is_file():
        raise errors.SetupError(
            f"StreamApp's JVM library {jar} is missing: `make setup` builds it (Maven, runtime/jvm)"
        )
    pom = JVM_MODULE / "pom.xml"
    if pom.is_file():  # a checkout
        built = jar.stat().st_mtime
        sources = [pom, *(JVM_MODULE / "src" / "main").rglob("*.java")]
        newer = [p for p in sources if p.stat().st_mtime > built]
        if newer:
            raise errors.SetupError(
                f"StreamApp's JVM library {jar} is older than {newer[0]}"
                f"{f' and {len(newer) - 1} more source(s)' if len(newer) > 1 else ''}: "
                "`make jvm` (or `make setup`) rebuilds it"
            )
    return jar


def spark_version() -> str:
    """The installed pyspark version, read from package metadata (no JVM, no pyspark import)."""
    try:
        return importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError as exc:  # pragma: no cover - install defect
        raise errors.SetupError("pyspark is not installed in this environment; run `make setup`") from exc


@dataclasses.dataclass(frozen=True)
class ArtifactSet:
    """A named set of Maven coordinates whose runtime classpath we want as local jar files."""

    name: str
    version: str
    coordinates: tuple[str, ...]  # "group:artifact:version"

    @property
    def classpath_file(self) -> pathlib.Path:
        return cache_dir() / "classpath" / f"{self.name}-{self.version}.txt"

    def jars(self) -> list[pathlib.Path]:
        """The resolved jar files, resolving with Maven on first use."""
        cached = self._read_cached()
        if cached is not None:
            return cached
        self._resolve()
        resolved = self._read_cached()
        if resolved is None:
            raise errors.SetupError(f"Maven resolved {self.name} {self.version} but jars are missing")
        return resolved

    def _read_cached(self) -> list[pathlib.Path] | None:
        if not self.classpath_file.exists():
            return None
        text = self.classpath_file.read_text().strip()
        jars = [pathlib.Path(p) for p in text.split(os.pathsep) if p]
        if not jars or not all(j.exists() for j in jars):
            return None
        return jars

    def _pom(self) -> str:
        deps = []
        for coordinate in self.coordinates:
            group, artifact, version = coordinate.split(":")
            deps.append(
                f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
                f"<version>{version}</version></dependency>"
            )
        return (
            '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
            "  <modelVersion>4.0.0</modelVersion>\n"
            f"  <groupId>local.streamapp</groupId><artifactId>{self.name}</artifactId>"
            f"<version>{self.version}</version>\n"
            "  <dependencies>\n" + "\n".join(deps) + "\n  </dependencies>\n</project>\n"
        )

    def _resolve(self) -> None:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise errors.SetupError(
                f"Maven (`mvn`) is needed once to download {self.name} {self.version} from Maven "
                "Central; install it (Debian: apt-get install maven) and run `make setup` again"
            )
        work = cache_dir() / "maven" / f"{self.name}-{self.version}"
        work.mkdir(parents=True, exist_ok=True)
        (work / "pom.xml").write_text(self._pom())
        self.classpath_file.parent.mkdir(parents=True, exist_ok=True)
        out = work / "classpath.txt"
        cmd = [
            mvn,
            "-q",
            "-B",
            f"-Dmaven.repo.local={cache_dir() / 'm2'}",
            "dependency:build-classpath",
            "-Dmdep.includeScope=runtime",
            f"-Dmdep.outputFile={out}",
        ]
        started = time.monotonic()
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
            raise errors.SetupError(
                f"Maven could not resolve {self.name} {self.version} ({', '.join(self.coordinates)}):\n{tail}"
            )
        jars = [p for p in out.read_text().strip().split(os.pathsep) if p]
        jars = self._filter(jars)
        self.classpath_file.write_text(os.pathsep.join(jars))
        elapsed = time.monotonic() - started
        print(f"resolved {self.name} {self.version}: {len(jars)} jars in {elapsed:.1f} s", flush=True)

    def _filter(self, jars: list[str]) -> list[str]:
        return jars


class _ConnectorSet(ArtifactSet):
    """The Spark Kafka connector minus every jar pyspark already ships (one copy on the classpath)."""

    def _filter(self, jars: list[str]) -> list[str]:
        shipped = {_artifact_name(p.name) for p in _pyspark_jars_dir().glob("*.jar")}
        return [j for j in jars if _artifact_name(pathlib.Path(j).name) not in shipped]


def _artifact_name(jar_file: str) -> str:
    """``kafka-clients-4.1.0.jar`` → ``kafka-clients`` (strip the version and the suffix)."""
    stem = jar_file.removesuffix(".jar")
    parts = stem.split("-")
    for i, part in enumerate(parts):
        if part[:1].isdigit():
            return "-".join(parts[:i])
    return stem


def _pyspark_jars_dir() -> pathlib.Path:
    dist = importlib.metadata.distribution("pyspark")
    return pathlib.Path(str(dist.locate_file("pyspark"))) / "jars"


def kafka_broker_classpath() -> list[pathlib.Path]:
    """Jars to run ``kafka.Kafka`` (broker + controller) and ``kafka.tools.StorageTool``."""
    return ArtifactSet(
        name="kafka-broker",
        version=KAFKA_VERSION,
        coordinates=(
            f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
            f"org.apache.logging.log4j:log4j-slf4j2-impl:{_LOG4J_VERSION}",
            f"org.apache.logging.log4j:log4j-core:{_LOG4J_VERSION}",
        ),
    ).jars()


def spark_kafka_connector_jars() -> list[pathlib.Path]:
    """``spark-sql-kafka-0-10`` at the installed pyspark version, with its own dependencies."""
    version = spark_version()
    return _ConnectorSet(
        name="spark-sql-kafka",
        version=version,
        coordinates=(f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}",),
    ).jars()
