"""TopologyTestDriver: run a topology on local Spark against records you give it, no broker.

Like Kafka Streams' ``TopologyTestDriver``, it lets users unit-test a topology in a second:

    driver = TopologyTestDriver(topology)
    lines = driver.input_topic("text-lines")
    lines.pipe_input("k1", "Hello World", timestamp=1000)
    counts = driver.output_topic("counts", value_serde="long")
    assert counts.read_key_values() == [("hello", 1), ("world", 1)]

The topology is compiled exactly as for Kafka; only the source (Parquet files, one per
``pipe_input``/``pipe_records`` call, each a micro-batch) and the sink (rows collected in this
process) differ. The real-Kafka tests exist beside it, not instead of it.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import struct
import tempfile
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from streamapp.runtime import errors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamapp.runtime.topology import Topology

__all__ = [
    "OutputRecord",
    "TestInputTopic",
    "TestOutputTopic",
    "TopologyTestDriver",
    "deserialize",
    "serialize",
]


def serialize(value: Any, serde: str) -> bytes | None:
    """Python value → bytes, as Kafka's serializer for ``serde`` writes it."""
    if value is None:
        return None
    if serde == "string":
        return str(value).encode()
    if serde == "bytes":
        return bytes(value)
    if serde == "int":
        return struct.pack(">i", value)
    if serde == "long":
        return struct.pack(">q", value)
    if serde == "double":
        return struct.pack(">d", value)
    if serde == "json":
        return value.encode() if isinstance(value, str) else json.dumps(value).encode()
    raise ValueError(f"unknown serde {serde!r}")


def deserialize(data: bytes | None, serde: str) -> Any:
    """bytes → Python value, as Kafka's deserializer for ``serde`` reads it."""
    if data is None:
        return None
    if serde == "string":
        return data.decode()
    if serde == "bytes":
        return data
    if serde == "int":
        return struct.unpack(">i", data)[0]
    if serde == "long":
        return struct.unpack(">q", data)[0]
    if serde == "double":
        return struct.unpack(">d", data)[0]
    if serde == "json":
        return json.loads(data)
    raise ValueError(f"unknown serde {serde!r}")


@dataclasses.dataclass(frozen=True)
class OutputRecord:
    key: Any
    value: Any
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


class TestInputTopic:
    """Pipe records into one input topic; each call becomes one micro-batch."""

    __test__ = False  # not a pytest test class

    def __init__(self, driver: TopologyTestDriver, name: str, key_serde: str, value_serde: str) -> None:
        self._driver, self.name = driver, name
        self.key_serde, self.value_serde = key_serde, value_serde
        self._clock = 0

    def pipe_input(
        self,
        key: Any,
        value: Any,
        *,
        timestamp: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        partition: int = 0,
    ) -> None:
        self.pipe_records([(key, value, timestamp, tuple(headers), partition)])

    def pipe_records(self, records: Iterable[tuple[Any, ...]]) -> None:
        """Tuples of (key, value[, timestamp[, headers[, partition]]]) written as one batch."""
        from streamapp.runtime.spark import filetopics  # noqa: PLC0415

        batch = []
        for item in records:
            key, value, *rest = item
            timestamp = rest[0] if rest and rest[0] is not None else self._clock
            self._clock = max(self._clock, timestamp)
            headers = tuple(rest[1]) if len(rest) > 1 else ()
            partition = rest[2] if len(rest) > 2 else 0
            batch.append(
                filetopics.InputRecord(
                    key=serialize(key, self.key_serde),
                    value=serialize(value, self.value_serde),
                    timestamp_ms=timestamp,
                    headers=headers,
                    partition=partition,
                )
            )
        self._driver._topics.append(self.name, batch)


class TestOutputTopic:
    """Read what the topology wrote to one output topic (runs the pending input first)."""

    __test__ = False

    def __init__(self, driver: TopologyTestDriver, name: str, key_serde: str, value_serde: str) -> None:
        self._driver, self.name = driver, name
        self.key_serde, self.value_serde = key_serde, value_serde
        self._read = 0

    def read_records(self) -> list[OutputRecord]:
        """Every record not read yet, in output order."""
        rows = [r for r in self._driver._drain() if r["topic"] == self.name]
        new, self._read = rows[self._read :], len(rows)
        return [
            OutputRecord(
                key=deserialize(_bytes(r["key"]), self.key_serde),
                value=deserialize(_bytes(r["value"]), self.value_serde),
                timestamp=int(r["_ts_ms"]) if r["_ts_ms"] is not None else 0,
                headers=tuple((h["key"], _bytes(h["value"])) for h in (r["headers"] or ())),
            )
            for r in new
        ]

    def read_key_values(self) -> list[tuple[Any, Any]]:
        return [(r.key, r.value) for r in self.read_records()]

    def read_key_value_map(self) -> dict[Any, Any]:
        """The latest value per key (a table's view of the output)."""
        return {r.key: r.value for r in self.read_records()}


def _bytes(raw: Any) -> bytes | None:
    return None if raw is None else bytes(raw)


class TopologyTestDriver:
    """Compile ``topology`` against file topics and drain them through local Spark on demand."""

    def __init__(
        self, topology: Topology, *, spark: SparkSession | None = None, workdir: pathlib.Path | None = None
    ) -> None:
        from streamapp.runtime.spark import filetopics, session  # noqa: PLC0415

        self.topology = topology
        self._own_dir = workdir is None
        self.workdir = workdir or pathlib.Path(tempfile.mkdtemp(prefix="streamapp-ttd-"))
        self._topics = filetopics.FileTopics(self.workdir / "topics")
        self.spark = spark or session.build_session(app_name="streamapp-test-driver")
        self._rows: list[Any] = []
        self._query_rounds = 0

    def input_topic(
        self, name: str, *, key_serde: str | None = None, value_serde: str | None = None
    ) -> TestInputTopic:
        key, value = self.topology.source_serdes(name)
        self._topics.folder(name)
        return TestInputTopic(self, name, key_serde or key, value_serde or value)

    def output_topic(
        self, name: str, *, key_serde: str | None = None, value_serde: str | None = None
    ) -> TestOutputTopic:
        key, value = self.topology.sink_serdes(name)
        return TestOutputTopic(self, name, key_serde or key, value_serde or value)

    def _read(self, topics: Sequence[str], /, *, max_offsets_per_trigger: int | None = None) -> Any:
        if max_offsets_per_trigger is not None:
            raise errors.TopologyError(
                f"maxOffsetsPerTrigger of {', '.join(topics)}: the test driver runs one micro-batch per "
                "pipe of input and cannot limit it; use a real broker (streamapp run) to test back-pressure"
            )
        return self._topics.read_stream(self.spark, topics)

    def _drain(self) -> list[Any]:
        """Run the query over all input piped so far (state carries over between calls)."""
        from streamapp.runtime.spark import compiler, runner  # noqa: PLC0415

        compiled = compiler.compile_topology(self.topology, read=self._read)
        collector = runner.Collector()
        query = runner.start_collecting(
            compiled.plan,
            checkpoint=str(self.workdir / "checkpoint"),
            collector=collector,
            output_mode=compiled.output_mode,
        )
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"the topology failed in the test driver: {query.exception()}")
        self._rows.extend(r.asDict(recursive=False) for r in collector.rows)
        return self._rows

    def close(self) -> None:
        for query in self.spark.streams.active:
            query.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
