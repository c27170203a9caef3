"""What the operator reads from the cluster, reduced to what its decisions need.

A driver Pod becomes a :class:`status.DriverObservation` (phase, readiness, revision, why it waits
or how it ended) and a :class:`lifecycle.Driver` (its age, what the app's Lease says of it, whether
the scheduler finds it room); a Node becomes a reason its Pods are lost, or None; the executor Pods
become a count and how the failed ones ended. All pure functions of Kubernetes objects, plus the
few reads (:func:`driver_pods`, :func:`app_pods`, :func:`lost_nodes`, :func:`world`,
:func:`stable`) that gather those objects, so that :mod:`transitions` decides from data and
:mod:`reconcile` only sequences.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from streamapp.operator import cluster as cluster_
from streamapp.operator import desired, lifecycle, status
from streamapp.runtime import lease as lease_mod

__all__ = [
    "World",
    "app_pods",
    "driver",
    "driver_pods",
    "executors",
    "lost_nodes",
    "node_lost",
    "observe_driver",
    "placements",
    "stable",
    "uid",
    "unschedulable",
    "world",
]


def observe_driver(pod: Mapping[str, Any] | None) -> status.DriverObservation | None:
    """What matters about the driver Pod: phase, readiness, revision, and why it waits or ended."""
    if pod is None:
        return None
    meta, pod_status = pod.get("metadata") or {}, pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in pod_status.get("conditions") or []
    )
    message, finished = None, None
    for container in pod_status.get("containerStatuses") or []:
        state = container.get("state") or {}
        if state.get("waiting", {}).get("reason") not in (None, "ContainerCreating"):
            waiting = state["waiting"]
            message = f"driver container waits: {waiting['reason']} {waiting.get('message') or ''}".strip()
        elif "terminated" in state:
            ended = state["terminated"]
            finished = ended.get("finishedAt")
            message = (
                f"driver container ended: {ended.get('reason') or 'Terminated'} "
                f"(exit code {ended.get('exitCode')}) {_gist(ended.get('message') or '')}"
            ).strip()
    return status.DriverObservation(
        credentials=(meta.get("annotations") or {}).get(desired.CREDENTIALS_ANNOTATION),
        name=str(meta.get("name")),
        phase=str(pod_status.get("phase") or "Pending"),
        ready=ready,
        revision=(meta.get("labels") or {}).get(desired.REVISION_LABEL),
        terminating=bool(meta.get("deletionTimestamp")),
        message=message,
        started=pod_status.get("startTime"),
        finished=finished,
    )


def _gist(message: str, limit: int = 400) -> str:
    """A termination message in one line: the driver writes one; a crash leaves its log's end
    (terminationMessagePolicy FallbackToLogsOnError), of which the first and last lines say most."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    text = " … ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def node_lost(node: Mapping[str, Any] | None) -> str | None:
    """Why Pods on this Node no longer run (None: it is healthy).

    A Node that is gone, or that the node controller marked not Ready (its kubelet stopped
    renewing its Lease for node-monitor-grace-period), runs nothing any more that anyone can see:
    its Pods stay Running or Terminating in the API server until the Node returns, which a lost
    machine never does.
    """
    if node is None:
        return "no longer exists"
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") == "True":
        return None
    return (
        f"is not Ready ({ready.get('reason') or ready.get('status')} since {ready.get('lastTransitionTime')})"
    )


def uid(pod: Mapping[str, Any] | None) -> str | None:
    return ((pod or {}).get("metadata") or {}).get("uid")


def _owned_by(pod: Mapping[str, Any], owner: str | None) -> bool:
    return owner in {o.get("uid") for o in (pod.get("metadata") or {}).get("ownerReferences") or []}


def executors(pods: Sequence[Mapping[str, Any]], driver_uid: str | None) -> tuple[int, list[str]]:
    """Executor Pods that run and pass their readiness (a terminating one no longer counts), and
    how the current driver's executors that failed ended (Spark keeps them: deleteOnTermination
    is off, so their exit codes and logs stay readable until the driver Pod goes)."""
    ready, failed = 0, []
    for pod in pods:
        seen = observe_driver(pod)
        assert seen is not None
        if seen.phase == "Running" and seen.ready and not seen.terminating:
            ready += 1
        if seen.phase == "Failed" and (driver_uid is None or _owned_by(pod, driver_uid)):
            how = (seen.message or "ended (Failed)").replace("driver container", "container")
            failed.append(f"executor Pod {seen.name}: {how}")
    return ready, sorted(failed)


def unschedulable(pod: Mapping[str, Any], executor_pods: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the driver ``pod`` or one of its executors waits for a Node (the scheduler's message)."""
    owned = [p for p in executor_pods if _owned_by(p, uid(pod))]
    for each in [pod, *owned]:
        for cond in (each.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                name = (each.get("metadata") or {}).get("name")
                return f"Pod {name} cannot be scheduled: {cond.get('message') or 'no Node fits it'}"
    return None


def _age_s(pod: Mapping[str, Any], now: str) -> float:
    created = status.parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    clock = status.parse_time(now)
    if created is None or clock is None:
        return 0.0
    return (clock - created).total_seconds()


def driver(
    pod: Mapping[str, Any],
    *,
    lease: Mapping[str, Any] | None,
    executor_pods: Sequence[Mapping[str, Any]],
    now: str,
) -> lifecycle.Driver:
    """A driver Pod as the life cycle sees it: with its age, and what the app's Lease says of it —
    whether it waits there in standby (or already holds it), and whether it holds it."""
    meta = pod.get("metadata") or {}
    identity = f"{meta.get('name')}/{meta.get('uid')}"
    said = ((lease or {}).get("metadata") or {}).get("annotations") or {}
    holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
    seen = observe_driver(pod)
    assert seen is not None
    return lifecycle.Driver(
        seen=seen,
        age_s=_age_s(pod, now),
        standby=identity in (said.get(lease_mod.STANDBY_ANNOTATION), holder),
        holds_lease=lease is not None and (holder or "") == identity,
        unschedulable=unschedulable(pod, executor_pods),
    )


def driver_pods(cluster: cluster_.Cluster, ref: desired.AppRef) -> dict[int, dict[str, Any]]:
    """The app's driver Pods by slot (two only during a rolling hand-over)."""
    found = {}
    for slot in desired.SLOTS:
        pod = cluster.get("v1", "Pod", ref.namespace, desired.driver_pod_name(ref.name, slot))
        if pod is not None:
            found[slot] = pod
    return found


def lost_nodes(cluster: cluster_.Cluster, pods: Sequence[Mapping[str, Any]]) -> dict[str, str | None]:
    """Each Node the ``pods`` are on (each read once), and why it is lost (None: healthy)."""
    verdicts: dict[str, str | None] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and node not in verdicts:
            verdicts[node] = node_lost(cluster.get("v1", "Node", "", node))
    return verdicts


def stable(cluster: cluster_.Cluster, ref: desired.AppRef) -> tuple[str, dict[str, Any]] | None:
    """The last revision that processed and its spec (see :func:`desired.stable`), if recorded."""
    found = cluster.get("v1", "ConfigMap", ref.namespace, desired.stable_name(ref.name))
    data = (found or {}).get("data") or {}
    try:
        return str(data["revision"]), dict(json.loads(data["spec.json"]))
    except (KeyError, ValueError, TypeError):
        return None


@dataclasses.dataclass(frozen=True)
class World:
    """The app's Pods after the lost Nodes' were evicted, and its Lease: the raw objects the
    actions and the status use, and the drivers as the life cycle sees them."""

    pods: dict[int, dict[str, Any]]  # driver Pods by slot
    executor_pods: list[dict[str, Any]]
    lease: dict[str, Any] | None
    drivers: dict[int, lifecycle.Driver]


def app_pods(cluster: cluster_.Cluster, ref: desired.AppRef) -> list[dict[str, Any]]:
    """Every Pod of the app: its drivers and their executors."""
    return cluster.list("v1", "Pod", ref.namespace, f"{desired.APP_LABEL}={ref.name}")


def placements(pods: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Each Pod's name and the Node it is on ("" before it is scheduled)."""
    return [(p["metadata"]["name"], (p.get("spec") or {}).get("nodeName") or "") for p in pods]


def world(
    cluster: cluster_.Cluster,
    ref: desired.AppRef,
    pods: Mapping[int, dict[str, Any]],
    everything: Sequence[dict[str, Any]],
    *,
    gone: set[str],
    now: str,
) -> World:
    """The driver ``pods`` and the app's Pods (``everything``) read before, less those ``gone``
    (force-deleted: gone at once), and the Lease read now."""
    drivers = {slot: pod for slot, pod in pods.items() if pod["metadata"]["name"] not in gone}
    executor_pods = [
        p
        for p in everything
        if (p["metadata"].get("labels") or {}).get("spark-role") == "executor"
        and p["metadata"]["name"] not in gone
    ]
    lease = cluster.get("coordination.k8s.io/v1", "Lease", ref.namespace, desired.lease_name(ref.name))
    seen = {
        slot: driver(pod, lease=lease, executor_pods=executor_pods, now=now) for slot, pod in drivers.items()
    }
    return World(drivers, executor_pods, lease, seen)
