"""executors = clamp(ceil(partitions / coresPerExecutor), min, max), unless replicas pins it."""

from __future__ import annotations

import pytest

from streamapp.operator import scaling
from streamapp.runtime.manifest import deployment


@pytest.mark.parametrize(
    ("partitions", "cores", "low", "high", "replicas", "expected"),
    [
        (12, 1, 1, 8, None, 8),  # capped at max
        (12, 2, 1, 8, None, 6),
        (12, 4, 1, 8, None, 3),
        (13, 4, 1, 8, None, 4),  # ceil: the 13th partition needs a slot
        (1, 1, 2, 8, None, 2),  # at least min
        (0, 1, 2, 8, None, 2),  # no partitions yet: min
        (None, 3, 1, 8, None, 1),  # Kafka not reached: min
        (64, 1, 1, 8, 5, 5),  # kubectl scale pins the count
        (6, 1, 1, 1, None, 1),
    ],
)
def test_executor_table(
    partitions: int | None, cores: int, low: int, high: int, replicas: int | None, expected: int
) -> None:
    bounds = deployment.Executors(min=low, max=high, cores_per_executor=cores, replicas=replicas)
    assert scaling.desired_executors(bounds, partitions) == expected


def test_total_partitions() -> None:
    assert scaling.total_partitions({"a": 3, "b": 5}) == 8
    assert scaling.total_partitions({}) == 0
    assert scaling.total_partitions(None) is None
