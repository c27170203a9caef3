"""The join scenarios of the conformance suite, in the form of :mod:`scenarios`.

``test_conformance`` runs ``scenarios.SCENARIOS + join_scenarios.JOIN_SCENARIOS``. Input: ``in0``
is the left stream or table, ``in1`` the right one, both from :func:`scenarios.generate`
(co-partitioned, null keys, null values, out-of-order timestamps).

Kafka Streams' stream-stream joins throttle the emission of left/outer results without a match to
one pass per second of wall-clock time (``__emit.interval.ms.kstreams.outer.join.spurious.
results.fix__``, default 1000); StreamApp emits them as soon as stream time allows, as Kafka
Streams does with that internal setting at 0 — the Oracle's properties must set it to 0.
Stream-stream scenarios are not ``windowed``: Kafka Streams counts a join's late records in the
window stores' ``expired-window-record-drop``, not in the ``dropped-records`` the suite compares
(which for joins counts records skipped for a null key or value).
"""

from __future__ import annotations

import dataclasses
import random

import scenarios as sc
import yaml

from streamapp.runtime.cli import examples
from streamapp.runtime.kafka import admin

__all__ = ["JOIN_SCENARIOS"]


def _join(op: str, table: bool, joiner: str, windows: str = "") -> str:
    source = "{topic: in1, as: table}" if table else "{topic: in1}"
    extra = f", windows: {windows}" if windows else ""
    return f"""
      - name: right
        from: {source}
      - from: {{topic: in0}}
        steps:
          - {op}: {{with: right, joiner: "{joiner}"{extra}}}
          - to: {{topic: out}}
"""


def _table_join(op: str, joiner: str) -> str:
    return f"""
      - name: right
        from: {{topic: in1, as: table}}
      - from: {{topic: in0, as: table}}
        steps:
          - {op}: {{with: right, joiner: "{joiner}"}}
          - toStream: {{}}
          - to: {{topic: out}}
"""


def _fk_join(op: str, joiner: str) -> str:
    return f"""
      - name: right
        from: {{topic: in1, as: table}}
      - from: {{topic: in0, as: table}}
        steps:
          - {op}: {{with: right, foreignKey: "{_FOREIGN_KEY}", joiner: "{joiner}"}}
          - toStream: {{}}
          - to: {{topic: out}}
"""


#: The right table's key from a left value (a digit): 0-8 → a-f (modulo 6), 9 → a null foreign key.
_FOREIGN_KEY = (
    "CASE WHEN value = '9' THEN NULL ELSE element_at(array('a', 'b', 'c', 'd', 'e', 'f'), "
    "cast(value AS INT) % 6 + 1) END"
)
_FK_NOTE = (
    "foreign-key join (KIP-213): left rows re-pointed (their value changes the foreign key), "
    "deleted and given a null foreign key; right rows updated and deleted. Kafka Streams runs it "
    "through its subscription and response topics; the final table is compared"
)

_BOTH = "concat(left, '@', right)"
_LEFT = "concat(left, '@', coalesce(right, '-'))"
_OUTER = "concat(coalesce(left, '-'), '@', coalesce(right, '-'))"
_WINDOWS = "{timeDifference: 3s, grace: 5s}"
_ORDER = (
    "each task takes the partition whose head record is oldest, across micro-batches (ties: the "
    "partition that waited longer, as in Kafka Streams' PartitionGroup)"
)


def _example_streams(name: str, topics: dict[str, str]) -> str:
    """The ``streams:`` of a packaged example (runtime/cli/examples), its topics renamed: the
    scenario runs the example's own steps, not a copy of them."""
    doc = yaml.safe_load(examples.find(name).read_text())
    assert doc["spec"]["topology"]["defaults"] == {"keySerde": "string", "valueSerde": "string"}, name
    text = yaml.safe_dump(doc["spec"]["topology"]["streams"], sort_keys=False)
    for old, new in topics.items():
        text = text.replace(f"topic: {old}", f"topic: {new}")
    assert all(f"topic: {new}" in text for new in topics.values()), text
    return "".join(f"      {line}\n" for line in text.splitlines())


_USERS = tuple(f"u{i}" for i in range(12))
_REGIONS = ("eu", "us", "apac")
_PAGES = ("/home", "/search", "/product", "/cart")


def page_views(seed: str, topic: int) -> list[admin.Record]:
    """Input of pageViewsByRegion: ``in0`` page views (user -> page), ``in1`` profiles (user ->
    region), one timeline drawn from ``seed``. Nine users have a profile from the start, three get
    one later; every ~8th record moves a user to another region, every ~50th deletes a profile
    (inner join: that user's views count nowhere until it comes back). Views come 0.25-2 s apart;
    8 % are 1-25 s out of order (inside the 30 s grace whatever came before), 3 % 70-150 s (late
    for their minute, or not, by where stream time stands). An out-of-order view is 125 ms off the
    quarter-second grid that every profile update is on, so a view and an update of the same user
    never tie: ties between the two topics are broken by Kafka Streams' priority queue of
    partitions, which is not a documented order."""
    rng = random.Random(f"{seed}/pageviews")
    clock = sc.T0 + 1000 * rng.randrange(5)
    views: list[admin.Record] = []
    profiles: list[admin.Record] = []
    region: dict[str, str] = {}
    for user in _USERS[:9]:
        region[user] = rng.choice(_REGIONS)
        profiles.append(admin.Record(user.encode(), region[user].encode(), timestamp=clock, partition=0))
    for _ in range(300):
        clock += 250 * rng.randrange(1, 9)
        roll = rng.random()
        if roll < 0.12:
            user = rng.choice(_USERS)
            region[user] = rng.choice([r for r in _REGIONS if r != region.get(user)])
            profiles.append(admin.Record(user.encode(), region[user].encode(), timestamp=clock, partition=0))
        elif roll < 0.14 and region:
            user = rng.choice(sorted(region))
            del region[user]
            profiles.append(admin.Record(user.encode(), None, timestamp=clock, partition=0))
        else:
            back = rng.random()
            ts = (
                clock - 1000 * rng.randrange(1, 25) - 125
                if back < 0.08
                else clock - 1000 * rng.randrange(70, 150) - 125
                if back < 0.11
                else clock
            )
            page = rng.choice(_PAGES).encode()
            views.append(admin.Record(rng.choice(_USERS).encode(), page, timestamp=ts, partition=0))
    return [views, profiles][topic]


JOIN_SCENARIOS: list[sc.Scenario] = [
    sc.Scenario("streamTableJoin", _join("join", True, _BOTH), sc.STREAM, "string", inputs=2, note=_ORDER),
    sc.Scenario(
        "streamTableLeftJoin", _join("leftJoin", True, _LEFT), sc.STREAM, "string", inputs=2, note=_ORDER
    ),
    sc.Scenario(
        "streamStreamJoin",
        _join("join", False, _BOTH, _WINDOWS),
        sc.STREAM,
        "string",
        inputs=2,
        note="JoinWindows.ofTimeDifferenceAndGrace(3 s, 5 s); results stamped max of both sides",
    ),
    sc.Scenario(
        "streamStreamLeftJoin",
        _join("leftJoin", False, _LEFT, _WINDOWS),
        sc.STREAM,
        "string",
        inputs=2,
        note="a left record without a match is emitted once stream time passes its window end + grace",
    ),
    sc.Scenario(
        "streamStreamOuterJoin",
        _join("outerJoin", False, _OUTER, _WINDOWS),
        sc.STREAM,
        "string",
        inputs=2,
        note="unmatched records of both sides, each once its window closed",
    ),
    sc.Scenario(
        "streamGlobalTableLeftJoin",
        """
      - name: right
        from: {topic: in1, as: globalTable}
      - from: {topic: in0}
        steps:
          - leftJoin: {with: right, key: key, joiner: "concat(left, '@', coalesce(right, '-'))"}
          - to: {topic: out}
""",
        sc.STREAM,
        "string",
        inputs=2,
        note="the global table is read in full before the stream (Kafka Streams bootstraps a "
        "GlobalKTable first); maxOffsetsPerTrigger limits only the stream",
    ),
    sc.Scenario("tableTableJoin", _table_join("join", _BOTH), sc.TABLE, "string", inputs=2),
    sc.Scenario("tableTableLeftJoin", _table_join("leftJoin", _LEFT), sc.TABLE, "string", inputs=2),
    sc.Scenario("tableTableOuterJoin", _table_join("outerJoin", _OUTER), sc.TABLE, "string", inputs=2),
    sc.Scenario(
        "fkJoin", _fk_join("join", _BOTH), sc.TABLE, "string", inputs=2, every_batch=True, note=_FK_NOTE
    ),
    sc.Scenario(
        "fkLeftJoin",
        _fk_join("leftJoin", _LEFT),
        sc.TABLE,
        "string",
        inputs=2,
        every_batch=True,
        note=_FK_NOTE,
    ),
    sc.Scenario(
        "pageViewsByRegion",
        _example_streams(
            "pageviews-by-region", {"page-views": "in0", "user-profiles": "in1", "pageviews-by-region": "out"}
        ),
        sc.TABLE,
        inputs=2,
        windowed=True,
        partitions=1,
        input=page_views,
        note="the pageviews-by-region example: a stream-table join, re-keyed by region, counted in "
        "1-minute windows (grace 30 s). One partition per topic: after the key change, Kafka Streams' "
        "lateness depends on how the upstream tasks interleave their writes to the repartition topic "
        "(README), and with one upstream task there is one order, so late views are in the input "
        "and Kafka Streams' result is still deterministic",
    ),
]

# Every join under both micro-batch sizes (issue 14): the order of two inputs must not depend on
# where a micro-batch ends.
JOIN_SCENARIOS = [dataclasses.replace(s, every_batch=True) for s in JOIN_SCENARIOS]
