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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import yaml
from confluent_kafka import Consumer, TopicPartition

from streamapp.runtime import manifest
from streamapp.runtime.kafka import admin

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import join_scenarios as js
import oracle
import scenarios as sc

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Rec = tuple[str | None, Any, int]  # key, decoded value, timestamp


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


def _read_all(bootstrap: str, topics: Iterable[str]) -> dict[str, list[Rec | tuple[Any, ...]]]:
    """Every record of ``topics`` up to their current end, per topic in partition/offset order."""
    topics = list(topics)
    counts = admin.partition_counts(bootstrap, topics)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"conformance-{time.monotonic_ns()}",
                         "enable.auto.commit": False})  # fmt: skip
    out: dict[str, list[Any]] = {t: [] for t in topics}
    try:
        ends = {}
        for t in topics:
            for p in range(counts[t]):
                high = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
                if high > 0:
                    ends[(t, p)] = high
        consumer.assign([TopicPartition(t, p, 0) for t, p in ends])
        seen: dict[tuple[str, int], list[Any]] = collections.defaultdict(list)
        deadline = time.monotonic() + 60
        while any(len(seen[tp]) < end for tp, end in ends.items()) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                assert not msg.error(), msg.error()
                seen[(msg.topic(), msg.partition())].append((msg.key(), msg.value(), msg.timestamp()[1]))
        for (t, _), records in sorted(seen.items()):
            out[t].extend(records)
    finally:
        consumer.close()
    return out


def _decode(records: list[Any], value_serde: str) -> list[Rec]:
    def value(raw: bytes | None) -> Any:
        if raw is None:
            return None
        return int.from_bytes(raw, "big", signed=True) if value_serde == "long" else raw.decode()

    return [(None if k is None else k.decode(), value(v), ts - sc.T0) for k, v, ts in records]


def _compare(scenario: sc.Scenario, ours: list[Rec], theirs: list[Rec]) -> list[str]:
    """Mismatch lines: key, StreamApp's value @ timestamp, Kafka Streams' value @ timestamp."""
    if scenario.compare == sc.TABLE:
        final_ours = {k: (v, ts) for k, v, ts in ours}
        final_theirs = {k: (v, ts) for k, v, ts in theirs}
        lines = []
        for key in sorted(set(final_ours) | set(final_theirs), key=str):
            a, b = final_ours.get(key, (None, None)), final_theirs.get(key, (None, None))
            if a[0] is None and b[0] is None:
                continue  # deleted (or never there) on both sides
            if a != b:
                lines.append(f"key {key!r}: StreamApp {a[0]!r} @ {a[1]}, Kafka Streams {b[0]!r} @ {b[1]}")
        return lines
    mine, other = collections.Counter(ours), collections.Counter(theirs)
    lines = [f"key {k!r}: StreamApp {v!r} @ {ts} (x{n}), Kafka Streams has none" for (k, v, ts), n in sorted(
        (mine - other).items(), key=str)]  # fmt: skip
    lines += [f"key {k!r}: StreamApp has none, Kafka Streams {v!r} @ {ts} (x{n})" for (k, v, ts), n in sorted(
        (other - mine).items(), key=str)]  # fmt: skip
    if scenario.ordered and not lines:
        differ = [n for n, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
        if differ:
            n = differ[0]
            lines.append(
                f"the same records in another order ({len(differ)} of {len(ours)} positions differ); "
                f"from position {n}: StreamApp {ours[n : n + 4]}, Kafka Streams {theirs[n : n + 4]}"
            )
    return lines


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
        for i, topic in enumerate(inputs[s.name]):
            admin.produce(kafka_bootstrap, topic, (s.input or sc.generate)(s.name, i))

    ks = oracle.OracleRun(
        kafka_bootstrap, tmp_path / "kstreams",
        [(s.name, f"conf-{uid}-{s.name}", ks_out[s.name], inputs[s.name]) for s in scenarios],
    )  # fmt: skip
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

    records = _read_all(kafka_bootstrap, [*ks_out.values(), *our_out.values()])
    found_by: dict[str, list[str]] = collections.defaultdict(list)  # scenario → its mismatches
    mismatches: list[str] = list(failed)
    known: list[str] = []  # of scenarios whose divergence is a known, reported defect
    by_scenario = {r.scenario: r for r in theirs.values()}
    for s in scenarios:
        theirs_out = _decode(records[ks_out[s.name]], s.value_serde)
        described = manifest.build_topology(manifest.load_manifest(s.manifest())).describe()
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
            mine = _decode(records[our_out[(s.name, n)]], s.value_serde)
            found = [f"{where}: {line}" for line in _compare(s, mine, theirs_out)]
            for line in found:  # a known divergence is StreamApp's extra records, nothing else
                if s.known and line.endswith("Kafka Streams has none"):
                    known.append(line)
                else:
                    found_by[s.name].append(line)
            dropped = by_scenario[s.name].dropped
            if s.windowed and late != dropped:
                found_by[s.name].append(
                    f"{where}: late records dropped: StreamApp {late}, Kafka Streams {dropped}"
                )
    open_defects = {**sc.OPEN_DEFECTS, **js.OPEN_DEFECTS}
    defects: list[str] = []  # mismatches of the scenarios listed in OPEN_DEFECTS
    for s in scenarios:
        if s.name in open_defects:
            defects.extend(found_by[s.name])
            if not found_by[s.name]:
                mismatches.append(
                    f"{s.name}: listed in OPEN_DEFECTS ({open_defects[s.name]}) but now agrees with "
                    "Kafka Streams: delete its entry"
                )
        else:
            mismatches.extend(found_by[s.name])
    runs = sum(len(v) for v in settings.values())
    batches_total = sum(b for b, _ in ours.values())
    divergent = sorted({line.split(" ", 1)[0] for line in known})
    summary = (
        f"conformance: {len(scenarios)} scenarios, {runs} StreamApp runs ({batches_total} micro-batches) "
        f"against Kafka Streams: {len(mismatches)} mismatches, {time.monotonic() - started:.0f} s"
        + (f"; known divergences (not counted, see their notes): {', '.join(divergent)}" if divergent else "")
        + (
            f"; OPEN DEFECTS (issue 12): {len(defects)} mismatches in "
            f"{', '.join(n for n in open_defects if any(s.name == n for s in scenarios))}"
            if defects
            else ""
        )
    )
    streamapp_report(summary)
    print(summary)
    print("\n".join(known))
    print("\n".join(defects))
    assert not mismatches, "\n".join([summary, *mismatches])
