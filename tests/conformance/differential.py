"""Run random cases on StreamApp and on Kafka Streams and compare every record.

Why it exists: :mod:`randomized` draws cases; this module runs a round of them on the shared
broker — Kafka Streams all at once in one oracle JVM, StreamApp several cases to an app (one
query, one checkpoint; each case's nodes prefixed) under the case's trigger — and judges each
case by :mod:`compare`'s rules. A case whose app failed is run again alone, so one failure
names one case.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import pathlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import compare
import divergences
import oracle
import randomized

from streamapp.runtime import manifest
from streamapp.runtime.kafka import admin
from streamapp.runtime.topology import graph

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Outcome", "run_round"]


@dataclasses.dataclass
class Outcome:
    case: randomized.Case
    mismatches: list[str]
    batches: int = 0
    refused: str | None = None  # the oracle could not build it: a gap in the oracle, reported


def topology(case: randomized.Case, topics: dict[str, str], *, batch: bool) -> graph.Topology:
    """The case's topology on ``topics`` (logical in0 … out renamed); ``batch``: with its
    ``maxOffsetsPerTrigger`` on every source but global tables."""
    streams = copy.deepcopy(case.streams)
    if batch:
        for stream in streams:
            if "topic" in stream["from"] and stream["from"].get("as") != "globalTable":
                stream["from"]["maxOffsetsPerTrigger"] = case.batch
    doc = manifest.load_manifest(dataclasses.replace(case, streams=streams).manifest())
    return manifest.build_topology(doc).rename_topics(topics)


def _prefixed(topology: graph.Topology, prefix: str) -> list[graph.Node]:
    return [
        dataclasses.replace(n, name=f"{prefix}{n.name}", parents=tuple(f"{prefix}{p}" for p in n.parents))
        for n in topology.nodes
    ]


def run_round(
    spark: SparkSession,
    bootstrap: str,
    cases: Sequence[randomized.Case],
    work: pathlib.Path,
    *,
    per_app: int = 6,
) -> list[Outcome]:
    """Every case of ``cases`` on both engines; one :class:`Outcome` each, in order."""
    uid = f"{time.monotonic_ns() % 10**9}"
    ins = {c.seed: [f"fuzz-{uid}-{c.seed}-in{i}" for i in range(len(c.inputs))] for c in cases}
    outs = {c.seed: [f"fuzz-{uid}-{c.seed}-kstreams", f"fuzz-{uid}-{c.seed}-streamapp"] for c in cases}
    admin.create_topics(
        bootstrap,
        {t: c.partitions for c in cases for t in [*ins[c.seed], *outs[c.seed]]},
    )
    for c in cases:
        for topic, records in zip(ins[c.seed], c.inputs, strict=True):
            admin.produce(bootstrap, topic, records)

    def topics(c: randomized.Case, side: int) -> dict[str, str]:
        return {f"in{i}": t for i, t in enumerate(ins[c.seed])} | {"out": outs[c.seed][side]}

    ks = oracle.OracleRun(
        bootstrap,
        work / "kstreams",
        [(f"fuzz-{uid}-{c.seed}", topology(c, topics(c, 0), batch=False)) for c in cases],
    )
    try:
        ours: dict[int, tuple[int, int, str | None]] = {}
        # One app per trigger and partition count: an app's repartitioning steps have as many tasks
        # as its largest input has partitions (Kafka Streams' repartition topics), so a case must
        # not share an app with one of more partitions.
        by_trigger = collections.defaultdict(list)
        for c in cases:
            by_trigger[(c.trigger, c.partitions)].append(c)
        for (trigger, _), group in by_trigger.items():
            for start in range(0, len(group), per_app):
                chunk = group[start : start + per_app]
                results = _run_streamapp(
                    spark,
                    bootstrap,
                    chunk,
                    topics,
                    trigger,
                    work / f"sa-{uid}-{chunk[0].seed}-{start}-{trigger}",
                )
                if any(r[2] for r in results.values()) and len(chunk) > 1:
                    for c in chunk:  # one failure must name one case; on a fresh output topic
                        outs[c.seed][1] += "-alone"
                        admin.create_topics(bootstrap, {outs[c.seed][1]: c.partitions})
                        results |= _run_streamapp(
                            spark, bootstrap, [c], topics, trigger, work / f"sa-{uid}-{c.seed}"
                        )
                ours |= results
        theirs = ks.wait(timeout=900)
    finally:
        ks.kill()

    records = compare.read_all(bootstrap, [t for c in cases for t in [*outs[c.seed], *ins[c.seed]]])
    for c in cases:  # untie_first placed each record where the producer did
        for i, topic in enumerate(ins[c.seed]):
            placed = [r[3] for r in records[topic]]
            assert sorted(placed) == sorted(randomized.partition(r, c.partitions) for r in c.inputs[i]), topic
    outcomes = []
    for c in cases:
        result = theirs[f"fuzz-{uid}-{c.seed}"]
        batches, late, failure = ours[c.seed]
        if result.error:
            outcomes.append(Outcome(c, [], batches, refused=result.error))
            continue
        if failure:
            outcomes.append(Outcome(c, [f"the StreamApp run failed: {failure}"], batches))
            continue
        mine = compare.decode(records[outs[c.seed][1]], c.value_serde, randomized.T0)
        other = compare.decode(records[outs[c.seed][0]], c.value_serde, randomized.T0)
        built = topology(c, {}, batch=False)
        received = {f"in{i}": records[t] for i, t in enumerate(ins[c.seed])}
        model = divergences.final_model(built, received)
        early = divergences.sliding_suppress_model(built, received, t0=randomized.T0)
        updates = compare.updates_deterministic(built, c.partitions)
        lines = compare.compare(c.mode, mine, other, extra=model, missing=early, updates=updates)
        if c.windowed and late != result.dropped:
            lines.append(f"late records dropped: StreamApp {late}, Kafka Streams {result.dropped}")
        outcomes.append(Outcome(c, lines, batches))
    return outcomes


def _run_streamapp(
    spark: SparkSession,
    bootstrap: str,
    cases: Sequence[randomized.Case],
    topics: Callable[[randomized.Case, int], dict[str, str]],
    trigger: str,
    checkpoint: pathlib.Path,
) -> dict[int, tuple[int, int, str | None]]:
    """The cases as one app (nodes prefixed ``C<seed>-``); per case (micro-batches with input,
    records its windowed nodes dropped as late or as Kafka Streams drops them, the failure)."""
    from streamapp.runtime import StreamApp, StreamsConfig

    nodes: list[graph.Node] = []
    first = None
    for c in cases:
        built = topology(c, topics(c, 1), batch=True)
        first = first or built
        nodes += _prefixed(built, f"C{c.seed}-")
    assert first is not None
    merged = dataclasses.replace(first, nodes=tuple(nodes))
    config = StreamsConfig(
        bootstrap_servers=bootstrap,
        checkpoint_location=str(checkpoint),
        application_id=f"fuzz-{checkpoint.name}",
        drain=trigger == "available-now",
        stop_when_idle=None if trigger == "available-now" else 1.0,
    )
    with_input: list[int] = []
    try:
        app = StreamApp(merged, config, spark=spark)
        app.on_progress(lambda _p, raw: with_input.append(1) if raw["numInputRows"] > 0 else None)
        app.start()
        if not app.await_termination(600):
            app.stop(60)
            raise AssertionError("still running after 600 s")
        if app.error is not None:
            raise app.error
    except Exception as exc:  # noqa: BLE001 - reported per case
        return {c.seed: (len(with_input), 0, f"{type(exc).__name__}: {exc}") for c in cases}
    progress = app.progress
    out = {}
    for c in cases:
        prefix = f"C{c.seed}-"
        late = sum(n for node, n in progress.late_by_node.items() if node.startswith(prefix))
        dropped = sum(
            n
            for node, n in progress.dropped_by_node.items()
            if node.startswith(prefix) and node in progress.late_by_node
        )
        out[c.seed] = (len(with_input), late + dropped, None)
    return out
