"""Static checks of the chart and the Dockerfiles (no Docker engine; helm only when it is installed)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
from typing import Any

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "streamapp-operator"
IMAGES = ROOT / "images"


def _helm() -> str | None:
    cached = pathlib.Path(os.environ.get("STREAMAPP_CACHE", pathlib.Path.home() / ".cache" / "streamapp"))
    candidate = cached / "bin" / "helm"
    return str(candidate) if candidate.exists() else shutil.which("helm")


def _final_stage(dockerfile: pathlib.Path) -> tuple[int, list[str]]:
    lines = [line.strip() for line in dockerfile.read_text().splitlines()]
    instructions = [line for line in lines if line and not line.startswith("#")]
    froms = [i for i, line in enumerate(instructions) if line.upper().startswith("FROM ")]
    return len(froms), instructions[froms[-1] :]


@pytest.mark.parametrize("image", ["operator", "runtime"])
def test_images_are_multi_stage_and_end_non_root(image: str) -> None:
    stages, final = _final_stage(IMAGES / image / "Dockerfile")
    assert stages >= 2, "build tools stay out of the final image"
    users = [line.split(None, 1)[1] for line in final if line.upper().startswith("USER ")]
    assert users, "the final stage sets a USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), f"final USER is {user}"
    assert final[-1].upper().startswith(("USER", "CMD", "ENTRYPOINT")), "nothing runs as root after USER"


def test_runtime_image_user_matches_the_driver_pod() -> None:
    from streamapp.operator import desired

    _, final = _final_stage(IMAGES / "runtime" / "Dockerfile")
    user = next(line for line in reversed(final) if line.upper().startswith("USER "))
    assert user.split()[1].split(":")[0] == str(desired.SPARK_UID)


def test_chart_files_and_values_schema() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "streamapp-operator"
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(values) <= set(schema["properties"]), "every value is described by the schema"
    for name in ("_helpers.tpl", "deployment.yaml", "rbac.yaml", "serviceaccount.yaml"):
        assert (CHART / "templates" / name).exists(), name
    assert (CHART / "crds" / "streamapp.io_streamapps.yaml").exists()


def _template(*args: str) -> list[dict[str, object]]:
    helm = _helm()
    if helm is None:
        pytest.skip("helm is not installed (make setup builds it)")
    out = subprocess.run(
        [helm, "template", "t", str(CHART), "-n", "ops", "--kube-version", "1.31.0", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def test_chart_renders_cluster_wide_by_default() -> None:
    docs = _template()
    kinds = sorted(str(d["kind"]) for d in docs)
    cluster_rbac = ["ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding"]
    # The Job is the `helm test` hook (helm.sh/hook: test), run by `helm test` only.
    assert kinds == sorted(["ServiceAccount", *cluster_rbac, "Service", "Deployment", "Job"])
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]  # type: ignore[index]
    assert "--all-namespaces" in container["args"]


def test_chart_renders_per_namespace_rbac_and_a_service_monitor() -> None:
    docs = _template("--set", "watchNamespaces={apps,team-b}", "--set", "metrics.serviceMonitor.enabled=true")
    roles = [d["metadata"]["namespace"] for d in docs if d["kind"] == "Role"]  # type: ignore[index]
    assert roles == ["apps", "team-b"]
    assert any(d["kind"] == "ServiceMonitor" for d in docs)


def test_chart_rejects_unknown_values() -> None:
    with pytest.raises(subprocess.CalledProcessError) as caught:
        _template("--set", "replicaCount=2")
    assert "replicaCount" in caught.value.stderr


@pytest.mark.parametrize("values", [(), ("--set", "watchNamespaces={apps}")])
def test_operator_may_read_secrets_by_name_only(values: tuple[str, ...]) -> None:
    # spec.kafka.tls/sasl name Secrets the operator reads to reach the app's Kafka itself.
    docs: list[Any] = _template(*values)
    roles = [d for d in docs if d["kind"] in ("Role", "ClusterRole")]
    managing = [d for d in roles if not d["metadata"]["name"].endswith("-discovery")]
    assert managing, roles
    for role in managing:
        secrets = [rule for rule in role["rules"] if "secrets" in rule["resources"]]
        assert secrets == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}], role


def test_chart_scrapes_the_drivers_with_a_pod_monitor() -> None:
    from streamapp.operator import desired

    docs: list[Any] = _template(
        "--set", "watchNamespaces={apps}", "--set", "metrics.driverPodMonitor.enabled=true"
    )
    monitor = next(d for d in docs if d["kind"] == "PodMonitor")
    # It selects exactly the driver Pods the operator renders, by the port name they declare.
    assert monitor["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/managed-by": "streamapp-operator",
        "spark-role": "driver",
    }
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["apps"]}
    endpoint = monitor["spec"]["podMetricsEndpoints"][0]
    assert endpoint["port"] == "metrics" and endpoint["honorLabels"] is True
    pod = desired.render(
        ref=desired.AppRef(name="wc", namespace="apps", uid="u"), app=_wordcount(), executors=1
    ).driver
    assert pod is not None
    labels = pod["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert ports["metrics"] == desired.METRICS_PORT == int(env["STREAMAPP_METRICS_PORT"])
    assert "PodMonitor" not in [d["kind"] for d in _template()]  # off by default


def test_chart_ships_the_dashboard_as_an_optional_config_map() -> None:
    assert "ConfigMap" not in [d["kind"] for d in _template()]
    docs: list[Any] = _template("--set", "dashboard.enabled=true")
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["streamapp.json"])
    assert dashboard == json.loads((CHART / "files" / "dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) == len(dashboard["panels"]) >= 15
    # Prometheus names only: every app metric the driver defines appears on some panel.
    for name in (
        "records_in",
        "records_out",
        "consumer_lag",
        "batch_duration",
        "batch_phase",
        "state_rows",
        "state_bytes",
        "late_records",
        "records_skipped",
        "records_dead_lettered",
        "records_dropped",
        "errors",
    ):
        assert any(f"streamapp_{name}" in e for e in exprs), name


def _wordcount() -> Any:
    from streamapp.runtime import manifest

    text = (ROOT / "runtime" / "cli" / "examples" / "wordcount.yaml").read_text()
    return manifest.load_manifest(text)


def test_helm_test_hook_asks_the_operators_metrics_service() -> None:
    docs: list[Any] = _template("--set", "metrics.port=9191")
    job = next(d for d in docs if d["kind"] == "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "test"
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["securityContext"]["runAsNonRoot"] is True
    service = next(d for d in docs if d["kind"] == "Service")
    url = f"http://{service['metadata']['name']}.ops.svc:9191/metrics"
    assert url in pod["containers"][0]["args"][0]
    # No metrics Service: nothing to ask, no test.
    assert "Job" not in [d["kind"] for d in _template("--set", "metrics.service.enabled=false")]
