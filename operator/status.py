"""The status the operator writes, as a pure function of what it wanted and what it saw.

Conditions follow the Kubernetes convention: ``Ready`` (the driver of the current spec runs and
processes: it completed a micro-batch since it started, recently, or nothing waits for it),
``Progressing`` (the operator is moving the app somewhere: deploying, replacing, stopping) and
``Degraded`` (something needs a human: an invalid spec, a failed driver — kept, with its exit
code, until a replacement processes again). A condition's
``lastTransitionTime`` only moves when its status does, so watchers can tell flapping from news.
The phase is the one-word summary ``kubectl get`` shows.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from streamapp.operator import kafka_probe
from streamapp.runtime import errors as runtime_errors

__all__ = [
    "ENDED",
    "DriverObservation",
    "Observation",
    "Target",
    "compute",
    "condition",
    "format_time",
    "not_processing",
    "parse_time",
    "rollback_reason",
    "say_rolled_back",
]

#: A driver that exited, even with 0, has stopped processing: a streaming query does not finish.
ENDED = ("Failed", "Succeeded")
#: Records waiting and no micro-batch for this long: the driver runs but does not process.
STALL_SECONDS = 120


@dataclasses.dataclass(frozen=True)
class DriverObservation:
    """The driver Pod as last read from the API server."""

    name: str
    phase: str  # Pending, Running, Succeeded, Failed, Unknown
    ready: bool
    revision: str | None
    terminating: bool = False
    message: str | None = None  # why it is waiting or how it ended (reason, exit code)
    credentials: str | None = None  # digest of the Kafka credentials it was started with
    started: str | None = None  # when the Pod started (status.startTime, RFC 3339)
    finished: str | None = None  # when its container ended (state.terminated.finishedAt)


@dataclasses.dataclass(frozen=True)
class Observation:
    driver: DriverObservation | None
    executors_ready: int = 0
    #: How the current driver's failed executor Pods ended ("executor Pod x: container ended: …").
    executor_failures: Sequence[str] = ()
    partitions: int | None = None
    #: The app's progress as its driver last committed it to Kafka; None: unknown or none yet.
    standing: kafka_probe.Standing | None = None


@dataclasses.dataclass(frozen=True)
class Target:
    """What the operator wants; ``revision`` is None when the spec is invalid."""

    generation: int | None
    revision: str | None
    executors: int | None
    suspend: bool = False
    problems: Sequence[runtime_errors.Problem] = ()
    #: Why ``problems`` refuse the spec: ``InvalidSpec``, or ``IncompatibleState`` (the running
    #: checkpoint's state cannot be read by the new topology).
    refused: str = "InvalidSpec"


def condition(
    previous: Mapping[str, Any] | None, *, type_: str, status: bool, reason: str, message: str, now: str
) -> dict[str, Any]:
    """One condition, keeping the previous transition time when the status did not change."""
    value = "True" if status else "False"
    since = now
    for old in (previous or {}).get("conditions") or []:
        if old.get("type") == type_ and old.get("status") == value and old.get("lastTransitionTime"):
            since = old["lastTransitionTime"]
    return {"type": type_, "status": value, "reason": reason, "message": message, "lastTransitionTime": since}


@dataclasses.dataclass(frozen=True)
class _Verdict:
    phase: str
    ready: tuple[bool, str, str]
    progressing: tuple[bool, str, str]
    degraded: tuple[bool, str, str]


def _problems_text(problems: Sequence[runtime_errors.Problem]) -> str:
    shown = "; ".join(str(p) for p in problems[:5])
    return shown + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")


def format_time(when: datetime.datetime) -> str:
    """A time as the status writes it (RFC 3339, whole seconds, UTC): :func:`parse_time` reads it."""
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def not_processing(driver: DriverObservation, standing: kafka_probe.Standing | None, now: str) -> str | None:
    """Why a running driver is not Ready yet (None: it processes).

    Evidence is the progress the driver commits after each micro-batch: a batch completed since
    this Pod started and not long ago, or nothing waiting (lag 0). A Pod that merely runs — a JVM
    still starting, a query stuck — is not Ready.
    """
    if standing is None:
        return f"driver Pod {driver.name} runs; no micro-batch has completed yet"
    if standing.lag == 0:
        return None
    if standing.by is not None and standing.by != driver.name:
        return (
            f"driver Pod {driver.name} has not completed a micro-batch yet (the last was {standing.by}'s); "
            f"{standing.lag} records wait"
        )
    last, started, clock = parse_time(standing.time), parse_time(driver.started), parse_time(now)
    if last is None or (started is not None and last < started):
        return f"driver Pod {driver.name} has not completed a micro-batch yet; {standing.lag} records wait"
    if clock is not None and (clock - last).total_seconds() > STALL_SECONDS:
        idle = (clock - last).total_seconds()
        return f"no micro-batch for {idle:.0f} s while {standing.lag} records wait"
    return None


def _verdict(target: Target, seen: Observation, previous: Mapping[str, Any], now: str) -> _Verdict:
    driver = seen.driver
    running = driver is not None and driver.phase == "Running" and driver.ready and not driver.terminating
    if target.problems:
        text = _problems_text(target.problems)
        if running:
            untouched = "the running driver is left untouched"
        elif driver is not None:
            untouched = f"driver Pod {driver.name} ({driver.phase}) is left as it is"
        else:
            untouched = "nothing was deployed"
        why = target.refused
        waiting = (
            "waiting for a valid spec" if why == "InvalidSpec" else "waiting for a compatible spec or a reset"
        )
        return _Verdict(
            phase=str(previous.get("phase") or "Running") if running else "Failed",
            ready=(running, "DriverRunning" if running else why, untouched),
            progressing=(False, why, waiting),
            degraded=(True, why, text),
        )
    if target.suspend:
        if driver is None:
            return _Verdict(
                phase="Suspended",
                ready=(False, "Suspended", "suspended; the checkpoint is kept"),
                progressing=(False, "Suspended", "suspended"),
                degraded=(False, "Suspended", ""),
            )
        return _Verdict(
            phase="Suspended",
            ready=(False, "Suspending", f"stopping driver Pod {driver.name}"),
            progressing=(True, "Stopping", f"driver Pod {driver.name} stops at a micro-batch boundary"),
            degraded=(False, "Suspending", ""),
        )
    if driver is None:
        return _Verdict(
            phase="Pending",
            ready=(False, "DriverMissing", "no driver Pod yet"),
            progressing=(True, "Deploying", f"creating the driver Pod of revision {target.revision}"),
            degraded=(False, "Deploying", ""),
        )
    if driver.revision != target.revision:
        return _Verdict(
            phase="Upgrading",
            ready=(running, "DriverRunning" if running else "DriverStopping", f"driver Pod {driver.name}"),
            progressing=(
                True,
                "Restarting",
                f"replacing driver revision {driver.revision} with {target.revision}",
            ),
            degraded=(False, "Restarting", ""),
        )
    if driver.phase in ENDED:
        how = driver.message or f"driver Pod {driver.name} ended ({driver.phase})"
        return _Verdict(
            phase="Failed",
            ready=(False, "DriverFailed", how),
            progressing=(True, "Restarting", "a new driver Pod resumes from the checkpoint"),
            degraded=(True, "DriverFailed", how),
        )
    if running and seen.executor_failures and target.executors and seen.executors_ready < target.executors:
        failures = seen.executor_failures
        pods = "1 executor Pod" if len(failures) == 1 else f"{len(failures)} executor Pods"
        how = f"{pods} failed; last: {failures[-1]}"
        return _Verdict(
            phase="Running",
            ready=(False, "ExecutorsFailing", how),
            progressing=(False, "Deployed", f"revision {target.revision} is deployed"),
            degraded=(True, "ExecutorsFailing", how),
        )
    if running and driver is not None and (idle := not_processing(driver, seen.standing, now)):
        return _Verdict(
            phase="Running",
            ready=(False, "NoRecentBatch", idle),
            progressing=(False, "Deployed", f"revision {target.revision} is deployed"),
            degraded=(False, "DriverRunning", ""),
        )
    if running:
        return _Verdict(
            phase="Running",
            ready=(True, "DriverRunning", f"driver Pod {driver.name} runs revision {target.revision}"),
            progressing=(False, "Deployed", f"revision {target.revision} is deployed"),
            degraded=(False, "DriverRunning", ""),
        )
    waiting = driver.message or f"driver Pod {driver.name} is {driver.phase}"
    return _Verdict(
        phase="Pending",
        ready=(False, "DriverStarting", waiting),
        progressing=(True, "Deploying", waiting),
        degraded=(False, "DriverStarting", ""),
    )


def _still_failed(verdict: _Verdict, target: Target, previous: Mapping[str, Any]) -> _Verdict:
    """A driver that failed keeps the app Degraded (with how it ended) until a driver processes.

    Its replacement starting is no recovery: a crash loop would otherwise flip Degraded on and
    off between attempts, and the exit code would be gone from the status when anyone looks.
    """
    conditions: list[Mapping[str, Any]] = previous.get("conditions") or []
    before: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "Degraded"), {})
    failed = before.get("status") == "True" and before.get("reason") == "DriverFailed"
    if not failed or verdict.degraded[0] or verdict.ready[0] or target.suspend or target.problems:
        return verdict
    return dataclasses.replace(verdict, degraded=(True, "DriverFailed", str(before.get("message") or "")))


def compute(
    *, previous: Mapping[str, Any] | None, target: Target, seen: Observation, now: str
) -> dict[str, Any]:
    """The full status (camelCase, as the CRD stores it) to write over ``previous``."""
    previous = previous or {}
    verdict = _still_failed(_verdict(target, seen, previous, now), target, previous)
    conditions = [
        condition(previous, type_=name, status=value[0], reason=value[1], message=value[2], now=now)
        for name, value in (
            ("Ready", verdict.ready),
            ("Progressing", verdict.progressing),
            ("Degraded", verdict.degraded),
        )
    ]
    driver = seen.driver
    current = previous.get("currentRevision")
    if driver is not None and driver.phase == "Running" and not driver.terminating:
        current = driver.revision
    elif target.suspend and driver is None:
        current = None
    status: dict[str, Any] = {
        "phase": verdict.phase,
        "conditions": conditions,
        "observedGeneration": target.generation,
        "currentRevision": current,
        "targetRevision": target.revision if target.revision else previous.get("targetRevision"),
        "executors": {
            "desired": target.executors
            if target.executors is not None
            else (previous.get("executors") or {}).get("desired"),
            "ready": seen.executors_ready,
        },
        "inputPartitions": seen.partitions
        if seen.partitions is not None
        else previous.get("inputPartitions"),
        "driverPod": driver.name if driver else None,
        "message": _message(verdict),
        **_progress(seen.standing, previous),
    }
    return status


def _progress(standing: kafka_probe.Standing | None, previous: Mapping[str, Any]) -> dict[str, Any]:
    """Lag, throughput and last batch time; the last known values while Kafka cannot be read."""
    if standing is None:
        return {key: previous.get(key) for key in ("lag", "throughput", "lastBatchTime")}
    return {
        "lag": standing.lag,
        "throughput": None if standing.rate is None else f"{standing.rate:.1f} records/s",
        "lastBatchTime": standing.time,
    }


def _message(verdict: _Verdict) -> str:
    for active, _reason, text in (verdict.degraded, verdict.progressing, verdict.ready):
        if active and text:
            return text
    return verdict.ready[2]


def rollback_reason(previous: Mapping[str, Any]) -> str | None:
    """Why the spec's revision was given up, as the status said it (it stays until the spec changes)."""
    return next(
        (
            c.get("message")
            for c in previous.get("conditions") or []
            if c.get("type") == "Degraded" and c.get("reason") == "RollbackUpgrade"
        ),
        None,
    )


def say_rolled_back(new: dict[str, Any], message: str) -> None:
    """Degraded and Progressing say why the spec's revision was given up, until the spec changes."""
    for cond in new["conditions"]:
        if cond["type"] in ("Degraded", "Progressing"):
            cond.update(
                status="True" if cond["type"] == "Degraded" else "False",
                reason="RollbackUpgrade",
                message=message,
            )
    new["message"] = message
