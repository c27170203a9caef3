"""The operator's Kafka credentials from Secrets: the config, the errors, and a real secure broker."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from streamapp.operator import errors, kafka_auth
from streamapp.runtime.kafka import admin
from streamapp.runtime.manifest import models
from streamapp.runtime.testing.fixtures import SecureKafka

CA = "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n"

KAFKA: dict[str, Any] = {
    "bootstrapServers": "kafka:9093",
    "tls": {"ca": {"name": "kafka-ca", "key": "ca.crt"}},
    "sasl": {
        "mechanism": "SCRAM-SHA-512",
        "username": {"name": "kafka-user", "key": "username"},
        "password": {"name": "kafka-user", "key": "password"},
    },
}


def _secret(cluster: Any, name: str, data: dict[str, str], namespace: str = "apps") -> None:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "data": encoded,
        }
    )


def _config(cluster: Any, kafka: dict[str, Any] = KAFKA) -> dict[str, str]:
    spec = models.KafkaSpec.model_validate(kafka)
    return kafka_auth.client_config(spec, namespace="apps", cluster=cluster)


def test_librdkafka_config_from_the_secrets(fake_cluster: Any) -> None:
    _secret(fake_cluster, "kafka-ca", {"ca.crt": CA})
    _secret(fake_cluster, "kafka-user", {"username": "wordcount", "password": "s3cret"})
    assert _config(fake_cluster) == {
        "security.protocol": "SASL_SSL",
        "ssl.ca.pem": CA,
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "wordcount",
        "sasl.password": "s3cret",
    }


def test_plaintext_reads_no_secret(fake_cluster: Any) -> None:
    assert _config(fake_cluster, {"bootstrapServers": "kafka:9092"}) == {}
    assert kafka_auth.client_config(None, namespace="apps", cluster=fake_cluster) == {}


def test_a_missing_secret_is_retried_and_named(fake_cluster: Any) -> None:
    _secret(fake_cluster, "kafka-ca", {"ca.crt": CA})
    _secret(fake_cluster, "kafka-user", {"username": "wordcount"}, namespace="elsewhere")
    with pytest.raises(errors.KafkaSecretError) as caught:
        _config(fake_cluster)
    assert isinstance(caught.value, errors.RetryableError) and caught.value.delay == kafka_auth.RETRY_SECONDS
    assert str(caught.value) == (
        "spec.kafka.sasl.username (Secret kafka-user, key username): Secret apps/kafka-user does not exist"
    )


def test_a_missing_key_is_named_with_the_keys_there_are(fake_cluster: Any) -> None:
    _secret(fake_cluster, "kafka-ca", {"ca.crt": CA})
    _secret(fake_cluster, "kafka-user", {"username": "wordcount", "user.password": "s3cret"})
    with pytest.raises(errors.KafkaSecretError) as caught:
        _config(fake_cluster)
    assert str(caught.value) == (
        "spec.kafka.sasl.password (Secret kafka-user, key password): Secret apps/kafka-user has no key "
        "'password' (its keys: user.password, username)"
    )


def test_unusable_material_is_named(fake_cluster: Any) -> None:
    _secret(fake_cluster, "kafka-ca", {"ca.crt": "not a certificate"})
    _secret(fake_cluster, "kafka-user", {"username": "wordcount", "password": "s3cret"})
    with pytest.raises(errors.KafkaSecretError) as caught:
        _config(fake_cluster)
    assert str(caught.value) == (
        "spec.kafka.tls.ca (Secret kafka-ca, key ca.crt): expected PEM certificates, found no PEM block "
        "(namespace apps)"
    )


@pytest.mark.parametrize("listener", ["sasl_ssl", "mutual_tls"])
def test_the_operator_counts_partitions_on_a_secure_broker(
    fake_cluster: Any, secure_kafka: SecureKafka, listener: str
) -> None:
    material = secure_kafka.material
    if listener == "sasl_ssl":
        _secret(fake_cluster, "kafka-ca", {"ca.crt": material["ca.crt"]})
        _secret(
            fake_cluster, "kafka-user", {"username": secure_kafka.user, "password": secure_kafka.password}
        )
        kafka, bootstrap = (
            {**KAFKA, "bootstrapServers": secure_kafka.sasl_bootstrap},
            secure_kafka.sasl_bootstrap,
        )
    else:
        _secret(fake_cluster, "app-tls", material)  # cert-manager's layout: ca.crt, tls.crt, tls.key
        kafka = {
            "bootstrapServers": secure_kafka.mtls_bootstrap,
            "tls": {
                "ca": {"name": "app-tls", "key": "ca.crt"},
                "certificate": {"name": "app-tls", "key": "tls.crt"},
                "privateKey": {"name": "app-tls", "key": "tls.key"},
            },
        }
        bootstrap = secure_kafka.mtls_bootstrap
    config = _config(fake_cluster, kafka)
    topic = f"operator-{listener.replace('_', '-')}"
    admin.create_topics(bootstrap, {topic: 3}, client_config=config)
    assert admin.partition_counts(bootstrap, [topic], client_config=config) == {topic: 3}
