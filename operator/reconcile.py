"""One reconciliation: validate, size, render, apply, observe, and say what the status is now.

Every kopf trigger (create, update, resume, the timer) runs the same level-triggered function, so
a missed event is repaired on the next tick. Decisions are pure functions (:func:`driver_action`,
:func:`observe_driver`, :mod:`scaling`, :mod:`desired`, :mod:`status`); this module sequences them
over a :class:`cluster.Cluster` and a :class:`kafka_probe.Probe`, which tests replace with fakes.

The driver Pod is never patched: one revision, one Pod. A new revision (spec change, rescale,
reset) deletes the old Pod and creates the new one only after the old one is gone, so two drivers
never write one checkpoint. An invalid spec touches nothing that runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from streamapp.operator import cluster as cluster_
from streamapp.operator import desired, errors, kafka_auth, kafka_probe, scaling, status, validation
from streamapp.runtime import errors as runtime_errors
from streamapp.runtime import lease as lease_mod
from streamapp.runtime import manifest
from streamapp.runtime.expressions import check
from streamapp.runtime.manifest import deployment, models
from streamapp.runtime.topology import state

__all__ = ["Event", "Outcome", "cleanup", "driver_action", "observe_driver", "reconcile"]

Action = Literal["create", "delete", "keep", "wait"]


@dataclasses.dataclass(frozen=True)
class Event:
    """A Kubernetes Event to post on the StreamApp."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclasses.dataclass
class Outcome:
    """The status to write, the events to post, and the error to raise after writing them."""

    status: dict[str, Any]
    events: list[Event] = dataclasses.field(default_factory=list)
    error: errors.OperatorError | None = None


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


def driver_action(*, wanted: desired.Desired, seen: status.DriverObservation | None) -> Action:
    """Create, delete (to replace or to suspend), keep, or wait for a terminating driver to go."""
    if seen is not None and seen.terminating:
        return "wait"
    if wanted.driver is None:
        return "delete" if seen is not None else "keep"
    if seen is None:
        return "create"
    if seen.revision != wanted.revision or seen.phase in ("Failed", "Succeeded"):
        return "delete"
    if None not in (wanted.credentials, seen.credentials) and wanted.credentials != seen.credentials:
        return "delete"  # a rotated Secret: the driver's environment holds the old credentials
    return "keep"


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


def _evict_from_lost_nodes(cluster: cluster_.Cluster, ref: desired.AppRef, events: list[Event]) -> None:
    """Force-delete the app's Pods (driver and executors) on lost Nodes, as a StatefulSet's user
    would by hand: the driver is then replaced from the checkpoint at once, and Spark replaces the
    executors, instead of waiting for the taint-based eviction (5 minutes by default) and then for a
    kubelet that never confirms. A driver on a Node that is only cut off could still run: its
    output is fenced by the transactional producer ids under exactly_once_v2."""
    pods = cluster.list("v1", "Pod", ref.namespace, f"{desired.APP_LABEL}={ref.name}")
    verdicts: dict[str, str | None] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            continue
        if node not in verdicts:
            verdicts[node] = node_lost(cluster.get("v1", "Node", "", node))
        why = verdicts[node]
        if why is None:
            continue
        name = pod["metadata"]["name"]
        cluster.delete("v1", "Pod", ref.namespace, name, grace_seconds=0)
        events.append(
            Event(
                "Warning", "NodeLost", f"Pod {name} was on Node {node}, which {why}: deleted it to replace it"
            )
        )


def _executors(
    cluster: cluster_.Cluster, ref: desired.AppRef, driver_uid: str | None
) -> tuple[int, list[str]]:
    """Executor Pods that run and pass their readiness (a terminating one no longer counts), and
    how the current driver's executors that failed ended (Spark keeps them: deleteOnTermination
    is off, so their exit codes and logs stay readable until the driver Pod goes)."""
    pods = cluster.list("v1", "Pod", ref.namespace, f"{desired.APP_LABEL}={ref.name},spark-role=executor")
    ready, failed = 0, []
    for pod in pods:
        seen = observe_driver(pod)
        assert seen is not None
        if seen.phase == "Running" and seen.ready and not seen.terminating:
            ready += 1
        owners = {o.get("uid") for o in (pod.get("metadata") or {}).get("ownerReferences") or []}
        if seen.phase == "Failed" and (driver_uid is None or driver_uid in owners):
            how = (seen.message or "ended (Failed)").replace("driver container", "container")
            failed.append(f"executor Pod {seen.name}: {how}")
    return ready, sorted(failed)


def _unschedulable(
    cluster: cluster_.Cluster, ref: desired.AppRef, driver: Mapping[str, Any] | None
) -> str | None:
    """Why ``driver`` or one of its executors waits for a Node (the scheduler's message), if one does."""
    if driver is None:
        return None
    uid = (driver.get("metadata") or {}).get("uid")
    executors = [
        pod
        for pod in cluster.list(
            "v1", "Pod", ref.namespace, f"{desired.APP_LABEL}={ref.name},spark-role=executor"
        )
        if uid in {o.get("uid") for o in (pod.get("metadata") or {}).get("ownerReferences") or []}
    ]
    for pod in [driver, *executors]:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                name = (pod.get("metadata") or {}).get("name")
                return f"Pod {name} cannot be scheduled: {cond.get('message') or 'no Node fits it'}"
    return None


def _kafka_config(
    app: models.StreamApp, ref: desired.AppRef, cluster: cluster_.Cluster, events: list[Event]
) -> dict[str, str] | None:
    """The app's Kafka credentials for the operator's own probes; None (and a warning) when a
    Secret it names is missing or unusable: the probes are skipped, the last values kept."""
    try:
        return kafka_auth.client_config(app.spec.kafka, namespace=ref.namespace, cluster=cluster)
    except errors.KafkaSecretError as exc:
        events.append(Event("Warning", "KafkaCredentials", str(exc)))
        return None


def _partitions(
    app: models.StreamApp,
    probe: kafka_probe.Probe,
    previous: Mapping[str, Any],
    events: list[Event],
    config: Mapping[str, str] | None,
) -> int | None:
    known = previous.get("inputPartitions")
    if config is None:
        return int(known) if known is not None else None
    topics = manifest.build_topology(app).source_topics()
    bootstrap = app.spec.kafka.bootstrap_servers if app.spec.kafka else None
    try:
        return scaling.total_partitions(probe.partitions(bootstrap or "", topics, config=config))
    except errors.KafkaProbeError as exc:
        # Keep running on the last count: a Kafka outage is no reason to restart drivers.
        events.append(Event("Warning", "KafkaUnreachable", str(exc)))
        return int(known) if known is not None else None


def _standing(
    app: models.StreamApp,
    ref: desired.AppRef,
    probe: kafka_probe.Probe,
    events: list[Event],
    config: Mapping[str, str] | None,
) -> kafka_probe.Standing | None:
    """The driver's last committed progress; None (the status keeps its last values) when unknown."""
    # One warning per reconciliation: when the partitions could not be read, neither can this.
    if config is None or any(e.reason == "KafkaUnreachable" for e in events):
        return None
    topics = manifest.build_topology(app).source_topics()
    bootstrap = app.spec.kafka.bootstrap_servers if app.spec.kafka else None
    try:
        return probe.standing(bootstrap or "", desired.progress_group(ref), topics, config=config)
    except errors.KafkaProbeError as exc:
        events.append(Event("Warning", "KafkaUnreachable", str(exc)))
        return None


#: A driver that ran this long before it failed resets the back-off, as the kubelet's does.
BACKOFF_RESET_SECONDS = 600
BACKOFF_MAX_SECONDS = 300


def backoff_seconds(failures: int) -> float:
    """Wait before replacing a driver that failed after ``failures`` failed ones in a row: the
    first is replaced at once, then 10 s, 20 s, 40 s … up to 5 minutes (CrashLoopBackOff's curve).
    A function that cannot be imported would otherwise restart the driver every second."""
    return 0.0 if failures <= 0 else float(min(10 * 2 ** (failures - 1), BACKOFF_MAX_SECONDS))


def _ran_long(seen: status.DriverObservation) -> bool:
    started, finished = status.parse_time(seen.started), status.parse_time(seen.finished)
    if started is None or finished is None:
        return False
    return (finished - started).total_seconds() >= BACKOFF_RESET_SECONDS


def _backoff_left(failures: int, seen: status.DriverObservation, now: str) -> float:
    """What is left of the back-off. ``now`` is taken when the reconciliation starts, and the Pod
    read after it may have ended since (its finish time later than ``now``): that counts as having
    just ended, so the first failure is still replaced at once and a later one waits its whole
    back-off, not a second more."""
    finished, clock = status.parse_time(seen.finished), status.parse_time(now)
    if finished is None or clock is None:
        return 0.0
    return max(0.0, backoff_seconds(failures) - max(0.0, (clock - finished).total_seconds()))


def _replace_reason(
    previous: Mapping[str, Any], seen: status.DriverObservation, executors: int, wanted: desired.Desired
) -> str:
    if seen.phase in ("Failed", "Succeeded"):
        return seen.message or f"driver Pod {seen.name} ended ({seen.phase})"
    if seen.revision == wanted.revision and seen.credentials != wanted.credentials:
        return "the Kafka credentials in its Secrets changed"
    before = (previous.get("executors") or {}).get("desired")
    if before is not None and before != executors:
        return f"rescaling from {before} to {executors} executors"
    return f"revision {seen.revision} → new revision"


def reconcile(
    *,
    ref: desired.AppRef,
    spec: Mapping[str, Any],
    generation: int | None,
    previous: Mapping[str, Any] | None,
    cluster: cluster_.Cluster,
    probe: kafka_probe.Probe,
    now: str,
    options: desired.Options | None = None,
) -> Outcome:
    """Bring the cluster one step closer to ``spec`` and report where it stands.

    Function references in the spec are checked for form only: they live in the app's runtime
    image, not the operator's, and importing them would run a user's code in the operator.
    """
    with check.functions_by_form_only():
        return _reconcile(
            ref=ref,
            spec=spec,
            generation=generation,
            previous=previous,
            cluster=cluster,
            probe=probe,
            now=now,
            options=options,
        )


def _reconcile(
    *,
    ref: desired.AppRef,
    spec: Mapping[str, Any],
    generation: int | None,
    previous: Mapping[str, Any] | None,
    cluster: cluster_.Cluster,
    probe: kafka_probe.Probe,
    now: str,
    options: desired.Options | None = None,
) -> Outcome:
    previous = previous or {}
    pod_name = desired.driver_pod_name(ref.name)
    found = validation.problems(name=ref.name, namespace=ref.namespace, spec=spec)
    if found:
        return _refuse(
            ref, found, "InvalidSpec", generation=generation, previous=previous, cluster=cluster, now=now
        )

    app = models.StreamApp.model_validate(
        validation.to_manifest(name=ref.name, namespace=ref.namespace, spec=spec)
    )
    held = _state(app, previous.get("state"))
    if incompatible := _incompatible(previous.get("state"), held):
        return _refuse(
            ref, incompatible, "IncompatibleState", generation=generation, previous=previous, cluster=cluster,
            now=now,
        )  # fmt: skip
    plan = app.spec.deployment or deployment.Deployment()
    events: list[Event] = []
    config = _kafka_config(app, ref, cluster, events)
    partitions = _partitions(app, probe, previous, events, config)
    standing = _standing(app, ref, probe, events, config)
    executors, autoscaled = _size(plan, partitions, standing, previous, cluster, ref, now, events)
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16] if config else None
    wanted = desired.render(ref=ref, app=app, executors=executors, options=options, credentials=digest)
    stable = _stable(cluster, ref) if plan.upgrade_policy == "rolling" else None
    back = None  # the stable revision's app while the spec's revision is rolled back
    if stable is not None and previous.get("failedRevision") == wanted.revision != stable[0]:
        back = _stable_app(ref, stable[1])
    if back is not None:
        app, plan = back, back.spec.deployment or deployment.Deployment()
        executors, autoscaled = _size(plan, partitions, standing, previous, cluster, ref, now, events)
        wanted = desired.render(ref=ref, app=app, executors=executors, options=options, credentials=digest)
        held = _state(app, previous.get("state"))

    for obj in wanted.support:
        cluster.apply(obj)
    _evict_from_lost_nodes(cluster, ref, events)
    pods = _driver_pods(cluster, ref)
    slot = _slot(pods, wanted.revision)
    if slot != 0:
        pod_name = desired.driver_pod_name(ref.name, slot)
        wanted = desired.render(
            ref=ref, app=app, executors=executors, options=options, credentials=digest, slot=slot
        )
    if plan.upgrade_policy == "rolling" and wanted.driver is not None:
        rolled = _roll(
            ref=ref, app=app, pods=pods, slot=slot, executors=executors, options=options, digest=digest,
            wanted=wanted, previous=previous, generation=generation, cluster=cluster, now=now,
            events=events, partitions=partitions, standing=lambda: standing,
        )  # fmt: skip
        if rolled is not None:
            rolled.status["autoscale"] = autoscaled
            if back is not None:
                _say_rolled_back(
                    rolled.status, _rollback_reason(previous) or f"rolling back to revision {wanted.revision}"
                )
                rolled.status["failedRevision"] = previous.get("failedRevision")
            return rolled
    for other, pod in pods.items():  # a driver left in the other slot (a hand-over cut short)
        stale = observe_driver(pod)
        if other != slot and stale is not None and not stale.terminating:
            _release_lease(cluster, ref, pod)
            cluster.delete("v1", "Pod", ref.namespace, stale.name, grace_seconds=desired.GRACE_SECONDS)
            events.append(
                Event("Normal", "DriverReplaced", f"stopping driver Pod {stale.name}: not the current one")
            )
    seen = observe_driver(cluster.get("v1", "Pod", ref.namespace, pod_name))
    if back is None and stable is not None and stable[0] != wanted.revision:
        why = _failed_after_hand_over(app, ref, cluster, seen, pod_name, now, lambda: standing)
        if why is not None:
            return _roll_back(
                why, stable[0], ref=ref, wanted=wanted, executors=executors, seen=seen, generation=generation,
                previous=previous, events=events, partitions=partitions, cluster=cluster, now=now,
            )  # fmt: skip
    action = driver_action(wanted=wanted, seen=seen)
    error: errors.OperatorError | None = None
    failures = int(previous.get("driverFailures") or 0)
    crashed = seen is not None and seen.phase in status.ENDED and seen.revision == wanted.revision
    if action == "delete" and wanted.driver is not None and crashed:
        assert seen is not None
        failures = 0 if _ran_long(seen) else failures
        wait = _backoff_left(failures, seen, now)
        if wait > 0:
            action = "keep"
            error = errors.DriverBackOff(
                f"driver Pod {pod_name} failed {failures + 1} times in a row; the next one starts"
                f" in {wait:.0f} s or at the next reconciliation after that"
                f" (back-off {backoff_seconds(failures):.0f} s)",
                delay=wait,
            )
        else:
            failures += 1
    if action == "create" and wanted.driver is not None:
        cluster.apply(wanted.driver)
        events.append(
            Event(
                "Normal",
                "DriverCreated",
                f"driver Pod {pod_name}: revision {wanted.revision}, {executors} executors",
            )
        )
        seen = observe_driver(cluster.get("v1", "Pod", ref.namespace, pod_name))
    elif action == "delete" and seen is not None:
        if wanted.driver is None:
            events.append(
                Event("Normal", "Suspending", f"stopping driver Pod {pod_name}; the checkpoint is kept")
            )
        else:
            why = _replace_reason(previous, seen, executors, wanted)
            events.append(Event("Normal", "DriverReplaced", f"replacing driver Pod {pod_name}: {why}"))
            error = errors.DriverStopping(f"waiting for driver Pod {pod_name} to stop", delay=5)
        ended = seen if seen.phase in ("Failed", "Succeeded") else None
        if ended is not None:
            _release_lease(cluster, ref, cluster.get("v1", "Pod", ref.namespace, pod_name))
        cluster.delete("v1", "Pod", ref.namespace, pod_name, grace_seconds=desired.GRACE_SECONDS)
        seen = observe_driver(cluster.get("v1", "Pod", ref.namespace, pod_name))
        # The API server removes an ended Pod at once: report how it ended, not that it is missing.
        seen = ended if seen is None and ended is not None else seen
    elif action == "wait" and wanted.driver is not None:
        error = errors.DriverStopping(f"waiting for driver Pod {pod_name} to stop", delay=5)

    driver_pod = cluster.get("v1", "Pod", ref.namespace, pod_name) if seen is not None else None
    running, failed = _executors(cluster, ref, ((driver_pod or {}).get("metadata") or {}).get("uid"))
    observed = status.Observation(
        driver=seen,
        executors_ready=running,
        executor_failures=tuple(failed),
        partitions=partitions,
        standing=standing,
    )
    target = status.Target(
        generation=generation, revision=wanted.revision, executors=executors, suspend=plan.suspend
    )
    new = status.compute(previous=previous, target=target, seen=observed, now=now)
    new["lastReset"] = previous.get("lastReset")
    ready: dict[str, Any] = next((c for c in new["conditions"] if c["type"] == "Ready"), {})
    new["driverFailures"] = 0 if ready.get("status") == "True" else failures
    if isinstance(error, errors.DriverBackOff):
        new["message"] = f"{new['message']}; {error}"
    if plan.reset is not None and seen is not None and seen.revision == wanted.revision:
        new["lastReset"] = plan.reset.id
    new["failedRevision"] = previous.get("failedRevision")
    runs = seen is not None and seen.revision == wanted.revision and seen.phase == "Running"
    new["state"] = held if runs else previous.get("state")
    new["autoscale"] = autoscaled
    if back is not None:
        _say_rolled_back(new, _rollback_reason(previous) or f"rolled back to revision {wanted.revision}")
    elif (
        runs
        and ready.get("status") == "True"
        and plan.upgrade_policy == "rolling"
        and (stable is None or stable[0] != wanted.revision)
        and standing is not None
        and standing.by in (None, seen.name if seen else None)  # this driver's own batch
    ):
        cluster.apply(desired.stable(ref, spec, wanted.revision))  # what a rollback returns to
    return Outcome(new, events, error)


def _size(
    plan: deployment.Deployment,
    partitions: int | None,
    standing: kafka_probe.Standing | None,
    previous: Mapping[str, Any],
    cluster: cluster_.Cluster,
    ref: desired.AppRef,
    now: str,
    events: list[Event],
) -> tuple[int, dict[str, Any] | None]:
    """The executors to run (:mod:`scaling`), and the autoscaler's status (None without autoscale)."""
    if plan.autoscale is None:
        return scaling.desired_executors(plan.executors, partitions), None
    clock = status.parse_time(now)
    assert clock is not None
    before = previous.get("autoscale") or {}
    remembered = [
        (when, int(r["executors"]))
        for r in before.get("recommendations") or []
        if (when := status.parse_time(r.get("time"))) is not None
    ]
    current = (previous.get("executors") or {}).get("desired")
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in previous.get("conditions") or []
    )
    steady = (
        ready
        and previous.get("phase") == "Running"
        and previous.get("currentRevision") == previous.get("targetRevision")
        and len(_driver_pods(cluster, ref)) == 1
    )
    sample = before.get("input") or {}
    sampled = status.parse_time(sample.get("time"))
    last = None
    if sampled is not None and isinstance(sample.get("end"), int):
        last = scaling.Arrival(sampled, sample["end"], sample.get("rate"))
    arrived = scaling.arrival(
        last,
        standing.end if standing is not None else None,
        clock,
        every=scaling.sample_seconds(plan.autoscale),
    )
    load = None
    if standing is not None and arrived is not None and arrived.rate is not None:
        load = scaling.Load(rate=arrived.rate, lag=standing.lag)
    scaled = scaling.autoscale(
        plan.executors, plan.autoscale, partitions=partitions, current=current, load=load,
        recommendations=remembered, now=clock, steady=steady,
    )  # fmt: skip
    if current is not None and scaled.executors != current:
        events.append(
            Event("Normal", "Autoscaled", f"executors {current} → {scaled.executors}: {scaled.reason}")
        )
    return scaled.executors, {
        "reason": scaled.reason,
        "recommendations": [
            {"time": status.format_time(when), "executors": n} for when, n in scaled.recommendations
        ],
        "input": None
        if arrived is None
        else {
            "time": status.format_time(arrived.time),
            "end": arrived.end,
            "rate": None if arrived.rate is None else round(arrived.rate, 2),
        },
    }


def _stable(cluster: cluster_.Cluster, ref: desired.AppRef) -> tuple[str, dict[str, Any]] | None:
    """The last revision that processed and its spec (see :func:`desired.stable`), if recorded."""
    found = cluster.get("v1", "ConfigMap", ref.namespace, desired.stable_name(ref.name))
    data = (found or {}).get("data") or {}
    try:
        return str(data["revision"]), dict(json.loads(data["spec.json"]))
    except (KeyError, ValueError, TypeError):
        return None


def _stable_app(ref: desired.AppRef, spec: Mapping[str, Any]) -> models.StreamApp | None:
    """The stable revision's app; None when it is no longer valid (the runtime changed): then
    there is nothing to return to."""
    if validation.problems(name=ref.name, namespace=ref.namespace, spec=spec):
        return None
    return models.StreamApp.model_validate(
        validation.to_manifest(name=ref.name, namespace=ref.namespace, spec=spec)
    )


def _failed_after_hand_over(
    app: models.StreamApp,
    ref: desired.AppRef,
    cluster: cluster_.Cluster,
    seen: status.DriverObservation | None,
    pod_name: str,
    now: str,
    standing: Any,
) -> str | None:
    """Why the wanted revision's driver, which took over from a stable one, failed: it ended, or
    it has run for ``progressDeadline`` without completing a micro-batch; None while it may yet."""
    if seen is None or seen.terminating:
        return None
    if seen.phase in status.ENDED:
        return seen.message or f"driver Pod {seen.name} ended ({seen.phase})"
    deadline = (app.spec.deployment or deployment.Deployment()).progress_deadline_s()
    if seen.phase != "Running" or _age_s(cluster.get("v1", "Pod", ref.namespace, pod_name), now) <= deadline:
        return None
    idle = status.not_processing(seen, standing(), now)
    if idle is None:
        return None
    return f"{idle}, {deadline:.0f} s after its start (spec.deployment.progressDeadline)"


def _roll_back(
    why: str,
    to: str,
    *,
    ref: desired.AppRef,
    wanted: desired.Desired,
    executors: int,
    seen: status.DriverObservation | None,
    generation: int | None,
    previous: Mapping[str, Any],
    events: list[Event],
    partitions: int | None,
    cluster: cluster_.Cluster,
    now: str,
) -> Outcome:
    """Give the wanted revision up after its hand-over: ``failedRevision`` makes the next
    reconciliation render the stable revision ``to``, which replaces the failed driver."""
    failed = f"revision {wanted.revision} failed after the hand-over, returning to revision {to}: {why}"
    events.append(Event("Warning", "RollbackUpgrade", failed))
    target = status.Target(generation=generation, revision=wanted.revision, executors=executors)
    observed = status.Observation(driver=seen, partitions=partitions)
    new = status.compute(previous=previous, target=target, seen=observed, now=now)
    for kept in ("lastReset", "state", "driverFailures", "autoscale"):
        new[kept] = previous.get(kept)
    new["failedRevision"] = wanted.revision
    _say_rolled_back(new, failed)
    return Outcome(new, events, errors.DriverStopping(f"rolling back to revision {to}", delay=1))


def _rollback_reason(previous: Mapping[str, Any]) -> str | None:
    """Why the spec's revision was given up, as the status said it (it stays until the spec changes)."""
    return next(
        (
            c.get("message")
            for c in previous.get("conditions") or []
            if c.get("type") == "Degraded" and c.get("reason") == "RollbackUpgrade"
        ),
        None,
    )


def _say_rolled_back(new: dict[str, Any], message: str) -> None:
    """Degraded and Progressing say why the spec's revision was given up, until the spec changes."""
    for cond in new["conditions"]:
        if cond["type"] in ("Degraded", "Progressing"):
            cond.update(
                status="True" if cond["type"] == "Degraded" else "False",
                reason="RollbackUpgrade",
                message=message,
            )
    new["message"] = message


def _state(app: models.StreamApp, recorded: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the app's checkpoint holds once its driver runs: where, and the state fingerprint.
    ``recorded`` (the running revision's, from the status) on the same checkpoint says which
    windowed aggregations stay on the Python engine that wrote their state, as the driver decides
    from its checkpoint's record."""
    topology = manifest.build_topology(app)
    checkpoint = desired.checkpoint(app.spec)
    before = None
    if recorded and recorded.get("checkpoint") == checkpoint and recorded.get("version") == state.VERSION:
        before = recorded.get("steps")
    return {
        "checkpoint": checkpoint,
        "version": state.VERSION,
        "steps": state.resumed(topology, before)[1],
    }


def _incompatible(
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


def _refuse(
    ref: desired.AppRef,
    found: list[runtime_errors.Problem],
    why: str,
    *,
    generation: int | None,
    previous: Mapping[str, Any],
    cluster: cluster_.Cluster,
    now: str,
) -> Outcome:
    """A spec that is not applied: the running driver (either slot) is left as it is, the status
    says why (Degraded ``why``), and a Warning event says it once per new message."""
    pods = _driver_pods(cluster, ref)
    seen = observe_driver(pods.get(_slot(pods, "")))
    target = status.Target(generation=generation, revision=None, executors=None, problems=found, refused=why)
    new = status.compute(previous=previous, target=target, seen=status.Observation(seen), now=now)
    for kept in ("lastReset", "failedRevision", "state", "autoscale"):
        new[kept] = previous.get(kept)
    announce: list[Event] = []
    degraded: dict[str, Any] = next((c for c in new["conditions"] if c["type"] == "Degraded"), {})
    old = [c for c in previous.get("conditions") or [] if c.get("type") == "Degraded"]
    if not old or old[0].get("message") != degraded.get("message"):
        announce.append(Event("Warning", why, degraded.get("message", "")))
    return Outcome(new, announce, errors.InvalidSpecError(found))


def _driver_pods(cluster: cluster_.Cluster, ref: desired.AppRef) -> dict[int, dict[str, Any]]:
    """The app's driver Pods by slot (two only during a rolling hand-over)."""
    found = {}
    for slot in desired.SLOTS:
        pod = cluster.get("v1", "Pod", ref.namespace, desired.driver_pod_name(ref.name, slot))
        if pod is not None:
            found[slot] = pod
    return found


def _slot(pods: Mapping[int, Mapping[str, Any]], revision: str) -> int:
    """The slot of the app's driver: the one running the wanted revision, else the one there is
    (not terminating first), else slot 0."""

    def revision_of(pod: Mapping[str, Any]) -> str | None:
        return ((pod.get("metadata") or {}).get("labels") or {}).get(desired.REVISION_LABEL)

    for slot, pod in sorted(pods.items()):
        if revision_of(pod) == revision:
            return slot
    alive = [
        slot for slot, pod in sorted(pods.items()) if not (pod.get("metadata") or {}).get("deletionTimestamp")
    ]
    return (alive or sorted(pods) or [0])[0]


def _roll(
    *,
    ref: desired.AppRef,
    app: models.StreamApp,
    pods: Mapping[int, dict[str, Any]],
    slot: int,
    executors: int,
    options: desired.Options | None,
    digest: str | None,
    wanted: desired.Desired,
    previous: Mapping[str, Any],
    generation: int | None,
    cluster: cluster_.Cluster,
    now: str,
    events: list[Event],
    partitions: int | None,
    standing: Any,
) -> Outcome | None:
    """``upgradePolicy: rolling``: the new revision's driver starts beside the running one, in the
    other slot; once it waits in standby (Spark up, plan compiled — it says so on the app's Lease)
    the running driver is stopped (SIGTERM: it stops at a micro-batch boundary and releases the
    Lease) and the new one starts its query from the same checkpoint. A new driver that fails, or
    does not reach standby within ``spec.deployment.progressDeadline`` (5 minutes), is deleted
    and the running one kept (``failedRevision``) until the spec changes. None: nothing to hand
    over (no driver running, or the wanted revision already runs alone) — the caller's usual path
    applies."""
    old_slot = next(
        (
            s
            for s, pod in pods.items()
            if observe_driver(pod).revision != wanted.revision  # type: ignore[union-attr]
        ),
        None,
    )
    if old_slot is None:
        return None
    old = observe_driver(pods[old_slot])
    assert old is not None
    new_slot = 1 - old_slot
    new_pod = pods.get(new_slot)
    new = observe_driver(new_pod)
    leftover = new is not None and new.revision != wanted.revision
    if leftover and not (new.terminating or new.phase in status.ENDED):  # type: ignore[union-attr]
        return None  # two old drivers running (a hand-over cut short): recreate, as usual
    if old.terminating:
        return None  # the hand-over's last step: the usual path waits for it to go
    if old.phase != "Running" or not old.ready:
        return None  # nothing serving to keep up: recreate
    deadline = (app.spec.deployment or deployment.Deployment()).progress_deadline_s()
    error: errors.OperatorError | None = errors.DriverStopping(
        f"rolling upgrade to revision {wanted.revision}", delay=2
    )
    failed: str | None = None
    if previous.get("failedRevision") == wanted.revision:
        error = None
        failed = _rollback_reason(previous) or (
            f"rolling upgrade to revision {wanted.revision} was given up; revision {old.revision} "
            "keeps running"
        )
    elif leftover:
        # A driver given up earlier still goes (or ended and is not deleted yet): the new one
        # starts in its slot once it is gone; the running driver keeps serving meanwhile.
        assert new is not None
        if not new.terminating:
            cluster.delete("v1", "Pod", ref.namespace, new.name, grace_seconds=desired.GRACE_SECONDS)
        error = errors.DriverStopping(
            f"rolling upgrade to revision {wanted.revision}: waiting for {new.name} (revision "
            f"{new.revision}) to go first",
            delay=2,
        )
    elif new is None:
        rendered = desired.render(
            ref=ref, app=app, executors=executors, options=options, credentials=digest, slot=new_slot
        )
        assert rendered.driver is not None
        cluster.apply(rendered.driver)
        name = rendered.driver["metadata"]["name"]
        events.append(
            Event(
                "Normal",
                "RollingUpgrade",
                f"driver Pod {name} starts revision {wanted.revision} beside {old.name}; it takes over at a "
                "micro-batch boundary once it waits in standby",
            )
        )
    elif new.phase in status.ENDED or _age_s(new_pod, now) > deadline:
        why = (
            new.message or f"driver Pod {new.name} ended ({new.phase})"
            if new.phase in status.ENDED
            else f"driver Pod {new.name} did not reach standby within {deadline:.0f} s "
            "(spec.deployment.progressDeadline)"
        )
        if waiting := _unschedulable(cluster, ref, new_pod) if new.phase not in status.ENDED else None:
            why = (
                f"{why}: {waiting} — a rolling upgrade needs room for a second driver and its "
                "executors; make room, or use upgradePolicy: recreate"
            )
        cluster.delete("v1", "Pod", ref.namespace, new.name, grace_seconds=desired.GRACE_SECONDS)
        failed = f"rolling upgrade to revision {wanted.revision} given up, {old.name} keeps running: {why}"
        events.append(Event("Warning", "RollbackUpgrade", failed))
        error = None
    elif _in_standby(cluster, ref, new_pod):
        cluster.delete("v1", "Pod", ref.namespace, old.name, grace_seconds=desired.GRACE_SECONDS)
        events.append(
            Event(
                "Normal",
                "HandingOver",
                f"driver Pod {new.name} waits in standby: stopping {old.name} at a micro-batch boundary",
            )
        )
    running, failed_executors = _executors(cluster, ref, ((pods[old_slot].get("metadata") or {}).get("uid")))
    observed = status.Observation(
        driver=old,
        executors_ready=running,
        executor_failures=tuple(failed_executors),
        partitions=partitions,
        standing=standing(),
    )
    plan = app.spec.deployment or deployment.Deployment()
    target = status.Target(
        generation=generation, revision=wanted.revision, executors=executors, suspend=plan.suspend
    )
    result = status.compute(previous=previous, target=target, seen=observed, now=now)
    result["lastReset"] = previous.get("lastReset")
    result["driverFailures"] = int(previous.get("driverFailures") or 0)
    result["failedRevision"] = wanted.revision if failed else previous.get("failedRevision")
    result["state"] = previous.get("state")  # the old revision's: its driver still runs
    if failed:
        result["phase"] = "Running"
        _say_rolled_back(result, failed)
    return Outcome(result, events, error)


def _age_s(pod: Mapping[str, Any] | None, now: str) -> float:
    created = status.parse_time(((pod or {}).get("metadata") or {}).get("creationTimestamp"))
    clock = status.parse_time(now)
    if created is None or clock is None:
        return 0.0
    return (clock - created).total_seconds()


def _in_standby(cluster: cluster_.Cluster, ref: desired.AppRef, pod: Mapping[str, Any] | None) -> bool:
    """The new driver said on the Lease that it waits in standby (or already holds it)."""
    meta = (pod or {}).get("metadata") or {}
    identity = f"{meta.get('name')}/{meta.get('uid')}"
    lease = cluster.get("coordination.k8s.io/v1", "Lease", ref.namespace, desired.lease_name(ref.name)) or {}
    said = ((lease.get("metadata") or {}).get("annotations") or {}).get(lease_mod.STANDBY_ANNOTATION)
    holder = (lease.get("spec") or {}).get("holderIdentity")
    return identity in (said, holder)


def _release_lease(cluster: cluster_.Cluster, ref: desired.AppRef, pod: Mapping[str, Any] | None) -> None:
    """Hand back the fence of a driver whose process has ended (its Pod Failed or Succeeded), so
    that the next driver starts at once instead of waiting for the Lease to expire. Only for a Pod
    the kubelet reported ended: a Pod deleted from a lost node may still run, and its Lease is left
    to expire. Conditional on the Lease's resourceVersion: a driver that took it meanwhile keeps it."""
    if pod is None or (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded"):
        return
    meta = pod.get("metadata") or {}
    name = desired.lease_name(ref.name)
    lease = cluster.get("coordination.k8s.io/v1", "Lease", ref.namespace, name)
    holder = ((lease or {}).get("spec") or {}).get("holderIdentity") or ""
    if lease is None or holder != f"{meta.get('name')}/{meta.get('uid')}":
        return
    with contextlib.suppress(errors.ClusterError):  # changed meanwhile, or unreachable: it expires
        cluster.apply(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": name,
                    "namespace": ref.namespace,
                    "resourceVersion": lease["metadata"]["resourceVersion"],
                },
                "spec": {"holderIdentity": ""},
            }
        )


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
    selector = f"{desired.APP_LABEL}={ref.name},spark-role=executor"
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
