"""The hand-over's steps against a fake Lease (no Spark, no API server): what each step asks of the
Lease, and the lines the driver prints."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from streamapp.runtime import lease as lease_
from streamapp.runtime.app import handover
from streamapp.runtime.spark import stopping


class FakeLease:
    namespace, name, identity = "ns", "shout", "shout-b/2"

    def __init__(
        self, *, holder: str | None = None, successor: tuple[str | None, float | None] = (None, None)
    ):
        self.holder, self.successor = holder, successor
        self.calls: list[str] = []
        self.on_lost: Callable[[str], None] | None = None

    def other_holder(self) -> str | None:
        self.calls.append("other_holder")
        return self.holder

    def acquire(
        self, timeout: float | None = None, poll: float = 0.5, cancelled: Callable[[], bool] = bool
    ) -> float:
        self.calls.append("acquire")
        if cancelled():
            raise lease_.Cancelled("stopped while waiting for Lease ns/shout (held by shout-a/1)")
        return 1.25

    def start_renewing(self, on_lost: Callable[[str], None] | None = None) -> None:
        self.calls.append("start_renewing")
        self.on_lost = on_lost

    def mark_keeping_up(self) -> bool:
        self.calls.append("mark_keeping_up")
        return True

    def release(self) -> bool:
        self.calls.append("release")
        return True

    def await_successor(self) -> tuple[str | None, float | None]:
        self.calls.append("await_successor")
        return self.successor


@pytest.fixture(autouse=True)
def _no_fence() -> Iterator[None]:
    yield
    stopping.set_fence(None)


def _hand_over(lease: FakeLease) -> tuple[handover.HandOver, list[str]]:
    lines: list[str] = []
    return handover.HandOver(lease, "shout", lines.append), lines  # type: ignore[arg-type]


def test_a_rolling_hand_over_warms_up_waits_for_the_lease_and_hands_it_back() -> None:
    lease = FakeLease(holder="shout-a/1", successor=("shout-c/3", 2.5))
    steps, lines = _hand_over(lease)
    steps.begin(cancelled=lambda: False)
    assert steps.warm_up()
    steps.fence()
    assert stopping._FENCE is lease  # every batch checks it from now on
    steps.note_keeping_up()
    steps.note_keeping_up()  # once
    steps.hand_over()
    steps.release()  # the app ended: given back already
    assert lease.calls == [
        "other_holder", "acquire", "start_renewing", "mark_keeping_up", "release", "await_successor",
    ]  # fmt: skip
    assert lines[0].startswith("shout: shout-a/1 runs the query: warming up first (the plan once on every")
    assert lines[1].startswith("shout: standby after ")
    assert ", warmed up in " in lines[1]
    assert lines[1].endswith("); acquiring Lease ns/shout as shout-b/2 …")
    assert lines[2:] == [
        "shout: holding Lease ns/shout (waited 1.2 s)",
        "shout: released Lease ns/shout",
        "shout: shout-c/3 keeps up 2.5 s after the release; shutting Spark down",
    ]


def test_nobody_running_the_query_means_no_warm_up_and_a_successor_that_may_not_keep_up() -> None:
    lease = FakeLease(successor=("shout-c/3", None))
    steps, lines = _hand_over(lease)
    assert not steps.warm_up()
    steps.fence()
    assert ", warmed up in " not in lines[0]
    steps.hand_over()
    assert (
        lines[-1]
        == f"shout: shout-c/3 did not keep up within {lease_.HAND_OVER_WAIT_S:.0f} s; shutting Spark down"
    )


def test_a_lost_lease_is_neither_released_nor_handed_over() -> None:
    lease = FakeLease(successor=("shout-c/3", 1.0))
    steps, lines = _hand_over(lease)
    steps.fence()
    assert lease.on_lost is not None
    lease.on_lost("not renewed for 10 s")
    lease.on_lost("a later reason")
    assert steps.lost == "not renewed for 10 s"
    steps.hand_over()
    steps.release()
    assert "release" not in lease.calls and "await_successor" not in lease.calls
    assert not any("released" in line for line in lines)


def test_a_stop_asked_in_standby_cancels_the_wait() -> None:
    lease = FakeLease()
    steps, _lines = _hand_over(lease)
    steps.begin(cancelled=lambda: True)
    with pytest.raises(lease_.Cancelled):
        steps.fence()
    assert "start_renewing" not in lease.calls
