"""Manifests: invalid ones give exactly the expected problems; valid ones load and round-trip."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from streamapp.runtime import manifest

HERE = pathlib.Path(__file__).parent
INVALID = sorted((HERE / "invalid").glob("*.yaml"))
VALID = sorted((HERE / "valid").glob("*.yaml"))


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_manifest_reports_exactly_the_expected_problems(path: pathlib.Path) -> None:
    expected = path.with_suffix(".expected").read_text().splitlines()
    problems = [str(p) for p in manifest.validate_manifest(path)]
    assert problems == expected[:-1]
    assert expected[-1] == f"{len(problems)} problem(s)"


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_valid_manifest_round_trips_through_yaml(path: pathlib.Path) -> None:
    assert manifest.validate_manifest(path) == []
    topology = manifest.build_topology(manifest.load_manifest(path))
    again = manifest.build_topology(manifest.load_manifest(manifest.to_manifest_yaml(topology, name="x")))
    assert again == topology


def test_cli_validate_lists_every_problem_and_exits_non_zero() -> None:
    bad = HERE / "invalid" / "several-problems.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "streamapp.runtime.cli", "validate", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.count(str(bad)) == 4  # three problems and the count
    assert "spec.topology.streams[1].from.stream: unknown stream 'nope'" in proc.stderr


def test_validate_never_imports_pyspark() -> None:
    code = (
        "import sys; from streamapp.runtime import manifest; "
        f"assert manifest.validate_manifest(open({str(VALID[0])!r}).read()) == []; "
        "import streamapp.runtime, streamapp.runtime.topology, streamapp.runtime.kafka.admin; "
        "import streamapp.runtime.expressions.check, streamapp.runtime.serdes, streamapp.runtime.errors; "
        "manifest.openapi_schema(); "
        "print('pyspark' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
