"""The process ``tests.chaos`` kills: one Spark driver running four queries at once.

A stateless topology (upper-case every line) and the word count, each once with
``exactly_once_v2`` and once with ``at_least_once``, all reading the same input topic, each with
its own checkpoint under ``--workdir``. One JVM start-up (15-25 s on 2 cores) serves four
queries, so each kill -9 exercises both topologies under both guarantees. After every completed
micro-batch it prints ``progress <query> <batch id>``; ``ready`` once every query started.
"""

from __future__ import annotations

import argparse
import pathlib
import signal
import threading
import time

from streamapp.runtime import manifest
from streamapp.runtime.spark import compiler, kafka_io, runner, session, sink, stopping

WORDCOUNT = pathlib.Path(__file__).parents[1] / "runtime" / "manifest" / "valid" / "wordcount.yaml"
GUARANTEES = ("exactly_once_v2", "at_least_once")
KINDS = ("stateless", "counts")


def output_topic(source: str, kind: str, guarantee: str) -> str:
    return f"{source}.{kind}.{guarantee}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    spark = session.build_session(app_name="chaos", master="local[2]", driver_memory="1g")
    queries = {}
    for guarantee in GUARANTEES:
        for kind in KINDS:
            out = output_topic(args.source, kind, guarantee)
            checkpoint = str(pathlib.Path(args.workdir) / "checkpoints" / f"{kind}.{guarantee}")
            if kind == "stateless":
                from pyspark.sql import functions as F

                rows = kafka_io.read_stream(spark, bootstrap=args.bootstrap, topics=[args.source])
                plan = rows.select(
                    "key",
                    F.upper(F.col("value").cast("string")).cast("binary").alias("value"),
                    "headers",
                    F.lit(out).alias("topic"),
                    "timestamp",
                )
                mode = "append"
            else:
                topology = manifest.build_topology(manifest.load_manifest(WORDCOUNT))
                topology = topology.rename_topics(
                    {t: args.source for t in topology.source_topics()}
                    | {t: out for t in topology.sink_topics()}
                )
                compiled = compiler.compile_topology(
                    topology,
                    read=lambda t: kafka_io.read_stream(spark, bootstrap=args.bootstrap, topics=t),
                )
                plan, mode = compiled.plan, compiled.output_mode
            eos = (
                sink.ExactlyOnce.for_query(f"chaos-{kind}", checkpoint, "chaos")
                if guarantee == "exactly_once_v2"
                else None
            )
            queries[f"{kind}.{guarantee}"] = runner.start_kafka(
                plan,
                bootstrap=args.bootstrap,
                checkpoint=checkpoint,
                trigger=runner.Trigger(),
                query_name=f"{kind}_{guarantee}",
                output_mode=mode,
                exactly_once=eos,
            )
    stopping_asked = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping_asked.set())
    print("ready", flush=True)
    last: dict[str, int] = {}
    while not stopping_asked.is_set():
        for name, query in queries.items():
            if not query.isActive:
                raise SystemExit(f"query {name} stopped: {query.exception()}")
            progress = query.lastProgress
            if progress and last.get(name) != progress["batchId"]:
                last[name] = progress["batchId"]
                print(f"progress {name} {progress['batchId']}", flush=True)
                if all(src.get("endOffset") == src.get("latestOffset") for src in progress["sources"]):
                    print(f"caught-up {name} {progress['batchId']}", flush=True)
        time.sleep(0.1)
    # SIGTERM: every query stops at a micro-batch boundary (as the driver Pod's does).
    for name, query in queries.items():
        report = stopping.graceful_stop(query)
        print(
            f"stopped {name} {report.how} after batch {report.last_batch} in {report.seconds:.1f} s",
            flush=True,
        )
    spark.stop()


if __name__ == "__main__":
    main()
