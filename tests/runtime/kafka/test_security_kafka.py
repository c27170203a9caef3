"""The librdkafka clients through a real broker's SASL_SSL and mutual-TLS listeners.

Topics are created, counted, written and read with the configuration :mod:`security` builds from a
spec, as ``streamapp run``, the driver and the operator use it; refused credentials fail at once
with the broker's reason.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException

from streamapp.runtime.kafka import admin, security
from streamapp.runtime.testing.fixtures import SecureKafka

RECORDS = [
    admin.Record(b"k1", b"v1", (("h", b"1"),), 1_700_000_000_001),
    admin.Record(b"k2", b"v2", (), 1_700_000_000_002),
    admin.Record(None, b"v3", (), 1_700_000_000_003),
]


def _round_trip(bootstrap: str, credentials: security.Credentials, topic: str) -> None:
    config = credentials.librdkafka()
    admin.create_topics(bootstrap, {topic: 3}, client_config=config)
    assert admin.partition_counts(bootstrap, [topic, "absent"], client_config=config) == {topic: 3}
    assert admin.produce(bootstrap, topic, RECORDS, client_config=config) == 3
    out = admin.consume(bootstrap, topic, expected=3, client_config=config)
    assert sorted((r.key or b"", r.value, r.headers, r.timestamp) for r in out) == sorted(
        (r.key or b"", r.value, r.headers, r.timestamp) for r in RECORDS
    )


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_admin_produce_consume_over_sasl_ssl(secure_kafka: SecureKafka, mechanism: str) -> None:
    credentials = secure_kafka.sasl(mechanism)
    assert credentials.protocol == "SASL_SSL"
    _round_trip(secure_kafka.sasl_bootstrap, credentials, f"sasl-{mechanism.lower()}-{time.time_ns()}")


def test_admin_produce_consume_over_mutual_tls(secure_kafka: SecureKafka) -> None:
    credentials = secure_kafka.mutual_tls()
    assert credentials.protocol == "SSL" and credentials.private_key is not None
    assert credentials.private_key.startswith("-----BEGIN PRIVATE KEY-----")  # rewrapped from PKCS#1
    _round_trip(secure_kafka.mtls_bootstrap, credentials, f"mtls-{time.time_ns()}")


def test_wrong_password_fails_at_once_naming_the_reason(secure_kafka: SecureKafka) -> None:
    config = secure_kafka.sasl("SCRAM-SHA-256", password="not-the-password").librdkafka()
    started = time.monotonic()
    with pytest.raises(KafkaException) as caught:
        admin.partition_counts(secure_kafka.sasl_bootstrap, ["any"], client_config=config, timeout=10)
    message = str(caught.value)
    assert f"Kafka at {secure_kafka.sasl_bootstrap}" in message
    assert "SASL authentication error: Authentication failed" in message, message
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in message, message
    # A producer does not wait out its timeout either: it stops at the broker's refusal.
    with pytest.raises(KafkaException, match="Authentication failed"):
        admin.produce(secure_kafka.sasl_bootstrap, "any", RECORDS, client_config=config, timeout=60)
    assert time.monotonic() - started < 8  # both: well before their timeouts


def test_mutual_tls_listener_refuses_a_client_without_certificate(secure_kafka: SecureKafka) -> None:
    no_certificate = security.Credentials(protocol="SSL", ca=secure_kafka.material["ca.crt"])
    with pytest.raises(KafkaException) as caught:
        admin.partition_counts(
            secure_kafka.mtls_bootstrap, ["any"], client_config=no_certificate.librdkafka(), timeout=5
        )
    assert "certificate" in str(caught.value), caught.value


def test_untrusted_broker_certificate_is_named(secure_kafka: SecureKafka) -> None:
    # The client certificate is not a CA: trusting it alone must fail the broker's certificate.
    credentials = secure_kafka.sasl()
    wrong_ca = security.Credentials(
        protocol="SASL_SSL",
        ca=secure_kafka.material["tls.crt"],
        mechanism=credentials.mechanism,
        username=credentials.username,
        password=credentials.password,
    )
    with pytest.raises(KafkaException) as caught:
        admin.partition_counts(
            secure_kafka.sasl_bootstrap, ["any"], client_config=wrong_ca.librdkafka(), timeout=5
        )
    assert "certificate verify failed" in str(caught.value), caught.value
