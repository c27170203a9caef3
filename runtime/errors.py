"""The runtime's errors, one tree, so callers catch what they can act on.

    StreamAppError
    ├── RunFailed         the app ran and failed: its query, or its plan on the input (exit 1)
    ├── IncompatibleState the checkpoint holds state of other stateful steps than the topology's
    ├── CheckpointLayoutError  the checkpoint was written by another StreamApp, in another layout;
    │                          says what was found and how to reset
    ├── KafkaCredentialsError  the Secret material spec.kafka.tls/sasl names is missing or unusable;
    │                          says which field, Secret and key, and where it was looked for
    ├── ManifestError     a manifest is invalid; ``problems`` lists every Problem found
    └── TopologyError     a graph cannot be built or is invalid (a lambda as user logic, a duplicate
                          node name, a bad expression); ``problems`` when there are several

A :class:`Problem` names where (a manifest path such as ``spec.topology.streams[0].steps[2].filter``,
or a node name for graphs built in Python) and what is wrong. The embedded components have their own
small tree (:mod:`streamapp.runtime.embedded.errors`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

__all__ = [
    "CheckpointLayoutError",
    "IncompatibleState",
    "KafkaCredentialsError",
    "ManifestError",
    "Problem",
    "StreamAppError",
    "TopologyError",
    "one_line",
]


class StreamAppError(Exception):
    """Root of the runtime's errors."""


class RunFailed(StreamAppError):
    """The app ran and failed (its query, or its plan on the input), as opposed to bad input."""


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with a manifest, named by its path (``spec.topology.streams[0].steps[2]``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class IncompatibleState(StreamAppError):
    """The checkpoint's state was written by a topology whose stateful steps differ; ``changes``
    says how (:func:`streamapp.runtime.topology.state.changes`)."""

    def __init__(self, checkpoint: str, changes: Sequence[str]) -> None:
        self.changes = list(changes)
        super().__init__(
            f"the checkpoint {checkpoint} holds state this topology cannot read: "
            + "; ".join(self.changes)
            + ". Revert the change, or reprocess on a fresh checkpoint (spec.deployment.reset, "
            "or another checkpointLocation)"
        )


class CheckpointLayoutError(StreamAppError):
    """The checkpoint's state is not in the layout this StreamApp reads
    (``layout``: :data:`streamapp.runtime.spark.checkpoints.LAYOUT`); ``found`` says what it is,
    e.g. ``written by an earlier StreamApp, layout 0``. No StreamApp converts another layout: the
    app resets."""

    def __init__(self, checkpoint: str, found: str, *, layout: int) -> None:
        self.checkpoint, self.found = checkpoint, found
        super().__init__(
            f"the checkpoint {checkpoint} was {found}; this StreamApp reads checkpoint layout {layout} only. "
            "Reset the app to reprocess its input on a fresh checkpoint: a new checkpoint location "
            "(spec.checkpointLocation, or streamapp run --checkpoint), or in a cluster "
            "spec.deployment.reset with a new id (the operator keeps the old checkpoint)"
        )


class KafkaCredentialsError(StreamAppError):
    """Kafka credentials the manifest refers to are missing or unusable; the message names the field."""


class ManifestError(StreamAppError):
    """The manifest is invalid; ``problems`` lists everything found, not just the first."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in problems))


class TopologyError(StreamAppError):
    """A builder call cannot form a valid topology; ``problems`` lists them when there are several."""

    def __init__(self, message: str, *, problems: Sequence[Problem] = ()) -> None:
        self.problems = list(problems)
        super().__init__(message)


def one_line(exc: BaseException | None) -> str:
    """The line of a (Spark) error that says what went wrong: the innermost cause's message."""
    if exc is None:
        return "unknown error"
    text = str(getattr(exc, "desc", None) or exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # A Python function's error (a UDF, the sink) arrives as a traceback inside Spark's message:
    # its own line, `ValueError: …`, is unqualified; Java's and py4j's wrappers are qualified.
    # raise_error() in the plan (a record a serde cannot read, under deserializationErrors: fail)
    # says all in its own message, however deep the wrappers (py4j's proxy, a sink's traceback).
    raised = [m.group(1) for ln in lines if (m := _RAISED.search(ln))]
    python = [ln for ln in lines if _PYTHON_ERROR.match(ln)]
    # Spark's own errors name their class (`[CAST_INVALID_INPUT] The value …`), however deep in
    # a wrapper's traceback (foreachBatch runs in Python behind py4j's proxy).
    classed = [m.group(1) for ln in lines if (m := _ERROR_CLASS.search(ln))]
    causes = [ln for ln in lines if ln.startswith("Caused by:")]
    # A task's own error, as Spark reports a failed job (the JVM sink's, run by the JVM gate).
    tasks = [m.group(1) for ln in lines if (m := _TASK_FAILURE.match(ln))]
    if raised:
        chosen = raised[-1]
    elif python:
        chosen = python[-1]
    elif classed:
        chosen = classed[-1]
    elif tasks:
        chosen = tasks[-1]
    elif causes:
        chosen = causes[-1][len("Caused by:") :].strip()
    else:
        chosen = lines[0] if lines else type(exc).__name__
    return chosen[:500]


_RAISED = re.compile(r"\[USER_RAISED_EXCEPTION\] (.+?)(?: SQLSTATE: \w+)?$")
_ERROR_CLASS = re.compile(r"^(?:[\w.$]+: )?(\[[A-Z][A-Z0-9_.]+\] .+?)(?: SQLSTATE: \w+)?$")
_TASK_FAILURE = re.compile(
    r"^Job aborted due to stage failure: .*?most recent failure: Lost task .*?\(TID \d+\) \([^)]*\): "
    r"(?:[a-z][\w$]*\.)+[A-Z][\w$]*: (.+)$"
)
_PYTHON_ERROR = re.compile(r"^[A-Z]\w*(Error|Exception|Exit|Interrupt): \S")
