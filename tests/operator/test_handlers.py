"""The handlers write each reconciliation's status before the next reconciliation of the app can
start: it decides from that status (the autoscaler's count and recommendations, a given-up
revision), so a write left to kopf after the lock is released lets a concurrent trigger decide
again from the status before it."""

from __future__ import annotations

import threading
import time
import typing
from collections.abc import Mapping
from typing import Any

import kopf
from conftest import REF, FakeCluster, FakeProbe

from streamapp.operator import desired, handlers, models
from streamapp.runtime import lease


class _LockWatchingCluster(FakeCluster):
    """Records whether the app's lock was held at each status write."""

    def __init__(self) -> None:
        super().__init__()
        self.context: handlers.Context | None = None
        self.locked_at_write: list[bool] = []

    def patch_status(
        self, api_version: str, kind: str, namespace: str, name: str, status: Mapping[str, Any]
    ) -> None:
        assert self.context is not None
        self.locked_at_write.append(self.context.lock(f"{namespace}/{name}").locked())
        super().patch_status(api_version, kind, namespace, name, status)


def _app(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{models.GROUP}/{models.VERSION}",
        "kind": models.KIND,
        "metadata": {"name": REF.name, "namespace": REF.namespace, "uid": REF.uid, "generation": 1},
        "spec": spec,
    }


def test_the_status_is_written_under_the_apps_lock_and_read_back_by_the_next_reconciliation(
    spec: dict[str, Any],
) -> None:
    cluster = _LockWatchingCluster()
    context = handlers.Context(cluster=cluster, probe=FakeProbe({"text-lines": 6}), options=desired.Options())
    cluster.context = context
    body = _app(spec)
    cluster.objects[(models.KIND, REF.namespace, REF.name)] = body
    first = handlers._reconcile(context, "create", REF, body)
    assert first is not None
    stored = cluster.objects[(models.KIND, REF.namespace, REF.name)]["status"]
    assert stored == first.status and stored["executors"]["desired"] == 3
    assert cluster.locked_at_write == [True]
    # A trigger holding an older body (a Pod event's) still decides from the status just written.
    again = handlers._reconcile(context, "pod", REF, body)
    assert again is not None and again.status["targetRevision"] == first.status["targetRevision"]
    assert cluster.locked_at_write == [True]  # nothing changed: nothing written


def test_a_driver_announcing_standby_reconciles_its_app_once_per_driver(monkeypatch: Any) -> None:
    reconciled: list[tuple[str, str, str]] = []
    monkeypatch.setattr(
        handlers,
        "_reconcile_named",
        lambda _context, trigger, ns, name: reconciled.append((trigger, ns, name)),
    )
    memo = kopf.Memo()
    memo.context = handlers.Context(cluster=FakeCluster(), probe=FakeProbe(), options=desired.Options())

    def lease_event(standby: str) -> None:
        raw = {
            "metadata": {
                "name": "wordcount-driver",
                "namespace": "apps",
                "labels": {desired.APP_LABEL: "wordcount"},
                "annotations": {lease.STANDBY_ANNOTATION: standby},
            }
        }
        handlers.on_lease_event(body=kopf.Body(typing.cast(kopf.RawBody, raw)), memo=memo)

    lease_event("wordcount-driver-b/1")
    lease_event("wordcount-driver-b/1")  # the running driver renewed the Lease: no news
    lease_event("wordcount-driver/2")  # the next upgrade's driver
    assert reconciled == [("lease", "apps", "wordcount")] * 2


def _pod(phase: str, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "wordcount-exec-1", "namespace": "apps", "uid": "u1",
                     "labels": {desired.APP_LABEL: "wordcount"}, **meta},
        "spec": {"nodeName": "agent-0"},
        "status": {"phase": phase, "conditions": [
            {"type": "Ready", "status": "True", "lastProbeTime": meta.get("resourceVersion")},
        ]},
    }  # fmt: skip


def test_a_pod_change_no_reconciliation_reads_starts_none(monkeypatch: Any) -> None:
    reconciled: list[str] = []
    monkeypatch.setattr(handlers, "_reconcile_named", lambda _c, trigger, _ns, _n: reconciled.append(trigger))
    memo = kopf.Memo()
    memo.context = handlers.Context(cluster=FakeCluster(), probe=FakeProbe(), options=desired.Options())

    def event(kind: str | None, pod: dict[str, Any]) -> int:
        handlers.on_pod_event(type=kind, body=kopf.Body(typing.cast(kopf.RawBody, pod)), memo=memo)
        return len(reconciled)

    assert event(None, _pod("Pending", resourceVersion="1")) == 1
    assert event("MODIFIED", _pod("Running", resourceVersion="2")) == 2
    # A probe's time, a new resourceVersion, an annotation: nothing a reconciliation reads.
    assert event("MODIFIED", _pod("Running", resourceVersion="3", annotations={"a": "b"})) == 2
    assert event("MODIFIED", _pod("Running", resourceVersion="4", deletionTimestamp="now")) == 3
    assert event("DELETED", _pod("Running", resourceVersion="4", deletionTimestamp="now")) == 4
    assert event("ADDED", _pod("Running", resourceVersion="5")) == 5  # the same name again


def test_events_arriving_while_a_reconciliation_waits_for_the_app_are_coalesced_into_it(
    spec: dict[str, Any], monkeypatch: Any
) -> None:
    cluster = FakeCluster()
    context = handlers.Context(cluster=cluster, probe=FakeProbe({"text-lines": 6}), options=desired.Options())
    cluster.objects[(models.KIND, REF.namespace, REF.name)] = _app(spec)
    monkeypatch.setattr(handlers.kopf, "event", lambda *_a, **_k: None)
    calls: list[str] = []
    real = handlers.reconcile.reconcile
    monkeypatch.setattr(handlers.reconcile, "reconcile", lambda **kw: calls.append("r") or real(**kw))
    key = f"{REF.namespace}/{REF.name}"
    with context.lock(key):  # a reconciliation of the app runs
        waiting = threading.Thread(
            target=handlers._reconcile_named, args=(context, "pod", REF.namespace, REF.name)
        )
        waiting.start()
        while key not in context.pending:
            time.sleep(0.01)
        for trigger in ("pod", "lease", "node"):  # each returns at once: the waiting one will see them
            handlers._reconcile_named(context, trigger, REF.namespace, REF.name)
        assert calls == []
    waiting.join(timeout=30)
    assert calls == ["r"] and key not in context.pending
    handlers._reconcile_named(context, "pod", REF.namespace, REF.name)  # a new event after it: its own
    assert calls == ["r", "r"]
