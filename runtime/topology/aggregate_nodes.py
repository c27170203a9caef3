"""The aggregation nodes of the logical graph: ``count``, ``aggregate``, ``reduce`` and ``cogroup``.

Why a module of its own: an aggregation turns a grouped stream or table into a table per key, or,
with :class:`Windows` (Kafka Streams' TimeWindows, SlidingWindows, SessionWindows), per key and
window, emitting every update or one final result when a window closes. Nothing here knows about
Spark.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterator
from typing import ClassVar

from streamapp.runtime.topology import durations, nodes

__all__ = ["AGGREGATE_NODES", "EMITS", "WINDOW_KINDS", "Aggregate", "Cogroup", "Count", "Reduce", "Windows"]

#: Window kinds (Kafka Streams' TimeWindows with size = advance, TimeWindows with an advance,
#: SlidingWindows, SessionWindows) and emit strategies (every update, or once when a window closes).
WINDOW_KINDS = ("tumbling", "hopping", "sliding", "session")
EMITS = ("updates", "final")


@dataclasses.dataclass(frozen=True)
class Windows:
    """A window specification in milliseconds (``size``: a sliding window's max time difference,
    a session's inactivity gap); ``grace`` is how long after its end a window accepts records."""

    kind: str
    size: int
    advance: int = 0
    grace: int = 0

    def advance_by(self, advance: int | str | datetime.timedelta) -> Windows:
        """Hopping windows: these time windows, each starting ``advance`` after the previous (ms,
        ``"10s"`` or a timedelta, as the size)."""
        if self.kind not in ("tumbling", "hopping"):
            raise ValueError(f"advance_by applies to time windows, not {self.kind} windows")
        advance = durations.to_ms(advance)
        return dataclasses.replace(
            self, kind="tumbling" if advance == self.size else "hopping", advance=advance
        )

    def describe(self) -> str:
        extra = f", advance: {self.advance}ms" if self.kind == "hopping" else ""
        return f"{self.kind}: {self.size}ms{extra}, grace: {self.grace}ms"


def _windowing(windows: Windows | None, emit: str) -> list[str]:
    if windows is None:
        return []
    return [f"windows: {windows.describe()}"] + ([f"emit: {emit}"] if emit != "updates" else [])


@dataclasses.dataclass(frozen=True, kw_only=True)
class Count(nodes.Node):
    """Records per key (per key and window when ``windows`` is set), as a KTable."""

    op: ClassVar[str] = "count"
    word: ClassVar[str] = "AGGREGATE"
    windows: Windows | None = None
    emit: str = "updates"

    def detail(self) -> str:
        return ", ".join(_windowing(self.windows, self.emit))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Aggregate(nodes.Node):
    """An aggregate per key (and window): declarative — ``fn`` (sum, min, max, avg, latest,
    collect_list) of ``expr`` — or Kafka Streams' ``aggregate(initializer, adder[, subtractor])``
    with Python functions whose aggregate has the Spark type ``returns``."""

    op: ClassVar[str] = "aggregate"
    word: ClassVar[str] = "AGGREGATE"
    fn: str | None = None
    expr: str = "value"
    initializer: nodes.Function | None = None
    adder: nodes.Function | None = None
    subtractor: nodes.Function | None = None
    returns: str | None = None
    windows: Windows | None = None
    emit: str = "updates"

    def detail(self) -> str:
        if self.fn is not None:
            parts = [f"fn: {self.fn}", f"expr: {self.expr}"]
        else:
            parts = [
                f"{k}: {f.ref}"
                for k, f in (
                    ("initializer", self.initializer),
                    ("adder", self.adder),
                    ("subtractor", self.subtractor),
                )
                if f is not None
            ] + ([f"returns: {self.returns}"] if self.returns else [])
        return ", ".join(parts + _windowing(self.windows, self.emit))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Reduce(nodes.Node):
    """Kafka Streams' ``reduce(reducer[, subtractor])``: a Python function ``(aggregate, value)``."""

    op: ClassVar[str] = "reduce"
    word: ClassVar[str] = "REDUCE"
    reducer: nodes.Function
    subtractor: nodes.Function | None = None
    returns: str | None = None
    windows: Windows | None = None
    emit: str = "updates"

    def detail(self) -> str:
        parts = [f"reducer: {self.reducer.ref}"] + (
            [f"subtractor: {self.subtractor.ref}"] if self.subtractor else []
        )
        return ", ".join(parts + _windowing(self.windows, self.emit))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cogroup(nodes.Node):
    """Kafka Streams' ``cogroup``: several grouped streams (the parents, same key) folded into one
    aggregate per key (and window), each stream with its own ``adders[i]`` ``(key, value, agg)``."""

    op: ClassVar[str] = "cogroup"
    word: ClassVar[str] = "AGGREGATE"
    prefix: ClassVar[str] = "COGROUPKSTREAM"
    adders: tuple[nodes.Function, ...]
    initializer: nodes.Function
    returns: str
    windows: Windows | None = None
    emit: str = "updates"

    def logic(self) -> Iterator[nodes.Logic]:
        yield from (*self.adders, self.initializer)

    def detail(self) -> str:
        parts = [f"initializer: {self.initializer.ref}", f"adders: [{', '.join(a.ref for a in self.adders)}]"]
        return ", ".join([*parts, f"returns: {self.returns}", *_windowing(self.windows, self.emit)])


#: The aggregation node types, for isinstance checks (each has ``windows`` and ``emit``).
AGGREGATE_NODES = (Count, Aggregate, Reduce, Cogroup)
