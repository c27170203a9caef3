"""The CRD is generated from the models and committed; a model change without `make crds` fails."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import yaml

from streamapp.operator import _crdgen

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "streamapp.io_streamapps.yaml"


def test_committed_crd_matches_the_models() -> None:
    assert CRD.read_text() == _crdgen.render(), "crds/ is stale: run `make crds`"


def test_chart_carries_the_same_crd() -> None:
    chart_crd = ROOT / _crdgen.CHART_COPY
    assert chart_crd.read_text() == _crdgen.render(), f"{chart_crd} is stale: run `make crds`"


def test_scale_paths_exist_in_the_schema() -> None:
    schema = _crdgen.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path in _crdgen.SCALE.values():
        node = schema
        for part in path.strip(".").split("."):
            node = node["properties"][part]
        assert node["type"] == ("string" if path.endswith("selector") else "integer"), path


def test_crd_is_structural_and_documented() -> None:
    doc = yaml.safe_load(CRD.read_text())
    version = doc["spec"]["versions"][0]
    columns = version["additionalPrinterColumns"]
    assert [c["name"] for c in columns if not c.get("priority")] == [
        "Phase",
        "Ready",
        "Executors",
        "Lag",
        "Age",
    ]
    ready = next(c for c in columns if c["name"] == "Ready")
    assert ready["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert doc["spec"]["names"]["shortNames"] == ["sapp"]
    assert doc["spec"]["names"]["categories"] == ["streamapp"]
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.deployment.executors.replicas",
        "statusReplicasPath": ".status.executors.ready",
        "labelSelectorPath": ".status.selector",
    }

    def walk(node: dict[str, object], path: str) -> None:
        assert "$ref" not in node and "anyOf" not in node, path
        if path.count(".") > 1 and not path.endswith("[]"):  # every field says what it is
            assert node.get("description"), f"{path} has no description"
        assert (
            node.get("type")
            or node.get("x-kubernetes-preserve-unknown-fields")
            or node.get("x-kubernetes-int-or-string")
        ), f"{path} has no type"
        for name, sub in (node.get("properties") or {}).items():  # type: ignore[attr-defined]
            walk(sub, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")  # type: ignore[arg-type]

    schema = version["schema"]["openAPIV3Schema"]
    walk(schema["properties"]["spec"], "spec")
    walk(schema["properties"]["status"], "status")


def test_operator_never_imports_pyspark() -> None:
    modules = ", ".join(
        f"streamapp.operator.{p.stem}" for p in (ROOT / "operator").glob("*.py") if p.stem != "__init__"
    )
    code = (
        f"import sys, {modules}; print('pyspark' in sys.modules or 'streamapp.runtime.spark' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
