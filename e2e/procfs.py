"""What the e2e tests read from /proc about processes they started: a process's descendants (a
driver's JVM is a child of the container's Python process), and the files a process has mapped
(the class-data archive a JVM started from), and the CPU time a process tree used."""

from __future__ import annotations

import collections
import os
import pathlib

__all__ = ["class_data_archives", "cpu_seconds", "descendants"]


def descendants(root: int) -> list[int]:
    """Every process below ``root``, children first."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children[int(fields[1])].append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def class_data_archives(root: int) -> list[str]:
    """StreamApp's driver class-data archives mapped by ``root`` or a descendant (paths as the
    process sees them: inside a chroot, the image's)."""
    found: set[str] = set()
    for pid in [root, *descendants(root)]:
        try:
            maps = pathlib.Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        found |= {line.split()[-1] for line in maps.splitlines() if "/share/streamapp/driver-" in line}
    return sorted(found)


def cpu_seconds(root: int) -> float:
    """CPU time used so far by ``root`` and its descendants (an executor JVM, its Python workers)."""
    ticks = 0
    for pid in [root, *descendants(root)]:
        try:
            fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def uid(pid: int) -> int:
    """The real user id a process runs as."""
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:")))
