"""Invalid specs are reported by field path, the way the Degraded condition shows them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from streamapp.operator import errors, reconcile, validation


def _problems(spec: dict[str, Any], name: str = "wordcount") -> list[str]:
    return [str(p) for p in validation.problems(name=name, namespace="apps", spec=spec)]


def test_the_sample_is_valid(spec: dict[str, Any]) -> None:
    assert _problems(spec) == []


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "bad expression",
        lambda s: s["topology"]["streams"][0]["steps"][1].update(filter="value !!= ''"),
        "spec.topology.streams[0].steps[1].filter: not a valid Spark SQL expression",
    ),
    (
        "unknown operation",
        lambda s: s["topology"]["streams"][0]["steps"].insert(0, {"fliter": "true"}),
        "spec.topology.streams[0].steps[0].fliter: unknown operation 'fliter'",
    ),
    ("no broker", lambda s: s.pop("kafka"), "spec.kafka.bootstrapServers: required in a cluster"),
    (
        "no checkpoint",
        lambda s: s.pop("checkpointLocation"),
        "spec.checkpointLocation: required in a cluster",
    ),
    (
        "operator-owned Spark setting",
        lambda s: s.update(sparkConf={"spark.executor.instances": "3"}),
        'spec.sparkConf["spark.executor.instances"]: set by the operator',
    ),
    (
        "bounds upside down",
        lambda s: s["deployment"]["executors"].update(min=5, max=2),
        "spec.deployment.executors: min (5) is greater than max (2)",
    ),
    (
        "reset without its timestamp",
        lambda s: s["deployment"].update(reset={"id": "r1", "to": "timestamp"}),
        "spec.deployment.reset: timestamp is required with to: timestamp",
    ),
    (
        "memory in the wrong syntax",
        lambda s: s["deployment"].update(resources={"driver": {"memory": "2GiB"}}),
        "spec.deployment.resources.driver.memory: String should match pattern",
    ),
    (
        "typo in deployment",
        lambda s: s["deployment"].update(replica=3),
        "spec.deployment.replica: unknown field 'replica'",
    ),
    (
        "unknown upgrade policy",
        lambda s: s["deployment"].update(upgradePolicy="blue-green"),
        "spec.deployment.upgradePolicy: Input should be 'rolling' or 'recreate'",
    ),
    (
        "a progress deadline with recreate",
        lambda s: s["deployment"].update(progressDeadline="2m", upgradePolicy="recreate"),
        "spec.deployment: progressDeadline applies to upgradePolicy: rolling",
    ),
    (
        "a progress deadline too short",
        lambda s: s["deployment"].update(progressDeadline="10s", upgradePolicy="rolling"),
        "spec.deployment.progressDeadline: '10s' is shorter than 30s",
    ),
    (
        "a progress deadline that is no duration",
        lambda s: s["deployment"].update(progressDeadline="soon", upgradePolicy="rolling"),
        "spec.deployment.progressDeadline: not a duration: 'soon'",
    ),
]


@pytest.mark.parametrize(("change", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_specs_name_the_field(
    spec: dict[str, Any], change: Callable[[dict[str, Any]], None], expected: str
) -> None:
    change(spec)
    found = _problems(spec)
    assert any(p.startswith(expected) for p in found), found


@pytest.mark.parametrize("name", ["WordCount", "a" * 43, "9lives"])
def test_names_the_derived_objects_cannot_carry(spec: dict[str, Any], name: str) -> None:
    (problem,) = _problems(spec, name=name)
    assert problem.startswith("metadata.name: ")


def test_parse_raises_with_every_problem(spec: dict[str, Any]) -> None:
    spec.pop("kafka")
    spec.pop("checkpointLocation")
    with pytest.raises(errors.InvalidSpecError) as caught:
        validation.parse(name="wordcount", namespace="apps", spec=spec)
    assert [p.path for p in caught.value.problems] == [
        "spec.kafka.bootstrapServers",
        "spec.checkpointLocation",
    ]


def test_functions_are_checked_for_form_and_never_imported_by_the_operator(
    spec: dict[str, Any],
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    ref: Any,
    fake_cluster: Any,
    make_probe: Any,
) -> None:
    """A function lives in the app's runtime image: the operator cannot import it, and must not
    run a user's module (its code would run with the operator's rights)."""
    (tmp_path / "user_logic.py").write_text("raise SystemExit('the operator imported user code')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    steps = spec["topology"]["streams"][0]["steps"]
    steps[1] = {"filter": {"function": "user_logic:keep"}}
    steps.insert(0, {"peek": {"function": "not_installed_here.audit:record"}})
    assert _problems(spec) == []
    outcome = reconcile.reconcile(
        ref=ref, spec=spec, generation=1, previous={}, cluster=fake_cluster, probe=make_probe({}), now="t"
    )
    assert outcome.error is None and outcome.status["phase"] == "Pending"
    steps[0] = {"peek": {"function": "print"}}  # the form is still checked
    assert _problems(spec) == [
        "spec.topology.streams[0].steps[0].peek.function: a function reference is "
        "'package.module:function', not 'print'"
    ]
