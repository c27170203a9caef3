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
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streamapp.runtime import errors, manifest
from streamapp.runtime.kafka import security

if TYPE_CHECKING:
    import argparse

__all__ = [
    "QueryFailed",
    "cmd_describe",
    "cmd_driver",
    "cmd_run",
    "cmd_validate",
    "one_line",
    "starting_position",
]


def _resolve(path: str) -> str:
    """``path``, or the packaged example of that name when no such file exists."""
    from streamapp.runtime.cli import examples  # noqa: PLC0415

    if not pathlib.Path(path).exists():
        try:
            return str(examples.find(path))
        except KeyError:
            pass
    return path


def _load(path: str) -> Any:
    """The manifest at ``path`` (or the example so named), or exit 1 listing every problem by path."""
    path = _resolve(path)
    try:
        text = pathlib.Path(path).read_text()
    except OSError as exc:
        named = "/" not in path and not path.endswith((".yaml", ".yml"))
        hint = " (nor an example: `streamapp examples`)" if named else ""
        print(f"{path}: cannot read: {exc.strerror}{hint}", file=sys.stderr)
        raise SystemExit(2) from exc
    problems = manifest.validate_manifest(text)
    if problems:
        for problem in problems:
            print(f"{path}: {problem}", file=sys.stderr)
        print(f"{path}: {len(problems)} problem(s)", file=sys.stderr)
        raise SystemExit(1)
    return manifest.load_manifest(text)


def cmd_examples(args: argparse.Namespace) -> int:
    """List the packaged examples: name, what it does, where the manifest is."""
    from streamapp.runtime.cli import examples  # noqa: PLC0415

    for example in examples.available():
        print(f"{example.name:<14} {example.summary}")
        print(f"{'':<14} {example.path}")
    print("run one with: streamapp run NAME (describe NAME, validate NAME)")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    app = _load(args.manifest)
    print(
        f"{_resolve(args.manifest)}: valid StreamApp {app.metadata.name!r} "
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
    from streamapp.runtime import app as streamapp_app  # noqa: PLC0415

    loaded = _load(args.manifest)
    topology = manifest.build_topology(loaded)
    bootstrap = _bootstrap(loaded, args.bootstrap)
    # The embedded broker is plaintext: spec.kafka.tls/sasl are for the broker the app names.
    credentials = security.from_env(loaded.spec.kafka) if bootstrap else security.PLAINTEXT
    embedded = None
    if bootstrap is None:
        from streamapp.runtime.embedded import broker  # noqa: PLC0415

        embedded = broker.EmbeddedKafka()
        bootstrap = embedded.start()
        print(
            f"embedded Kafka {embedded.version} broker at {bootstrap} (produce to it, e.g. "
            f"kafka-console-producer.sh --bootstrap-server {bootstrap} --topic "
            f"{(topology.source_topics() or ['TOPIC'])[0]}); it stops when the run ends",
            flush=True,
        )
    try:
        from streamapp.runtime.kafka import admin  # noqa: PLC0415

        if embedded is not None:
            # A fresh broker has no topics: create the inputs (to produce to) and the outputs.
            topics = [*topology.source_topics(), *topology.sink_topics()]
            admin.create_topics(bootstrap, dict.fromkeys(dict.fromkeys(topics), 1))
        for spec in args.input or ():
            _produce_input(bootstrap, topology, spec, credentials)
        checkpoint = args.checkpoint or loaded.spec.checkpoint_location
        config = streamapp_app.StreamsConfig(
            bootstrap_servers=bootstrap,
            checkpoint_location=checkpoint,
            master=args.master,
            stop_when_idle=args.until_idle,
            credentials=credentials,
            progress_group=os.environ.get("STREAMAPP_PROGRESS_GROUP") or None,
            namespace=os.environ.get("STREAMAPP_NAMESPACE") or None,
        )
        app = streamapp_app.StreamApp(loaded, config)
        if checkpoint is None:
            print(
                "checkpoint: a fresh temporary folder, removed at exit: the input is read from the "
                "beginning (--checkpoint DIR keeps it, and a later run resumes from it)",
                flush=True,
            )
        else:
            origin = "--checkpoint" if args.checkpoint else "spec.checkpointLocation"
            print(
                f"checkpoint: {checkpoint} (from {origin}): resumes where it stopped, if it holds state",
                flush=True,
            )
        return _execute(app)
    finally:
        if embedded is not None:
            embedded.stop()


def _execute(app: Any) -> int:
    """Start ``app``, report late records and the hand-over as they happen, stop on SIGTERM/SIGINT,
    print a summary.

    The app does the rest (:meth:`StreamApp.run_until_stopped`), in a cluster with the driver's
    Lease. Returns 0 when the app stopped (a signal, ``--until-idle``, a stop while waiting for
    the Lease); raises :class:`QueryFailed` when its query failed, and an error when it lost the
    Lease.
    """
    from streamapp.runtime import app as streamapp_app  # noqa: PLC0415
    from streamapp.runtime import lease  # noqa: PLC0415

    name = app.application_id
    topology = app.topology
    print(f"starting Spark for {name!r} (takes 4-10 s) …", flush=True)
    began = time.monotonic()
    app.on_progress(_late_reporter(name))
    app.on_progress(_first_batch_reporter(name, began))
    app.on_hand_over(lambda line: print(line, flush=True))
    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: app.request_stop())
    try:
        try:
            app.start()
        except lease.Cancelled as exc:
            print(f"{name}: {exc}; the query never started", flush=True)
            return 0
        partitions = app.state_partitions
        plural = "" if partitions == 1 else "s"
        state = "" if partitions is None else f", {partitions} state partition{plural}"
        print(
            f"running {name!r}: {', '.join(topology.source_topics())} → "
            f"{', '.join(topology.sink_topics())} ({app.trigger} trigger, "
            f"{app.processing_guarantee}, checkpoint {app.checkpoint_location}{state}); "
            f"Spark and the query up in {time.monotonic() - began:.1f} s",
            flush=True,
        )
        app.run_until_stopped()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if app.stop_report is not None:
        report = app.stop_report
        print(
            f"{name}: stopped ({report.how}) after batch {report.last_batch} in {report.seconds:.1f} s",
            flush=True,
        )
    print(_summary(app), flush=True)
    if app.lease_lost is not None:
        raise errors.StreamAppError(f"{name}: stopped: {app.lease_lost}")
    if app.state is streamapp_app.State.ERROR:
        raise QueryFailed(name, app.error)
    return 0


class QueryFailed(errors.RunFailed):
    """The app's streaming query failed; the message is the cause's first line."""

    def __init__(self, name: str, cause: BaseException | None) -> None:
        self.cause = cause
        super().__init__(f"{name}: the query failed: {one_line(cause)}")


one_line = errors.one_line


def _late_reporter(name: str) -> Any:
    dropped = 0

    def report(progress: Any, _raw: Mapping[str, Any]) -> None:
        nonlocal dropped
        if progress.late != dropped:
            print(
                f"{name}: {progress.late - dropped} late record(s) dropped (beyond grace) "
                f"in batch {progress.last_batch_id}; {progress.late} since start",
                flush=True,
            )
            dropped = progress.late

    return report


def _first_batch_reporter(name: str, began: float) -> Any:
    """One line when the first micro-batch completes: how long after start, and its slowest
    phases (Spark's durationMs). What a restart or a failover costs, phase by phase."""
    done = False

    def report(progress: Any, raw: Mapping[str, Any]) -> None:
        nonlocal done
        if done:
            return
        done = True
        phases = sorted(((v, k) for k, v in (raw.get("durationMs") or {}).items() if k != "triggerExecution"))
        slowest = ", ".join(f"{k} {v / 1000:.1f} s" for v, k in reversed(phases[-4:]))
        total = (raw.get("durationMs") or {}).get("triggerExecution", 0) / 1000
        print(
            f"{name}: first micro-batch (batch {progress.last_batch_id}, {raw.get('numInputRows', 0)} "
            f"records) done {time.monotonic() - began:.1f} s after start; it took {total:.1f} s"
            + (f" ({slowest})" if slowest else ""),
            flush=True,
        )

    return report


def _summary(app: Any) -> str:
    progress = app.progress
    lines = [
        f"summary of {app.application_id!r}: {progress.batches} batch(es) in {progress.elapsed:.1f} s, "
        f"{progress.late} late record(s) dropped, {progress.skipped} skipped"
        + (f", {progress.dead_lettered} dead-lettered" if progress.dead_lettered else "")
        + (f", {progress.dropped} dropped for a null key or value" if progress.dropped else "")
    ]
    if not progress.counted:
        lines.append("  records per topic are not counted with the real-time trigger")
        return "\n".join(lines)
    for label, topics, counts in (
        ("read", app.topology.source_topics(), progress.records_read),
        ("written", app.topology.sink_topics(), progress.records_written),
    ):
        for topic in topics:
            lines.append(f"  {label:<8} {counts.get(topic, 0):>10,} record(s)  {topic}")
    for label, counts in (
        ("skipped", progress.skipped_by_topic),
        ("dead-lettered", progress.dead_lettered_by_topic),
    ):
        for topic, n in counts.items():
            lines.append(f"  {label:<8} {n:>10,} record(s)  {topic} (unreadable: deserializationErrors)")
    for node, n in progress.dropped_by_node.items():
        lines.append(f"  {'dropped':<8} {n:>10,} record(s)  at {node} ({_why_dropped(app, node)})")
    return "\n".join(lines)


def _why_dropped(app: Any, node: str) -> str:
    """What a node drops records for: a null value at a sliding-window aggregation, else a null key."""
    try:
        windows = getattr(app.topology.node(node), "windows", None)
    except KeyError:
        return "null key"
    return "null value" if windows is not None and windows.kind == "sliding" else "null key"


def _produce_input(bootstrap: str, topology: Any, spec: str, credentials: security.Credentials) -> None:
    """``--input TOPIC=FILE``: the file's lines as records (see :mod:`.inputs`)."""
    from streamapp.runtime.cli import inputs  # noqa: PLC0415

    topic, records = inputs.read(spec, topology)
    from streamapp.runtime.kafka import admin  # noqa: PLC0415

    sent = admin.produce(bootstrap, topic, records, client_config=credentials.librdkafka())
    print(f"input: {sent} record(s) from {spec.split('=', 1)[1]} produced to {topic}", flush=True)


def cmd_driver(args: argparse.Namespace) -> int:
    """In-cluster driver: Spark master and bootstrap come from the environment the operator set."""
    from streamapp.runtime import app as streamapp_app  # noqa: PLC0415

    loaded = _load(args.manifest)
    bootstrap = os.environ.get("STREAMAPP_BOOTSTRAP") or _bootstrap(loaded, None)
    if not bootstrap:
        raise errors.StreamAppError(f"{args.manifest}: spec.kafka.bootstrapServers is required in a cluster")
    checkpoint = os.environ.get("STREAMAPP_CHECKPOINT") or loaded.spec.checkpoint_location
    if not checkpoint:
        raise errors.StreamAppError(f"{args.manifest}: spec.checkpointLocation is required in a cluster")
    starting = starting_position(os.environ)
    config = streamapp_app.StreamsConfig(
        bootstrap_servers=bootstrap,
        checkpoint_location=checkpoint,
        master=os.environ.get("STREAMAPP_SPARK_MASTER") or None,
        driver_memory=os.environ.get("STREAMAPP_DRIVER_MEMORY") or None,
        starting_offsets=starting.get("startingOffsets"),
        starting_timestamp=int(starting["startingTimestamp"]) if "startingTimestamp" in starting else None,
        credentials=security.from_env(loaded.spec.kafka),
        progress_group=os.environ.get("STREAMAPP_PROGRESS_GROUP") or None,
        namespace=os.environ.get("STREAMAPP_NAMESPACE") or None,
        instance=os.environ.get("STREAMAPP_DRIVER_POD_NAME") or None,
    )
    from streamapp.runtime import lease  # noqa: PLC0415

    return _execute(streamapp_app.StreamApp(loaded, config, lease=lease.from_env(os.environ)))


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
