"""Processors for the real-broker processor tests (imported by path, shipped by value)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamapp.runtime import Processor, ProcessorContext, ProcessorRecord, Timer


class Tally(Processor):
    """A running count (value state), the recent values (list state) and a count per value (map
    state), the last two kept for 10 s of stream time; one summary per key and micro-batch."""

    returns = "string"

    def init(self, context: ProcessorContext) -> None:
        self.count = context.value_state("count")
        self.recent = context.list_state("recent", ttl=10_000)
        self.by_value = context.map_state("by-value", ttl=10_000)

    def process(self, key: Any, records: list[ProcessorRecord]) -> Iterator[tuple[Any, Any]]:
        for r in records:
            self.count.update((self.count.get() or 0) + 1)
            self.recent.append(r.value)
            self.by_value.put(r.value, (self.by_value.get(r.value) or 0) + 1)
        by_value = ",".join(f"{v}:{n}" for v, n in self.by_value.items())
        yield key, f"count={self.count.get()} recent={','.join(self.recent.get())} by-value={by_value}"


class Remind(Processor):
    """A processing-time timer just after each batch of a key: a reminder with its last value,
    stamped with the task's stream time (the wall clock would not repeat)."""

    returns = "string"

    def init(self, context: ProcessorContext) -> None:
        self.context = context
        self.last = context.value_state("last")

    def process(self, key: Any, records: list[ProcessorRecord]) -> tuple[()]:
        self.last.update(records[-1].value)
        self.context.register_processing_time_timer(self.context.processing_time + 1)
        return ()

    def on_timer(self, key: Any, timer: Timer) -> Iterator[tuple[Any, Any, int]]:
        assert self.context.stream_time is not None
        yield key, f"{timer.kind} reminder: {self.last.get()}", self.context.stream_time
