"""``make demo``: the word count example on a real Kafka broker and a real Spark streaming query.

Everything runs on this machine: the embedded KRaft broker and a local[2] Spark session. The
topology is the manifest shipped beside this module (``examples/wordcount.yaml``), run by the
public :class:`streamapp.runtime.StreamApp`; sample text is fed in waves and the counts table, read
back from the output topic, is shown as it updates.
"""

from __future__ import annotations

import pathlib
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
    from streamapp.runtime import app as streamapp_app  # noqa: PLC0415

    loaded = manifest.load_manifest(EXAMPLE)
    topology = manifest.build_topology(loaded)
    source, sink = topology.source_topics()[0], topology.sink_topics()[0]
    print(f"StreamApp demo: the word count example ({EXAMPLE.name}) on Kafka and Spark\n", flush=True)
    total = 4
    with broker.EmbeddedKafka() as kafka:
        _step(
            1,
            total,
            f"Apache Kafka {kafka.version} (KRaft) broker up at {kafka.bootstrap} "
            f"in {kafka.startup_seconds:.1f} s",
        )
        admin.create_topics(kafka.bootstrap, {source: 2, sink: 2})

        _step(2, total, "starting Spark (local[2]) and the query; the first start takes about 10 s …")
        started = time.monotonic()
        app = streamapp_app.StreamApp(
            loaded,
            streamapp_app.StreamsConfig(bootstrap_servers=kafka.bootstrap, application_id="demo-wordcount"),
        )
        app.start()
        try:
            _step(
                3,
                total,
                f"streaming query running after {time.monotonic() - started:.1f} s: "
                f"{source} → word count → {sink}",
            )
            print(topology.describe(), flush=True)
            _step(4, total, f"feeding {len(WAVES)} waves of text; the counts table as it updates:")
            counts: dict[str, int] = {}
            for wave, texts in enumerate(WAVES, start=1):
                admin.produce(
                    kafka.bootstrap, source, [admin.Record(key=None, value=t.encode()) for t in texts]
                )
                expected = sum(1 for t in (x for w in WAVES[:wave] for x in w) for _ in t.split())
                deadline = time.monotonic() + 300  # a first Spark batch on a busy machine
                while time.monotonic() < deadline and app.state is streamapp_app.State.RUNNING:
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
        finally:
            app.stop()
        progress = app.progress
        print(
            f"   {progress.batches} micro-batches; read {sum(progress.records_read.values())} lines, "
            f"wrote {sum(progress.records_written.values())} count updates",
            flush=True,
        )
    if app.state is streamapp_app.State.ERROR:
        raise app.error or RuntimeError("the demo's query failed")
    return 0
