"""The StreamApp custom resource (pydantic v2): the object users write, its ``spec`` and Kafka.

camelCase in YAML (Kubernetes' convention), snake_case in Python; unknown fields are errors, and
every field is described so that the CRD generated from these models documents itself.
``spec.topology`` is modelled in :mod:`streamapp.runtime.manifest.topology_spec`, ``spec.deployment``
in :mod:`streamapp.runtime.manifest.deployment`.
"""

from __future__ import annotations

from typing import Any, Literal

import pydantic

from streamapp.runtime.manifest import base
from streamapp.runtime.manifest.deployment import Deployment
from streamapp.runtime.manifest.topology_spec import TopologySpec

__all__ = [
    "KafkaSpec",
    "Metadata",
    "SaslSpec",
    "SecretKeyRef",
    "StreamApp",
    "StreamAppSpec",
    "TlsSpec",
]


_Model = base.CamelModel


class SecretKeyRef(_Model):
    """One key of a Kubernetes Secret in the app's namespace (credentials never sit in the spec)."""

    name: str = pydantic.Field(description="Name of the Secret.")
    key: str = pydantic.Field(description="Key within the Secret's data.")


class TlsSpec(_Model):
    """TLS to the brokers; with certificate and privateKey also mutual TLS (a client certificate)."""

    model_config = base.cel_rules(
        (
            "has(self.certificate) == has(self.privateKey)",
            "certificate and privateKey go together (mutual TLS needs both)",
        )
    )

    ca: SecretKeyRef | None = pydantic.Field(
        default=None, description="CA certificate (PEM) that signs the brokers' certificates."
    )
    certificate: SecretKeyRef | None = pydantic.Field(
        default=None, description="Client certificate (PEM) for mutual TLS."
    )
    private_key: SecretKeyRef | None = pydantic.Field(
        default=None,
        description="Private key (PEM, PKCS#8 or PKCS#1 RSA, unencrypted) of the client certificate.",
    )

    @pydantic.model_validator(mode="after")
    def _key_pair(self) -> TlsSpec:
        if (self.certificate is None) != (self.private_key is None):
            missing = "privateKey" if self.private_key is None else "certificate"
            raise ValueError(
                f"certificate and privateKey go together (mutual TLS needs both): {missing} is missing"
            )
        return self


class SaslSpec(_Model):
    mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = pydantic.Field(
        description="SASL mechanism the brokers expect."
    )
    username: SecretKeyRef = pydantic.Field(description="Secret key holding the user name.")
    password: SecretKeyRef = pydantic.Field(description="Secret key holding the password.")


class KafkaSpec(_Model):
    bootstrap_servers: str | None = pydantic.Field(
        default=None, description="host:port[,host:port]; omitted locally: an embedded broker is started."
    )
    tls: TlsSpec | None = pydantic.Field(
        default=None, description="Connect over TLS; certificates come from Secrets."
    )
    sasl: SaslSpec | None = pydantic.Field(
        default=None, description="SASL authentication; credentials come from Secrets."
    )


class StreamAppSpec(_Model):
    kafka: KafkaSpec | None = pydantic.Field(default=None, description="Kafka connection.")
    topology: TopologySpec = pydantic.Field(description="The processing topology.")
    processing_guarantee: Literal["at_least_once", "exactly_once_v2"] = pydantic.Field(
        default="at_least_once",
        description="Delivery guarantee Kafka to Kafka. at_least_once: an idempotent producer, a micro-batch "
        "replayed after a failure is written again. exactly_once_v2: each task of a micro-batch writes "
        "in a Kafka transaction with a marker, a replay writes nothing already committed; readers use "
        "isolation.level=read_committed. Not with latency: low.",
    )
    commit_interval_ms: int | None = pydantic.Field(
        default=None,
        ge=1,
        description="Kafka Streams' commit.interval.ms: a micro-batch (and with exactly_once_v2 its "
        "transactions) starts at most this often, in milliseconds; default: back to back, as soon as "
        "the previous one ends. Longer intervals make fewer, larger batches (less fixed cost per "
        "record, more latency). Not with latency: low, which has no micro-batches.",
    )
    checkpoint_location: str | None = pydantic.Field(
        default=None, description="Checkpoint folder or Hadoop-compatible URI (s3a://, hdfs://, file:)."
    )
    state_partitions: int | None = pydantic.Field(
        default=None,
        ge=1,
        description="Partitions of every state store (Spark's shuffle partitions), fixed when the "
        "checkpoint is created; default: the largest partition count of the input topics (Kafka "
        "Streams' task count), at most a local master's task slots. Each costs time in every "
        "micro-batch: choose the most parallelism the app will need. Tasks (each with its own "
        "stream time) stay one per input partition whatever this is.",
    )
    spark_conf: dict[str, str] | None = pydantic.Field(default=None, description="Extra Spark configuration.")
    deployment: Deployment | None = pydantic.Field(default=None, description="How the operator runs the app.")


class Metadata(pydantic.BaseModel):
    """Kubernetes object metadata; fields other than these (labels, uid, …) are kept as they are."""

    model_config = pydantic.ConfigDict(extra="allow")
    name: str = pydantic.Field(description="The app's name.")
    namespace: str | None = pydantic.Field(default=None, description="The app's namespace.")


class StreamApp(_Model):
    """The whole custom resource, as ``kubectl apply`` and ``streamapp run`` read it."""

    api_version: Literal["streamapp.io/v1alpha1"] = pydantic.Field(description="streamapp.io/v1alpha1")
    kind: Literal["StreamApp"] = pydantic.Field(description="StreamApp")
    metadata: Metadata = pydantic.Field(description="Kubernetes object metadata (name, namespace, …).")
    spec: StreamAppSpec = pydantic.Field(description="What the app processes and how it runs.")
    status: dict[str, Any] | None = pydantic.Field(
        default=None, description="Written by the operator; ignored when a manifest is loaded."
    )
