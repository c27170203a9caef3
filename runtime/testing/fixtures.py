"""Real-component pytest fixtures, shared by tests/ and e2e/ (loaded with ``-p``).

- ``kafka_bootstrap``: a real Apache Kafka broker (KRaft) for the test session, or the broker named
  by ``$STREAMAPP_KAFKA_BOOTSTRAP``. A broker that cannot start FAILS the test; it is never skipped.
- ``spark``: one local[2] SparkSession per session, configured like production (connector jars,
  RocksDB state store, deliberate shuffle partitions).
- ``new_topic``: creates a uniquely named topic with N partitions.
- ``streamapp_report``: lines printed in the run's summary (what was started, what was measured),
  so the test log says which Kafka ran and what round trips happened.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from streamapp.runtime.embedded import artifacts, broker, errors
from streamapp.runtime.kafka import admin

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_REPORT: list[str] = []
_SKIPPED: list[str] = []
_counter = itertools.count()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # In CI nothing is skipped: a missing broker, jar or binary must turn the run red.
    if os.environ.get("CI", "").lower() in ("1", "true", "yes") and _SKIPPED and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _SKIPPED and os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        terminalreporter.section("skipped tests fail CI", red=True)
        for nodeid in _SKIPPED:
            terminalreporter.write_line(f"skipped in CI (not allowed): {nodeid}")
    if _REPORT:
        terminalreporter.section("StreamApp real components")
        for line in _REPORT:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def streamapp_report() -> Callable[[str], None]:
    return _REPORT.append


@pytest.fixture(scope="session")
def kafka_bootstrap(streamapp_report: Callable[[str], None]) -> Iterator[str]:
    external = os.environ.get("STREAMAPP_KAFKA_BOOTSTRAP")
    if external:
        streamapp_report(f"Kafka: external broker at {external} ($STREAMAPP_KAFKA_BOOTSTRAP)")
        yield external
        return
    kafka = broker.EmbeddedKafka()
    try:
        kafka.start()
    except errors.EmbeddedError as exc:
        pytest.fail(f"the real Kafka broker could not start (run `make setup`): {exc}", pytrace=False)
    streamapp_report(
        f"Kafka: started Apache Kafka {kafka.version} (KRaft, single node) at {kafka.bootstrap} "
        f"in {kafka.startup_seconds:.1f} s"
    )
    try:
        yield kafka.bootstrap
    finally:
        kafka.stop()


@pytest.fixture(scope="session")
def spark(streamapp_report: Callable[[str], None], kafka_bootstrap: str) -> Iterator[SparkSession]:
    # Depends on the broker so that Spark (and its cached Kafka producers) stops before it does.
    try:
        from streamapp.runtime.spark import session  # noqa: PLC0415 - keeps pyspark out of collection
    except ImportError as exc:  # pragma: no cover - install defect
        pytest.fail(f"pyspark is not importable (run `make setup`): {exc}", pytrace=False)
    started = time.monotonic()
    try:
        spark_session = session.build_session(app_name="streamapp-tests")
    except errors.EmbeddedError as exc:
        pytest.fail(f"Spark's Kafka connector is missing (run `make setup`): {exc}", pytrace=False)
    streamapp_report(
        f"Spark: local[2] SparkSession {spark_session.version} with spark-sql-kafka-0-10 "
        f"{artifacts.spark_version()} in {time.monotonic() - started:.1f} s"
    )
    yield spark_session
    for query in spark_session.streams.active:
        query.stop()
    spark_session.stop()


@pytest.fixture
def new_topic(kafka_bootstrap: str, request: pytest.FixtureRequest) -> Callable[..., str]:
    """``new_topic(partitions=4)`` → the name of a fresh topic derived from the test's name."""
    stem = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:80]

    def create(partitions: int = 1, *, suffix: str = "") -> str:
        name = f"{stem}-{suffix or next(_counter)}-{time.monotonic_ns() % 10**8}"
        admin.create_topics(kafka_bootstrap, {name: partitions})
        return name

    return create
