"""The life cycle of a StreamApp's driver, as data: what a decision reads, and what it says.

A reconciliation reads the cluster into a :class:`Snapshot` (:mod:`reconcile`, through
:mod:`observe`); :func:`transitions.decide` picks the transition and returns a :class:`Decision`:
the actions as plain data (create this Pod, delete that one with this grace, releasing its Lease or
not), the events, the error that schedules the next try, and what the status says. Every function
here and in :mod:`transitions` and :mod:`rolling` is pure — no cluster, no Kafka, no clock (``now``
is an input) — so each transition is tested alone (tests/operator/test_lifecycle.py), and
:mod:`reconcile` carries the decision out.

Around the table (in :mod:`transitions`' docstring):

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
    "Action",
    "Create",
    "Decision",
    "Delete",
    "Driver",
    "Event",
    "Report",
    "Settled",
    "Snapshot",
    "Transition",
    "current_slot",
    "decision_for",
    "evict",
    "returns_to_stable",
    "settle",
]

Transition = Literal[
    "evict", "keep_old", "wait_leftover", "start_beside", "give_up", "hand_over", "wait_standby",
    "stop_stale", "roll_back", "wait_stopping", "suspend", "create", "back_off", "restart", "replace",
    "keep",
]  # fmt: skip


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


def decision_for(s: Snapshot, transition: Transition, slot: int, **fields: Any) -> Decision:
    """A transition's decision reporting ``slot``; the status fields not given keep what ``s`` says."""
    fields.setdefault("failed_revision", s.failed_revision)
    fields.setdefault("failures", s.failures)
    if s.returning:  # the stable revision is rendered: say why, until the spec changes
        fields.setdefault("rolled_back", s.rollback_reason or f"rolled back to revision {s.revision}")
    return Decision(transitions=(transition,), report=Report(slot), **fields)


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
