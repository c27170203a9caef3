"""The processor of the ``silent-keys`` example: an alert when a key falls silent.

Importable (``streamapp.runtime.cli.examples.silence:SilenceAlert``) so that executors load it
from the installed package, as they would a user's own module in the runtime image.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamapp.runtime import processor

__all__ = ["SilenceAlert"]


class SilenceAlert(processor.Processor):
    """One alert per key and silence: ``<key> silent since <last timestamp>`` once stream time is
    ``silence`` ms past the key's newest record; the alert carries the timer's timestamp."""

    returns = "string"
    silence = 10_000

    def init(self, context: processor.ProcessorContext) -> None:
        self.context = context
        self.last_seen = context.value_state("last-seen")

    def process(self, key: Any, records: list[processor.Record]) -> Iterator[tuple[Any, Any]]:
        newest = max(r.timestamp for r in records)
        last = self.last_seen.get()
        if last is not None:
            if newest <= last:
                return  # only older records (out of order): the key's silence is unchanged
            self.context.delete_event_time_timer(last + self.silence)
        self.last_seen.update(newest)
        self.context.register_event_time_timer(newest + self.silence)
        yield from ()

    def on_timer(self, key: Any, timer: processor.Timer) -> Iterator[tuple[Any, Any]]:
        last = self.last_seen.get()
        self.last_seen.clear()
        yield key, f"{key} silent since {last}"
