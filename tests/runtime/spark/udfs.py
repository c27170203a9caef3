"""User functions referenced by the compiler tests as ``udfs:...`` (module-level, importable)."""

from __future__ import annotations

import pandas as pd

SEEN: list[int] = []


def shout(values: pd.Series) -> pd.Series:
    return values.str.upper() + "!"


def note(keys: pd.Series, values: pd.Series) -> None:
    SEEN.append(len(values))


# Aggregators: called per record with plain Python values (not pandas), as in Kafka Streams.


def zero() -> int:
    return 0


def add_length(value: str, aggregate: int) -> int:
    return aggregate + len(value)


def subtract_length(value: str, aggregate: int) -> int:
    return aggregate - len(value)


def longer(aggregate: str, value: str) -> str:
    return value if len(value) > len(aggregate) else aggregate


def add_one(key: str, value: str, aggregate: int) -> int:
    return aggregate + 1


def add_ten(key: str, value: str, aggregate: int) -> int:
    return aggregate + 10


def refuse_boom(values: pd.Series) -> pd.Series:
    """A revision's bug: it fails on the value ``boom``."""
    if (values == "boom").any():
        raise ValueError("refuse_boom: 'boom' is not accepted")
    return values.str.upper()


def refuses_undecodable(values: pd.Series) -> pd.Series:
    """A filter that fails if it is ever given a value its string serde could not read."""
    if values.dropna().str.contains("\ufffd").any():
        raise ValueError("the filter was given a value that is not UTF-8")
    return values.notna()
