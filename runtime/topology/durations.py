"""Durations as users write them (window sizes, grace periods), in milliseconds.

Accepted: an int (milliseconds), a :class:`datetime.timedelta`, text with a unit — ``250ms``,
``10s``, ``5m``, ``1h``, ``1d``, combinations such as ``1m30s`` — or ISO-8601 such as ``PT10S``.
"""

from __future__ import annotations

import datetime
import re

__all__ = ["to_ms"]

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_ISO = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def to_ms(value: int | str | datetime.timedelta) -> int:
    """``value`` in milliseconds; ValueError names what was wrong."""
    if isinstance(value, bool):
        raise ValueError(f"a duration is milliseconds or text like '10s', not {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        if text.isdigit():
            return int(text)
        if (iso := _ISO.match(text.upper())) and text.upper() not in ("P", "PT"):
            days, hours, minutes, seconds = (float(g) if g else 0.0 for g in iso.groups())
            return round((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)
        parts = _PART.findall(text.lower())
        if parts and "".join(n + u for n, u in parts) == text.lower():
            return round(sum(float(n) * _UNITS[u] for n, u in parts))
    raise ValueError(
        f"not a duration: {value!r} (use milliseconds, text such as '500ms', '10s', '5m', '1h', '1d', "
        "or ISO-8601 such as 'PT10S')"
    )
