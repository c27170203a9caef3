"""The rolling path of :func:`transitions.decide` (``upgradePolicy: rolling``): the hand-over's
transitions, from ``keep_old`` to ``wait_standby``, and ``roll_back`` when the wanted revision
fails after it took over."""

from __future__ import annotations

import dataclasses
from typing import Any

from streamapp.operator import errors, status
from streamapp.operator.lifecycle import (
    Create,
    Decision,
    Delete,
    Driver,
    Event,
    Report,
    Snapshot,
    Transition,
    decision_for,
)

__all__ = ["decide", "failed_after_hand_over", "roll_back"]


# The rolling path: the new revision starts beside the old one, which serves until the hand-over.


def decide(s: Snapshot) -> Decision | None:
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
    return dataclasses.replace(decision_for(s, transition, old, **fields), report=Report(old, "serving"))


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


def failed_after_hand_over(s: Snapshot, found: Driver | None) -> str | None:
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
    reconciliation render the stable revision (:func:`lifecycle.returns_to_stable`), which replaces it."""
    failed = f"revision {s.revision} failed after the hand-over, returning to revision {s.stable}: {why}"
    return Decision(
        transitions=("roll_back",),
        report=Report(slot, "failing"),
        failed_revision=s.revision,
        events=(Event("Warning", "RollbackUpgrade", failed),),
        error=errors.DriverStopping(f"rolling back to revision {s.stable}", delay=1),
        rolled_back=failed,
    )
