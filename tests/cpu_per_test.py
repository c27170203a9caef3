"""make test's CPU per test (``-p tests.cpu_per_test``): the machine's busy CPU-seconds from a test's
setup to its teardown, as the property ``cpu_s`` of the JUnit report and, for the 25 largest, in
the run's summary with the wall time beside them.

Why: on 2 cores the suite is bound by CPU (the Spark and Kafka JVMs), not by waiting, so the way
to a shorter ``make test`` is less work per test, and this says where the work is. The figure is
the whole machine's, so it counts the JVMs a test starts and is only meaningful when nothing else
runs beside the suite (CI). A session-scoped fixture's start-up counts in the first test using it.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

_TICK = os.sysconf("SC_CLK_TCK")
_START = pytest.StashKey[tuple[float, float]]()
_USED: dict[str, tuple[float, float]] = {}  # nodeid → (CPU s, wall s)


def _busy() -> float:
    """CPU-seconds the machine has spent not idle since boot (/proc/stat's first line)."""
    with open("/proc/stat") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:9]]  # user … steal (guest is in user)
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICK  # less idle and iowait


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_START] = (_busy(), time.monotonic())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    if call.when == "teardown" and _START in item.stash:
        cpu, wall = item.stash[_START]
        used = (_busy() - cpu, time.monotonic() - wall)
        _USED[item.nodeid] = used
        item.user_properties.append(("cpu_s", f"{used[0]:.1f}"))
    yield


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _USED:
        return
    cpu = sum(c for c, _ in _USED.values())
    wall = sum(w for _, w in _USED.values())
    terminalreporter.section("CPU per test (machine-wide busy CPU-seconds, setup to teardown)")
    terminalreporter.write_line(
        f"{len(_USED)} tests: {cpu:.0f} CPU-s in {wall:.0f} s ({cpu / max(wall, 1e-9):.2f} cores busy)"
    )
    for nodeid, (c, w) in sorted(_USED.items(), key=lambda kv: -kv[1][0])[:25]:
        terminalreporter.write_line(f"{c:7.1f} CPU-s {w:7.1f} s  {nodeid}")
