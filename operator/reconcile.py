"""One reconciliation, as a sequence of named steps: validate, plan, observe, decide, act, report.

Every kopf trigger (create, update, resume, the timer) runs the same level-triggered function, so
a missed event is repaired on the next tick. The steps:

1. **validate** the spec, and the running checkpoint's state against it: a refusal touches nothing
   that runs. The topology is built once, here, and passed on.
2. **plan**: probe Kafka (partitions, the app's committed progress), size the executors
   (:mod:`scaling`), render what should exist (:mod:`desired`) — the stable revision's spec
   instead while the spec's revision is given up (:func:`lifecycle.returns_to_stable`) — and apply
   the support objects.
3. **observe**: force-delete the app's Pods on lost Nodes (:func:`lifecycle.evict`), then read the
   drivers, the Lease and the executors into a :class:`lifecycle.Snapshot` (:mod:`observe`).
4. **decide** (:func:`transitions.decide`, the life cycle's table) and **act**: carry the decision's
   actions out through :class:`cluster.Cluster`, which tests replace with a fake.
5. **report**: the status, computed once (:mod:`status`), with what :func:`lifecycle.settle`
   records, and the events and error of the :class:`Outcome`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from streamapp.operator import cluster as cluster_
from streamapp.operator import (
    desired,
    errors,
    kafka_auth,
    kafka_probe,
    lifecycle,
    observe,
    scaling,
    status,
    teardown,
    transitions,
    validation,
)
from streamapp.runtime import errors as runtime_errors
from streamapp.runtime import manifest
from streamapp.runtime.expressions import check
from streamapp.runtime.manifest import deployment, models
from streamapp.runtime.topology import graph

__all__ = [
    "Event",
    "Outcome",
    "backoff_seconds",
    "cleanup",
    "driver_action",
    "node_lost",
    "observe_driver",
    "reconcile",
]

# The pure parts, where they live now; handlers and tests reach them here.
Event = lifecycle.Event
backoff_seconds = transitions.backoff_seconds
driver_action = transitions.driver_action
node_lost = observe.node_lost
observe_driver = observe.observe_driver
cleanup = teardown.cleanup

#: Status fields the status module does not compute: each reconciliation carries them over, and
#: the life cycle's decision (:func:`_report`) says which change.
KEPT = ("lastReset", "failedRevision", "state", "driverFailures", "autoscale")


@dataclasses.dataclass
class Outcome:
    """The status to write, the events to post, and the error to raise after writing them."""

    status: dict[str, Any]
    events: list[Event] = dataclasses.field(default_factory=list)
    error: errors.OperatorError | None = None


@dataclasses.dataclass
class _Run:
    """One reconciliation's inputs, and the events said so far."""

    ref: desired.AppRef
    spec: Mapping[str, Any]
    generation: int | None
    previous: Mapping[str, Any]
    cluster: cluster_.Cluster
    probe: kafka_probe.Probe
    now: str
    options: desired.Options | None
    events: list[Event] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class _Kafka:
    """What Kafka said: the input partitions and the app's committed progress (None: unknown, the
    status keeps its last values), and the digest of the credentials the probes used."""

    partitions: int | None
    standing: kafka_probe.Standing | None
    digest: str | None


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What should run: the app (the stable revision's while returning to it), sized and rendered."""

    app: models.StreamApp
    held: dict[str, Any]  # the checkpoint's state fingerprint once the wanted revision runs
    executors: int
    autoscale: dict[str, Any] | None
    wanted: desired.Desired
    manifests: dict[int, dict[str, Any]]  # the wanted driver Pod per slot (none when suspended)
    stable: str | None  # the stable revision recorded (rolling only)
    returning: bool  # to the stable revision: ``app`` is its
    kafka: _Kafka

    @property
    def deployment(self) -> deployment.Deployment:
        return self.app.spec.deployment or deployment.Deployment()


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
    run = _Run(ref, spec, generation, previous or {}, cluster, probe, now, options)
    with check.functions_by_form_only():
        valid = _validate(run)
        if isinstance(valid, Outcome):
            return valid
        pods = observe.driver_pods(cluster, ref)
        plan = _plan(run, *valid, drivers=len(pods))
        for obj in plan.wanted.support:
            cluster.apply(obj)
        world = _observe(run, plan, pods)
        snapshot = _snapshot(run, plan, world)
        decision = transitions.decide(snapshot)
        run.events.extend(decision.events)
        _act(run, world.lease, decision.actions)
        return _report(run, plan, world, snapshot, decision)


def _validate(run: _Run) -> tuple[models.StreamApp, graph.Topology, dict[str, Any]] | Outcome:
    """The app, its topology and the state it holds; or the refusal when it cannot run."""
    ref = run.ref
    if found := validation.problems(name=ref.name, namespace=ref.namespace, spec=run.spec):
        return _refuse(run, found, "InvalidSpec")
    app = models.StreamApp.model_validate(
        validation.to_manifest(name=ref.name, namespace=ref.namespace, spec=run.spec)
    )
    topology = manifest.build_topology(app)
    held = validation.held_state(app, topology)
    if incompatible := validation.incompatible_state(run.previous.get("state"), held):
        return _refuse(run, incompatible, "IncompatibleState")
    return app, topology, held


def _refuse(run: _Run, found: list[runtime_errors.Problem], why: str) -> Outcome:
    """A spec that is not applied: the running driver (either slot) is left as it is, the status
    says why (Degraded ``why``), and a Warning event says it once per new message."""
    pods = observe.driver_pods(run.cluster, run.ref)
    drivers = {n: lifecycle.Driver(s) for n, pod in pods.items() if (s := observe_driver(pod))}
    seen = observe_driver(pods.get(lifecycle.current_slot(drivers, "")))
    target = status.Target(
        generation=run.generation, revision=None, executors=None, problems=found, refused=why
    )
    new = _status(run, target, status.Observation(seen))
    degraded: dict[str, Any] = next((c for c in new["conditions"] if c["type"] == "Degraded"), {})
    old = [c for c in run.previous.get("conditions") or [] if c.get("type") == "Degraded"]
    if not old or old[0].get("message") != degraded.get("message"):
        run.events.append(Event("Warning", why, degraded.get("message", "")))
    return Outcome(new, run.events, errors.InvalidSpecError(found))


def _probe(run: _Run, app: models.StreamApp, topology: graph.Topology) -> _Kafka:
    """Partitions and progress, one warning when Kafka cannot be read: a Kafka outage is no reason
    to restart drivers, so the last count is kept. Without usable credentials (a Secret missing,
    said once) the probes are skipped."""
    known = run.previous.get("inputPartitions")
    last = int(known) if known is not None else None
    try:
        config = kafka_auth.client_config(app.spec.kafka, namespace=run.ref.namespace, cluster=run.cluster)
    except errors.KafkaSecretError as exc:
        run.events.append(Event("Warning", "KafkaCredentials", str(exc)))
        return _Kafka(last, None, None)
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16] if config else None
    topics = topology.source_topics()
    bootstrap = (app.spec.kafka.bootstrap_servers if app.spec.kafka else None) or ""
    try:
        partitions = scaling.total_partitions(run.probe.partitions(bootstrap, topics, config=config))
    except errors.KafkaProbeError as exc:
        run.events.append(Event("Warning", "KafkaUnreachable", str(exc)))
        return _Kafka(last, None, digest)
    try:
        standing = run.probe.standing(bootstrap, desired.progress_group(run.ref), topics, config=config)
    except errors.KafkaProbeError as exc:
        run.events.append(Event("Warning", "KafkaUnreachable", str(exc)))
        standing = None
    return _Kafka(partitions, standing, digest)


def _plan(
    run: _Run, app: models.StreamApp, topology: graph.Topology, held: dict[str, Any], *, drivers: int
) -> _Plan:
    """Size and render the app; while the spec's revision is given up and a stable one is
    recorded, the stable revision's spec is what runs (sized and rendered the same way)."""
    kafka = _probe(run, app, topology)
    rolling = (app.spec.deployment or deployment.Deployment()).upgrade_policy == "rolling"
    stable = observe.stable(run.cluster, run.ref) if rolling else None
    executors, autoscaled, wanted = _render(run, app, topology, kafka, drivers=drivers)
    back = None
    if stable is not None and lifecycle.returns_to_stable(
        failed_revision=run.previous.get("failedRevision"), revision=wanted.revision, stable=stable[0]
    ):
        back = _stable_app(
            run.ref, stable[1], suspend=bool((run.spec.get("deployment") or {}).get("suspend"))
        )
        if back is None:  # nothing valid to return to: the spec's revision runs (and backs off)
            stable = None
    if back is not None:
        app, topology = back, manifest.build_topology(back)
        executors, autoscaled, wanted = _render(run, app, topology, kafka, drivers=drivers)
        held = validation.held_state(app, topology)
    manifests = {}
    if wanted.driver is not None:  # the same revision in either slot, under the slot's name
        other = _render(run, app, topology, kafka, drivers=drivers, executors=executors, slot=1)[2]
        manifests = {0: wanted.driver, 1: other.driver or {}}
    return _Plan(
        app=app, held=held, executors=executors, autoscale=autoscaled, wanted=wanted, manifests=manifests,
        stable=stable[0] if stable else None, returning=back is not None, kafka=kafka,
    )  # fmt: skip


def _render(
    run: _Run,
    app: models.StreamApp,
    topology: graph.Topology,
    kafka: _Kafka,
    *,
    drivers: int,
    executors: int | None = None,
    slot: int = 0,
) -> tuple[int, dict[str, Any] | None, desired.Desired]:
    """The executors, the autoscaler's status, and what should exist (sized unless ``executors``)."""
    autoscaled = None
    if executors is None:
        sized = scaling.size(
            app.spec.deployment or deployment.Deployment(), partitions=kafka.partitions,
            standing=kafka.standing, previous=run.previous, drivers=drivers, now=run.now,
        )  # fmt: skip
        if sized.change is not None:
            run.events.append(Event("Normal", "Autoscaled", sized.change))
        executors, autoscaled = sized.executors, sized.status
    wanted = desired.render(
        ref=run.ref, app=app, executors=executors, options=run.options, credentials=kafka.digest,
        slot=slot, topology=topology,
    )  # fmt: skip
    return executors, autoscaled, wanted


def _stable_app(ref: desired.AppRef, spec: Mapping[str, Any], *, suspend: bool) -> models.StreamApp | None:
    """The stable revision's app, suspended as the spec says (suspending is not a revision: an app
    that returned to its stable revision is suspended and resumed there); None when it is no
    longer valid (the runtime changed): then there is nothing to return to."""
    spec = {**spec, "deployment": {**(spec.get("deployment") or {}), "suspend": suspend}}
    try:
        return validation.parse(name=ref.name, namespace=ref.namespace, spec=spec)
    except errors.InvalidSpecError:
        return None


def _observe(run: _Run, plan: _Plan, pods: dict[int, dict[str, Any]]) -> observe.World:
    """Evict the app's Pods from lost Nodes, then read what the life cycle decides from."""
    everything = observe.app_pods(run.cluster, run.ref)
    lost = observe.lost_nodes(run.cluster, everything)
    evictions, said = lifecycle.evict(observe.placements(everything), lost)
    _act(run, None, evictions)
    run.events.extend(said)
    gone = {d.name for d in evictions}
    return observe.world(run.cluster, run.ref, pods, everything, gone=gone, now=run.now)


def _snapshot(run: _Run, plan: _Plan, world: observe.World) -> lifecycle.Snapshot:
    previous, reset = run.previous, plan.deployment.reset
    return lifecycle.Snapshot(
        now=run.now, revision=plan.wanted.revision, executors=plan.executors,
        credentials=plan.kafka.digest, manifests=plan.manifests, drivers=world.drivers,
        rolling=plan.deployment.upgrade_policy == "rolling",
        progress_deadline_s=plan.deployment.progress_deadline_s(), stable=plan.stable,
        failed_revision=previous.get("failedRevision"), rollback_reason=status.rollback_reason(previous),
        returning=plan.returning, failures=int(previous.get("driverFailures") or 0),
        previous_executors=(previous.get("executors") or {}).get("desired"),
        standing=plan.kafka.standing, reset=reset.id if reset is not None else None,
        last_reset=previous.get("lastReset"),
    )  # fmt: skip


def _act(run: _Run, lease: Mapping[str, Any] | None, actions: tuple[lifecycle.Action, ...]) -> None:
    for action in actions:
        if isinstance(action, lifecycle.Create):
            run.cluster.apply(action.pod)
            continue
        if action.release_lease and lease is not None:
            _release_lease(run, lease)
        run.cluster.delete("v1", "Pod", run.ref.namespace, action.name, grace_seconds=action.grace_seconds)


def _release_lease(run: _Run, lease: Mapping[str, Any]) -> None:
    """Hand back the fence of a driver whose process has ended (its Pod Failed or Succeeded), so
    that the next driver starts at once instead of waiting for the Lease to expire. Only for a Pod
    the kubelet reported ended: a Pod deleted from a lost node may still run, and its Lease is left
    to expire. Conditional on the Lease's resourceVersion: a driver that took it meanwhile keeps it."""
    meta = {
        "name": desired.lease_name(run.ref.name),
        "namespace": run.ref.namespace,
        "resourceVersion": lease["metadata"]["resourceVersion"],
    }
    with contextlib.suppress(errors.ClusterError):  # changed meanwhile, or unreachable: it expires
        run.cluster.apply(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": meta,
                "spec": {"holderIdentity": ""},
            }
        )


def _report(
    run: _Run, plan: _Plan, world: observe.World, snapshot: lifecycle.Snapshot, decision: lifecycle.Decision
) -> Outcome:
    """The status of the decided driver, computed once, with what the decision and
    :func:`lifecycle.settle` change in it; the stable record applied when settled so."""
    seen, pod = _reported(run, world, decision)
    failing = decision.report.kind == "failing"  # alone: no executors, no progress, nothing settled
    ready, failed = (0, []) if failing else observe.executors(world.executor_pods, observe.uid(pod))
    observed = status.Observation(
        driver=seen, executors_ready=ready, executor_failures=tuple(failed),
        partitions=plan.kafka.partitions, standing=None if failing else plan.kafka.standing,
    )  # fmt: skip
    suspend = plan.deployment.suspend and not failing
    target = status.Target(run.generation, plan.wanted.revision, plan.executors, suspend=suspend)
    new = _status(run, target, observed)
    is_ready = any(c["type"] == "Ready" and c["status"] == "True" for c in new["conditions"])
    settled = lifecycle.settle(snapshot, decision, seen, ready=is_ready)
    new["lastReset"] = settled.last_reset
    new["failedRevision"] = decision.failed_revision
    if settled.failures is not None:
        new["driverFailures"] = settled.failures
    if settled.records_state:
        new["state"] = plan.held
    if not failing:
        new["autoscale"] = plan.autoscale
    if decision.note:
        new["message"] = f"{new['message']}; {decision.note}"
    if decision.phase:
        new["phase"] = decision.phase
    if decision.rolled_back:
        status.say_rolled_back(new, decision.rolled_back)
    if settled.record_stable:  # what a rollback returns to
        run.cluster.apply(desired.stable(run.ref, run.spec, plan.wanted.revision))
    return Outcome(new, run.events, decision.error)


def _reported(
    run: _Run, world: observe.World, decision: lifecycle.Decision
) -> tuple[status.DriverObservation | None, dict[str, Any] | None]:
    """The driver the status reports, and its Pod: read again when the decision created or
    deleted it. The API server removes an ended Pod at once: then how it ended is reported, not
    that it is missing."""
    pod = world.pods.get(decision.report.slot)
    seen = observe_driver(pod)
    name = desired.driver_pod_name(run.ref.name, decision.report.slot)
    if decision.report.kind == "driver" and any(a.name == name for a in decision.actions):
        ended = seen if seen is not None and seen.phase in status.ENDED else None
        pod = run.cluster.get("v1", "Pod", run.ref.namespace, name)
        seen = observe_driver(pod) or ended
    return seen, pod


def _status(run: _Run, target: status.Target, observed: status.Observation) -> dict[str, Any]:
    """The one computation of the status; the fields it does not compute are carried over."""
    new = status.compute(previous=run.previous, target=target, seen=observed, now=run.now)
    new.update({key: run.previous.get(key) for key in KEPT})
    new["selector"] = desired.executor_selector(run.ref.name)
    return new
