"""Real-component pytest fixtures, shared by tests/ and e2e/ (loaded with ``-p``).

- ``kafka_bootstrap``: a real Apache Kafka broker (KRaft) for the test session, or the broker named
  by ``$STREAMAPP_KAFKA_BOOTSTRAP``. A broker that cannot start FAILS the test; it is never skipped.
- ``spark``: one local[2] SparkSession per session, configured like production (connector jars,
  RocksDB state store, deliberate shuffle partitions).
- ``new_topic``: creates a uniquely named topic with N partitions.
- ``secure_kafka``: a second embedded broker with a SASL_SSL listener (PLAIN and SCRAM users) and
  an SSL listener requiring client certificates, for the tests of ``spec.kafka.tls``/``sasl``
  (:class:`SecureKafka`). Started only by the tests that ask for it; the default broker stays
  plaintext.
- ``streamapp_report``: lines printed in the run's summary (what was started, what was measured),
  so the test log says which Kafka ran and what round trips happened.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from streamapp.runtime.embedded import artifacts, broker, errors
from streamapp.runtime.kafka import admin, security
from streamapp.runtime.manifest import models

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


@dataclasses.dataclass(frozen=True)
class SecureKafka:
    """The secure broker of ``secure_kafka``: its listeners and the credentials that open them."""

    broker: broker.EmbeddedKafka
    user: str
    password: str  # has a quote, a backslash and a space: JAAS quoting is exercised

    @property
    def sasl_bootstrap(self) -> str:
        return self.broker.sasl_ssl_bootstrap

    @property
    def mtls_bootstrap(self) -> str:
        return self.broker.ssl_bootstrap

    @property
    def material(self) -> dict[str, str]:
        """The PEM texts, by the Secret key names cert-manager uses."""
        tls = self.broker.tls
        assert tls is not None
        return {
            "ca.crt": tls.ca.read_text(),
            "tls.crt": tls.client_certificate.read_text(),
            "tls.key": tls.client_key.read_text(),
        }

    def sasl(self, mechanism: str = "SCRAM-SHA-512", *, password: str | None = None) -> security.Credentials:
        """SASL_SSL as ``user`` (trusting the broker's CA), through :func:`security.resolve`."""
        spec = models.KafkaSpec.model_validate(
            {
                "tls": {"ca": {"name": "kafka-ca", "key": "ca.crt"}},
                "sasl": {
                    "mechanism": mechanism,
                    "username": {"name": "kafka-user", "key": "username"},
                    "password": {"name": "kafka-user", "key": "password"},
                },
            }
        )
        values = {
            **self.material,
            "username": self.user,
            "password": self.password if password is None else password,
        }
        return security.resolve(spec, lambda ref: values[ref.key])

    def mutual_tls(self) -> security.Credentials:
        """SSL with the client certificate (its key in PKCS#1 form, as cert-manager issues it)."""
        spec = models.KafkaSpec.model_validate(
            {
                "tls": {
                    "ca": {"name": "kafka-client", "key": "ca.crt"},
                    "certificate": {"name": "kafka-client", "key": "tls.crt"},
                    "privateKey": {"name": "kafka-client", "key": "tls.key"},
                }
            }
        )
        values = self.material
        return security.resolve(spec, lambda ref: values[ref.key])


@pytest.fixture(scope="session")
def secure_kafka(streamapp_report: Callable[[str], None]) -> Iterator[SecureKafka]:
    user, password = "streamapp", 's3cr"t\\pass word'
    kafka = broker.EmbeddedKafka(heap="512m", sasl_users={user: password}, mutual_tls=True)
    try:
        kafka.start()
    except errors.EmbeddedError as exc:
        pytest.fail(f"the secure Kafka broker could not start: {exc}", pytrace=False)
    streamapp_report(
        f"Kafka: started a secure Apache Kafka {kafka.version} broker (SASL_SSL at "
        f"{kafka.sasl_ssl_bootstrap}, mutual TLS at {kafka.ssl_bootstrap}) in {kafka.startup_seconds:.1f} s"
    )
    try:
        yield SecureKafka(broker=kafka, user=user, password=password)
    finally:
        kafka.stop()
