"""A measured variant as a process tree: launch, CPU time from /proc, pause/resume, clean stop.

Each variant starts in its own session (``start_new_session``), so the tree is every process whose
session id is the leader's pid plus every descendant of the leader (Spark starts a JVM, the JVM
starts Python workers). CPU time is utime+stime of the live members plus cutime+cstime (children
they already reaped), read from ``/proc/<pid>/stat``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

__all__ = ["Variant", "cpu_seconds", "tree"]

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        raw = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # Fields after "(comm)": state ppid pgrp session ... utime(11) stime cutime cstime ... starttime(19)
    return raw[raw.rfind(")") + 2 :].split()


def tree(root: int) -> dict[int, str]:
    """pid → start time of the root, its descendants and members of its session (live ones)."""
    stats: dict[int, list[str]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and fields[0] not in ("Z", "X"):
                stats[int(entry.name)] = fields
    members = {pid for pid, f in stats.items() if int(f[3]) == root}
    if root in stats:
        members.add(root)
    grew = True
    while grew:
        grew = False
        for pid, f in stats.items():
            if pid not in members and int(f[1]) in members:
                members.add(pid)
                grew = True
    return {pid: stats[pid][19] for pid in members}


def cpu_seconds(pids: Sequence[int]) -> float:
    total = 0
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            total += sum(int(x) for x in fields[11:15])
    return total / _TICK


@dataclasses.dataclass
class Variant:
    """One launched variant; ``stop()`` is idempotent and leaves no process of its tree behind."""

    name: str
    argv: Sequence[str]
    workdir: pathlib.Path
    env: Mapping[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None
    launched_at: float = 0.0
    launched_wall: float = 0.0  # time.time() at launch: against what the process itself reports
    seen: dict[int, str] = dataclasses.field(default_factory=dict)

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.workdir / "output.log", "wb") as out:
            self.launched_at, self.launched_wall = time.monotonic(), time.time()
            self.proc = subprocess.Popen(
                list(self.argv),
                cwd=self.workdir,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(self.env or {})},
                start_new_session=True,
            )

    @property
    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def members(self) -> list[int]:
        if self.proc is None:
            return []
        current = tree(self.proc.pid)
        self.seen.update(current)
        return sorted(current)

    def cpu(self) -> float:
        return cpu_seconds(self.members())

    def signal_all(self, sig: signal.Signals) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)
        for pid in self.members():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def pause(self) -> None:
        self.signal_all(signal.SIGSTOP)
        # A process forked while the others were being stopped is caught by a second pass.
        self.signal_all(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal_all(signal.SIGCONT)

    def log_tail(self, lines: int = 15) -> str:
        path = self.workdir / "output.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, grace: float = 30.0) -> list[int]:
        """SIGTERM the tree, SIGKILL what is left after ``grace``; returns pids that had to be killed."""
        if self.proc is None:
            return []
        self.members()
        self.signal_all(signal.SIGCONT)  # a paused process cannot act on SIGTERM
        # The leader first (a PySpark driver stops its query and its JVM itself), then the others.
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        for sig, seconds in ((None, grace * 2 / 3), (signal.SIGTERM, grace / 3)):
            if sig is not None and self._alive():
                self.signal_all(sig)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and self._alive():
                time.sleep(0.2)
        killed = sorted(self._alive())
        for pid in killed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while self._alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        leaked = self._alive()
        if leaked:
            raise RuntimeError(f"{self.name}: processes {sorted(leaked)} survived SIGKILL")
        return killed

    def _alive(self) -> set[int]:
        """Members ever seen that still run (same pid and start time: not a reused pid)."""
        if self.proc is not None and self.proc.poll() is None:
            self.members()
        alive = set()
        for pid, started in self.seen.items():
            fields = _stat(pid)
            if fields is not None and fields[19] == started and fields[0] not in ("Z", "X"):
                alive.add(pid)
        return alive
