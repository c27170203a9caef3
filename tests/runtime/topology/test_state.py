"""The state fingerprint: which edits of a stateful topology keep its checkpoint readable.

Each case builds a running app and an edit of it with the Python builder and asserts what
:func:`state.changes` says: nothing for an edit a redeploy may make, and the step and property
for one whose state Spark would misread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from streamapp.runtime import Function, Processor, ProcessorContext, Serdes, StreamsBuilder, serdes
from streamapp.runtime.topology import SessionWindows, SlidingWindows, TimeWindows, graph, state

Edit = Callable[[StreamsBuilder], None]


def _build(body: Edit) -> graph.Topology:
    b = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    body(b)
    return b.build()


def _changes(before: Edit, after: Edit) -> list[str]:
    return state.changes(state.fingerprint(_build(before)), state.fingerprint(_build(after)))


def _per_minute(b: StreamsBuilder, *, size: str = "1m", grace: str = "10s", rekey: bool = False) -> None:
    s = b.stream("in").filter("value IS NOT NULL")
    s = s.select_key("upper(value)") if rekey else s
    windows = TimeWindows.of_size_and_grace(size, grace)
    s.group_by_key().windowed_by(windows).count().to_stream().to("counts", value_serde=Serdes.Long())


def _word_count(b: StreamsBuilder, *, fn: str = "sum", mapper: str = "lower(value)") -> None:
    words = b.stream("in").flat_map_values("explode(split(value, ' '))").map_values(mapper)
    words.group_by("value").aggregate(fn, "length(value)").to_stream().to("sums")


def test_edits_a_redeploy_may_make_keep_the_state() -> None:
    # A stateless step added before the aggregation, grace, another sink topic: same state.
    assert _changes(_per_minute, lambda b: _per_minute(b, grace="1m")) == []
    assert _changes(_word_count, lambda b: _word_count(b, mapper="upper(value)")) == []

    def renamed_sink(b: StreamsBuilder) -> None:
        windows = TimeWindows.of_size_and_grace("1m", "10s")
        s = (
            b.stream("in")
            .filter("value IS NOT NULL")
            .filter("length(value) > 1")
            .peek(Function("os.path:join"))
        )
        s.group_by_key().windowed_by(windows).count().to_stream().to("counts-v2", value_serde=Serdes.Long())

    assert _changes(_per_minute, renamed_sink) == []


def test_a_new_window_size_names_the_step_and_both_sizes() -> None:
    found = _changes(_per_minute, lambda b: _per_minute(b, size="30s"))
    assert len(found) == 1
    assert "stateful step 1, KSTREAM-AGGREGATE-" in found[0]
    assert "windows was 'tumbling 60000 ms', now 'tumbling 30000 ms'" in found[0]


def test_a_key_change_in_front_of_a_windowed_count_is_caught() -> None:
    # Its windows were kept per input partition; after a selectKey, per task of the new key.
    found = _changes(_per_minute, lambda b: _per_minute(b, rekey=True))
    assert any("grouping was 'input partition', now 'task'" in line for line in found)
    assert any(
        "key was 'as read: string', now 'computed in the app (repartitioned)'" in line for line in found
    )


def test_another_aggregation_function_is_caught() -> None:
    found = _changes(_word_count, lambda b: _word_count(b, fn="avg"))
    assert len(found) == 1
    assert "aggregator was 'sum(length(value)) of string', now 'avg(length(value)) of string'" in found[0]


def test_adding_a_stateful_step_is_caught_and_lists_both_plans() -> None:
    def more(b: StreamsBuilder) -> None:
        _word_count(b)
        b.stream("clicks").group_by_key().count().to_stream().to("clicks-per-key")

    found = _changes(_word_count, more)
    assert len(found) == 1 and "changed from 1 to 2" in found[0]
    assert found[0].count("aggregation") == 3


def test_a_windowed_step_moves_every_aggregation_to_the_engine() -> None:
    # A plain count runs on Spark's aggregation until the app has a step only the engine runs;
    # then its state is the engine's, which Spark's state cannot become.
    def plus_windowed(b: StreamsBuilder) -> None:
        _word_count(b)
        _per_minute(b)

    found = state.changes(
        state.fingerprint(_build(_word_count)), state.fingerprint(_build(plus_windowed))[:1]
    )
    assert found and "implementation was 'spark', now 'engine'" in found[0]


def test_a_table_whose_values_change_type_is_caught() -> None:
    def table(serde: serdes.Serde) -> Edit:
        def body(b: StreamsBuilder) -> None:
            b.stream("in", value_serde=serde).to_table().to_stream().to("latest")

        return body

    found = _changes(table(Serdes.String()), table(Serdes.Long()))
    assert len(found) == 1 and "value was 'string', now 'long'" in found[0]


@pytest.mark.parametrize("suppress", [False, True])
def test_only_steps_that_reach_an_output_count(suppress: bool) -> None:
    def body(b: StreamsBuilder) -> None:
        counts = b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace("1m", "0s")).count()
        b.stream("unused").group_by_key().count()  # no sink: not in the query plan
        (counts.suppress() if suppress else counts).to_stream().to("out")

    steps = state.fingerprint(_build(body))
    assert [s["shape"]["emit"] for s in steps] == ["final" if suppress else "updates"]


class Seen(Processor):
    """A processor whose store ``seen`` is a value state (``SeenList``: a list state)."""

    def init(self, context: ProcessorContext) -> None:
        self.seen = context.value_state("seen")

    def process(self, key: object, records: list[object]) -> list[tuple[object, object]]:
        return []


class SeenList(Seen):
    def init(self, context: ProcessorContext) -> None:
        self.seen = context.list_state("seen")


class SeenAndMore(Seen):
    def init(self, context: ProcessorContext) -> None:
        self.seen = context.value_state("seen")
        self.extra = context.map_state("extra")


def _processor_steps(cls: type[Processor], *, stores_known: bool = True) -> list[dict[str, Any]]:
    """The fingerprint of ``in → process(cls) → out`` with one processor reference for every
    class (a new version of one class), without the stores where they are unknown (the operator)."""
    topology = _build(lambda b: b.stream("in").process(cls).to("out"))
    steps = state.fingerprint(topology)
    for step in steps:
        step["shape"]["processor"] = "app.processors:Seen"
        if not stores_known:
            step["shape"].pop("stores", None)
    return steps


def test_a_processor_store_that_changes_kind_is_caught_and_one_added_is_not() -> None:
    assert _processor_steps(Seen)[0]["shape"]["stores"] == "seen: value"
    found = state.changes(_processor_steps(Seen), _processor_steps(SeenList))
    assert found == [
        "stateful step 1, KSTREAM-PROCESSOR-0000000001: store 'seen' was value state, now list state"
    ]
    assert state.changes(_processor_steps(Seen), _processor_steps(SeenAndMore)) == []
    assert state.changes(_processor_steps(SeenAndMore), _processor_steps(Seen)) == []
    # Where the class cannot be imported (the operator) no stores are known: nothing to compare.
    assert state.changes(_processor_steps(Seen), _processor_steps(SeenList, stores_known=False)) == []


def test_time_windows_with_a_declarative_aggregator_keep_their_state_on_the_jvm() -> None:
    def implementation(body: Edit) -> list[str]:
        return [s["shape"]["implementation"] for s in state.fingerprint(_build(body))]

    assert implementation(_per_minute) == ["jvm"]
    assert implementation(lambda b: _per_minute(b, rekey=True)) == ["jvm"]  # one task per key bucket

    def summed(b: StreamsBuilder) -> None:
        windows = TimeWindows.of_size_and_grace("1m", "10s").advance_by("20s")
        grouped = b.stream("in").group_by_key().windowed_by(windows)
        grouped.aggregate("sum", "length(value)").to_stream().to("o")

    assert implementation(summed) == ["jvm"]

    def sessions(b: StreamsBuilder) -> None:
        gap = SessionWindows.of_inactivity_gap_and_grace("1m", "10s")
        b.stream("in").group_by_key().windowed_by(gap).count().to_stream().to("o")

    def session_lists(b: StreamsBuilder) -> None:
        gap = SessionWindows.of_inactivity_gap_and_grace("1m", "10s")
        b.stream("in").group_by_key().windowed_by(gap).aggregate("collect_list", "value").to_stream().to("o")

    def sliding(b: StreamsBuilder) -> None:
        windows = SlidingWindows.of_time_difference_and_grace("1m", "10s")
        b.stream("in").group_by_key().windowed_by(windows).aggregate("max", "value").to_stream().to("o")

    assert implementation(sessions) == implementation(sliding) == ["jvm"]

    def merged(b: StreamsBuilder) -> None:
        windows = TimeWindows.of_size_and_grace("1m", "10s")
        b.stream("in").merge(b.stream("in2")).group_by_key().windowed_by(windows).count().to_stream().to("o")

    def python_adder(b: StreamsBuilder) -> None:
        windows = TimeWindows.of_size_and_grace("1m", "10s")
        grouped = b.stream("in").group_by_key().windowed_by(windows)
        adder = Function("builtins:max")
        grouped.aggregate(Function("builtins:int"), adder, returns="bigint").to_stream().to("o")

    # A merge of two topics (the merge frontier), Python functions and a session's collect_list
    # (a merge would order values by timestamp) stay in Python.
    assert (
        implementation(merged) == implementation(python_adder) == implementation(session_lists) == ["engine"]
    )
    found = state.changes(state.fingerprint(_build(python_adder)), state.fingerprint(_build(_per_minute)))
    assert found and "implementation was 'engine', now 'jvm'" in found[0]


def _sessions(b: StreamsBuilder, *, suppress: bool = False) -> None:
    gap = SessionWindows.of_inactivity_gap_and_grace("1m", "10s")
    counts = b.stream("in").group_by_key().windowed_by(gap).count()
    (counts.suppress() if suppress else counts).to_stream().to("o")


@pytest.mark.parametrize("suppress", [False, True])
def test_a_checkpoint_whose_windows_another_engine_wrote_is_refused(suppress: bool) -> None:
    topology = _build(lambda b: _sessions(b, suppress=suppress))
    today = state.fingerprint(topology)
    assert [s["shape"]["implementation"] for s in today] == ["jvm"]
    # What a StreamApp from before sessions ran on the JVM recorded for the same topology.
    recorded = [{**s, "shape": {**s["shape"], "implementation": "engine"}} for s in today]
    changes = state.changes(recorded, today)
    assert len(changes) == 1 and "implementation" in str(changes[0]), changes
