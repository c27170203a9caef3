"""Write every StreamingQueryProgress of a session as one JSON line, for the harness's breakdown.

Spark reports per micro-batch where the trigger's time went (``durationMs``: latestOffset, getBatch,
queryPlanning, addBatch, walCommit, commitOffsets, triggerExecution). A daemon thread polls the
active queries' ``recentProgress`` twice a second and appends batches it has not written yet; a
polling thread is used rather than a StreamingQueryListener because Python listener callbacks
arrive late under load and are lost when the process is stopped. The hand-written PySpark job
installs it itself; for StreamApp, ``sitecustomize`` in this folder installs it on every session
the CLI builds, so no profiler and no change to the runtime is needed.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

__all__ = ["ENV", "install"]

#: The file the progress lines go to; nothing is installed when it is unset.
ENV = "STREAMAPP_BENCH_PROGRESS"
_INTERVAL = 0.5


def _new_progress(query: Any, written: set[tuple[str, int]]) -> list[str]:
    """The progress lines of ``query`` not written yet, oldest first.

    Read from the JVM's buffer newest first, stopping at the first batch already written: a poll
    costs a few py4j calls per new batch. ``query.recentProgress`` would convert all of Spark's
    last 100 progresses through py4j on every poll, which loaded the measured driver's Python
    (and its GIL, which StreamApp's foreachBatch needs every batch) with hundreds of calls a second.
    """
    run_id = str(query.runId)
    buffer = query._jsq.recentProgress()
    lines: list[str] = []
    for index in range(len(buffer) - 1, -1, -1):
        progress = buffer[index]
        key = (run_id, int(progress.batchId()))
        if key in written:
            break
        written.add(key)
        lines.append(json.dumps(json.loads(progress.json())))
    return lines[::-1]


def install(session: Any, path: str | None = None) -> threading.Thread | None:
    target = path or os.environ.get(ENV)
    if not target or getattr(session, "_bench_progress", None):
        return None
    written: set[tuple[str, int]] = set()

    def poll() -> None:
        while True:
            time.sleep(_INTERVAL)
            try:
                lines = []
                for query in session.streams.active:
                    lines.extend(_new_progress(query, written))
                if lines:
                    with open(target, "a", encoding="utf-8") as out:
                        out.write("\n".join(lines) + "\n")
            except Exception:  # noqa: BLE001 - the session is stopping; the probe never breaks the app
                if getattr(session, "_bench_progress_stop", False):
                    return

    # When the session was up (Python imports, the JVM, the SparkContext): the harness's start-up
    # breakdown. The progress lines carry a timestamp; this one does not, so their reader skips it.
    with open(target, "a", encoding="utf-8") as out:
        out.write(json.dumps({"event": "session", "t": time.time()}) + "\n")
    thread = threading.Thread(target=poll, name="bench-progress", daemon=True)
    thread.start()
    session._bench_progress = thread
    return thread
