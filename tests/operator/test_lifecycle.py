"""Each transition of the driver's life cycle alone: a snapshot in, a decision out (no cluster)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from streamapp.operator import desired, errors, kafka_probe, lifecycle, status, transitions

NOW = "2026-01-01T00:20:00Z"
REV, OLD, STABLE = "r2", "r1", "r1"
A, B = "app-driver", "app-driver-b"
PODS = {0: {"metadata": {"name": A}}, 1: {"metadata": {"name": B}}}


def at(seconds_before_now: int) -> str:
    """A time ``seconds_before_now`` before NOW (negative: after it)."""
    total = 1200 - seconds_before_now
    return f"2026-01-01T00:{total // 60:02d}:{total % 60:02d}Z"


def driver(
    name: str = A,
    revision: str | None = REV,
    phase: str = "Running",
    *,
    ready: bool = True,
    age_s: float = 30.0,
    standby: bool = False,
    holds_lease: bool = False,
    unschedulable: str | None = None,
    **seen: Any,
) -> lifecycle.Driver:
    observed = status.DriverObservation(name=name, phase=phase, ready=ready, revision=revision, **seen)
    return lifecycle.Driver(observed, age_s, standby, holds_lease, unschedulable)


def snapshot(*drivers: lifecycle.Driver, **fields: Any) -> lifecycle.Snapshot:
    """One driver per slot, in order (slot 0 first); the wanted revision REV."""
    fields.setdefault("drivers", dict(enumerate(drivers)))
    base: dict[str, Any] = {
        "now": NOW,
        "revision": REV,
        "executors": 2,
        "credentials": None,
        "manifests": PODS,
    }
    return lifecycle.Snapshot(**{**base, **fields})


def rolling(*drivers: lifecycle.Driver, **fields: Any) -> lifecycle.Snapshot:
    return snapshot(*drivers, rolling=True, **fields)


def events(decision: lifecycle.Decision) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in decision.events]


# The recreate path.


def test_create_when_there_is_no_driver() -> None:
    d = transitions.decide(snapshot())
    assert d.transition == "create" and d.actions == (lifecycle.Create(PODS[0]),)
    assert events(d) == [("DriverCreated", f"driver Pod {A}: revision {REV}, 2 executors")]
    assert d.error is None and d.report == lifecycle.Report(0, "driver")


def test_keep_the_wanted_driver_and_a_starting_one() -> None:
    for running in (driver(), driver(phase="Pending", ready=False)):
        d = transitions.decide(snapshot(running))
        assert (d.transition, d.actions, d.events, d.error) == ("keep", (), (), None)


@pytest.mark.parametrize(
    ("seen", "fields", "why"),
    [
        (driver(revision=OLD), {}, f"revision {OLD} → new revision"),
        (driver(revision=OLD), {"previous_executors": 3}, "rescaling from 3 to 2 executors"),
        (driver(credentials="old"), {"credentials": "new"}, "the Kafka credentials in its Secrets changed"),
        (
            driver(revision=OLD, phase="Failed", message="exit 1"),
            {},
            "exit 1",
        ),  # another revision's: no back-off
    ],
)
def test_replace_on_a_new_revision_a_rescale_or_rotated_credentials(
    seen: lifecycle.Driver, fields: dict[str, Any], why: str
) -> None:
    d = transitions.decide(snapshot(seen, **fields))
    assert d.transition == "replace" and d.actions == (lifecycle.Delete(A, desired.GRACE_SECONDS),)
    assert events(d) == [("DriverReplaced", f"replacing driver Pod {A}: {why}")]
    assert isinstance(d.error, errors.DriverStopping) and d.error.delay == 5


def test_unreadable_credentials_are_no_rotation() -> None:
    assert transitions.decide(snapshot(driver(credentials="old"))).transition == "keep"


def test_wait_for_a_stopping_driver_and_say_so_unless_suspended() -> None:
    stopping = driver(revision=OLD, terminating=True)
    d = transitions.decide(snapshot(stopping))
    assert d.transition == "wait_stopping" and d.actions == ()
    assert (
        isinstance(d.error, errors.DriverStopping) and str(d.error) == f"waiting for driver Pod {A} to stop"
    )
    suspended = transitions.decide(snapshot(stopping, manifests={}))
    assert suspended.transition == "wait_stopping" and suspended.error is None


def test_suspend_stops_the_driver_and_then_keeps_none() -> None:
    d = transitions.decide(snapshot(driver(), manifests={}))
    assert d.transition == "suspend" and d.actions == (lifecycle.Delete(A),) and d.error is None
    assert events(d) == [("Suspending", f"stopping driver Pod {A}; the checkpoint is kept")]
    assert transitions.decide(snapshot(manifests={})).transition == "keep"


def crashed(*, started: str = at(5), finished: str = at(4), **fields: Any) -> lifecycle.Driver:
    return driver(phase="Failed", ready=False, message="exit 1", started=started, finished=finished, **fields)


def test_restart_after_a_first_crash_at_once_releasing_its_lease() -> None:
    d = transitions.decide(snapshot(crashed(holds_lease=True)))
    assert d.transition == "restart" and d.failures == 1
    assert d.actions == (lifecycle.Delete(A, release_lease=True),)
    assert events(d) == [("DriverReplaced", f"replacing driver Pod {A}: exit 1")]


def test_back_off_after_a_crash_in_a_row() -> None:
    d = transitions.decide(snapshot(crashed(), failures=1))  # ended 4 s ago; 10 s back-off
    assert d.transition == "back_off" and d.actions == () and d.failures == 1
    assert isinstance(d.error, errors.DriverBackOff) and d.error.delay == 6
    assert d.note is not None and "failed 2 times in a row" in d.note and "back-off 10 s" in d.note
    later = transitions.decide(snapshot(crashed(finished=at(10)), failures=1))
    assert later.transition == "restart" and later.failures == 2


def test_back_off_starts_again_after_a_long_run() -> None:
    long_run = crashed(started=at(700), finished=at(1))  # ran 699 s ≥ BACKOFF_RESET_SECONDS
    d = transitions.decide(snapshot(long_run, failures=5))
    assert d.transition == "restart" and d.failures == 1
    short_run = crashed(started=at(500), finished=at(1))
    assert transitions.decide(snapshot(short_run, failures=5)).transition == "back_off"


def test_a_crash_read_after_the_clock_counts_as_just_ended() -> None:
    """``now`` is read before the Pod: a finish time after it waits the whole back-off, no more."""
    first = transitions.decide(snapshot(crashed(finished=at(-1))))
    assert first.transition == "restart"
    again = transitions.decide(snapshot(crashed(finished=at(-1)), failures=1))
    assert again.transition == "back_off" and again.error is not None and again.error.delay == 10


def test_back_off_curve() -> None:
    assert [transitions.backoff_seconds(n) for n in range(8)] == [0, 10, 20, 40, 80, 160, 300, 300]


def test_a_driver_left_in_the_other_slot_is_stopped_before_the_current_one_is_decided() -> None:
    left = driver(B, OLD, "Failed", ready=False, holds_lease=True)
    d = transitions.decide(snapshot(driver(), left))
    assert d.transitions == ("stop_stale", "keep")
    assert d.actions == (lifecycle.Delete(B, release_lease=True),)
    assert events(d) == [("DriverReplaced", f"stopping driver Pod {B}: not the current one")]
    going = driver(B, OLD, terminating=True)
    assert transitions.decide(snapshot(driver(), going)).transitions == ("keep",)


def test_the_current_slot() -> None:
    assert lifecycle.current_slot({}, REV) == 0
    assert lifecycle.current_slot({0: driver(revision=OLD), 1: driver(B)}, REV) == 1
    assert lifecycle.current_slot({0: driver(revision=OLD, terminating=True), 1: driver(B, OLD)}, REV) == 1
    assert lifecycle.current_slot({1: driver(B, OLD, terminating=True)}, REV) == 1


# The rolling path: the old driver serves until the new one waits in standby.


def serving() -> lifecycle.Driver:
    return driver(revision=OLD)


def test_start_the_new_driver_beside_the_serving_one() -> None:
    d = transitions.decide(rolling(serving()))
    assert d.transition == "start_beside" and d.actions == (lifecycle.Create(PODS[1]),)
    assert d.report == lifecycle.Report(0, "serving")
    assert events(d)[0][0] == "RollingUpgrade" and f"{B} starts revision {REV} beside {A}" in events(d)[0][1]
    assert isinstance(d.error, errors.DriverStopping) and d.error.delay == 2


def test_wait_for_standby_then_hand_over() -> None:
    starting = driver(B, ready=False, age_s=299)
    waiting = transitions.decide(rolling(serving(), starting))
    assert (waiting.transition, waiting.actions) == ("wait_standby", ())
    assert isinstance(waiting.error, errors.DriverStopping)
    standby = dataclasses.replace(starting, standby=True)
    d = transitions.decide(rolling(serving(), standby))
    assert d.transition == "hand_over" and d.actions == (lifecycle.Delete(A),)
    assert events(d) == [
        ("HandingOver", f"driver Pod {B} waits in standby: stopping {A} at a micro-batch boundary")
    ]


def test_give_up_a_new_driver_that_ended() -> None:
    ended = driver(B, phase="Failed", ready=False, message="exit 3")
    d = transitions.decide(rolling(serving(), ended))
    failed = f"rolling upgrade to revision {REV} given up, {A} keeps running: exit 3"
    assert d.transition == "give_up" and d.actions == (lifecycle.Delete(B),) and d.error is None
    assert events(d) == [("RollbackUpgrade", failed)]
    assert (d.failed_revision, d.rolled_back, d.phase) == (REV, failed, "Running")


def test_give_up_past_the_deadline_saying_why_it_was_not_placed() -> None:
    on_time = driver(B, ready=False, age_s=90)
    assert (
        transitions.decide(rolling(serving(), on_time, progress_deadline_s=90)).transition == "wait_standby"
    )
    late = dataclasses.replace(on_time, age_s=91, unschedulable="Pod app-driver-b cannot be scheduled: full")
    d = transitions.decide(rolling(serving(), late, progress_deadline_s=90))
    assert d.transition == "give_up"
    assert d.rolled_back is not None and d.rolled_back.endswith(
        f"driver Pod {B} did not reach standby within 90 s (spec.deployment.progressDeadline): "
        "Pod app-driver-b cannot be scheduled: full — a rolling upgrade needs room for a second driver "
        "and its executors; make room, or use upgradePolicy: recreate"
    )


def test_keep_the_old_driver_after_a_give_up() -> None:
    d = transitions.decide(rolling(serving(), failed_revision=REV))
    assert (d.transition, d.actions, d.error, d.failed_revision) == ("keep_old", (), None, REV)
    assert d.rolled_back == f"rolling upgrade to revision {REV} was given up; revision {OLD} keeps running"
    said = transitions.decide(rolling(serving(), failed_revision=REV, rollback_reason="why, as said"))
    assert said.rolled_back == "why, as said"


def test_a_given_up_leftover_goes_before_the_next_revision_starts() -> None:
    leftover = driver(B, "r0", "Failed", ready=False)
    d = transitions.decide(rolling(serving(), leftover))
    assert d.transition == "wait_leftover" and d.actions == (lifecycle.Delete(B),)
    assert isinstance(d.error, errors.DriverStopping) and "waiting for app-driver-b (revision r0)" in str(
        d.error
    )
    going = transitions.decide(rolling(serving(), driver(B, "r0", terminating=True)))
    assert (going.transition, going.actions) == ("wait_leftover", ())


@pytest.mark.parametrize(
    "old",
    [driver(revision=OLD, ready=False), driver(revision=OLD, phase="Failed", ready=False)],
    ids=["not ready", "ended"],
)
def test_nothing_serving_to_keep_up_is_recreated(old: lifecycle.Driver) -> None:
    assert transitions.decide(rolling(old)).transition == "replace"


def test_two_old_drivers_running_are_recreated() -> None:
    d = transitions.decide(rolling(serving(), driver(B, "r0")))
    assert d.transitions == ("stop_stale", "replace")
    assert d.actions == (lifecycle.Delete(B), lifecycle.Delete(A))


def test_suspended_during_a_hand_over_stops_both_drivers() -> None:
    d = transitions.decide(rolling(serving(), driver(B, ready=False), manifests={}))
    assert d.transitions == ("stop_stale", "suspend")
    assert d.actions == (lifecycle.Delete(A), lifecycle.Delete(B))


def test_returning_to_the_stable_revision_through_a_hand_over_says_why() -> None:
    back = rolling(serving(), returning=True, failed_revision="r3", rollback_reason=None)
    d = transitions.decide(back)
    assert d.transition == "start_beside" and d.failed_revision == "r3"
    assert d.rolled_back == f"rolling back to revision {REV}"
    recreated = transitions.decide(snapshot(serving(), returning=True, failed_revision="r3"))
    assert recreated.transition == "replace" and recreated.rolled_back == f"rolled back to revision {REV}"


# Rolling back after the hand-over.


def test_roll_back_a_revision_that_ended_after_taking_over() -> None:
    ended = driver(phase="Failed", ready=False, message="exit 1")
    d = transitions.decide(snapshot(ended, stable=STABLE))
    failed = f"revision {REV} failed after the hand-over, returning to revision {STABLE}: exit 1"
    assert d.transition == "roll_back" and d.actions == () and events(d) == [("RollbackUpgrade", failed)]
    assert (d.failed_revision, d.rolled_back, d.report) == (REV, failed, lifecycle.Report(0, "failing"))
    assert isinstance(d.error, errors.DriverStopping) and d.error.delay == 1
    assert d.failures is None  # the status keeps its count
    assert transitions.decide(snapshot(ended, stable=REV)).transition == "restart"  # its own: a crash
    assert transitions.decide(snapshot(ended, stable=STABLE, returning=True)).transition == "restart"


def test_roll_back_a_revision_idle_past_its_deadline() -> None:
    waiting = kafka_probe.Standing(lag=40, batch_id=3, time=at(400))  # the stable driver's last batch
    idle = driver(age_s=60, started=at(60))
    assert transitions.decide(
        snapshot(idle, stable=STABLE, progress_deadline_s=60, standing=waiting)
    ).transition == ("keep")
    late = dataclasses.replace(idle, age_s=61)
    d = transitions.decide(snapshot(late, stable=STABLE, progress_deadline_s=60, standing=waiting))
    assert d.transition == "roll_back" and d.rolled_back is not None
    assert d.rolled_back.endswith(
        "has not completed a micro-batch yet; 40 records wait, 60 s after its start "
        "(spec.deployment.progressDeadline)"
    )
    processing = kafka_probe.Standing(lag=0, batch_id=4, time=NOW)
    assert transitions.decide(
        snapshot(late, stable=STABLE, standing=processing, progress_deadline_s=60)
    ).transition == ("keep")


def test_the_stable_revision_is_rendered_while_the_spec_s_is_given_up() -> None:
    assert lifecycle.returns_to_stable(failed_revision=REV, revision=REV, stable=STABLE)
    assert not lifecycle.returns_to_stable(failed_revision=REV, revision=REV, stable=None)
    assert not lifecycle.returns_to_stable(failed_revision=REV, revision=REV, stable=REV)
    assert not lifecycle.returns_to_stable(failed_revision="r0", revision=REV, stable=STABLE)


def test_a_stable_driver_that_crashes_before_the_upgrade_starts_is_not_blamed_on_the_new_revision() -> None:
    """The spec moved to REV while the stable driver (OLD) ran; OLD crashed before the rolling
    upgrade could start (nothing serving: the recreate path). REV has not run: it replaces OLD."""
    d = transitions.decide(rolling(driver(revision=OLD, phase="Failed", ready=False), stable=OLD))
    assert d.transition == "replace" and d.failed_revision is None


# Lost Nodes.


def test_evict_the_pods_of_lost_nodes_at_once() -> None:
    pods = [(A, "node-a"), ("app-exec-1", "node-a"), ("app-exec-2", "node-b"), ("app-exec-3", "")]
    deletes, said = lifecycle.evict(pods, {"node-a": "no longer exists", "node-b": None})
    assert deletes == (lifecycle.Delete(A, grace_seconds=0), lifecycle.Delete("app-exec-1", grace_seconds=0))
    assert [e.message for e in said] == [
        f"Pod {A} was on Node node-a, which no longer exists: deleted it to replace it",
        "Pod app-exec-1 was on Node node-a, which no longer exists: deleted it to replace it",
    ]
    assert all(e.reason == "NodeLost" and e.type == "Warning" for e in said)


# After acting: the status settles from the driver read again.


def test_a_reset_is_recorded_once_a_driver_of_its_revision_exists() -> None:
    s = snapshot(reset="r1", last_reset="r0")
    created = transitions.decide(s)
    pending = status.DriverObservation(name=A, phase="Pending", ready=False, revision=REV)
    assert lifecycle.settle(s, created, pending, ready=False).last_reset == "r1"
    old = dataclasses.replace(pending, revision=OLD)
    assert lifecycle.settle(s, created, old, ready=False).last_reset == "r0"
    assert lifecycle.settle(s, created, None, ready=False).last_reset == "r0"


def test_the_state_is_recorded_and_the_failures_cleared_by_the_running_driver() -> None:
    s = snapshot(driver(), failures=3)
    d = transitions.decide(s)
    runs = status.DriverObservation(name=A, phase="Running", ready=True, revision=REV)
    settled = lifecycle.settle(s, d, runs, ready=True)
    assert settled.records_state and settled.failures == 0
    starting = dataclasses.replace(runs, phase="Pending")
    assert lifecycle.settle(s, d, starting, ready=False) == lifecycle.Settled(None, False, 3, False)


def test_the_first_own_batch_of_a_rolling_revision_records_it_as_stable() -> None:
    runs = status.DriverObservation(name=A, phase="Running", ready=True, revision=REV)

    def records(**fields: Any) -> bool:
        s = rolling(driver(), **fields)
        return lifecycle.settle(s, transitions.decide(s), runs, ready=True).record_stable

    own = kafka_probe.Standing(lag=0, batch_id=1, time=NOW, by=A)
    assert records(standing=own) and records(standing=dataclasses.replace(own, by=None))
    assert not records(standing=dataclasses.replace(own, by=B))  # its predecessor's batch
    assert not records(standing=None) and not records(standing=own, stable=REV)  # unknown; recorded
    assert not records(standing=own, returning=True, failed_revision="r3")


def test_a_hand_over_and_a_roll_back_settle_nothing() -> None:
    s = rolling(serving(), driver(B, ready=False), failures=2, reset="r1", last_reset="r0")
    d = transitions.decide(s)
    old = status.DriverObservation(name=A, phase="Running", ready=True, revision=OLD)
    assert lifecycle.settle(s, d, old, ready=True) == lifecycle.Settled("r0", False, 2, False)


def test_driver_action_on_a_rendered_app() -> None:
    wanted = desired.Desired(revision=REV, executors=2, credentials=None, support=[], driver=PODS[0])
    seen = status.DriverObservation(name=A, phase="Running", ready=True, revision=OLD)
    assert transitions.driver_action(wanted=wanted, seen=seen) == "delete"
    assert transitions.driver_action(wanted=wanted, seen=None) == "create"
    assert transitions.driver_action(wanted=dataclasses.replace(wanted, driver=None), seen=None) == "keep"
