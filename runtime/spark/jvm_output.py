"""Keep the JVM's stderr readable: drop the lines Spark's Python workers print on every query start.

Spark copies the stdout of its Python workers to the JVM's stderr. The driver-side worker of
``transformWithStateInPandas`` prints four debugging lines (and blank ones) each time a stateful
query starts ("Starting Streaming TransformWithStateInPandas Python worker." …): noise that tells
a user nothing. The JVM inherits the driver process's stderr when PySpark launches it, so while
the gateway starts, fd 2 is pointed at a pipe; a daemon thread forwards everything from it to the
real stderr except those lines. The Python process's own stderr is restored at once.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = ["NOISE", "filtered_jvm_stderr"]

#: Lines (by prefix, after stripping) that are dropped: the worker's, and the JVM's notice that
#: Spark uses the incubating vector API (printed on every start, nothing a user can act on).
NOISE = (
    "Starting Streaming TransformWithStateInPandas Python worker",
    "Streaming TransformWithStateInPandas",
    "WARNING: Using incubator modules",
)


def _forward(read_fd: int, write_fd: int) -> None:
    blank_run = False
    with os.fdopen(read_fd, "rb", buffering=0) as source:
        pending = b""
        while chunk := source.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            out = []
            for line in lines:
                text = line.strip()
                if text.decode(errors="replace").startswith(NOISE):
                    blank_run = True  # the worker follows each of its lines with an empty one
                    continue
                if not text and blank_run:
                    continue
                blank_run = False
                out.append(line + b"\n")
            if out:
                os.write(write_fd, b"".join(out))
        if pending:
            os.write(write_fd, pending)


@contextlib.contextmanager
def filtered_jvm_stderr() -> Iterator[None]:
    """Around the JVM's launch: the child inherits a filtered stderr, this process keeps its own."""
    saved = os.dup(2)
    read_fd, write_fd = os.pipe()
    try:
        os.dup2(write_fd, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(write_fd)
        threading.Thread(target=_forward, args=(read_fd, saved), name="jvm-stderr", daemon=True).start()
