"""Python joiners for the join tests (vectorised: pandas Series in, a Series out)."""

from __future__ import annotations

import pandas as pd


def describe_view(key: pd.Series, left: pd.Series, right: pd.Series) -> pd.Series:
    """``key:page@user-name``, with ``-`` for a user the table does not have."""
    return key + ":" + left.str.split("|").str[1] + "@" + right.fillna("-")


def customer_of(values: pd.Series) -> pd.Series:
    """The customer id before ':' in an order's value; none (a null foreign key) when empty."""
    return pd.Series([v.split(":")[0] or None if isinstance(v, str) else None for v in values], dtype=object)
