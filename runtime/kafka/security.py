"""``spec.kafka.tls`` and ``spec.kafka.sasl`` as client configuration, for both Kafka client families.

A manifest names Secrets, never credentials. Who connects decides where their contents come from:
the driver Pod gets every referenced Secret key as an environment variable (the operator adds them
as ``secretKeyRef``; :func:`references` names the variables), ``streamapp run`` reads the same
variables (:func:`from_env`), and the operator reads the Secrets through the API server and hands
them to :func:`resolve`. The result, :class:`Credentials`, speaks both dialects:

- librdkafka (confluent-kafka: admin, Python producers and consumers): ``security.protocol``,
  ``ssl.ca.pem``, ``ssl.certificate.pem``, ``ssl.key.pem``, ``sasl.mechanism``, ``sasl.username``,
  ``sasl.password``;
- the Java client (Spark's Kafka source as ``kafka.*`` options, the JVM sink's producers):
  ``security.protocol``, PEM stores given inline (``ssl.truststore.certificates``,
  ``ssl.keystore.certificate.chain``, ``ssl.keystore.key``), ``sasl.mechanism`` and
  ``sasl.jaas.config``. Inline, not files: the options travel with the Spark plan, so executors
  need no mounted Secret.

The Java client reads PEM private keys only in PKCS#8 form (``BEGIN PRIVATE KEY``); an RSA key in
the traditional PKCS#1 form (``BEGIN RSA PRIVATE KEY``, what cert-manager issues by default) is
rewrapped here. No pyspark: the operator imports this module.

The spec comes in as any object shaped like ``spec.kafka`` (:class:`KafkaSecurity`; the manifest's
``KafkaSpec`` is one): the Kafka clients sit below the manifest layer and do not import it. The
field names below are the manifest's, as the place a problem is reported.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import re
import typing
from collections.abc import Callable, Mapping
from typing import Literal

from streamapp.runtime import errors

__all__ = [
    "ENV",
    "PLAINTEXT",
    "Credentials",
    "KafkaSecurity",
    "Reference",
    "from_env",
    "jaas_config",
    "jaas_quote",
    "references",
    "resolve",
]

#: The environment variable that carries each manifest field's Secret key (driver Pod and local runs).
ENV: Mapping[str, str] = {
    "spec.kafka.tls.ca": "STREAMAPP_KAFKA_TLS_CA",
    "spec.kafka.tls.certificate": "STREAMAPP_KAFKA_TLS_CERTIFICATE",
    "spec.kafka.tls.privateKey": "STREAMAPP_KAFKA_TLS_PRIVATE_KEY",
    "spec.kafka.sasl.username": "STREAMAPP_KAFKA_SASL_USERNAME",
    "spec.kafka.sasl.password": "STREAMAPP_KAFKA_SASL_PASSWORD",
}

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\s*(.*?)\s*-----END \1-----", re.DOTALL)
#: DER of AlgorithmIdentifier {rsaEncryption (1.2.840.113549.1.1.1), NULL}.
_RSA_ALGORITHM = bytes.fromhex("300d06092a864886f70d0101010500")


class SecretKey(typing.Protocol):
    """One key of a Kubernetes Secret (``SecretKeyRef`` in the manifest)."""

    @property
    def name(self) -> str: ...

    @property
    def key(self) -> str: ...


class Tls(typing.Protocol):
    """``spec.kafka.tls``: the Secret keys of the CA and, for mutual TLS, the client's pair."""

    @property
    def ca(self) -> SecretKey | None: ...

    @property
    def certificate(self) -> SecretKey | None: ...

    @property
    def private_key(self) -> SecretKey | None: ...


class Sasl(typing.Protocol):
    """``spec.kafka.sasl``: the mechanism and the Secret keys of the user name and password."""

    @property
    def mechanism(self) -> str: ...

    @property
    def username(self) -> SecretKey: ...

    @property
    def password(self) -> SecretKey: ...


class KafkaSecurity(typing.Protocol):
    """What this module reads of ``spec.kafka`` (the manifest's ``KafkaSpec`` has this shape)."""

    @property
    def tls(self) -> Tls | None: ...

    @property
    def sasl(self) -> Sasl | None: ...


@dataclasses.dataclass(frozen=True)
class Reference:
    """One Secret key the spec needs: which manifest field names it, and the variable that carries it."""

    field: str  # manifest path, e.g. spec.kafka.sasl.password
    secret: str
    key: str
    env: str

    def __str__(self) -> str:
        return f"{self.field} (Secret {self.secret}, key {self.key})"


def references(spec: KafkaSecurity | None) -> list[Reference]:
    """The Secret keys ``spec`` refers to, in manifest order (empty for a plaintext connection)."""
    if spec is None:
        return []
    named: list[tuple[str, SecretKey | None]] = []
    if spec.tls is not None:
        named += [
            ("spec.kafka.tls.ca", spec.tls.ca),
            ("spec.kafka.tls.certificate", spec.tls.certificate),
            ("spec.kafka.tls.privateKey", spec.tls.private_key),
        ]
    if spec.sasl is not None:
        named += [
            ("spec.kafka.sasl.username", spec.sasl.username),
            ("spec.kafka.sasl.password", spec.sasl.password),
        ]
    return [Reference(field, ref.name, ref.key, ENV[field]) for field, ref in named if ref is not None]


@dataclasses.dataclass(frozen=True)
class Credentials:
    """How to connect: the protocol and the material; secrets stay out of ``repr``."""

    protocol: Protocol = "PLAINTEXT"
    ca: str | None = None  # PEM certificates the brokers' certificates chain to (None: system trust)
    certificate: str | None = None  # PEM client certificate (chain) for mutual TLS
    private_key: str | None = dataclasses.field(default=None, repr=False)  # PKCS#8 PEM
    mechanism: str | None = None
    username: str | None = None
    password: str | None = dataclasses.field(default=None, repr=False)

    def librdkafka(self) -> dict[str, str]:
        """Configuration for confluent-kafka clients (empty for plaintext: nothing changes)."""
        if self.protocol == "PLAINTEXT":
            return {}
        conf: dict[str, str] = {"security.protocol": self.protocol}
        if self.protocol in ("SSL", "SASL_SSL"):
            if self.ca is not None:
                conf["ssl.ca.pem"] = self.ca
            else:
                # Statically linked OpenSSL (the confluent-kafka wheels) knows no system CA path.
                conf["ssl.ca.location"] = "probe"
            if self.certificate is not None and self.private_key is not None:
                conf["ssl.certificate.pem"] = self.certificate
                conf["ssl.key.pem"] = self.private_key
        if self.mechanism is not None:
            conf["sasl.mechanism"] = self.mechanism
            conf["sasl.username"] = self.username or ""
            conf["sasl.password"] = self.password or ""
        return conf

    def java(self) -> dict[str, str]:
        """Configuration for the Java client (prefix ``kafka.`` for Spark's source options)."""
        if self.protocol == "PLAINTEXT":
            return {}
        conf: dict[str, str] = {"security.protocol": self.protocol}
        if self.protocol in ("SSL", "SASL_SSL"):
            if self.ca is not None:
                conf["ssl.truststore.type"] = "PEM"
                conf["ssl.truststore.certificates"] = self.ca
            if self.certificate is not None and self.private_key is not None:
                conf["ssl.keystore.type"] = "PEM"
                conf["ssl.keystore.certificate.chain"] = self.certificate
                conf["ssl.keystore.key"] = self.private_key
        if self.mechanism is not None:
            conf["sasl.mechanism"] = self.mechanism
            conf["sasl.jaas.config"] = jaas_config(self.mechanism, self.username or "", self.password or "")
        return conf


PLAINTEXT = Credentials()


def jaas_config(mechanism: str, username: str, password: str) -> str:
    """The Java client's ``sasl.jaas.config`` for a user (values quoted as Java's JAAS parser reads them)."""
    user, secret = jaas_quote(username), jaas_quote(password)
    return f'{_LOGIN_MODULES[mechanism]} required username="{user}" password="{secret}";'


def jaas_quote(value: str) -> str:
    """``value`` for the inside of a double-quoted JAAS option value."""
    # Kafka parses JAAS options with java.io.StreamTokenizer: in a quoted string a backslash escapes
    # the next character, and a raw line break ends the string.
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")


def resolve(spec: KafkaSecurity | None, read: Callable[[Reference], str]) -> Credentials:
    """The credentials of ``spec``, with ``read`` returning each referenced Secret key's text.

    ``read`` raises (naming the reference) when the material is not there; what is read is checked
    here, and a problem raises :class:`errors.KafkaCredentialsError` naming the field.
    """
    if spec is None or (spec.tls is None and spec.sasl is None):
        return PLAINTEXT
    refs = {ref.field: ref for ref in references(spec)}
    values = {field: read(ref) for field, ref in refs.items()}
    tls, sasl = spec.tls, spec.sasl
    protocol: Protocol = "SASL_SSL" if tls and sasl else "SSL" if tls else "SASL_PLAINTEXT"
    ca = values.get("spec.kafka.tls.ca")
    certificate = values.get("spec.kafka.tls.certificate")
    key = values.get("spec.kafka.tls.privateKey")
    if ca is not None:
        _expect_certificates(ca, refs["spec.kafka.tls.ca"])
    if certificate is not None:
        _expect_certificates(certificate, refs["spec.kafka.tls.certificate"])
    if key is not None:
        key = _pkcs8(key, refs["spec.kafka.tls.privateKey"])
    return Credentials(
        protocol=protocol,
        ca=ca,
        certificate=certificate,
        private_key=key,
        mechanism=sasl.mechanism if sasl else None,
        username=values.get("spec.kafka.sasl.username"),
        password=values.get("spec.kafka.sasl.password"),
    )


def from_env(spec: KafkaSecurity | None, environ: Mapping[str, str] | None = None) -> Credentials:
    """The credentials of ``spec`` from the environment variables in :data:`ENV`."""
    env = os.environ if environ is None else environ

    def read(ref: Reference) -> str:
        value = env.get(ref.env)
        if not value:
            raise errors.KafkaCredentialsError(
                f"{ref}: set {ref.env} to run outside Kubernetes" + (" (it is empty)" if value == "" else "")
            )
        return value

    return resolve(spec, read)


def _expect_certificates(text: str, ref: Reference) -> None:
    kinds = [m[1] for m in _PEM_BLOCK.finditer(text)]
    if not kinds or any(kind != "CERTIFICATE" for kind in kinds):
        found = ", ".join(kinds) or "no PEM block"
        raise errors.KafkaCredentialsError(f"{ref}: expected PEM certificates, found {found}")


def _pkcs8(text: str, ref: Reference) -> str:
    """The private key as PKCS#8 PEM, rewrapping a PKCS#1 RSA key; other forms are refused by name."""
    blocks = list(_PEM_BLOCK.finditer(text))
    if len(blocks) != 1 or not blocks[0][1].endswith("PRIVATE KEY"):
        found = ", ".join(m[1] for m in blocks) or "no PEM block"
        raise errors.KafkaCredentialsError(f"{ref}: expected one PEM private key, found {found}")
    kind, body = blocks[0][1], blocks[0][2]
    if kind == "PRIVATE KEY":
        return blocks[0][0] + "\n"  # the block alone: tools put "Bag Attributes" lines around it
    if kind == "RSA PRIVATE KEY":
        try:
            pkcs1 = base64.b64decode("".join(body.split()), validate=True)
        except binascii.Error as exc:
            raise errors.KafkaCredentialsError(f"{ref}: the RSA private key is not valid base64") from exc
        info = _der(0x30, bytes.fromhex("020100") + _RSA_ALGORITHM + _der(0x04, pkcs1))
        lines = base64.b64encode(info).decode()
        wrapped = "\n".join(lines[i : i + 64] for i in range(0, len(lines), 64))
        return f"-----BEGIN PRIVATE KEY-----\n{wrapped}\n-----END PRIVATE KEY-----\n"
    raise errors.KafkaCredentialsError(
        f"{ref}: {kind} is not supported; store an unencrypted PKCS#8 key "
        "(openssl pkcs8 -topk8 -nocrypt -in key.pem)"
    )


def _der(tag: int, content: bytes) -> bytes:
    """One DER element: tag, definite length, content."""
    n = len(content)
    if n < 0x80:
        return bytes([tag, n]) + content
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + content
