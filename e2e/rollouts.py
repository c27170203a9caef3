"""Redeploys under continuous input, and what the output shows: shared by the rolling-upgrade e2e
test (``make test``) and the five-redeploy comparison (``make bench-rollouts``).

:class:`Feed` writes one new word every ``interval`` seconds; under a word count each word's count,
1, is one output record, so the output topic (``LogAppendTime``) carries a clock of the app's
output. :func:`measure` reads it back: the longest gap between consecutive output records in a
window of time, and against the words sent, how many were lost or counted twice.
:class:`LeaseWatch` records every change of the app's Lease holder as the API server sends it
(``kubectl get lease -w``): the fence two drivers must never share. :func:`load_step` raises a
feed's rate and lowers it again under ``spec.deployment.autoscale`` and samples the executor count.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import subprocess
import threading
import time
from typing import Any

import cluster
import operator_proc
import pytest
from agent_apps import App
from confluent_kafka import Producer

from streamapp.runtime.kafka import admin

__all__ = ["Feed", "LeaseWatch", "LoadStep", "Output", "assert_calm", "load_step", "measure"]


class Feed:
    """One new word every ``interval`` seconds to ``topic`` (set ``interval`` to change the rate),
    on a thread, until :meth:`stop`. One producer for the whole feed: a producer per record
    (``admin.produce``) costs its own connection and idempotent init, which on a loaded machine
    held the rate near 1 record/s whatever ``interval`` asked. ``sent``: the words Kafka
    acknowledged, in order."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.2) -> None:
        self.bootstrap, self.topic, self.interval = bootstrap, topic, interval
        self.sent: list[str] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started, self._stopped = 0.0, 0.0

    def _run(self) -> None:
        # Partitions added to the topic get records within a second (librdkafka looks every 5 min
        # by default), as they do from a producer that has refreshed its metadata: a rescale's
        # first micro-batches then read every partition, not the old ones only.
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 0,
            "topic.metadata.refresh.interval.ms": 1000,
        })  # fmt: skip

        def acknowledged(err: object, msg: Any) -> None:
            (self.failed if err is not None else self.sent).append(msg.value().decode())

        n, due = 0, time.monotonic()
        while not self._stop.is_set():
            producer.produce(self.topic, value=f"w{n}".encode(), on_delivery=acknowledged)
            n += 1
            producer.poll(0)  # serve delivery reports (it returns early when it served one)
            due = max(due + self.interval, time.monotonic() - self.interval)  # no burst after a stall
            time.sleep(max(0.0, due - time.monotonic()))
        producer.flush(30)

    @property
    def rate(self) -> float:
        """Words acknowledged per second from start to stop (or now): what the feed achieved."""
        return len(self.sent) / max(1e-9, (self._stopped or time.time()) - self._started)

    @property
    def started(self) -> float:
        """When the feed started (``time.time()``)."""
        return self._started

    def start(self) -> Feed:
        self._started = time.time()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
            self._stopped = time.time()


@dataclasses.dataclass(frozen=True)
class Output:
    """What the sink holds: the output times (s), and the words lost or counted more than once."""

    stamps: list[float]
    lost: int
    duplicated: int
    wrong: int  # records whose count is not 1

    def gap(self, since: float, until: float | None = None) -> tuple[float, float]:
        """The longest gap between consecutive output records that ends after ``since`` (and
        starts before ``until``), and when it began (s after ``since``)."""
        gaps = [
            (b - a, a - since)
            for a, b in itertools.pairwise(self.stamps)
            if b >= since and (until is None or a <= until)
        ]
        return max(gaps) if gaps else (0.0, 0.0)


def measure(bootstrap: str, sink: str, sent: list[str], *, timeout: float = 60) -> Output:
    """Read the whole sink (until every sent word is there, or ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        records = admin.consume(bootstrap, sink, idle=2.0, timeout=60)
        keys = collections.Counter(bytes(r.key or b"").decode() for r in records)
        if set(keys) >= set(sent) or time.monotonic() > deadline:
            break
        time.sleep(1)
    return Output(
        stamps=sorted(r.timestamp / 1000 for r in records),
        lost=len(set(sent) - set(keys)),
        duplicated=sum(n - 1 for n in keys.values()),
        wrong=sum(1 for r in records if int.from_bytes(r.value or b"", "big") != 1),
    )


class LeaseWatch:
    """Every holder the app's Lease had, with when this process saw it (``time.time()``)."""

    def __init__(self, kube: cluster.Cluster, namespace: str, lease: str) -> None:
        argv = [
            "kubectl", "get", "lease", lease, "-n", namespace, "--watch",
            "-o", "jsonpath={.spec.holderIdentity}{'\\n'}",
        ]  # fmt: skip
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=kube.env)
        self.holders: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            holder = line.strip()
            if not self.holders or self.holders[-1][1] != holder:
                self.holders.append((time.time(), holder))

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)

    def hand_overs(self) -> list[str]:
        """The holder changes in order, ``""`` where the Lease was released."""
        return [holder for _, holder in self.holders]

    def taken_without_release(self) -> list[tuple[str, str]]:
        """Changes from one driver straight to another: the fence was taken, not handed back."""
        changes = [h for _, h in self.holders]
        return [(a, b) for a, b in itertools.pairwise(changes) if a and b and a != b]


@dataclasses.dataclass(frozen=True)
class LoadStep:
    """A load step's timeline: samples (s since the feed started, executors desired, lag, phase)
    and when things happened (s on the same clock)."""

    samples: list[tuple[float, int | None, int | None, str]]
    stepped: float  # the rate was raised
    added: float  # the first executor was added (the decision, before its hand-over)
    high: float  # the high count runs and is Ready
    caught_up: float  # ... and the lag is back at its target
    fell: float  # the rate was lowered
    removed: float  # the first executor was removed
    low: float  # back at one executor, running and Ready

    @property
    def changes(self) -> list[tuple[int, int]]:
        counts = [n for _, n, _, _ in self.samples if n is not None]
        return [(a, b) for a, b in itertools.pairwise(counts) if a != b]

    def counts_after(self, t: float) -> list[int]:
        return [n for at, n, _, _ in self.samples if n is not None and at >= t]


def load_step(
    app: App,
    feed: Feed,
    *,
    low: float,
    high: float,
    executors: int,
    target_lag: int,
    falls_first: bool = False,
    timeout: float = 600,
) -> LoadStep:
    """Run ``feed`` at ``low`` records/s until the app settles at one executor, at ``high`` until it
    settles at ``executors`` or more with the lag at ``target_lag`` or below (and 20 s more), then at ``low``
    until it is back at one. The executor count and lag are sampled every 2 s throughout.

    ``falls_first`` runs the fall before the step, for an app that starts at its high count (one
    executor per partition) under a ``feed`` already at ``high``: it holds there, comes down to one
    at ``low``, and the step up ends the run. One hand-over fewer than settling at one first.
    """
    began = feed.started
    samples: list[tuple[float, int | None, int | None, str]] = []

    def sample() -> tuple[dict[str, Any], float]:
        status = app.status()
        at = round(time.time() - began, 1)
        count = (status.get("executors") or {}).get("desired")
        samples.append((at, count, status.get("lag"), str(status.get("phase"))))
        return status, at

    def until(what: str, done: Any) -> float:
        deadline = time.time() + timeout
        while time.time() < deadline:
            status, at = sample()
            if done(status):
                return at
            time.sleep(2)
        pytest.fail(f"{app.name}: {what} within {timeout:.0f} s; last samples: {samples[-10:]}")

    def settled(count: int, *, at_least: bool = False) -> Any:
        def check(status: dict[str, Any]) -> bool:
            n = (status.get("executors") or {}).get("desired")
            return (
                n is not None
                and (n >= count if at_least else n == count)
                and status.get("phase") == "Running"
                and operator_proc.condition(status, "Ready").get("status") == "True"
            )

        return check

    def desired(status: dict[str, Any]) -> int:
        return int((status.get("executors") or {}).get("desired") or 0)

    def caught_up(s: dict[str, Any]) -> bool:
        return bool(settled(executors, at_least=True)(s)) and (s.get("lag") or 0) <= target_lag

    def hold(seconds: float) -> None:
        held = time.time()
        while time.time() - held < seconds:
            sample()
            time.sleep(2)

    def step_up() -> tuple[float, float, float, float]:
        stepped = time.time() - began
        feed.interval = 1 / high
        added = until("added no executor", lambda s: desired(s) > 1)
        reached = until(f"never settled at {executors} executors", settled(executors, at_least=True))
        return stepped, added, reached, until(f"the lag never fell to {target_lag}", caught_up)

    def fall() -> tuple[float, float, float]:
        fell = time.time() - began
        feed.interval = 1 / low
        peak = desired(sample()[0])
        removed = until("removed no executor", lambda s: desired(s) < peak)
        return fell, removed, until("never settled back at 1 executor", settled(1))

    if falls_first:
        feed.interval = 1 / high
        until(f"never ran at {executors} executors with the lag at {target_lag}", caught_up)
        hold(10)
        fell, removed, back = fall()
        stepped, added, reached, caught = step_up()
        hold(20)
    else:
        feed.interval = 1 / low
        until("never settled at 1 executor", settled(1))
        stepped, added, reached, caught = step_up()
        hold(20)
        fell, removed, back = fall()
        hold(20)
    return LoadStep(samples, stepped, added, reached, caught, fell, removed, back)


def assert_calm(step: LoadStep, window: float) -> None:
    """Issue 17's load step: an executor added within the stabilization window of the step, the
    count only rising while the load is high and only falling after, back at one after the fall."""
    assert step.added - step.stepped <= window, (step.added - step.stepped, step.samples)

    def counts(since: float, until: float) -> list[int]:
        return step.counts_after(since)[: len(step.counts_after(since)) - len(step.counts_after(until))]

    end = math.inf
    rising = counts(step.stepped, step.fell if step.fell > step.stepped else end)
    falling = counts(step.fell, step.stepped if step.stepped > step.fell else end)
    assert all(a <= b for a, b in itertools.pairwise(rising)), ("down while the load was high", rising)
    assert all(a >= b for a, b in itertools.pairwise(falling)), ("up after the load fell", falling)
    assert falling[-1] == 1, falling
    if step.fell < step.stepped:  # the app started high: it held its count until the fall
        before = counts(0, step.fell)
        assert before and all(n >= before[0] for n in before), ("down before the load fell", before)


def summary(step: LoadStep, *, low: float, high: float, window: float) -> str:
    """One paragraph for the results and the test report."""
    rates = (high, low, high) if step.fell < step.stepped else (low, high, low)
    return (
        f"{' → '.join(f'{r:g}' for r in rates)} records/s, window {window:g} s: an executor added "
        f"{step.added - step.stepped:.0f} s after the step, the high count running "
        f"{step.high - step.stepped:.0f} s after it (hand-overs included) and the lag back at its target "
        f"{step.caught_up - step.stepped:.0f} s after it; the first executor removed "
        f"{step.removed - step.fell:.0f} s after the load fell, back at 1 after "
        f"{step.low - step.fell:.0f} s. "
        f"Executor count changes: {step.changes}"
    )
