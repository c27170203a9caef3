"""``streamapp run --input TOPIC=FILE``: records from a file, produced before the app starts.

The embedded broker ``streamapp run`` starts is empty, so a run needs input from somewhere: a
producer pointed at the bootstrap address it prints, or a file given here. Two formats:

- a ``.jsonl`` file: one JSON object per line, ``{"key": …, "value": …, "timestamp": epoch ms}``
  (each optional; a missing value is a tombstone);
- any other file: each non-empty line is a record's value (a number for the int, long and double
  serdes), with no key.

Keys and values are written with the serdes the topology declares for the topic (``long`` as
Kafka's 8-byte big-endian, ``json`` as JSON text, …). A line that cannot be written so is an
error naming the file, the line and the serde.
"""

from __future__ import annotations

import json
import pathlib
import struct
from collections.abc import Sequence
from typing import Any

from streamapp.runtime import errors
from streamapp.runtime.kafka import admin
from streamapp.runtime.testing import driver

__all__ = ["parse", "read"]

_FIELDS = ("key", "value", "timestamp")


def parse(spec: str) -> tuple[str, pathlib.Path]:
    """``TOPIC=FILE`` → (topic, path)."""
    topic, sep, path = spec.partition("=")
    if not sep or not topic or not path:
        raise errors.StreamAppError(f"--input {spec!r}: expected TOPIC=FILE")
    return topic, pathlib.Path(path)


def _from_text(line: str, serde: str) -> Any:
    """A text line as the number it spells for the int, long and double serdes, else the text."""
    if serde not in ("int", "long", "double"):
        return line
    for kind in (int, float):
        try:
            return kind(line)
        except ValueError:
            continue
    return line


def _encode(value: Any, serde: str, where: str, what: str) -> bytes | None:
    try:
        return driver.serialize(value, serde)
    except (TypeError, ValueError, OverflowError, struct.error) as exc:
        raise errors.StreamAppError(
            f"{where}: the {what} {value!r} cannot be written as {serde}: {exc}"
        ) from exc


def read(spec: str, topology: Any) -> tuple[str, Sequence[admin.Record]]:
    """The topic and records of ``--input TOPIC=FILE``; the topic must be one the topology reads."""
    topic, path = parse(spec)
    if topic not in topology.source_topics():
        raise errors.StreamAppError(
            f"--input {spec!r}: the topology reads no topic {topic!r} "
            f"(it reads {', '.join(topology.source_topics())})"
        )
    key_serde, value_serde = topology.source_serdes(topic)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise errors.StreamAppError(f"--input {spec!r}: cannot read {path}: {exc.strerror}") from exc
    records = []
    jsonl = path.suffix == ".jsonl"
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        if not jsonl:
            records.append(
                admin.Record(None, _encode(_from_text(line, value_serde), value_serde, where, "value"))
            )
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise errors.StreamAppError(f"{where}: not a JSON object: {exc}") from exc
        if not isinstance(item, dict) or set(item) - set(_FIELDS):
            raise errors.StreamAppError(f"{where}: expected an object with only {', '.join(_FIELDS)}")
        timestamp = item.get("timestamp")
        if timestamp is not None and (not isinstance(timestamp, int) or timestamp < 0):
            raise errors.StreamAppError(f"{where}: timestamp must be epoch milliseconds, not {timestamp!r}")
        records.append(
            admin.Record(
                _encode(item.get("key"), key_serde, where, "key"),
                _encode(item.get("value"), value_serde, where, "value"),
                timestamp=timestamp,
            )
        )
    return topic, records
