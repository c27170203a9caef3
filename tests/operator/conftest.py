"""Fixtures of the operator tests: a valid spec, an in-memory API server, a dict-backed Kafka probe."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from streamapp.operator import desired, errors, kafka_probe

SPEC: dict[str, Any] = {
    "kafka": {"bootstrapServers": "kafka-0.kafka:9092"},
    "checkpointLocation": "s3a://checkpoints/wordcount",
    "topology": {
        "defaults": {"keySerde": "string", "valueSerde": "string"},
        "streams": [
            {
                "name": "counts",
                "from": {"topic": "text-lines"},
                "steps": [
                    {"flatMapValues": "explode(split(lower(value), '\\\\W+'))"},
                    {"filter": "value != ''"},
                    {"groupBy": "value"},
                    {"count": {}},
                    {"toStream": {}},
                    {"to": {"topic": "words-with-counts", "valueSerde": "long"}},
                ],
            }
        ],
    },
    "deployment": {
        "image": "registry.example/streamapp-runtime:1.2.3",
        "executors": {"min": 1, "max": 4, "coresPerExecutor": 2},
    },
}

REF = desired.AppRef(name="wordcount", namespace="apps", uid="0b5e7a52-6c1f-4a8e-9d8e-3f1c2b7a9d10")


@pytest.fixture
def spec() -> dict[str, Any]:
    return copy.deepcopy(SPEC)


class FakeCluster:
    """An API server in a dict: apply merges, delete marks Pods terminating (like a grace period)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str, str]] = []

    def apply(self, obj: Mapping[str, Any]) -> None:
        key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        self.calls.append(("apply", key[0], key[2]))
        # As server-side apply: the fields applied are set, the others (a Lease's spec the
        # drivers write) are kept.
        old = self.objects.get(key, {})
        new = {**old, **copy.deepcopy(dict(obj))}
        new["metadata"] = {**(old.get("metadata") or {}), **new["metadata"]}
        self.objects[key] = new

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects.get((kind, namespace, name)))

    def list(self, api_version: str, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        wanted = dict(part.split("=") for part in selector.split(","))
        return [
            copy.deepcopy(o)
            for (k, ns, _), o in self.objects.items()
            if k == kind and ns == namespace and wanted.items() <= (o["metadata"].get("labels") or {}).items()
        ]

    def delete(
        self, api_version: str, kind: str, namespace: str, name: str, *, grace_seconds: int | None = None
    ) -> bool:
        key = (kind, namespace, name)
        self.calls.append(("delete", kind, name))
        if key not in self.objects:
            return False
        if kind == "Pod" and grace_seconds:
            self.objects[key]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        else:
            del self.objects[key]
        return True

    def patch_status(
        self, api_version: str, kind: str, namespace: str, name: str, status: Mapping[str, Any]
    ) -> None:
        self.calls.append(("patch_status", kind, name))
        self.objects[(kind, namespace, name)]["status"] = copy.deepcopy(dict(status))

    # Test helpers: what the kubelet and the grace period would do.
    def run_pod(self, name: str, *, ready: bool = True, phase: str = "Running") -> None:
        pod = self.objects[("Pod", REF.namespace, name)]
        pod["status"] = {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        }

    def finish_terminating(self) -> None:
        for key in [k for k, o in self.objects.items() if o["metadata"].get("deletionTimestamp")]:
            del self.objects[key]


class FakeProbe:
    """Kafka as a dict: partition counts per topic and the app's committed progress."""

    def __init__(
        self,
        partitions: Mapping[str, int] | None = None,
        *,
        fail: bool = False,
        standing: kafka_probe.Standing | None = None,
    ) -> None:
        self.counts = dict(partitions or {})
        self.fail = fail
        self.progress = standing
        self.groups: list[str] = []
        self.configs: list[dict[str, str]] = []

    def partitions(
        self, bootstrap: str, topics: Sequence[str], *, config: Mapping[str, str] | None = None
    ) -> dict[str, int]:
        self.configs.append(dict(config or {}))
        if self.fail:
            raise errors.KafkaProbeError(f"Kafka at {bootstrap} did not answer", delay=30)
        return {t: self.counts[t] for t in topics if t in self.counts}

    def standing(
        self, bootstrap: str, group: str, topics: Sequence[str], *, config: Mapping[str, str] | None = None
    ) -> kafka_probe.Standing | None:
        if self.fail:
            raise errors.KafkaProbeError(f"Kafka at {bootstrap} did not answer", delay=30)
        self.groups.append(group)
        return self.progress


@pytest.fixture
def fake_cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
def ref() -> desired.AppRef:
    return REF


@pytest.fixture
def make_probe() -> type[FakeProbe]:
    return FakeProbe
