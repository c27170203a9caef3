"""Kafka Streams' windowed aggregation, record by record, as pure Python over one task's state.

Spark's event-time windows decide lateness with the watermark, which moves only between
micro-batches, and its session windows refuse update mode. Kafka Streams decides per record: the
stream time is the max timestamp the task has seen (this record included) and a contribution to
a window is dropped once ``window_end + grace <= stream_time`` (sliding windows, whose end is
inclusive: ``end + grace < stream_time``; sessions: once
``session_end < stream_time - grace - gap``, as KStreamSessionWindowAggregate does).
This module reproduces that over a *task* — the records of one input partition in offset order —
so results do not depend on where micro-batch boundaries fall. The Spark glue
(:mod:`.engine`) hands each task's batch here with its running stream time (a vectorised cummax).

Window semantics follow Kafka Streams: tumbling/hopping windows are ``[start, start + size)``
aligned to the epoch; sliding windows ``[t - d, t]`` are defined by record timestamps (each
record's left window, and a right window ``[t + 1, t + 1 + d]`` once a later record falls in
it); sessions ``[first, last]`` merge when a record falls within ``gap`` of them. Updates carry
the max timestamp of their contributing records (seed 004); session updates their end.

Output rows are tuples ``(kind, key, start, end, value, timestamp_ms, partition, offset)``:
``update`` (changelog; ``value`` None = tombstone of a merged session), ``final`` (emit-final:
once, when the window closes) and ``late`` (one per dropped record-window contribution).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from streamapp.runtime.spark.stateful.aggregation import Aggregator

__all__ = ["EMITS", "Out", "Windows", "new_state", "process"]

EMITS = ("updates", "final")

#: (kind, key, start, end, value, timestamp_ms, partition, offset)
Out = tuple[str, Any, int, int, Any, int, int | None, int | None]


@dataclasses.dataclass(frozen=True)
class Windows:
    """A window specification; all durations in milliseconds."""

    kind: str  # tumbling | hopping | sliding | session
    size: int = 0  # tumbling/hopping size; sliding: max time difference; session: inactivity gap
    advance: int = 0
    grace: int = 0

    @staticmethod
    def tumbling(size: int, grace: int = 0) -> Windows:
        return Windows("tumbling", size, size, grace)

    @staticmethod
    def hopping(size: int, advance: int, grace: int = 0) -> Windows:
        if not 0 < advance <= size:
            raise ValueError("a hopping window's advance must be in (0, size]")
        return Windows("hopping", size, advance, grace)

    @staticmethod
    def sliding(time_difference: int, grace: int = 0) -> Windows:
        return Windows("sliding", time_difference, 0, grace)

    @staticmethod
    def session(gap: int, grace: int = 0) -> Windows:
        return Windows("session", gap, 0, grace)

    def __post_init__(self) -> None:
        if self.kind not in ("tumbling", "hopping", "sliding", "session"):
            raise ValueError(f"unknown window kind {self.kind!r}")
        if self.size <= 0 or self.grace < 0:
            raise ValueError("window size/gap must be > 0 and grace >= 0")

    def starts(self, ts: int) -> range:
        """Start times of the time windows containing ``ts`` (Kafka's TimeWindows.windowsFor)."""
        first = max(0, ts - self.size + self.advance) // self.advance * self.advance
        return range(first, ts + 1, self.advance)


def new_state() -> dict[str, Any]:
    # t: stream time; seq: arrival counter; w: open (key, start, end) -> [agg, max_ts];
    # r: sliding windows' records per key; s: sessions per key [start, end, records, max_ts].
    return {"t": None, "seq": 0, "w": {}, "r": {}, "s": {}}


@dataclasses.dataclass
class _Batch:
    """What one batch produced: coalesced changelog updates (last per window), late drops."""

    updates: dict[tuple[Any, int, int], tuple[Any, int]] = dataclasses.field(default_factory=dict)
    late: list[Out] = dataclasses.field(default_factory=list)

    def update(self, window: tuple[Any, int, int], value: Any, ts: int) -> None:
        self.updates.pop(window, None)  # re-insert: the changelog keeps the order of last change
        self.updates[window] = (value, ts)


def process(
    spec: Windows,
    agg: Aggregator,
    emit: str,
    state: dict[str, Any],
    records: Sequence[tuple[Any, Any, int, int, int | None, int | None]],
) -> list[Out]:
    """Fold one task's batch ``(key, value, ts, stream_time, partition, offset)`` into ``state``."""
    batch = _Batch()
    step = {"tumbling": _time, "hopping": _time, "sliding": _sliding, "session": _session}[spec.kind]
    finals: list[Out] = []
    for key, value, ts, stream_time, partition, offset in records:
        state["seq"] += 1
        step(spec, agg, state, batch, key, value, ts, stream_time, (partition, offset))
        state["t"] = stream_time
        # Close per record, as Kafka Streams does: a closed session can still be merged into a
        # later one, so closing only at the end of a batch would make output depend on batches.
        finals += _close(spec, agg, state)
    out: list[Out] = list(batch.late)
    if emit == "updates":
        out += [("update", k, s, e, v, ts, None, None) for (k, s, e), (v, ts) in batch.updates.items()]
    else:
        out += finals
    return out


def _threshold(spec: Windows, end: int) -> int:
    """The stream time at which a window ending at ``end`` closes."""
    if spec.kind == "session":
        return end + spec.grace + spec.size + 1  # closed once end < stream time - grace - gap
    if spec.kind == "sliding":
        return end + spec.grace + 1  # sliding windows include their end
    return end + spec.grace


def _open(spec: Windows, state: dict[str, Any], window: tuple[Any, int, int], slot: list[Any]) -> None:
    state["w"][window] = slot
    state["next"] = min(state.get("next", _threshold(spec, window[2])), _threshold(spec, window[2]))


def _time(
    spec: Windows, agg: Aggregator, state: dict[str, Any], batch: _Batch,
    key: Any, value: Any, ts: int, stream_time: int, where: tuple[int | None, int | None],
) -> None:  # fmt: skip
    windows = state["w"]
    for start in spec.starts(ts):
        end = start + spec.size
        if end + spec.grace <= stream_time:
            batch.late.append(("late", key, start, end, None, ts, *where))
            continue
        slot = windows.get((key, start, end))
        if slot is None:
            slot = [agg.initial(), ts]
            _open(spec, state, (key, start, end), slot)
        slot[0] = agg.add(key, value, slot[0], ts)
        slot[1] = max(slot[1], ts)
        batch.update((key, start, end), agg.result(slot[0]), slot[1])


def _sliding(
    spec: Windows, agg: Aggregator, state: dict[str, Any], batch: _Batch,
    key: Any, value: Any, ts: int, stream_time: int, where: tuple[int | None, int | None],
) -> None:  # fmt: skip
    d = spec.size
    # Late records are counted as Kafka Streams counts them (see _SlidingStore), the output is
    # computed from the records below.
    for start, end in _SlidingStore(spec, state).drops(key, ts, stream_time):
        batch.late.append(("late", key, start, end, None, ts, *where))
    if ts + 1 + d + spec.grace <= stream_time:  # no window of this record can be open any more
        return
    records: list[tuple[int, int, Any]] = state["r"].setdefault(key, [])
    records.append((ts, state["seq"], value))
    # Only records eviction would keep (see _close), whatever the batch boundaries.
    others = [r[0] for r in records[:-1] if _kept(spec, r[0], stream_time)]
    # Every window that contains the new record or comes into existence because of it.
    candidates = {(ts - d, ts)}
    if any(ts < u <= ts + 1 + d for u in others):
        candidates.add((ts + 1, ts + 1 + d))  # the new record's right window, if not empty
    candidates.update((s + 1, s + 1 + d) for s in others if ts - d - 1 <= s < ts)  # earlier right windows
    candidates.update((u - d, u) for u in others if ts < u <= ts + d)  # later records' left windows
    for start, end in sorted(candidates):
        # Sliding windows include their end: Kafka keeps a window while end >= stream time - grace.
        if end + spec.grace < stream_time:
            continue
        inside = sorted((r for r in records if start <= r[0] <= end), key=lambda r: (r[0], r[1]))
        if not inside:
            continue
        result = agg.fold(key, [(r[0], r[2]) for r in inside])
        max_ts = max(r[0] for r in inside)
        _open(spec, state, (key, start, end), [result, max_ts])
        batch.update((key, start, end), agg.result(result), max_ts)


class _SlidingStore:
    """Which windows Kafka Streams' sliding-window aggregation would find, create and refuse.

    KStreamSlidingWindowAggregate counts a dropped record each time it would update a window that
    has closed: the record's own windows, but also every closed window still in its window store
    that contains the record. Which windows are there depends on how it created them (a left
    window per record, a right window only when a later record falls in it, a closed window never
    written) and on the store's retention: a window is found only while its start is at least
    ``2 * timeDifference + grace`` before the latest start ever written to the store (the task's).
    This keeps that bookkeeping — per key, window start → max record timestamp — so that the late
    count is Kafka Streams' whatever the order of records; the aggregates themselves are computed
    from the records (:func:`_sliding`). State: ``state["k"] = {"t": latest start, "w": {...}}``.
    """

    def __init__(self, spec: Windows, state: dict[str, Any]) -> None:
        self.d, self.grace = spec.size, spec.grace
        self.retention = 2 * spec.size + spec.grace
        self.store: dict[str, Any] = state.setdefault("k", {"t": None, "w": {}})

    def _put(self, key: Any, start: int, max_ts: int) -> None:
        self.store["w"].setdefault(key, {})[start] = max_ts
        latest = self.store["t"]
        if latest is None or start > latest:
            self.store["t"] = start
        # Windows before the horizon are never found again (the latest start only grows): forget
        # them, every half retention (fetches skip them anyway, see drops).
        horizon = self.store["t"] - self.retention + 1
        if horizon - self.store.setdefault("p", horizon) >= self.retention // 2:
            self.store["p"] = horizon
            for k in list(self.store["w"]):
                kept = {s: m for s, m in self.store["w"][k].items() if s >= horizon}
                if kept:
                    self.store["w"][k] = kept
                else:
                    del self.store["w"][k]

    def drops(self, key: Any, ts: int, stream_time: int) -> list[tuple[int, int]]:
        """The closed windows (start, end) record ``ts`` would update: each is a dropped record."""
        d, close = self.d, stream_time - self.grace
        if ts + d < close:
            return [(ts - d, ts)]
        drops: list[tuple[int, int]] = []

        def update(start: int, max_ts: int | None) -> None:
            if start + d >= close:
                self._put(key, start, ts if max_ts is None else max(ts, max_ts))
            else:
                drops.append((start, start + d))

        latest = self.store["t"]
        low = ts - 2 * d if latest is None else max(ts - 2 * d, latest - self.retention + 1)
        found = sorted(
            ((s, m) for s, m in self.store["w"].get(key, {}).items() if low <= s <= ts + 1), reverse=True
        )
        starts: set[int] = set()
        right: int | None = None  # the max timestamp of the latest window containing ts and ending after it
        left_created = right_created = False
        previous: int | None = None
        for start, max_ts in found:  # newest first, as its reverse iterator
            starts.add(start)
            end = start + d
            if start == ts + 1:
                right_created = True
            elif end > ts:
                if right is None:
                    right = max_ts
                update(start, max_ts)
            elif end == ts:
                left_created = True
                update(start, max_ts)
                if max_ts < ts:
                    previous = max_ts
                else:
                    return drops
            else:
                previous = max_ts
                break
        if previous is not None and previous + 1 not in starts and previous + 1 + d >= ts:
            update(previous + 1, None)  # the previous record's right window, new
        if not left_created:
            update(ts - d, None)
        if not right_created and right is not None and right > ts:
            self._put(key, ts + 1, right)  # written closed or not, as Kafka Streams does
        return drops


def _session(
    spec: Windows, agg: Aggregator, state: dict[str, Any], batch: _Batch,
    key: Any, value: Any, ts: int, stream_time: int, where: tuple[int | None, int | None],
) -> None:  # fmt: skip
    gap = spec.size
    sessions: list[list[Any]] = state["s"].setdefault(key, [])
    merging = [
        s for s in sessions if s[1] >= ts - gap and s[0] <= ts + gap and _kept(spec, s[1], stream_time)
    ]
    start = min([ts, *(s[0] for s in merging)])
    end = max([ts, *(s[1] for s in merging)])
    if end < stream_time - spec.grace - gap:
        batch.late.append(("late", key, start, end, None, ts, *where))
        return
    records = [(ts, state["seq"], value)]
    for s in merging:
        sessions.remove(s)
        records += s[2]
        if (s[0], s[1]) != (start, end):
            batch.update((key, s[0], s[1]), None, s[1])  # a merged-away session: tombstone
    records.sort(key=lambda r: (r[0], r[1]))
    result = agg.fold(key, [(r[0], r[2]) for r in records])
    sessions.append([start, end, records, end])
    for s in merging:
        if (s[0], s[1]) != (start, end):
            state["w"].pop((key, s[0], s[1]), None)
    _open(spec, state, (key, start, end), [result, end])
    batch.update((key, start, end), agg.result(result), end)


def _kept(spec: Windows, ts: int, now: int) -> bool:
    """Whether a sliding record / session ending at ``ts`` is still kept at stream time ``now``:
    a closed session still merges with an in-time record within ``gap`` (Kafka keeps it in its
    store), a sliding record is needed while a window containing it or its right window is open."""
    if spec.kind == "session":
        return ts >= now - spec.grace - 2 * spec.size
    return ts + spec.size + 1 + spec.grace >= now


def _close(spec: Windows, agg: Aggregator, state: dict[str, Any]) -> list[Out]:
    """Emit-final rows for windows the stream time has closed; evict their state."""
    now = state["t"]
    if now < state.get("next", now + 1):
        return []
    windows: dict[tuple[Any, int, int], list[Any]] = state["w"]
    done = sorted(
        (w for w in windows if _threshold(spec, w[2]) <= now), key=lambda w: (w[2], w[1], repr(w[0]))
    )
    out: list[Out] = []
    for window in done:
        result, max_ts = windows.pop(window)
        out.append(("final", window[0], window[1], window[2], agg.result(result), max_ts, None, None))
    state["next"] = min((_threshold(spec, w[2]) for w in windows), default=now + 1)
    for name in ("s", "r"):
        by_key = state[name]
        for key in list(by_key):
            # sessions are [start, end, ...] (test the end), sliding records (ts, ...).
            kept = [x for x in by_key[key] if _kept(spec, x[1] if name == "s" else x[0], now)]
            if kept:
                by_key[key] = kept
            else:
                del by_key[key]
    return out
