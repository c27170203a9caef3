"""``python -m streamapp.operator``: run the operator (kopf) with its liveness and metrics endpoints.

    python -m streamapp.operator                       # every namespace (needs cluster-wide RBAC)
    python -m streamapp.operator -n apps -n team-b     # only these namespaces
    python -m streamapp.operator --liveness-port 8080 --metrics-port 9090

Kubernetes credentials: in-cluster, else ``$KUBECONFIG``/``~/.kube/config``. Environment:
``STREAMAPP_RUNTIME_IMAGE`` (default image of drivers and executors), ``STREAMAPP_IMAGE_PULL_POLICY``,
``STREAMAPP_RECONCILE_INTERVAL`` (seconds between re-checks of partitions and drivers, default 30).
"""

from __future__ import annotations

import argparse
import faulthandler
import signal
import sys

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m streamapp.operator", description=__doc__.splitlines()[0])
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "-n", "--namespace", action="append", default=[], help="watch this namespace (repeatable)"
    )
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace (default)")
    parser.add_argument("--liveness-port", type=int, default=8080, help="serves /healthz (0: off)")
    parser.add_argument("--metrics-port", type=int, default=9090, help="serves /metrics (0: off)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every handler step")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    import kopf  # noqa: PLC0415 - `--help` stays instant

    from streamapp.operator import handlers, metrics  # noqa: PLC0415, F401 - registers the handlers

    # `kill -USR1 <pid>` writes every thread's stack to stderr: what a stuck handler waits on.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    kopf.configure(verbose=args.verbose)
    if args.metrics_port:
        metrics.serve(args.metrics_port)
    kopf.run(
        clusterwide=not args.namespace,
        namespaces=args.namespace,
        liveness_endpoint=f"http://0.0.0.0:{args.liveness_port}/healthz" if args.liveness_port else None,
        standalone=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
