"""The benchmark's input lines, their expected results, a fast producer and the output monitor.

Input records are small text lines with null keys, drawn in a fixed cycle from a deterministic pool
(so a few million records cost no memory and their reference results are computed from the pool),
spread round-robin over the input partitions. The monitor reads the output topic in a thread of the
harness from the first offset and decides when a variant is done: for the stateless topology when
the expected number of records arrived, for the word count when the latest count of every word
equals the reference count.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import re
import threading
import time
from collections.abc import Iterable, Iterator

from confluent_kafka import Consumer, Producer, TopicPartition

__all__ = [
    "LATENCY_PREFIX",
    "JoinWorkload",
    "Monitor",
    "Pool",
    "produce_lines",
    "produce_records",
    "topic_record_count",
    "verify_join",
    "verify_stateless",
]

#: Values of the latency probes: they contain an "a" (so the filter keeps them); the output is the
#: upper-cased "LAT <seq> <monotonic_ns>".
LATENCY_PREFIX = b"lat "
_LAT_OUT = LATENCY_PREFIX.upper()
_WORD_SPLIT = re.compile(r"\W+", re.ASCII)  # Java's \W and Spark's split: ASCII word characters
_SEPARATORS = (" ", " ", " ", ", ", ". ", " - ", "; ", "! ")


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))


@dataclasses.dataclass
class Pool:
    """A deterministic cycle of distinct lines; record ``i`` of a topic is ``lines[i % len]``."""

    lines: list[bytes]

    @staticmethod
    def generate(size: int = 20_000, vocabulary: int = 5_000, seed: int = 6) -> Pool:
        rng = random.Random(seed)
        words = sorted({_word(rng) for _ in range(vocabulary)})
        lines = []
        for _ in range(size):
            parts = [rng.choice(words) for _ in range(rng.randint(3, 9))]
            if rng.random() < 0.3:  # some capitals, so lower() matters
                parts[0] = parts[0].capitalize()
            text = parts[0] + "".join(rng.choice(_SEPARATORS) + w for w in parts[1:])
            if text.lower().startswith(LATENCY_PREFIX.decode()):
                text = "x" + text
            lines.append(text.encode())
        return Pool(lines)

    def _multiplicity(self, start: int, count: int) -> list[int]:
        """How often each pool line occurs among records ``start .. start+count``."""
        n = len(self.lines)
        cycles, rest = divmod(count, n)
        mult = [cycles] * n
        for j in range(rest):
            mult[(start + j) % n] += 1
        return mult

    def stateless_expected(self, start: int, count: int) -> collections.Counter[bytes]:
        """Output values (with multiplicity) of filter(contains "a") + upper-case."""
        expected: collections.Counter[bytes] = collections.Counter()
        for line, m in zip(self.lines, self._multiplicity(start, count), strict=True):
            if m and b"a" in line:
                expected[line.upper()] += m
        return expected

    def stateless_count(self, start: int, count: int) -> int:
        return sum(self.stateless_expected(start, count).values())

    def word_counts(self, start: int, count: int) -> dict[bytes, int]:
        """Reference word count of records ``start .. start+count``."""
        counts: collections.Counter[bytes] = collections.Counter()
        for line, m in zip(self.lines, self._multiplicity(start, count), strict=True):
            if not m:
                continue
            for word in _WORD_SPLIT.split(line.decode().lower()):
                if word:
                    counts[word.encode()] += m
        return dict(counts)


def produce_lines(
    bootstrap: str, topic: str, pool: Pool, *, start: int, count: int, partitions: int
) -> float:
    """Write records ``start .. start+count`` of the pool round-robin over partitions; returns seconds."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "log_level": 3,
        }
    )
    lines, n = pool.lines, len(pool.lines)
    began = time.monotonic()
    produce = producer.produce
    for i in range(start, start + count):
        while True:
            try:
                produce(topic, lines[i % n], partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError(f"producing to {topic}: records left unacknowledged after 120 s")
    return time.monotonic() - began


@dataclasses.dataclass(frozen=True)
class JoinWorkload:
    """The stream-table join's input: a table of ``keys`` users (``u<k>`` -> ``region-<k % 50>``)
    and a stream whose record ``i`` is a view of user ``(i * 7919) % keys`` (a prime step: every
    key comes round, in no order a cache would like) with value ``/page/<i % 1000>``. Both are
    written to partition ``k % partitions`` (co-partitioned, as a join needs); every stream record
    finds its user, so the output has one record per stream record."""

    keys: int
    partitions: int

    def user(self, i: int) -> int:
        return (i * 7919) % self.keys

    def produce_table(self, bootstrap: str, topic: str) -> float:
        records = (
            (f"u{k}".encode(), f"region-{k % 50}".encode(), k % self.partitions, None)
            for k in range(self.keys)
        )
        return produce_records(bootstrap, topic, records)

    def produce_stream(self, bootstrap: str, topic: str, *, start: int, count: int) -> float:
        def records() -> Iterator[tuple[bytes, bytes, int, None]]:
            for i in range(start, start + count):
                k = self.user(i)
                yield b"u%d" % k, b"/page/%d" % (i % 1000), k % self.partitions, None

        return produce_records(bootstrap, topic, records())

    def expected(self, start: int, count: int) -> collections.Counter[bytes]:
        """Output values of stream records ``start .. start+count``, with multiplicity."""
        return collections.Counter(
            b"/page/%d@region-%d" % (i % 1000, self.user(i) % 50) for i in range(start, start + count)
        )


def produce_records(
    bootstrap: str, topic: str, records: Iterable[tuple[bytes, bytes, int, int | None]]
) -> float:
    """Write (key, value, partition, timestamp ms or None: the producer's clock) records; returns
    seconds."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "log_level": 3,
        }
    )
    began = time.monotonic()
    produce = producer.produce
    for key, value, partition, ts in records:
        while True:
            try:
                if ts is None:
                    produce(topic, value, key, partition=partition)
                else:
                    produce(topic, value, key, partition=partition, timestamp=ts)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError(f"producing to {topic}: records left unacknowledged after 120 s")
    return time.monotonic() - began


def verify_join(
    bootstrap: str, topic: str, partitions: int, expected: collections.Counter[bytes]
) -> list[str]:
    """Read the whole output topic again and compare its values with the expected ones."""
    return verify_stateless(bootstrap, topic, partitions, expected, 0)


def topic_record_count(bootstrap: str, topic: str, partitions: int) -> int:
    """Sum of the partitions' end offsets (for a topic written without transactions: its records)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-offsets", "log_level": 3})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        )
    finally:
        consumer.close()


class Monitor(threading.Thread):
    """Reads the output topic from the beginning and notices when a target is reached.

    ``set_target`` arms the next goal (a record count, or reference word counts); ``done`` is set
    with ``done_at`` (monotonic) when it is reached. The stateless drain only counts records (their
    contents are checked after the run by :func:`verify_stateless`, so the check costs the measured
    variant no CPU); latency probes are timed on arrival.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, wordcount: bool) -> None:
        super().__init__(name=f"monitor-{topic}", daemon=True)
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-monitor-{topic}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 5,
                "log_level": 3,
            }
        )
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.wordcount = wordcount
        self.count = 0
        self.first_at: float | None = None
        self.latencies_ms: list[tuple[int, float]] = []  # (seq, latency)
        self.latest: dict[bytes, int] = {}
        self.errors: list[str] = []
        self.done = threading.Event()
        self.done_at: float | None = None
        self._lock = threading.Lock()
        self._target_count: int | None = None
        self._target_words: dict[bytes, int] | None = None
        self._pending: set[bytes] = set()
        self._halt = threading.Event()

    def set_target(self, *, count: int | None = None, words: dict[bytes, int] | None = None) -> None:
        with self._lock:
            self.done.clear()
            self.done_at = None
            self._target_count = count
            self._target_words = words
            if words is not None:
                self._pending = {w for w, c in words.items() if self.latest.get(w) != c}
            self._check(time.monotonic())

    def _check(self, now: float) -> None:
        if self.done.is_set():
            return
        reached = (self._target_count is not None and self.count >= self._target_count) or (
            self._target_words is not None and not self._pending
        )
        if reached:
            self.done_at = now
            self.done.set()

    def run(self) -> None:
        consume = self._consumer.consume
        try:
            while not self._halt.is_set():
                batch = consume(num_messages=20_000, timeout=0.05)
                if not batch:
                    continue
                now = time.monotonic()
                now_ns = time.monotonic_ns()
                with self._lock:
                    if self.first_at is None:
                        self.first_at = now
                    self._take(batch, now_ns)
                    self._check(now)
        except Exception as exc:  # noqa: BLE001 - reported by the harness as a failed run
            self.errors.append(repr(exc))
        finally:
            self._consumer.close()

    def _take(self, batch: list, now_ns: int) -> None:  # type: ignore[type-arg]
        if self.wordcount:
            targets, pending = self._target_words or {}, self._pending
            for msg in batch:
                if msg.error():
                    self.errors.append(str(msg.error()))
                    continue
                word, raw = msg.key(), msg.value()
                value = _decode_count(raw)
                self.latest[word] = value
                if targets.get(word) == value:
                    pending.discard(word)
                elif word in targets:
                    pending.add(word)
            self.count += len(batch)
            return
        for msg in batch:
            if msg.error():
                self.errors.append(str(msg.error()))
                continue
            value = msg.value()
            if value is not None and value[:4] == _LAT_OUT:
                _, seq, sent = value.split(b" ")
                self.latencies_ms.append((int(seq), (now_ns - int(sent)) / 1e6))
            self.count += 1

    def stop(self) -> None:
        self._halt.set()
        if self.ident is None:  # never started: run() would have closed the consumer
            self._consumer.close()
        else:
            self.join(timeout=10)


def _decode_count(raw: bytes | None) -> int:
    """Kafka's LongSerializer (8 bytes big-endian); a decimal string is accepted too."""
    if raw is None:
        return -1
    if len(raw) == 8:
        return int.from_bytes(raw, "big", signed=True)
    try:
        return int(raw)
    except ValueError:
        return -2


def verify_stateless(
    bootstrap: str, topic: str, partitions: int, expected: collections.Counter[bytes], probes: int
) -> list[str]:
    """Read the whole output topic again and compare it with the expected values; returns problems."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-verify-{topic}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "log_level": 3,
        }
    )
    total = sum(expected.values()) + probes
    seen: collections.Counter[bytes] = collections.Counter()
    latency = 0
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        idle_since = time.monotonic()
        read = 0
        while read < total and time.monotonic() - idle_since < 5:
            batch = consumer.consume(num_messages=50_000, timeout=0.2)
            if batch:
                idle_since = time.monotonic()
            for msg in batch:
                value = msg.value()
                read += 1
                if value is not None and value[:4] == _LAT_OUT:
                    latency += 1
                else:
                    seen[value] += 1
        # Anything left over (duplicates) shows up on a last short poll.
        extra = consumer.consume(num_messages=1000, timeout=1.0)
        read += len(extra)
    finally:
        consumer.close()
    problems = []
    if read != total:
        problems.append(f"read {read} output records, expected {total}")
    if latency != probes:
        problems.append(f"{latency} latency probes came out, {probes} went in")
    if seen != expected:
        wrong = sum((seen - expected).values())
        missing = sum((expected - seen).values())
        problems.append(f"output values differ from the reference: {wrong} unexpected, {missing} missing")
    return problems
