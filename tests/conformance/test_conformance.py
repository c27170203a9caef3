"""Kafka Streams is the oracle: every scenario of :mod:`scenarios` runs as a StreamApp manifest
(in the session's one Spark) and as the same Kafka Streams topology (all in one JVM, at the same
time) on the same input topics of the one test broker; the outputs must agree.

A mismatch names the scenario, the batch setting, the key, and both values and timestamps
(timestamps as milliseconds after :data:`scenarios.T0`). The summary line — scenarios, runs,
micro-batches, mismatches, wall time — is printed in the test log's "StreamApp real components"
section.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import pathlib
import re
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
import yaml

from streamapp.runtime import manifest
from streamapp.runtime.kafka import admin

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import compare
import divergences
import join_scenarios as js
import oracle
import randomized
import scenarios as sc

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamapp.runtime.topology import Topology

#: Every scenario takes 220-300 s on a quiet 2-core machine and 700 s beside other runs (load 10-20,
#: where the suite's 600 s hang guard stopped it): a guard of its own.
pytestmark = pytest.mark.timeout(1800)


def _with_batch_limit(text: str, limit: int) -> str:
    """The manifest with ``maxOffsetsPerTrigger`` on every topic source but global tables (read in
    full before the streams they serve, as Kafka Streams bootstraps them)."""
    doc = yaml.safe_load(text)
    for stream in doc["spec"]["topology"]["streams"]:
        if stream["from"].get("as") == "globalTable":
            continue
        if "topic" in stream["from"] or "topics" in stream["from"]:
            stream["from"]["maxOffsetsPerTrigger"] = limit
    return yaml.safe_dump(doc, sort_keys=False)


def _run_streamapp(
    spark: SparkSession, bootstrap: str, scenario: sc.Scenario, limit: int, renames: dict[str, str],
    checkpoint: pathlib.Path,
) -> tuple[int, int]:  # fmt: skip
    """Run one scenario to the end of its input, through the public API (as a user would); returns
    (micro-batches with input, records its windowed aggregations dropped: late, and null values
    into sliding windows — what Kafka Streams' dropped-records metric counts there)."""
    from streamapp.runtime import StreamApp, StreamsConfig

    doc = manifest.load_manifest(_with_batch_limit(scenario.manifest(), limit))
    topology = manifest.build_topology(doc).rename_topics(renames)
    config = StreamsConfig(
        bootstrap_servers=bootstrap,
        checkpoint_location=str(checkpoint),
        application_id=f"conformance-{scenario.name}-{limit}",
        drain=True,
    )
    app = StreamApp(topology, config, spark=spark)
    with_input: list[int] = []
    app.on_progress(lambda _progress, raw: with_input.append(1) if raw["numInputRows"] > 0 else None)
    app.start()
    assert app.await_termination(600), f"{scenario.name}: still running after 600 s"
    assert app.error is None, f"{scenario.name}: {app.error}"
    progress = app.progress
    dropped = sum(n for node, n in progress.dropped_by_node.items() if node in progress.late_by_node)
    return len(with_input), progress.late + dropped


def _topology(scenario: sc.Scenario) -> Topology:
    return manifest.build_topology(manifest.load_manifest(scenario.manifest()))


_REPARTITION_SINK = re.compile(r"Sink: .*\(topic: .*-repartition\)")


def _shape(description: str) -> tuple[int, int]:
    """(sub-topologies, repartition topics) of a TopologyDescription-shaped text."""
    return description.count("Sub-topology:"), len(_REPARTITION_SINK.findall(description))


def test_streamapp_agrees_with_kafka_streams(
    spark: SparkSession, kafka_bootstrap: str, streamapp_report: Callable[[str], None], tmp_path: pathlib.Path
) -> None:
    started = time.monotonic()
    uid = f"{time.monotonic_ns() % 10**9}"
    every = [*sc.SCENARIOS, *js.JOIN_SCENARIOS]
    names = [s.name for s in every]
    assert len(set(names)) == len(names), "scenario names must be unique"
    # While working on one scenario: STREAMAPP_CONFORMANCE=name,name runs only those.
    only = [n for n in os.environ.get("STREAMAPP_CONFORMANCE", "").split(",") if n]
    assert set(only) <= set(names), f"unknown scenarios {set(only) - set(names)}"
    scenarios = [s for s in every if not only or s.name in only]
    inputs = {s.name: [f"conf-{uid}-{s.name}-in{i}" for i in range(s.inputs)] for s in scenarios}
    settings = {s.name: sc.BATCHES if s.windowed or s.every_batch else sc.BATCHES[:1] for s in scenarios}
    ks_out = {s.name: f"conf-{uid}-{s.name}-kstreams" for s in scenarios}
    our_out = {(s.name, n): f"conf-{uid}-{s.name}-streamapp-{n}" for s in scenarios for n in settings[s.name]}
    topics = {t: s.partitions for s in scenarios for t in inputs[s.name]}
    topics |= {ks_out[s.name]: s.partitions for s in scenarios}
    topics |= {our_out[(s.name, n)]: s.partitions for s in scenarios for n in settings[s.name]}
    admin.create_topics(kafka_bootstrap, topics)
    for s in scenarios:
        records = randomized.untie_first(
            [(s.input or sc.generate)(s.name, i) for i in range(s.inputs)], s.partitions
        )
        for topic, rs in zip(inputs[s.name], records, strict=True):
            admin.produce(kafka_bootstrap, topic, rs)

    renames = {s.name: {f"in{i}": t for i, t in enumerate(inputs[s.name])} for s in scenarios}
    graphs = {
        s.name: _topology(s).rename_topics(renames[s.name] | {"out": ks_out[s.name]}) for s in scenarios
    }
    ks = oracle.OracleRun(
        kafka_bootstrap, tmp_path / "kstreams", [(f"conf-{uid}-{s.name}", graphs[s.name]) for s in scenarios]
    )
    try:
        failed: list[str] = []

        def run(s: sc.Scenario, n: int) -> tuple[int, int]:
            renames = {f"in{i}": t for i, t in enumerate(inputs[s.name])} | {"out": our_out[(s.name, n)]}
            began = time.monotonic()
            try:
                result = _run_streamapp(
                    spark, kafka_bootstrap, s, n, renames, tmp_path / f"ckpt-{s.name}-{n}"
                )
            except Exception as exc:  # noqa: BLE001 - one failed run must not hide the other results
                failed.append(f"{s.name} [maxOffsetsPerTrigger={n}]: the StreamApp run failed: {exc}")
                return 0, -1
            print(f"{s.name} [{n}]: {result[0]} batches, {time.monotonic() - began:.1f} s", flush=True)
            return result

        # One session for every run (its start costs most); see PARALLEL_QUERIES.
        with concurrent.futures.ThreadPoolExecutor(sc.PARALLEL_QUERIES) as pool:
            futures = {(s.name, n): pool.submit(run, s, n) for s in scenarios for n in settings[s.name]}
            ours = {key: future.result() for key, future in futures.items()}
        theirs = ks.wait(timeout=600)
    finally:
        ks.kill()

    all_inputs = [t for s in scenarios for t in inputs[s.name]]
    records = compare.read_all(kafka_bootstrap, [*ks_out.values(), *our_out.values(), *all_inputs])
    found_by: dict[str, list[str]] = collections.defaultdict(list)  # scenario → its mismatches
    mismatches: list[str] = list(failed)
    modelled: dict[str, int] = {}  # scenario → StreamApp records a divergence model predicted
    by_scenario = {s.name: theirs[f"conf-{uid}-{s.name}"] for s in scenarios}
    for s in scenarios:
        if by_scenario[s.name].error:
            mismatches.append(f"{s.name}: the oracle refused the topology: {by_scenario[s.name].error}")
            continue
        theirs_out = compare.decode(records[ks_out[s.name]], s.value_serde, sc.T0)
        received = {f"in{i}": records[t] for i, t in enumerate(inputs[s.name])}
        extra = divergences.final_model(_topology(s), received)
        early = divergences.sliding_suppress_model(_topology(s), received, t0=sc.T0)
        described = _topology(s).describe()
        if _shape(described) != _shape(by_scenario[s.name].description):
            mismatches.append(
                f"{s.name}: describe() has (sub-topologies, repartition topics) {_shape(described)}, "
                f"Kafka Streams {_shape(by_scenario[s.name].description)}:\n{described}"
                f"{by_scenario[s.name].description}"
            )
        for n in settings[s.name]:
            batches, late = ours[(s.name, n)]
            where = f"{s.name} [maxOffsetsPerTrigger={n}]"
            if batches < 2:
                mismatches.append(f"{where}: ran in {batches} micro-batch(es); the scenario needs several")
            mine = compare.decode(records[our_out[(s.name, n)]], s.value_serde, sc.T0)
            mode = compare.TABLE if s.compare == sc.TABLE else compare.STREAM
            updates = compare.updates_deterministic(_topology(s), s.partitions)
            found = compare.compare(
                mode, mine, theirs_out, ordered=s.ordered, extra=extra, missing=early, updates=updates
            )
            found_by[s.name] += [f"{where}: {line}" for line in found]
            if extra is not None or early:
                modelled[f"{s.name} [{n}]"] = (sum(map(extra, mine)) if extra else 0) + len(early)
            dropped = by_scenario[s.name].dropped
            if s.windowed and late != dropped:
                found_by[s.name].append(
                    f"{where}: late records dropped: StreamApp {late}, Kafka Streams {dropped}"
                )
    for s in scenarios:
        mismatches.extend(found_by[s.name])
    runs = sum(len(v) for v in settings.values())
    batches_total = sum(b for b, _ in ours.values())
    summary = (
        f"conformance: {len(scenarios)} scenarios, {runs} StreamApp runs ({batches_total} micro-batches) "
        f"against Kafka Streams: {len(mismatches)} mismatches, {time.monotonic() - started:.0f} s"
        + (
            "; records by which Kafka Streams differs, as divergences.py predicts them: "
            + ", ".join(f"{k} {v}" for k, v in modelled.items() if v)
            if any(modelled.values())
            else ""
        )
    )
    streamapp_report(summary)
    print(summary)
    assert not mismatches, "\n".join([summary, *mismatches])
