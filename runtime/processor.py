"""Custom stateful processors: StreamApp's Processor API (Kafka Streams' ``process()``).

Why: some logic is neither an expression nor an aggregation — an alert when a key falls silent,
de-duplication, a state machine per key. A processor is a small Python class; StreamApp runs it
per task under Spark's ``transformWithStateInPandas`` and keeps its state in the checkpoint::

    class SilenceAlert(Processor):
        returns = "string"                      # the Spark type of the values it emits

        def init(self, context: ProcessorContext) -> None:
            self.context = context
            self.last = context.value_state("last-seen")

        def process(self, key, records):
            newest = max(r.timestamp for r in records)
            if (last := self.last.get()) is not None:
                self.context.delete_event_time_timer(last + 10_000)
            self.last.update(max(newest, last or newest))
            self.context.register_event_time_timer(self.last.get() + 10_000)
            return ()

        def on_timer(self, key, timer):
            yield key, f"silent since {self.last.get()}"

From YAML: ``- process: {function: pkg.mod:SilenceAlert}``; from Python:
``stream.process(SilenceAlert)``.

**Tasks and stream time.** Records are processed per *task*, as in Kafka Streams: one task per
input partition (or, after a key change, per key hash, Kafka Streams' repartition topic). A task's
*stream time* is the largest record timestamp it has seen; it never goes back. Event time
(timers, TTL) is stream time — never the wall clock — so results are the same on every re-run.

**Order.** In each micro-batch a task takes its records in Kafka Streams' order (each input
partition in offset order, merged by the oldest head record), groups them by key in order of each
key's first record, and calls ``process(key, records)`` once per key, the records in that order
(an out-of-order record stays where its offset put it). Stream time is advanced over the whole
batch first, so during ``process`` it already includes the batch's records. Records with a null
key are dropped and counted (state is kept per key), as Kafka Streams' keyed steps do.

**Instances**: StreamApp makes one instance per Spark partition and calls ``init`` once on it; the
same instance serves every task and key there, one call at a time, so per-key data belongs in
state stores, not on ``self``.

**Timers** belong to the key being processed (``register_*`` inside ``process`` or
``on_timer``). They fire at *micro-batch boundaries*: at the start of a task's next micro-batch,
before its records, every event-time timer at or below the stream time reached so far and every
processing-time timer at or below the batch's start time (the wall clock) fires, in timestamp
order (ties: the order they were registered), calling ``on_timer(key, timer)``. A timer an
``on_timer`` registers at or below that time fires in the same round. When a micro-batch moved the
application's event time (the largest timestamp read), Spark runs the next micro-batch at once even
without new input (a no-data batch), so a silent key's timer fires although input paused. A
processing-time timer of an idle application waits for the next micro-batch (input, or a no-data
batch after event time moved): Spark runs no batch on the clock alone here.

**State** — ``value_state``, ``list_state``, ``map_state`` — is per key and per task, declared in
``init`` by name. ``ttl`` (milliseconds of stream time): an entry (a value, a list element, a map
entry) not written for ``ttl`` ms of stream time is gone; reads never return it.

**Output**: ``process`` and ``on_timer`` return (or yield) ``(key, value)`` or ``(key, value,
timestamp)`` tuples; the default timestamp is the newest of ``records`` for ``process`` and the
timer's for ``on_timer``. The key type stays the input's; the value's is ``returns`` (default the
input value type). Downstream, the key counts as changed (a later grouping repartitions).

Not implemented: an initial state, output headers (outputs carry none), a processor of a table
(refused by the graph checks: ``toStream`` first), other settings of the ``process`` step
(refused by name).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, NamedTuple

from streamapp.runtime import errors

__all__ = [
    "STORE_KINDS",
    "ListState",
    "MapState",
    "Processor",
    "ProcessorContext",
    "ProcessorError",
    "Record",
    "StoreSpec",
    "Timer",
    "ValueState",
    "declared_stores",
    "is_processor",
]

STORE_KINDS = ("value", "list", "map")


class ProcessorError(errors.StreamAppError):
    """A processor broke the API's rules (a store declared twice, an output that is no tuple, …)."""


class Record(NamedTuple):
    """One input record as ``process`` receives it (timestamp in epoch milliseconds)."""

    key: Any
    value: Any
    timestamp: int
    partition: int
    offset: int


class Timer(NamedTuple):
    """A timer that fired: its time (epoch ms) and kind, ``event`` or ``processing``."""

    timestamp: int
    kind: str


class StoreSpec(NamedTuple):
    """A state store as ``init`` declared it (``describe()`` lists them)."""

    name: str
    kind: str
    ttl: int | None

    def describe(self) -> str:
        return f"{self.name} ({self.kind}" + (f", ttl {self.ttl}ms)" if self.ttl else ")")


class ValueState(abc.ABC):
    """One value per key."""

    @abc.abstractmethod
    def get(self) -> Any:
        """The value, or None."""

    @abc.abstractmethod
    def exists(self) -> bool: ...

    @abc.abstractmethod
    def update(self, value: Any) -> None: ...

    @abc.abstractmethod
    def clear(self) -> None: ...


class ListState(abc.ABC):
    """A list per key; with a TTL each element expires on its own."""

    @abc.abstractmethod
    def get(self) -> list[Any]:
        """The live elements, oldest first (empty when none)."""

    @abc.abstractmethod
    def exists(self) -> bool: ...

    @abc.abstractmethod
    def append(self, value: Any) -> None: ...

    @abc.abstractmethod
    def update(self, values: Iterable[Any]) -> None:
        """Replace the list."""

    @abc.abstractmethod
    def clear(self) -> None: ...


class MapState(abc.ABC):
    """A map per key; with a TTL each entry expires on its own."""

    @abc.abstractmethod
    def get(self, user_key: Any) -> Any:
        """The entry's value, or None."""

    @abc.abstractmethod
    def contains(self, user_key: Any) -> bool: ...

    @abc.abstractmethod
    def put(self, user_key: Any, value: Any) -> None: ...

    @abc.abstractmethod
    def remove(self, user_key: Any) -> None: ...

    @abc.abstractmethod
    def items(self) -> list[tuple[Any, Any]]:
        """The live entries, in the order they were last written."""

    @abc.abstractmethod
    def exists(self) -> bool: ...

    @abc.abstractmethod
    def clear(self) -> None: ...


class ProcessorContext(abc.ABC):
    """What a processor may use: its state stores, timers and the task's clocks."""

    @abc.abstractmethod
    def value_state(self, name: str, *, ttl: int | None = None) -> ValueState: ...

    @abc.abstractmethod
    def list_state(self, name: str, *, ttl: int | None = None) -> ListState: ...

    @abc.abstractmethod
    def map_state(self, name: str, *, ttl: int | None = None) -> MapState: ...

    @abc.abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None:
        """A timer for the current key, firing once stream time reaches ``timestamp``."""

    @abc.abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None: ...

    @abc.abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None:
        """A timer for the current key, firing at the first micro-batch at or after ``timestamp``
        (epoch ms of the wall clock)."""

    @abc.abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None: ...

    @property
    @abc.abstractmethod
    def stream_time(self) -> int | None:
        """The task's stream time (epoch ms; None before its first record)."""

    @property
    @abc.abstractmethod
    def processing_time(self) -> int:
        """The start time of the current micro-batch (epoch ms of the wall clock)."""


Output = tuple[Any, Any] | tuple[Any, Any, int]


class Processor:
    """Base class of custom processors: override ``process`` (and ``on_timer`` for timers)."""

    #: The Spark SQL type of the values the processor emits (None: the input value type).
    returns: ClassVar[str | None] = None

    def init(self, context: ProcessorContext) -> None:
        """Declare the state stores (by name) and keep the context; called once per instance."""

    @abc.abstractmethod
    def process(self, key: Any, records: list[Record]) -> Iterable[Output]:
        """Handle one key's records of a micro-batch (see the module docstring for the order)."""

    def on_timer(self, key: Any, timer: Timer) -> Iterable[Output]:
        """A timer of ``key`` fired; by default nothing is emitted."""
        return ()


def is_processor(target: object) -> bool:
    """Whether ``target`` is a Processor subclass (what ``process: {function: ...}`` must name)."""
    return isinstance(target, type) and issubclass(target, Processor) and target is not Processor


class _Recorder(ProcessorContext):
    """A context that only records the stores ``init`` declares (for describe() and checks)."""

    def __init__(self) -> None:
        self.stores: list[StoreSpec] = []

    def _declare(self, name: str, kind: str, ttl: int | None) -> Any:
        check_store(self.stores, name, kind, ttl)
        self.stores.append(StoreSpec(name, kind, ttl))
        return None

    def value_state(self, name: str, *, ttl: int | None = None) -> ValueState:
        return self._declare(name, "value", ttl)  # type: ignore[no-any-return]

    def list_state(self, name: str, *, ttl: int | None = None) -> ListState:
        return self._declare(name, "list", ttl)  # type: ignore[no-any-return]

    def map_state(self, name: str, *, ttl: int | None = None) -> MapState:
        return self._declare(name, "map", ttl)  # type: ignore[no-any-return]

    def register_event_time_timer(self, timestamp: int) -> None:
        raise ProcessorError("init cannot register timers: there is no current key yet")

    delete_event_time_timer = register_processing_time_timer = register_event_time_timer
    delete_processing_time_timer = register_event_time_timer

    @property
    def stream_time(self) -> int | None:
        return None

    @property
    def processing_time(self) -> int:
        return 0


def check_store(declared: Iterable[StoreSpec], name: str, kind: str, ttl: int | None) -> None:
    """Refuse a store declared twice, a name that is not a non-empty string, a TTL that is not
    a positive number of milliseconds."""
    if not isinstance(name, str) or not name:
        raise ProcessorError(f"a state store's name is a non-empty string, not {name!r}")
    if any(s.name == name for s in declared):
        raise ProcessorError(f"state store {name!r} is declared twice")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0):
        raise ProcessorError(f"{kind} state {name!r}: ttl is a positive number of milliseconds, not {ttl!r}")


def declared_stores(processor_class: type[Processor]) -> list[StoreSpec]:
    """The stores ``processor_class().init`` declares, without running anything else."""
    recorder = _Recorder()
    processor_class().init(recorder)
    return recorder.stores


def outputs(produced: Iterable[Output] | None, default_ts: int, where: str) -> Iterator[tuple[Any, Any, int]]:
    """``(key, value, timestamp)`` for each tuple a processor returned (``where`` names it)."""
    for item in produced or ():
        if not isinstance(item, tuple) or len(item) not in (2, 3):
            raise ProcessorError(f"{where} must yield (key, value) or (key, value, timestamp), not {item!r}")
        if len(item) == 2:
            yield item[0], item[1], default_ts
        else:
            ts = item[2]
            if isinstance(ts, bool) or not isinstance(ts, int):
                raise ProcessorError(f"{where}: an output timestamp is epoch ms (an int), not {ts!r}")
            yield item[0], item[1], ts
