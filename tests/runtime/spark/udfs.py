"""User functions referenced by the compiler tests as ``udfs:...`` (module-level, importable)."""

from __future__ import annotations

import pandas as pd

SEEN: list[int] = []


def shout(values: pd.Series) -> pd.Series:
    return values.str.upper() + "!"


def note(keys: pd.Series, values: pd.Series) -> None:
    SEEN.append(len(values))
