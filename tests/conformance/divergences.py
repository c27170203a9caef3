"""Understood divergences from Kafka Streams, each a model that predicts the exact records.

Why it exists: where StreamApp deliberately differs from Kafka Streams, the suite must still
check every record. A model here names, from the input, which of StreamApp's records Kafka
Streams does not emit; the comparison then requires exactly those to be missing on Kafka
Streams' side and everything else to be equal (compare.compare's ``extra``). A divergence that is
not modelled here is a mismatch.

**Emit-final retention** (``EmitStrategy.onWindowClose()``). Kafka Streams documents one final
result per closed window (KIP-825) and its ``suppress(untilWindowCloses)`` gives them all; but
onWindowClose fetches the closed windows from its window store right after the closing record's
own puts, and that store hides what its retention has passed (KAFKA-12960's strict retention,
Kafka Streams 4.3.1 as read from its source):

- tumbling and hopping windows: the fetch starts no earlier than the newest window start written
  less the retention (size + grace). Every record before the closing one has a timestamp below
  the window's end + grace, so only the closing record's newest window start can hide a window:
  hidden when that start is more than size + grace after the window's start.
- sliding windows (retention 2 × time difference + grace): the same, with the closing record's
  newest window start: its own left window's (``t - difference``), or the right window it opens
  for its key's previous record (``previous + 1``, when that record is within the difference).
- session windows: the time-ordered session store drops whole segments (60 s for the gaps here:
  ``max(retention / 2, 60 s)``, retention gap + grace) once the newest session end written less
  the retention passes them: a session is hidden when the closing record's timestamp less gap +
  grace lies in a later segment than the session's end.

The closing record is the first one the window's task processes (records in Kafka Streams'
order: a partition's in offset order; co-partitioned topics merged by head timestamp) whose
timestamp closes the window: ``>= end + grace`` (tumbling, hopping), ``> end + grace`` (sliding,
whose end is inclusive), ``> end + gap + grace`` (sessions). StreamApp closes windows on the same
records, so the model reads the windows from StreamApp's output.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from streamapp.runtime.topology import aggregate_nodes, graph
from streamapp.runtime.topology import nodes as nd

__all__ = ["Input", "final_model", "hidden_final_windows", "sliding_suppress_model", "task_order"]

#: (key, value, timestamp, partition) of one input record, as compare.read_all gives them.
Input = tuple[Any, Any, int, int]
SEGMENT = 60_000


def task_order(topics: Sequence[Sequence[Input]]) -> dict[int, list[Input]]:
    """Per task (partition), the records of co-partitioned ``topics`` in Kafka Streams' order: each
    partition in offset order, merged by head record timestamp."""
    per: dict[int, list[list[Input]]] = collections.defaultdict(list)
    for records in topics:
        by_partition: dict[int, list[Input]] = collections.defaultdict(list)
        for r in records:
            by_partition[r[3]].append(r)
        for p, rs in by_partition.items():
            per[p].append(rs)
    out = {}
    for p, queues in per.items():
        heads = [(q[0][2], i, 0) for i, q in enumerate(queues) if q]
        heapq.heapify(heads)
        merged = []
        while heads:
            _, i, n = heapq.heappop(heads)
            merged.append(queues[i][n])
            if n + 1 < len(queues[i]):
                heapq.heappush(heads, (queues[i][n + 1][2], i, n + 1))
        out[p] = merged
    return out


def _parse(windowed_key: str) -> tuple[str, int, int]:
    key, _, span = windowed_key.rpartition("@")
    start, _, end = span.partition("/")
    return key, int(start), int(end)


def hidden_final_windows(
    windows: Mapping[str, Any], tasks: Mapping[int, Sequence[Input]], emitted: Iterable[str], *, t0: int = 0
) -> set[str]:
    """Of the windowed keys ``emitted`` (``key@start/end``, epoch ms), those Kafka Streams'
    onWindowClose() hides. ``windows``: the graph's ``{kind, size, advance, grace}``; ``tasks``:
    the records that reach the windowed aggregation, per task, in processing order (null keys
    already left out; for sliding windows null values too)."""
    kind, size, grace = windows["kind"], windows["size"], windows["grace"]
    advance = windows.get("advance") or size
    task_of = {r[0]: p for p, records in tasks.items() for r in records}
    hidden = set()
    for name in set(emitted):
        key, start, end = _parse(name)
        start, end = start - t0, end - t0
        records = tasks.get(task_of.get(key, -1), [])
        if kind in ("tumbling", "hopping"):
            threshold = end + grace
            closing = next((r for r in records if r[2] - t0 >= threshold), None)
            if closing is not None:
                ts = closing[2] - t0
                if ts - ts % advance > start + size + grace:
                    hidden.add(name)
        elif kind == "sliding":
            closing_at = next((n for n, r in enumerate(records) if r[2] - t0 > end + grace), None)
            if closing_at is not None:
                c = records[closing_at]
                ts = c[2] - t0
                newest = ts - size
                previous = [
                    r[2] - t0 for r in records[:closing_at] if r[0] == c[0] and ts - size <= r[2] - t0 < ts
                ]
                if previous:
                    newest = max(newest, max(previous) + 1)
                if newest - (2 * size + grace) > start:
                    hidden.add(name)
        elif kind == "session":
            closing = next((r for r in records if r[2] - t0 > end + size + grace), None)
            if closing is not None:
                ts = closing[2] - t0
                # Segments count from the epoch: t0 is a whole minute, so t0-relative times keep them.
                if (ts - size - grace) // SEGMENT > end // SEGMENT:
                    hidden.add(name)
    return hidden


def final_model(
    topology: graph.Topology, inputs: Mapping[str, Sequence[Input]], *, t0: int = 0
) -> Callable[[Any], bool] | None:
    """For a topology with an emit-final windowed aggregation: a predicate on StreamApp's output
    records (key, value, timestamp) that is true for those Kafka Streams hides; None when the
    topology has none. ``inputs``: each input topic's records with their partitions. Raises when
    something in front of the aggregation could drop or re-time records (the model needs the
    records that reach it)."""
    finals = [
        n for n in topology.nodes
        if isinstance(n, aggregate_nodes.AGGREGATE_NODES) and n.windows and n.emit == "final"
    ]  # fmt: skip
    if not finals:
        return None
    (node,) = finals
    assert node.windows is not None
    tasks = _reaching(topology, node, inputs, drop_null_values=node.windows.kind == "sliding")
    spec = dataclasses.asdict(node.windows)
    cache: dict[str, bool] = {}

    def hidden(rec: Any) -> bool:
        name = rec[0]
        if name not in cache:
            cache[name] = bool(hidden_final_windows(spec, tasks, [name], t0=t0))
        return cache[name]

    return hidden


def _reaching(
    topology: graph.Topology, node: nd.Node, inputs: Mapping[str, Sequence[Input]], *, drop_null_values: bool
) -> dict[int, list[Input]]:
    """The records that reach the aggregation ``node``, per task, in processing order (keys as
    the windowed output writes them). Raises when something in front of it could drop or re-time
    records: the models need exactly the records that reach it."""
    topics: list[str] = []
    serde = "string"
    pending = list(node.parents)
    while pending:
        parent = topology.node(pending.pop())
        if isinstance(parent, nd.Source) and not parent.table:
            topics += parent.topics
            serde = topology.key_serde(parent).name
        elif isinstance(parent, nd.Merge | nd.MapValues) or (
            isinstance(parent, nd.GroupBy) and parent.selector is None
        ):
            pending += parent.parents
        else:
            raise ValueError(
                f"the divergence models do not know what {parent.op} ({parent.name}) lets through"
            )

    def key(raw: bytes) -> str:
        return str(int.from_bytes(raw, "big", signed=True)) if serde == "long" else raw.decode()

    return task_order(
        [
            [
                (key(r[0]), r[1], r[2], r[3])
                for r in inputs[t]
                if r[0] is not None and not (drop_null_values and r[1] is None)
            ]
            for t in topics
        ]
    )


def sliding_suppress_model(
    topology: graph.Topology, inputs: Mapping[str, Sequence[Input]], *, t0: int = 0
) -> list[tuple[str, int, int]]:
    """The records Kafka Streams' ``suppress(untilWindowCloses)`` emits early for sliding windows,
    as (windowed key, count, timestamp - t0); [] without a suppressed sliding-window count.

    Sliding windows include their end, and a window still accepts a record while stream time is
    exactly end + grace; Kafka Streams' suppression buffer emits a window once stream time
    reaches end + grace. So a record at that stream time that still falls in an emitted window
    updates it and the buffer emits it again: the window comes out twice or more (conformance
    slidingSuppress, key d: 4 then 5). StreamApp emits each window once, with its last value,
    once stream time passes end + grace; the model gives Kafka Streams' earlier emissions, and
    all of them where the task's stream time stops at end + grace (StreamApp emits nothing
    there: the window could still change; randomized seed 6027). It works from the records that
    reach the aggregation (each task's in processing order; stream time is the running maximum,
    as the first record at end + grace is the one that moves the buffer's time there)."""
    (node,) = [n for n in topology.nodes if isinstance(n, nd.Suppress)] or [None]
    if node is None:
        return []
    agg = topology.node(node.parents[0])
    assert isinstance(agg, aggregate_nodes.AGGREGATE_NODES) and agg.windows is not None
    if agg.windows.kind != "sliding":
        return []
    if not isinstance(agg, aggregate_nodes.Count):
        raise ValueError("the sliding-suppress model gives counts only")
    tasks = _reaching(topology, agg, inputs, drop_null_values=True)
    size, grace = agg.windows.size, agg.windows.grace
    early = []
    for records in tasks.values():
        times = [r[2] - t0 for r in records]
        stream = list(itertools.accumulate(times, max))
        by_key: dict[Any, list[int]] = collections.defaultdict(list)
        for n, r in enumerate(records):
            by_key[r[0]].append(n)
        for key, positions in by_key.items():
            for start in sorted({times[n] - size for n in positions} | {times[n] + 1 for n in positions}):
                end = start + size
                inside = [n for n in positions if start <= times[n] <= end]
                closing = next((n for n, t in enumerate(stream) if t >= end + grace), None)
                if not inside or closing is None:
                    continue
                counted = [n for n in inside if n < closing or (n == closing and stream[n] == end + grace)]
                later = [n for n in inside if n > closing and stream[n] == end + grace]
                closes = stream[-1] > end + grace  # then StreamApp emits the last of these
                if counted and (later or not closes):
                    emitted = [counted, *[[m for m in inside if m <= n] for n in later]]
                    if closes:
                        emitted.pop()
                    for ns in emitted:
                        early.append((f"{key}@{start + t0}/{end + t0}", len(ns), max(times[m] for m in ns)))
    return early
