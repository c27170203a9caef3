"""Random topologies and inputs, drawn from a seed: the randomized half of the conformance suite.

Why it exists: hand-picked scenarios only probe what their authors thought of. A :class:`Case` is
one topology (a manifest's ``streams:``, built from the supported vocabulary: stateless steps,
tables, groupings, count/reduce/aggregate, every window kind with grace and suppress, cogroup,
every join kind, repartition and merge) plus its seeded input and how to run it (partitions,
``maxOffsetsPerTrigger``, trigger). :func:`case` draws one from a seed alone, so a seed is a
complete bug report. User logic comes only from the oracle's vocabulary (:func:`oracle.vocabulary`),
picked by role and input type.

Inputs carry what breaks stream processors: disorder within and beyond grace, equal timestamps,
tombstones, null keys and values, a skewed key distribution. A topology that changes keys before
a stateful step runs on one partition: Kafka Streams' result then depends on how upstream tasks
interleave their writes to the repartition topic, which no single answer models.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import yaml

from streamapp.runtime.kafka import admin

__all__ = ["FAMILIES", "T0", "Case", "Vocab", "case"]

T0 = 1_700_000_000_000 - 1_700_000_000_000 % 60_000
FAMILIES = ("stateless", "table", "aggregate", "windowed", "join", "cogroup")
KEYS = tuple("abcdef")
TRIGGERS = ("available-now", "processing-time")


@dataclasses.dataclass(frozen=True)
class Case:
    seed: int
    family: str
    streams: list[dict[str, Any]]  # the manifest's `streams:`; topics in0, in1 … and out
    inputs: list[list[admin.Record]]  # per input topic
    partitions: int
    mode: str  # compare.TABLE or compare.STREAM
    value_serde: str  # of `out`
    batch: int  # maxOffsetsPerTrigger of every source but global tables
    trigger: str  # available-now or processing-time
    windowed: bool = False  # a windowed aggregation: its late records are compared too

    def manifest(self) -> str:
        doc = {
            "apiVersion": "streamapp.io/v1alpha1",
            "kind": "StreamApp",
            "metadata": {"name": f"fuzz-{self.seed}"},
            "spec": {"topology": {"defaults": {"keySerde": "string", "valueSerde": "string"},
                                  "streams": self.streams}},
        }  # fmt: skip
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)

    def describe(self) -> str:
        """The case as a reader wants it in a report: the seed, how it ran, the steps."""
        head = (
            f"seed {self.seed} ({self.family}): {self.partitions} partition(s), maxOffsetsPerTrigger "
            f"{self.batch}, {self.trigger} trigger, inputs of {[len(i) for i in self.inputs]} records"
        )
        return head + "\n" + yaml.safe_dump(self.streams, sort_keys=False, allow_unicode=True)


_TYPES = {"bigint": "long"}
_READS_KEY = re.compile(r"\bkey\b")
_CASTS_VALUE = re.compile(r"cast\(\s*(cast\(\s*)?value\b", re.IGNORECASE)
_FUNCTION = re.compile(r"[\w.]+:[\w.]+")  # a Python function's import path, not an expression


class Vocab:
    """The oracle's vocabulary, by role and input type."""

    def __init__(
        self,
        entries: Sequence[Mapping[str, Any]],
        foreign_keys: Mapping[str, Mapping[Any, Any]] | None = None,
    ) -> None:
        #: Each foreign-key extractor's foreign key per input value (the digits and null), when the
        #: oracle has evaluated them (:func:`features` then sees re-pointed foreign keys).
        self.foreign_keys = foreign_keys or {}
        self._by: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for entry in entries:
            if _FUNCTION.fullmatch(entry["text"]):
                continue  # Python functions: the draws below name the few they use
            # The table names types as Spark does (bigint); serdes say long. No input type: any.
            e = {**entry, "returns": _TYPES.get(entry["returns"], entry["returns"])}
            for kind in [_TYPES.get(e["in"], e["in"])] if e["in"] else ["string", "long"]:
                self._by.setdefault((e["role"], kind), []).append(e)
        self.texts = {e["text"] for e in entries}

    def pick(
        self,
        rng: random.Random,
        role: str,
        kind: str = "string",
        returns: str | None = None,
        *,
        reads_key: bool = True,
        numeric: bool = True,
    ) -> Mapping[str, Any]:
        """An entry of ``role`` over ``kind`` values; ``numeric``: the text values are still decimal
        digits (else no entry that casts them: a malformed cast fails the query, ANSI SQL)."""
        options = [
            e
            for e in self._by.get((role, kind), [])
            if (returns is None or e["returns"] == returns)
            and (reads_key or not _READS_KEY.search(e["text"]))
            and (numeric or kind != "string" or not _CASTS_VALUE.search(e["text"]))
        ]
        if not options:
            raise LookupError(f"the vocabulary has no {role} over {kind} values returning {returns}")
        return rng.choice(sorted(options, key=lambda e: e["text"]))

    def has(self, text: str) -> bool:
        return text in self.texts


# -- input -----------------------------------------------------------------------------------------


def records(
    rng: random.Random, n: int, partitions: int, *, grace: int = 5_000, keys: Sequence[str] = KEYS
) -> list[admin.Record]:
    """``n`` records: keys skewed toward one hot key, 6 % null keys, 8 % null values (tombstones
    for a table), decimal digits as values; timestamps that advance 0-2.5 s in quarter seconds
    (0 often: equal timestamps), some out of order within ``grace`` and some far beyond it. A key
    goes where Kafka's default partitioner puts it; a null key to a drawn one of ``partitions``."""
    weights = [rng.choice((1, 1, 2, 8)) for _ in keys]
    clock = T0 + 1_000 * rng.randrange(10)
    out = []
    for _ in range(n):
        clock += 250 * rng.choice((0, 0, 1, 2, 4, 6, 10))
        roll = rng.random()
        back = (
            250 * rng.randrange(grace // 250 + 2)  # around the grace limit, on it now and then
            if roll < 0.15
            else 250 * rng.randrange(60, 161)  # 15-40 s: beyond every grace
            if roll < 0.2
            else 0
        )
        key = None if rng.random() < 0.06 else rng.choices(keys, weights)[0]
        value = None if rng.random() < 0.08 else str(rng.randrange(10))
        out.append(
            admin.Record(
                key=None if key is None else key.encode(),
                value=None if value is None else value.encode(),
                timestamp=max(T0, clock - back),
                # Kafka's partitioner for a key; a null key's partition drawn here (the producer's
                # would be random: the case would not be a function of its seed).
                partition=None if key is not None else rng.randrange(partitions),
            )
        )
    return out


def partition(record: admin.Record, partitions: int) -> int:
    """Where a record goes: its own partition, else Kafka's default partitioner (murmur2 of the
    key bytes, as admin.produce's producer and Kafka's Java client place it)."""
    if record.partition is not None:
        return record.partition
    assert record.key is not None, "a record with a null key needs its partition"
    return (_murmur2(record.key) & 0x7FFFFFFF) % partitions


def _murmur2(data: bytes) -> int:
    m, h = 0x5BD1E995, (0x9747B28C ^ len(data)) & 0xFFFFFFFF
    whole = len(data) // 4 * 4
    for i in range(0, whole, 4):
        k = (int.from_bytes(data[i : i + 4], "little") * m) & 0xFFFFFFFF
        k = ((k ^ (k >> 24)) * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = data[whole:]
    if tail:
        h = ((h ^ int.from_bytes(tail, "little")) * m) & 0xFFFFFFFF
    h = ((h ^ (h >> 13)) * m) & 0xFFFFFFFF
    return h ^ (h >> 15)


def untie_first(topics: Sequence[Sequence[admin.Record]], partitions: int) -> list[list[admin.Record]]:
    """The topics with each partition's first record of a later topic moved 125 ms off a tie with
    an earlier topic's first record there. A task's very first pick between co-partitioned topics
    whose heads tie is Kafka Streams' consumer's fetch order (which partition it buffered first),
    not a rule of its own; every later tie goes to the partition that waited longer, and stays."""
    firsts: dict[int, set[int]] = {}
    out = []
    for records in topics:
        seen: set[int] = set()
        moved = []
        for record in records:
            r, p = record, partition(record, partitions)
            if p not in seen:
                seen.add(p)
                assert r.timestamp is not None
                if r.timestamp in firsts.get(p, set()):
                    r = dataclasses.replace(r, timestamp=r.timestamp + 125)
                firsts.setdefault(p, set()).add(r.timestamp)
            moved.append(r)
        out.append(moved)
    return out


# -- topology ----------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Chain:
    """A stream being drawn: its steps and what its records are now."""

    steps: list[dict[str, Any]]
    value: str = "string"  # the value's type: string or long
    rekeyed: bool = False  # a key change since the source (a stateful step repartitions)
    numeric: bool = True  # string values are still the input's decimal digits

    def pick(self, rng: random.Random, vocab: Vocab, role: str, **kwargs: Any) -> Mapping[str, Any]:
        return vocab.pick(rng, role, self.value, numeric=self.numeric, **kwargs)

    def map_values(self, entry: Mapping[str, Any]) -> None:
        """Record what a value mapper leaves: its type; digits only from a long made text."""
        self.numeric = self.value == "long" and entry["returns"] == "string"
        self.value = entry["returns"]


def _logic(entry: Mapping[str, Any]) -> str:
    return str(entry["text"])


def _stateless(rng: random.Random, vocab: Vocab, chain: _Chain, n: int, *, keys: bool = True) -> None:
    """Up to ``n`` stateless steps onto ``chain`` (key changes only if ``keys``)."""
    for _ in range(rng.randrange(n + 1)):
        kinds = ["filter", "filterNot", "mapValues"]
        if chain.value == "string":
            kinds += ["flatMapValues"]
            if keys:
                kinds += ["selectKey", "map", "flatMap", "repartition"]
        kind = rng.choice(kinds)
        if kind in ("filter", "filterNot"):
            chain.steps.append({kind: _logic(chain.pick(rng, vocab, "predicate"))})
        elif kind == "mapValues":
            entry = chain.pick(rng, vocab, "value")
            chain.steps.append({"mapValues": _logic(entry)})
            chain.map_values(entry)
        elif kind == "flatMapValues":
            chain.steps.append({"flatMapValues": _logic(chain.pick(rng, vocab, "values"))})
            chain.numeric = False
        elif kind == "selectKey":
            chain.steps.append({"selectKey": _logic(chain.pick(rng, vocab, "key"))})
            chain.rekeyed = True
        elif kind == "map":
            value = chain.pick(rng, vocab, "value", returns="string")
            chain.steps.append(
                {"map": {"key": _logic(chain.pick(rng, vocab, "key")), "value": _logic(value)}}
            )
            chain.map_values(value)
            chain.rekeyed = True
        elif kind == "flatMap":
            chain.steps.append({"flatMap": _logic(chain.pick(rng, vocab, "pairs"))})
            chain.rekeyed = True
        else:
            chain.steps.append({"repartition": {}})
            chain.rekeyed = True  # a repartition topic: its order depends on the upstream tasks


def _windows(
    rng: random.Random, kinds: Sequence[str] = ("tumbling", "hopping", "sliding", "session")
) -> dict[str, Any]:
    kind = rng.choice(kinds)
    spec: dict[str, Any] = {
        "tumbling": {"tumbling": rng.choice(("5s", "10s"))},
        "hopping": {"hopping": {"size": "10s", "advance": rng.choice(("3s", "4s", "5s"))}},
        "sliding": {"sliding": rng.choice(("4s", "6s"))},
        "session": {"session": rng.choice(("2s", "3s"))},
    }[kind]
    spec["grace"] = rng.choice(("0s", "2s", "5s"))
    return spec


def _aggregation(
    rng: random.Random, vocab: Vocab, chain: _Chain, *, table: bool, windowed: bool, reduce: bool = True
) -> str:
    """An aggregation onto a grouped ``chain``; returns the output value serde. A windowed reduce
    (only if ``reduce``) gets a null-value filter in front of its grouping. Session windows take
    no Python aggregator: Kafka Streams needs a session merger, which a manifest does not give."""
    session = windowed and "session" in chain.steps[-1]["windowedBy"]
    ops = ["count", "sum", *(["functions"] if not session else []), *(["reduce"] if reduce else [])]
    if chain.value != "string":
        ops = ["count", "sum"]
    elif not chain.numeric:
        ops = ["count"]  # the functions and sums parse the digits
    op = rng.choice(ops)
    if op == "count":
        chain.steps.append({"count": {}})
        return "long"
    if op == "sum":
        expr = chain.pick(rng, vocab, "value", returns="long")
        chain.steps.append({"aggregate": {"fn": "sum", "expr": _logic(expr)}})
        return "long"
    if op == "functions":
        spec = {"initializer": "conformance_functions:zero", "adder": "conformance_functions:add",
                "returns": "bigint"}  # fmt: skip
        if table:
            spec["subtractor"] = "conformance_functions:subtract"
        chain.steps.append({"aggregate": spec})
        return "long"
    if table:
        chain.steps.append({"reduce": {"reducer": "conformance_functions:sum_text",
                                       "subtractor": "conformance_functions:minus_text"}})  # fmt: skip
    else:
        if windowed:  # a windowed reduce hands null values to the reducer, as Kafka Streams does
            chain.steps.insert(-2, {"filter": "value is not null"})
        chain.steps.append({"reduce": {"reducer": "conformance_functions:keep_larger"}})
    return "string"


def _tail(rng: random.Random, vocab: Vocab, chain: _Chain, serde: str, *, windowed: bool = False) -> str:
    """toStream, maybe one value step, and the sink; returns the sink's value serde. (A windowed
    key is a struct in StreamApp: no step after a windowed table reads it.)"""
    chain.steps.append({"toStream": {}})
    if rng.random() < 0.3:
        entry = vocab.pick(
            rng, "value", serde, reads_key=not windowed, numeric=serde != "string" or chain.numeric
        )
        chain.steps.append({"mapValues": _logic(entry)})
        serde = entry["returns"]
    chain.steps.append({"to": {"topic": "out", "valueSerde": serde}})
    return serde


def case(seed: int, vocab: Vocab, family: str | None = None) -> Case:
    """The case ``seed`` gives (its family too, unless ``family`` is given)."""
    rng = random.Random(seed)
    family = family or FAMILIES[seed % len(FAMILIES)]  # consecutive seeds cover every family
    draw = {
        "stateless": _draw_stateless,
        "table": _draw_table,
        "aggregate": _draw_aggregate,
        "windowed": _draw_windowed,
        "join": _draw_join,
        "cogroup": _draw_cogroup,
    }[family]
    streams, mode, serde, inputs, rekeyed, windowed = draw(rng, vocab)
    partitions = 1 if rekeyed else rng.randrange(1, 5)
    return Case(
        seed=seed,
        family=family,
        streams=streams,
        inputs=untie_first(
            [records(rng, rng.randrange(30, 121), partitions) for _ in range(inputs)], partitions
        ),
        partitions=partitions,
        mode=mode,
        value_serde=serde,
        batch=rng.choice((7, 19, 45, 1000)),
        trigger=rng.choice(TRIGGERS),
        windowed=windowed,
    )


def features(case: Case, foreign_keys: Mapping[str, Mapping[Any, Any]] | None = None) -> set[str]:
    """What a case exercises, for choosing a fixed seed set that covers each: its family, window
    kind with its emit mode (and suppress, and whether the aggregation is a Python function or
    declarative), join kind with its operator, a table re-grouped, a table's key deleted for good,
    several partitions, and the exact edges of time: a record that lands on a window's grace
    limit (for a Python function and a declarative aggregation: two engines), a stream-stream
    join pair exactly a window bound apart (:func:`_edges`), a left key re-pointed from a foreign
    key the right table has to one it never has again (given ``foreign_keys``, as
    :attr:`Vocab.foreign_keys`)."""
    out = {case.family, f"{case.family}/{'several' if case.partitions > 1 else 'one'} partition"}
    edges: set[str] = set()
    for stream in case.streams:
        source = stream["from"]
        if source.get("as") == "table" and _deleted_for_good(case.inputs[int(source["topic"][2:])]):
            out.add(f"{case.family}/a table's key deleted for good")
        for step in stream.get("steps", []):
            op, spec = next(iter(step.items()))
            if op == "windowedBy":
                kind = next(k for k in ("tumbling", "hopping", "sliding", "session") if k in spec)
                out.add(f"window/{kind}/{spec.get('emit', 'updates')}")
                edges = _edges(case, kind, spec)
            elif op == "suppress":
                out.add("suppress")
            elif op in ("aggregate", "reduce", "count", "cogroup"):
                python = op in ("reduce", "cogroup") or (op == "aggregate" and "adder" in spec)
                engine = "python" if python else "declarative"
                if op != "cogroup":
                    out.add(f"{case.family}/{op}/{engine}")
                out |= {f"{edge}/{engine}" for edge in edges}  # the edges of its windows
                edges = set()
            elif op in ("join", "leftJoin", "outerJoin"):
                right = next(s["from"] for s in case.streams if s.get("name") == spec["with"])
                kind = (
                    "foreign-key" if "foreignKey" in spec
                    else "global" if right.get("as") == "globalTable"
                    else "stream-stream" if "windows" in spec
                    else "table-table" if source.get("as") == "table"
                    else "stream-table"
                )  # fmt: skip
                out.add(f"join/{kind}/{op}")
                if kind == "stream-stream":
                    out |= _edges(case, "join", spec["windows"])
                fk = (foreign_keys or {}).get(spec.get("foreignKey", ""))
                if fk and _repointed_to_nothing(case, fk):
                    out.add("join/foreign-key/re-pointed to a key the right table lacks for good")
            elif op == "groupBy" and source.get("as") == "table":
                out.add("table/groupBy")
    return out


def _repointed_to_nothing(case: Case, foreign_key: Mapping[Any, Any]) -> bool:
    """Whether a left row's foreign key moves from one the right table has to one it does not
    have then nor later (Kafka Streams then deletes the join result). Both tables in timestamp
    order, as a foreign-key join's tasks roughly see them."""
    events = sorted(
        [(r.timestamp or 0, side, r) for side, records in enumerate(case.inputs[:2]) for r in records],
        key=lambda e: (e[0], e[1]),
    )
    right: set[bytes] = set()
    pointed: dict[bytes, Any] = {}
    pending: list[tuple[bytes, str]] = []  # (left key, foreign key) re-pointed to nothing so far
    for _, side, r in events:
        if r.key is None:
            continue
        if side == 1:
            (right.add if r.value is not None else right.discard)(r.key)
            pending = [(k, f) for k, f in pending if f.encode() != r.key or r.value is None]
            continue
        new = foreign_key.get(None if r.value is None else r.value.decode())
        old = pointed.get(r.key)
        pending = [(k, f) for k, f in pending if k != r.key]
        if (
            old is not None
            and old.encode() in right
            and new is not None
            and new != old
            and new.encode() not in right
        ):
            pending.append((r.key, new))
        pointed[r.key] = new
    return bool(pending)


def _deleted_for_good(records: Sequence[admin.Record]) -> bool:
    """Whether a key that had a value ends deleted (a tombstone that no later record undoes: only
    the final table then shows whether the delete reached every step)."""
    live: dict[bytes, bool] = {}
    ended = set()
    for r in records:
        if r.key is not None:
            if r.value is None and live.get(r.key):
                ended.add(r.key)
            elif r.value is not None:
                ended.discard(r.key)
            live[r.key] = r.value is not None
    return bool(ended)


def _seconds(text: str) -> int:
    assert text.endswith("s") and text[:-1].isdigit(), text  # what _windows and _draw_join write
    return int(text[:-1]) * 1000


def _processing_order(case: Case) -> list[list[tuple[int, admin.Record]]]:
    """Each task's records (input index, record) in about the order Kafka Streams processes them:
    co-partitioned inputs merged by their head records' timestamps."""
    queues: dict[int, list[list[admin.Record]]] = collections.defaultdict(lambda: [[] for _ in case.inputs])
    for i, records in enumerate(case.inputs):
        for r in records:
            queues[partition(r, case.partitions)][i].append(r)
    tasks = []
    for task in queues.values():
        heads, order = [0] * len(task), []
        while live := [i for i, q in enumerate(task) if heads[i] < len(q)]:
            i = min(live, key=lambda i: task[i][heads[i]].timestamp or 0)
            order.append((i, task[i][heads[i]]))
            heads[i] += 1
        tasks.append(order)
    return tasks


def _edges(case: Case, kind: str, spec: Mapping[str, Any]) -> set[str]:
    """``window/<kind>/on the grace limit``: a record arrives exactly at its window's grace limit
    (Kafka Streams drops a time window's record once end + grace <= stream time; a sliding
    window's or session's is still in at ts + grace == stream time). ``join/stream-stream/on the
    window's edge, in order (out of order)``: a record meets one of the other side that came
    before it, still in its store, exactly at the start (the end) of its join window. Worked out
    on the inputs before any step, per input (a cogroup's windows keep a stream time per input);
    an edge counts when two records meet it with a key and a value (a step may drop one)."""
    hits: collections.Counter[str] = collections.Counter()
    for order in _processing_order(case):
        hits.update(_join_edges(order, spec) if kind == "join" else _window_edges(order, kind, spec))
    return {edge for edge, n in hits.items() if n >= 2}


def _join_edges(order: Sequence[tuple[int, admin.Record]], spec: Mapping[str, Any]) -> Iterator[str]:
    before = _seconds(spec.get("before", spec.get("timeDifference", "0s")))
    after = _seconds(spec.get("after", spec.get("timeDifference", "0s")))
    retention = before + after + _seconds(spec.get("grace", "0s"))
    observed = [0, 0]  # each side's latest timestamp: its store keeps `retention` back
    for n, (side, r) in enumerate(order):
        up, down = (after, before) if side == 0 else (before, after)  # the window seen from r
        ts = r.timestamp or 0
        for other, o in order[:n] if r.key is not None and r.value is not None else ():
            t = o.timestamp or 0
            if other != side and o.key == r.key and o.value is not None and t > observed[other] - retention:
                if t - ts == up:
                    yield "join/stream-stream/on the window's edge, out of order"
                if ts - t == down:
                    yield "join/stream-stream/on the window's edge, in order"
        observed[side] = max(observed[side], ts)


def _window_edges(
    order: Sequence[tuple[int, admin.Record]], kind: str, spec: Mapping[str, Any]
) -> Iterator[str]:
    grace = _seconds(spec.get("grace", "0s"))
    size = _seconds(spec[kind]["size"] if kind == "hopping" else spec[kind])
    advance = _seconds(spec["hopping"]["advance"]) if kind == "hopping" else size
    stream: dict[int, int] = {}
    for i, r in order:
        ts = r.timestamp or 0
        now = stream[i] = max(stream.get(i, ts), ts)
        if r.key is None or r.value is None:
            continue
        if kind in ("tumbling", "hopping"):
            first = max(0, ts - size + advance) // advance * advance
            on = any(end + grace == now for end in range(first + size, ts + size + 1, advance))
        else:
            on = bool(grace) and ts + grace == now
        if on:
            yield f"window/{kind}/on the grace limit"


def covering(seeds: Iterable[int], vocab: Vocab, times: int = 1) -> list[int]:
    """The seeds, in order, each of which adds a feature (:func:`features`) seen fewer than
    ``times`` times so far."""
    seen: collections.Counter[str] = collections.Counter()
    chosen = []
    for seed in seeds:
        found = features(case(seed, vocab), vocab.foreign_keys)
        if any(seen[f] < times for f in found):
            chosen.append(seed)
            seen.update(found)
    return chosen


_Drawn = tuple[list[dict[str, Any]], str, str, int, bool, bool]


def _draw_stateless(rng: random.Random, vocab: Vocab) -> _Drawn:
    chain = _Chain([])
    streams: list[dict[str, Any]] = []
    inputs = 1
    if rng.random() < 0.3:
        streams.append({"name": "second", "from": {"topic": "in1"}})
        inputs = 2
    _stateless(rng, vocab, chain, 2)
    if inputs == 2 and chain.value == "string":
        chain.steps.append({"merge": ["second"]})
    _stateless(rng, vocab, chain, 3)
    chain.steps.append({"to": {"topic": "out", "valueSerde": chain.value}})
    streams.append({"from": {"topic": "in0"}, "steps": chain.steps})
    return streams, "stream", chain.value, inputs, False, False


def _draw_table(rng: random.Random, vocab: Vocab) -> _Drawn:
    chain = _Chain([])
    if rng.random() < 0.5:
        source: dict[str, Any] = {"topic": "in0", "as": "table"}
    else:
        source = {"topic": "in0"}
        _stateless(rng, vocab, chain, 2, keys=False)
        chain.steps.append({"toTable": {}})
    for _ in range(rng.randrange(3)):
        kind = rng.choice(("filter", "filterNot", "mapValues"))
        if kind == "mapValues":
            entry = chain.pick(rng, vocab, "value")
            chain.steps.append({"mapValues": _logic(entry)})
            chain.map_values(entry)
        else:
            chain.steps.append({kind: _logic(chain.pick(rng, vocab, "predicate"))})
    chain.steps.append({"toStream": {}})
    chain.steps.append({"to": {"topic": "out", "valueSerde": chain.value}})
    return [{"from": source, "steps": chain.steps}], "table", chain.value, 1, False, False


def _group(rng: random.Random, vocab: Vocab, chain: _Chain) -> None:
    if chain.value == "string" and rng.random() < 0.4:
        chain.steps.append({"groupBy": _logic(chain.pick(rng, vocab, "key"))})
        chain.rekeyed = True
    else:
        chain.steps.append({"groupByKey": {}})


def _draw_aggregate(rng: random.Random, vocab: Vocab) -> _Drawn:
    chain = _Chain([])
    if rng.random() < 0.3:  # a table re-grouped: adder and subtractor
        chain.steps.append({"groupBy": _logic(chain.pick(rng, vocab, "key"))})
        serde = _aggregation(rng, vocab, chain, table=True, windowed=False)
        serde = _tail(rng, vocab, chain, serde)
        return (
            [{"from": {"topic": "in0", "as": "table"}, "steps": chain.steps}],
            "table",
            serde,
            1,
            True,
            False,
        )
    _stateless(rng, vocab, chain, 2)
    _group(rng, vocab, chain)
    serde = _aggregation(rng, vocab, chain, table=False, windowed=False)
    serde = _tail(rng, vocab, chain, serde)
    return [{"from": {"topic": "in0"}, "steps": chain.steps}], "table", serde, 1, chain.rekeyed, False


def _draw_windowed(rng: random.Random, vocab: Vocab) -> _Drawn:
    chain = _Chain([])
    if rng.random() < 0.3:  # emit final: divergences.final_model needs every record to reach the window
        if rng.random() < 0.5:
            entry = chain.pick(rng, vocab, "value", returns="string")
            chain.steps.append({"mapValues": _logic(entry)})
            chain.map_values(entry)
        chain.steps.append({"groupByKey": {}})
        chain.steps.append({"windowedBy": {**_windows(rng), "emit": "final"}})
        serde = _aggregation(rng, vocab, chain, table=False, windowed=True, reduce=False)
        serde = _tail(rng, vocab, chain, serde, windowed=True)
        return [{"from": {"topic": "in0"}, "steps": chain.steps}], "stream", serde, 1, False, True
    _stateless(rng, vocab, chain, 1)
    _group(rng, vocab, chain)
    chain.steps.append({"windowedBy": _windows(rng)})
    serde = _aggregation(rng, vocab, chain, table=False, windowed=True)
    mode = "table"
    # divergences.sliding_suppress_model predicts Kafka Streams' early emissions of counts only, and
    # needs every record to reach the window
    modelled = "count" in chain.steps[-1] and all(
        next(iter(st)) in ("mapValues", "groupByKey") for st in chain.steps[:-2]
    )
    if ("sliding" not in chain.steps[-2]["windowedBy"] or modelled) and rng.random() < 0.35:
        chain.steps.append({"suppress": "untilWindowCloses"})
        mode = "stream"
    serde = _tail(rng, vocab, chain, serde, windowed=True)
    return [{"from": {"topic": "in0"}, "steps": chain.steps}], mode, serde, 1, chain.rekeyed, True


def _draw_join(rng: random.Random, vocab: Vocab) -> _Drawn:
    kind = rng.choice(("stream-table", "stream-stream", "table-table", "fk", "global"))
    op = rng.choice(
        ("join", "leftJoin", "outerJoin")
        if kind in ("stream-stream", "table-table")
        else ("join", "leftJoin")
    )
    joiner = _logic(vocab.pick(rng, "joiner", "string"))
    spec: dict[str, Any] = {"with": "right", "joiner": joiner}
    left = _Chain([])
    right_source: dict[str, Any] = {"topic": "in1", "as": "table"}
    left_source: dict[str, Any] = {"topic": "in0"}
    mode = "stream"
    # No key change in front of a join: Kafka Streams would read one side from a repartition topic,
    # and where its records fall among the other side's depends on when the upstream task wrote them.
    if kind == "stream-table":
        _stateless(rng, vocab, left, 2, keys=False)
        if left.value != "string":
            left.steps.append({"mapValues": "cast(value as string)"})
            left.value = "string"
    elif kind == "stream-stream":
        _stateless(rng, vocab, left, 1, keys=False)
        if left.value != "string":
            left.steps.append({"mapValues": "cast(value as string)"})
            left.value = "string"
        right_source = {"topic": "in1"}
        difference = rng.choice((1, 2, 3))
        windows: dict[str, Any] = {
            "timeDifference": f"{difference}s",
            "grace": rng.choice(("0s", "2s", "5s")),
        }
        if rng.random() < 0.3:
            windows = {
                "before": f"{difference}s",
                "after": f"{rng.choice((0, 1, 4))}s",
                "grace": windows["grace"],
            }
        spec["windows"] = windows
    elif kind == "global":
        right_source = {"topic": "in1", "as": "globalTable"}
        spec["key"] = _logic(vocab.pick(rng, "key", "string"))
    else:
        left_source = {"topic": "in0", "as": "table"}
        mode = "table"
        if kind == "fk":
            spec["foreignKey"] = _logic(vocab.pick(rng, "foreignKey", "string"))
    left.steps.append({op: spec})
    if mode == "table":
        left.steps.append({"toStream": {}})
    left.steps.append({"to": {"topic": "out"}})
    streams = [{"name": "right", "from": right_source}, {"from": left_source, "steps": left.steps}]
    return streams, mode, "string", 2, left.rekeyed, False


def _draw_cogroup(rng: random.Random, vocab: Vocab) -> _Drawn:
    windowed = rng.random() < 0.5
    steps: list[dict[str, Any]] = [{"groupByKey": {}}]
    if windowed:
        steps.append({"windowedBy": _windows(rng, ("tumbling", "hopping", "sliding"))})  # no session merger
    steps.append({"cogroup": {
        "adder": "conformance_functions:add",
        "with": [{"stream": "second", "adder": "conformance_functions:add_tenfold"}],
        "initializer": "conformance_functions:zero", "returns": "bigint"}})  # fmt: skip
    serde = _tail(rng, vocab, _Chain(steps, value="long"), "long", windowed=windowed)
    streams = [
        {"name": "second", "from": {"topic": "in1"}, "steps": [{"groupByKey": {}}]},
        {"from": {"topic": "in0"}, "steps": steps},
    ]
    return streams, "table", serde, 2, False, windowed
