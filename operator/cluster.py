"""The operator's only door to the API server besides kopf itself: apply, read, delete.

Objects are applied with server-side apply under one field manager, so a second apply of the same
object is a no-op and fields other controllers own (Spark's executor labels, defaults the API
server fills in) are left alone: create-or-patch without a diff of our own. Pods are the exception
— most of a Pod's spec is immutable — so the reconciler creates the driver Pod once per revision
and replaces it instead of patching it. Failures become :mod:`errors` the handlers map to kopf.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from streamapp.operator import errors

__all__ = ["FIELD_MANAGER", "Cluster", "KubeCluster"]

FIELD_MANAGER = "streamapp-operator"


class Cluster(Protocol):
    """What the reconciler needs from Kubernetes (tests pass an in-memory fake)."""

    def apply(self, obj: Mapping[str, Any]) -> None: ...

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    def list(self, api_version: str, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]: ...

    def delete(
        self, api_version: str, kind: str, namespace: str, name: str, *, grace_seconds: int | None = None
    ) -> bool: ...

    def patch_status(
        self, api_version: str, kind: str, namespace: str, name: str, status: Mapping[str, Any]
    ) -> None: ...


@contextmanager
def _translated(what: str) -> Iterator[None]:
    import urllib3  # noqa: PLC0415 - heavy; only the live cluster needs these
    from kubernetes.dynamic import exceptions  # noqa: PLC0415

    try:
        yield
    except exceptions.DynamicApiError as exc:
        status = getattr(exc, "status", None)
        delay = 5.0 if status in (409, 429) else 15.0
        summary = exc.summary()  # type: ignore[no-untyped-call]
        raise errors.ClusterError(f"{what}: HTTP {status} {summary}", delay=delay) from exc
    except (OSError, urllib3.exceptions.HTTPError) as exc:
        raise errors.ClusterError(f"{what}: {exc}", delay=15.0) from exc


class KubeCluster:
    """The real API server, through the kubernetes client's dynamic API (discovery is cached)."""

    #: (connect, read) seconds of every request: a call that hangs must not hold a handler forever.
    TIMEOUT = (5.0, 30.0)

    def __init__(self, api_client: Any = None) -> None:
        from kubernetes import client, dynamic  # noqa: PLC0415

        # The client is untyped: one Any at the boundary instead of ignores on every call.
        self._dynamic: Any = dynamic.DynamicClient(api_client or client.ApiClient())  # type: ignore[no-untyped-call]
        # kopf runs handlers in many threads; the dynamic client's discovery cache is not made for
        # that, so discovery happens under a lock, once per kind. Requests themselves run
        # concurrently (urllib3's pool is thread-safe): holding the lock across each round trip
        # made every app's reconciliation queue behind every other app's.
        self._lock = threading.Lock()
        self._resources: dict[tuple[str, str], Any] = {}

    def _resource(self, api_version: str, kind: str) -> Any:
        with self._lock:
            found = self._resources.get((api_version, kind))
            if found is None:
                found = self._dynamic.resources.get(api_version=api_version, kind=kind)
                self._resources[(api_version, kind)] = found
            return found

    def apply(self, obj: Mapping[str, Any]) -> None:
        meta = obj["metadata"]
        with _translated(f"apply {obj['kind']} {meta['namespace']}/{meta['name']}"):
            self._dynamic.server_side_apply(
                self._resource(obj["apiVersion"], obj["kind"]),
                body=dict(obj),
                namespace=meta["namespace"],
                field_manager=FIELD_MANAGER,
                force_conflicts=True,
                _request_timeout=self.TIMEOUT,
            )

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes.dynamic import exceptions  # noqa: PLC0415

        with _translated(f"read {kind} {namespace}/{name}"):
            try:
                found = self._dynamic.get(
                    self._resource(api_version, kind),
                    name=name,
                    namespace=namespace,
                    _request_timeout=self.TIMEOUT,
                )
            except exceptions.NotFoundError:
                return None
            return found.to_dict()  # type: ignore[no-any-return]

    def list(self, api_version: str, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        with _translated(f"list {kind} in {namespace} ({selector})"):
            found = self._dynamic.get(
                self._resource(api_version, kind),
                namespace=namespace,
                label_selector=selector,
                _request_timeout=self.TIMEOUT,
            )
            return [item.to_dict() for item in found.items]

    def delete(
        self, api_version: str, kind: str, namespace: str, name: str, *, grace_seconds: int | None = None
    ) -> bool:
        """Delete (in the background, with the given grace period); False when it was already gone."""
        from kubernetes.dynamic import exceptions  # noqa: PLC0415

        with _translated(f"delete {kind} {namespace}/{name}"):
            try:
                self._dynamic.delete(
                    self._resource(api_version, kind),
                    name=name,
                    namespace=namespace,
                    grace_period_seconds=grace_seconds,
                    propagation_policy="Background",
                    _request_timeout=self.TIMEOUT,
                )
            except exceptions.NotFoundError:
                return False
            return True

    def patch_status(
        self, api_version: str, kind: str, namespace: str, name: str, status: Mapping[str, Any]
    ) -> None:
        """Merge-patch the status subresource (the object's own handlers write it through kopf)."""
        with _translated(f"patch status of {kind} {namespace}/{name}"):
            self._dynamic.patch(
                self._resource(api_version, kind).subresources["status"],
                body={"status": dict(status)},
                name=name,
                namespace=namespace,
                content_type="application/merge-patch+json",
                _request_timeout=self.TIMEOUT,
            )
