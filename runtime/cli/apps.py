"""``streamapp validate | describe | run | driver``: one manifest, checked, explained or run.

``validate`` and ``describe`` never start a JVM; ``run`` starts local Spark and, when neither the
manifest nor ``--bootstrap`` names a broker, the embedded Kafka broker; ``driver`` is the
in-cluster entrypoint the operator's driver Pod runs. Both connect with the credentials
``spec.kafka.tls``/``sasl`` name, read from the ``STREAMAPP_KAFKA_*`` variables
(:mod:`kafka.security`): the operator sets them from the Secrets, a local run from the shell.
"""

from __future__ import annotations

import os
import pathlib
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streamapp.runtime import errors, manifest
from streamapp.runtime.kafka import security

if TYPE_CHECKING:
    import argparse

__all__ = ["cmd_describe", "cmd_driver", "cmd_run", "cmd_validate", "starting_position"]


def _load(path: str) -> Any:
    """The manifest at ``path``, or exit 1 listing every problem by manifest path."""
    try:
        text = pathlib.Path(path).read_text()
    except OSError as exc:
        print(f"{path}: cannot read: {exc.strerror}", file=sys.stderr)
        raise SystemExit(2) from exc
    problems = manifest.validate_manifest(text)
    if problems:
        for problem in problems:
            print(f"{path}: {problem}", file=sys.stderr)
        print(f"{path}: {len(problems)} problem(s)", file=sys.stderr)
        raise SystemExit(1)
    return manifest.load_manifest(text)


def cmd_validate(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    app = _load(args.manifest)
    print(
        f"{args.manifest}: valid StreamApp {app.metadata.name!r} "
        f"({(time.perf_counter() - started) * 1000:.0f} ms)"
    )
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    app = _load(args.manifest)
    print(manifest.build_topology(app).describe(), end="")
    return 0


def _bootstrap(app: Any, override: str | None) -> str | None:
    return override or (app.spec.kafka.bootstrap_servers if app.spec.kafka else None)


def cmd_run(args: argparse.Namespace) -> int:
    """Run locally: local Spark, the given broker or an embedded one; Ctrl-C stops cleanly."""
    app = _load(args.manifest)
    topology = manifest.build_topology(app)
    bootstrap = _bootstrap(app, args.bootstrap)
    # The embedded broker is plaintext: spec.kafka.tls/sasl are for the broker the app names.
    credentials = security.from_env(app.spec.kafka) if bootstrap else security.PLAINTEXT
    embedded = None
    if bootstrap is None:
        from streamapp.runtime.embedded import broker  # noqa: PLC0415

        embedded = broker.EmbeddedKafka()
        bootstrap = embedded.start()
        print(f"embedded Kafka {embedded.version} broker at {bootstrap}", flush=True)
    try:
        from streamapp.runtime.kafka import admin  # noqa: PLC0415

        client = credentials.librdkafka()
        missing = [
            t
            for t in topology.source_topics()
            if t not in admin.partition_counts(bootstrap, [t], client_config=client)
        ]
        if missing and embedded is not None:
            admin.create_topics(bootstrap, dict.fromkeys(missing, 1))
        checkpoint = (
            args.checkpoint
            or app.spec.checkpoint_location
            or str(pathlib.Path(tempfile.gettempdir()) / "streamapp" / app.metadata.name / "checkpoint")
        )
        master = args.master or "local[2]"
        if args.master is None and topology.trigger()[0] == "real-time":
            # The real-time trigger runs one long-lived task per input partition, all at once: a
            # local run needs that many task slots (threads; the cores are shared).
            inputs = admin.partition_counts(bootstrap, topology.source_topics(), client_config=client)
            master = f"local[{max(2, sum(inputs.values()))}]"
        return _run_query(
            app,
            topology,
            bootstrap=bootstrap,
            checkpoint=checkpoint,
            master=master,
            until_idle=args.until_idle,
            credentials=credentials,
        )
    finally:
        if embedded is not None:
            embedded.stop()


def _run_query(
    app: Any,
    topology: Any,
    *,
    bootstrap: str,
    checkpoint: str,
    master: str | None,
    until_idle: float | None,
    starting: Mapping[str, str] | None = None,
    driver_memory: str | None = None,
    credentials: security.Credentials = security.PLAINTEXT,
) -> int:
    """Run the app's query until it fails, is interrupted (SIGINT/SIGTERM) or has been idle.

    ``starting`` holds the Kafka source's start options (``startingOffsets`` or
    ``startingTimestamp``); Spark applies them only when the checkpoint is new.
    """
    from streamapp.runtime.kafka import admin  # noqa: PLC0415
    from streamapp.runtime.spark import (  # noqa: PLC0415
        checkpoints,
        compiler,
        kafka_io,
        query_metrics,
        runner,
        session,
    )

    inputs = admin.partition_counts(
        bootstrap, topology.source_topics(), client_config=credentials.librdkafka()
    )
    print(f"starting Spark for {app.metadata.name!r} (first start takes about 10 s) …", flush=True)
    spark = session.build_session(
        app_name=app.metadata.name,
        master=master,
        conf=dict(app.spec.spark_conf or {}),
        driver_memory=driver_memory or session.DEFAULT_DRIVER_MEMORY,
    )
    state_partitions = checkpoints.state_partitions(
        spark, checkpoint, requested=app.spec.state_partitions, default=max(inputs.values(), default=1)
    )
    compiled = compiler.compile_topology(
        topology,
        read=lambda topics: kafka_io.read_stream(
            spark,
            bootstrap=bootstrap,
            topics=topics,
            starting_offsets=dict(starting or {}).get("startingOffsets", "earliest"),
            options={k: v for k, v in (starting or {}).items() if k != "startingOffsets"},
            client_config=credentials.java(),
        ),
    )
    instrumented = query_metrics.attach(spark, compiled, topology=topology, app=app, checkpoint=checkpoint)
    query = runner.start_kafka(
        instrumented.plan,
        bootstrap=bootstrap,
        checkpoint=checkpoint,
        trigger=compiled.trigger,
        query_name=app.metadata.name,
        output_mode=compiled.output_mode,
        prints=compiled.prints,
        producer_config=credentials.java(),
    )
    print(
        f"running {app.metadata.name!r}: {', '.join(topology.source_topics())} → "
        f"{', '.join(topology.sink_topics())} ({compiled.trigger.kind} trigger, checkpoint {checkpoint}"
        + (f", {state_partitions} state partitions)" if topology.stateful() else ")"),
        flush=True,
    )
    reporter = _progress_reporter(app, bootstrap, credentials.librdkafka())
    dropped = 0
    stop = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    try:
        idle_since: float | None = None  # counts only once a first batch completed
        last_batch = -1
        last_seen = None
        while query.isActive and not stop:
            query.awaitTermination(1)
            progress = query.lastProgress
            if progress and progress["timestamp"] != last_seen:
                last_seen = progress["timestamp"]
                _report(reporter, progress)
            else:
                _report(reporter, None)
            if progress and progress["batchId"] != last_batch:
                last_batch = progress["batchId"]
                late = sum(counter.value for counter in compiled.late.values())
                if late != dropped:
                    print(
                        f"{app.metadata.name}: {late - dropped} late record(s) dropped (beyond grace) "
                        f"in batch {last_batch}; {late} since start",
                        flush=True,
                    )
                    dropped = late
                if idle_since is None or progress.get("numInputRows"):
                    idle_since = time.monotonic()
            if (
                until_idle is not None
                and idle_since is not None
                and time.monotonic() - idle_since > until_idle
            ):
                break
    except KeyboardInterrupt:
        pass
    reporter.min_interval = 0
    _report(reporter, None)  # the last batch, if the throttle held it back
    reporter.close()
    if query.exception() is not None:
        print(f"{app.metadata.name}: query failed: {query.exception()}", file=sys.stderr)
        spark.stop()
        return 1
    query.stop()
    spark.stop()
    return 0


def _progress_reporter(app: Any, bootstrap: str, config: Mapping[str, str]) -> Any:
    """Commits each batch's end offsets to the app's consumer group (see :mod:`kafka.progress`)."""
    from streamapp.runtime.kafka import progress  # noqa: PLC0415

    group = os.environ.get("STREAMAPP_PROGRESS_GROUP") or progress.group_id(
        app.metadata.name, os.environ.get("STREAMAPP_NAMESPACE") or app.metadata.namespace
    )
    return progress.Reporter(bootstrap, group, config=config)


def _report(reporter: Any, spark_progress: Any) -> None:
    """Hand a batch's progress to the reporter (None: retry a held-back commit); a failure is
    logged once, never raised: the checkpoint, not the group, is where processing resumes."""
    from confluent_kafka import KafkaException  # noqa: PLC0415

    from streamapp.runtime.kafka import progress  # noqa: PLC0415

    try:
        reporter.report(None if spark_progress is None else progress.from_spark_progress(spark_progress))
    except (KafkaException, TimeoutError) as exc:
        if not reporter.warned:
            print(
                f"warning: progress of this app could not be committed to consumer group "
                f"{reporter.group!r} (lag in status and Kafka tools stays stale): {exc}",
                file=sys.stderr,
                flush=True,
            )
            reporter.warned = True


def cmd_driver(args: argparse.Namespace) -> int:
    """In-cluster driver: Spark master and bootstrap come from the environment the operator set."""
    app = _load(args.manifest)
    topology = manifest.build_topology(app)
    bootstrap = os.environ.get("STREAMAPP_BOOTSTRAP") or _bootstrap(app, None)
    if not bootstrap:
        raise errors.StreamAppError(f"{args.manifest}: spec.kafka.bootstrapServers is required in a cluster")
    checkpoint = os.environ.get("STREAMAPP_CHECKPOINT") or app.spec.checkpoint_location
    if not checkpoint:
        raise errors.StreamAppError(f"{args.manifest}: spec.checkpointLocation is required in a cluster")
    return _run_query(
        app,
        topology,
        bootstrap=bootstrap,
        checkpoint=checkpoint,
        master=os.environ.get("STREAMAPP_SPARK_MASTER"),
        until_idle=None,
        starting=starting_position(os.environ),
        driver_memory=os.environ.get("STREAMAPP_DRIVER_MEMORY") or None,
        credentials=security.from_env(app.spec.kafka),
    )


def starting_position(env: Mapping[str, str]) -> dict[str, str]:
    """Where a new checkpoint starts reading (a reset): the operator's STREAMAPP_STARTING_* variables."""
    if env.get("STREAMAPP_STARTING_TIMESTAMP"):
        millis = env["STREAMAPP_STARTING_TIMESTAMP"]
        if not millis.isdigit():
            raise errors.StreamAppError(
                f"STREAMAPP_STARTING_TIMESTAMP must be epoch milliseconds, not {millis!r}"
            )
        return {"startingTimestamp": millis}
    offsets = env.get("STREAMAPP_STARTING_OFFSETS")
    if offsets:
        if offsets not in ("earliest", "latest"):
            raise errors.StreamAppError(
                f"STREAMAPP_STARTING_OFFSETS must be earliest or latest, not {offsets!r}"
            )
        return {"startingOffsets": offsets}
    return {}
