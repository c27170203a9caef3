"""The operator's own Prometheus metrics: is it reconciling, how often does it fail, how long does it take.

App-level metrics (records, lag, batch durations) come from the drivers; these only describe the
operator, so an alert on them means the operator, not an app, needs attention. One registry per
process, served on the metrics port by :func:`serve`.
"""

from __future__ import annotations

from collections.abc import Mapping

import prometheus_client

__all__ = [
    "APPS",
    "DURATION",
    "ERRORS",
    "PHASES",
    "RECONCILES",
    "REGISTRY",
    "SKIPPED",
    "exposition",
    "serve",
    "set_phases",
]

REGISTRY = prometheus_client.CollectorRegistry()

RECONCILES = prometheus_client.Counter(
    "streamapp_operator_reconciliations",
    "Reconciliations of StreamApps, by trigger (create, update, resume, timer, delete, pod, node, lease).",
    ["trigger"],
    registry=REGISTRY,
)
SKIPPED = prometheus_client.Counter(
    "streamapp_operator_events_skipped",
    "Events that started no reconciliation, by trigger: a Pod change no reconciliation reads, or one "
    "a reconciliation already waiting to start will see.",
    ["trigger"],
    registry=REGISTRY,
)
ERRORS = prometheus_client.Counter(
    "streamapp_operator_reconcile_errors",
    "Reconciliations that failed, by trigger and error kind (invalid_spec, cluster, kafka, other).",
    ["trigger", "kind"],
    registry=REGISTRY,
)
DURATION = prometheus_client.Histogram(
    "streamapp_operator_reconcile_duration_seconds",
    "Time one reconciliation took, by trigger.",
    ["trigger"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
APPS = prometheus_client.Gauge(
    "streamapp_operator_apps",
    "StreamApps this operator manages, by phase.",
    ["phase"],
    registry=REGISTRY,
)

#: Every phase is exported, also at zero, so a dashboard never confuses "none" with "unknown".
PHASES = ("Pending", "Running", "Suspended", "Failed", "Upgrading")


def set_phases(phase_of: Mapping[str, str]) -> None:
    """Set the per-phase gauge from ``{namespace/name: phase}`` of every app known to the operator."""
    counts = dict.fromkeys(PHASES, 0)
    for phase in phase_of.values():
        counts[phase] = counts.get(phase, 0) + 1
    for phase, count in counts.items():
        APPS.labels(phase=phase).set(count)


def serve(port: int, *, addr: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` from a background thread."""
    prometheus_client.start_http_server(port, addr=addr, registry=REGISTRY)


def exposition() -> bytes:
    """Every metric in Prometheus' text format (what ``/metrics`` serves)."""
    return prometheus_client.generate_latest(REGISTRY)
