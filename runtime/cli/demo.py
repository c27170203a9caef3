"""``make demo``: seed 000's word count on a real Kafka broker and a real Spark streaming query.

Everything runs on this machine: the embedded KRaft broker and a local[2] Spark session. The
topology is the manifest shipped beside this module (``examples/wordcount.yaml``); sample text is
fed in waves and the counts table, read back from the output topic, is shown as it updates.
"""

from __future__ import annotations

import pathlib
import tempfile
import time

from streamapp.runtime import manifest
from streamapp.runtime.embedded import broker
from streamapp.runtime.kafka import admin

__all__ = ["EXAMPLE", "WAVES", "run"]

EXAMPLE = pathlib.Path(__file__).with_name("examples") / "wordcount.yaml"

WAVES = [
    ["all streams flow into tables", "a table is a stream's latest value per key"],
    ["the stream of words", "counts the words of the stream", "Tables and streams, streams and tables"],
    ["late words still count", "every word counts"],
]


def _step(n: int, total: int, text: str) -> None:
    print(f"[{n}/{total}] {text}", flush=True)


def _table(counts: dict[str, int]) -> str:
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:12]
    return "\n".join(f"      {word:<10} {count:>3}  {'#' * count}" for word, count in top)


def run(*, lines: int = 0) -> int:
    app = manifest.load_manifest(EXAMPLE)
    topology = manifest.build_topology(app)
    source, sink = topology.source_topics()[0], topology.sink_topics()[0]
    print(f"StreamApp demo: seed 000's word count ({EXAMPLE.name}) on Kafka and Spark\n", flush=True)
    total = 4
    with broker.EmbeddedKafka() as kafka, tempfile.TemporaryDirectory(prefix="streamapp-demo-") as tmp:
        _step(
            1,
            total,
            f"Apache Kafka {kafka.version} (KRaft) broker up at {kafka.bootstrap} "
            f"in {kafka.startup_seconds:.1f} s",
        )
        admin.create_topics(kafka.bootstrap, {source: 2, sink: 2})

        _step(2, total, "starting Spark (local[2]); the first start takes about 10 s …")
        started = time.monotonic()
        from streamapp.runtime.spark import compiler, kafka_io, runner, session  # noqa: PLC0415 - slow import

        spark = session.build_session(app_name="streamapp-demo")
        print(f"      Spark {spark.version} ready in {time.monotonic() - started:.1f} s", flush=True)
        try:
            compiled = compiler.compile_topology(
                topology,
                read=lambda t, max_offsets_per_trigger=None: kafka_io.read_stream(
                    spark,
                    bootstrap=kafka.bootstrap,
                    topics=t,
                    max_offsets_per_trigger=max_offsets_per_trigger,
                ),
            )
            query = runner.start_kafka(
                compiled.plan,
                bootstrap=kafka.bootstrap,
                checkpoint=f"{tmp}/checkpoint",
                trigger=compiled.trigger,
                query_name="demo-wordcount",
                output_mode=compiled.output_mode,
                prints=compiled.prints,
            )
            _step(3, total, f"streaming query running: {source} → word count → {sink}")
            print(topology.describe(), flush=True)
            _step(4, total, f"feeding {len(WAVES)} waves of text; the counts table as it updates:")
            counts: dict[str, int] = {}
            for wave, texts in enumerate(WAVES, start=1):
                admin.produce(
                    kafka.bootstrap, source, [admin.Record(key=None, value=t.encode()) for t in texts]
                )
                expected = sum(1 for t in (x for w in WAVES[:wave] for x in w) for _ in t.split())
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    for record in admin.consume(kafka.bootstrap, sink, idle=0.5, timeout=5):
                        counts[(record.key or b"").decode()] = int.from_bytes(record.value or b"", "big")
                    if sum(counts.values()) >= expected:
                        break
                print(
                    f"\n   after wave {wave} ({len(texts)} lines): {sum(counts.values())} words, "
                    f"{len(counts)} distinct",
                    flush=True,
                )
                print(_table(counts), flush=True)
            print(
                "\nEvery count went through a real Kafka broker and a stateful Spark query (RocksDB state)."
            )
            query.processAllAvailable()
            query.stop()
        finally:
            spark.stop()
    return 0
