"""One reconciliation against an in-memory API server and Kafka: what is applied, deleted, reported."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from streamapp.operator import desired, errors, kafka_probe, reconcile, validation

NOW = "2026-01-01T00:00:00Z"
DRIVER = "wordcount-driver"


@pytest.fixture
def run(ref: desired.AppRef, fake_cluster: Any, make_probe: Any) -> Any:
    state: dict[str, Any] = {"status": {}, "generation": 1}

    def go(
        spec: dict[str, Any], partitions: dict[str, int] | None = None, now: str = NOW, **probe: Any
    ) -> reconcile.Outcome:
        fake_cluster.calls.clear()
        outcome = reconcile.reconcile(
            ref=ref,
            spec=spec,
            generation=state["generation"],
            previous=state["status"],
            cluster=fake_cluster,
            probe=make_probe({"text-lines": 6} if partitions is None else partitions, **probe),
            now=now,
        )
        state["status"] = outcome.status
        return outcome

    return go


def _condition(outcome: reconcile.Outcome, type_: str) -> tuple[str, str]:
    found = next(c for c in outcome.status["conditions"] if c["type"] == type_)
    return found["status"], found["reason"]


def _driver_revision(cluster: Any) -> str:
    return str(cluster.objects[("Pod", "apps", DRIVER)]["metadata"]["labels"][desired.REVISION_LABEL])


def test_create_then_running(run: Any, spec: dict[str, Any], fake_cluster: Any) -> None:
    first = run(spec)
    assert [kind for _, kind, _ in fake_cluster.calls] == [
        "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Service", "Lease", "Pod",
    ]  # fmt: skip
    assert first.error is None
    assert first.status["phase"] == "Pending"
    assert first.status["executors"]["desired"] == 3  # 6 partitions / 2 cores
    assert first.status["selector"] == "streamapp.io/app=wordcount,spark-role=executor"  # for an HPA
    assert [e.reason for e in first.events] == ["DriverCreated"]

    fake_cluster.run_pod(DRIVER)
    started = run(spec)  # the Pod runs, but no micro-batch has completed: not Ready yet
    assert started.status["phase"] == "Running"
    assert _condition(started, "Ready") == ("False", "NoRecentBatch")
    second = run(spec, standing=kafka_probe.Standing(lag=0, batch_id=0, time=NOW))
    assert second.status["phase"] == "Running"
    assert _condition(second, "Ready") == ("True", "DriverRunning")
    assert (
        second.status["currentRevision"] == second.status["targetRevision"] == _driver_revision(fake_cluster)
    )
    # Idempotent, the Pod left alone; the revision's first own batch records it as the stable one
    # (rolling, the default: what a failed upgrade returns to).
    assert [c[0] for c in fake_cluster.calls] == ["apply"] * 7
    assert fake_cluster.calls[-1] == ("apply", "ConfigMap", "wordcount-stable")
    assert second.events == []
    assert run(spec, standing=kafka_probe.Standing(lag=0, batch_id=1, time=NOW)).events == []
    assert [c[0] for c in fake_cluster.calls] == ["apply"] * 6  # recorded once


def test_more_partitions_restart_the_driver_with_more_executors(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    spec["deployment"]["upgradePolicy"] = "recreate"  # rolling: see the hand-over tests
    run(spec)
    fake_cluster.run_pod(DRIVER)
    old = _driver_revision(fake_cluster)
    grown = run(spec, {"text-lines": 8})
    assert isinstance(grown.error, errors.DriverStopping)
    assert grown.status["phase"] == "Upgrading"
    assert "rescaling from 3 to 4 executors" in grown.events[0].message
    waiting = run(spec, {"text-lines": 8})  # the old driver is still stopping: nothing new yet
    assert isinstance(waiting.error, errors.DriverStopping)
    assert ("apply", "Pod", DRIVER) not in fake_cluster.calls
    fake_cluster.finish_terminating()
    replaced = run(spec, {"text-lines": 8})
    assert replaced.error is None
    assert _driver_revision(fake_cluster) != old
    assert replaced.status["executors"]["desired"] == 4


def test_invalid_spec_leaves_the_running_app_untouched(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    run(spec)
    fake_cluster.run_pod(DRIVER)
    before = dict(fake_cluster.objects)
    spec["topology"]["streams"][0]["steps"][1]["filter"] = "value !!= ''"
    outcome = run(spec)
    assert isinstance(outcome.error, errors.InvalidSpecError)
    assert fake_cluster.calls == []
    assert fake_cluster.objects == before
    assert _condition(outcome, "Degraded") == ("True", "InvalidSpec")
    assert _condition(outcome, "Ready") == ("True", "DriverRunning")
    assert outcome.status["message"].startswith("spec.topology.streams[0].steps[1].filter: ")
    assert [e.reason for e in outcome.events] == ["InvalidSpec"]
    assert run(spec).events == []  # the same problem is not announced twice


def test_suspend_and_resume(run: Any, spec: dict[str, Any], fake_cluster: Any) -> None:
    run(spec)
    fake_cluster.run_pod(DRIVER)
    revision = _driver_revision(fake_cluster)
    spec["deployment"]["suspend"] = True
    stopping = run(spec)
    assert stopping.error is None
    assert ("delete", "Pod", DRIVER) in fake_cluster.calls
    assert _condition(stopping, "Progressing") == ("True", "Stopping")
    fake_cluster.finish_terminating()
    suspended = run(spec)
    assert suspended.status["phase"] == "Suspended"
    assert ("ConfigMap", "apps", "wordcount-app") in fake_cluster.objects  # the rest stays
    spec["deployment"]["suspend"] = False
    run(spec)
    assert _driver_revision(fake_cluster) == revision


def test_kafka_outage_keeps_the_last_count(run: Any, spec: dict[str, Any], fake_cluster: Any) -> None:
    run(spec)
    fake_cluster.run_pod(DRIVER)
    outage = run(spec, fail=True)
    assert outage.error is None
    assert [e.reason for e in outage.events] == ["KafkaUnreachable"]
    assert outage.status["executors"]["desired"] == 3
    assert outage.status["phase"] == "Running"


def test_a_failed_driver_is_replaced(run: Any, spec: dict[str, Any], fake_cluster: Any) -> None:
    run(spec)
    fake_cluster.run_pod(DRIVER, ready=False, phase="Failed")
    failed = run(spec)
    assert _condition(failed, "Degraded") == ("True", "DriverFailed")
    assert ("delete", "Pod", DRIVER) in fake_cluster.calls
    fake_cluster.finish_terminating()
    replaced = run(spec)
    assert replaced.events[0].reason == "DriverCreated"
    # Still Degraded, with how the last driver ended, until a new one processes.
    assert _condition(replaced, "Degraded") == ("True", "DriverFailed")
    fake_cluster.run_pod(DRIVER)
    assert _condition(run(spec), "Degraded") == ("True", "DriverFailed")  # runs, no batch yet
    recovered = run(spec, standing=kafka_probe.Standing(lag=0, batch_id=0, time=NOW))
    assert _condition(recovered, "Degraded") == ("False", "DriverRunning")
    assert _condition(recovered, "Ready") == ("True", "DriverRunning")


def _hold_lease(fake_cluster: Any, holder: str) -> None:
    lease = fake_cluster.objects[("Lease", "apps", DRIVER)]
    lease["metadata"]["resourceVersion"] = "7"
    lease["spec"] = {"holderIdentity": holder, "leaseDurationSeconds": 15}


def test_the_lease_of_a_driver_seen_ended_is_released_and_no_other(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    """The next driver starts at once after a crash (no 15 s wait for the fence to expire), but
    a Lease held by anyone but the ended Pod's own process is left alone."""
    run(spec)
    pod = fake_cluster.objects[("Pod", "apps", DRIVER)]
    pod["metadata"]["uid"] = "u-1"
    _hold_lease(fake_cluster, f"{DRIVER}/u-0")  # an earlier Pod of the same name: not this one
    fake_cluster.run_pod(DRIVER, ready=False, phase="Failed")
    run(spec)
    assert fake_cluster.objects[("Lease", "apps", DRIVER)]["spec"]["holderIdentity"] == f"{DRIVER}/u-0"
    fake_cluster.finish_terminating()
    run(spec)  # a new driver Pod
    pod = fake_cluster.objects[("Pod", "apps", DRIVER)]
    pod["metadata"]["uid"] = "u-2"
    _hold_lease(fake_cluster, f"{DRIVER}/u-2")
    fake_cluster.run_pod(DRIVER)  # running: its Lease is its own
    run(spec)
    assert fake_cluster.objects[("Lease", "apps", DRIVER)]["spec"]["holderIdentity"] == f"{DRIVER}/u-2"
    fake_cluster.run_pod(DRIVER, ready=False, phase="Failed")
    run(spec)
    lease = fake_cluster.objects[("Lease", "apps", DRIVER)]
    assert lease["spec"]["holderIdentity"] == "" and lease["metadata"]["resourceVersion"] == "7"


def _fail_driver(fake_cluster: Any, *, started: str, finished: str) -> None:
    """The driver Pod ended with exit code 1 (started and finished: RFC 3339 times)."""
    fake_cluster.objects[("Pod", "apps", DRIVER)]["status"] = {
        "phase": "Failed",
        "startTime": started,
        "containerStatuses": [
            {"state": {"terminated": {"reason": "Error", "exitCode": 1, "finishedAt": finished}}}
        ],
    }


def test_a_crash_looping_driver_is_replaced_with_a_growing_back_off(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    """The first failed driver is replaced at once, the next after 10 s, then 20 s (CrashLoopBackOff's
    curve); the failed Pod stays, with its exit code, while the back-off runs; a driver that
    processes resets the count."""

    def crash(second: int) -> None:
        _fail_driver(fake_cluster, started=at(second - 1), finished=at(second))

    def at(second: int) -> str:
        return f"2026-01-01T00:00:{second:02d}Z"

    def replaced(outcome: reconcile.Outcome) -> bool:
        return ("delete", "Pod", DRIVER) in fake_cluster.calls

    run(spec)
    crash(1)
    first = run(spec, now=at(1))
    assert replaced(first) and first.status["driverFailures"] == 1
    fake_cluster.finish_terminating()
    run(spec, now=at(2))  # the replacement
    crash(3)
    waiting = run(spec, now=at(4))
    assert not replaced(waiting)
    assert isinstance(waiting.error, errors.DriverBackOff) and waiting.error.delay == 9
    assert "failed 2 times in a row" in waiting.status["message"]
    assert "exit code 1" in waiting.status["message"]
    assert _condition(waiting, "Degraded") == ("True", "DriverFailed")
    second = run(spec, now=at(13))
    assert replaced(second) and second.status["driverFailures"] == 2
    fake_cluster.finish_terminating()
    run(spec, now=at(14))
    crash(15)
    third = run(spec, now=at(16))
    assert not replaced(third) and third.error is not None and third.error.delay == 19  # 20 s now
    assert replaced(run(spec, now=at(35)))
    fake_cluster.finish_terminating()
    run(spec, now=at(36))
    fake_cluster.run_pod(DRIVER)
    processing = run(spec, now=at(40), standing=kafka_probe.Standing(lag=0, batch_id=0, time=at(39)))
    assert _condition(processing, "Ready") == ("True", "DriverRunning")
    assert processing.status["driverFailures"] == 0


def test_a_driver_that_ended_after_the_reconciliation_began_is_replaced_as_one_that_just_ended(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    """The reconciliation's clock is read before the Pod: a Pod that ended in between has a finish
    time after it. The first failure is still replaced at once (an e2e crash loop once showed
    "failed 1 times in a row … back-off 0 s" and no replacement), and the second waits 10 s."""

    def crash(finished: str) -> None:
        _fail_driver(fake_cluster, started="2026-01-01T00:00:00Z", finished=finished)

    run(spec)
    crash("2026-01-01T00:00:02Z")
    first = run(spec, now="2026-01-01T00:00:01Z")
    assert ("delete", "Pod", DRIVER) in fake_cluster.calls, first.status
    assert not isinstance(first.error, errors.DriverBackOff), first.error
    assert first.status["driverFailures"] == 1, first.status
    fake_cluster.finish_terminating()
    run(spec, now="2026-01-01T00:00:03Z")  # the replacement
    fake_cluster.calls.clear()
    crash("2026-01-01T00:00:05Z")
    waiting = run(spec, now="2026-01-01T00:00:04Z")
    assert ("delete", "Pod", DRIVER) not in fake_cluster.calls
    assert isinstance(waiting.error, errors.DriverBackOff) and waiting.error.delay == 10, waiting.error
    assert "failed 2 times in a row" in waiting.status["message"], waiting.status["message"]


def test_back_off_curve() -> None:
    assert [reconcile.backoff_seconds(n) for n in range(8)] == [0, 10, 20, 40, 80, 160, 300, 300]


def test_an_ended_driver_removed_at_once_is_reported_with_its_exit_code(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    """The API server deletes a Pod in a terminal phase immediately, not after a grace period."""
    run(spec)
    pod = fake_cluster.objects[("Pod", "apps", DRIVER)]
    pod["status"] = {
        "phase": "Failed",
        "containerStatuses": [{"state": {"terminated": {"reason": "Error", "exitCode": 3}}}],
    }
    fake_cluster.delete = _deleting_at_once(fake_cluster)
    failed = run(spec)
    assert ("Pod", "apps", DRIVER) not in fake_cluster.objects
    degraded = next(c for c in failed.status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "DriverFailed")
    assert "exit code 3" in degraded["message"]
    assert "exit code 3" in run(spec).status["message"]  # and after the replacement is created


def _deleting_at_once(cluster: Any) -> Any:
    def delete(
        api_version: str, kind: str, namespace: str, name: str, *, grace_seconds: int | None = None
    ) -> bool:
        cluster.calls.append(("delete", kind, name))
        return cluster.objects.pop((kind, namespace, name), None) is not None

    return delete


def test_reset_is_recorded_once_its_driver_runs(run: Any, spec: dict[str, Any], fake_cluster: Any) -> None:
    spec["deployment"]["reset"] = {"id": "r1", "to": "earliest"}
    assert run(spec).status["lastReset"] == "r1"


def test_cleanup_deletes_only_what_the_app_owns(
    run: Any, spec: dict[str, Any], fake_cluster: Any, ref: desired.AppRef
) -> None:
    run(spec)
    fake_cluster.objects[("ServiceAccount", "apps", "shared")] = {"metadata": {"name": "shared"}}
    assert reconcile.cleanup(ref=ref, cluster=fake_cluster) is False  # the driver is still stopping
    # What the stopping driver still uses stays until it is gone: its Role (Spark deletes its
    # executors and Services on stop), its ServiceAccount, its Lease (released at the stop).
    kinds = {kind for kind, _, _ in fake_cluster.objects}
    assert {"Role", "RoleBinding", "ServiceAccount", "ConfigMap"} <= kinds, kinds
    fake_cluster.finish_terminating()
    assert reconcile.cleanup(ref=ref, cluster=fake_cluster) is True
    assert list(fake_cluster.objects) == [("ServiceAccount", "apps", "shared")]


def test_lag_throughput_and_last_batch_come_from_the_apps_group(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    run(spec)
    fake_cluster.run_pod(DRIVER)
    progress = kafka_probe.Standing(lag=1234, batch_id=41, time="2026-01-01T00:00:09.000Z", rate=812.46)
    first = run(spec, standing=progress)
    assert (first.status["lag"], first.status["throughput"], first.status["lastBatchTime"]) == (
        1234, "812.5 records/s", "2026-01-01T00:00:09.000Z",
    )  # fmt: skip
    # Kafka unreachable: the last known values stay, with a warning event.
    outage = run(spec, fail=True)
    assert outage.status["lag"] == 1234 and outage.status["throughput"] == "812.5 records/s"
    assert [e.reason for e in outage.events] == ["KafkaUnreachable"]  # one warning, not one per probe


def test_progress_is_read_from_the_group_the_driver_is_told(
    ref: desired.AppRef, spec: dict[str, Any], fake_cluster: Any, make_probe: Any
) -> None:
    probe = make_probe({"text-lines": 2})
    reconcile.reconcile(
        ref=ref, spec=spec, generation=1, previous={}, cluster=fake_cluster, probe=probe, now=NOW
    )
    app = validation.parse(name=ref.name, namespace=ref.namespace, spec=spec)
    driver = desired.render(ref=ref, app=app, executors=1).driver
    assert driver is not None
    env = {e["name"]: e.get("value") for e in driver["spec"]["containers"][0]["env"]}
    assert probe.groups == [env["STREAMAPP_PROGRESS_GROUP"]] == ["streamapp.apps.wordcount"]


def test_the_probes_use_the_apps_kafka_credentials_and_a_missing_secret_is_reported(
    run: Any, spec: dict[str, Any], fake_cluster: Any, make_probe: Any, ref: desired.AppRef
) -> None:
    spec["kafka"]["sasl"] = {
        "mechanism": "SCRAM-SHA-512",
        "username": {"name": "kafka-user", "key": "username"},
        "password": {"name": "kafka-user", "key": "password"},
    }
    missing = run(spec)
    assert [e.reason for e in missing.events][:1] == ["KafkaCredentials"]
    assert "spec.kafka.sasl.username (Secret kafka-user, key username)" in missing.events[0].message
    assert missing.status["executors"]["desired"] == 1  # partitions unknown: start small

    fake_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "kafka-user", "namespace": ref.namespace},
            "data": {"username": "YXBw", "password": "czNjcjN0"},  # app / s3cr3t
        }
    )
    probe = make_probe({"text-lines": 6})
    reconcile.reconcile(
        ref=ref, spec=spec, generation=1, previous={}, cluster=fake_cluster, probe=probe, now=NOW
    )
    assert probe.configs[0]["sasl.username"] == "app" and probe.configs[0]["sasl.password"] == "s3cr3t"
    assert probe.configs[0]["security.protocol"] == "SASL_PLAINTEXT"


def test_a_rotated_secret_replaces_the_driver_and_an_unreadable_one_does_not(
    run: Any, spec: dict[str, Any], fake_cluster: Any, ref: desired.AppRef
) -> None:
    spec["kafka"]["sasl"] = {
        "mechanism": "PLAIN",
        "username": {"name": "kafka-user", "key": "username"},
        "password": {"name": "kafka-user", "key": "password"},
    }

    def secret(password: str) -> dict[str, Any]:
        encoded = base64.b64encode(password.encode()).decode()
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "kafka-user", "namespace": ref.namespace},
            "data": {"username": "YXBw", "password": encoded},
        }

    fake_cluster.apply(secret("first"))
    run(spec)
    fake_cluster.run_pod(DRIVER)
    revision = _driver_revision(fake_cluster)
    assert run(spec).events == []  # same credentials: nothing to do

    fake_cluster.apply(secret("rotated"))
    rotated = run(spec)
    assert [e.reason for e in rotated.events] == ["DriverReplaced"]
    assert "the Kafka credentials in its Secrets changed" in rotated.events[0].message
    fake_cluster.finish_terminating()
    run(spec)
    assert _driver_revision(fake_cluster) == revision  # same spec, same revision: a new Pod
    fake_cluster.run_pod(DRIVER)

    del fake_cluster.objects[("Secret", ref.namespace, "kafka-user")]
    gone = run(spec)
    assert [e.reason for e in gone.events] == ["KafkaCredentials"]  # a warning, the driver stays
    assert ("delete", "Pod", DRIVER) not in fake_cluster.calls


def test_pods_on_a_lost_node_are_force_deleted_and_the_driver_replaced_at_once(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    """A lost Node's kubelet never confirms a deletion: the operator removes the app's Pods there
    (grace 0) and creates the new driver in the same reconciliation; Pods on healthy Nodes stay."""

    def node(name: str, ready: str) -> None:
        fake_cluster.objects[("Node", "", name)] = {
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "NodeStatusUnknown"}]},
        }

    def executor(name: str, on: str) -> None:
        labels = {desired.APP_LABEL: "wordcount", "spark-role": "executor"}
        fake_cluster.objects[("Pod", "apps", name)] = {
            "metadata": {"name": name, "namespace": "apps", "labels": labels},
            "spec": {"nodeName": on},
        }

    run(spec)
    fake_cluster.run_pod(DRIVER)
    fake_cluster.objects[("Pod", "apps", DRIVER)]["spec"]["nodeName"] = "node-a"
    executor("wordcount-exec-1", "node-a")
    executor("wordcount-exec-2", "node-b")
    node("node-a", "True")
    node("node-b", "True")
    healthy = run(spec)
    assert not [c for c in fake_cluster.calls if c[0] == "delete"]
    assert "NodeLost" not in [e.reason for e in healthy.events]

    node("node-a", "Unknown")
    lost = run(spec)
    assert ("delete", "Pod", DRIVER) in fake_cluster.calls
    assert ("delete", "Pod", "wordcount-exec-1") in fake_cluster.calls
    assert ("delete", "Pod", "wordcount-exec-2") not in fake_cluster.calls
    reasons = [e.reason for e in lost.events]
    assert reasons.count("NodeLost") == 2 and "DriverCreated" in reasons
    assert "node-a, which is not Ready (NodeStatusUnknown" in lost.events[0].message
    assert "nodeName" not in fake_cluster.objects[("Pod", "apps", DRIVER)].get("spec", {})  # the new one

    del fake_cluster.objects[("Node", "", "node-b")]  # a Node deleted (its machine is gone)
    gone = run(spec)
    assert ("delete", "Pod", "wordcount-exec-2") in fake_cluster.calls
    assert "node-b, which no longer exists" in gone.events[0].message


def test_a_rolling_upgrade_hands_over_once_the_new_driver_waits_in_standby(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    spec["deployment"]["upgradePolicy"] = "rolling"
    run(spec)
    fake_cluster.run_pod(DRIVER)
    old_revision = _driver_revision(fake_cluster)
    spec["sparkConf"] = {"spark.sql.shuffle.partitions": "3"}  # a new revision
    started = run(spec, standing=kafka_probe.Standing(lag=0, batch_id=0, time=NOW))
    assert [e.reason for e in started.events] == ["RollingUpgrade"]
    new = fake_cluster.objects[("Pod", "apps", f"{DRIVER}-b")]
    assert new["metadata"]["labels"][desired.REVISION_LABEL] != old_revision
    assert "deletionTimestamp" not in fake_cluster.objects[("Pod", "apps", DRIVER)]["metadata"]
    assert started.status["phase"] == "Upgrading" and started.status["driverPod"] == DRIVER
    assert _condition(started, "Ready") == ("True", "DriverRunning")  # the old one serves meanwhile

    fake_cluster.run_pod(f"{DRIVER}-b", ready=False)  # Spark starting: not in standby yet
    waiting = run(spec)
    assert waiting.events == [] and ("delete", "Pod", DRIVER) not in fake_cluster.calls
    new["metadata"]["uid"] = "u-b"
    lease = fake_cluster.objects[("Lease", "apps", DRIVER)]
    lease["metadata"]["annotations"] = {"streamapp.io/standby": f"{DRIVER}-b/u-b"}
    handing = run(spec)
    assert [e.reason for e in handing.events] == ["HandingOver"]
    assert ("delete", "Pod", DRIVER) in fake_cluster.calls  # gracefully: it stops at a batch boundary
    fake_cluster.finish_terminating()
    fake_cluster.run_pod(f"{DRIVER}-b")
    done = run(spec, standing=kafka_probe.Standing(lag=0, batch_id=9, time=NOW))
    assert done.status["driverPod"] == f"{DRIVER}-b" and done.status["phase"] == "Running"
    assert done.status["currentRevision"] == done.status["targetRevision"] != old_revision
    stable = fake_cluster.objects[("ConfigMap", "apps", "wordcount-stable")]["data"]
    assert stable["revision"] == done.status["currentRevision"]  # what a later rollback returns to
    settled = run(spec, standing=kafka_probe.Standing(lag=0, batch_id=10, time=NOW))
    assert settled.events == []
    assert [c[0] for c in fake_cluster.calls] == ["apply"] * 6  # settled: nothing created or deleted


def test_a_rolling_upgrade_whose_driver_fails_is_given_up_and_the_old_one_kept(
    run: Any, spec: dict[str, Any], fake_cluster: Any, ref: desired.AppRef
) -> None:
    spec["deployment"]["upgradePolicy"] = "rolling"
    run(spec)
    fake_cluster.run_pod(DRIVER)
    spec["topology"]["streams"][0]["steps"][1]["filter"] = "value != 'x'"  # a new revision
    run(spec)
    fake_cluster.run_pod(f"{DRIVER}-b", ready=False, phase="Failed")
    given_up = run(spec)
    assert [e.reason for e in given_up.events] == ["RollbackUpgrade"]
    assert ("delete", "Pod", f"{DRIVER}-b") in fake_cluster.calls
    assert given_up.status["failedRevision"] == given_up.status["targetRevision"]
    assert _condition(given_up, "Degraded") == ("True", "RollbackUpgrade")
    fake_cluster.finish_terminating()
    again = run(spec)  # the same revision is not tried again: the old driver keeps running
    assert ("Pod", "apps", f"{DRIVER}-b") not in fake_cluster.objects
    assert "deletionTimestamp" not in fake_cluster.objects[("Pod", "apps", DRIVER)]["metadata"]
    assert _condition(again, "Degraded") == ("True", "RollbackUpgrade")

    def why(outcome: Any) -> str:
        return str(next(c["message"] for c in outcome.status["conditions"] if c["type"] == "Degraded"))

    assert why(again) == why(given_up) and "given up" in why(again)  # the reason stays in the status
    spec["topology"]["streams"][0]["steps"][1]["filter"] = "value != 'y'"  # fixed: tried again
    assert [e.reason for e in run(spec).events] == ["RollingUpgrade"]
    assert reconcile.cleanup(ref=ref, cluster=fake_cluster) is False
    fake_cluster.finish_terminating()
    assert reconcile.cleanup(ref=ref, cluster=fake_cluster) is True


def test_a_rolling_upgrade_not_in_standby_within_its_progress_deadline_is_given_up(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    spec["deployment"]["upgradePolicy"] = "rolling"
    spec["deployment"]["progressDeadline"] = "90s"
    run(spec)
    fake_cluster.run_pod(DRIVER)
    spec["topology"]["streams"][0]["steps"][1]["filter"] = "value != 'x'"  # a new revision
    assert [e.reason for e in run(spec).events] == ["RollingUpgrade"]
    new = fake_cluster.objects[("Pod", "apps", f"{DRIVER}-b")]
    new["metadata"]["creationTimestamp"] = NOW
    fake_cluster.run_pod(f"{DRIVER}-b", ready=False)  # up, never in standby
    assert run(spec, now="2026-01-01T00:01:29Z").events == []  # 89 s: still within the deadline
    late = run(spec, now="2026-01-01T00:01:31Z")
    assert [e.reason for e in late.events] == ["RollbackUpgrade"]
    assert "did not reach standby within 90 s (spec.deployment.progressDeadline)" in late.events[0].message
    assert ("delete", "Pod", f"{DRIVER}-b") in fake_cluster.calls
    assert "deletionTimestamp" not in fake_cluster.objects[("Pod", "apps", DRIVER)]["metadata"]


def test_a_rolling_upgrade_without_room_for_the_new_driver_says_so_when_given_up(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    run(spec)  # rolling: the default
    fake_cluster.run_pod(DRIVER)
    spec["topology"]["streams"][0]["steps"][1]["filter"] = "value != 'x'"
    run(spec)
    new = fake_cluster.objects[("Pod", "apps", f"{DRIVER}-b")]
    new["metadata"]["creationTimestamp"] = NOW
    new["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 Insufficient cpu.",
            }
        ],
    }
    late = run(spec, now="2026-01-01T00:05:01Z")
    assert [e.reason for e in late.events] == ["RollbackUpgrade"]
    assert (
        f"did not reach standby within 300 s (spec.deployment.progressDeadline): Pod {DRIVER}-b cannot be "
        "scheduled: 0/1 nodes are available: 1 Insufficient cpu. — a rolling upgrade needs room for a "
        "second driver and its executors; make room, or use upgradePolicy: recreate"
    ) in late.events[0].message


@pytest.mark.parametrize("policy", ["recreate", "rolling"])
def test_a_change_the_checkpoints_state_cannot_take_is_refused_until_a_reset(
    run: Any, spec: dict[str, Any], fake_cluster: Any, policy: str
) -> None:
    spec["deployment"]["upgradePolicy"] = policy
    assert run(spec).status["state"] is None  # no driver runs yet
    fake_cluster.run_pod(DRIVER)
    running = run(spec)
    recorded = running.status["state"]
    assert recorded["checkpoint"] == "s3a://checkpoints/wordcount"
    assert [s["shape"]["aggregator"] for s in recorded["steps"]] == ["count"]

    # A compatible edit (a stateless step) rolls out as usual.
    spec["topology"]["streams"][0]["steps"].insert(2, {"filter": "length(value) > 1"})
    moved = run(spec)
    assert moved.error is None or isinstance(moved.error, errors.DriverStopping)
    assert [e.reason for e in moved.events] in (["DriverReplaced"], ["RollingUpgrade"])
    fake_cluster.finish_terminating()
    for name in (DRIVER, f"{DRIVER}-b"):  # back to one driver of the edited revision
        fake_cluster.objects.pop(("Pod", "apps", name), None)
    run(spec)
    fake_cluster.run_pod(DRIVER)
    edited = run(spec).status["state"]
    assert [s["shape"] for s in edited["steps"]] == [s["shape"] for s in recorded["steps"]]
    assert edited["steps"][0]["path"] == "spec.topology.streams[0].steps[4].count"  # where it is now

    # Counting per 1-minute window on the same checkpoint: refused, nothing touched.
    before = dict(fake_cluster.objects)
    steps = spec["topology"]["streams"][0]["steps"]
    steps[4] = {"windowedBy": {"tumbling": "1m"}}
    steps.insert(5, {"count": {}})
    refused = run(spec)
    assert isinstance(refused.error, errors.InvalidSpecError)
    assert fake_cluster.objects == before and [c[0] for c in fake_cluster.calls] == []
    assert _condition(refused, "Degraded") == ("True", "IncompatibleState")
    assert _condition(refused, "Ready") == ("True", "DriverRunning")
    message = refused.status["message"]
    assert message.startswith("spec.topology: the checkpoint s3a://checkpoints/wordcount holds state")
    assert "windows was 'none', now 'tumbling 60000 ms'" in message
    assert "implementation was 'spark', now 'jvm'" in message
    assert "grouping was 'key', now 'task'" in message
    assert [e.reason for e in refused.events] == ["IncompatibleState"]
    assert refused.status["state"] == edited

    # Asking for reprocessing (a fresh checkpoint) goes ahead, and records the new state.
    spec["deployment"]["reset"] = {"id": "r1", "to": "earliest"}
    reset = run(spec)
    assert not isinstance(reset.error, errors.InvalidSpecError)
    assert [e.reason for e in reset.events] in (["DriverReplaced"], ["RollingUpgrade"])


def _hand_over(run: Any, spec: dict[str, Any], fake_cluster: Any) -> tuple[str, str]:
    """A rolling app whose revision processed (recorded as stable), then a new revision handed over
    to ``<driver>-b``; returns (stable revision, new revision)."""
    spec["deployment"]["upgradePolicy"] = "rolling"
    run(spec)
    fake_cluster.run_pod(DRIVER)
    stable = run(spec, standing=kafka_probe.Standing(lag=0, batch_id=3, time=NOW)).status["currentRevision"]
    spec["topology"]["streams"][0]["steps"][1]["filter"] = "value != 'x'"  # a new revision
    run(spec)
    new = fake_cluster.objects[("Pod", "apps", f"{DRIVER}-b")]
    new["metadata"].update(uid="u-b", creationTimestamp=NOW)
    fake_cluster.objects[("Lease", "apps", DRIVER)]["metadata"]["annotations"] = {
        "streamapp.io/standby": f"{DRIVER}-b/u-b"
    }
    fake_cluster.run_pod(f"{DRIVER}-b", ready=False)
    assert [e.reason for e in run(spec).events] == ["HandingOver"]
    fake_cluster.finish_terminating()
    fake_cluster.run_pod(f"{DRIVER}-b")
    return stable, new["metadata"]["labels"][desired.REVISION_LABEL]


def test_a_revision_that_fails_after_the_hand_over_is_rolled_back_to_the_stable_one(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    stable, failing = _hand_over(run, spec, fake_cluster)
    assert stable != failing
    fake_cluster.run_pod(f"{DRIVER}-b", ready=False, phase="Failed")  # its query failed on a record
    given_up = run(spec)
    assert [e.reason for e in given_up.events] == ["RollbackUpgrade"]
    assert f"revision {failing} failed after the hand-over, returning to revision {stable}" in (
        given_up.events[0].message
    )
    assert given_up.status["failedRevision"] == failing
    assert _condition(given_up, "Degraded") == ("True", "RollbackUpgrade")
    replacing = run(spec)  # the stable revision replaces the failed driver
    assert ("delete", "Pod", f"{DRIVER}-b") in fake_cluster.calls
    fake_cluster.finish_terminating()
    back = run(spec)
    assert [e.reason for e in replacing.events + back.events] == ["DriverReplaced", "DriverCreated"]
    assert _driver_revision(fake_cluster) == stable  # in slot 0 again, with the stable spec
    config = fake_cluster.objects[("ConfigMap", "apps", "wordcount-app")]["data"]["app.yaml"]
    assert "value != 'x'" not in config
    fake_cluster.run_pod(DRIVER)
    running = run(spec, standing=kafka_probe.Standing(lag=0, batch_id=4, time=NOW))
    assert running.status["currentRevision"] == stable and running.status["phase"] == "Running"
    assert _condition(running, "Ready") == ("True", "DriverRunning")
    assert _condition(running, "Degraded") == ("True", "RollbackUpgrade")  # why, until the spec changes
    assert failing in running.status["message"]
    spec["topology"]["streams"][0]["steps"][1]["filter"] = "value != 'y'"  # fixed: rolled out again
    assert [e.reason for e in run(spec).events] == ["RollingUpgrade"]


def test_a_revision_that_completes_no_batch_after_the_hand_over_is_rolled_back(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    spec["deployment"]["progressDeadline"] = "60s"
    stable, failing = _hand_over(run, spec, fake_cluster)
    fake_cluster.objects[("Pod", "apps", f"{DRIVER}-b")]["status"]["startTime"] = "2026-01-01T00:00:01Z"
    waiting = kafka_probe.Standing(lag=40, batch_id=3, time=NOW)  # the stable driver's last batch
    assert run(spec, now="2026-01-01T00:00:59Z", standing=waiting).events == []
    late = run(spec, now="2026-01-01T00:01:01Z", standing=waiting)
    assert [e.reason for e in late.events] == ["RollbackUpgrade"]
    assert (
        "has not completed a micro-batch yet; 40 records wait, 60 s after its start" in late.events[0].message
    )
    assert late.status["failedRevision"] == failing
    # The failing driver still runs: the stable revision comes back through a hand-over of its own.
    back = run(spec, now="2026-01-01T00:01:02Z", standing=waiting)
    assert [e.reason for e in back.events] == ["RollingUpgrade"]
    assert _driver_revision(fake_cluster) == stable
    assert _condition(back, "Degraded") == ("True", "RollbackUpgrade")


def test_a_failing_revision_with_no_stable_one_recorded_crash_loops_as_before(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    spec["deployment"]["upgradePolicy"] = "rolling"
    run(spec)
    fake_cluster.run_pod(DRIVER, ready=False, phase="Failed")  # never processed: nothing stable
    outcome = run(spec)
    assert [e.reason for e in outcome.events] == ["DriverReplaced"]
    assert ("ConfigMap", "apps", "wordcount-stable") not in fake_cluster.objects


def test_autoscale_rolls_out_more_executors_under_load_and_fewer_after(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    spec["deployment"]["upgradePolicy"] = "rolling"
    spec["deployment"]["executors"] = {"min": 1, "max": 8, "coresPerExecutor": 1}
    spec["deployment"]["autoscale"] = {"recordsPerSecondPerCore": 5, "stabilizationWindow": "40s"}

    def at(second: int) -> str:
        return f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}Z"

    def load(rate: float, second: int) -> kafka_probe.Standing:
        # The driver's processed rate says 30/s (a backlog drained): the arrival rate decides.
        end = int(rate * second)
        return kafka_probe.Standing(lag=0, batch_id=second, time=at(second), rate=30.0, end=end)

    first = run(spec, now=at(0))
    assert first.status["executors"]["desired"] == 6  # a new app: one slot per input partition
    fake_cluster.run_pod(DRIVER)
    calm = [run(spec, now=at(s), standing=load(4.0, s)) for s in range(2, 60, 2)]
    assert calm[-1].status["executors"]["desired"] == 1  # after a whole calm window: down to 1
    assert [e.reason for o in calm for e in o.events][:2] == ["Autoscaled", "RollingUpgrade"]
    scaled_down = next(e for o in calm for e in o.events if e.reason == "Autoscaled")
    assert "executors 6 → 1: arriving 4.0 records/s" in scaled_down.message
    assert "scale down" in calm[-1].status["autoscale"]["reason"] or calm[-1].status["phase"] == "Upgrading"
    recommendations = calm[-1].status["autoscale"]["recommendations"]
    assert recommendations == []  # started afresh at the change; none taken during the rollout


def test_a_given_up_driver_still_going_delays_the_next_upgrade_instead_of_a_recreate(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    spec["deployment"]["upgradePolicy"] = "rolling"
    run(spec)
    fake_cluster.run_pod(DRIVER)
    spec["topology"]["streams"][0]["steps"][1]["filter"] = "value != 'x'"
    run(spec)
    fake_cluster.run_pod(f"{DRIVER}-b", ready=False, phase="Failed")
    assert [e.reason for e in run(spec).events] == ["RollbackUpgrade"]  # b is deleted, still going
    spec["topology"]["streams"][0]["steps"][1]["filter"] = "value != 'y'"  # the next revision
    waiting = run(spec)
    assert isinstance(waiting.error, errors.DriverStopping) and "to go first" in str(waiting.error)
    assert waiting.events == [] and ("delete", "Pod", DRIVER) not in fake_cluster.calls
    assert _condition(waiting, "Ready") == ("True", "DriverRunning")  # the running one serves on
    fake_cluster.finish_terminating()
    assert [e.reason for e in run(spec).events] == ["RollingUpgrade"]


def test_a_new_driver_is_not_ready_on_its_predecessor_s_batch_nor_recorded_stable(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    spec["deployment"]["upgradePolicy"] = "rolling"
    run(spec)
    fake_cluster.run_pod(DRIVER)
    fake_cluster.objects[("Pod", "apps", DRIVER)]["status"]["startTime"] = "2025-12-31T23:59:00Z"
    theirs = kafka_probe.Standing(lag=7, batch_id=5, time=NOW, by="wordcount-driver-b")
    outcome = run(spec, standing=theirs)  # a batch after this Pod started, but another driver's
    assert _condition(outcome, "Ready") == ("False", "NoRecentBatch")
    assert "the last was wordcount-driver-b's" in outcome.status["conditions"][0]["message"]
    assert ("ConfigMap", "apps", "wordcount-stable") not in fake_cluster.objects
    own = kafka_probe.Standing(lag=7, batch_id=6, time=NOW, by=DRIVER)
    assert _condition(run(spec, standing=own), "Ready") == ("True", "DriverRunning")
    assert ("ConfigMap", "apps", "wordcount-stable") in fake_cluster.objects


def test_an_app_rolled_back_to_its_stable_revision_can_be_suspended(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    stable, _ = _hand_over(run, spec, fake_cluster)
    fake_cluster.run_pod(f"{DRIVER}-b", ready=False, phase="Failed")
    run(spec)  # given up: the stable revision replaces it
    run(spec)
    fake_cluster.finish_terminating()
    run(spec)
    fake_cluster.run_pod(DRIVER)
    assert _driver_revision(fake_cluster) == stable
    spec["deployment"]["suspend"] = True
    stopping = run(spec)
    assert ("delete", "Pod", DRIVER) in fake_cluster.calls, stopping.events
    assert ("apply", "Pod", DRIVER) not in fake_cluster.calls
    fake_cluster.finish_terminating()
    suspended = run(spec)
    assert suspended.status["phase"] == "Suspended" and ("Pod", "apps", DRIVER) not in fake_cluster.objects
    spec["deployment"]["suspend"] = False
    run(spec)
    assert _driver_revision(fake_cluster) == stable  # resumed where it was: the stable revision


def test_a_stable_revision_that_is_no_longer_valid_is_not_returned_to_again_and_again(
    run: Any, spec: dict[str, Any], fake_cluster: Any
) -> None:
    _hand_over(run, spec, fake_cluster)
    record = fake_cluster.objects[("ConfigMap", "apps", "wordcount-stable")]["data"]
    record["spec.json"] = record["spec.json"].replace("value != ''", "value !!= ''")  # e.g. a newer runtime
    fake_cluster.run_pod(f"{DRIVER}-b", ready=False, phase="Failed")
    assert [e.reason for e in run(spec).events] == ["RollbackUpgrade"]
    after = run(spec)  # nothing valid to return to: the failed driver is replaced, as a crash
    assert [e.reason for e in after.events] == ["DriverReplaced"]
    assert not isinstance(after.error, errors.DriverStopping) or after.error.delay >= 5
