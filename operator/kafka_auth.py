"""The operator's own Kafka credentials for an app: ``spec.kafka.tls``/``sasl`` read from Secrets.

The operator asks the brokers for partition counts (and lag) with the same identity the app uses,
so it needs what the driver Pod gets through its ``secretKeyRef`` variables — but from the API
server, in the app's namespace (the chart grants ``get`` on Secrets for this). The Secret material
becomes librdkafka configuration through the runtime's :mod:`security` module, so both sides build
it one way. A Secret or key that is missing, or material that is unusable, raises
:class:`errors.KafkaSecretError` (retryable: creating or fixing the Secret repairs it, no spec
change needed), naming the manifest field, the Secret and the key.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from streamapp.operator import cluster as cluster_
from streamapp.operator import errors
from streamapp.runtime import errors as runtime_errors
from streamapp.runtime.kafka import security
from streamapp.runtime.manifest import models

__all__ = ["RETRY_SECONDS", "client_config"]

#: How long to wait before trying again when a Secret is missing: a person has to create it.
RETRY_SECONDS = 30.0


def client_config(
    kafka: models.KafkaSpec | None, *, namespace: str, cluster: cluster_.Cluster
) -> dict[str, str]:
    """librdkafka configuration for the app's Kafka (empty for a plaintext connection).

    Reads each Secret ``kafka`` names once, from ``namespace``, through ``cluster.get``.
    """
    secrets: dict[str, dict[str, Any] | None] = {}

    def read(ref: security.Reference) -> str:
        if ref.secret not in secrets:
            secrets[ref.secret] = cluster.get("v1", "Secret", namespace, ref.secret)
        found = secrets[ref.secret]
        if found is None:
            raise errors.KafkaSecretError(
                f"{ref}: Secret {namespace}/{ref.secret} does not exist", delay=RETRY_SECONDS
            )
        data = found.get("data") or {}
        if ref.key not in data:
            keys = ", ".join(sorted(data)) or "none"
            raise errors.KafkaSecretError(
                f"{ref}: Secret {namespace}/{ref.secret} has no key {ref.key!r} (its keys: {keys})",
                delay=RETRY_SECONDS,
            )
        try:
            return base64.b64decode(data[ref.key], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise errors.KafkaSecretError(
                f"{ref}: the value in Secret {namespace}/{ref.secret} is not text", delay=RETRY_SECONDS
            ) from exc

    try:
        return security.resolve(kafka, read).librdkafka()
    except runtime_errors.KafkaCredentialsError as exc:  # material there but unusable (not PEM, …)
        raise errors.KafkaSecretError(f"{exc} (namespace {namespace})", delay=RETRY_SECONDS) from exc
