"""Is a StreamApp runnable in a cluster? Every problem, named by its field path, in milliseconds.

The runtime's manifest validator checks the topology the way ``streamapp validate`` does (schema,
expressions through a Spark-dialect parser, serdes, stream references) without a JVM. On top of
that a cluster needs what a laptop run can default: a broker address, a checkpoint every executor
reaches, a name short enough for the objects derived from it, and Spark settings the operator owns
left to the operator. And a change must leave the state in the running checkpoint readable
(:func:`incompatible_state`, against the fingerprint the status recorded: :func:`held_state`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from streamapp.operator import desired, errors
from streamapp.runtime import errors as runtime_errors
from streamapp.runtime import manifest
from streamapp.runtime.expressions import check
from streamapp.runtime.manifest import models
from streamapp.runtime.topology import graph, state

__all__ = [
    "MAX_NAME_LENGTH",
    "RESERVED_SPARK_CONF",
    "held_state",
    "incompatible_state",
    "parse",
    "problems",
    "to_manifest",
]

#: Executor Pods are named ``<name>-exec-<id>``; Spark allows a prefix of at most 47 characters.
MAX_NAME_LENGTH = 42
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

#: Settings the operator derives from the spec; a user value would break the deployment silently.
RESERVED_SPARK_CONF = {
    "spark.master": "the operator runs Spark on this cluster",
    "spark.submit.deployMode": "the driver runs in its own Pod (client mode)",
    "spark.kubernetes.namespace": "executors run in the app's namespace",
    "spark.kubernetes.driver.pod.name": "the operator names the driver Pod",
    "spark.kubernetes.container.image": "use spec.deployment.image",
    "spark.kubernetes.executor.podNamePrefix": "derived from the app's name",
    "spark.driver.host": "the driver's headless Service",
    "spark.driver.port": "the port the driver's Service exposes",
    "spark.driver.blockManager.port": "the port the driver's Service exposes",
    "spark.executor.instances": "use spec.deployment.executors",
    "spark.executor.cores": "use spec.deployment.executors.coresPerExecutor",
    "spark.dynamicAllocation.enabled": "the operator sizes executors from the input partitions",
    "spark.kubernetes.executor.deleteOnTermination": "failed executor Pods are kept for their exit code",
}


def to_manifest(*, name: str, namespace: str | None, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The CR as the runtime reads it: a StreamApp manifest with the spec exactly as written."""
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "streamapp.io/v1alpha1",
        "kind": "StreamApp",
        "metadata": metadata,
        "spec": dict(spec),
    }


def _name_problems(name: str) -> list[runtime_errors.Problem]:
    if len(name) > MAX_NAME_LENGTH or not _DNS_LABEL.match(name):
        return [
            runtime_errors.Problem(
                "metadata.name",
                f"'{name}' must be a DNS label of at most {MAX_NAME_LENGTH} characters (lower-case "
                "letters, digits and '-', starting with a letter): the driver's Service and the "
                "executor pods are named after it",
            )
        ]
    return []


def _cluster_problems(spec: models.StreamAppSpec) -> list[runtime_errors.Problem]:
    found = []
    if spec.kafka is None or not spec.kafka.bootstrap_servers:
        found.append(
            runtime_errors.Problem(
                "spec.kafka.bootstrapServers",
                "required in a cluster (host:port[,host:port]); only local runs start an embedded broker",
            )
        )
    if not spec.checkpoint_location:
        found.append(
            runtime_errors.Problem(
                "spec.checkpointLocation",
                "required in a cluster: a URI the driver and every executor reach (s3a://…, hdfs://…, "
                "or a path on a shared volume); suspend, restarts and upgrades resume from it",
            )
        )
    for key in sorted(spec.spark_conf or {}):
        if key in RESERVED_SPARK_CONF:
            found.append(
                runtime_errors.Problem(
                    f'spec.sparkConf["{key}"]', f"set by the operator ({RESERVED_SPARK_CONF[key]})"
                )
            )
    return found


def problems(*, name: str, namespace: str | None, spec: Mapping[str, Any]) -> list[runtime_errors.Problem]:
    """Every reason this StreamApp cannot run in a cluster; empty when it can."""
    document = to_manifest(name=name, namespace=namespace, spec=spec)
    with check.functions_by_form_only():  # they are in the app's image; never run them here
        found = _name_problems(name) + manifest.validate_manifest(yaml.safe_dump(document, sort_keys=False))
    if found:
        return found
    return _cluster_problems(models.StreamAppSpec.model_validate(dict(spec)))


def parse(*, name: str, namespace: str | None, spec: Mapping[str, Any]) -> models.StreamApp:
    """The validated app; raises :class:`errors.InvalidSpecError` listing every problem."""
    found = problems(name=name, namespace=namespace, spec=spec)
    if found:
        raise errors.InvalidSpecError(found)
    return models.StreamApp.model_validate(to_manifest(name=name, namespace=namespace, spec=spec))


def held_state(app: models.StreamApp, topology: graph.Topology) -> dict[str, Any]:
    """What the app's checkpoint holds once its driver runs: where, and the state fingerprint."""
    checkpoint = desired.checkpoint(app.spec)
    return {"checkpoint": checkpoint, "version": state.VERSION, "steps": state.fingerprint(topology)}


def incompatible_state(
    recorded: Mapping[str, Any] | None, held: Mapping[str, Any]
) -> list[runtime_errors.Problem]:
    """Why the running revision's state (``recorded``, from the status) cannot be read by the
    new spec's topology on the same checkpoint; empty when it can, or when the checkpoint changes
    (a reset) or nothing was recorded. The driver checks again against its checkpoint's record."""
    if not recorded or recorded.get("checkpoint") != held["checkpoint"]:
        return []
    if recorded.get("version") != held["version"]:
        return []
    found = state.changes(recorded.get("steps") or [], held["steps"])
    if not found:
        return []
    return [
        runtime_errors.Problem(
            "spec.topology",
            f"the checkpoint {held['checkpoint']} holds state the new topology cannot read: "
            + "; ".join(found)
            + ". Revert the change, or reprocess on a fresh checkpoint (spec.deployment.reset)",
        )
    ]
