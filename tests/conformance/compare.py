"""Reading both outputs to their end and comparing them record by record.

Why a module of its own: the scenario suite and the randomized suite judge outputs by the same
rules, and those rules are the suite's definition of "agrees with Kafka Streams":

- ``stream`` (a record stream, emit-final, suppress): the exact multiset of (key, value,
  timestamp); ``ordered``: the same sequence too (one partition).
- ``table`` (a changelog: aggregations, table sources, table joins): the final table exact (a final
  tombstone counts as absent), and per key StreamApp's updates must be a subsequence of Kafka
  Streams' updates with record caches off (equal values and timestamps, in order). StreamApp may
  emit fewer (one update per key per micro-batch), never one that Kafka Streams did not.

Reads go to the end offsets the broker reports before reading; a read that ends short fails.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from streamapp.runtime.kafka import admin
from streamapp.runtime.topology import graph, join_nodes

__all__ = ["STREAM", "TABLE", "Rec", "compare", "decode", "read_all"]

STREAM, TABLE = "stream", "table"
Rec = tuple[Any, Any, int]  # key, decoded value, timestamp


def read_all(
    bootstrap: str, topics: Iterable[str], *, timeout: float = 60
) -> dict[str, list[tuple[Any, ...]]]:
    """Every record of ``topics`` up to the end offsets they have now, per topic in
    partition/offset order, as (key bytes, value bytes, timestamp, partition). Fails when the end
    offsets are not reached within ``timeout``."""
    topics = list(topics)
    counts = admin.partition_counts(bootstrap, topics)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"conformance-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})  # fmt: skip
    try:
        ends = {}
        for t in topics:
            for p in range(counts[t]):
                high = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
                if high > 0:
                    ends[(t, p)] = high
        consumer.assign([TopicPartition(t, p, 0) for t, p in ends])
        seen: dict[tuple[str, int], list[tuple[Any, ...]]] = collections.defaultdict(list)
        position: dict[tuple[str, int], int] = {tp: 0 for tp in ends}
        deadline = time.monotonic() + timeout
        while any(position[tp] < end for tp, end in ends.items()):
            if time.monotonic() > deadline:
                short = {f"{t}[{p}]": f"{position[(t, p)]} of {end}" for (t, p), end in ends.items()
                         if position[(t, p)] < end}  # fmt: skip
                raise AssertionError(f"reading the outputs ended short after {timeout} s: offsets {short}")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                assert not msg.error(), msg.error()
                tp = (msg.topic(), msg.partition())
                if msg.offset() < ends[tp]:
                    seen[tp].append((msg.key(), msg.value(), msg.timestamp()[1], msg.partition()))
            # The consumer's position, not the last record's offset: transaction markers take offsets.
            for part in consumer.position([TopicPartition(t, p) for t, p in ends]):
                position[(part.topic, part.partition)] = max(part.offset, 0)
        out: dict[str, list[tuple[Any, ...]]] = {t: [] for t in topics}
        for (t, _), records in sorted(seen.items()):
            out[t].extend(records)
        return out
    finally:
        consumer.close()


def decode(
    records: Sequence[tuple[Any, ...]], value_serde: str, t0: int = 0, key_serde: str = "string"
) -> list[Rec]:
    """(key, value, timestamp - t0) with the serdes' values (string or long)."""

    def read(raw: bytes | None, serde: str) -> Any:
        if raw is None:
            return None
        return int.from_bytes(raw, "big", signed=True) if serde == "long" else raw.decode()

    return [(read(r[0], key_serde), read(r[1], value_serde), r[2] - t0) for r in records]


def _show(rec: tuple[Any, int] | None) -> str:
    return "absent" if rec is None else f"{rec[0]!r} @ {rec[1]}"


def updates_deterministic(topology: graph.Topology, partitions: int) -> bool:
    """Whether Kafka Streams' own sequence of table updates is a function of the input. It is not
    downstream of a repartition topic that several upstream tasks write (their interleaving is
    timing), nor of a foreign-key join (a response for a left row that changed since its
    subscription is dropped, and which ones that hits is timing). Then only the final table is
    compared."""
    for node in topology.nodes:
        if isinstance(node, join_nodes.JoinNode) and node.foreign_key is not None:
            return False
        if partitions > 1 and topology.repartitions(node):
            return False
    return True


def compare(
    mode: str,
    ours: list[Rec],
    theirs: list[Rec],
    *,
    ordered: bool = False,
    extra: Callable[[Rec], bool] | None = None,
    missing: Sequence[Rec] = (),
    updates: bool = True,
) -> list[str]:
    """Mismatch lines (key, StreamApp's record, Kafka Streams'); empty when they agree.

    ``extra`` (a divergence model, :mod:`divergences`) picks the records of StreamApp that Kafka
    Streams must not have: each of those present there is a mismatch, and the rest must agree.
    ``missing`` (another model) lists records Kafka Streams emits and StreamApp must not: each must
    be there, and is taken out before the rest is compared.
    ``updates``: compare a table's updates too, not only its final content
    (:func:`updates_deterministic`)."""
    if mode == TABLE:
        return _table(ours, theirs, updates=updates)
    lines = []
    if missing:
        present, predicted = collections.Counter(theirs), collections.Counter(missing)
        lines += [f"key {k!r}: the model says Kafka Streams emits {v!r} @ {ts} too, but it did not"
                  for (k, v, ts), n in predicted.items() if present[(k, v, ts)] < n]  # fmt: skip
        theirs = list((present - predicted).elements())
    if extra is not None:
        expected = [r for r in ours if not extra(r)]
        present = collections.Counter(theirs)
        lines += [f"key {k!r}: the model says Kafka Streams hides {v!r} @ {ts}, but it emitted it"
                  for k, v, ts in ours if extra((k, v, ts)) and present[(k, v, ts)]]  # fmt: skip
        ours = expected
    mine, other = collections.Counter(ours), collections.Counter(theirs)
    lines += [f"key {k!r}: StreamApp {v!r} @ {ts} (x{n}), Kafka Streams has none"
              for (k, v, ts), n in sorted((mine - other).items(), key=str)]  # fmt: skip
    lines += [f"key {k!r}: StreamApp has none, Kafka Streams {v!r} @ {ts} (x{n})"
              for (k, v, ts), n in sorted((other - mine).items(), key=str)]  # fmt: skip
    if ordered and not lines:
        differ = [n for n, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
        if differ:
            n = differ[0]
            lines.append(
                f"the same records in another order ({len(differ)} of {len(ours)} positions differ); "
                f"from position {n}: StreamApp {ours[n : n + 4]}, Kafka Streams {theirs[n : n + 4]}"
            )
    return lines


def _table(ours: list[Rec], theirs: list[Rec], *, updates: bool) -> list[str]:
    mine: dict[Any, list[tuple[Any, int]]] = collections.defaultdict(list)
    other: dict[Any, list[tuple[Any, int]]] = collections.defaultdict(list)
    for k, v, ts in ours:
        mine[k].append((v, ts))
    for k, v, ts in theirs:
        other[k].append((v, ts))
    lines = []
    for key in sorted(set(mine) | set(other), key=str):
        a, b = mine.get(key, []), other.get(key, [])
        last_a = a[-1] if a and a[-1][0] is not None else None
        last_b = b[-1] if b and b[-1][0] is not None else None
        if last_a != last_b:
            lines.append(f"key {key!r}: final StreamApp {_show(last_a)}, Kafka Streams {_show(last_b)}")
            continue
        stray = _not_a_subsequence(a, b) if updates else None
        if stray is not None:
            n, update = stray
            lines.append(
                f"key {key!r}: StreamApp's update {n + 1} of {len(a)}, {_show(update)}, is not among Kafka "
                f"Streams' updates in order; StreamApp: {_few(a)}; Kafka Streams: {_few(b)}"
            )
    return lines


def _few(updates: list[tuple[Any, int]], n: int = 12) -> str:
    return ", ".join(_show(u) for u in updates[:n]) + (f" … ({len(updates)})" if len(updates) > n else "")


def _not_a_subsequence(
    a: list[tuple[Any, int]], b: list[tuple[Any, int]]
) -> tuple[int, tuple[Any, int]] | None:
    """The first element of ``a`` (index, element) that cannot be matched in order in ``b``."""
    it = iter(b)
    for n, x in enumerate(a):
        if not any(x == y for y in it):
            return n, x
    return None
