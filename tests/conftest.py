"""How tests/ is shared out among pytest-xdist workers (``make test WORKERS=N``: ``-n N --dist loadgroup``).

Every worker has its own session fixtures (broker, Spark session); a test without a group goes to
whichever worker is free next. A group runs in one worker, in collection order, and the largest
groups start first:

- ``conformance``: the comparisons with Kafka Streams (test_conformance, test_randomized,
  test_vocabulary) run the oracle's JVM beside the worker's Spark for minutes, the heaviest CPU of
  the suite: one at a time, not side by side on two cores.
- ``secure-kafka``: the tests on the SASL_SSL and mutual-TLS broker (``secure_kafka``), which one
  worker then starts instead of each.
- a module whose tests share a module-scoped fixture (test_compiler_kafka's ``all_ops``, one Spark
  run read by ten tests) is a group of its own, so that the fixture runs once.

(e2e/conftest.py puts all of e2e/ in one group: one cluster.)
"""

from __future__ import annotations

import pathlib

import pytest

HERE = pathlib.Path(__file__).parent
CONFORMANCE = [
    HERE / "conformance" / f"{name}.py" for name in ("test_conformance", "test_randomized", "test_vocabulary")
]


def _group(item: pytest.Item) -> str | None:
    if item.path in CONFORMANCE:
        return "conformance"
    if "secure_kafka" in getattr(item, "fixturenames", ()):
        return "secure-kafka"
    fixtures = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(d.scope == "module" for defs in fixtures.values() for d in defs):
        return f"module:{item.path.relative_to(HERE)}"
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its hook has no order of its own)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE) and (group := _group(item)) is not None:
            item.add_marker(pytest.mark.xdist_group(group))
