"""spec.kafka.tls/sasl → client configuration, without a broker: dialects, quoting, keys, messages."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from typing import Any

import pytest

from streamapp.runtime import errors, manifest
from streamapp.runtime.kafka import security
from streamapp.runtime.manifest import models

CA = "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nQ0VSVA==\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n"

SECURE: dict[str, Any] = {
    "bootstrapServers": "kafka:9093",
    "tls": {
        "ca": {"name": "kafka-ca", "key": "ca.crt"},
        "certificate": {"name": "kafka-client", "key": "tls.crt"},
        "privateKey": {"name": "kafka-client", "key": "tls.key"},
    },
    "sasl": {
        "mechanism": "SCRAM-SHA-512",
        "username": {"name": "kafka-user", "key": "username"},
        "password": {"name": "kafka-user", "key": "password"},
    },
}
VALUES = {"ca.crt": CA, "tls.crt": CERT, "tls.key": KEY, "username": "app", "password": "pw"}


def _spec(**fields: Any) -> models.KafkaSpec:
    return models.KafkaSpec.model_validate(fields)


def _resolve(spec: models.KafkaSpec, values: dict[str, str] = VALUES) -> security.Credentials:
    return security.resolve(spec, lambda ref: values[ref.key])


def test_references_name_field_secret_key_and_variable() -> None:
    refs = security.references(_spec(**SECURE))
    assert [(r.field, r.secret, r.key, r.env) for r in refs] == [
        ("spec.kafka.tls.ca", "kafka-ca", "ca.crt", "STREAMAPP_KAFKA_TLS_CA"),
        ("spec.kafka.tls.certificate", "kafka-client", "tls.crt", "STREAMAPP_KAFKA_TLS_CERTIFICATE"),
        ("spec.kafka.tls.privateKey", "kafka-client", "tls.key", "STREAMAPP_KAFKA_TLS_PRIVATE_KEY"),
        ("spec.kafka.sasl.username", "kafka-user", "username", "STREAMAPP_KAFKA_SASL_USERNAME"),
        ("spec.kafka.sasl.password", "kafka-user", "password", "STREAMAPP_KAFKA_SASL_PASSWORD"),
    ]
    assert security.references(None) == security.references(_spec(bootstrapServers="k:9092")) == []


def test_sasl_ssl_with_client_certificate_in_both_dialects() -> None:
    creds = _resolve(_spec(**SECURE))
    assert creds.librdkafka() == {
        "security.protocol": "SASL_SSL",
        "ssl.ca.pem": CA,
        "ssl.certificate.pem": CERT,
        "ssl.key.pem": KEY,
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "app",
        "sasl.password": "pw",
    }
    assert creds.java() == {
        "security.protocol": "SASL_SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": CA,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": CERT,
        "ssl.keystore.key": KEY,
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="app" password="pw";',
    }
    assert "pw" not in repr(creds) and "PRIVATE" not in repr(creds)


@pytest.mark.parametrize(
    ("fields", "protocol"),
    [
        ({}, "PLAINTEXT"),
        ({"tls": {}}, "SSL"),
        ({"sasl": SECURE["sasl"] | {"mechanism": "PLAIN"}}, "SASL_PLAINTEXT"),
        ({"tls": {"ca": SECURE["tls"]["ca"]}, "sasl": SECURE["sasl"]}, "SASL_SSL"),
    ],
)
def test_protocol_follows_what_the_spec_names(fields: dict[str, Any], protocol: str) -> None:
    creds = _resolve(_spec(**fields))
    assert creds.protocol == protocol
    if protocol == "PLAINTEXT":
        assert creds.librdkafka() == creds.java() == {}  # nothing changes for plaintext apps
    else:
        assert creds.librdkafka()["security.protocol"] == creds.java()["security.protocol"] == protocol


def test_tls_without_ca_uses_the_system_trust_store() -> None:
    creds = _resolve(_spec(tls={}))
    assert creds.librdkafka() == {"security.protocol": "SSL", "ssl.ca.location": "probe"}
    assert creds.java() == {"security.protocol": "SSL"}  # the JVM's cacerts


def test_plain_login_module_and_jaas_quoting() -> None:
    jaas = security.jaas_config("PLAIN", 'u"1', 'p\\a"s\ns')
    assert jaas == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u\\"1" password="p\\\\a\\"s\\ns";'
    )


def test_pkcs1_rsa_key_is_rewrapped_as_pkcs8_like_openssl_does(tmp_path: pathlib.Path) -> None:
    subprocess.run(
        ["openssl", "genrsa", "-traditional", "-out", "k1.pem", "1024"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["openssl", "pkcs8", "-topk8", "-nocrypt", "-in", "k1.pem", "-out", "k8.pem"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    pkcs1 = (tmp_path / "k1.pem").read_text()
    assert pkcs1.startswith("-----BEGIN RSA PRIVATE KEY-----")
    creds = _resolve(_spec(**SECURE), {**VALUES, "tls.key": pkcs1})
    assert creds.private_key == (tmp_path / "k8.pem").read_text()
    # A PKCS#8 key is kept as it is, without what tools write around the block.
    exported = "Bag Attributes\n    localKeyID: 01\n" + (tmp_path / "k8.pem").read_text()
    assert _resolve(_spec(**SECURE), {**VALUES, "tls.key": exported}).private_key == creds.private_key


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "tls.key",
            "-----BEGIN EC PRIVATE KEY-----\nRUM=\n-----END EC PRIVATE KEY-----\n",
            "spec.kafka.tls.privateKey (Secret kafka-client, key tls.key): EC PRIVATE KEY is not "
            "supported; store an unencrypted PKCS#8 key (openssl pkcs8 -topk8 -nocrypt -in key.pem)",
        ),
        (
            "tls.key",
            CERT,
            "spec.kafka.tls.privateKey (Secret kafka-client, key tls.key): expected one PEM private key, "
            "found CERTIFICATE",
        ),
        (
            "ca.crt",
            "not a certificate",
            "spec.kafka.tls.ca (Secret kafka-ca, key ca.crt): expected PEM certificates, found no PEM block",
        ),
    ],
)
def test_unusable_material_is_named_by_field(key: str, value: str, message: str) -> None:
    with pytest.raises(errors.KafkaCredentialsError) as caught:
        _resolve(_spec(**SECURE), {**VALUES, key: value})
    assert str(caught.value) == message


def test_missing_variable_names_field_secret_key_and_variable() -> None:
    env = {
        "STREAMAPP_KAFKA_TLS_CA": CA,
        "STREAMAPP_KAFKA_TLS_CERTIFICATE": CERT,
        "STREAMAPP_KAFKA_TLS_PRIVATE_KEY": KEY,
        "STREAMAPP_KAFKA_SASL_USERNAME": "app",
    }
    with pytest.raises(errors.KafkaCredentialsError) as caught:
        security.from_env(_spec(**SECURE), env)
    assert str(caught.value) == (
        "spec.kafka.sasl.password (Secret kafka-user, key password): "
        "set STREAMAPP_KAFKA_SASL_PASSWORD to run outside Kubernetes"
    )
    env["STREAMAPP_KAFKA_SASL_PASSWORD"] = "pw"
    assert security.from_env(_spec(**SECURE), env) == _resolve(_spec(**SECURE))


def test_certificate_without_private_key_is_a_manifest_problem() -> None:
    text = """
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: secure}
spec:
  kafka:
    bootstrapServers: kafka:9093
    tls: {certificate: {name: kafka-client, key: tls.crt}}
  topology:
    streams: [{from: {topic: a}, steps: [{to: {topic: b}}]}]
"""
    assert [str(p) for p in manifest.validate_manifest(text)] == [
        "spec.kafka.tls: certificate and privateKey go together (mutual TLS needs both): "
        "privateKey is missing"
    ]
    # The same rule, as CEL, in the CRD: the API server refuses it too.
    tls = manifest.openapi_schema()["properties"]["kafka"]["properties"]["tls"]
    assert tls["x-kubernetes-validations"] == [
        {
            "rule": "has(self.certificate) == has(self.privateKey)",
            "message": "certificate and privateKey go together (mutual TLS needs both)",
        }
    ]


def test_the_module_does_not_import_pyspark() -> None:
    code = "import sys, streamapp.runtime.kafka.security; assert 'pyspark' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
