"""The life cycle of a StreamApp's driver, as data: which transition a snapshot calls for, and what it does.

A reconciliation reads the cluster into a :class:`Snapshot` (:mod:`reconcile`, through
:mod:`observe`); :func:`decide` picks the transition and returns a :class:`Decision`: the actions
as plain data (create this Pod, delete that one with this grace, releasing its Lease or not), the
events, the error that schedules the next try, and what the status says. Every function here is
pure — no cluster, no Kafka, no clock (``now`` is an input) — so each transition is tested alone
(tests/operator/test_lifecycle.py), and :mod:`reconcile` carries the decision out.

A driver runs in one of two slots (``<app>-driver``, ``<app>-driver-b``): one revision, one Pod,
never patched. Only a rolling hand-over has two at once, and only one of them runs the query (the
app's Lease fences it). The *current* slot is the wanted revision's, else the one whose driver is
not terminating, else the first. The rows are checked from the top; the first that applies is
taken:

| state                  | condition                           | transition      | actions; retry in       |
|------------------------|-------------------------------------|-----------------|-------------------------|
| any Pod of the app     | on a Node gone or not Ready         | `evict` ¹       | delete it, grace 0      |
| rolling, old serving ² | the wanted revision was given up    | `keep_old`      | —                       |
|                        | other slot: a given-up driver       | `wait_leftover` | delete it (once); 2 s   |
|                        | other slot empty                    | `start_beside`  | create the new one; 2 s |
|                        | new ended, or no standby by ³       | `give_up`       | delete the new one ⁴    |
|                        | new waits in standby (on the Lease) | `hand_over`     | delete the old one; 2 s |
|                        | new starting                        | `wait_standby`  | 2 s                     |
| other slot: a driver   | not terminating                     | `stop_stale` ⁵  | delete it ⁶, go on      |
| current driver ⁷       | ended, or idle past ³               | `roll_back`     | failedRevision ⁸; 1 s   |
| current driver         | terminating                         | `wait_stopping` | 5 s (none if suspended) |
| suspended              | a driver there                      | `suspend`       | delete it ⁶             |
| no driver              | not suspended                       | `create`        | create it               |
| wanted revision, ended | back-off not over ⁹                 | `back_off`      | keep it; when over      |
|                        | back-off over                       | `restart`       | delete it ⁶; 5 s        |
| current driver         | other revision, or old credentials  | `replace`       | delete it ⁶; 5 s        |
| otherwise ¹⁰           | —                                   | `keep`          | —                       |

1. Before the rest, on every Pod of the app (executors too); the drivers are then taken without
   the evicted ones (force-deleted: gone at once).
2. ``upgradePolicy: rolling``, a driver wanted, and an older revision's driver Running and Ready in
   one slot, with no other old driver still running in the other; otherwise (nothing serving to
   keep up) the rows below apply.
3. ``spec.deployment.progressDeadline`` (5 minutes): for a hand-over, since the new Pod was
   created; for a roll back, the driver has run that long and does not process (no micro-batch of
   its own while records wait).
4. With a RollbackUpgrade warning saying why — with the scheduler's message when the new driver or
   one of its executors cannot be placed — and ``failedRevision`` set to the wanted revision, which
   is not tried again until the spec changes (``keep_old``). No retry.
5. A hand-over cut short: taken together with the row that follows for the current slot.
6. Releasing its Lease first when its process ended and holds it, so that the next driver starts
   at once instead of waiting for the Lease to expire.
7. A stable revision is recorded, differs from the wanted one, and is not being returned to: the
   current driver took over from it. (When no driver of the wanted revision exists, the current
   driver is whichever is there.)
8. ``failedRevision`` set to the wanted revision, a RollbackUpgrade warning; the next
   reconciliation renders the stable revision instead (returning to it), and the rows below bring
   it back: ``replace`` and ``create``, or a hand-over of its own while the failed driver runs.
9. 10 s after the second failure in a row, then 20 s, 40 s … up to 5 minutes
   (:func:`backoff_seconds`); the first is restarted at once, and a driver that ran 10 minutes
   before it ended starts the count again.
10. The wanted revision's driver runs or starts; or, suspended, none is left.

Around the table:

- **returning to stable** (:func:`returns_to_stable`): while ``failedRevision`` names the spec's
  revision and a different stable revision is recorded (the ``<app>-stable`` ConfigMap), the
  stable revision's spec is what is rendered and wanted, and the status says why
  (Degraded/Progressing RollbackUpgrade) until the spec changes.
- **after acting** (:func:`settle`), from the current driver read again: one of the wanted
  revision records ``spec.deployment.reset`` as carried out (``lastReset``: it runs on the reset's
  fresh checkpoint); its running records the checkpoint's state fingerprint (``state``); its Ready
  clears ``driverFailures``; and with rolling, its first own micro-batch records its revision as
  the stable one, what a later roll back returns to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from streamapp.operator import desired, errors, kafka_probe, status

__all__ = [
    "BACKOFF_MAX_SECONDS",
    "BACKOFF_RESET_SECONDS",
    "Action",
    "Create",
    "Decision",
    "Delete",
    "Driver",
    "DriverAction",
    "Event",
    "Report",
    "Settled",
    "Snapshot",
    "Transition",
    "backoff_seconds",
    "current_slot",
    "decide",
    "driver_action",
    "evict",
    "returns_to_stable",
    "settle",
]

Transition = Literal[
    "evict", "keep_old", "wait_leftover", "start_beside", "give_up", "hand_over", "wait_standby",
    "stop_stale", "roll_back", "wait_stopping", "suspend", "create", "back_off", "restart", "replace",
    "keep",
]  # fmt: skip
DriverAction = Literal["create", "delete", "keep", "wait"]

#: A driver that ran this long before it failed resets the back-off, as the kubelet's does.
BACKOFF_RESET_SECONDS = 600
BACKOFF_MAX_SECONDS = 300


@dataclasses.dataclass(frozen=True)
class Event:
    """A Kubernetes Event to post on the StreamApp."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class Driver:
    """A driver Pod as observed, with what the life cycle needs beyond its status."""

    seen: status.DriverObservation
    age_s: float = 0.0  # since the Pod was created
    standby: bool = False  # it said on the app's Lease that it waits in standby (or holds the Lease)
    holds_lease: bool = False  # the Lease names this Pod's process as its holder
    unschedulable: str | None = None  # why it, or one of its executors, waits for a Node


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Everything one decision depends on, read once."""

    now: str
    revision: str  # the wanted revision (the same in either slot)
    executors: int
    credentials: str | None  # digest of the Kafka credentials in the Secrets now (None: unknown)
    #: The wanted driver Pod per slot, as rendered; empty when the app is suspended.
    manifests: Mapping[int, Mapping[str, Any]]
    drivers: Mapping[int, Driver]  # the driver Pods there are, by slot
    rolling: bool = False  # upgradePolicy of what is rendered
    progress_deadline_s: float = 300.0
    stable: str | None = None  # the last revision that processed (rolling only), if recorded
    failed_revision: str | None = None  # status.failedRevision: the revision given up
    rollback_reason: str | None = None  # why it was given up, as the status says it
    returning: bool = False  # the stable revision is rendered instead of the spec's (given up)
    failures: int = 0  # status.driverFailures: drivers of this revision that failed in a row
    previous_executors: int | None = None  # status.executors.desired
    standing: kafka_probe.Standing | None = None  # the app's last committed progress
    reset: str | None = None  # spec.deployment.reset.id
    last_reset: str | None = None  # status.lastReset

    @property
    def wants_driver(self) -> bool:
        return bool(self.manifests)


@dataclasses.dataclass(frozen=True)
class Create:
    """Create this driver Pod."""

    pod: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])


@dataclasses.dataclass(frozen=True)
class Delete:
    """Delete a driver Pod (SIGTERM: it stops at a micro-batch boundary within the grace period)."""

    name: str
    grace_seconds: int = desired.GRACE_SECONDS
    #: Hand its Lease back first: its process ended, so the next driver need not wait for expiry.
    release_lease: bool = False


Action = Create | Delete


@dataclasses.dataclass(frozen=True)
class Report:
    """Which driver the status reports.

    ``driver``: the slot's, read again after acting — the wanted revision's own; ``serving``: the
    old driver of a hand-over as observed (it serves meanwhile); ``failing``: the driver given up
    after its hand-over, as observed, alone (no executors, no progress, kept fields unchanged).
    """

    slot: int
    kind: Literal["driver", "serving", "failing"] = "driver"


@dataclasses.dataclass(frozen=True)
class Decision:
    """What one reconciliation does and says; :mod:`reconcile` carries it out."""

    transitions: tuple[Transition, ...]
    report: Report
    failed_revision: str | None
    actions: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()
    error: errors.OperatorError | None = None
    failures: int | None = None  # status.driverFailures; None: the status keeps its value
    rolled_back: str | None = None  # Degraded and Progressing say this (RollbackUpgrade)
    phase: str | None = None  # overrides the phase the conditions give
    note: str | None = None  # appended to the status message

    @property
    def transition(self) -> Transition:
        """The transition that decided (a stale driver's stop may come before it)."""
        return self.transitions[-1]


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


def _action(
    revision: str, credentials: str | None, wanted: bool, seen: status.DriverObservation | None
) -> DriverAction:
    if seen is not None and seen.terminating:
        return "wait"
    if not wanted:
        return "delete" if seen is not None else "keep"
    if seen is None:
        return "create"
    if seen.revision != revision or seen.phase in status.ENDED:
        return "delete"
    if None not in (credentials, seen.credentials) and credentials != seen.credentials:
        return "delete"  # a rotated Secret: the driver's environment holds the old credentials
    return "keep"


def driver_action(*, wanted: desired.Desired, seen: status.DriverObservation | None) -> DriverAction:
    """Create, delete (to replace or to suspend), keep, or wait for a terminating driver to go."""
    return _action(wanted.revision, wanted.credentials, wanted.driver is not None, seen)


def current_slot(drivers: Mapping[int, Driver], revision: str) -> int:
    """The slot of the app's driver: the one running ``revision``, else the one there is (not
    terminating first), else slot 0."""
    for slot, driver in sorted(drivers.items()):
        if driver.seen.revision == revision:
            return slot
    alive = [slot for slot, driver in sorted(drivers.items()) if not driver.seen.terminating]
    return (alive or sorted(drivers) or [0])[0]


def returns_to_stable(*, failed_revision: str | None, revision: str, stable: str | None) -> bool:
    """The spec's ``revision`` was given up and a different stable one is recorded: render that."""
    return stable is not None and failed_revision == revision != stable


def evict(
    pods: Sequence[tuple[str, str]], lost: Mapping[str, str | None]
) -> tuple[tuple[Delete, ...], tuple[Event, ...]]:
    """Force-delete the app's Pods (name, Node) on lost Nodes (``lost``: Node → why, None when
    healthy), as a StatefulSet's user would by hand: the driver is then replaced from the
    checkpoint at once, and Spark replaces the executors, instead of waiting for the taint-based
    eviction (5 minutes by default) and then for a kubelet that never confirms. A driver on a Node
    that is only cut off could still run: its output is fenced by the transactional producer ids
    under exactly_once_v2. Returns the deletions (grace 0) and a NodeLost event for each."""
    gone = [(name, node, why) for name, node in pods if (why := lost.get(node)) is not None]
    return (
        tuple(Delete(name, grace_seconds=0) for name, _, _ in gone),
        tuple(
            Event(
                "Warning", "NodeLost", f"Pod {name} was on Node {node}, which {why}: deleted it to replace it"
            )
            for name, node, why in gone
        ),
    )


def decide(s: Snapshot) -> Decision:
    """The transition ``s`` calls for (the table in this module's docstring, top to bottom)."""
    slot = current_slot(s.drivers, s.revision)
    if s.rolling and s.wants_driver:
        rolled = _rolling(s)
        if rolled is not None:
            return rolled
    prefix = stop_stale(s, slot)
    seen = s.drivers.get(slot)
    if not s.returning and s.stable is not None and s.stable != s.revision:
        why = _failed_after_hand_over(s, seen)
        if why is not None:
            return _after(prefix, roll_back(s, slot, why))
    return _after(prefix, _driver(s, slot))


def _after(first: Decision | None, then: Decision) -> Decision:
    if first is None:
        return then
    return dataclasses.replace(
        then,
        transitions=first.transitions + then.transitions,
        actions=first.actions + then.actions,
        events=first.events + then.events,
    )


def _decision(s: Snapshot, transition: Transition, slot: int, **fields: Any) -> Decision:
    fields.setdefault("failed_revision", s.failed_revision)
    fields.setdefault("failures", s.failures)
    if s.returning:  # the stable revision is rendered: say why, until the spec changes
        fields.setdefault("rolled_back", s.rollback_reason or f"rolled back to revision {s.revision}")
    return Decision(transitions=(transition,), report=Report(slot), **fields)


# The recreate path: one driver, in the current slot.


def _driver(s: Snapshot, slot: int) -> Decision:
    found = s.drivers.get(slot)
    seen = found.seen if found is not None else None
    action = _action(s.revision, s.credentials, s.wants_driver, seen)
    if action == "create":
        return create(s, slot)
    if action == "wait":
        return wait_stopping(s, slot)
    if action == "keep":
        return keep(s, slot)
    assert found is not None and seen is not None
    if not s.wants_driver:
        return suspend(s, slot)
    if seen.phase in status.ENDED and seen.revision == s.revision:  # crashed
        failures = 0 if _ran_long(seen) else s.failures
        return back_off(s, slot) if _backoff_left(failures, seen, s.now) > 0 else restart(s, slot)
    return replace(s, slot)


def create(s: Snapshot, slot: int) -> Decision:
    """No driver: create the wanted one."""
    pod = Create(s.manifests[slot])
    said = f"driver Pod {pod.name}: revision {s.revision}, {s.executors} executors"
    return _decision(s, "create", slot, actions=(pod,), events=(Event("Normal", "DriverCreated", said),))


def keep(s: Snapshot, slot: int) -> Decision:
    """Nothing to do: the wanted driver runs or starts (or, suspended, none is left)."""
    return _decision(s, "keep", slot)


def wait_stopping(s: Snapshot, slot: int) -> Decision:
    """A driver still terminates: the next starts once it is gone (one driver per checkpoint)."""
    name = s.drivers[slot].seen.name
    stopping = errors.DriverStopping(f"waiting for driver Pod {name} to stop", delay=5)
    return _decision(s, "wait_stopping", slot, error=stopping if s.wants_driver else None)


def suspend(s: Snapshot, slot: int) -> Decision:
    """Suspended: stop the driver gracefully; the checkpoint is kept."""
    seen = s.drivers[slot].seen
    said = Event("Normal", "Suspending", f"stopping driver Pod {seen.name}; the checkpoint is kept")
    return _decision(s, "suspend", slot, actions=(_delete(s.drivers[slot]),), events=(said,))


def replace(s: Snapshot, slot: int) -> Decision:
    """Another revision (a spec change, a rescale, a reset's fresh checkpoint), rotated Kafka
    credentials, or an ended driver of another revision: delete it; the wanted one is created
    once it is gone."""
    return _replace(s, slot, "replace", s.failures)


def restart(s: Snapshot, slot: int) -> Decision:
    """The wanted revision's driver ended and its back-off is over: replace it, one more failure
    in a row (the count starts again after a driver that ran :data:`BACKOFF_RESET_SECONDS`)."""
    seen = s.drivers[slot].seen
    return _replace(s, slot, "restart", (0 if _ran_long(seen) else s.failures) + 1)


def _replace(s: Snapshot, slot: int, transition: Transition, failures: int) -> Decision:
    seen = s.drivers[slot].seen
    said = Event("Normal", "DriverReplaced", f"replacing driver Pod {seen.name}: {_replace_reason(s, seen)}")
    return _decision(
        s, transition, slot,
        actions=(_delete(s.drivers[slot]),),
        events=(said,),
        error=errors.DriverStopping(f"waiting for driver Pod {seen.name} to stop", delay=5),
        failures=failures,
    )  # fmt: skip


def back_off(s: Snapshot, slot: int) -> Decision:
    """The wanted revision's driver ended again too soon: its Pod stays (with its exit code)
    until the back-off is over."""
    seen = s.drivers[slot].seen
    failures = 0 if _ran_long(seen) else s.failures
    wait = _backoff_left(failures, seen, s.now)
    error = errors.DriverBackOff(
        f"driver Pod {seen.name} failed {failures + 1} times in a row; the next one starts"
        f" in {wait:.0f} s or at the next reconciliation after that"
        f" (back-off {backoff_seconds(failures):.0f} s)",
        delay=wait,
    )
    return _decision(s, "back_off", slot, error=error, failures=failures, note=str(error))


def _delete(driver: Driver) -> Delete:
    ended = driver.seen.phase in status.ENDED
    return Delete(driver.seen.name, release_lease=ended and driver.holds_lease)


def _replace_reason(s: Snapshot, seen: status.DriverObservation) -> str:
    if seen.phase in status.ENDED:
        return seen.message or f"driver Pod {seen.name} ended ({seen.phase})"
    if seen.revision == s.revision and seen.credentials != s.credentials:
        return "the Kafka credentials in its Secrets changed"
    before = s.previous_executors
    if before is not None and before != s.executors:
        return f"rescaling from {before} to {s.executors} executors"
    return f"revision {seen.revision} → new revision"


def stop_stale(s: Snapshot, slot: int) -> Decision | None:
    """Drivers left in the other slot (a hand-over cut short): stop them; None when there are none."""
    stale = [d for other, d in sorted(s.drivers.items()) if other != slot and not d.seen.terminating]
    if not stale:
        return None
    said = [f"stopping driver Pod {d.seen.name}: not the current one" for d in stale]
    return _decision(
        s, "stop_stale", slot,
        actions=tuple(_delete(d) for d in stale),
        events=tuple(Event("Normal", "DriverReplaced", text) for text in said),
    )  # fmt: skip


# The rolling path: the new revision starts beside the old one, which serves until the hand-over.


def _rolling(s: Snapshot) -> Decision | None:
    """The hand-over's transition; None when there is nothing to hand over (no older driver, or
    none serving) and the recreate path applies."""
    old_slot = next((n for n, d in sorted(s.drivers.items()) if d.seen.revision != s.revision), None)
    if old_slot is None:
        return None
    old, new = s.drivers[old_slot].seen, s.drivers.get(1 - old_slot)
    leftover = new is not None and new.seen.revision != s.revision
    if new is not None and leftover and not (new.seen.terminating or new.seen.phase in status.ENDED):
        return None  # two old drivers running (a hand-over cut short): recreate, as usual
    if old.terminating:
        return None  # the hand-over's last step: the recreate path waits for it to go
    if old.phase != "Running" or not old.ready:
        return None  # nothing serving to keep up: recreate
    if s.failed_revision == s.revision:
        return keep_old(s, old_slot)
    if leftover:
        return wait_leftover(s, old_slot)
    if new is None:
        return start_beside(s, old_slot)
    if new.seen.phase in status.ENDED or new.age_s > s.progress_deadline_s:
        return give_up(s, old_slot)
    if new.standby:
        return hand_over(s, old_slot)
    return wait_standby(s, old_slot)


def _serving(
    s: Snapshot, transition: Transition, old: int, *, failed: str | None = None, **fields: Any
) -> Decision:
    """A hand-over's decision: the status reports the old driver, which serves meanwhile."""
    fields.setdefault("error", errors.DriverStopping(f"rolling upgrade to revision {s.revision}", delay=2))
    if failed is not None:
        fields.update(failed_revision=s.revision, rolled_back=failed, phase="Running")
    if s.returning:  # the hand-over returns to the stable revision
        back = s.rollback_reason or f"rolling back to revision {s.revision}"
        fields.update(failed_revision=s.failed_revision, rolled_back=back)
    return dataclasses.replace(_decision(s, transition, old, **fields), report=Report(old, "serving"))


def keep_old(s: Snapshot, old: int) -> Decision:
    """The wanted revision was given up: the old driver keeps running until the spec changes."""
    failed = s.rollback_reason or (
        f"rolling upgrade to revision {s.revision} was given up; revision "
        f"{s.drivers[old].seen.revision} keeps running"
    )
    return _serving(s, "keep_old", old, failed=failed, error=None)


def wait_leftover(s: Snapshot, old: int) -> Decision:
    """A driver given up earlier still goes (or ended and is not deleted yet): the new one starts
    in its slot once it is gone; the running driver keeps serving meanwhile."""
    new = s.drivers[1 - old].seen
    error = errors.DriverStopping(
        f"rolling upgrade to revision {s.revision}: waiting for {new.name} (revision "
        f"{new.revision}) to go first",
        delay=2,
    )
    actions = () if new.terminating else (Delete(new.name),)
    return _serving(s, "wait_leftover", old, actions=actions, error=error)


def start_beside(s: Snapshot, old: int) -> Decision:
    """Start the new revision's driver in the other slot, beside the running one."""
    pod, running = Create(s.manifests[1 - old]), s.drivers[old].seen.name
    said = (
        f"driver Pod {pod.name} starts revision {s.revision} beside {running}; it takes over at a "
        "micro-batch boundary once it waits in standby"
    )
    return _serving(s, "start_beside", old, actions=(pod,), events=(Event("Normal", "RollingUpgrade", said),))


def give_up(s: Snapshot, old: int) -> Decision:
    """The new driver ended, or did not reach standby within ``progressDeadline``: delete it and
    keep the old one (``failedRevision``) until the spec changes."""
    new = s.drivers[1 - old]
    seen = new.seen
    if seen.phase in status.ENDED:
        why = seen.message or f"driver Pod {seen.name} ended ({seen.phase})"
    else:
        why = (
            f"driver Pod {seen.name} did not reach standby within {s.progress_deadline_s:.0f} s "
            "(spec.deployment.progressDeadline)"
        )
        if new.unschedulable:
            why = (
                f"{why}: {new.unschedulable} — a rolling upgrade needs room for a second driver and its "
                "executors; make room, or use upgradePolicy: recreate"
            )
    running = s.drivers[old].seen.name
    failed = f"rolling upgrade to revision {s.revision} given up, {running} keeps running: {why}"
    return _serving(
        s, "give_up", old, failed=failed, error=None,
        actions=(Delete(seen.name),), events=(Event("Warning", "RollbackUpgrade", failed),),
    )  # fmt: skip


def hand_over(s: Snapshot, old: int) -> Decision:
    """The new driver waits in standby: stop the old one (SIGTERM: it stops at a micro-batch
    boundary and releases the Lease), and the new one starts its query from the checkpoint."""
    new, running = s.drivers[1 - old].seen.name, s.drivers[old].seen.name
    said = f"driver Pod {new} waits in standby: stopping {running} at a micro-batch boundary"
    return _serving(
        s, "hand_over", old, actions=(Delete(running),), events=(Event("Normal", "HandingOver", said),)
    )


def wait_standby(s: Snapshot, old: int) -> Decision:
    """The new driver starts (Spark up, plan compiled): wait until it says it is in standby."""
    return _serving(s, "wait_standby", old)


# Rolling back: the wanted revision failed after it took over from a stable one.


def _failed_after_hand_over(s: Snapshot, found: Driver | None) -> str | None:
    """Why the current slot's driver, of the wanted revision, failed: it ended, or it has run for
    ``progressDeadline`` without completing a micro-batch; None while it may yet. A driver of
    another revision (the stable one, crashed before the upgrade started) is not the wanted
    revision's failure: it is replaced by the wanted revision as usual."""
    if found is None or found.seen.terminating or found.seen.revision != s.revision:
        return None
    seen = found.seen
    if seen.phase in status.ENDED:
        return seen.message or f"driver Pod {seen.name} ended ({seen.phase})"
    if seen.phase != "Running" or found.age_s <= s.progress_deadline_s:
        return None
    idle = status.not_processing(seen, s.standing, s.now)
    if idle is None:
        return None
    return f"{idle}, {s.progress_deadline_s:.0f} s after its start (spec.deployment.progressDeadline)"


def roll_back(s: Snapshot, slot: int, why: str) -> Decision:
    """Give the wanted revision up after its hand-over: ``failedRevision`` makes the next
    reconciliation render the stable revision (:func:`returns_to_stable`), which replaces it."""
    failed = f"revision {s.revision} failed after the hand-over, returning to revision {s.stable}: {why}"
    return Decision(
        transitions=("roll_back",),
        report=Report(slot, "failing"),
        failed_revision=s.revision,
        events=(Event("Warning", "RollbackUpgrade", failed),),
        error=errors.DriverStopping(f"rolling back to revision {s.stable}", delay=1),
        rolled_back=failed,
    )


# After acting: what the reported driver settles in the status.


@dataclasses.dataclass(frozen=True)
class Settled:
    """What the status records once the reported driver has been read again after acting."""

    last_reset: str | None
    records_state: bool  # the checkpoint's state fingerprint becomes the wanted revision's
    failures: int | None
    record_stable: bool  # apply the stable record (:func:`desired.stable`) of the wanted revision


def settle(s: Snapshot, d: Decision, seen: status.DriverObservation | None, *, ready: bool) -> Settled:
    """The reset, state, failure count and stable record, from the driver the status reports
    (read again after acting) and whether the status says it is Ready.

    Only the ``driver`` report settles anything: a hand-over's old driver and a failing one keep
    what the status said. A driver of the wanted revision carries the reset out (its checkpoint is
    the reset's), its running records the state, its Ready clears the failures, and (rolling) its
    own first micro-batch makes its revision the stable one, unless a stable one is returned to.
    """
    if d.report.kind != "driver":
        return Settled(s.last_reset, False, d.failures, False)
    wanted = seen is not None and seen.revision == s.revision
    runs = seen is not None and wanted and seen.phase == "Running"
    by = s.standing.by if s.standing is not None else None
    record = (
        not s.returning
        and runs
        and ready
        and s.rolling
        and s.stable != s.revision
        and s.standing is not None
        and by in (None, seen.name if seen else None)  # this driver's own batch
    )
    return Settled(
        last_reset=s.reset if s.reset is not None and wanted else s.last_reset,
        records_state=runs,
        failures=0 if ready else d.failures,
        record_stable=record,
    )
