"""Python joiners for the join tests (vectorised: pandas Series in, a Series out)."""

from __future__ import annotations

import pandas as pd


def describe_view(key: pd.Series, left: pd.Series, right: pd.Series) -> pd.Series:
    """``key:page@user-name``, with ``-`` for a user the table does not have."""
    return key + ":" + left.str.split("|").str[1] + "@" + right.fillna("-")
