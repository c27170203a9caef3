"""The conformance scenarios: a StreamApp manifest per scenario, and the seeded input they share.

Each :class:`Scenario` is a manifest and says how to compare the two outputs (:data:`TABLE`,
:data:`FINAL`, :data:`STREAM`); the oracle builds the same topology in Kafka Streams from the
manifest's logical graph (oracle.py), so a scenario is written once. Manifests read the logical
topics ``in0``, ``in1`` … and write ``out``; the harness renames them to fresh topics per run and
sets ``maxOffsetsPerTrigger`` on every source (the micro-batch size).

To add a scenario: append one ``Scenario`` to :data:`SCENARIOS` (see README.md); its expressions
and functions must be in the oracle's vocabulary (kstreams/.../Vocabulary.java).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

from streamapp.runtime.kafka import admin

__all__ = ["FINAL", "SCENARIOS", "STREAM", "T0", "TABLE", "Scenario", "generate"]

#: Compare the final value and timestamp per key (a table's changelog; a final null = absent).
TABLE = "table"
#: Compare the exact multiset of (key, value, timestamp): emit-final and suppress.
FINAL = "final"
#: Compare the exact multiset of records: stateless streams.
STREAM = "stream"

T0 = 1_700_000_000_000 - 1_700_000_000_000 % 60_000  # a whole minute: windows align to it

_HEAD = """
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {name: conformance}
spec:
  topology:
    defaults: {keySerde: string, valueSerde: string}
    streams:
"""


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    streams: str  # the manifest's `streams:` list (YAML, indented by 6)
    compare: str  # TABLE, FINAL or STREAM
    value_serde: str = "long"  # of `out`: long or string
    inputs: int = 1  # input topics in0 … in{n-1}
    #: Windowed: run under every setting of :data:`BATCHES` and require the same output; compare
    #: the late-record count with Kafka Streams' dropped-records metric.
    windowed: bool = False
    #: Run under every setting of :data:`BATCHES` too (a windowed scenario always is), without
    #: comparing late records (joins: Kafka Streams' dropped-records counts skipped records).
    every_batch: bool = False
    note: str = ""
    #: Partitions of every topic of the scenario (inputs and outputs).
    partitions: int = 3
    #: The scenario's own input, ``(name, topic index) -> records``, when :func:`generate`'s does
    #: not fit it (e.g. input designed so that Kafka Streams' own result is deterministic).
    input: Callable[[str, int], list[admin.Record]] | None = None
    #: Compare the order of the output records too, not only their multiset (one partition: the
    #: order in which windows closing on one record emit their final results).
    ordered: bool = False

    def manifest(self) -> str:
        return _HEAD + self.streams


#: maxOffsetsPerTrigger settings: every scenario runs under the first, windowed ones under all.
BATCHES = (45, 80)
PARTITIONS = Scenario.partitions
RECORDS = 120
#: StreamApp queries run at once in the one Spark session. 3 was tried on the shared 2-core
#: machine (load ~17): Python workers timed out opening their sockets and queries failed; 1 it is.
PARALLEL_QUERIES = 1
KEYS = ("a", "b", "c", "d", "e", "f")


def generate(seed: str, topic: int) -> list[admin.Record]:
    """``RECORDS`` records for input topic ``topic``, the same for a given seed: keys in
    ``KEYS`` and null keys, decimal values and null values (tombstones for tables), timestamps
    that advance 0–2.5 s per record in quarter seconds, with some out of order by up to 4 s
    (inside every scenario's grace) and some by 15–40 s (beyond it). A key always goes to the
    partition Kafka's default partitioner gives it (the topics are co-partitioned, as Kafka Streams
    requires for groupByKey); a null key to a random one."""
    rng = random.Random(f"{seed}/{topic}")
    clock = T0 + 1000 * rng.randrange(10)
    out = []
    for n in range(RECORDS):
        if n in PROBES:
            clock = _probe(rng, clock, out)
            continue
        # Quarter seconds: records land exactly on window ends and grace limits often enough that
        # an off-by-one there (< for <=) changes the output.
        clock += 250 * rng.randrange(11)
        roll = rng.random()
        # Out of order: some within 4 s, some 0-20 s (around every grace limit, exactly on it
        # now and then), some 15-40 s back (beyond every window's grace).
        back = (
            250 * rng.randrange(17)
            if roll < 0.1
            else 250 * rng.randrange(81)
            if roll < 0.2
            else 250 * rng.randrange(60, 161)
            if roll < 0.25
            else 0
        )
        ts = clock - back
        key = None if rng.random() < 0.08 else rng.choice(KEYS)
        value = None if rng.random() < 0.1 else str(rng.randrange(10))
        # A key goes where Kafka's default partitioner puts it (murmur2, admin.produce), as a
        # foreign-key join's subscriptions in Kafka Streams expect; a null key anywhere.
        partition = rng.randrange(PARTITIONS) if key is None else None
        out.append(
            admin.Record(
                key=None if key is None else key.encode(),
                value=None if value is None else value.encode(),
                timestamp=ts,
                partition=partition,
            )
        )
    return out


#: Where :func:`generate` puts a grace-boundary probe instead of a random record (see _probe).
PROBES = (40, 80)
#: The window ends and grace the probes aim at: every 20 s is the end of a tumbling 10 s window
#: and of a hopping (10 s, advance 4 s) one; the windowed counts' grace is 5 s.
PROBE_EVERY, PROBE_GRACE = 20_000, 5_000


def _probe(rng: random.Random, clock: int, out: list[admin.Record]) -> int:
    """Two records of one key: the first moves its task's stream time to exactly ``end + grace``
    of a window (``end`` a multiple of :data:`PROBE_EVERY` ahead of the clock), the second falls in
    that window, 250 ms before its end. Kafka Streams drops it (``end + grace <= stream time``): an
    off-by-one in the grace check (``<`` for ``<=``) lets it in, and the counts differ. Returns the
    new clock."""
    end = (clock // PROBE_EVERY + 2) * PROBE_EVERY
    key = rng.choice(KEYS)
    for ts in (end + PROBE_GRACE, end - 250):
        out.append(admin.Record(key=key.encode(), value=b"7", timestamp=ts))
    return end + PROBE_GRACE


_WINDOW_KINDS = {
    "tumbling": "tumbling: 10s",
    "hopping": "hopping: {size: 10s, advance: 4s}",
    "sliding": "sliding: 6s",
    "session": "session: 3s",
}


def _cogroup(*, windowed: bool, window: str = "tumbling: 10s") -> str:
    """Two grouped streams cogrouped (the second's values count tenfold), in ``window`` windows
    (10 s tumbling) with 5 s grace or without windows."""
    window = f"\n          - windowedBy: {{{window}, grace: 5s}}" if windowed else ""
    return f"""
      - name: second
        from: {{topic: in1}}
        steps:
          - groupByKey: {{}}
      - from: {{topic: in0}}
        steps:
          - groupByKey: {{}}{window}
          - cogroup:
              adder: conformance_functions:add
              with: [{{stream: second, adder: conformance_functions:add_tenfold}}]
              initializer: conformance_functions:zero
              returns: bigint
          - toStream: {{}}
          - to: {{topic: out, valueSerde: long}}
"""


def _windowed_count(window: str, emit: str, source: str = "{topic: in0}") -> str:
    """A count per key and window, grace 5 s; ``emit`` is updates, final or suppress."""
    mode = "final" if emit == "final" else "updates"
    suppress = "\n          - suppress: untilWindowCloses" if emit == "suppress" else ""
    return f"""
      - from: {source}
        steps:
          - groupByKey: {{}}
          - windowedBy: {{{window}, grace: 5s, emit: {mode}}}
          - count: {{}}{suppress}
          - toStream: {{}}
          - to: {{topic: out, valueSerde: long}}
"""


#: Long keys whose serialised bytes (8, big-endian) and text order differently: 10 before 9 as
#: text, 9 before 10 as bytes; a negative key after every positive one as bytes (unsigned).
LONG_KEYS = (10, 9, -1, 2**40, 0, 256, -256, 65_536)


#: Text keys whose UTF-8 bytes and UTF-16 (Java's String.compareTo) order differently: U+FFFD
#: before U+1F600 in UTF-16 (a surrogate), after it in UTF-8; a prefix before its extension.
TEXT_KEYS = ("b", "a", "ab", "\u00e9", "\ufffd", "\U0001f600", "z", "A")


def _long(key: int | str, ts: int) -> admin.Record:
    raw = key.encode() if isinstance(key, str) else key.to_bytes(8, "big", signed=True)
    return admin.Record(key=raw, value=b"1", timestamp=ts, partition=0)


def tumbling_closes(seed: str, topic: int, keys: tuple[int | str, ...] = LONG_KEYS) -> list[admin.Record]:
    """Rounds of records with 3-6 of ``keys`` in one 10 s window each; the first record of the
    next round (in the next window, 15-20 s after the window's start) closes it (grace 5 s), so
    every closing record closes one window of several keys at once. Under 20 s: Kafka Streams'
    onWindowClose() loses no window (divergences.py)."""
    rng = random.Random(f"{seed}/{topic}")
    out = []
    for r in range(18):
        start = T0 + 10_000 * r
        if r:
            out.append(_long(rng.choice(keys), start + 5_000 + 250 * rng.randrange(20)))
        for key in rng.sample(keys, rng.randrange(3, 7)):
            out.append(_long(key, start + 250 * rng.randrange(40)))
    return out


#: Text whose case mapping depends on the Unicode tables: final sigma, a dotted capital I, sharp s
#: and a ligature (one character to several), title-case digraphs, and letters given case pairs
#: only in Unicode 14-16 (Glagolitic U+2C2F, Old Polish O U+A7C0, Cyrillic TJE U+1C89), which ICU's
#: tables map and the JDK's of the JVM the app runs on may not.
CASE_TEXT = (
    "ΟΔΟΣ ΣΟΦΟΣ",
    "İstanbul DİYARBAKIR",
    "Straße ﬃ",
    "ǅemal ǈ ǋ",
    "\u2c2f\u2c5f \ua7c0\ua7c1 \u1c89\u1c8a",
    "Ǳ\U0001e900\U0001e922 ÉCOLE",
    "plain ascii Text",
)


def case_text(seed: str, topic: int) -> list[admin.Record]:
    """Every :data:`CASE_TEXT` line eight times and a null value, keyed, in seeded order, one
    partition (57 records: two micro-batches)."""
    rng = random.Random(f"{seed}/{topic}")
    lines = [*CASE_TEXT * 8, None]
    rng.shuffle(lines)
    return [
        admin.Record(key=b"k", value=line and line.encode(), timestamp=T0 + 1_000 * n, partition=0)
        for n, line in enumerate(lines)
    ]


def skipped_ahead(_name: str, topic: int) -> list[admin.Record]:
    """in0: a@1 s, a@60 s; in1: a@2 s, a null value @61 s, a@30 s. Kafka Streams takes them in
    that order; in1's processor skips the null value before its stream time moves, so 30 s is in
    time for in1 (stream time 2 s) although the task has seen 60 s. In front of in0's, 90 records
    of key z at 0.5 s, so that every batch size runs several micro-batches."""

    def rec(value: str | None, at: int, key: bytes = b"a") -> admin.Record:
        return admin.Record(key, None if value is None else value.encode(), timestamp=T0 + at)

    if topic == 0:
        return [*(rec("1", 500, b"z") for _ in range(90)), rec("1", 1_000), rec("1", 60_000)]
    return [rec("1", 2_000), rec(None, 61_000), rec("2", 30_000)]


def session_closes(seed: str, topic: int) -> list[admin.Record]:
    """Rounds, 12 s apart, of sessions (gap 3 s) of 3-6 long keys that end together or 500 ms
    apart, with starts that differ; the next round's records close them all (gap + grace 8 s). The
    rounds keep a session's end and its closing record's time less 8 s in one minute: Kafka
    Streams' session store drops whole 60 s segments (divergences.py)."""
    rng = random.Random(f"{seed}/{topic}")
    out = []
    for minute in range(4):
        for j in range(4):
            base = T0 + 60_000 * minute + 12_000 * j
            records = []
            for key in rng.sample(LONG_KEYS, rng.randrange(3, 7)):
                end = base + rng.choice((2_000, 2_500))
                first = base + 250 * rng.randrange(9)
                records += [_long(key, first), _long(key, end)] if first < end else [_long(key, end)]
            rng.shuffle(records)
            out += records
    return out


def session_boundary(seed: str, topic: int) -> list[admin.Record]:
    """Sessions (gap 3 s, grace 5 s) probed at their close, ``end + grace + gap``. In each round a
    key's session [t, t] sees stream time reach t + 8 s - 1 ms (86 records of another key: every
    :data:`BATCHES` setting ends a micro-batch among them), then a record of the same key at
    t + 3 s, in time to merge into [t, t + 3 s]; stream time then steps to that session's close
    less 1 ms and to the close itself. A session closed at ``end + grace`` (8 s early) is emitted
    as [t, t] and again when merged. Rounds 20 s apart, three a minute: the next round's first
    record closes the rest (divergences.py: 60 s segments)."""
    rng = random.Random(f"{seed}/{topic}")
    out = []
    for minute in range(2):
        for j in range(2):
            t = T0 + 60_000 * minute + 20_000 * j
            a, b, c = rng.sample(KEYS, 3)
            end = t + 3_000
            out += [_long(a, t), *[_long(b, t + 7_999)] * 86, _long(a, end)]
            out += [_long(c, end + 7_999), _long(c, end + 8_000)]
    return out


SCENARIOS: list[Scenario] = [
    Scenario(
        "stateless",
        """
      - from: {topic: in0}
        steps:
          - filter: "value is not null and cast(value as int) % 3 != 0"
          - filterNot: "key is null"
          - mapValues: "concat('v', value)"
          - flatMapValues: "array(value, concat(value, 'x'))"
          - to: {topic: out}
""",
        STREAM,
        value_serde="string",
    ),
    Scenario(
        "caseMapping",
        """
      - from: {topic: in0}
        steps:
          - mapValues: "concat(lower(value), '|', upper(value))"
          - to: {topic: out}
""",
        STREAM,
        value_serde="string",
        partitions=1,
        input=case_text,
        note="lower() and upper() map case as the JVM's String does, as a Kafka Streams app's "
        "toLowerCase()/toUpperCase() do (not with Spark's default ICU tables, which also know "
        "letters newer than the JDK's Unicode)",
    ),
    Scenario(
        "countByKey",
        """
      - from: {topic: in0}
        steps:
          - groupByKey: {}
          - count: {}
          - toStream: {}
          - to: {topic: out, valueSerde: long}
""",
        TABLE,
        note="Spark's own aggregation (no stateful engine); null values are not counted",
    ),
    Scenario(
        "countRekeyed",
        """
      - from: {topic: in0}
        steps:
          - groupBy: "concat('g', cast(cast(value as int) % 3 as string))"
          - count: {}
          - toStream: {}
          - to: {topic: out, valueSerde: long}
""",
        TABLE,
        note="a key-changing groupBy: Kafka Streams repartitions; null new keys are dropped",
    ),
    Scenario(
        "tumblingFinal",
        """
      - from: {topic: in0}
        steps:
          - groupByKey: {}
          - windowedBy: {tumbling: 10s, grace: 5s, emit: final}
          - count: {}
          - toStream: {}
          - to: {topic: out, valueSerde: long}
""",
        FINAL,
        windowed=True,
    ),
    Scenario(
        "hoppingSum",
        """
      - from: {topic: in0}
        steps:
          - groupByKey: {}
          - windowedBy: {hopping: {size: 10s, advance: 5s}, grace: 3s}
          - aggregate: {fn: sum, expr: "cast(value as bigint)"}
          - toStream: {}
          - to: {topic: out, valueSerde: long}
""",
        TABLE,
        windowed=True,
    ),
    Scenario(
        "tableSource",
        """
      - from: {topic: in0, as: table}
        steps:
          - toStream: {}
          - to: {topic: out}
""",
        TABLE,
        value_serde="string",
    ),
    Scenario(
        "cogroupWindowed",
        _cogroup(windowed=True),
        TABLE,
        inputs=2,
        windowed=True,
        note="two co-partitioned topics in one task: Kafka Streams takes the record with the "
        "lowest timestamp of the partitions' heads next",
    ),
    Scenario(
        "cogroupLatePerInput",
        _cogroup(windowed=True, window="sliding: 6s"),
        TABLE,
        inputs=2,
        windowed=True,
        partitions=1,
        input=skipped_ahead,
        note="each cogrouped stream has its own processor in Kafka Streams, so its own stream time: "
        "a record is late against its own input's records only",
    ),
    Scenario(
        "cogroupByKey",
        _cogroup(windowed=False),
        TABLE,
        inputs=2,
        note="a cogroup without windows skips null values: no adder call, and the timestamp stays",
    ),
    Scenario(
        "tableGroupBySubtractor",
        """
      - from: {topic: in0, as: table}
        steps:
          - groupBy: "concat('g', cast(cast(value as int) % 3 as string))"
          - aggregate:
              initializer: conformance_functions:zero
              adder: conformance_functions:add
              subtractor: conformance_functions:subtract
              returns: bigint
          - toStream: {}
          - to: {topic: out, valueSerde: long}
""",
        TABLE,
        note="a Python subtractor: a table key's old value leaves its group when it changes",
    ),
    *[
        Scenario(
            f"{kind}{emit.capitalize()}",
            _windowed_count(window, emit),
            TABLE if emit == "updates" else FINAL,
            windowed=True,
        )
        for kind, window in _WINDOW_KINDS.items()
        for emit in ("updates", "final", "suppress")
        if f"{kind}{emit.capitalize()}" != "tumblingFinal"  # above, with its own note
    ],
    Scenario(
        "tumblingRekeyed",
        """
      - from: {topic: in0}
        steps:
          - groupBy: "concat('g', cast(cast(value as int) % 5 as string))"
          - windowedBy: {tumbling: 10s, grace: 5s}
          - count: {}
          - toStream: {}
          - to: {topic: out, valueSerde: long}
""",
        TABLE,
        windowed=True,
        input=lambda seed, topic: [dataclasses.replace(r, partition=0) for r in generate(seed, topic)],
        note="a key change in front of a window: five new keys on three tasks (Kafka Streams' "
        "repartition topic), each task with its own stream time, so which keys share a task decides "
        "which records are late. The input is all in one partition: one task writes the "
        "repartition topic, and each downstream task reads its records in that order",
    ),
    Scenario(
        "mergeWindowed",
        """
      - name: second
        from: {topic: in1}
      - from: {topic: in0}
        steps:
          - merge: [second]
          - groupByKey: {}
          - windowedBy: {tumbling: 10s, grace: 5s, emit: final}
          - count: {}
          - toStream: {}
          - to: {topic: out, valueSerde: long}
""",
        FINAL,
        inputs=2,
        windowed=True,
        note="a merge of two co-partitioned topics: one task, the lowest head timestamp goes first",
    ),
    Scenario(
        "toTable",
        """
      - from: {topic: in0}
        steps:
          - toTable: {}
          - toStream: {}
          - to: {topic: out}
""",
        TABLE,
        value_serde="string",
    ),
    Scenario(
        "tableFilterMapValues",
        """
      - from: {topic: in0, as: table}
        steps:
          - filter: "cast(value as int) % 2 = 0"
          - mapValues: "concat('t', value)"
          - toStream: {}
          - to: {topic: out}
""",
        TABLE,
        value_serde="string",
    ),
    Scenario(
        "reduceByKey",
        """
      - from: {topic: in0}
        steps:
          - groupByKey: {}
          - reduce: {reducer: conformance_functions:keep_larger}
          - toStream: {}
          - to: {topic: out}
""",
        TABLE,
        value_serde="string",
    ),
    Scenario(
        "countOnEngine",
        """
      - from: {topic: in0}
        steps:
          - groupByKey: {}
          - count: {}
          - toStream: {}
          - to: {topic: out, valueSerde: long}
      - from: {topic: in1, as: table}
        steps:
          - toStream: {}
          - filter: "false"
          - to: {topic: out}
""",
        TABLE,
        inputs=2,
        note="countByKey again, but a table in the app puts every aggregation on the stateful engine",
    ),
    *[
        Scenario(
            f"keyOrder{kind.capitalize()}{emit.capitalize()}",
            _windowed_count(_WINDOW_KINDS[kind], emit, source="{topic: in0, keySerde: long}"),
            FINAL,
            windowed=True,
            partitions=1,
            ordered=True,
            input=tumbling_closes if kind == "tumbling" else session_closes,
            note="the order of final results closing on one record: Kafka Streams' store order of the "
            "serialised keys (long keys: 9 before 10, -1 last)",
        )
        for kind in ("tumbling", "session")
        for emit in ("final", "suppress")
    ],
    *[
        Scenario(
            f"sessionClose{emit.capitalize()}",
            _windowed_count(_WINDOW_KINDS["session"], emit),
            FINAL,
            windowed=True,
            partitions=1,
            input=session_boundary,
            note="a session closes at end + grace + gap (Kafka Streams' suppression buffer and "
            "emit-final session store), not at end + grace: probed 1 ms before and at that time",
        )
        for emit in ("final", "suppress")
    ],
    Scenario(
        "keyOrderTextTumblingFinal",
        _windowed_count(_WINDOW_KINDS["tumbling"], "final"),  # tumblingFinal's
        FINAL,
        windowed=True,
        partitions=1,
        ordered=True,
        input=lambda seed, topic: tumbling_closes(seed, topic, TEXT_KEYS),
        note="text keys closing on one record come in their UTF-8 order (U+FFFD after U+1F600), not "
        "Java's UTF-16 String order",
    ),
]
