"""Reducing a failing random case to a small one, printed as a scenario ready for the suite.

Why it exists: a random case that disagrees with Kafka Streams has up to 240 input records and a
dozen steps; the defect usually needs a few of each. Each round runs many smaller variants at once
(differential.run_round: one oracle JVM, a few StreamApp apps): each input topic without a half or
a quarter of its records, each step left out (a variant that no longer builds is skipped), one
partition. The smallest variant that still disagrees is kept, until no variant does or the
budget is spent. :func:`as_scenario` prints the result in scenarios.py's form.
"""

from __future__ import annotations

import copy
import dataclasses
import pathlib
import time
from typing import TYPE_CHECKING, Any

import differential
import randomized
import yaml

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["as_scenario", "shrink"]

#: Steps a variant keeps: without them the case is another kind of topology, not a smaller one.
_ESSENTIAL = {"groupBy", "groupByKey", "windowedBy", "count", "aggregate", "reduce", "cogroup", "toStream",
              "to", "join", "leftJoin", "outerJoin", "merge", "toTable"}  # fmt: skip


def _size(case: randomized.Case) -> int:
    return sum(len(i) for i in case.inputs) + sum(len(s.get("steps", [])) for s in case.streams)


def _variants(case: randomized.Case, first_id: int) -> list[randomized.Case]:
    out: list[randomized.Case] = []

    def add(**changes: Any) -> None:
        out.append(dataclasses.replace(case, seed=first_id + len(out), **changes))

    for t, records in enumerate(case.inputs):
        n = len(records)
        for lo, hi in (
            (0, n // 2),
            (n // 2, n),
            (0, n // 4),
            (n // 4, n // 2),
            (n // 2, 3 * n // 4),
            (3 * n // 4, n),
        ):
            if hi > lo:
                inputs = list(case.inputs)
                inputs[t] = records[:lo] + records[hi:]
                add(inputs=inputs)
    for s, stream in enumerate(case.streams):
        for k, step in enumerate(stream.get("steps", [])):
            if next(iter(step)) not in _ESSENTIAL:
                streams = copy.deepcopy(case.streams)
                del streams[s]["steps"][k]
                # Without suppression a windowed table's every update is compared, as the
                # generator compares it (randomized._draw_windowed), not each record's multiset.
                add(streams=streams, **({"mode": "table"} if next(iter(step)) == "suppress" else {}))
    if case.partitions > 1:  # a null key's drawn partition becomes the one there is
        one = [
            [dataclasses.replace(r, partition=0 if r.key is None else None) for r in rs] for rs in case.inputs
        ]
        add(partitions=1, inputs=one)
    built = []
    for v in out:
        try:
            differential.topology(v, {}, batch=False)
        except Exception:  # noqa: BLE001 - a variant that no longer builds is not smaller, skip it
            continue
        built.append(v)
    return built


def shrink(
    spark: SparkSession, bootstrap: str, case: randomized.Case, work: pathlib.Path, *, budget_s: float = 600
) -> tuple[randomized.Case, list[str]]:
    """The smallest variant of the failing ``case`` that still disagrees, and its mismatches."""
    deadline = time.monotonic() + budget_s
    best, lines, round_no = case, [], 0
    while time.monotonic() < deadline:
        round_no += 1
        variants = _variants(best, first_id=10_000_000 * round_no + best.seed % 10_000_000)
        if not variants:
            break
        outcomes = differential.run_round(spark, bootstrap, variants, work / f"shrink-{round_no}")
        failing = [o for o in outcomes if o.mismatches]
        if not failing:
            break
        smallest = min(failing, key=lambda o: _size(o.case))
        if _size(smallest.case) >= _size(best):
            break
        best, lines = smallest.case, smallest.mismatches
    return dataclasses.replace(best, seed=case.seed), lines


def as_scenario(case: randomized.Case) -> str:
    """``case`` as a scenarios.py entry (its input as a literal)."""
    name = f"fuzz{case.seed}"
    streams = yaml.safe_dump(case.streams, sort_keys=False, allow_unicode=True, default_flow_style=None)
    body = "".join(f"      {line}\n" for line in streams.splitlines())
    rows = [
        ", ".join(
            f"admin.Record({r.key!r}, {r.value!r}, timestamp=T0 + {r.timestamp - randomized.T0}"
            + ("" if r.partition is None else f", partition={r.partition}")
            + ")"
            for r in records
        )
        for records in case.inputs
    ]
    inputs = ",\n".join(f"    [{row}]" for row in rows)
    compare = "TABLE" if case.mode == "table" else "FINAL"
    return (
        f"#: Found by the randomized suite: seed {case.seed} ({case.family}), {case.partitions} "
        f"partition(s), maxOffsetsPerTrigger {case.batch}, {case.trigger} trigger; shrunk.\n"
        f"{name.upper()} = [\n{inputs},\n]\n\n"
        f'Scenario(\n    "{name}",\n    """\n{body}""",\n    {compare},\n'
        f'    value_serde="{case.value_serde}",\n'
        f"    inputs={len(case.inputs)},\n    partitions={case.partitions},\n"
        f"    input=lambda _name, topic: {name.upper()}[topic],\n"
        f'    note="seed {case.seed} of the randomized suite",\n),\n'
    )
