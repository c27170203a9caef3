"""Five redeploys under continuous input, ``rolling`` against ``recreate`` (issue 17's benchmark).

    make bench-rollouts        # = .venv/bin/python -m pytest e2e/bench_rollouts.py -s

Not part of ``make test`` (about 15 minutes; ``e2e/test_apps_run.py`` runs one rolling upgrade).
A word count with ``exactly_once_v2`` runs on the node agent while one new word arrives every
200 ms; one after the other, five redeploys are applied with kubectl: a new image tag, a Spark
setting, more executors, a stateless topology edit, and two more input partitions (the operator
rescales by itself). Each is measured from its apply until the new revision runs alone and has
processed for 5 s more: the longest gap between consecutive output records (the sink stamps
LogAppendTime) and how long the redeploy took. At the end, every word must have been counted
exactly once. The same series runs with ``upgradePolicy: recreate`` on a fresh app.

Results: tests/bench/results/ROLLOUTS.md and rollouts.json. The node agent runs every process on
this machine's 2 cores (the image is not used: the agent runs the project's environment), so
figures include drivers and executors competing with each other for CPU.
"""

from __future__ import annotations

import copy
import datetime
import json
import pathlib
import platform
import time
from collections.abc import Callable
from typing import Any

import node_agent_proc
import operator_proc
import pytest
import rollouts
from agent_apps import App, delete_app, pods
from operator_proc import APPS_NAMESPACE, apply, manifest

from streamapp.runtime.kafka import admin

pytestmark = pytest.mark.timeout(3600)
NS = APPS_NAMESPACE
RESULTS = pathlib.Path(__file__).resolve().parents[1] / "tests" / "bench" / "results"
COMMAND = ".venv/bin/python -m pytest e2e/bench_rollouts.py -s   (make bench-rollouts)"
SIZING = operator_proc.SIZING

Change = Callable[[dict[str, Any], str, str], None]


def _image(doc: dict[str, Any], _bootstrap: str, _source: str) -> None:
    doc["spec"]["deployment"]["image"] = "localhost/streamapp-runtime:0.1.1"


def _spark_conf(doc: dict[str, Any], _bootstrap: str, _source: str) -> None:
    doc["spec"]["sparkConf"] = {"spark.sql.streaming.numRecentProgressUpdates": "50"}


def _executors(doc: dict[str, Any], _bootstrap: str, _source: str) -> None:
    doc["spec"]["deployment"]["executors"]["min"] = 2


def _topology_edit(doc: dict[str, Any], _bootstrap: str, _source: str) -> None:
    doc["spec"]["topology"]["streams"][0]["steps"].insert(2, {"filter": "length(value) < 40"})


def _partitions(_doc: dict[str, Any], bootstrap: str, source: str) -> None:
    admin.add_partitions(bootstrap, {source: 3})


REDEPLOYS: list[tuple[str, Change]] = [
    ("image tag", _image),
    ("Spark conf", _spark_conf),
    ("executor count 1 → 2", _executors),
    ("compatible topology edit (a filter)", _topology_edit),
    ("rescale: input 1 → 3 partitions", _partitions),
]


def _series(
    policy: str,
    *,
    kube: Any,
    agent: node_agent_proc.AgentProcess,
    bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
) -> dict[str, Any]:
    name = f"bench-{policy}"
    source = new_topic(1)
    sink = f"{source}-out"
    admin.create_topics(bootstrap, {sink: 1}, config={"message.timestamp.type": "LogAppendTime"})
    doc = manifest(name, source=source, sink=sink, bootstrap=bootstrap, **copy.deepcopy(SIZING))
    doc["spec"]["deployment"]["upgradePolicy"] = policy
    doc["spec"]["checkpointLocation"] = str(tmp_path / f"checkpoint-{policy}")
    doc["spec"]["processingGuarantee"] = "exactly_once_v2"
    app = App(name, kube, agent, bootstrap)
    apply(kube, doc)
    feed = rollouts.Feed(bootstrap, source).start()
    lease: rollouts.LeaseWatch | None = None
    steps: list[dict[str, Any]] = []
    try:

        def settled(revision: str | None) -> dict[str, Any] | None:
            status = app.status()
            drivers = pods(kube, f"streamapp.io/app={name},spark-role=driver")
            ok = (
                len(drivers) == 1
                and status.get("currentRevision") == status.get("targetRevision") != revision
                and operator_proc.condition(status, "Ready").get("status") == "True"
            )
            return status if ok else None

        status = app.eventually("the app never became Ready", lambda: settled(None))
        lease = rollouts.LeaseWatch(kube, NS, f"{name}-driver")
        time.sleep(10)  # steady state before the first redeploy
        for what, change in REDEPLOYS:
            revision = status["currentRevision"]
            change(doc, bootstrap, source)
            began = time.time()
            if change is not _partitions:
                apply(kube, doc)
            status = app.eventually(
                f"{what}: the new revision never ran alone", lambda r=revision: settled(r)
            )
            took = time.time() - began
            executors = (status.get("executors") or {}).get("desired")
            time.sleep(5)
            steps.append({"redeploy": what, "began": began, "seconds": took, "executors": executors})
        time.sleep(5)
    finally:
        feed.stop()
        if lease is not None:
            lease.stop()
    out = rollouts.measure(bootstrap, sink, feed.sent, timeout=120)
    for step in steps:
        gap, at = out.gap(step["began"], step["began"] + step["seconds"] + 5)
        step.update(gap=round(gap, 1), gap_at=round(at, 1), seconds=round(step["seconds"], 1))
    delete_app(kube, name)
    return {
        "policy": policy,
        "lines": len(feed.sent),
        "rate": round(feed.rate, 2),
        "lost": out.lost,
        "duplicated": out.duplicated,
        "wrong": out.wrong,
        "lease_taken_without_release": len(lease.taken_without_release()) if lease else None,
        "redeploys": steps,
    }


def _markdown(results: list[dict[str, Any]]) -> str:
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Redeploys under continuous input: rolling vs recreate",
        "",
        f"Command: `{COMMAND}` — {when}, {platform.node()}, 2 cores. A word count with exactly_once_v2 "
        "on the e2e cluster's node agent (driver and executors are processes on this machine), one new "
        "word every 200 ms (the rate achieved is below). Gap: the longest time between consecutive "
        "output records from the apply until 5 s after the new revision ran alone; took: apply → "
        "new revision Ready alone.",
        "",
        "| redeploy | rolling: gap | rolling: took | recreate: gap | recreate: took | executors |",
        "|---|---|---|---|---|---|",
    ]
    by = {r["policy"]: r for r in results}
    for i, (what, _change) in enumerate(REDEPLOYS):
        roll, rec = by["rolling"]["redeploys"][i], by["recreate"]["redeploys"][i]
        lines.append(
            f"| {what} | {roll['gap']:.1f} s | {roll['seconds']:.1f} s | {rec['gap']:.1f} s | "
            f"{rec['seconds']:.1f} s | {roll['executors']} |"
        )
    lines.append("")
    for r in results:
        lines.append(
            f"- {r['policy']}: {r['lines']} lines ({r['rate']} per second), {r['lost']} lost, "
            f"{r['duplicated']} duplicated, {r['wrong']} wrong counts; Lease taken without a release: "
            f"{r['lease_taken_without_release']}"
        )
    return "\n".join(lines) + "\n"


def test_five_redeploys_rolling_against_recreate(
    agent_node: node_agent_proc.AgentProcess,
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
) -> None:
    results = [
        _series(
            policy,
            kube=streamapp_operator.kube,
            agent=agent_node,
            bootstrap=kafka_bootstrap,
            new_topic=new_topic,
            tmp_path=tmp_path,
        )
        for policy in ("rolling", "recreate")
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "rollouts.json").write_text(
        json.dumps({"command": COMMAND, "results": results}, indent=2) + "\n"
    )
    (RESULTS / "ROLLOUTS.md").write_text(_markdown(results))
    print(_markdown(results))
    for r in results:
        assert (r["lost"], r["duplicated"], r["wrong"]) == (0, 0, 0), r
        assert r["lease_taken_without_release"] == 0, r


def test_a_load_step_is_autoscaled_up_and_back_without_oscillating(
    agent_node: node_agent_proc.AgentProcess,
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
) -> None:
    """spec.deployment.autoscale sized at 5 records/s per core, a 40 s stabilization window, 4 input
    partitions: 3 lines/s needs 1 executor, 12 lines/s (×4) needs 3. The executor count and the lag
    are sampled every 2 s through the step up and back; results in ROLLOUTS.md and autoscale.json."""
    kube = streamapp_operator.kube
    name = "bench-autoscale"
    source = new_topic(4)
    sink = f"{source}-out"
    admin.create_topics(kafka_bootstrap, {sink: 1}, config={"message.timestamp.type": "LogAppendTime"})
    doc = manifest(name, source=source, sink=sink, bootstrap=kafka_bootstrap, **copy.deepcopy(SIZING))
    doc["spec"]["deployment"]["upgradePolicy"] = "rolling"
    doc["spec"]["deployment"]["autoscale"] = {
        "recordsPerSecondPerCore": 5, "targetLag": 100, "stabilizationWindow": "40s",
    }  # fmt: skip
    doc["spec"]["checkpointLocation"] = str(tmp_path / "checkpoint-autoscale")
    app = App(name, kube, agent_node, kafka_bootstrap)
    apply(kube, doc)
    feed = rollouts.Feed(kafka_bootstrap, source, interval=1 / 3).start()
    try:
        step = rollouts.load_step(app, feed, low=3, high=12, executors=3, target_lag=100)
    finally:
        feed.stop()
    delete_app(kube, name)
    RESULTS.mkdir(parents=True, exist_ok=True)
    timeline = [{"t": t, "executors": n, "lag": lag, "phase": phase} for t, n, lag, phase in step.samples]
    (RESULTS / "autoscale.json").write_text(
        json.dumps({"command": COMMAND, "samples": timeline}, indent=2) + "\n"
    )
    summary = (
        "\n## Autoscaling a load step\n\n4 input partitions, 5 records/s per core, target lag 100: "
        + rollouts.summary(step, low=3, high=12, window=40)
        + ". Samples (t s, executors, lag, phase) in autoscale.json.\n"
    )
    with (RESULTS / "ROLLOUTS.md").open("a") as out:
        out.write(summary)
    print(summary)
    rollouts.assert_calm(step, window=40)
