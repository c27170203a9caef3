"""StreamApps that really run in the e2e cluster: driver and executors as processes, real broker.

The node agent (``node_agent.py``) is the kubelet of Node ``agent-0``; the KWOK nodes are cordoned
while this module runs, so every driver and executor Pod lands on the agent and really runs. A
word count applied with kubectl runs with Spark's Kubernetes backend against the real API server:
the driver creates its executor Pods, which run Spark's executor entrypoint. Then the failover the
operator exists for is measured: kill -9 of the driver process, kill -9 of an executor, more input
partitions, and a driver that cannot start.

Sizing for 2 cores (``operator_proc.SIZING``): the driver requests 100m CPU and a 512m heap, each
executor 200m CPU (one task slot: coresPerExecutor 1) and a 512m heap, so that two drivers and both
their executor sets fit the Node during a rolling hand-over (the default upgrade policy). The
checkpoint is a local folder on this machine, which the old and the new driver both see (in a
cluster it would be a shared volume or object store).
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import re
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import node_agent_proc
import operator_proc
import procfs
import pytest
import rollouts
from agent_apps import App, delete_app, pods
from operator_proc import APPS_NAMESPACE, apply, manifest

from streamapp.runtime.kafka import admin

pytestmark = pytest.mark.timeout(2400)

NS = APPS_NAMESPACE
BATCHES = [
    ["the quick brown fox", "jumps over the lazy dog"],
    ["The Dog sleeps", "a fox, a dog; the end"],
    ["the fox returns", "lazy lazy dog"],
    ["brown dog brown fox", "the end of the story"],
]
SIZING = operator_proc.SIZING


def _words(lines: list[str]) -> list[str]:
    return [w for line in lines for w in re.split(r"\W+", line.lower()) if w]


def _cpu_used(executors: dict[str, int], seconds: float = 0.5) -> dict[str, float]:
    before = {name: procfs.cpu_seconds(pid) for name, pid in executors.items()}
    time.sleep(seconds)
    return {name: procfs.cpu_seconds(pid) - before[name] for name, pid in executors.items()}


def _quiet(executors: dict[str, int], timeout: float = 120) -> None:
    """Wait until no executor works (under 0.1 CPU-s in 0.5 s): then busy can only mean a task."""
    used: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        used = _cpu_used(executors)
        if max(used.values()) < 0.1:
            return
    pytest.fail(f"the executors never went idle within {timeout:.0f}s: {used}")


def _first_busy(executors: dict[str, int], timeout: float = 120) -> tuple[str, float]:
    """The first executor seen running a task: 0.2 CPU-s or more within 0.5 s (an idle one uses
    a few hundredths for heartbeats)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        used = _cpu_used(executors)
        busiest = max(used, key=lambda name: used[name])
        if used[busiest] >= 0.2:
            return busiest, used[busiest]
    pytest.fail(f"no executor ran a task within {timeout:.0f}s of the input: {sorted(executors)}")


def _changelog(bootstrap: str, topic: str) -> list[tuple[str, int]]:
    out = []
    for record in admin.consume(bootstrap, topic, idle=1.0, timeout=30):
        assert record.key is not None and record.value is not None
        out.append((record.key.decode(), int.from_bytes(record.value, "big", signed=True)))
    return out


def _latest(changelog: list[tuple[str, int]]) -> dict[str, int]:
    return dict(changelog)


def test_a_word_count_runs_on_the_agent_node_and_survives_failures(
    agent_node: node_agent_proc.AgentProcess,
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    streamapp_report: Callable[[str], None],
    request: pytest.FixtureRequest,
) -> None:
    kube = streamapp_operator.kube
    request.addfinalizer(lambda: delete_app(kube, "wc-real", missing_ok=True))
    source, sink = new_topic(2), new_topic(1)
    doc = manifest("wc-real", source=source, sink=sink, bootstrap=kafka_bootstrap, **SIZING)
    doc["spec"]["checkpointLocation"] = str(tmp_path / "checkpoint")
    app = App("wc-real", kube, agent_node, kafka_bootstrap)
    expected: collections.Counter[str] = collections.Counter()

    def produce(lines: list[str]) -> None:
        admin.produce(kafka_bootstrap, source, [admin.Record(None, line.encode()) for line in lines])
        expected.update(_words(lines))

    def output_matches() -> list[tuple[str, int]] | None:
        changelog = _changelog(kafka_bootstrap, sink)
        return changelog if _latest(changelog) == dict(expected) else None

    began = time.monotonic()
    apply(kube, doc)
    produce(BATCHES[0])
    changelog = app.eventually("the word counts of batch 1 never appeared", output_matches)
    first_output = time.monotonic() - began

    # Two input partitions, one task slot per executor: two executor Pods, running and Ready.
    def settled() -> dict[str, Any] | None:
        status = app.status()
        ok = (status.get("executors") or {}).get("ready") == 2 and status.get("lag") == 0
        return status if ok and len(app.executors()) == 2 else None

    status = app.eventually("EXECUTORS 2 and LAG 0 never showed", settled)
    assert status["executors"]["desired"] == 2
    assert status["phase"] == "Running"
    for pod in app.executors():
        assert pod["spec"]["nodeName"] == "agent-0"
        assert pod["status"]["podIP"].startswith("127."), pod["status"]
    listing = app.listing()
    # The driver's JVM starts from the class-data archive `make setup` wrote (a driver Pod's
    # launch is a plain one: no SPARK_CONF_DIR folder on its class path to refuse it).
    archives = procfs.class_data_archives(agent_node.pid(NS, "wc-real-driver", "driver"))
    assert archives, "the driver's JVM mapped no class-data archive (make setup writes it)"
    streamapp_report(
        f"apps run: wc-real first output {first_output:.1f}s after kubectl apply "
        f"(driver + 2 executor Pods on the node agent; driver JVM from {pathlib.Path(archives[0]).name}); "
        f"kubectl get sapp:\n{listing}"
    )

    # kill -9 of the driver process: the operator replaces the Pod, the new driver resumes from
    # the checkpoint. Measured: from the kill to the output of input produced right after it.
    old_uid = app.driver_pod()["metadata"]["uid"]  # type: ignore[index]
    killed = time.monotonic()
    os.kill(agent_node.pid(NS, "wc-real-driver", "driver"), signal.SIGKILL)
    produce(BATCHES[1])
    milestones: dict[str, float] = {}

    def resumed_output() -> list[tuple[str, int]] | None:
        # Where the time goes: the operator's replacement, Spark's start, the first batch.
        pod = app.driver_pod()
        if pod and pod["metadata"]["uid"] != old_uid and pod["status"].get("phase") == "Running":
            milestones.setdefault("new driver Pod running", time.monotonic() - killed)
        if "new driver Pod running" in milestones and len(app.executors()) == 2:
            milestones.setdefault("its 2 executors Ready", time.monotonic() - killed)
        return output_matches()

    changelog = app.eventually("no output after the driver was killed", resumed_output)
    resumed = time.monotonic() - killed
    new = app.driver_pod()
    assert new is not None and new["metadata"]["uid"] != old_uid, "the driver Pod was not replaced"
    # The exit a kill -9 leaves (137, as an OOM kill's) is what the operator says it replaced.
    replaced = kube.kubectl(
        "get", "events", "-n", NS, "--field-selector", "involvedObject.name=wc-real,reason=DriverReplaced",
        "-o", "jsonpath={.items[*].message}",
    )  # fmt: skip
    assert "driver container ended: Error (exit code 137) killed by SIGKILL" in replaced, replaced
    steps = ", ".join(f"{what} at {t:.1f}s" for what, t in milestones.items())
    pairs = collections.Counter(changelog)
    duplicates = sum(n - 1 for n in pairs.values() if n > 1)
    streamapp_report(
        f"apps run: kill -9 of the driver → output of new input {resumed:.1f}s later ({steps}); "
        f"latest counts equal the reference; {len(changelog)} changelog records, {duplicates} exact "
        "duplicates (at-least-once: a batch in flight at the kill is re-run and written again)"
    )

    # kill -9 of an executor in the middle of a micro-batch: Spark replaces it, the lost task runs
    # again and the query goes on. Mid-batch is read off /proc: input big enough for a batch of
    # seconds, and the kill lands on the first executor whose processes are seen busy (CPU time).
    app.eventually("two Ready executors after the driver restart", lambda: len(app.executors()) == 2)
    executors = {
        p["metadata"]["name"]: agent_node.pid(NS, p["metadata"]["name"], "spark-kubernetes-executor")
        for p in app.executors()
    }
    _quiet(executors)
    produce(BATCHES[2] * 10_000)
    victim, busy = _first_busy(executors)
    killed = time.monotonic()
    os.kill(executors[victim], signal.SIGKILL)
    app.eventually("the counts were wrong after an executor was killed mid-batch", output_matches)
    executor_gap = time.monotonic() - killed
    app.eventually(
        "Spark did not replace the killed executor",
        lambda: len(app.executors()) == 2 and victim not in {p["metadata"]["name"] for p in app.executors()},
    )
    streamapp_report(
        f"apps run: kill -9 of executor {victim} mid-batch ({busy:.2f} CPU-s in the 0.5 s before) → "
        f"the batch's counts complete and equal the reference {executor_gap:.1f}s later; Spark replaced it"
    )

    # Three partitions: the sizing rule asks for three executors, and three really run.
    admin.add_partitions(kafka_bootstrap, {source: 3})

    def grown() -> dict[str, Any] | None:
        status = app.status()
        ok = (status.get("executors") or {}).get("ready") == 3 and status.get("inputPartitions") == 3
        return status if ok and len(app.executors()) == 3 else None

    status = app.eventually("EXECUTORS never grew to 3", grown)
    assert status["executors"]["desired"] == 3
    produce(BATCHES[3])
    app.eventually("no output after growing to 3 executors", output_matches)
    app.eventually("LAG never fell to 0", lambda: app.status().get("lag") == 0)
    streamapp_report(f"apps run: 3 partitions → 3 executor Pods running; kubectl get sapp:\n{app.listing()}")

    delete_app(kube, "wc-real")
    app.eventually(
        "the app's Pods outlived it", lambda: not pods(kube, "streamapp.io/app=wc-real"), timeout=120
    )


def test_a_driver_that_crashes_shows_degraded_with_its_exit_code(
    agent_node: node_agent_proc.AgentProcess,
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    streamapp_report: Callable[[str], None],
) -> None:
    """A function the runtime cannot import (the operator checks references for form only): the
    driver exits at start, the operator reports it Degraded with the exit code, and replaces it."""
    kube = streamapp_operator.kube
    doc = manifest("crasher", source=new_topic(1), sink=new_topic(1), bootstrap=kafka_bootstrap, **SIZING)
    doc["spec"]["checkpointLocation"] = str(tmp_path / "checkpoint")
    doc["spec"]["topology"]["streams"][0]["steps"] = [
        {"mapValues": {"function": "no_such_pkg.mod:fn"}},
        {"to": {"topic": doc["spec"]["topology"]["streams"][0]["steps"][-1]["to"]["topic"]}},
    ]
    app = App("crasher", kube, agent_node, kafka_bootstrap)
    began = time.monotonic()
    apply(kube, doc)
    try:
        _shows_degraded(app, began, streamapp_report)
        # Replaced at once, then again only after a back-off (10 s, 20 s …), not every second.
        backing_off = app.eventually(
            "the crash loop never backed off",
            lambda: s if "back-off" in (s := app.status()).get("message", "") else None,
            timeout=120,
        )
        log = streamapp_operator.log.read_text().splitlines()
        decided = [line for line in log if "/crasher status" in line]  # the operator's decisions
        assert backing_off["driverFailures"] >= 1, (backing_off, decided)
        assert operator_proc.condition(backing_off, "Degraded")["reason"] == "DriverFailed"
        streamapp_report(f"apps run: crash loop → {backing_off['message']}")
    finally:  # a crash-looping app left behind would crowd the next tests' listings
        delete_app(kube, "crasher")


def _shows_degraded(app: App, began: float, streamapp_report: Callable[[str], None]) -> None:

    def degraded() -> dict[str, Any] | None:
        status = app.status()
        cond = operator_proc.condition(status, "Degraded")
        return status if cond.get("status") == "True" and "exit code" in cond.get("message", "") else None

    status = app.eventually("Degraded with an exit code never showed", degraded, timeout=180)
    seconds = time.monotonic() - began
    cond = operator_proc.condition(status, "Degraded")
    assert cond["reason"] == "DriverFailed", cond
    assert re.search(r"exit code [1-9]", cond["message"]), cond
    assert operator_proc.condition(status, "Ready")["status"] == "False"
    streamapp_report(
        f"apps run: a driver that cannot start → Degraded ({cond['message']}) {seconds:.1f}s after apply;"
        f" kubectl get sapp:\n{app.listing()}"
    )


def test_a_lost_node_s_driver_is_replaced_on_another_node(
    agent_node: node_agent_proc.AgentProcess,
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    tmp_path_factory: pytest.TempPathFactory,
    streamapp_report: Callable[[str], None],
    request: pytest.FixtureRequest,
) -> None:
    """A second agent Node runs the app; then its machine is lost: the agent stops reporting and its
    processes die (SIGUSR1), and the Node is deleted, as a cloud's node controller does for a
    machine that is gone. The operator force-deletes the app's Pods there (their kubelet will never
    confirm) and the new driver runs on agent-0, resuming from the checkpoint. The node controller
    here marks a silent Node NotReady only after 2 minutes (node-monitor-grace-period, for KWOK on
    a loaded machine); the operator acts on NotReady the same way (tests/operator)."""
    kube = streamapp_operator.kube
    spare = node_agent_proc.AgentProcess(kube, "agent-1", tmp_path_factory.mktemp("node-agent-1"))

    def tear_down() -> None:
        kube.kubectl("uncordon", agent_node.node)
        delete_app(kube, "nodeloss", missing_ok=True)
        spare.stop()
        kube.kubectl("delete", "node", "agent-1", "--ignore-not-found", "--wait=false")
        kube.kubectl("delete", "lease", "agent-1", "-n", "kube-node-lease", "--ignore-not-found")

    request.addfinalizer(tear_down)
    spare.start()
    kube.kubectl("cordon", agent_node.node)  # the app lands on agent-1
    source, sink = new_topic(1), new_topic(1)
    doc = manifest("nodeloss", source=source, sink=sink, bootstrap=kafka_bootstrap, **SIZING)
    doc["spec"]["checkpointLocation"] = str(tmp_path / "checkpoint")
    app = App("nodeloss", kube, spare, kafka_bootstrap)
    expected: collections.Counter[str] = collections.Counter()

    def produce(lines: list[str]) -> None:
        admin.produce(kafka_bootstrap, source, [admin.Record(None, line.encode()) for line in lines])
        expected.update(_words(lines))

    def output_matches() -> list[tuple[str, int]] | None:
        changelog = _changelog(kafka_bootstrap, sink)
        return changelog if _latest(changelog) == dict(expected) else None

    apply(kube, doc)
    produce(BATCHES[0])
    app.eventually("the word counts of batch 1 never appeared", output_matches)
    old = app.driver_pod()
    assert old is not None and old["spec"]["nodeName"] == "agent-1", old and old["spec"]
    kube.kubectl("uncordon", agent_node.node)

    lost = time.monotonic()
    spare.fail()
    kube.kubectl("delete", "node", "agent-1", "--wait=false")
    produce(BATCHES[1])
    app.agent = agent_node  # where the new driver's logs will be

    def replaced() -> dict[str, Any] | None:
        pod = app.driver_pod()
        ok = (
            pod
            and pod["metadata"]["uid"] != old["metadata"]["uid"]
            and pod["spec"].get("nodeName") == "agent-0"
        )
        return pod if ok else None

    app.eventually("the driver was not replaced on agent-0", replaced, timeout=180)
    replaced_at = time.monotonic() - lost
    app.eventually("no output after the node was lost", output_matches)
    resumed = time.monotonic() - lost
    events = kube.kubectl(
        "get", "events", "-n", NS, "--field-selector", "involvedObject.name=nodeloss,reason=NodeLost",
        "-o", "jsonpath={.items[*].message}",
    )  # fmt: skip
    assert "was on Node agent-1, which no longer exists" in events, events
    streamapp_report(
        f"apps run: node agent-1 lost (agent silent, Node deleted) → new driver on agent-0 at "
        f"{replaced_at:.1f}s, output of new input {resumed:.1f}s after the loss; events: {events}"
    )


def test_executors_that_cannot_start_show_degraded_with_their_exit_code(
    agent_node: node_agent_proc.AgentProcess,
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    streamapp_report: Callable[[str], None],
) -> None:
    """The driver runs, but every executor JVM it asks for exits at start (a thread stack size that
    is too small for the JVM to start): the app shows Degraded ExecutorsFailing with the exit code."""
    kube = streamapp_operator.kube
    doc = manifest("badexec", source=new_topic(1), sink=new_topic(1), bootstrap=kafka_bootstrap, **SIZING)
    doc["spec"]["checkpointLocation"] = str(tmp_path / "checkpoint")
    doc["spec"]["sparkConf"] = {"spark.executor.extraJavaOptions": "-Xss1k"}
    app = App("badexec", kube, agent_node, kafka_bootstrap)
    began = time.monotonic()
    apply(kube, doc)
    try:

        def degraded() -> dict[str, Any] | None:
            status = app.status()
            cond = operator_proc.condition(status, "Degraded")
            return (
                status if cond.get("reason") == "ExecutorsFailing" and cond.get("status") == "True" else None
            )

        status = app.eventually("Degraded ExecutorsFailing never showed", degraded, timeout=240)
        seconds = time.monotonic() - began
        cond = operator_proc.condition(status, "Degraded")
        assert re.search(
            r"executor Pod badexec-exec-\d+: container ended: \w+ \(exit code [1-9]", cond["message"]
        )
        assert operator_proc.condition(status, "Ready")["status"] == "False"
        # Spark failing to start for its own reasons leaves the driver's class-data archive alone
        # (it was once removed as if it had crashed the JVM, and later drivers started without).
        archives = list((pathlib.Path(sys.prefix) / "share" / "streamapp").glob("driver-*.jsa"))
        assert archives, "a driver whose Spark failed to start removed the class-data archive"
        streamapp_report(
            f"apps run: executors that cannot start → Degraded ({cond['message']}) {seconds:.1f}s after"
            f" apply; kubectl get sapp:\n{app.listing()}"
        )
    finally:
        delete_app(kube, "badexec")


def test_a_rolling_upgrade_hands_over_at_a_batch_boundary(
    agent_node: node_agent_proc.AgentProcess,
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    streamapp_report: Callable[[str], None],
    request: pytest.FixtureRequest,
) -> None:
    """upgradePolicy: rolling under continuous input with exactly_once_v2: the new revision's
    driver starts beside the running one (roller-driver-b, its own executors), waits in standby
    for the app's Lease, and takes over when the old one stops at a batch boundary. The operator
    is killed (-9) while the new driver starts and restarted 3 s later: the rollout converges.
    Measured: the longest gap between consecutive output records (the output topic stamps
    LogAppendTime), every input line counted exactly once, and every change of the Lease holder
    (the old driver hands it back before the new one holds it)."""
    kube = streamapp_operator.kube
    name = "roller"
    request.addfinalizer(lambda: delete_app(kube, name, missing_ok=True))
    source = new_topic(1)
    sink = f"{source}-out"
    admin.create_topics(kafka_bootstrap, {sink: 1}, config={"message.timestamp.type": "LogAppendTime"})
    doc = manifest(
        name, source=source, sink=sink, bootstrap=kafka_bootstrap, **SIZING, upgradePolicy="rolling"
    )
    doc["spec"]["checkpointLocation"] = str(tmp_path / "checkpoint")
    doc["spec"]["processingGuarantee"] = "exactly_once_v2"
    app = App(name, kube, agent_node, kafka_bootstrap)
    apply(kube, doc)
    feed = rollouts.Feed(kafka_bootstrap, source).start()
    request.addfinalizer(feed.stop)

    def ready() -> dict[str, Any] | None:
        status = app.status()
        return status if operator_proc.condition(status, "Ready").get("status") == "True" else None

    before = app.eventually("the app never became Ready", ready)
    old_revision = before["currentRevision"]
    assert [s["shape"]["aggregator"] for s in before["state"]["steps"]] == ["count"], before.get("state")
    lease = rollouts.LeaseWatch(kube, NS, f"{name}-driver")
    request.addfinalizer(lease.stop)
    doc["spec"]["sparkConf"] = {"spark.streamapp.e2e.revision": "2"}  # a new revision, state compatible
    upgraded = time.time()
    apply(kube, doc)
    app.eventually(
        "the new revision's driver was never created",
        lambda: any(p["metadata"]["name"] == f"{name}-driver-b" for p in pods(kube, "spark-role=driver")),
    )
    streamapp_operator.kill()  # mid-rollout: the new driver starts, the old one serves
    time.sleep(3)
    streamapp_operator.start()

    def handed_over() -> dict[str, Any] | None:
        status = app.status()
        drivers = {p["metadata"]["name"] for p in pods(kube, f"streamapp.io/app={name},spark-role=driver")}
        ok = (
            drivers == {f"{name}-driver-b"}
            and status.get("currentRevision") == status.get("targetRevision") != old_revision
            and operator_proc.condition(status, "Ready").get("status") == "True"
        )
        return status if ok else None

    after = app.eventually("the new revision never took over alone", handed_over)
    took = time.time() - upgraded
    time.sleep(5)  # input goes on after the hand-over
    feed.stop()
    out = rollouts.measure(kafka_bootstrap, sink, feed.sent)
    assert (out.lost, out.duplicated, out.wrong) == (0, 0, 0), out
    gap, at = out.gap(upgraded)
    holders = lease.hand_overs()
    assert lease.taken_without_release() == [], holders
    assert [h.split("/")[0] for h in holders if h][-2:] == [f"{name}-driver", f"{name}-driver-b"], holders
    events = kube.kubectl("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}")
    assert "RollingUpgrade" in events and "HandingOver" in events, events
    streamapp_report(
        f"rolling upgrade under 5 lines/s (exactly_once_v2), the operator killed -9 while the new driver "
        f"started: revision {old_revision} → {after['currentRevision']} in {took:.1f} s (new driver in "
        f"standby, then the old one stopped at a batch boundary); longest output gap {gap:.1f} s ({at:.1f} s "
        f"after the apply); {len(feed.sent)} lines ({feed.rate:.1f}/s), 0 lost, 0 duplicated; Lease holders: "
        + " → ".join(h.split("/")[0] or "(released)" for h in holders)
    )

    # A change the checkpoint's state cannot take (count per 1-minute window instead of per
    # word): refused at once, nothing started or stopped, the running revision keeps counting.
    windowed = json.loads(json.dumps(doc))
    windowed["spec"]["topology"]["streams"][0]["steps"][3:4] = [
        {"windowedBy": {"tumbling": "1m"}},
        {"count": {}},
    ]
    tried = time.monotonic()
    apply(kube, windowed)

    def refused() -> dict[str, Any] | None:
        status = app.status()
        return (
            status
            if operator_proc.condition(status, "Degraded").get("reason") == "IncompatibleState"
            else None
        )

    status = app.eventually("the incompatible change was never refused", refused)
    refused_in = time.monotonic() - tried
    message = operator_proc.condition(status, "Degraded")["message"]
    assert "windows was 'none', now 'tumbling 60000 ms'" in message, message
    drivers = {p["metadata"]["name"] for p in pods(kube, f"streamapp.io/app={name},spark-role=driver")}
    assert drivers == {f"{name}-driver-b"} and status["currentRevision"] == after["currentRevision"], status
    streamapp_report(
        f"incompatible change (count per 1-minute window) refused in {refused_in:.1f} s: {message}"
    )

    # A broken revision: a function that fails at runtime on every record (operator.neg handed a
    # column). Its driver fails its warm-up in standby, so the running one is never stopped; the
    # operator gives the upgrade up and says why, with the driver's own error line.
    broken = json.loads(json.dumps(doc))
    broken["spec"]["topology"]["streams"][0]["steps"].insert(
        2, {"mapValues": {"function": "operator:neg", "returns": "string"}}
    )
    tried = time.monotonic()
    apply(kube, broken)

    def rolled_back() -> dict[str, Any] | None:
        status = app.status()
        degraded = operator_proc.condition(status, "Degraded")
        return status if degraded.get("reason") == "RollbackUpgrade" else None

    status = app.eventually("the broken revision was never given up", rolled_back)
    given_up = time.monotonic() - tried
    message = operator_proc.condition(status, "Degraded")["message"]
    assert "the plan failed on the last input records" in message and "TypeError" in message, message
    assert status["currentRevision"] == after["currentRevision"], status
    admin.produce(kafka_bootstrap, source, [admin.Record(None, b"survivor")])
    app.eventually(
        "the running revision stopped processing",
        lambda: any(r.key == b"survivor" for r in admin.consume(kafka_bootstrap, sink, idle=1.0, timeout=30)),
    )
    streamapp_report(
        f"rolling upgrade to a broken revision (operator:neg as mapValues): given up {given_up:.1f} s "
        f"after the apply, revision {after['currentRevision']} kept running; Degraded: {message}"
    )

    # A revision that fails only after the hand-over: it casts a line holding '!' to a number,
    # which Spark's ANSI mode refuses at runtime; its warm-up on the last input line (a word)
    # passes. The operator returns to the last revision that processed, which counts that line.
    fragile = json.loads(json.dumps(doc))
    fragile["spec"]["topology"]["streams"][0]["steps"][0] = {
        "flatMapValues": "explode(split(lower(if(value LIKE '%!%', cast(cast(value AS int) AS string), "
        "value)), '\\\\W+'))"
    }
    apply(kube, fragile)
    stable = after["currentRevision"]
    took_over = app.eventually(
        "the fragile revision never took over",
        lambda: (
            (s := app.status()).get("currentRevision") not in (None, stable)
            and operator_proc.condition(s, "Ready").get("status") == "True"
            and s
        ),
    )
    poisoned = time.monotonic()
    admin.produce(kafka_bootstrap, source, [admin.Record(None, b"oops!")])

    def returned() -> dict[str, Any] | None:
        status = app.status()
        degraded = operator_proc.condition(status, "Degraded")
        ok = (
            "failed after the hand-over" in (degraded.get("message") or "")
            and status.get("currentRevision") == stable
            and operator_proc.condition(status, "Ready").get("status") == "True"
        )
        return status if ok else None

    status = app.eventually("the failing revision was never rolled back", returned)
    rolled_back_in = time.monotonic() - poisoned
    message = operator_proc.condition(status, "Degraded")["message"]
    assert took_over["currentRevision"] in message and "CAST_INVALID_INPUT" in message, message
    app.eventually(
        "the stable revision did not count the line the failed one could not",
        lambda: any(r.key == b"oops" for r in admin.consume(kafka_bootstrap, sink, idle=1.0, timeout=30)),
    )
    streamapp_report(
        f"a revision failing after the hand-over (an ANSI cast of 'oops!' to int): rolled back to "
        f"revision {stable} and processing {rolled_back_in:.1f} s after the bad line; Degraded: {message}"
    )


@pytest.mark.long  # 4 minutes of soak: make test-long
def test_a_load_step_is_autoscaled_up_and_back_calmly(
    agent_node: node_agent_proc.AgentProcess,
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    streamapp_report: Callable[[str], None],
    request: pytest.FixtureRequest,
) -> None:
    """spec.deployment.autoscale at 5 records/s per core and a 20 s stabilization window, 2 input
    partitions: 2 lines/s needs 1 executor, 8 lines/s (×4) needs 2. The app starts at 2 (one per
    partition) under 8 lines/s and holds there, comes down to 1 once the load falls and goes back
    up to 2 within the window of the step, with no reversal (``make bench-rollouts`` runs the larger
    step, from 1 up and back)."""
    kube = streamapp_operator.kube
    name = "autoscaled"
    request.addfinalizer(lambda: delete_app(kube, name, missing_ok=True))
    source = new_topic(2)
    doc = manifest(
        name,
        source=source,
        sink=f"{source}-out",
        bootstrap=kafka_bootstrap,
        **SIZING,
        upgradePolicy="rolling",
    )
    doc["spec"]["deployment"]["autoscale"] = {
        "recordsPerSecondPerCore": 5, "targetLag": 50, "stabilizationWindow": "20s",
    }  # fmt: skip
    doc["spec"]["checkpointLocation"] = str(tmp_path / "checkpoint")
    app = App(name, kube, agent_node, kafka_bootstrap)
    apply(kube, doc)
    feed = rollouts.Feed(kafka_bootstrap, source, interval=1 / 8).start()
    request.addfinalizer(feed.stop)
    step = rollouts.load_step(app, feed, low=2, high=8, executors=2, target_lag=50, falls_first=True)
    feed.stop()
    streamapp_report(
        "autoscaling, 2 input partitions, 5 records/s per core: "
        + rollouts.summary(step, low=2, high=8, window=20)
    )
    rollouts.assert_calm(step, window=20)
