"""Reconciliations per minute of an idle app, by trigger (issue 49's figure for the operator).

    make bench-reconciles      # = .venv/bin/python -m pytest e2e/bench_reconciles.py -s

A word count runs on the node agent (driver and two executors as processes, a real broker); once
it is Ready with no lag and no input arrives, the operator's ``streamapp_operator_reconciliations_total``
counter is read twice, ``MINUTES`` apart. Every reconciliation reads the input's partition count
and the app's committed progress from Kafka (two admin round trips), so this is also the load an
idle app puts on its broker through the operator. Results: tests/bench/results/RECONCILES.md.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import re
import subprocess
import time
from collections.abc import Callable

import node_agent_proc
import operator_proc
import pytest
from agent_apps import App, delete_app
from operator_proc import apply, manifest

pytestmark = pytest.mark.timeout(1800)
RESULTS = pathlib.Path(__file__).resolve().parents[1] / "tests" / "bench" / "results" / "RECONCILES.md"
MINUTES = float(os.environ.get("STREAMAPP_BENCH_MINUTES", "5"))


def _counts(text: str) -> dict[str, float]:
    return {
        m[1]: float(m[2])
        for m in re.finditer(
            r'^streamapp_operator_reconciliations_total\{trigger="([^"]+)"\} (\S+)$', text, re.M
        )
    }


def test_an_idle_app_s_reconciliations_per_minute(
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
    apply(kube, doc)

    def idle() -> bool:
        status = app.status()
        ready = operator_proc.condition(status, "Ready").get("status") == "True"
        return ready and status.get("lag") == 0 and (status.get("executors") or {}).get("ready") == 2

    app.eventually("the app never ran Ready and idle", idle, timeout=600)
    time.sleep(30)  # the start-up's own events are behind it
    before = _counts(streamapp_operator.metrics())
    started = time.monotonic()
    time.sleep(MINUTES * 60)
    after = _counts(streamapp_operator.metrics())
    minutes = (time.monotonic() - started) / 60
    assert idle(), app.diagnose()
    per = {t: (after[t] - before.get(t, 0)) / minutes for t in sorted(after)}
    per = {t: n for t, n in per.items() if n > 0}
    total = sum(per.values())
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=False
    ).stdout.strip()
    line = (
        f"| {commit} | {datetime.datetime.now(datetime.UTC):%Y-%m-%d} | {minutes:.1f} | {total:.1f} | "
        + ", ".join(f"{t} {n:.1f}" for t, n in per.items())
        + " |"
    )
    print(line)
    header = [
        "# Reconciliations per minute of an idle app",
        "",
        "Command: `make bench-reconciles` (e2e/bench_reconciles.py: a word count Ready and idle on the",
        "node agent, two executors, the operator's reconcile counter read minutes apart; the timer",
        "interval is the default 30 s). Each reconciliation costs two Kafka admin round trips.",
        "",
        "| commit | date | minutes | reconciles / min | by trigger |",
        "|---|---|---:|---:|---|",
    ]
    rows = (
        [r for r in RESULTS.read_text().splitlines() if r.startswith("| ") and "commit" not in r]
        if (RESULTS.exists())
        else []
    )
    RESULTS.write_text("\n".join([*header, *rows, line, ""]))
