"""The Kubernetes objects a StreamApp should have: a pure function of the spec and the observations.

Golden tests pin the output. The driver Pod runs the shared runtime image in Spark client mode: the
driver is the Pod itself, it creates its executor pods through the API server (hence the Role),
executors reach it through a headless Service, and the executor pods are owned by the driver Pod
so they go when it goes. The user's manifest is mounted verbatim; everything the cluster adds
(``spec.deployment``) lives in ``spark-defaults.conf`` and the environment, so the same command
runs locally with the Spark master overridden (the contract test does exactly that). Kafka
credentials (``spec.kafka.tls``/``sasl``) reach the driver as environment variables taken from the
Secrets the spec names (``secretKeyRef``); they never enter the ConfigMap or the Spark conf.

A revision is the hash of what a running driver cannot pick up without a restart: the Pod spec and
the mounted files. A different revision means the driver is replaced.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import yaml

from streamapp.operator import sparkconf
from streamapp.runtime import manifest
from streamapp.runtime.expressions import check
from streamapp.runtime.kafka import security
from streamapp.runtime.manifest import deployment, models
from streamapp.runtime.topology import graph

__all__ = [
    "APP_LABEL",
    "CONFIG_DIR",
    "CREDENTIALS_ANNOTATION",
    "DRIVER_COMMAND",
    "METRICS_PORT",
    "REVISION_LABEL",
    "AppRef",
    "Desired",
    "Options",
    "checkpoint",
    "driver_pod_name",
    "executor_prefix",
    "executor_selector",
    "lease_name",
    "progress_group",
    "render",
    "stable",
    "stable_name",
]

APP_LABEL = "streamapp.io/app"
REVISION_LABEL = "streamapp.io/revision"
#: Digest of the Kafka credentials (Secret keys the spec names) the driver was started with: a
#: rotated Secret replaces the driver, whose environment holds the old values.
CREDENTIALS_ANNOTATION = "streamapp.io/kafka-credentials"
CONFIG_DIR = "/etc/streamapp"
MANIFEST_PATH = f"{CONFIG_DIR}/app.yaml"
DRIVER_COMMAND = ("python", "-m", "streamapp.runtime.cli", "driver", "--manifest", MANIFEST_PATH)
#: The user Spark's images run as (uid 185, ``spark``); the runtime image keeps it.
SPARK_UID = 185
#: The driver serves its Prometheus metrics here (``/metrics``), told by STREAMAPP_METRICS_PORT;
#: the container port is named ``metrics``, which the chart's PodMonitor scrapes. Not 9090, the
#: port Prometheus itself and the operator listen on.
METRICS_PORT = 9464
#: Long enough for the driver to stop its query at a micro-batch boundary after SIGTERM.
GRACE_SECONDS = 60


@dataclasses.dataclass(frozen=True)
class AppRef:
    """The identity of the StreamApp object, for names and owner references."""

    name: str
    namespace: str
    uid: str
    api_version: str = "streamapp.io/v1alpha1"
    kind: str = "StreamApp"


@dataclasses.dataclass(frozen=True)
class Options:
    """Operator-wide defaults (from the chart's values via the environment)."""

    runtime_image: str = "ghcr.io/streamapp/runtime:0.1.0"
    image_pull_policy: str | None = None


@dataclasses.dataclass(frozen=True)
class Desired:
    """What should exist. ``driver`` is None when the app is suspended."""

    revision: str
    executors: int
    credentials: str | None
    support: list[dict[str, Any]]  # ServiceAccount, Role, RoleBinding, ConfigMap, Service: applied
    driver: dict[str, Any] | None  # created when absent, replaced when its revision differs

    def objects(self) -> list[dict[str, Any]]:
        return [*self.support, *([self.driver] if self.driver else [])]


#: The two slots a driver Pod can take: a rolling hand-over starts the new driver in the slot the
#: running one does not use (``<app>-driver``, ``<app>-driver-b``).
SLOTS = (0, 1)


def driver_pod_name(app: str, slot: int = 0) -> str:
    return f"{app}-driver" if slot == 0 else f"{app}-driver-b"


def executor_prefix(app: str, slot: int = 0) -> str:
    """Executor Pods are named ``<prefix>-exec-<id>`` by Spark: one prefix per driver slot."""
    return app if slot == 0 else f"{app}-b"


def lease_name(app: str) -> str:
    """The Lease the app's driver holds while it runs the query (streamapp.runtime.lease)."""
    return f"{app}-driver"


def stable_name(app: str) -> str:
    """The ConfigMap holding the last revision that processed (what a rollback returns to)."""
    return f"{app}-stable"


def stable(ref: AppRef, spec: Mapping[str, Any], revision: str) -> dict[str, Any]:
    """The spec of ``revision``, the last one whose driver completed micro-batches: a rolling
    upgrade whose new revision fails after the hand-over returns to it."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(ref, stable_name(ref.name), "stable-revision"),
        "data": {"revision": revision, "spec.json": json.dumps(dict(spec), sort_keys=True)},
    }


def executor_selector(name: str) -> str:
    """The label selector of an app's executor Pods (Spark labels them ``spark-role=executor``):
    the scale subresource's ``status.selector``, which a HorizontalPodAutoscaler reads."""
    return f"{APP_LABEL}={name},spark-role=executor"


def progress_group(ref: AppRef) -> str:
    """The consumer group the driver commits its progress to (lag in status and Kafka's tools)."""
    return f"streamapp.{ref.namespace}.{ref.name}"


def _labels(ref: AppRef, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "streamapp",
        "app.kubernetes.io/instance": ref.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "streamapp-operator",
        APP_LABEL: ref.name,
    }


def _metadata(ref: AppRef, name: str, component: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": ref.namespace,
        "labels": _labels(ref, component),
        "ownerReferences": [
            {
                "apiVersion": ref.api_version,
                "kind": ref.kind,
                "name": ref.name,
                "uid": ref.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def mebibytes(size: str) -> int:
    """Spark's size syntax in MiB (no suffix means MiB, as for ``spark.driver.memory``)."""
    match = re.fullmatch(r"([0-9]+)([kmgtKMGT]?)", size)
    if not match:
        raise ValueError(f"not a Spark size: {size!r}")
    number, unit = int(match[1]), match[2].lower()
    factor = {"k": 1 / 1024, "": 1, "m": 1, "g": 1024, "t": 1024 * 1024}[unit]
    return math.ceil(number * factor)


def checkpoint(spec: models.StreamAppSpec) -> str:
    """Where the driver checkpoints: a reset moves to a fresh folder and keeps the old one."""
    base = (spec.checkpoint_location or "").rstrip("/")
    reset = spec.deployment.reset if spec.deployment else None
    return f"{base}/resets/{reset.id}" if reset else base


def _service_account(ref: AppRef) -> list[dict[str, Any]]:
    name = driver_pod_name(ref.name)
    verbs = ["create", "get", "list", "watch", "update", "patch", "delete", "deletecollection"]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(ref, name, "rbac")},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _metadata(ref, name, "rbac"),
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["pods", "services", "configmaps", "persistentvolumeclaims"],
                    "verbs": verbs,
                },
                # The fence (streamapp.runtime.lease): the driver creates, renews and releases
                # its app's Lease.
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["create", "get", "update"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _metadata(ref, name, "rbac"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ref.namespace}],
        },
    ]


def _lease(ref: AppRef) -> dict[str, Any]:
    """The driver's fence (streamapp.runtime.lease), owned by the app: its spec (holder, renewals)
    is the drivers' alone — applying the metadata never touches it."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": _metadata(ref, lease_name(ref.name), "fence"),
    }


def _service(ref: AppRef) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(ref, driver_pod_name(ref.name), "driver"),
        "spec": {
            "clusterIP": "None",
            # Executors resolve the driver while it starts, before any readiness.
            "publishNotReadyAddresses": True,
            "selector": {APP_LABEL: ref.name, "spark-role": "driver"},
            "ports": [
                {"name": "driver-rpc", "port": sparkconf.DRIVER_PORT, "targetPort": sparkconf.DRIVER_PORT},
                {
                    "name": "blockmanager",
                    "port": sparkconf.BLOCK_MANAGER_PORT,
                    "targetPort": sparkconf.BLOCK_MANAGER_PORT,
                },
            ],
        },
    }


def _describe(app: models.StreamApp, topology: graph.Topology | None) -> str:
    if topology is not None:
        return topology.describe()
    with check.functions_by_form_only():  # the app's functions live in its image, not here
        return manifest.build_topology(app).describe()


def _config_map(
    ref: AppRef, app: models.StreamApp, conf: dict[str, str], topology: graph.Topology | None
) -> dict[str, Any]:
    # spec.deployment is how the app runs here, which the files below and the Pod already say;
    # leaving it out keeps a bounds-only change (or suspend) from restarting the driver.
    document = app.model_dump(
        mode="json", by_alias=True, exclude_unset=True, exclude={"status": True, "spec": {"deployment"}}
    )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(ref, f"{ref.name}-app", "config"),
        "data": {
            "app.yaml": yaml.safe_dump(document, sort_keys=False),
            "spark-defaults.conf": "".join(f"{key} {value}\n" for key, value in sorted(conf.items())),
            "topology.txt": _describe(app, topology),
        },
    }


def _env(ref: AppRef, spec: models.StreamAppSpec, heap: str) -> list[dict[str, Any]]:
    def field(path: str) -> dict[str, Any]:
        return {"valueFrom": {"fieldRef": {"fieldPath": path}}}

    env: list[dict[str, Any]] = [
        {"name": "STREAMAPP_SPARK_MASTER", "value": sparkconf.MASTER},
        {"name": "STREAMAPP_BOOTSTRAP", "value": spec.kafka.bootstrap_servers if spec.kafka else ""},
        {"name": "STREAMAPP_CHECKPOINT", "value": checkpoint(spec)},
        {"name": "STREAMAPP_DRIVER_MEMORY", "value": heap},
        {"name": "STREAMAPP_PROGRESS_GROUP", "value": progress_group(ref)},
        {"name": "STREAMAPP_METRICS_PORT", "value": str(METRICS_PORT)},
        # Read by the runtime as the lowest layer of its Spark conf. Not SPARK_CONF_DIR: Spark's
        # launcher puts that folder on the JVM's class path, and a class path with a non-empty
        # folder on it refuses the class-data archive that `make setup` and the image write.
        {"name": "STREAMAPP_SPARK_DEFAULTS", "value": f"{CONFIG_DIR}/spark/spark-defaults.conf"},
        {"name": "STREAMAPP_DRIVER_POD_NAME", **field("metadata.name")},
        {"name": "STREAMAPP_NAMESPACE", **field("metadata.namespace")},
        {"name": "STREAMAPP_DRIVER_POD_IP", **field("status.podIP")},
        {"name": "STREAMAPP_DRIVER_POD_UID", **field("metadata.uid")},
        {"name": "STREAMAPP_LEASE", "value": lease_name(ref.name)},
        {"name": "STREAMAPP_EXECUTOR_PREFIX", "value": executor_prefix(ref.name)},
    ]
    env += [
        {"name": ref.env, "valueFrom": {"secretKeyRef": {"name": ref.secret, "key": ref.key}}}
        for ref in security.references(spec.kafka)
    ]
    reset = spec.deployment.reset if spec.deployment else None
    if reset is not None and reset.to in ("earliest", "latest"):
        env.append({"name": "STREAMAPP_STARTING_OFFSETS", "value": reset.to})
    elif reset is not None and reset.timestamp is not None:
        millis = int(reset.timestamp.timestamp() * 1000)
        env.append({"name": "STREAMAPP_STARTING_TIMESTAMP", "value": str(millis)})
    return env


def _resources(role: deployment.RoleResources) -> dict[str, Any]:
    heap = mebibytes(role.memory or sparkconf.DEFAULT_MEMORY)
    overhead = mebibytes(role.memory_overhead) if role.memory_overhead else max(384, math.ceil(heap * 0.4))
    memory = f"{heap + overhead}Mi"
    out: dict[str, Any] = {
        "requests": {"cpu": role.cpu or "1", "memory": memory},
        "limits": {"memory": memory},
    }
    if role.cpu_limit:
        out["limits"]["cpu"] = role.cpu_limit
    return out


def _driver(
    ref: AppRef, spec: models.StreamAppSpec, options: Options, config_map: str, service_account: str
) -> dict[str, Any]:
    plan = spec.deployment or deployment.Deployment()
    heap = plan.resources.driver.memory or sparkconf.DEFAULT_MEMORY
    container: dict[str, Any] = {
        "name": "driver",
        "image": plan.image or options.runtime_image,
        "command": list(DRIVER_COMMAND),
        "env": _env(ref, spec, heap),
        "ports": [
            {"name": "driver-rpc", "containerPort": sparkconf.DRIVER_PORT},
            {"name": "blockmanager", "containerPort": sparkconf.BLOCK_MANAGER_PORT},
            {"name": "metrics", "containerPort": METRICS_PORT},
        ],
        "resources": _resources(plan.resources.driver),
        "volumeMounts": [{"name": "app", "mountPath": CONFIG_DIR, "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        # The driver writes its one-line error there; a crash that cannot leaves its log's end.
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    pull = plan.image_pull_policy or options.image_pull_policy
    if pull:
        container["imagePullPolicy"] = pull
    metadata = _metadata(ref, driver_pod_name(ref.name), "driver")
    metadata["labels"]["spark-role"] = "driver"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "serviceAccountName": service_account,
            # The operator replaces a failed driver itself: a restarted container would leave its
            # executor pods behind, a new Pod takes them down with it (they are owned by the Pod).
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": GRACE_SECONDS,
            "securityContext": {"runAsNonRoot": True, "runAsUser": SPARK_UID, "fsGroup": SPARK_UID},
            "containers": [container],
            "volumes": [
                {
                    "name": "app",
                    "configMap": {
                        "name": config_map,
                        "items": [
                            {"key": "app.yaml", "path": "app.yaml"},
                            {"key": "spark-defaults.conf", "path": "spark/spark-defaults.conf"},
                            {"key": "topology.txt", "path": "topology.txt"},
                        ],
                    },
                }
            ],
        },
    }


def _revision(driver: dict[str, Any], config_map: dict[str, Any]) -> str:
    payload = json.dumps({"pod": driver["spec"], "config": config_map["data"]}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:10]


def render(
    *,
    ref: AppRef,
    app: models.StreamApp,
    executors: int,
    options: Options | None = None,
    credentials: str | None = None,
    slot: int = 0,
    topology: graph.Topology | None = None,
) -> Desired:
    """Everything the app should have, with ``executors`` executors (see :mod:`scaling`).

    ``credentials``: digest of the Kafka credentials now in the Secrets (None: no Secrets, or
    unknown); it is annotated on the driver, outside the revision, so that an unreadable Secret
    never looks like a change. ``topology``: the app's, when the caller has built it already.
    """
    options = options or Options()
    spec = app.spec
    plan = spec.deployment or deployment.Deployment()
    image = plan.image or options.runtime_image
    own_account = plan.service_account_name is None
    service_account = plan.service_account_name or driver_pod_name(ref.name)
    conf = sparkconf.driver_conf(
        app=ref.name,
        namespace=ref.namespace,
        image=image,
        pull_policy=plan.image_pull_policy or options.image_pull_policy,
        plan=plan,
        executors=executors,
    )
    config_map = _config_map(ref, app, conf, topology)
    driver = _driver(ref, spec, options, config_map["metadata"]["name"], service_account)
    revision = _revision(driver, config_map)  # the same in either slot
    if slot != 0:
        driver["metadata"]["name"] = driver_pod_name(ref.name, slot)
        for var in driver["spec"]["containers"][0]["env"]:
            if var["name"] == "STREAMAPP_EXECUTOR_PREFIX":
                var["value"] = executor_prefix(ref.name, slot)
    driver["metadata"]["labels"][REVISION_LABEL] = revision
    if credentials is not None:
        driver["metadata"]["annotations"] = {CREDENTIALS_ANNOTATION: credentials}
    support = [*(_service_account(ref) if own_account else []), config_map, _service(ref), _lease(ref)]
    return Desired(
        revision=revision,
        executors=executors,
        credentials=credentials,
        support=support,
        driver=None if plan.suspend else driver,
    )
