"""Which transition a :class:`lifecycle.Snapshot` calls for, and what it does: :func:`decide`, the
recreate path's transitions and the back-off here, the rolling path's in :mod:`rolling`.

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
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from streamapp.operator import desired, errors, rolling, status
from streamapp.operator.lifecycle import (
    Create,
    Decision,
    Delete,
    Driver,
    Event,
    Snapshot,
    Transition,
    current_slot,
    decision_for,
)

__all__ = [
    "BACKOFF_MAX_SECONDS",
    "BACKOFF_RESET_SECONDS",
    "DriverAction",
    "backoff_seconds",
    "decide",
    "driver_action",
]

DriverAction = Literal["create", "delete", "keep", "wait"]

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


def decide(s: Snapshot) -> Decision:
    """The transition ``s`` calls for (the table in this module's docstring, top to bottom)."""
    slot = current_slot(s.drivers, s.revision)
    if s.rolling and s.wants_driver:
        rolled = rolling.decide(s)
        if rolled is not None:
            return rolled
    prefix = stop_stale(s, slot)
    seen = s.drivers.get(slot)
    if not s.returning and s.stable is not None and s.stable != s.revision:
        why = rolling.failed_after_hand_over(s, seen)
        if why is not None:
            return _after(prefix, rolling.roll_back(s, slot, why))
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
    return decision_for(s, "create", slot, actions=(pod,), events=(Event("Normal", "DriverCreated", said),))


def keep(s: Snapshot, slot: int) -> Decision:
    """Nothing to do: the wanted driver runs or starts (or, suspended, none is left)."""
    return decision_for(s, "keep", slot)


def wait_stopping(s: Snapshot, slot: int) -> Decision:
    """A driver still terminates: the next starts once it is gone (one driver per checkpoint)."""
    name = s.drivers[slot].seen.name
    stopping = errors.DriverStopping(f"waiting for driver Pod {name} to stop", delay=5)
    return decision_for(s, "wait_stopping", slot, error=stopping if s.wants_driver else None)


def suspend(s: Snapshot, slot: int) -> Decision:
    """Suspended: stop the driver gracefully; the checkpoint is kept."""
    seen = s.drivers[slot].seen
    said = Event("Normal", "Suspending", f"stopping driver Pod {seen.name}; the checkpoint is kept")
    return decision_for(s, "suspend", slot, actions=(_delete(s.drivers[slot]),), events=(said,))


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
    return decision_for(
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
    return decision_for(s, "back_off", slot, error=error, failures=failures, note=str(error))


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
    return decision_for(
        s, "stop_stale", slot,
        actions=tuple(_delete(d) for d in stale),
        events=tuple(Event("Normal", "DriverReplaced", text) for text in said),
    )  # fmt: skip
