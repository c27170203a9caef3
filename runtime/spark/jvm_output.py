"""Keep the JVM's stderr readable: drop the lines Spark's Python workers print on every query start.

Spark copies the stdout of its Python workers to the JVM's stderr. The driver-side worker of
``transformWithStateInPandas`` prints four debugging lines (and blank ones) each time a stateful
query starts ("Starting Streaming TransformWithStateInPandas Python worker." …): noise that tells
a user nothing. The JVM inherits the driver process's stderr when PySpark launches it, so while
the gateway starts, fd 2 is pointed at a pipe; a daemon thread forwards everything from it to the
real stderr except those lines. The Python process's own stderr is restored at once, and while
the launch lasts ``sys.stderr`` writes to the real stderr: the CLI reports a broker it cannot
reach from another thread while Spark still starts (for longer on a loaded machine), and that
line, written into the pipe before its reader started, was lost when the process exited.
"""

from __future__ import annotations

import contextlib
import os
import sys
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
    own = sys.stderr
    try:
        os.dup2(write_fd, 2)
        if own is not None:
            # Left open afterwards: a thread that took it from sys.stderr may still write to it.
            sys.stderr = open(  # noqa: SIM115
                os.dup(saved), "w", buffering=1, encoding=getattr(own, "encoding", None),
                errors=getattr(own, "errors", None),
            )  # fmt: skip
        yield
    finally:
        sys.stderr = own
        os.dup2(saved, 2)
        os.close(write_fd)
        threading.Thread(target=_forward, args=(read_fd, saved), name="jvm-stderr", daemon=True).start()
