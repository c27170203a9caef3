"""The generated StreamApp CRD on a real API server: accepted, documented, validating, listed."""

from __future__ import annotations

import pathlib

import cluster
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
VALID = ROOT / "tests" / "runtime" / "manifest" / "valid"

BAD_FIELD = """\
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: bad-field}
spec:
  topology:
    streams: [{from: {topic: in}, steps: [{to: out}]}]
  checkpointLocaton: /tmp/x
"""

BAD_TYPE = """\
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: bad-type}
spec:
  topology:
    latency: fastest
    streams: [{from: {topic: in}}]
"""


@pytest.fixture(scope="module")
def crd_installed(streamapp_crd: cluster.Cluster) -> cluster.Cluster:
    return streamapp_crd


def test_kubectl_explain_documents_the_spec(crd_installed: cluster.Cluster) -> None:
    out = crd_installed.kubectl("explain", "streamapps.spec.topology.latency")
    assert "real-time trigger" in out
    assert "Write to a topic" in crd_installed.kubectl("explain", "sapp.spec.topology.streams.steps.to")


def test_valid_manifests_are_accepted_and_listed_with_printer_columns(crd_installed: cluster.Cluster) -> None:
    for manifest in sorted(VALID.glob("*.yaml")):
        crd_installed.kubectl("apply", "-f", str(manifest))
    listing = crd_installed.kubectl("get", "streamapps")
    assert listing.split("\n")[0].split() == ["NAME", "PHASE", "READY", "EXECUTORS", "LAG", "AGE"]
    assert {line.split()[0] for line in listing.strip().split("\n")[1:]} == {
        p.stem for p in VALID.glob("*.yaml")
    }
    assert "streamapps" in crd_installed.kubectl("api-resources", "--categories=streamapp")


@pytest.mark.parametrize(
    ("name", "body", "expected"),
    [
        ("unknown field", BAD_FIELD, 'unknown field "spec.checkpointLocaton"'),
        ("enum", BAD_TYPE, 'spec.topology.latency: Unsupported value: "fastest"'),
    ],
)
def test_the_api_server_rejects_schema_violations(
    crd_installed: cluster.Cluster, name: str, body: str, expected: str
) -> None:
    with pytest.raises(cluster.ClusterError) as err:
        crd_installed.kubectl("apply", "-f", "-", input=body)
    assert expected in str(err.value)
