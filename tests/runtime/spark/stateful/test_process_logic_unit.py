"""The Processor API's semantics, call by call, without Spark: :mod:`process_logic.run_round`.

Each test drives a small processor through micro-batches (``run_round``: timers due from the last
round first, then the batch's records key by key) and checks exactly what it emitted and when.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from streamapp.runtime import processor as api
from streamapp.runtime.cli.examples import silence
from streamapp.runtime.spark.stateful import process_logic


def _records(*items: tuple[str, Any, int]) -> list[api.Record]:
    return [api.Record(k, v, ts, 0, offset) for offset, (k, v, ts) in enumerate(items)]


def _task(processor_class: type[api.Processor]) -> tuple[api.Processor, process_logic.Context]:
    processor = processor_class()
    context = process_logic.Context()
    processor.init(context)
    context.in_init = False
    return processor, context


class Calls(api.Processor):
    """Emits one output per call: the key, its values and the stream time it saw."""

    def init(self, context: api.ProcessorContext) -> None:
        self.context = context

    def process(self, key: Any, records: list[api.Record]) -> Iterator[tuple[Any, Any]]:
        yield key, ([r.value for r in records], self.context.stream_time)


def test_records_reach_process_once_per_key_in_arrival_order_with_the_batch_stream_time() -> None:
    processor, context = _task(Calls)
    out = process_logic.run_round(
        processor, context, _records(("b", 1, 10), ("a", 2, 30), ("b", 3, 20), ("a", 4, 5)), now=0
    )
    # b first (its first record came first); a@5 stays after a@30 (offset order); the default
    # output timestamp is the newest of the key's records; stream time already 30 for both.
    assert out == [("b", ([1, 3], 30), 20), ("a", ([2, 4], 30), 30)]
    assert context.stream_time == 30
    process_logic.run_round(processor, context, _records(("a", 5, 7)), now=0)
    assert context.stream_time == 30  # stream time never goes back


def test_silence_alert_fires_at_the_next_round_once_stream_time_passed_the_timer() -> None:
    processor, context = _task(silence.SilenceAlert)
    assert (
        process_logic.run_round(processor, context, _records(("a", "x", 0), ("b", "x", 5_000)), now=0) == []
    )
    # Stream time 12 s: a's timer (10 s) is due now, but fires at the next round, before its records.
    assert process_logic.run_round(processor, context, _records(("c", "x", 12_000)), now=0) == []
    assert process_logic.needs_wake_up(context)
    assert process_logic.run_round(processor, context, [], now=0) == [("a", "a silent since 0", 10_000)]
    assert not process_logic.needs_wake_up(context)  # b (15 s) and c (22 s) are not due
    # b beats again late (3 s < its newest 5 s): nothing changes; at 40 s b and c fall silent.
    process_logic.run_round(processor, context, _records(("b", "x", 3_000), ("d", "x", 40_000)), now=0)
    assert process_logic.fire_timers(processor, context, now=0) == [
        ("b", "b silent since 5000", 15_000),
        ("c", "c silent since 12000", 22_000),
    ]


class Stores(api.Processor):
    """Keeps a value (the count), a list (the values) and a map (value → last timestamp), the
    list and map with a TTL of 10 ms of stream time; emits what it reads after writing."""

    def init(self, context: api.ProcessorContext) -> None:
        self.count = context.value_state("count")
        self.values = context.list_state("values", ttl=10)
        self.seen = context.map_state("seen", ttl=10)

    def process(self, key: Any, records: list[api.Record]) -> Iterator[tuple[Any, Any]]:
        for r in records:
            self.count.update((self.count.get() or 0) + 1)
            self.values.append(r.value)
            self.seen.put(r.value, r.timestamp)
        yield key, (self.count.get(), self.values.get(), self.seen.items())


def test_value_list_and_map_state_per_key_with_ttl_in_stream_time() -> None:
    processor, context = _task(Stores)
    assert [s.describe() for s in context.declared] == [
        "count (value)",
        "values (list, ttl 10ms)",
        "seen (map, ttl 10ms)",
    ]
    out = process_logic.run_round(processor, context, _records(("k", "x", 100), ("j", "y", 100)), now=0)
    assert [o[1] for o in out] == [(1, ["x"], [("x", 100)]), (1, ["y"], [("y", 100)])]
    # Stream time 105: written at 100, still alive (alive while written + ttl > stream time).
    out = process_logic.run_round(processor, context, _records(("k", "z", 105)), now=0)
    assert out[0][1] == (2, ["x", "z"], [("x", 100), ("z", 105)])
    # Stream time 110: the entries written at stream time 100 are gone, the value state has no TTL.
    out = process_logic.run_round(processor, context, _records(("k", "x", 110)), now=0)
    assert out[0][1] == (3, ["z", "x"], [("z", 105), ("x", 110)])
    # j's entries expired too, and the next round's purge forgot them for good.
    process_logic.run_round(processor, context, [], now=0)
    assert "j" not in context.state["stores"]["values"]
    assert context.state["stores"]["count"]["j"] == (1, 100)


class Reminder(api.Processor):
    """A processing-time timer 1 s after each key's first record, then another one from on_timer."""

    def init(self, context: api.ProcessorContext) -> None:
        self.context = context
        self.fired = context.value_state("fired")

    def process(self, key: Any, records: list[api.Record]) -> tuple[()]:
        self.context.register_processing_time_timer(self.context.processing_time + 1000)
        return ()

    def on_timer(self, key: Any, timer: api.Timer) -> Iterator[tuple[Any, Any, int]]:
        count = (self.fired.get() or 0) + 1
        self.fired.update(count)
        if count < 2:
            self.context.register_processing_time_timer(timer.timestamp + 500)
        yield key, f"{timer.kind} #{count}", self.context.processing_time


def test_processing_time_timers_fire_at_the_first_round_at_or_after_their_time() -> None:
    processor, context = _task(Reminder)
    process_logic.run_round(processor, context, _records(("a", 1, 7)), now=10_000)
    assert process_logic.needs_wake_up(context)
    assert process_logic.fire_timers(processor, context, now=10_999) == []
    # Due at 11,000; the timer it registers (11,500) is due too and fires in the same round.
    assert process_logic.fire_timers(processor, context, now=12_000) == [
        ("a", "processing #1", 12_000),
        ("a", "processing #2", 12_000),
    ]
    assert not process_logic.needs_wake_up(context)


def test_the_api_refuses_what_it_does_not_do_by_name() -> None:
    class Twice(api.Processor):
        def init(self, context: api.ProcessorContext) -> None:
            context.value_state("s")
            context.map_state("s")

        def process(self, key: Any, records: list[api.Record]) -> tuple[()]:
            return ()

    with pytest.raises(api.ProcessorError, match="state store 's' is declared twice"):
        api.declared_stores(Twice)

    class BadTtl(Twice):
        def init(self, context: api.ProcessorContext) -> None:
            context.list_state("l", ttl=0)

    with pytest.raises(
        api.ProcessorError, match="list state 'l': ttl is a positive number of milliseconds, not 0"
    ):
        api.declared_stores(BadTtl)

    class NotATuple(Twice):
        def init(self, context: api.ProcessorContext) -> None:
            pass

        def process(self, key: Any, records: list[api.Record]) -> list[Any]:
            return ["oops"]

    processor, context = _task(NotATuple)
    with pytest.raises(api.ProcessorError, match=r"NotATuple.process must yield \(key, value\)"):
        process_logic.run_round(processor, context, _records(("a", 1, 1)), now=0)
    assert api.is_processor(silence.SilenceAlert) and not api.is_processor(api.Processor)
    assert not api.is_processor(len)


class FirstOnly(api.Processor):
    """Two event-time timers per key (10 and 11 ms after its record); the first deletes the second."""

    def init(self, context: api.ProcessorContext) -> None:
        self.context = context

    def process(self, key: Any, records: list[api.Record]) -> tuple[()]:
        self.context.register_event_time_timer(records[0].timestamp + 11)
        self.context.register_event_time_timer(records[0].timestamp + 10)
        return ()

    def on_timer(self, key: Any, timer: api.Timer) -> Iterator[tuple[Any, Any]]:
        self.context.delete_event_time_timer(timer.timestamp + 1)
        yield key, timer.timestamp


def test_due_timers_fire_in_time_order_and_a_timer_deleted_meanwhile_does_not_fire() -> None:
    processor, context = _task(FirstOnly)
    process_logic.run_round(processor, context, _records(("b", 0, 5), ("a", 0, 0), ("c", 0, 50)), now=0)
    assert process_logic.fire_timers(processor, context, now=0) == [("a", 10, 10), ("b", 15, 15)]
    assert set(context.state["timers"]) == {(process_logic.EVENT, "c", 61), (process_logic.EVENT, "c", 60)}
