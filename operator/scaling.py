"""How many executors an app gets: one task slot per input partition, within the spec's bounds,
or with ``spec.deployment.autoscale`` as many as its load needs, up to that.

A Kafka source reads each partition in one task per micro-batch, so slots beyond the partition
count idle and fewer slots serialise partitions: the partition count per core is the ceiling
either way. The rules are pure functions of their inputs (the status carries the autoscaler's
recent recommendations from one reconciliation to the next), so the table tests pin them.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Mapping, Sequence
from typing import Any

from streamapp.operator import kafka_probe, status
from streamapp.runtime.manifest import deployment

__all__ = [
    "SAMPLE_SECONDS",
    "TOLERANCE",
    "Arrival",
    "Load",
    "Scaled",
    "Sized",
    "arrival",
    "autoscale",
    "desired_executors",
    "sample_seconds",
    "size",
    "total_partitions",
]


def total_partitions(partitions: Mapping[str, int] | None) -> int | None:
    """Partitions over all input topics; None when they are unknown (Kafka not reached yet)."""
    if partitions is None:
        return None
    return sum(partitions.values())


def desired_executors(bounds: deployment.Executors, partitions: int | None) -> int:
    """``clamp(ceil(partitions / coresPerExecutor), min, max)``, or ``replicas`` when it is pinned.

    Unknown partitions give ``min``: the app starts small rather than not at all.
    """
    if bounds.replicas is not None:
        return bounds.replicas
    if not partitions:
        return bounds.min
    wanted = math.ceil(partitions / bounds.cores_per_executor)
    return max(bounds.min, min(bounds.max, wanted))


#: A demand within 10% of what the current executors are sized for keeps them (the
#: HorizontalPodAutoscaler's tolerance): small wobbles of the rate never recommend a change.
TOLERANCE = 0.1


@dataclasses.dataclass(frozen=True)
class Load:
    """The input's arrival rate (records/s, :func:`arrival`) and the records the app is behind."""

    rate: float
    lag: int


#: Input samples closer together than a quarter of the stabilization window, within these bounds,
#: keep the older one: a rate over a few seconds (Pod events reconcile often during a hand-over,
#: and the reconciliation's clock counts whole seconds) would swing with every producer batch,
#: while a sample much longer than a quarter window would delay a scale-up past the window.
SAMPLE_SECONDS = (5.0, 10.0)


def sample_seconds(policy: deployment.Autoscale) -> float:
    """How far apart input samples are: a quarter of the window, between 5 and 10 s."""
    low, high = SAMPLE_SECONDS
    return max(low, min(high, policy.window_s() / 4))


@dataclasses.dataclass(frozen=True)
class Arrival:
    """The input's end offsets added up at ``time``, and the records/s written since the sample
    before (None for the first)."""

    time: datetime.datetime
    end: int
    rate: float | None = None


def arrival(
    before: Arrival | None, end: int | None, now: datetime.datetime, *, every: float = SAMPLE_SECONDS[1]
) -> Arrival | None:
    """The next input sample: ``before`` until ``every`` seconds have passed, then the growth
    of ``end`` since it. The rate records arrive at is the demand; the rate the app processed them
    is not — while a backlog drains it is higher, and the lag already counts the backlog.

    An ``end`` lower than before (the topic was recreated) starts afresh.
    """
    if end is None:
        return before
    if before is None or end < before.end:
        return Arrival(now, end)
    elapsed = (now - before.time).total_seconds()
    if elapsed < every:
        return before
    return Arrival(now, end, (end - before.end) / elapsed)


@dataclasses.dataclass(frozen=True)
class Scaled:
    """The executors to run, the recommendations to remember, and why (for the status and event)."""

    executors: int
    recommendations: list[tuple[datetime.datetime, int]]
    reason: str


def _recommend(
    bounds: deployment.Executors, policy: deployment.Autoscale, load: Load, current: int, ceiling: int
) -> tuple[int, str]:
    capacity = policy.records_per_second_per_core * bounds.cores_per_executor
    excess = max(0, load.lag - policy.target_lag)
    demand = load.rate + excess / policy.window_s()
    wanted = math.ceil(demand / capacity) if demand > 0 else bounds.min
    if current > 0 and abs(demand / (current * capacity) - 1) <= TOLERANCE:
        wanted = current
    why = (
        f"arriving {load.rate:.1f} records/s, lag {load.lag} (target {policy.target_lag}): demand "
        f"{demand:.1f} records/s at {capacity} per executor"
    )
    return max(bounds.min, min(ceiling, wanted)), why


def autoscale(
    bounds: deployment.Executors,
    policy: deployment.Autoscale,
    *,
    partitions: int | None,
    current: int | None,
    load: Load | None,
    recommendations: Sequence[tuple[datetime.datetime, int]],
    now: datetime.datetime,
    steady: bool,
) -> Scaled:
    """The executor count under ``policy``: between ``bounds.min`` and the partition-based size.

    Each call adds a recommendation from ``load``; the count rises to the lowest recommendation of
    the last quarter window when all of them are higher, and falls to the highest of the whole
    window when all of those are lower — each only once recommendations cover that span. A change
    starts the recommendations afresh (they were made for the old count), and ``steady`` false (a
    rollout, or a driver that does not process yet) adds none and changes nothing: the figures of
    a hand-over (its output gap, its catching up) never decide the next rescale.
    """
    ceiling = desired_executors(bounds, partitions)
    if current is None:
        return Scaled(ceiling, [], "no executor count yet: one task slot per input partition")
    current = max(bounds.min, min(ceiling, current))
    window = datetime.timedelta(seconds=policy.window_s())
    kept = [(t, n) for t, n in recommendations if now - t <= window]
    if load is None:
        return Scaled(current, kept, "the app's rate and lag are not known yet")
    recommended, why = _recommend(bounds, policy, load, current, ceiling)
    if not steady:
        return Scaled(current, kept, f"{why}; recommends {recommended}, waiting for the rollout")
    kept.append((now, recommended))
    span = now - kept[0][0]  # how long the recommendations cover (a little slack for the timer)
    recent = [n for t, n in kept if now - t <= window / 4]
    if span >= window / 4 * 0.9 and min(recent) > current:
        return Scaled(min(recent), [], f"{why}: scale up")
    if span >= window * 0.9 and max(n for _, n in kept) < current:
        return Scaled(max(n for _, n in kept), [], f"{why}: scale down")
    return Scaled(current, kept, f"{why}; recommends {recommended}")


@dataclasses.dataclass(frozen=True)
class Sized:
    """One reconciliation's sizing: the executors, the autoscaler's status (None without
    autoscale) and, when the autoscaler changed the count, why (the Autoscaled event)."""

    executors: int
    status: dict[str, Any] | None = None
    change: str | None = None


def size(
    plan: deployment.Deployment,
    *,
    partitions: int | None,
    standing: kafka_probe.Standing | None,
    previous: Mapping[str, Any],
    drivers: int,
    now: str,
) -> Sized:
    """The executors to run: :func:`desired_executors`, or with autoscale :func:`autoscale` fed
    from and written back to the status (``previous``: its recommendations and last input sample;
    steady while the app is Ready and Running its target revision with ``drivers`` driver Pods: 1)."""
    if plan.autoscale is None:
        return Sized(desired_executors(plan.executors, partitions))
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
        and drivers == 1
    )
    sample = before.get("input") or {}
    sampled = status.parse_time(sample.get("time"))
    last = None
    if sampled is not None and isinstance(sample.get("end"), int):
        last = Arrival(sampled, sample["end"], sample.get("rate"))
    end = standing.end if standing is not None else None
    arrived = arrival(last, end, clock, every=sample_seconds(plan.autoscale))
    load = None
    if standing is not None and arrived is not None and arrived.rate is not None:
        load = Load(rate=arrived.rate, lag=standing.lag)
    scaled = autoscale(
        plan.executors, plan.autoscale, partitions=partitions, current=current, load=load,
        recommendations=remembered, now=clock, steady=steady,
    )  # fmt: skip
    change = None
    if current is not None and scaled.executors != current:
        change = f"executors {current} → {scaled.executors}: {scaled.reason}"
    return Sized(scaled.executors, _status(scaled, arrived), change)


def _status(scaled: Scaled, arrived: Arrival | None) -> dict[str, Any]:
    """The autoscaler's part of the status, as :func:`size` reads it back next time."""
    sampled = None
    if arrived is not None:
        rate = None if arrived.rate is None else round(arrived.rate, 2)
        sampled = {"time": status.format_time(arrived.time), "end": arrived.end, "rate": rate}
    return {
        "reason": scaled.reason,
        "recommendations": [
            {"time": status.format_time(when), "executors": n} for when, n in scaled.recommendations
        ],
        "input": sampled,
    }
