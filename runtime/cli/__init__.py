"""The ``streamapp`` command: run, describe and validate manifests, fetch components, demo.

Sub-commands import what they need when they run, so ``streamapp validate`` answers in
milliseconds without starting (or even importing) Spark.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import pathlib
import sys
import traceback
from collections.abc import Sequence

__all__ = ["main"]


def _version() -> str:
    try:
        return importlib.metadata.version("streamapp")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def _cmd_setup(args: argparse.Namespace) -> int:
    from streamapp.runtime.embedded import artifacts  # noqa: PLC0415

    if not args.no_broker:
        broker = artifacts.kafka_broker_classpath()
        print(f"Kafka {artifacts.KAFKA_VERSION} broker: {len(broker)} jars")
    elif not args.class_data_archive:
        print("setup: --no-broker only changes how --class-data-archive writes the archive", file=sys.stderr)
        return 2
    connector = artifacts.spark_kafka_connector_jars()
    print(f"spark-sql-kafka-0-10 {artifacts.spark_version()}: {len(connector)} jars")
    print(f"StreamApp's JVM library: {artifacts.runtime_jar()}")
    print(f"cache: {artifacts.cache_dir()}")
    return _class_data_archive(connector, broker=not args.no_broker) if args.class_data_archive else 0


#: The archive's representative run without a broker (an image build): the word count example
#: through the TopologyTestDriver, on local Spark, as the driver would compile it.
_BROKERLESS_RUN = """
from streamapp.runtime.cli import examples
from streamapp.runtime.manifest import convert, loader
from streamapp.runtime.testing import driver
topology = convert.build_topology(loader.load_manifest(examples.find("wordcount")))
with driver.TopologyTestDriver(topology) as test:
    test.input_topic("text-lines").pipe_input(None, "the stream of words streams and TABLES")
    counts = test.output_topic("words-with-counts").read_key_value_map()
assert counts["streams"] == 1, counts
"""


def _class_data_archive(connector: list[pathlib.Path], *, broker: bool = True) -> int:
    """Write the driver's class-data archive (streamapp.runtime.spark.cds) by running the word count
    once, on an embedded broker (or, ``broker`` False, through the test driver: a build with no
    network), unless this JDK and class path have one."""
    import subprocess  # noqa: PLC0415
    import tempfile  # noqa: PLC0415
    import time  # noqa: PLC0415

    from streamapp.runtime.embedded import artifacts  # noqa: PLC0415
    from streamapp.runtime.spark import cds  # noqa: PLC0415

    # The jars a session puts on spark.jars (session.base_conf): the name the session looks for.
    path = cds.archive([*connector, artifacts.runtime_jar()])
    if path.is_file():
        print(f"class-data archive: {path} ({path.stat().st_size >> 20} MB, cached)")
        return 0
    began = time.monotonic()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="streamapp-cds-") as work:
        lines = pathlib.Path(work) / "lines.txt"
        lines.write_text("the stream of words\nstreams and tables, streams and TABLES\n")
        partial = path.with_suffix(".partial")
        env = {**os.environ, cds.DUMP_ENV: str(partial)}
        command = [sys.executable, "-m", "streamapp.runtime.cli", "run", "wordcount"]
        command += ["--input", f"text-lines={lines}", "--until-idle", "2"]
        if not broker:
            command = [sys.executable, "-c", _BROKERLESS_RUN]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, cwd=work)
        if done.returncode != 0 or not partial.is_file():
            print(done.stdout[-2000:] + done.stderr[-2000:])
            print("setup: writing the class-data archive failed (above); streamapp works without it")
            partial.unlink(missing_ok=True)
            return 1
        partial.replace(path)
    took = time.monotonic() - began
    print(f"class-data archive: wrote {path} ({path.stat().st_size >> 20} MB) in {took:.0f} s")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from streamapp.runtime.cli import demo  # noqa: PLC0415

    return demo.run()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamapp",
        description="Kafka Streams semantics on Apache Spark, operated on Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"streamapp {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    setup = sub.add_parser("setup", help="download the Kafka broker and Spark's Kafka connector (cached)")
    setup.add_argument(
        "--class-data-archive",
        action="store_true",
        help="also write the driver's class-data archive (about 30 s once; faster start-ups after)",
    )
    setup.add_argument(
        "--no-broker",
        action="store_true",
        help="with --class-data-archive: write it from a broker-less run (an image build: no Kafka "
        "download, no network)",
    )
    setup.set_defaults(func=_cmd_setup)

    demo = sub.add_parser("demo", help="word count on a real broker and a real Spark query, shown live")
    demo.set_defaults(func=_cmd_demo)
    from streamapp.runtime.cli import apps  # noqa: PLC0415 - light: no Spark until a command runs

    listing = sub.add_parser(
        "examples", help="list the example manifests (run one with `streamapp run NAME`)"
    )
    listing.set_defaults(func=apps.cmd_examples)

    validate = sub.add_parser("validate", help="check a manifest; every problem is listed by its path")
    validate.add_argument("manifest")
    validate.set_defaults(func=apps.cmd_validate)

    describe = sub.add_parser("describe", help="print the topology of a manifest")
    describe.add_argument("manifest")
    describe.set_defaults(func=apps.cmd_describe)

    run = sub.add_parser(
        "run", help="run a manifest on local Spark (embedded Kafka unless a broker is named)"
    )
    run.add_argument("manifest")
    run.add_argument("--bootstrap", help="Kafka bootstrap servers (default: the manifest's, else embedded)")
    run.add_argument(
        "--checkpoint",
        help="checkpoint folder or URI; a run resumes from it (default: the manifest's, else a fresh "
        "temporary folder each run, so the input is read from the beginning)",
    )
    run.add_argument(
        "--input",
        action="append",
        metavar="TOPIC=FILE",
        help="produce a file's records to an input topic first: lines as values, or a .jsonl file of "
        '{"key", "value", "timestamp"} objects (repeatable)',
    )
    run.add_argument(
        "--master",
        default=None,
        help="Spark master (default local[2]; with latency: low, one task slot per input partition)",
    )
    run.add_argument(
        "--until-idle",
        type=float,
        metavar="SECONDS",
        help="stop after no input arrived for this long (batch-like runs, reprocessing)",
    )
    run.set_defaults(func=apps.cmd_run)

    driver = sub.add_parser("driver", help="in-cluster entrypoint of the operator's driver Pod")
    driver.add_argument("--manifest", required=True)
    driver.set_defaults(func=apps.cmd_driver)
    for command in (setup, demo, listing, validate, describe, run, driver):
        command.add_argument(
            "--debug", action="store_true", help="on an error, show the traceback (and Spark's full error)"
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SystemExit:
        raise
    except Exception as exc:  # noqa: BLE001 - every error ends in one line naming what failed
        if getattr(args, "debug", False):
            traceback.print_exc()
            cause = getattr(exc, "cause", None)
            if cause is not None:
                print(f"caused by: {cause}", file=sys.stderr)
        line = f"streamapp {args.command}: {_explain(exc)}"
        print(line, file=sys.stderr)
        if args.command == "driver":
            _termination_message(line)
        return _exit_code(exc)


#: Where Kubernetes reads a container's termination message (the Pod's default
#: terminationMessagePath): the operator shows it in the app's status when the driver fails.
TERMINATION_LOG = "/dev/termination-log"


def _termination_message(line: str) -> None:
    path = pathlib.Path(TERMINATION_LOG)
    if path.is_file():  # in a Pod; never created elsewhere
        with contextlib.suppress(OSError):
            path.write_text(line[:4096])


def _exit_code(exc: BaseException) -> int:
    """2: the input or configuration is wrong (nothing ran); 1: running failed."""
    from streamapp.runtime import errors  # noqa: PLC0415

    if isinstance(exc, errors.StreamAppError) and not isinstance(exc, errors.RunFailed):
        return 2
    return 1


def _explain(exc: BaseException) -> str:
    """One line: the component that failed and its message (the field, record or topic it names)."""
    from streamapp.runtime import errors  # noqa: PLC0415
    from streamapp.runtime.cli import apps  # noqa: PLC0415
    from streamapp.runtime.embedded import errors as embedded_errors  # noqa: PLC0415

    if isinstance(exc, errors.ManifestError):
        return "; ".join(str(p) for p in exc.problems) or str(exc)
    if isinstance(exc, errors.StreamAppError):
        return _first(str(exc))
    if isinstance(exc, embedded_errors.EmbeddedError):
        return f"embedded Kafka: {_first(str(exc))}"
    module = type(exc).__module__ or ""
    if module.startswith("confluent_kafka") or "KafkaException" in type(exc).__name__:
        return f"Kafka: {_first(str(exc))}"
    if module.startswith(("pyspark", "py4j")):
        return f"Spark: {apps.one_line(exc)}"
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {exc}"
    return f"{type(exc).__name__}: {_first(str(exc))}"


def _first(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else "unknown error")[:500]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
