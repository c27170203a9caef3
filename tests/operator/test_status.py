"""Status transitions: conditions, phase and revisions from what the operator wanted and saw."""

from __future__ import annotations

from typing import Any

import pytest

from streamapp.operator import kafka_probe, status
from streamapp.runtime import errors as runtime_errors

NOW, LATER = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"
TARGET = status.Target(generation=3, revision="r2", executors=4)


def _driver(phase: str = "Running", *, ready: bool = True, revision: str = "r2", **kw: Any) -> Any:
    return status.DriverObservation(name="app-driver", phase=phase, ready=ready, revision=revision, **kw)


def _conditions(result: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in result["conditions"]}


@pytest.mark.parametrize(
    ("target", "driver", "phase", "ready", "progressing", "degraded"),
    [
        (TARGET, None, "Pending", "DriverMissing", ("True", "Deploying"), "False"),
        (
            TARGET,
            _driver("Pending", ready=False),
            "Pending",
            "DriverStarting",
            ("True", "Deploying"),
            "False",
        ),
        (TARGET, _driver(), "Running", "DriverRunning", ("False", "Deployed"), "False"),
        (TARGET, _driver(revision="r1"), "Upgrading", "DriverRunning", ("True", "Restarting"), "False"),
        (TARGET, _driver("Failed", ready=False), "Failed", "DriverFailed", ("True", "Restarting"), "True"),
        (TARGET, _driver("Succeeded", ready=False), "Failed", "DriverFailed", ("True", "Restarting"), "True"),
        (
            status.Target(generation=3, revision="r2", executors=4, suspend=True),
            _driver(terminating=True),
            "Suspended",
            "Suspending",
            ("True", "Stopping"),
            "False",
        ),
        (
            status.Target(generation=3, revision="r2", executors=4, suspend=True),
            None,
            "Suspended",
            "Suspended",
            ("False", "Suspended"),
            "False",
        ),
    ],
)
def test_transitions(
    target: status.Target,
    driver: status.DriverObservation | None,
    phase: str,
    ready: str,
    progressing: tuple[str, str],
    degraded: str,
) -> None:
    caught_up = kafka_probe.Standing(lag=0)  # a running driver is Ready only once it processes
    seen = status.Observation(driver, standing=caught_up)
    result = status.compute(previous=None, target=target, seen=seen, now=NOW)
    conditions = _conditions(result)
    assert result["phase"] == phase
    assert conditions["Ready"][1] == ready
    assert conditions["Ready"][0] == ("True" if phase == "Running" or ready == "DriverRunning" else "False")
    assert conditions["Progressing"] == progressing
    assert conditions["Degraded"][0] == degraded
    assert result["observedGeneration"] == 3


def test_invalid_spec_names_the_field_and_keeps_a_running_app_ready() -> None:
    problems = [runtime_errors.Problem("spec.topology.streams[0].steps[1].filter", "not a valid expression")]
    target = status.Target(generation=4, revision=None, executors=None, problems=problems)
    previous = {
        "phase": "Running",
        "currentRevision": "r2",
        "targetRevision": "r2",
        "executors": {"desired": 4},
    }
    result = status.compute(previous=previous, target=target, seen=status.Observation(_driver()), now=NOW)
    degraded = next(c for c in result["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidSpec")
    assert degraded["message"] == "spec.topology.streams[0].steps[1].filter: not a valid expression"
    assert result["message"] == degraded["message"]
    assert result["phase"] == "Running"
    assert _conditions(result)["Ready"] == ("True", "DriverRunning")
    assert (result["currentRevision"], result["targetRevision"]) == ("r2", "r2")
    assert result["executors"]["desired"] == 4
    assert result["observedGeneration"] == 4


def test_invalid_spec_without_a_driver_is_failed() -> None:
    problems = [runtime_errors.Problem("spec.kafka.bootstrapServers", "required in a cluster")]
    target = status.Target(generation=1, revision=None, executors=None, problems=problems)
    result = status.compute(previous=None, target=target, seen=status.Observation(None), now=NOW)
    assert result["phase"] == "Failed"
    assert _conditions(result)["Ready"] == ("False", "InvalidSpec")


def test_transition_time_moves_only_when_the_status_changes() -> None:
    processing = status.Observation(_driver(), standing=kafka_probe.Standing(lag=0))
    first = status.compute(previous=None, target=TARGET, seen=processing, now=NOW)
    again = status.compute(previous=first, target=TARGET, seen=processing, now=LATER)
    assert [c["lastTransitionTime"] for c in again["conditions"]] == [NOW, NOW, NOW]
    failed = status.compute(
        previous=again, target=TARGET, seen=status.Observation(_driver("Failed", ready=False)), now=LATER
    )
    times = {c["type"]: c["lastTransitionTime"] for c in failed["conditions"]}
    assert times == {"Ready": LATER, "Progressing": LATER, "Degraded": LATER}


def test_counts_and_revisions() -> None:
    seen = status.Observation(_driver(revision="r1"), executors_ready=2, partitions=12)
    result = status.compute(previous=None, target=TARGET, seen=seen, now=NOW)
    assert result["executors"] == {"desired": 4, "ready": 2}
    assert result["inputPartitions"] == 12
    assert (result["currentRevision"], result["targetRevision"]) == ("r1", "r2")
    assert result["driverPod"] == "app-driver"


def test_a_failed_drivers_message_says_why() -> None:
    driver = _driver("Failed", ready=False, message="driver container ended: Error (exit code 1)")
    result = status.compute(previous=None, target=TARGET, seen=status.Observation(driver), now=NOW)
    assert result["message"] == "driver container ended: Error (exit code 1)"


STARTED = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("standing", "now", "ready"),
    [
        (None, "2026-01-01T00:01:00Z", ("False", "NoRecentBatch")),  # runs, never completed a batch
        (kafka_probe.Standing(lag=0), "2026-01-01T00:01:00Z", ("True", "DriverRunning")),  # caught up
        # Records wait and the last batch is from before this driver started (the one it replaced).
        (
            kafka_probe.Standing(lag=5, time="2025-12-31T23:59:50.000Z"),
            "2026-01-01T00:00:30Z",
            ("False", "NoRecentBatch"),
        ),
        (
            kafka_probe.Standing(lag=5, time="2026-01-01T00:00:20.000Z"),
            "2026-01-01T00:00:30Z",
            ("True", "DriverRunning"),
        ),
        # Records wait and no batch for longer than STALL_SECONDS: running, not processing.
        (
            kafka_probe.Standing(lag=5, time="2026-01-01T00:00:20.000Z"),
            "2026-01-01T00:10:00Z",
            ("False", "NoRecentBatch"),
        ),
    ],
)
def test_ready_means_a_micro_batch_completed_recently(
    standing: kafka_probe.Standing | None, now: str, ready: tuple[str, str]
) -> None:
    driver = _driver(started=STARTED)
    result = status.compute(
        previous=None, target=TARGET, seen=status.Observation(driver, standing=standing), now=now
    )
    assert _conditions(result)["Ready"] == ready
    assert result["phase"] == "Running"
    assert _conditions(result)["Progressing"] == ("False", "Deployed")
    assert _conditions(result)["Degraded"][0] == "False"


def test_failing_executors_show_degraded_with_their_exit_code_until_all_run() -> None:
    failure = "executor Pod app-exec-3: container ended: Error (exit code 1)"
    standing = kafka_probe.Standing(lag=0)
    failing = status.Observation(
        _driver(), executors_ready=2, executor_failures=(failure,), standing=standing
    )
    result = status.compute(previous=None, target=TARGET, seen=failing, now=NOW)
    assert _conditions(result)["Degraded"] == ("True", "ExecutorsFailing")
    assert _conditions(result)["Ready"] == ("False", "ExecutorsFailing")
    assert result["message"] == f"1 executor Pod failed; last: {failure}"
    # Spark replaced the failed one and all 4 run: the failure that was is no longer news.
    replaced = status.Observation(
        _driver(), executors_ready=4, executor_failures=(failure,), standing=standing
    )
    healed = status.compute(previous=result, target=TARGET, seen=replaced, now=LATER)
    assert _conditions(healed)["Degraded"] == ("False", "DriverRunning")
    assert _conditions(healed)["Ready"] == ("True", "DriverRunning")
