"""Deleting a StreamApp: what it owns goes, its driver first, and nothing that is not its own.

kopf's delete handler calls :func:`cleanup` until it says the driver is gone: a stopping driver
still uses its Role (to delete its executors and Services) and its Lease (to release it), so those
go only after it.
"""

from __future__ import annotations

from streamapp.operator import cluster as cluster_
from streamapp.operator import desired

__all__ = ["cleanup"]


def cleanup(*, ref: desired.AppRef, cluster: cluster_.Cluster) -> bool:
    """Delete what the app owns, driver first (gracefully); True once the driver Pod is gone.

    Owner references would let the garbage collector do the rest, but deleting explicitly makes
    ``kubectl delete`` finish with nothing left even where no garbage collector runs.
    """
    name = desired.driver_pod_name(ref.name)
    drivers = [("v1", "Pod", desired.driver_pod_name(ref.name, s)) for s in desired.SLOTS]
    _delete_owned(cluster, ref, drivers)
    # What a stopping driver still uses (its Role, to delete its executors and Services; its Lease,
    # to release) goes only once the driver Pods are gone.
    if any(cluster.get("v1", "Pod", ref.namespace, pod) for _, _, pod in drivers):
        return False
    _delete_owned(cluster, ref, [
        ("v1", "Service", name),
        ("v1", "ConfigMap", f"{ref.name}-app"),
        ("v1", "ConfigMap", desired.stable_name(ref.name)),
        ("rbac.authorization.k8s.io/v1", "RoleBinding", name),
        ("rbac.authorization.k8s.io/v1", "Role", name),
        ("v1", "ServiceAccount", name),
        ("coordination.k8s.io/v1", "Lease", desired.lease_name(ref.name)),
    ])  # fmt: skip
    # Spark keeps its executor Pods that ended (deleteOnTermination is off); the garbage collector
    # removes them with their driver Pod, and so does this, where none runs.
    selector = desired.executor_selector(ref.name)
    for pod in cluster.list("v1", "Pod", ref.namespace, selector):
        cluster.delete("v1", "Pod", ref.namespace, pod["metadata"]["name"])
    return True


def _delete_owned(
    cluster: cluster_.Cluster, ref: desired.AppRef, objects: list[tuple[str, str, str]]
) -> None:
    for api_version, kind, obj in objects:
        found = cluster.get(api_version, kind, ref.namespace, obj)
        owners = ((found or {}).get("metadata") or {}).get("ownerReferences") or []
        if any(owner.get("uid") == ref.uid for owner in owners):  # never someone else's object
            grace = desired.GRACE_SECONDS if kind == "Pod" else None
            cluster.delete(api_version, kind, ref.namespace, obj, grace_seconds=grace)
