"""Kafka Streams' foreign-key join (KIP-213) update by update, without Spark: the subscription
messages of a left update, the right side's task, and the order results are written in."""

from __future__ import annotations

from typing import Any

import pytest

from streamapp.runtime.spark.stateful import fk_join_logic as fk
from streamapp.runtime.spark.stateful.join_logic import LEFT, RIGHT

#: A leftJoin row that leaves foreign key a for none: unsubscribed, and answered with no right row.
_LEFT_UNSUBSCRIBED = [("a", fk.DELETE_NO_PROPAGATE), (None, fk.PROPAGATE_NULL)]


@pytest.mark.parametrize(
    ("old_fk", "new_fk", "old", "new", "inner", "left"),
    [
        # insert: subscribe; an inner join answers only when the right row exists
        (None, "a", False, True, [("a", fk.PROPAGATE_IF_FOUND)], [("a", fk.PROPAGATE_NULL)]),
        # update, same foreign key
        ("a", "a", True, True, [("a", fk.PROPAGATE_IF_FOUND)], [("a", fk.PROPAGATE_NULL)]),
        # re-pointed: the old subscription goes, silently; the new one always answers
        (
            "a", "b", True, True,
            [("a", fk.DELETE_NO_PROPAGATE), ("b", fk.PROPAGATE_NULL)],
            [("a", fk.DELETE_NO_PROPAGATE), ("b", fk.PROPAGATE_NULL)],
        ),
        # the new value has a null foreign key: the inner result goes; the left one loses its right
        ("a", None, True, True, [("a", fk.DELETE_PROPAGATE)], _LEFT_UNSUBSCRIBED),
        (None, None, True, True, [], [(None, fk.PROPAGATE_NULL)]),
        (None, None, False, True, [], [(None, fk.PROPAGATE_NULL)]),
        # deleted
        ("a", None, True, False, [("a", fk.DELETE_PROPAGATE)], _LEFT_UNSUBSCRIBED),
        (None, None, True, False, [], [(None, fk.PROPAGATE_NULL)]),
        (None, None, False, False, [], []),
    ],
)  # fmt: skip
def test_subscriptions_are_those_kafka_streams_sends(
    old_fk: Any, new_fk: Any, old: bool, new: bool, inner: list[Any], left: list[Any]
) -> None:
    assert fk.subscriptions(old_fk, new_fk, old=old, new=new, left_join=False) == inner
    assert fk.subscriptions(old_fk, new_fk, old=old, new=new, left_join=True) == left


def _run(processor: fk.ForeignKeyJoin, records: list[tuple[Any, ...]]) -> list[fk.Response]:
    """Records (side, fk, payload, ts) in processing order."""
    state, out = processor.new_state(), []
    for offset, (side, key, payload, ts) in enumerate(records):
        processor.process(state, (side, key, payload, ts, 0, offset), out.append)
    return out


def test_a_repointed_row_hears_nothing_more_from_its_old_foreign_key() -> None:
    out = _run(
        fk.ForeignKeyJoin(left_join=False),
        [
            (RIGHT, "a", "A1", 5),
            (LEFT, "a", (fk.PROPAGATE_IF_FOUND, "k", "v1", 1), 10),  # max(10, 5)
            (RIGHT, "b", "B1", 20),  # nobody points at b yet
            (LEFT, "a", (fk.DELETE_NO_PROPAGATE, "k", "v2", 2), 30),
            (LEFT, "b", (fk.PROPAGATE_NULL, "k", "v2", 2), 30),
            (RIGHT, "a", "A2", 40),  # k left a: no stale result
            (RIGHT, "b", "B2", 35),  # the right update's own timestamp
            (RIGHT, "b", None, 50),  # inner join: the result goes
        ],
    )
    assert out == [
        ("k", 1, "v1", "A1", 10),
        ("k", 2, "v2", "B1", 30),
        ("k", 2, "v2", "B2", 35),
        ("k", 2, None, None, 50),
    ]


def test_a_left_join_keeps_the_row_with_a_null_right_side_until_the_row_goes() -> None:
    out = _run(
        fk.ForeignKeyJoin(left_join=True),
        [
            (LEFT, "a", (fk.PROPAGATE_NULL, "k", "v1", 1), 10),  # no right row: right null
            (RIGHT, "a", "A1", 20),
            (RIGHT, "a", None, 30),
            (RIGHT, "z", None, 31),  # deleting a right row nobody points at: nothing
            (LEFT, "a", (fk.DELETE_NO_PROPAGATE, "k", None, 2), 40),
            (LEFT, None, (fk.PROPAGATE_NULL, "k", None, 2), 40),  # deleted: a tombstone
        ],
    )
    assert out == [
        ("k", 1, "v1", None, 10),
        ("k", 1, "v1", "A1", 20),
        ("k", 1, "v1", None, 30),
        ("k", 2, None, None, 40),
    ]


def test_an_inner_delete_is_stamped_with_the_max_of_both_sides() -> None:
    out = _run(
        fk.ForeignKeyJoin(left_join=False),
        [
            (LEFT, "a", (fk.PROPAGATE_IF_FOUND, "k", "v1", 1), 10),  # no right row: nothing
            (RIGHT, "a", "A1", 50),
            (LEFT, "a", (fk.DELETE_PROPAGATE, "k", None, 2), 20),  # SubscriptionJoin: max(20, 50)
        ],
    )
    assert out == [("k", 1, "v1", "A1", 50), ("k", 2, None, None, 50)]


def test_results_are_written_by_version_so_a_late_response_of_the_old_foreign_key_is_not_last() -> None:
    # Task b answered the re-point (version 2) before task a's answer for version 1 reached the
    # results step: written in emission order, k's table would end with the stale v1 result.
    responses = [
        (("k", 2, "v2", "B1", 30), 0),
        (("j", 1, "w1", "B1", 30), 1),
        (("k", 1, "v1", "A2", 25), 0),
        (("k", 1, "v1", "A3", 26), 1),
    ]
    ordered = list(fk.resolve(responses, {}))
    assert [r for r in ordered if r[0] == "k"] == [
        ("k", 1, "v1", "A2", 25),
        ("k", 1, "v1", "A3", 26),
        ("k", 2, "v2", "B1", 30),
    ]
    assert ("j", 1, "w1", "B1", 30) in ordered


def test_a_response_older_than_a_key_s_written_version_is_dropped_in_a_later_batch() -> None:
    # Version 1's message waited behind its right partition; version 2's result was written in
    # the batch before. Kafka Streams' hash check drops the stale answer (the randomized suite,
    # seed 10498: the table ended on the older value).
    latest: dict[object, int] = {}
    assert list(fk.resolve([(("k", 2, "v2", "B1", 30), 0)], latest)) == [("k", 2, "v2", "B1", 30)]
    later = [(("k", 1, "v1", "A1", 25), 0), (("k", 2, "v2", "B2", 40), 1), (("j", 1, "w1", "A1", 25), 2)]
    assert list(fk.resolve(later, latest)) == [("j", 1, "w1", "A1", 25), ("k", 2, "v2", "B2", 40)]
    assert latest == {"k": 2, "j": 1}
