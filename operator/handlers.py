"""The kopf handlers: thin adapters from kopf's causes to :func:`reconcile.reconcile`.

Each handler builds the app's identity, runs one reconciliation and writes the status (under the app's
lock), posts the events, records metrics, and maps the operator's errors to kopf's:
``InvalidSpecError`` → ``kopf.PermanentError`` (not retried until the spec changes),
``RetryableError`` → ``kopf.TemporaryError(delay=…)``. Importing this module registers the handlers
with kopf's default registry (``python -m streamapp.operator`` does).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import threading
import typing
from collections.abc import Mapping
from typing import Any

import kopf

from streamapp.operator import cluster, desired, errors, kafka_probe, metrics, models, reconcile, status
from streamapp.runtime import lease

log = logging.getLogger(__name__)

__all__ = ["Context", "configure"]

_RESOURCE = (models.GROUP, models.VERSION, models.PLURAL)
#: How often partition counts and the driver are re-checked, in seconds.
TIMER_INTERVAL = float(os.environ.get("STREAMAPP_RECONCILE_INTERVAL", "30"))


@dataclasses.dataclass
class Context:
    """What every handler shares: the API server, the Kafka probe, defaults, phases for the gauge."""

    cluster: cluster.Cluster
    probe: kafka_probe.Probe
    options: desired.Options
    phases: dict[str, str] = dataclasses.field(default_factory=dict)
    #: One reconciliation per app at a time: the app's own handlers and its pods' events run in
    #: kopf's thread pool, and two at once could both decide to replace the driver.
    locks: dict[str, threading.Lock] = dataclasses.field(default_factory=dict)
    _locks_lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    #: Nodes (name/uid) whose loss every app was already reconciled for.
    lost_nodes: set[str] = dataclasses.field(default_factory=set)
    #: The standby driver each app's Lease names, as last acted on (Lease key → identity).
    standby: dict[str, str] = dataclasses.field(default_factory=dict)
    #: What a reconciliation can see of each Pod of an app (:func:`pod_gist`), as last acted on.
    pods: dict[str, tuple[Any, ...]] = dataclasses.field(default_factory=dict)
    #: Apps with an event-triggered reconciliation waiting for the app's lock: it has not read the
    #: cluster yet, so it will see whatever a later event says, which need not queue another.
    pending: set[str] = dataclasses.field(default_factory=set)

    def lock(self, app: str) -> threading.Lock:
        with self._locks_lock:
            return self.locks.setdefault(app, threading.Lock())

    def wait_for(self, app: str) -> bool:
        """Mark ``app`` as having a reconciliation waiting to start; False when one already is."""
        with self._locks_lock:
            if app in self.pending:
                return False
            self.pending.add(app)
            return True

    def started(self, app: str) -> None:
        """``app``'s waiting reconciliation started reading the cluster (or was dropped)."""
        with self._locks_lock:
            self.pending.discard(app)


def _load_kube_config() -> None:
    from kubernetes import config  # noqa: PLC0415

    loader: Any = config  # untyped library
    try:
        loader.load_incluster_config()
    except config.ConfigException:
        loader.load_kube_config()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Persist kopf's bookkeeping under our own names and connect to the cluster and to Kafka."""
    settings.persistence.finalizer = f"{models.GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=models.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=models.GROUP, key="last-handled-configuration"
    )
    # Our own events say what happened; kopf's per-log-line events would drown them.
    settings.posting.level = logging.WARNING
    # Handlers are synchronous and wait on the API server and Kafka: enough threads that apps
    # waiting on a slow broker never hold up another app's creation (asyncio's default is 6 here).
    settings.execution.max_workers = 32
    # Watches are re-opened every few minutes: a stream that went quiet (an API server restarting,
    # a watch cache re-initialising) cannot hide new objects for longer than that.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60
    if getattr(memo, "context", None) is None:
        _load_kube_config()
        memo.context = Context(
            cluster=cluster.KubeCluster(),
            probe=kafka_probe.AdminProbe(),
            options=desired.Options(
                runtime_image=os.environ.get("STREAMAPP_RUNTIME_IMAGE", desired.Options.runtime_image),
                image_pull_policy=os.environ.get("STREAMAPP_IMAGE_PULL_POLICY") or None,
            ),
        )


def _now() -> str:
    return status.format_time(datetime.datetime.now(datetime.UTC))


def _ref(body: kopf.Body) -> desired.AppRef:
    return desired.AppRef(
        name=str(body.metadata.name), namespace=str(body.metadata.namespace), uid=str(body.metadata.uid)
    )


def _error_kind(exc: BaseException) -> str:
    if isinstance(exc, errors.InvalidSpecError):
        return "invalid_spec"
    if isinstance(exc, errors.KafkaProbeError):
        return "kafka"
    if isinstance(exc, errors.DriverStopping):
        return "driver_stopping"
    if isinstance(exc, errors.DriverBackOff):
        return "driver_backoff"
    if isinstance(exc, errors.ClusterError):
        return "cluster"
    return "other"


def _reconcile(
    context: Context, trigger: str, ref: desired.AppRef, body: Mapping[str, Any]
) -> reconcile.Outcome | None:
    """One reconciliation of the app in ``body``, counted and timed; None when it raised."""
    key = f"{ref.namespace}/{ref.name}"
    with context.lock(key), metrics.DURATION.labels(trigger=trigger).time():
        context.started(key)  # from here on, a new event needs a reconciliation of its own
        metrics.RECONCILES.labels(trigger=trigger).inc()
        # The status as it is now, not as this event's body saw it: another trigger (a Pod event,
        # the timer) may have reconciled and written it meanwhile — a rolling upgrade given up
        # there must not be started again here from a stale status.
        fresh = context.cluster.get(f"{models.GROUP}/{models.VERSION}", models.KIND, ref.namespace, ref.name)
        previous = dict(((fresh or body).get("status")) or {})
        outcome = reconcile.reconcile(
            ref=ref,
            spec=dict(body.get("spec") or {}),
            generation=(body.get("metadata") or {}).get("generation"),
            previous=previous,
            cluster=context.cluster,
            probe=context.probe,
            now=_now(),
            options=context.options,
        )
        # Written here, under the lock, not through kopf's patch (applied after the handler
        # returns): the next reconciliation must read this status, or it decides again from the
        # one before — an autoscaler's 4 → 3 was undone that way by a Pod event's reconciliation.
        if outcome.status != {k: previous.get(k) for k in outcome.status}:
            context.cluster.patch_status(
                f"{models.GROUP}/{models.VERSION}", models.KIND, ref.namespace, ref.name, outcome.status
            )
            _log_transition(ref, trigger, previous, outcome.status)
    context.phases[f"{ref.namespace}/{ref.name}"] = outcome.status["phase"]
    metrics.set_phases(context.phases)
    if outcome.error is not None:
        metrics.ERRORS.labels(trigger=trigger, kind=_error_kind(outcome.error)).inc()
    return outcome


def _log_transition(
    ref: desired.AppRef, trigger: str, previous: Mapping[str, Any], new: Mapping[str, Any]
) -> None:
    """One log line when the phase, a condition or the failure count changes: what the operator
    decided and from what, for whoever reads its log after the fact."""

    def summary(found: Mapping[str, Any]) -> tuple[Any, ...]:
        conditions = tuple(
            (c.get("type"), c.get("status"), c.get("reason")) for c in found.get("conditions") or []
        )
        return found.get("phase"), found.get("driverFailures"), conditions

    if summary(previous) == summary(new):
        return
    conditions = ", ".join(f"{c['type']}={c['status']}({c['reason']})" for c in new.get("conditions") or [])
    log.info(
        "%s/%s status (%s): phase %s → %s, driverFailures %s → %s, %s; %s",
        ref.namespace, ref.name, trigger, previous.get("phase"), new.get("phase"),
        previous.get("driverFailures"), new.get("driverFailures"), conditions, new.get("message"),
    )  # fmt: skip


def _run(trigger: str, body: kopf.Body, memo: kopf.Memo, *, raise_errors: bool) -> None:
    context: Context = memo.context
    try:
        outcome = _reconcile(context, trigger, _ref(body), body)
    except errors.OperatorError as exc:
        metrics.ERRORS.labels(trigger=trigger, kind=_error_kind(exc)).inc()
        if raise_errors:
            raise _to_kopf(exc) from exc
        return
    assert outcome is not None
    for event in outcome.events:
        kopf.event(body, type=event.type, reason=event.reason, message=event_message(event.message))
    if outcome.error is not None and raise_errors:
        raise _to_kopf(outcome.error) from outcome.error


def _to_kopf(exc: errors.OperatorError) -> Exception:
    if isinstance(exc, errors.RetryableError):
        return kopf.TemporaryError(str(exc), delay=exc.delay)
    return kopf.PermanentError(str(exc))


@kopf.on.create(*_RESOURCE)
def on_create(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _run("create", body, memo, raise_errors=True)


@kopf.on.update(*_RESOURCE, field="spec")
def on_update(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _run("update", body, memo, raise_errors=True)


@kopf.on.resume(*_RESOURCE)
def on_resume(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _run("resume", body, memo, raise_errors=True)


@kopf.timer(*_RESOURCE, interval=TIMER_INTERVAL, initial_delay=TIMER_INTERVAL, idle=5)
def on_timer(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Re-read partitions and the driver: a rescale, a failed driver or a lost Pod is repaired here."""
    _run("timer", body, memo, raise_errors=False)


def pod_gist(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a reconciliation reads of a driver or executor Pod: a change elsewhere in it (a probe's
    time, a status heartbeat, managed fields, an annotation) cannot change any decision or status."""
    meta, spec, found = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    conditions = tuple(
        (c.get("type"), c.get("status"), c.get("reason")) for c in found.get("conditions") or []
        if c.get("type") in ("Ready", "PodScheduled")
    )  # fmt: skip

    def state(container: Mapping[str, Any]) -> tuple[Any, ...]:
        states = container.get("state") or {}  # one of running, waiting, terminated
        kind = next(iter(states), None)
        detail = states.get(kind) or {}
        return kind, detail.get("reason"), detail.get("exitCode"), container.get("restartCount")

    return (
        meta.get("uid"),
        bool(meta.get("deletionTimestamp")),
        tuple(sorted((meta.get("labels") or {}).items())),
        spec.get("nodeName"),
        found.get("phase"),
        found.get("reason"),
        conditions,
        tuple(state(c) for c in found.get("containerStatuses") or []),
    )


@kopf.on.event("v1", "pods", labels={desired.APP_LABEL: kopf.PRESENT})
def on_pod_event(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """A driver or executor Pod changed (scheduled, ready, ended, gone): update its app's status now
    instead of at the next timer tick, and replace a driver that ended. Only changes that a
    reconciliation can see count (:func:`pod_gist`)."""
    context: Context = memo.context
    key = f"{body.metadata.namespace}/{body.metadata.name}"
    if type == "DELETED":
        context.pods.pop(key, None)
    else:
        gist = pod_gist(body)
        if context.pods.get(key) == gist:
            metrics.SKIPPED.labels(trigger="pod").inc()
            return
        context.pods[key] = gist
    _reconcile_named(
        context, "pod", str(body.metadata.namespace), str(body.metadata.labels[desired.APP_LABEL])
    )


@kopf.on.event("v1", "nodes")
def on_node_event(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """A Node was lost (deleted, or marked not Ready by the node controller): reconcile every app
    now, which force-deletes its Pods there and replaces its driver, instead of at the next timer
    tick. Once per loss; a Node that comes back Ready can be lost again."""
    context: Context = memo.context
    key = f"{body.metadata.name}/{body.metadata.uid}"
    if type != "DELETED" and reconcile.node_lost(body) is None:
        context.lost_nodes.discard(key)
        return
    if key in context.lost_nodes:
        return
    context.lost_nodes.add(key)
    for app in sorted(context.phases):
        namespace, name = app.split("/", 1)
        _reconcile_named(context, "node", namespace, name)


@kopf.on.event(
    "coordination.k8s.io", "v1", "leases", labels={desired.APP_LABEL: kopf.PRESENT},
    annotations={lease.STANDBY_ANNOTATION: kopf.PRESENT},
)  # fmt: skip
def on_lease_event(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """A new driver says on its app's Lease that it waits in standby: hand over now, not at the
    next timer tick (30 s by default). Once per driver: the running driver renews the Lease every
    few seconds, and each renewal is an event."""
    context: Context = memo.context
    key = f"{body.metadata.namespace}/{body.metadata.name}"
    said = str(body.metadata.annotations.get(lease.STANDBY_ANNOTATION))
    if context.standby.get(key) == said:
        return
    context.standby[key] = said
    _reconcile_named(
        context, "lease", str(body.metadata.namespace), str(body.metadata.labels[desired.APP_LABEL])
    )


def _reconcile_named(context: Context, trigger: str, namespace: str, name: str) -> None:
    """Reconcile an app known by name (not by the event's body) and write its status; nothing when
    a reconciliation of the app is already waiting to start (it will see this change too)."""
    key = f"{namespace}/{name}"
    if not context.wait_for(key):
        metrics.SKIPPED.labels(trigger=trigger).inc()
        return
    try:
        app = context.cluster.get(f"{models.GROUP}/{models.VERSION}", models.KIND, namespace, name)
        if app is None or app["metadata"].get("deletionTimestamp"):
            context.started(key)
            return  # being deleted: on_delete cleans up
        ref = desired.AppRef(name=name, namespace=namespace, uid=str(app["metadata"]["uid"]))
        outcome = _reconcile(context, trigger, ref, app)
        assert outcome is not None
    except errors.OperatorError as exc:
        context.started(key)  # (already, unless reading the app failed)
        # The app's own handlers and timer retry; a pod event is only a hint to look sooner.
        metrics.ERRORS.labels(trigger=trigger, kind=_error_kind(exc)).inc()
        return
    for event in outcome.events:
        kopf.event(
            kopf.Body(typing.cast(kopf.RawBody, app)),
            type=event.type,
            reason=event.reason,
            message=event_message(event.message),
        )


@kopf.on.delete(*_RESOURCE)
def on_delete(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Stop the driver gracefully, remove what the app owns, then let kopf drop the finalizer."""
    context: Context = memo.context
    ref = _ref(body)
    metrics.RECONCILES.labels(trigger="delete").inc()
    # Under the app's lock: a reconciliation a Pod event started just before the deletion would
    # otherwise re-create the driver (and what it needs) behind the clean-up's back.
    with context.lock(f"{ref.namespace}/{ref.name}"), metrics.DURATION.labels(trigger="delete").time():
        try:
            gone = reconcile.cleanup(ref=ref, cluster=context.cluster)
        except errors.OperatorError as exc:
            metrics.ERRORS.labels(trigger="delete", kind=_error_kind(exc)).inc()
            raise _to_kopf(exc) from exc
    if not gone:
        raise kopf.TemporaryError(
            f"waiting for driver Pod {desired.driver_pod_name(ref.name)} to stop", delay=5
        )
    context.phases.pop(f"{ref.namespace}/{ref.name}", None)
    context.standby.pop(f"{ref.namespace}/{desired.lease_name(ref.name)}", None)
    metrics.set_phases(context.phases)


#: The API server refuses an Event whose message has more than 1024 bytes (kopf cuts characters).
EVENT_MESSAGE_BYTES = 1024


def event_message(text: str) -> str:
    """``text`` cut to fit an Event: at most 1024 bytes of UTF-8, its end marked with "…"."""
    data = text.encode()
    if len(data) <= EVENT_MESSAGE_BYTES:
        return text
    return data[: EVENT_MESSAGE_BYTES - len("…".encode())].decode(errors="ignore") + "…"
