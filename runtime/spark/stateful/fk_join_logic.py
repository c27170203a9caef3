"""What Kafka Streams' foreign-key table-table join (KIP-213) does with each update, as pure Python.

Kafka Streams runs ``left.join(right, foreignKeyExtractor, joiner)`` in three places joined by
two internal topics (``KTableImpl.doJoinOnForeignKey``):

1. the left table's task (``SubscriptionSendProcessorSupplier``) turns each update ``(old, new)``
   of a left key into subscription messages, keyed by foreign key, with an instruction
   (:data:`DELETE_NO_PROPAGATE`, :data:`DELETE_PROPAGATE`, :data:`PROPAGATE_NULL`,
   :data:`PROPAGATE_IF_FOUND`): when the foreign key changes the old subscription is removed
   and a new one made; :func:`subscriptions` reproduces its decisions;
2. the right table's task keeps the subscriptions (``SubscriptionReceive``/``SubscriptionJoin``/
   ``ForeignTableJoin`` processors): a subscription is answered with the right value (result
   timestamp: the max of both sides' when the right key exists, else the left update's), and a
   right update answers every subscriber of its key (result timestamp: the right update's own);
   :class:`ForeignKeyJoin` is that task;
3. the left task again (``ResponseJoinProcessorSupplier``) drops a response whose hash of the
   left value is not the current value's (it is stale: the left key changed meanwhile) and
   applies the joiner, or emits a tombstone (no right value and an inner join, or the left key
   deleted).

StreamApp runs step 2 as if the subscription topic were instantaneous: a task of the right side
sees the subscription messages of each left partition in offset order, merged with its right
records by head timestamp (:func:`join_logic.merge_order`), so its subscription store always
matches the left table and step 3's hash check can only fail for a response that overtook a
newer one from another task. Each left update gets a version (a per-key counter) instead of a
hash; :func:`resolve` orders a key's responses by version, then by the order its task emitted
them, which is the order Kafka Streams' hash check lets through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from streamapp.runtime.spark.stateful import join_logic

__all__ = [
    "DELETE_NO_PROPAGATE",
    "DELETE_PROPAGATE",
    "PROPAGATE_IF_FOUND",
    "PROPAGATE_NULL",
    "ForeignKeyJoin",
    "Response",
    "resolve",
    "subscriptions",
]

#: Kafka Streams' SubscriptionWrapper.Instruction values.
DELETE_NO_PROPAGATE, DELETE_PROPAGATE, PROPAGATE_NULL, PROPAGATE_IF_FOUND = 0, 1, 2, 3

#: (left key, version, left value, right value, timestamp ms): one response, resolved (left and
#: right both null: a tombstone).
Response = tuple[Any, int, Any, Any, int]


def subscriptions(
    old_fk: Any, new_fk: Any, *, old: bool, new: bool, left_join: bool
) -> list[tuple[Any, int]]:
    """The ``(foreign key, instruction)`` messages of one left update (``old``/``new``: whether the
    old and the new value are not null; ``old_fk``/``new_fk`` extracted from them), in the order
    Kafka Streams sends them (an unsubscription first)."""
    if left_join:
        if not old and not new:
            return []
        out = []
        if old_fk is not None and old_fk != new_fk:
            out.append((old_fk, DELETE_NO_PROPAGATE))
        # Even for a delete or a null foreign key: the response (no right value) is the result.
        out.append((new_fk, PROPAGATE_NULL))
        return out
    if not new:
        return [(old_fk, DELETE_PROPAGATE)] if old_fk is not None else []
    if new_fk is None:  # skipped (dropped-records), but the old result must go
        return [(old_fk, DELETE_PROPAGATE)] if old_fk is not None else []
    if old_fk is None:
        return [(new_fk, PROPAGATE_IF_FOUND)]
    if old_fk != new_fk:
        return [(old_fk, DELETE_NO_PROPAGATE), (new_fk, PROPAGATE_NULL)]
    return [(new_fk, PROPAGATE_IF_FOUND)]


class ForeignKeyJoin:
    """One task of the right side: the right table and the subscriptions, keyed by foreign key.

    State: ``{"right": {fk: (value, ts)}, "subs": {fk: {left key: (left value, version)}}}``.
    A left record is ``(LEFT, fk, (instruction, left key, left value, version), ts, partition,
    offset)``; a right record ``(RIGHT, fk, value, ts, partition, offset)``.
    """

    def __init__(self, *, left_join: bool) -> None:
        self.left_join = left_join

    @staticmethod
    def new_state() -> dict[str, Any]:
        return {"right": {}, "subs": {}}

    def _response(self, key: Any, version: int, left: Any, right: Any, ts: int) -> Response:
        """``ResponseJoinProcessorSupplier`` once the hash matched: a result or a tombstone."""
        if right is None and (not self.left_join or left is None):
            return (key, version, None, None, ts)
        return (key, version, left, right, ts)

    def process(
        self, state: dict[str, Any], record: join_logic.Record, emit: Callable[[Response], None]
    ) -> None:
        side, fk, payload, ts = record[0], record[1], record[2], record[3]
        right: dict[Any, tuple[Any, int]] = state["right"]
        subs: dict[Any, dict[Any, tuple[Any, int]]] = state["subs"]
        if side == join_logic.RIGHT:
            if fk is None:
                return  # KTableSource and ForeignTableJoin skip a null key
            if payload is None:
                right.pop(fk, None)  # a delete is forwarded even when the key did not exist
            else:
                right[fk] = (payload, ts)
            for key, (left, version) in sorted(subs.get(fk, {}).items(), key=lambda kv: str(kv[0])):
                emit(self._response(key, version, left, payload, ts))
            return
        instruction, key, left, version = payload
        if fk is not None:
            if instruction in (DELETE_NO_PROPAGATE, DELETE_PROPAGATE):
                own = subs.get(fk, {})
                own.pop(key, None)
                if not own:
                    subs.pop(fk, None)
            else:
                subs.setdefault(fk, {})[key] = (left, version)
        found = right.get(fk) if fk is not None else None
        result_ts = ts if found is None else max(ts, found[1])
        if instruction == DELETE_PROPAGATE:
            emit((key, version, None, None, result_ts))
        elif instruction == PROPAGATE_NULL:
            emit(self._response(key, version, left, None if found is None else found[0], result_ts))
        elif instruction == PROPAGATE_IF_FOUND and found is not None:
            emit(self._response(key, version, left, found[0], result_ts))


def resolve(responses: Iterable[tuple[Response, int]], latest: dict[Any, int]) -> Iterator[Response]:
    """The responses ``(response, emitted)`` of left keys in the order their results are written:
    per key by version, then by the order their task emitted them (``emitted``). A key's
    responses of one version all come from one task (its foreign key's); those of an older
    version were emitted before its task saw the newer one, so none is stale in that order.

    ``latest`` (the results step's state, updated): each key's newest version written so far. A
    response of an older one is stale and dropped, as Kafka Streams' hash check drops it: a
    message held back behind its right partition (:mod:`.frontier`) is answered a micro-batch
    after a newer version's."""
    ordered = sorted(responses, key=lambda r: (str(r[0][0]), r[0][1], r[1]))
    for response, _ in ordered:
        key, version = response[0], response[1]
        seen = key if isinstance(key, (str, bytes, int, float)) else repr(key)
        if version >= latest.get(seen, version):
            latest[seen] = version
            yield response
