"""Reconciliations of one app, by trigger: while it starts, and per minute while it idles.

    make bench-reconciles      # = .venv/bin/python -m pytest e2e/bench_reconciles.py -s

A word count is applied and runs on the node agent (driver and two executors as processes, a real
broker), with the operator's default 30 s timer (the e2e suite runs it every 2 s). The operator's
``streamapp_operator_reconciliations_total`` and ``streamapp_operator_events_skipped_total``
counters are read when the app is applied, when it is Ready with no lag, and ``MINUTES`` later
with no input. Every reconciliation reads the input's partition count and the app's committed
progress from Kafka (two admin round trips): this is also the load one app puts on its broker
through the operator. Results: tests/bench/results/RECONCILES.md.
"""

from __future__ import annotations

import collections
import datetime
import os
import pathlib
import re
import subprocess
import time
from collections.abc import Callable

import pytest

os.environ.setdefault("STREAMAPP_E2E_RECONCILE_INTERVAL", "30")  # before the operator fixture starts it

import node_agent_proc
import operator_proc
from agent_apps import App, delete_app
from operator_proc import apply, manifest

pytestmark = pytest.mark.timeout(1800)
RESULTS = pathlib.Path(__file__).resolve().parents[1] / "tests" / "bench" / "results" / "RECONCILES.md"
MINUTES = float(os.environ.get("STREAMAPP_BENCH_MINUTES", "5"))
COUNTER = re.compile(
    r'^streamapp_operator_(reconciliations|events_skipped)_total\{trigger="([^"]+)"\} (\S+)$', re.M
)


def _counts(text: str) -> collections.Counter[str]:
    found: collections.Counter[str] = collections.Counter()
    for kind, trigger, value in COUNTER.findall(text):
        found[trigger if kind == "reconciliations" else f"{trigger} skipped"] = int(float(value))
    return found


def _by_trigger(counts: collections.Counter[str], per: float = 1.0) -> str:
    return ", ".join(
        f"{t} {n / per:.1f}" if per != 1.0 else f"{t} {n}" for t, n in sorted(counts.items()) if n
    )


def test_an_app_s_reconciliations_while_it_starts_and_idles(
    agent_node: node_agent_proc.AgentProcess,
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    request: pytest.FixtureRequest,
) -> None:
    kube = streamapp_operator.kube
    name = "idle"
    request.addfinalizer(lambda: delete_app(kube, name, missing_ok=True))
    source = new_topic(2)
    doc = manifest(
        name, source=source, sink=f"{source}-out", bootstrap=kafka_bootstrap, **operator_proc.SIZING
    )
    doc["spec"]["checkpointLocation"] = str(tmp_path / "checkpoint")
    app = App(name, kube, agent_node, kafka_bootstrap)

    def idle() -> bool:
        status = app.status()
        ready = operator_proc.condition(status, "Ready").get("status") == "True"
        return ready and status.get("lag") == 0 and (status.get("executors") or {}).get("ready") == 2

    applied = _counts(streamapp_operator.metrics())
    began = time.monotonic()
    apply(kube, doc)
    app.eventually("the app never ran Ready and idle", idle, timeout=600)
    ready = _counts(streamapp_operator.metrics())
    start_seconds = time.monotonic() - began
    time.sleep(MINUTES * 60)
    after = _counts(streamapp_operator.metrics())
    assert idle(), app.diagnose()
    starting, idling = ready - applied, after - ready
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=False
    ).stdout.strip()
    reconciles = sum(n for t, n in idling.items() if not t.endswith("skipped"))
    line = (
        f"| {commit} | {datetime.datetime.now(datetime.UTC):%Y-%m-%d} | {start_seconds:.0f} s: "
        f"{_by_trigger(starting)} | {reconciles / MINUTES:.1f} | {_by_trigger(idling, MINUTES)} |"
    )
    print(line)
    header = [
        "# Reconciliations of one app, while it starts and while it idles",
        "",
        "Command: `make bench-reconciles` (e2e/bench_reconciles.py: a word count applied on the e2e",
        "cluster, run on the node agent with two executors until Ready with no lag, then idle for",
        f"{MINUTES:g} minutes; the operator's default 30 s timer). Each reconciliation costs two Kafka",
        "admin round trips. *skipped*: events that started no reconciliation.",
        "",
        "| commit | date | apply → Ready: reconciliations by trigger | idle: reconciles / min "
        "| idle: by trigger, per min |",
        "|---|---|---|---:|---|",
    ]
    rows = []
    if RESULTS.exists():
        rows = [
            r for r in RESULTS.read_text().splitlines() if r.startswith("| ") and not r.startswith("| commit")
        ]
    RESULTS.write_text("\n".join([*header, *rows, line, ""]))
