"""What the in-cluster driver reads from the environment the operator sets (no Spark needed)."""

from __future__ import annotations

import pytest

from streamapp.runtime import errors
from streamapp.runtime.cli import apps


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, {}),
        ({"STREAMAPP_STARTING_OFFSETS": "latest"}, {"startingOffsets": "latest"}),
        ({"STREAMAPP_STARTING_OFFSETS": "earliest"}, {"startingOffsets": "earliest"}),
        ({"STREAMAPP_STARTING_TIMESTAMP": "1767225600000"}, {"startingTimestamp": "1767225600000"}),
    ],
)
def test_a_reset_sets_where_a_new_checkpoint_starts(env: dict[str, str], expected: dict[str, str]) -> None:
    assert apps.starting_position(env) == expected


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"STREAMAPP_STARTING_OFFSETS": "beginning"}, "must be earliest or latest, not 'beginning'"),
        ({"STREAMAPP_STARTING_TIMESTAMP": "2026-01-01"}, "must be epoch milliseconds, not '2026-01-01'"),
    ],
)
def test_a_bad_starting_position_names_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(errors.StreamAppError, match=message):
        apps.starting_position(env)
