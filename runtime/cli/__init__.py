"""The ``streamapp`` command: run, describe and validate manifests, fetch components, demo.

Sub-commands import what they need when they run, so ``streamapp validate`` answers in
milliseconds without starting (or even importing) Spark.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _version() -> str:
    try:
        return importlib.metadata.version("streamapp")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def _cmd_setup(args: argparse.Namespace) -> int:
    from streamapp.runtime.embedded import artifacts  # noqa: PLC0415

    broker = artifacts.kafka_broker_classpath()
    connector = artifacts.spark_kafka_connector_jars()
    print(f"Kafka {artifacts.KAFKA_VERSION} broker: {len(broker)} jars")
    print(f"spark-sql-kafka-0-10 {artifacts.spark_version()}: {len(connector)} jars")
    print(f"cache: {artifacts.cache_dir()}")
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
    setup.set_defaults(func=_cmd_setup)

    demo = sub.add_parser("demo", help="word count on a real broker and a real Spark query, shown live")
    demo.set_defaults(func=_cmd_demo)
    from streamapp.runtime.cli import apps  # noqa: PLC0415 - light: no Spark until a command runs

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
        "--checkpoint", help="checkpoint folder or URI (default: the manifest's, else a temp folder)"
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from streamapp.runtime import errors  # noqa: PLC0415

    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except errors.KafkaCredentialsError as exc:
        # The message names the manifest field and where the material was looked for: no traceback.
        print(f"streamapp {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
