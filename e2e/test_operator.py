"""The operator against a real control plane and a real Kafka broker: kubectl in, status out.

Every test applies manifests with kubectl, as a user would, and reads back what the operator did:
the objects it created, the status and the printer columns `kubectl get streamapps` shows, its
events and its metrics. The operator runs as the chart's ServiceAccount (see operator_proc), so
these tests also prove the chart's RBAC is enough. Driver pods are KWOK pods: scheduled, reported
Running and Ready, never executed (so their apps are deployed, never Ready: no micro-batch ever
completes); test_driver_contract runs what they would run, test_apps_run runs apps on a node agent.
"""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Callable
from typing import Any

import cluster
import operator_proc
import pytest
import yaml
from operator_proc import APPS_NAMESPACE, apply, deployed, driver

from streamapp.runtime.kafka import admin

pytestmark = pytest.mark.timeout(300)

NS = APPS_NAMESPACE
INVALID = pathlib.Path(__file__).resolve().parents[1] / "tests" / "runtime" / "manifest" / "invalid"
#: Invalid for `streamapp validate` on a laptop, valid for the operator: a module that is not
#: importable here may well be in the app's runtime image (the operator checks the reference's form).
VALID_IN_A_CLUSTER = {"bad-function-ref"}
#: Corpus files whose first problem needs the user's code imported (the operator never imports
#: it): the operator is judged on the first of their problems it can see, the form's.
CLUSTER_PROBLEM = {"process-bad-references": "process needs a stream, but its input is a table"}
OWNED_KINDS = "pods,services,configmaps,serviceaccounts,roles.rbac.authorization.k8s.io,rolebindings"


def manifest(name: str, **kwargs: Any) -> dict[str, Any]:
    """operator_proc's word count with ``upgradePolicy: recreate``: a KWOK driver Pod runs nothing,
    so none would ever wait in standby for a rolling hand-over (test_apps_run tests rolling)."""
    return operator_proc.manifest(name, upgradePolicy="recreate", **kwargs)


def _eventually(what: str, check: Callable[[], Any], timeout: float = 60, operator: Any = None) -> Any:
    """Poll ``check()`` until it returns something truthy; fail saying what never happened."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except cluster.ClusterError as err:
            last = err
        time.sleep(0.25)
    tail = f"\noperator log:\n{operator.diagnose()}" if operator is not None else ""
    pytest.fail(f"{what} within {timeout:.0f}s (last: {last}){tail}")


def spark_conf(kube: cluster.Cluster, name: str) -> dict[str, str]:
    data = json.loads(kube.kubectl("get", "configmap", f"{name}-app", "-n", NS, "-o", "json"))["data"]
    return dict(line.split(" ", 1) for line in data["spark-defaults.conf"].splitlines())


def events(kube: cluster.Cluster, name: str) -> list[str]:
    found = kube.kubectl(
        "get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}", "-o", "json"
    )  # fmt: skip
    return [f"{e['reason']}: {e['message']}" for e in json.loads(found)["items"]]


def test_an_app_becomes_ready_sized_to_its_partitions_and_rescales(
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    streamapp_report: Callable[[str], None],
) -> None:
    kube, op = _kube(streamapp_operator), streamapp_operator
    source, sink = new_topic(4), new_topic(1)
    apply(kube, manifest("wordcount", source=source, sink=sink, bootstrap=kafka_bootstrap))
    status = _eventually("wordcount was not deployed", lambda: deployed(kube, "wordcount"), operator=op)
    assert status["phase"] == "Running"
    assert status["inputPartitions"] == 4
    assert status["executors"]["desired"] == 4  # ceil(4 partitions / 1 core), within [1, 8]
    assert spark_conf(kube, "wordcount")["spark.executor.instances"] == "4"
    assert status["currentRevision"] == status["targetRevision"]

    listing = kube.kubectl("get", "streamapps", "-n", NS)
    assert listing.splitlines()[0].split() == ["NAME", "PHASE", "READY", "EXECUTORS", "LAG", "AGE"]
    row = columns(listing, "wordcount")
    # EXECUTORS counts ready executor pods: KWOK runs no driver, so none were started here; and
    # READY needs a completed micro-batch, which a driver that never runs never commits.
    assert (row["PHASE"], row["READY"], row["EXECUTORS"], row["LAG"]) == ("Running", "False", "0", "")
    wide_listing = kube.kubectl("get", "sapp", "-n", NS, "-o", "wide")
    wide = columns(wide_listing, "wordcount")
    assert (wide["DESIRED"], wide["REVISION"]) == ("4", status["currentRevision"])  # executors asked for
    streamapp_report(f"kubectl get streamapps -n {NS}:\n{listing.rstrip()}")
    streamapp_report(f"kubectl get sapp -n {NS} -o wide (4 input partitions):\n{wide_listing.rstrip()}")

    first = driver(kube, "wordcount")
    assert first is not None
    admin.add_partitions(kafka_bootstrap, {source: 6})
    grown = _eventually(
        "wordcount was not rescaled to 6 executors",
        lambda: (s := deployed(kube, "wordcount")) and s["executors"]["desired"] == 6 and s,
        timeout=90,
        operator=op,
    )
    second = driver(kube, "wordcount")
    assert second is not None and second["metadata"]["uid"] != first["metadata"]["uid"]
    assert grown["currentRevision"] == second["metadata"]["labels"]["streamapp.io/revision"]
    assert spark_conf(kube, "wordcount")["spark.executor.instances"] == "6"
    assert any("rescaling from 4 to 6 executors" in e for e in events(kube, "wordcount"))
    wide_listing = kube.kubectl("get", "sapp", "-n", NS, "-o", "wide")
    assert columns(wide_listing, "wordcount")["DESIRED"] == "6"
    streamapp_report(f"kubectl get sapp -n {NS} -o wide (partitions added, 6):\n{wide_listing.rstrip()}")


def test_suspend_stops_the_driver_and_resume_starts_it_again(
    streamapp_operator: operator_proc.Operator, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    kube, op = _kube(streamapp_operator), streamapp_operator
    app = manifest("pausable", source=new_topic(2), sink=new_topic(1), bootstrap=kafka_bootstrap)
    apply(kube, app)
    _eventually("pausable was not deployed", lambda: deployed(kube, "pausable"), operator=op)

    kube.kubectl(
        "patch",
        "sapp",
        "pausable",
        "-n",
        NS,
        "--type=merge",
        "-p",
        '{"spec":{"deployment":{"suspend":true}}}',
    )
    _eventually(
        "the driver of a suspended app was not removed", lambda: driver(kube, "pausable") is None, operator=op
    )
    status = _eventually(
        "pausable was not Suspended",
        lambda: (
            operator_proc.condition(s := operator_proc.app_status(kube, NS, "pausable"), "Ready").get(
                "reason"
            )
            == "Suspended"
            and s
        ),
        operator=op,
    )
    assert status["phase"] == "Suspended" and status.get("driverPod") is None
    # What the app resumes from stays: its configuration (and the checkpoint the spec names).
    assert spark_conf(kube, "pausable")["spark.executor.instances"] == "2"

    kube.kubectl(
        "patch",
        "sapp",
        "pausable",
        "-n",
        NS,
        "--type=merge",
        "-p",
        '{"spec":{"deployment":{"suspend":false}}}',
    )
    resumed = _eventually("pausable did not resume", lambda: deployed(kube, "pausable"), operator=op)
    assert resumed["phase"] == "Running" and driver(kube, "pausable") is not None
    assert "Suspending" in " ".join(events(kube, "pausable"))


def test_kubectl_scale_pins_the_executors_and_a_reset_restarts_on_a_fresh_checkpoint(
    streamapp_operator: operator_proc.Operator, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    kube, op = _kube(streamapp_operator), streamapp_operator
    app = manifest("scaled", source=new_topic(2), sink=new_topic(1), bootstrap=kafka_bootstrap)
    apply(kube, app)
    first = _eventually("scaled was not deployed", lambda: deployed(kube, "scaled"), operator=op)
    assert first["executors"]["desired"] == 2

    # The scale subresource sets spec.deployment.executors.replicas: partition-based sizing is off.
    kube.kubectl("scale", "sapp", "scaled", "-n", NS, "--replicas=3")
    scaled = _eventually(
        "kubectl scale did not reach the driver",
        lambda: (s := deployed(kube, "scaled")) and s["executors"]["desired"] == 3 and s,
        operator=op,
    )
    assert spark_conf(kube, "scaled")["spark.executor.instances"] == "3"

    # A HorizontalPodAutoscaler can target the app: the scale subresource names the executor Pods.
    scale = json.loads(
        kube.kubectl("get", "--raw", f"/apis/streamapp.io/v1alpha1/namespaces/{NS}/streamapps/scaled/scale")
    )
    assert scale["status"]["selector"] == "streamapp.io/app=scaled,spark-role=executor", scale
    kube.kubectl("autoscale", "sapp", "scaled", "-n", NS, "--min=1", "--max=4", "--cpu-percent=80")

    def hpa_conditions() -> dict[str, tuple[str, str]] | None:
        hpa = json.loads(kube.kubectl("get", "hpa", "scaled", "-n", NS, "-o", "json"))
        found = {
            c["type"]: (c["status"], c["reason"]) for c in (hpa.get("status") or {}).get("conditions") or []
        }
        return found if "ScalingActive" in found else None

    conditions = _eventually(
        "the HorizontalPodAutoscaler never read the scale", hpa_conditions, timeout=90, operator=op
    )
    # No metrics API runs in the e2e cluster, so it cannot get the Pods' CPU; without the selector
    # it would stop before that, at InvalidSelector.
    assert conditions["AbleToScale"] == ("True", "SucceededGetScale"), conditions
    assert conditions["ScalingActive"] == ("False", "FailedGetResourceMetric"), conditions
    kube.kubectl("delete", "hpa", "scaled", "-n", NS)

    patch = '{"spec":{"deployment":{"reset":{"id":"r1","to":"latest"}}}}'
    kube.kubectl("patch", "sapp", "scaled", "-n", NS, "--type=merge", "-p", patch)
    reset = _eventually(
        "the reset was not carried out",
        lambda: (s := deployed(kube, "scaled")) and s.get("lastReset") == "r1" and s,
        operator=op,
    )
    assert reset["currentRevision"] != scaled["currentRevision"]
    pod = driver(kube, "scaled")
    assert pod is not None
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["STREAMAPP_STARTING_OFFSETS"] == "latest"
    assert env["STREAMAPP_CHECKPOINT"] == app["spec"]["checkpointLocation"] + "/resets/r1"


def test_deleting_an_app_removes_everything_it_owns(
    streamapp_operator: operator_proc.Operator, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    kube, op = _kube(streamapp_operator), streamapp_operator
    apply(kube, manifest("doomed", source=new_topic(1), sink=new_topic(1), bootstrap=kafka_bootstrap))
    _eventually("doomed was not deployed", lambda: deployed(kube, "doomed"), operator=op)
    owned = kube.kubectl("get", OWNED_KINDS, "-n", NS, "-l", "streamapp.io/app=doomed", "-o", "name").split()
    assert len(owned) == 6, owned  # driver Pod, Service, ConfigMap, ServiceAccount, Role, RoleBinding

    kube.kubectl("delete", "sapp", "doomed", "-n", NS, "--timeout=90s", timeout=100)
    left = kube.kubectl("get", OWNED_KINDS, "-n", NS, "-l", "streamapp.io/app=doomed", "-o", "name")
    assert left.split() == []
    assert "doomed" not in kube.kubectl("get", "sapp", "-n", NS, "-o", "name")


def _cluster_problems(bootstrap: str) -> list[tuple[str, Callable[[dict[str, Any]], None], str]]:
    """Specs the runtime accepts but a cluster cannot run; each must be reported by field path."""

    def no_kafka(spec: dict[str, Any]) -> None:
        del spec["kafka"]

    def reserved_conf(spec: dict[str, Any]) -> None:
        spec["sparkConf"] = {"spark.executor.instances": "3"}

    def no_checkpoint(spec: dict[str, Any]) -> None:
        del spec["checkpointLocation"]

    return [
        ("no-kafka", no_kafka, "spec.kafka.bootstrapServers: required in a cluster"),
        (
            "reserved-spark-conf",
            reserved_conf,
            'spec.sparkConf["spark.executor.instances"]: set by the operator',
        ),
        ("no-checkpoint", no_checkpoint, "spec.checkpointLocation: required in a cluster"),
    ]


def test_invalid_manifests_are_refused_or_degraded_and_never_disturb_a_running_app(
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    streamapp_report: Callable[[str], None],
) -> None:
    """The runtime's corpus of invalid manifests, plus cluster-only problems, each applied as an
    update of a running app: the API server refuses it naming the field, or the operator reports
    Degraded naming it — and the running driver is left exactly as it was."""
    kube, op = _kube(streamapp_operator), streamapp_operator
    source, sink = new_topic(2), new_topic(1)
    good = manifest("steady", source=source, sink=sink, bootstrap=kafka_bootstrap)
    apply(kube, good)
    _eventually("steady was not deployed", lambda: deployed(kube, "steady"), operator=op)
    running = driver(kube, "steady")
    assert running is not None

    cases: list[tuple[str, str | dict[str, Any], str]] = []
    for path in sorted(INVALID.glob("*.yaml")):
        if path.stem in VALID_IN_A_CLUSTER:
            continue
        problems = path.with_suffix(".expected").read_text().splitlines()
        expected = next(line for line in problems if CLUSTER_PROBLEM.get(path.stem, "") in line)
        try:
            doc = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            cases.append((path.stem, path.read_text(), expected))
            continue
        doc["metadata"] = {"name": "steady", "namespace": NS}
        spec = doc.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("kafka", good["spec"]["kafka"])
            spec.setdefault("checkpointLocation", good["spec"]["checkpointLocation"])
        cases.append((path.stem, doc, expected))
    for name, change, expected in _cluster_problems(kafka_bootstrap):
        doc = json.loads(json.dumps(good))
        change(doc["spec"])
        cases.append((name, doc, expected))

    refused, degraded = [], []
    for name, doc, expected in cases:
        try:
            apply(kube, doc)
        except cluster.ClusterError as err:
            # Refused before the operator sees it: by kubectl (not YAML) or by the CRD's schema.
            field = expected.split(": ", 1)[0]
            assert field in str(err) or "error parsing" in str(err) or "yaml" in str(err).lower(), (
                name,
                str(err),
            )
            refused.append(name)
            continue

        def degraded_with(message: str = expected) -> dict[str, Any] | None:
            app = json.loads(kube.kubectl("get", "streamapp", "steady", "-n", NS, "-o", "json"))
            status = app.get("status") or {}
            if status.get("observedGeneration") != app["metadata"]["generation"]:
                return None
            found = operator_proc.condition(status, "Degraded")
            return status if found.get("status") == "True" and message in found.get("message", "") else None

        status = _eventually(f"{name}: no Degraded condition naming '{expected}'", degraded_with, operator=op)
        pod = driver(kube, "steady") or {}
        assert operator_proc.condition(status, "Ready")["status"] == "True", (
            f"{name}: {json.dumps(status)}\ndriver Pod: {json.dumps(pod.get('metadata'))}\n"
            f"{json.dumps(pod.get('status'))}"
        )
        degraded.append(name)
        now = driver(kube, "steady")
        assert now is not None and now["metadata"]["uid"] == running["metadata"]["uid"], name

    assert len(refused) + len(degraded) == len(cases)
    assert len(degraded) >= 20, degraded  # most problems need the topology compiled: the operator's job
    streamapp_report(
        f"invalid manifests: {len(cases)} applied to a running app; {len(refused)} refused by the API "
        f"server or kubectl ({', '.join(refused)}), {len(degraded)} reported Degraded by field path; "
        "the driver Pod was never touched"
    )
    apply(kube, good)
    healthy = _eventually(
        "steady did not recover once valid again", lambda: deployed(kube, "steady"), operator=op
    )
    assert operator_proc.condition(healthy, "Degraded")["status"] == "False"
    final = driver(kube, "steady")
    assert final is not None and final["metadata"]["uid"] == running["metadata"]["uid"]


def test_an_invalid_new_app_gets_no_driver(
    streamapp_operator: operator_proc.Operator, kafka_bootstrap: str
) -> None:
    kube, op = _kube(streamapp_operator), streamapp_operator
    doc = manifest("broken", source="in", sink="out", bootstrap=kafka_bootstrap)
    doc["spec"]["topology"]["streams"][0]["steps"][0] = {"flatMapValues": "explode(split(lower(vlue), ' '))"}
    apply(kube, doc)
    status = _eventually(
        "broken was not reported Failed",
        lambda: (s := operator_proc.app_status(kube, NS, "broken")).get("phase") == "Failed" and s,
        operator=op,
    )
    degraded = operator_proc.condition(status, "Degraded")
    assert degraded["reason"] == "InvalidSpec"
    assert "spec.topology.streams[0].steps[0].flatMapValues: unknown column 'vlue'" in degraded["message"]
    assert driver(kube, "broken") is None
    assert any(e.startswith("InvalidSpec: spec.topology.streams[0].steps[0]") for e in events(kube, "broken"))


def test_operator_metrics(
    streamapp_operator: operator_proc.Operator, kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    kube, op = _kube(streamapp_operator), streamapp_operator
    apply(kube, manifest("measured", source=new_topic(1), sink=new_topic(1), bootstrap=kafka_bootstrap))
    _eventually("measured was not deployed", lambda: deployed(kube, "measured"), operator=op)
    broken = manifest("measured-broken", source="in", sink="out", bootstrap=kafka_bootstrap)
    broken["spec"]["topology"]["streams"][0]["steps"][1] = {"filter": "valeu != ''"}
    apply(kube, broken)

    def scraped() -> dict[str, float] | None:
        text = streamapp_operator.metrics()
        values = {
            line.split(" ")[0]: float(line.split(" ")[1])
            for line in text.splitlines()
            if line and not line.startswith("#")
        }
        invalid = sum(
            v
            for k, v in values.items()
            if k.startswith("streamapp_operator_reconcile_errors_total{") and 'kind="invalid_spec"' in k
        )
        return (
            values
            if invalid >= 1 and values.get('streamapp_operator_apps{phase="Running"}', 0) >= 1
            else None
        )

    values = _eventually("the metrics never counted a Running app and an invalid spec", scraped, operator=op)
    assert values['streamapp_operator_reconciliations_total{trigger="create"}'] >= 2
    assert values['streamapp_operator_reconcile_duration_seconds_count{trigger="create"}'] >= 2
    assert values['streamapp_operator_apps{phase="Failed"}'] >= 1


def _kube(operator: operator_proc.Operator) -> cluster.Cluster:
    return operator.kube


def columns(listing: str, name: str) -> dict[str, str]:
    """The row of ``name`` in a `kubectl get` table, by column title (an empty cell stays empty)."""
    header, *rows = listing.splitlines()
    starts = [i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " ")]
    row = next(r for r in rows if r.split()[:1] == [name])
    bounds = [*starts[1:], max(len(row), len(header)) + 1]
    return {header[a:b].strip(): row[a:b].strip() for a, b in zip(starts, bounds, strict=True)}
