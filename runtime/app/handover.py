"""The in-cluster hand-over: a driver runs its query only while it holds the app's Lease.

A :class:`streamapp.runtime.StreamApp` given a :class:`streamapp.runtime.lease.Lease` (the driver
Pod's, ``STREAMAPP_LEASE``) owns a :class:`HandOver`, and its life cycle calls it at each step:

1. **warm-up** (:meth:`HandOver.warm_up`, once Spark is up): when another driver holds the Lease
   and runs the query (a rolling hand-over), the plan first runs once over the last input records
   (:mod:`streamapp.runtime.spark.warm_up`) while that driver still works;
2. **standby** (:meth:`HandOver.fence`, Spark up and the plan compiled): the query starts once
   this driver holds the Lease; the Lease then fences every batch (``stopping.set_fence``) and is
   renewed from a thread; a stop asked meanwhile gives up waiting (:class:`lease.Cancelled`);
3. **keeping up** (:meth:`HandOver.note_keeping_up`): once the query keeps up, the Lease says so,
   and the driver this one took over from shuts its Spark down;
4. **stopped** (:meth:`HandOver.hand_over`, the query stopped, Spark still up): the Lease goes back
   at once, and Spark stays up, idle, until the driver taking over keeps up;
5. **ended** (:meth:`HandOver.release`): the Lease is released if it has not been yet.

Losing the Lease (renewals failing) stops the app; :attr:`HandOver.lost` says why. What happens is
told in lines (``say``) that ``streamapp driver`` prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamapp.runtime import lease as lease_

__all__ = ["HandOver"]


class HandOver:
    """The hooks a driver's life cycle calls to hand its query over (see the module)."""

    def __init__(self, lease: lease_.Lease, name: str, say: Callable[[str], None]) -> None:
        self.lease, self.name, self._say = lease, name, say
        #: why the Lease was lost (the app then stops); None while it is held or was given back
        self.lost: str | None = None
        self._began = time.monotonic()
        self._cancelled: Callable[[], bool] = lambda: False
        self._warming: float | None = None  # when the warm-up began
        self._released = False  # once: by the hand-over, else when the app has ended
        self._noted = False  # keeping up was noted on the Lease

    def begin(self, cancelled: Callable[[], bool]) -> None:
        """The app starts now; ``cancelled()`` true (a stop asked) gives up waiting for the Lease."""
        self._began, self._cancelled = time.monotonic(), cancelled

    def warm_up(self) -> bool:
        """A running driver holds the Lease (a rolling hand-over): warm up while it works."""
        holder = self.lease.other_holder()
        if holder is not None:
            self._warming = time.monotonic()
            self._say(
                f"{self.name}: {holder} runs the query: warming up first (the plan once on every executor "
                "over the last input records, through a dry run of the sink) …"
            )
        return holder is not None

    def fence(self) -> None:
        """Standby: Spark is up and the plan compiled; the query starts once the Lease is ours."""
        from streamapp.runtime.spark import stopping  # noqa: PLC0415

        lease, now = self.lease, time.monotonic()
        warmed = f", warmed up in {now - self._warming:.1f} s" if self._warming is not None else ""
        self._say(
            f"{self.name}: standby after {now - self._began:.1f} s (Spark up, plan compiled{warmed}); "
            f"acquiring Lease {lease.namespace}/{lease.name} as {lease.identity} …"
        )
        waited = lease.acquire(poll=0.2, cancelled=self._cancelled)
        self._say(f"{self.name}: holding Lease {lease.namespace}/{lease.name} (waited {waited:.1f} s)")
        stopping.set_fence(lease)
        lease.start_renewing(self._on_lost)

    def _on_lost(self, reason: str) -> None:
        if self.lost is None:
            self.lost = reason

    def note_keeping_up(self) -> None:
        """The query keeps up: the driver this one took over from shuts down now (once)."""
        if not self._noted:
            self._noted = True
            self.lease.mark_keeping_up()

    def release(self) -> None:
        """Give the Lease back, once (not when it was lost): the next driver may start at once."""
        if self.lost is not None or self._released:
            return
        self._released = True
        lease = self.lease
        if lease.release():
            self._say(f"{self.name}: released Lease {lease.namespace}/{lease.name}")

    def hand_over(self) -> None:
        """The query has stopped: the Lease goes back at once, and Spark stays up, idle, until the
        driver taking over keeps up (its first micro-batch done, or no input waiting) or
        :data:`lease.HAND_OVER_WAIT_S` passed. A Spark shutting down (executors, state stores,
        the JVMs) takes the CPU that first batch needs wherever the two drivers share nodes
        (measured in an e2e hand-over on 2 cores: the first batch took 2.7-2.9 s next to a
        shutdown, 1.7-1.9 s next to an idle Spark)."""
        from streamapp.runtime import lease as lease_  # noqa: PLC0415

        self.release()
        if self.lost is not None:
            return
        successor, waited = self.lease.await_successor()
        if successor is not None:
            done = (
                f"keeps up {waited:.1f} s after the release"
                if waited is not None
                else f"did not keep up within {lease_.HAND_OVER_WAIT_S:.0f} s"
            )
            self._say(f"{self.name}: {successor} {done}; shutting Spark down")
