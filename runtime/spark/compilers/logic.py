"""User logic from a node's parameters, as the compiler and its helper modules read it.

Why a module of its own: the sequencer (:mod:`..compiler`) and the modules beside this one
(:mod:`.sinks`' partitioner, :mod:`.aggregations`' grouping selector) all turn a node's
``{"function": …}`` or ``{"expr": …}`` into a :class:`..frames.Logic`, and a predicate into a
column with SQL's three-valued logic; one definition keeps them the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamapp.runtime.spark import frames, user_code

__all__ = ["condition", "of"]


def of(params: Mapping[str, Any]) -> frames.Logic:
    """The logic ``params`` name: a user function (with its declared type) or a SQL expression."""
    if "function" in params:
        return frames.Logic(
            function=user_code.resolve_function(params["function"]), returns=params.get("returns")
        )
    return frames.Logic(expr=params["expr"])


def condition(frame: frames.RecordFrame, params: Mapping[str, Any], *, negate: bool = False) -> Column:
    """Whether a record passes a predicate: TRUE passes (``negate``: FALSE does, filterNot); a
    NULL passes neither, SQL's three-valued logic, as ``RecordFrame.filter``."""
    passes = frame.evaluate(of(params), default_type="boolean")
    return F.coalesce(~passes if negate else passes, F.lit(False))
