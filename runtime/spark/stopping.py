"""Stop a streaming query at a micro-batch boundary, never in the middle of a sink write.

``query.stop()`` alone interrupts the running micro-batch: its jobs are cancelled half-way, the
batch was already written to the offset log, so it runs again on restart and the sink sees its
records twice (at-least-once), and a transactional sink has an open transaction to abort. Every
stop the operator causes — suspend, upgrade, rescale, a rotated credential, SIGTERM of the driver
Pod — should instead land between batches.

Spark has no "stop after this batch" call, so the boundary is made at the one place StreamApp
controls, the sink. :class:`Gate` wraps it; :func:`graceful_stop` closes the gate and then waits
for one of:

- **idle**: no sink write in flight and Spark reports no trigger active. The last batch's commit
  log entry is written before Spark clears ``isTriggerActive``, and any later batch parks at the
  closed gate, so interrupting now cancels at most the planning of a batch, which writes nothing;
- **parked**: the next batch reached the gate. It has been planned (its offsets are in the offset
  log) but nothing of it was read or written; the gate holds it while ``query.stop()`` begins, then
  fails it with :class:`StoppedAtBoundary`, so Spark records no commit for it and runs it, whole,
  after a restart;
- the timeout: the batch in flight is interrupted as ``query.stop()`` does (reported as such).

Two gates do this: :class:`Gate`, a Python ``foreachBatch`` function around any sink (the `print`
path, tests), and :class:`JvmGate`, the same gate in the JVM (``BatchGate.java``): entered by the
at-least-once ``KafkaSink.java`` before a batch's tasks start, or the ``foreachBatch`` function
around the exactly-once writer. Spark's stream thread runs it with no call into Python per batch.
Both check the process's fence (:func:`set_fence`: the driver's Lease) before a batch writes; the
JVM gate is told the fence's deadline after every renewal instead of asking each batch.

Real-time (``latency: low``) queries write through Spark's own Kafka sink: they
have no gate and are stopped by ``query.stop()`` (the report says ``interrupted``).

The timeout must fit in the driver Pod's grace period with Spark's own shutdown after it:
:data:`DEFAULT_TIMEOUT_S` + :data:`SHUTDOWN_BUDGET_S` ≤ the operator's ``GRACE_SECONDS`` (a test
checks it).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "SHUTDOWN_BUDGET_S",
    "Fence",
    "Gate",
    "JvmGate",
    "StopReport",
    "StoppedAtBoundary",
    "graceful_stop",
    "set_fence",
    "stopped_at_boundary",
]

#: How long a stop waits for the running batch to finish before it interrupts it. The longest
#: micro-batch a healthy app runs must fit (the bench's 2M-record batches take ~10 s).
DEFAULT_TIMEOUT_S = 40.0
#: What the driver needs after the query stopped: Spark's and the broker clients' shutdown.
SHUTDOWN_BUDGET_S = 15.0

_POLL_S = 0.05
#: What a parked batch's failure says, from either gate (BatchGate.java says it too): Spark reports
#: the JVM gate's error by its message, without the exception's class.
_PARKED = "was held before it started because the query is stopping"


class Fence(Protocol):
    """What allows this driver to write (:class:`streamapp.runtime.lease.Lease`)."""

    def check(self, batch_id: int) -> None:
        """Raise unless micro-batch ``batch_id`` may be written now."""

    def writable_for(self) -> tuple[float, str]:
        """The seconds from now writes stay allowed (≤ 0: not now), and why they are not after."""
        ...

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever :meth:`writable_for` changes other than by time passing."""


#: The gate of each running query, by query id (one process may run several queries: tests).
_GATES: dict[str, Gate | JvmGate] = {}
_GATES_LOCK = threading.Lock()
#: Checked before every micro-batch writes (the driver's Lease). None: no fence (local runs).
_FENCE: Fence | None = None


def set_fence(fence: Fence | None) -> None:
    """Install the process-wide fence every gate checks before a batch writes (see :mod:`..lease`);
    gates made before it do not see it."""
    global _FENCE  # noqa: PLW0603 - one fence per driver process
    _FENCE = fence


class StoppedAtBoundary(RuntimeError):
    """Raised in a parked batch so Spark does not commit it: it runs again, whole, on restart."""


@dataclasses.dataclass(frozen=True)
class StopReport:
    """How a query was stopped: ``idle`` (between batches), ``parked`` (the next batch held before
    it read anything), ``interrupted`` (a batch was cut off: it replays on restart), or
    ``already-stopped``; ``last_batch`` is the last batch whose sink write completed."""

    how: str
    seconds: float
    last_batch: int | None
    waited_for_batch: int | None = None  # the batch that was writing when the stop was asked

    @property
    def clean(self) -> bool:
        return self.how in ("idle", "parked", "already-stopped")


class Gate:
    """A ``foreachBatch`` function around the sink: lets batches through until closed."""

    def __init__(self, sink: Callable[[DataFrame, int], None]) -> None:
        self.sink = sink
        self._cond = threading.Condition()
        self._closed = False
        self._released = False
        self.writing: int | None = None  # batch id whose sink write is in flight
        self.parked: int | None = None  # batch id held at the closed gate
        self.last_done: int | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        with self._cond:
            if self._closed:
                self.parked = batch_id
                self._cond.notify_all()
                while not self._released:
                    self._cond.wait()
                raise StoppedAtBoundary(f"micro-batch {batch_id} {_PARKED}; it runs on restart")
            self.writing = batch_id
        try:
            if _FENCE is not None:
                _FENCE.check(batch_id)
            self.sink(batch, batch_id)
        finally:
            with self._cond:
                self.writing = None
                self.last_done = batch_id
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True

    def release(self) -> None:
        """Let a parked batch go (it fails with :class:`StoppedAtBoundary`)."""
        with self._cond:
            self._released = True
            self._cond.notify_all()

    def wait_change(self, timeout: float) -> None:
        with self._cond:
            self._cond.wait(timeout)


class JvmGate:
    """A ``BatchGate`` of the JVM (``runtime/jvm``'s ``BatchGate.java``): the gate of
    :class:`Gate` and the fence, run by Spark's stream thread with no call into Python. Give
    :attr:`java` to the Java ``DataStreamWriter.foreachBatch``."""

    def __init__(self, java: Any) -> None:
        self.java = java
        fence = _FENCE
        if fence is not None:

            def push() -> None:
                seconds, reason = fence.writable_for()
                java.fence(int(seconds * 1e9), reason)

            push()
            fence.on_change(push)

    @staticmethod
    def _id(value: Any) -> int | None:
        return None if value < 0 else int(value)

    @property
    def writing(self) -> int | None:
        return self._id(self.java.writing())

    @property
    def parked(self) -> int | None:
        return self._id(self.java.parked())

    @property
    def last_done(self) -> int | None:
        return self._id(self.java.lastDone())

    def close(self) -> None:
        self.java.close()

    def release(self) -> None:
        self.java.release()

    def wait_change(self, timeout: float) -> None:
        self.java.awaitChange(int(timeout * 1000))


def register(query: StreamingQuery, gate: Gate | JvmGate) -> None:
    """Remember ``gate`` as the one :func:`graceful_stop` closes for ``query``."""
    with _GATES_LOCK:
        _GATES[str(query.id)] = gate


def stopped_at_boundary(query: StreamingQuery) -> bool:
    """Whether the query's failure is a batch parked by :func:`graceful_stop` (not an error)."""
    error = query.exception()
    return error is not None and _PARKED in str(error)


def graceful_stop(query: StreamingQuery, timeout_s: float = DEFAULT_TIMEOUT_S) -> StopReport:
    """Stop ``query`` after its running batch (or before the next one); see the module's docstring."""
    started = time.monotonic()
    with _GATES_LOCK:
        gate = _GATES.pop(str(query.id), None)
    if not query.isActive:
        return StopReport("already-stopped", time.monotonic() - started, gate.last_done if gate else None)
    if gate is None:
        query.stop()
        return StopReport("interrupted", time.monotonic() - started, None)
    gate.close()
    waited_for = gate.writing
    deadline = started + timeout_s
    how = "interrupted"
    while query.isActive:
        if gate.parked is not None:
            how = "parked"
            break
        if gate.writing is None and not _trigger_active(query):
            how = "idle"
            break
        if time.monotonic() >= deadline:
            break
        gate.wait_change(_POLL_S)
    else:
        how = "already-stopped"
    if how == "parked":
        # stop() interrupts the query thread and waits for it; that thread waits for the parked
        # call to return, so stop() runs beside the release.
        stopper = threading.Thread(target=query.stop, name="streamapp-stop", daemon=True)
        stopper.start()
        time.sleep(_POLL_S)  # let stop() mark the query terminated before the batch fails
        gate.release()
        stopper.join()
    elif how != "already-stopped":
        query.stop()
    gate.release()
    return StopReport(how, time.monotonic() - started, gate.last_done, waited_for)


def _trigger_active(query: StreamingQuery) -> bool:
    status: Any = query.status
    return bool(status.get("isTriggerActive", True))
