"""StreamApp's JVM library (runtime/jvm): built against the Spark and Kafka the runtime runs with,
versioned as the project, holding every class the Python side names, and never run stale."""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import re
import tomllib
import xml.etree.ElementTree as ET
import zipfile

import pytest

from streamapp.runtime.embedded import artifacts, errors

ROOT = pathlib.Path(__file__).resolve().parents[2]
POM = ROOT / "runtime" / "jvm" / "pom.xml"
_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def _pom(tag: str) -> str:
    found = ET.parse(POM).getroot().find(tag, _NS)
    assert found is not None and found.text, tag
    return found.text


def _pyspark_jars() -> list[str]:
    import pyspark

    return [p.name for p in (pathlib.Path(pyspark.__file__).parent / "jars").glob("*.jar")]


def test_the_pom_is_versioned_as_the_project() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert _pom("m:version") == project
    assert _pom("m:artifactId") == "streamapp-runtime-jvm"


def test_the_pom_builds_against_what_pyspark_and_its_kafka_connector_bring() -> None:
    spark = importlib.metadata.version("pyspark")
    assert _pom("m:properties/m:spark.version") == spark
    jars = _pyspark_jars()
    binary = _pom("m:properties/m:scala.binary.version")
    assert f"spark-sql_{binary}-{spark}.jar" in jars
    assert f"scala-library-{_pom('m:properties/m:scala.version')}.jar" in jars
    kafka = [p.name for p in artifacts.spark_kafka_connector_jars() if p.name.startswith("kafka-clients-")]
    assert kafka == [f"kafka-clients-{_pom('m:properties/m:kafka.version')}.jar"]


def test_the_jar_holds_every_class_the_python_side_names() -> None:
    named: set[str] = set()
    for source in (ROOT / "runtime").rglob("*.py"):
        text = source.read_text()
        named.update(re.findall(r"io\.streamapp\.spark\.([A-Za-z]\w*(?:\$\w*)?)", text))
        # py4j's attribute walk: jvm.io.streamapp.spark.BatchGate
        named.update(re.findall(r"jvm\.io\.streamapp\.spark\.([A-Za-z]\w*)", text))
    # jvm_udfs names nested classes by a prefix, their outer class's name ("…KafkaSerdes$")
    udfs = (ROOT / "runtime" / "spark" / "jvm_udfs.py").read_text()
    named.update(f"KafkaSerdes${m}" for m in re.findall(r'\(f"\{_SERDES\}(\w+)"', udfs))
    named.discard("KafkaSerdes$")
    assert {"KafkaSink", "BatchGate", "LocalCheckpointFileManager", "KafkaSerdes$LongBytes"} <= named
    with zipfile.ZipFile(artifacts.runtime_jar()) as jar:
        classes = {n.removeprefix("io/streamapp/spark/").removesuffix(".class") for n in jar.namelist()}
    assert sorted(named - classes) == []


def _module(tmp_path: pathlib.Path) -> pathlib.Path:
    module = tmp_path / "jvm"
    (module / "src" / "main" / "java").mkdir(parents=True)
    (module / "target").mkdir()
    (module / "pom.xml").write_text("<project/>")
    (module / "src" / "main" / "java" / "A.java").write_text("class A {}")
    return module


def test_a_missing_jar_says_what_builds_it(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifacts, "JVM_MODULE", _module(tmp_path))
    missing = r"streamapp-runtime-jvm-.*\.jar is missing: `make setup` builds it"
    with pytest.raises(errors.SetupError, match=missing):
        artifacts.runtime_jar()


def test_a_jar_older_than_a_source_is_refused(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _module(tmp_path)
    monkeypatch.setattr(artifacts, "JVM_MODULE", module)
    jar = module / "target" / f"streamapp-runtime-jvm-{importlib.metadata.version('streamapp')}.jar"
    jar.write_bytes(b"PK")
    source = module / "src" / "main" / "java" / "A.java"
    os.utime(jar, (1_000_000, 1_000_000))
    os.utime(module / "pom.xml", (900_000, 900_000))
    os.utime(source, (1_000_001, 1_000_001))
    with pytest.raises(errors.SetupError, match=r"is older than .*A\.java: `make jvm`"):
        artifacts.runtime_jar()
    os.utime(source, (900_000, 900_000))
    assert artifacts.runtime_jar() == jar
