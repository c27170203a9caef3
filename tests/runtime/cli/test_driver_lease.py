"""`streamapp driver`'s hand-over on a real broker and local Spark, against a fake Lease: the lines
it prints, what it asks of the Lease, and how it ends (a rolling hand-over stopped by SIGTERM, a
lost Lease, a SIGTERM while it waits in standby). The real Lease and API server: e2e/test_fence.py."""

from __future__ import annotations

import os
import pathlib
import re
import signal
import threading
import time
from collections.abc import Callable

import pytest

from streamapp.runtime import Serdes, StreamApp, StreamsBuilder, StreamsConfig, errors
from streamapp.runtime import lease as lease_
from streamapp.runtime.cli import apps
from streamapp.runtime.kafka import admin


class FakeLease:
    """Held by ``shout-a/1`` until this driver (``shout-b/2``) acquires it; ``then`` runs once the
    driver notes that its query keeps up."""

    namespace, name, identity = "ns", "shout", "shout-b/2"

    def __init__(self, then: Callable[[FakeLease], None] = lambda _lease: None, *, cancel: bool = False):
        self.then, self.cancel = then, cancel
        self.calls: list[str] = []
        self.on_lost: Callable[[str], None] | None = None

    def other_holder(self) -> str | None:
        self.calls.append("other_holder")
        return "shout-a/1"

    def acquire(
        self, timeout: float | None = None, poll: float = 0.5, cancelled: Callable[[], bool] = bool
    ) -> float:
        self.calls.append("acquire")
        if self.cancel:
            _sigterm_in(0.2)
            while not cancelled():
                time.sleep(0.05)
            raise lease_.Cancelled("stopped while waiting for Lease ns/shout (held by shout-a/1)")
        return 0.0

    def start_renewing(self, on_lost: Callable[[str], None] | None = None) -> None:
        self.calls.append("start_renewing")
        self.on_lost = on_lost

    def mark_keeping_up(self) -> bool:
        self.calls.append("mark_keeping_up")
        self.then(self)
        return True

    def release(self) -> bool:
        self.calls.append("release")
        return not self.cancel  # a driver that never held it releases nothing

    def await_successor(self) -> tuple[str | None, float | None]:
        self.calls.append("await_successor")
        return "shout-c/3", 1.5

    # the fence every batch checks (stopping.set_fence)
    def check(self, batch_id: int) -> None:
        pass

    def writable_for(self) -> tuple[float, str]:
        return 1e6, "held"

    def on_change(self, listener: Callable[[], None]) -> None:
        pass


def _sigterm_in(seconds: float) -> None:
    """SIGTERM this process in ``seconds``, as the kubelet does a driver's, while the driver's handler is
    installed (never pytest's own default: it would end the test run)."""

    def send() -> None:
        if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Timer(seconds, send).start()


def _drive(
    spark: object, bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path, lease: FakeLease,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int | str, list[str]]:  # fmt: skip
    from streamapp.runtime.spark import stopping

    source, sink = new_topic(1), new_topic(1)
    admin.produce(bootstrap, source, [admin.Record(None, b"hello")])
    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    builder.stream(source).map_values("upper(value)").to(sink)
    config = StreamsConfig(
        bootstrap_servers=bootstrap, checkpoint_location=str(tmp_path), application_id="shout"
    )
    app = StreamApp(builder.build(), config, spark=spark, lease=lease)  # type: ignore[arg-type]
    capsys.readouterr()
    try:
        code: int | str = apps._execute(app)
    except errors.StreamAppError as exc:
        code = f"{type(exc).__name__}: {exc}"
    finally:
        stopping.set_fence(None)
    lines = [re.sub(r"\d+\.\d s", "N s", line) for line in capsys.readouterr().out.splitlines()]
    return code, [
        line for line in lines if not line.startswith(("running ", "shout: first micro-batch", "  "))
    ]


WARMING = (
    "shout: shout-a/1 runs the query: warming up first (the plan once on every executor over the last "
    "input records, through a dry run of the sink) …"
)
STANDBY = (
    "shout: standby after N s (Spark up, plan compiled, warmed up in N s); acquiring Lease ns/shout as "
    "shout-b/2 …"
)
SUMMARY = "summary of 'shout': 1 batch(es) in N s, 0 late record(s) dropped, 0 skipped"


def test_a_rolling_hand_over_waits_for_the_lease_and_hands_it_back_when_stopped(
    spark: object, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    lease = FakeLease(lambda _lease: _sigterm_in(0.3))
    code, lines = _drive(spark, kafka_bootstrap, new_topic, tmp_path, lease, capsys)
    assert code == 0
    assert lines == [
        "starting Spark for 'shout' (takes 4-10 s) …",
        WARMING,
        STANDBY,
        "shout: holding Lease ns/shout (waited N s)",
        "shout: released Lease ns/shout",
        "shout: shout-c/3 keeps up N s after the release; shutting Spark down",
        "shout: stopped (idle) after batch 0 in N s",
        SUMMARY,
    ]
    assert lease.calls == [
        "other_holder", "acquire", "start_renewing", "mark_keeping_up", "release", "await_successor",
    ]  # fmt: skip


def test_a_lost_lease_stops_the_driver_with_the_reason_and_nothing_is_released(
    spark: object, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    def lose(lease: FakeLease) -> None:
        assert lease.on_lost is not None
        threading.Timer(0.3, lease.on_lost, ("not renewed for 10 s",)).start()

    lease = FakeLease(lose)
    code, lines = _drive(spark, kafka_bootstrap, new_topic, tmp_path, lease, capsys)
    assert code == "StreamAppError: shout: stopped: not renewed for 10 s"
    assert lines[-2:] == ["shout: stopped (idle) after batch 0 in N s", SUMMARY]
    assert lease.calls == ["other_holder", "acquire", "start_renewing", "mark_keeping_up"]


def test_a_sigterm_in_standby_ends_the_driver_before_its_query_starts(
    spark: object, kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    lease = FakeLease(cancel=True)
    code, lines = _drive(spark, kafka_bootstrap, new_topic, tmp_path, lease, capsys)
    assert code == 0
    assert lines == [
        "starting Spark for 'shout' (takes 4-10 s) …",
        WARMING,
        STANDBY,
        "shout: stopped while waiting for Lease ns/shout (held by shout-a/1); the query never started",
    ]
    assert lease.calls == ["other_holder", "acquire", "release"]
    assert not (tmp_path / "offsets").exists()
