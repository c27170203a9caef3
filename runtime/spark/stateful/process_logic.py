"""What a task does with a custom processor in one micro-batch, as pure Python over plain state.

Why apart from Spark: the semantics (the order records reach ``process``, when timers fire, when
a TTL entry is gone) are the part users rely on, tested here call by call without a JVM;
:mod:`.process_ops` runs :func:`run_round` per task under ``transformWithStateInPandas``.
The rules are the ones :mod:`streamapp.runtime.processor` documents.

A task's state is one plain dict (pickled by the engine between batches)::

    {"t": stream time or None, "seq": timer sequence,
     "stores": {store: {key: entry}},      # value: (value, written); list: [(value, written)];
                                            # map: {user key: (value, written)}
     "timers": {(kind, key, ts): seq}}      # kind 0 event, 1 processing
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import Any

from streamapp.runtime import processor as api

__all__ = ["Context", "fire_timers", "needs_wake_up", "new_state", "run_round"]

EVENT, PROCESSING = 0, 1
_KINDS = ("event", "processing")


def new_state() -> dict[str, Any]:
    return {"t": None, "seq": 0, "stores": {}, "timers": {}}


class _Store:
    def __init__(self, context: Context, spec: api.StoreSpec) -> None:
        self._context, self.spec = context, spec

    def _entries(self) -> dict[Any, Any]:
        return self._context.state["stores"].setdefault(self.spec.name, {})

    def _alive(self, written: int | None) -> bool:
        ttl, now = self.spec.ttl, self._context.stream_time
        return ttl is None or written is None or now is None or written + ttl > now

    def _now(self) -> int | None:
        return self._context.stream_time


class _Value(_Store, api.ValueState):
    def get(self) -> Any:
        entry = self._entries().get(self._context.key)
        return entry[0] if entry is not None and self._alive(entry[1]) else None

    def exists(self) -> bool:
        entry = self._entries().get(self._context.key)
        return entry is not None and self._alive(entry[1])

    def update(self, value: Any) -> None:
        if value is None:
            raise api.ProcessorError(f"value state {self.spec.name!r}: update(None); use clear()")
        self._entries()[self._context.key] = (value, self._now())

    def clear(self) -> None:
        self._entries().pop(self._context.key, None)


class _List(_Store, api.ListState):
    def get(self) -> list[Any]:
        return [v for v, written in self._entries().get(self._context.key, ()) if self._alive(written)]

    def exists(self) -> bool:
        return bool(self.get())

    def append(self, value: Any) -> None:
        self._entries().setdefault(self._context.key, []).append((value, self._now()))

    def update(self, values: Iterable[Any]) -> None:
        now = self._now()
        entries = [(v, now) for v in values]
        if entries:
            self._entries()[self._context.key] = entries
        else:
            self.clear()

    def clear(self) -> None:
        self._entries().pop(self._context.key, None)


class _Map(_Store, api.MapState):
    def _map(self) -> dict[Any, tuple[Any, int | None]]:
        return self._entries().get(self._context.key, {})

    def get(self, user_key: Any) -> Any:
        entry = self._map().get(user_key)
        return entry[0] if entry is not None and self._alive(entry[1]) else None

    def contains(self, user_key: Any) -> bool:
        entry = self._map().get(user_key)
        return entry is not None and self._alive(entry[1])

    def put(self, user_key: Any, value: Any) -> None:
        entries = self._entries().setdefault(self._context.key, {})
        entries.pop(user_key, None)  # a rewritten entry moves to the end, as its write time does
        entries[user_key] = (value, self._now())

    def remove(self, user_key: Any) -> None:
        entries = self._map()
        entries.pop(user_key, None)
        if not entries:
            self.clear()

    def items(self) -> list[tuple[Any, Any]]:
        return [(k, v) for k, (v, written) in self._map().items() if self._alive(written)]

    def exists(self) -> bool:
        return bool(self.items())

    def clear(self) -> None:
        self._entries().pop(self._context.key, None)


_STORES: dict[str, type[_Store]] = {"value": _Value, "list": _List, "map": _Map}


class Context(api.ProcessorContext):
    """The context a processor instance keeps: bound to one task's state and key at a time."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = new_state()
        self.key: Any = None
        self.now = 0
        self.declared: list[api.StoreSpec] = []
        self.in_init = True
        #: while timers fire: the timers registered meanwhile (they may be due in the same round)
        self.fresh: list[tuple[int, int, int, Any]] | None = None

    def _declare(self, name: str, kind: str, ttl: int | None) -> Any:
        if not self.in_init:
            raise api.ProcessorError(f"{kind} state {name!r} is declared outside init")
        api.check_store(self.declared, name, kind, ttl)
        spec = api.StoreSpec(name, kind, ttl)
        self.declared.append(spec)
        return _STORES[kind](self, spec)

    def value_state(self, name: str, *, ttl: int | None = None) -> api.ValueState:
        return self._declare(name, "value", ttl)

    def list_state(self, name: str, *, ttl: int | None = None) -> api.ListState:
        return self._declare(name, "list", ttl)

    def map_state(self, name: str, *, ttl: int | None = None) -> api.MapState:
        return self._declare(name, "map", ttl)

    def _timer(self, kind: int, timestamp: int, register: bool) -> None:
        if self.in_init:
            raise api.ProcessorError("timers are registered in process or on_timer, not in init")
        if isinstance(timestamp, bool) or not isinstance(timestamp, int):
            raise api.ProcessorError(f"a timer's time is epoch ms (an int), not {timestamp!r}")
        timers: dict[tuple[int, Any, int], int] = self.state["timers"]
        if register:
            if (kind, self.key, timestamp) not in timers:
                self.state["seq"] += 1
                timers[(kind, self.key, timestamp)] = self.state["seq"]
                if self.fresh is not None:
                    self.fresh.append((timestamp, self.state["seq"], kind, self.key))
        else:
            timers.pop((kind, self.key, timestamp), None)

    def register_event_time_timer(self, timestamp: int) -> None:
        self._timer(EVENT, timestamp, True)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._timer(EVENT, timestamp, False)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._timer(PROCESSING, timestamp, True)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._timer(PROCESSING, timestamp, False)

    @property
    def stream_time(self) -> int | None:
        return self.state["t"]

    @property
    def processing_time(self) -> int:
        return self.now


def _due(state: dict[str, Any], now: int) -> list[tuple[int, int, int, Any]]:
    """(ts, seq, kind, key) of every timer due: event ones at or below stream time, processing
    ones at or below ``now``; in firing order."""
    t = state["t"]
    due = [
        (ts, seq, kind, key)
        for (kind, key, ts), seq in state["timers"].items()
        if (kind == EVENT and t is not None and ts <= t) or (kind == PROCESSING and ts <= now)
    ]
    return sorted(due, key=lambda d: (d[0], d[1]))


def _purge(context: Context) -> None:
    """Forget the TTL entries that can never be read again (reads already skip them)."""
    t = context.stream_time
    if t is None:
        return
    for spec in context.declared:
        if spec.ttl is None:
            continue
        store: dict[Any, Any] = context.state["stores"].get(spec.name, {})
        for key in list(store):
            entry = store[key]
            if spec.kind == "value":
                if entry[1] is not None and entry[1] + spec.ttl <= t:
                    del store[key]
            elif spec.kind == "list":
                kept = [e for e in entry if e[1] is None or e[1] + spec.ttl > t]
                store[key] = kept
            else:
                kept_map = {k: e for k, e in entry.items() if e[1] is None or e[1] + spec.ttl > t}
                store[key] = kept_map
            if key in store and not store[key]:
                del store[key]


def fire_timers(processor: api.Processor, context: Context, now: int) -> list[tuple[Any, Any, int]]:
    """Fire every due timer (see the module docstring of :mod:`streamapp.runtime.processor`)."""
    context.now = now
    out: list[tuple[Any, Any, int]] = []
    name = type(processor).__qualname__
    heap = _due(context.state, now)  # sorted: a heap already; seq is unique, so keys never compare
    timers: dict[tuple[int, Any, int], int] = context.state["timers"]
    t = context.state["t"]
    context.fresh = []
    try:
        while heap:
            ts, seq, kind, key = heapq.heappop(heap)
            if timers.get((kind, key, ts)) != seq:
                continue  # deleted by an earlier on_timer
            del timers[(kind, key, ts)]
            context.key = key
            timer = api.Timer(ts, _KINDS[kind])
            out.extend(api.outputs(processor.on_timer(key, timer), ts, f"{name}.on_timer"))
            for fresh in context.fresh:
                if (fresh[2] == EVENT and t is not None and fresh[0] <= t) or (
                    fresh[2] == PROCESSING and fresh[0] <= now
                ):
                    heapq.heappush(heap, fresh)
            context.fresh.clear()
    finally:
        context.fresh = None
    _purge(context)
    return out


def run_round(
    processor: api.Processor,
    context: Context,
    records: Sequence[api.Record],
    now: int,
) -> list[tuple[Any, Any, int]]:
    """One micro-batch of one task: due timers first, then ``records`` (already in Kafka Streams'
    order) key by key. Returns ``(key, value, timestamp)`` outputs in emission order."""
    out = fire_timers(processor, context, now)
    if not records:
        return out
    newest = max(r.timestamp for r in records)
    t = context.state["t"]
    context.state["t"] = newest if t is None else max(t, newest)
    by_key: dict[Any, list[api.Record]] = {}
    for record in records:
        by_key.setdefault(record.key, []).append(record)
    name = type(processor).__qualname__
    for key, own in by_key.items():
        context.key = key
        default_ts = max(r.timestamp for r in own)
        out.extend(api.outputs(processor.process(key, own), default_ts, f"{name}.process"))
    return out


def needs_wake_up(context: Context) -> bool:
    """Whether the task must be called at the next micro-batch even without records: an
    event-time timer is due, or a processing-time timer waits."""
    t = context.state["t"]
    return any(
        kind == PROCESSING or (t is not None and ts <= t) for kind, _key, ts in context.state["timers"]
    )
