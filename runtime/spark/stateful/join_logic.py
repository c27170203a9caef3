"""What Kafka Streams' join processors do with each record, as pure Python over plain state.

Why pure Python apart from Spark: the semantics are the hard part (the order records of two
inputs are processed in, when a left/outer result without a match may be emitted, which
out-of-order records still join) and are tested here record by record; :mod:`.join_ops` runs them
per task under ``transformWithStateInPandas``.

**Order.** A task reads one partition of each input. Kafka Streams processes a task's records
partition by partition in offset order, always taking next the partition whose head record has
the smallest timestamp (``PartitionGroup``). When both sides are read straight from their
partitions, :func:`.frontier.take` gives that order across micro-batches (ties: the partition
that waited longer, as in ``PartitionGroup``'s priority queue). After a key change, or for the
test driver, :func:`merge_order` orders each micro-batch on its own (ties: the table side of a
stream-table join or the left side, then the lower partition).

**Stream-stream joins** follow ``KStreamKStreamJoin`` (Kafka 3.x/4.x, KIP-633): the task's stream
time is shared by both sides and advanced by every record (even one dropped for a null key or
value); a record joins every record of the other side's window store in
``[t - before, t + after]`` (reversed for the right side) that the store still retains
(timestamp > the store's observed time − retention, retention = before + after + grace); a
left/outer record without a match goes to the shared outer store — or is emitted at once when its
window already ended before stream time — and is emitted with a null side only when a record at
stream time finds its window closed (``ts + after`` [``before`` for the right side] ``+ grace <
stream time``), never early, never twice; a later match removes it. A record is put into its own
window store after it is processed; a put into a segment the store already dropped (RocksDB
segments of ``max(retention / 2, 60 s)``) is the *late* drop Kafka Streams counts as
``expired-window-record-drop``. The emit throttle (``emit.interval.ms.kstreams.outer.join.spurious.
results.fix``, 1 s of wall-clock time by default) is not reproduced: StreamApp behaves as with 0.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = [
    "LEFT",
    "RIGHT",
    "Record",
    "StreamStreamJoin",
    "StreamTableJoin",
    "TableTableJoin",
    "merge_order",
]

LEFT, RIGHT = 0, 1

#: (side, key, value, timestamp ms, partition, offset) — one input record of a task.
Record = tuple[int, Any, Any, int, int, int]
#: (key, left value, right value, timestamp ms) — one join result before the joiner runs.
Result = tuple[Any, Any, Any, int]


def merge_order(records: Iterable[Record], *, first: int = LEFT) -> Iterator[Record]:
    """The records in Kafka Streams' processing order (see the module docstring).

    ``first`` is the side that wins a timestamp tie (the table side of a stream-table join).
    """
    queues: dict[tuple[int, int], list[Record]] = {}
    for record in records:
        queues.setdefault((record[0], record[4]), []).append(record)
    heap: list[tuple[int, int, int, int, int]] = []
    for (side, partition), queue in queues.items():
        queue.sort(key=lambda r: r[5])
        heap.append((queue[0][3], 0 if side == first else 1, partition, side, 0))
    heapq.heapify(heap)
    while heap:
        _, rank, partition, side, index = heapq.heappop(heap)
        queue = queues[(side, partition)]
        yield queue[index]
        index += 1
        while index < len(queue) and queue[index][5] == queue[index - 1][5]:
            yield queue[index]  # one source record fanned out (flatMapValues): processed as one
            index += 1
        if index < len(queue):
            heapq.heappush(heap, (queue[index][3], rank, partition, side, index))


class StreamTableJoin:
    """``KStreamKTableJoin``: each stream record sees the table as it is at that point of the task.

    State: ``{"table": {key: value}}``. A table record with a null key is skipped, a null value
    deletes the key. A stream record with a null value is dropped; with a null key it is dropped
    by ``join`` and emitted with a null table value by ``leftJoin`` (KIP-962). The result carries
    the stream record's timestamp.
    """

    def __init__(self, *, left_join: bool) -> None:
        self.left_join = left_join

    @staticmethod
    def new_state() -> dict[str, Any]:
        return {"table": {}}

    def process(self, state: dict[str, Any], record: Record, emit: Callable[[Result], None]) -> None:
        side, key, value, ts = record[0], record[1], record[2], record[3]
        table: dict[Any, Any] = state["table"]
        if side == RIGHT:
            if key is None:
                return
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
            return
        if value is None or (key is None and not self.left_join):
            return
        other = None if key is None else table.get(key)
        if other is not None or self.left_join:
            emit((key, value, other, ts))


class TableTableJoin:
    """``KTableKTableJoin`` (inner, left, outer) on the primary key, one result per update.

    State: ``{"tables": [{key: (value, ts)}, {key: (value, ts)}]}``. An update of either side looks
    up the other side's current value; the result's timestamp is the max of both sides' (as in
    Kafka Streams). A result that goes away (a side deleted, or no longer matching) is a tombstone — emitted,
    as Kafka Streams does, when the update concerns a key that had a result to delete or the other
    side is present; an inner join whose other side is absent emits nothing. A tombstone for a key
    the side never had counts as an update there too, as in Kafka Streams.
    """

    def __init__(self, how: str) -> None:
        self.how = how

    @staticmethod
    def new_state() -> dict[str, Any]:
        return {"tables": [{}, {}]}

    def _result(self, left: Any, right: Any) -> bool:
        if self.how == "inner":
            return left is not None and right is not None
        if self.how == "left":
            return left is not None
        return left is not None or right is not None

    def process(self, state: dict[str, Any], record: Record, emit: Callable[[Result], None]) -> None:
        side, key, value, ts = record[0], record[1], record[2], record[3]
        if key is None:
            return
        tables: list[dict[Any, tuple[Any, int]]] = state["tables"]
        own, other = tables[side], tables[1 - side]
        old = own.get(key)
        if value is None:
            own.pop(key, None)
        else:
            own[key] = (value, ts)
        found = other.get(key)
        other_value, other_ts = found if found is not None else (None, None)
        # A tombstone for a key this side never had still reaches Kafka Streams' join processors
        # (its table source forwards it): with the other side present they emit again, at the
        # later timestamp (randomized conformance suite, seed 16).
        vanished = value is None and old is None
        if found is None and (vanished or self.how == "inner" or (self.how == "left" and side == RIGHT)):
            return
        left, right = (value, other_value) if side == LEFT else (other_value, value)
        old_left, old_right = (
            (None if old is None else old[0], other_value)
            if side == LEFT
            else (other_value, None if old is None else old[0])
        )
        result_ts = ts if other_ts is None else max(ts, other_ts)
        if self._result(left, right):
            emit((key, left, right, result_ts))
        elif self._result(old_left, old_right) or vanished:
            emit((key, None, None, result_ts))  # the result went away: a tombstone


def _java_div(a: int, b: int) -> int:
    """Java's long division (truncates toward zero), as in Kafka Streams' segment ids."""
    q = abs(a) // b
    return q if a >= 0 else -q


class StreamStreamJoin:
    """``KStreamKStreamJoin`` with the shared outer store (see the module docstring).

    ``how`` is ``inner``, ``left`` or ``outer``. State: the shared stream time ``t``, the min
    time of the outer store ``min``, per side the window store (``win[side]``: key → list of
    (ts, value)) and its observed time ``obs[side]``, and the outer store ``outer``:
    (ts, side, key) → list of values.
    """

    NO_TIME = -(2**63)
    MAX_TIME = 2**63 - 1

    def __init__(self, how: str, *, before: int, after: int, grace: int) -> None:
        self.how = how
        self.before, self.after, self.grace = before, after, grace
        self.retention = before + after + grace
        self.segment = max(self.retention // 2, 60_000)
        self.outer_side = (how in ("left", "outer"), how == "outer")

    @classmethod
    def new_state(cls) -> dict[str, Any]:
        return {
            "t": cls.NO_TIME,
            "min": cls.MAX_TIME,
            "win": [{}, {}],
            "obs": [cls.NO_TIME, cls.NO_TIME],
            "outer": {},
        }

    def _windows(self, side: int) -> tuple[int, int]:
        """(before, after) as seen from ``side``: the right side looks the other way."""
        return (self.before, self.after) if side == LEFT else (self.after, self.before)

    def process(self, state: dict[str, Any], record: Record, emit: Callable[[Result], None]) -> bool:
        """Process one record; False when its window-store put was dropped as expired (late)."""
        side, key, value, ts = record[0], record[1], record[2], record[3]
        state["t"] = max(state["t"], ts)
        outer = self.outer_side[side]
        if outer and key is None and value is not None:
            emit((None, value, None, ts) if side == LEFT else (None, None, value, ts))
            return True
        if key is None or value is None:
            return True
        before, after = self._windows(side)
        if ts == state["t"] and self.how != "inner":
            self._emit_closed(state, after, emit)
        lo, hi = max(0, ts - before), max(0, ts + after)
        other = 1 - side
        lo = max(lo, state["obs"][other] - self.retention + 1)
        matches = [(t, v) for t, v in state["win"][other].get(key, ()) if lo <= t <= hi]
        for other_ts, other_value in sorted(matches, key=lambda m: m[0]):
            if self.how != "inner":
                state["outer"].pop((other_ts, other, key), None)
            pair = (value, other_value) if side == LEFT else (other_value, value)
            emit((key, pair[0], pair[1], max(ts, other_ts)))
        if outer and not matches:
            if hi < state["t"]:
                emit((key, value, None, ts) if side == LEFT else (key, None, value, ts))
            else:
                state["min"] = min(state["min"], ts)
                state["outer"].setdefault((ts, side, key), []).append(value)
        return self._put(state, side, key, value, ts)

    def _put(self, state: dict[str, Any], side: int, key: Any, value: Any, ts: int) -> bool:
        observed = max(state["obs"][side], ts)
        state["obs"][side] = observed
        min_live_segment = _java_div(observed - self.retention, self.segment)
        if _java_div(ts, self.segment) < min_live_segment:
            return False
        state["win"][side].setdefault(key, []).append((ts, value))
        self._purge(state, side)
        return True

    def _purge(self, state: dict[str, Any], side: int) -> None:
        """Forget what a fetch can never return again (at or below observed − retention)."""
        floor = state["obs"][side] - self.retention
        store: dict[Any, list[tuple[int, Any]]] = state["win"][side]
        for key in [k for k, entries in store.items() if entries[0][0] <= floor]:
            kept = [e for e in store[key] if e[0] > floor]
            if kept:
                store[key] = kept
            else:
                del store[key]

    def _emit_closed(self, state: dict[str, Any], after: int, emit: Callable[[Result], None]) -> None:
        """``emitNonJoinedOuterRecords``: every outer-store entry whose window has closed."""
        t = state["t"]
        if state["min"] + after + self.grace >= t:
            return
        state["min"] = self.MAX_TIME
        store: dict[tuple[int, int, Any], list[Any]] = state["outer"]
        open_sides = [False, False]
        emitted = []
        for entry in sorted(store, key=_outer_order):
            entry_ts, side, key = entry
            state["min"] = entry_ts
            if open_sides[LEFT] and open_sides[RIGHT]:
                break
            lookback = self.after if side == LEFT else self.before
            if entry_ts + lookback + self.grace >= t:
                open_sides[side] = True
                continue
            for value in store[entry]:
                emit((key, value, None, entry_ts) if side == LEFT else (key, None, value, entry_ts))
            emitted.append(entry)
        for entry in emitted:
            del store[entry]


def _outer_order(entry: tuple[int, int, Any]) -> tuple[int, int, str]:
    """The outer store's key order: timestamp, then the right side (0) before the left (1), then key."""
    ts, side, key = entry
    return ts, 0 if side == RIGHT else 1, str(key)
