"""How the operator runs an app in a cluster (``spec.deployment``); ignored by local runs.

Resources follow Spark's model rather than a Pod's, because Spark sizes its executor pods itself:
``memory`` is the JVM heap (``512m``, ``2g``) and the pod gets heap + overhead as both request and
limit (Spark never sets a memory limit different from the request); CPU has a request and an
optional limit. Executor counts are bounds: the operator picks a count from the partitions of the
input topics, unless ``executors.replicas`` pins it (that is the field ``kubectl scale`` sets).
"""

from __future__ import annotations

import datetime
from typing import Literal

import pydantic

from streamapp.runtime.manifest import base
from streamapp.runtime.topology import durations

__all__ = ["Autoscale", "Deployment", "Executors", "Reset", "Resources", "RoleResources"]


_Model = base.CamelModel
#: The shortest progressDeadline accepted: a driver's start alone takes 10-30 s.
MIN_PROGRESS_DEADLINE_MS = 30_000

#: Spark's size syntax (``spark.driver.memory``): a number with an optional k/m/g/t suffix.
_JVM_SIZE = r"^[0-9]+[kmgtKMGT]?$"
#: A Kubernetes CPU quantity: whole cores (``2``), decimals (``0.5``) or millicores (``500m``).
_CPU = r"^([0-9]+(\.[0-9]+)?|[0-9]+m)$"


class RoleResources(_Model):
    """CPU and memory of the driver or of each executor."""

    cpu: str | None = pydantic.Field(
        default=None,
        pattern=_CPU,
        description="CPU request, a Kubernetes quantity ('500m', '1', '2'). Driver default 1; "
        "executor default: executors.coresPerExecutor.",
    )
    cpu_limit: str | None = pydantic.Field(
        default=None, pattern=_CPU, description="CPU limit, a Kubernetes quantity; unset means no limit."
    )
    memory: str | None = pydantic.Field(
        default=None,
        pattern=_JVM_SIZE,
        description="JVM heap in Spark's syntax ('512m', '2g'); default 1g. The pod's memory request "
        "and limit are heap + overhead.",
    )
    memory_overhead: str | None = pydantic.Field(
        default=None,
        pattern=_JVM_SIZE,
        description="Memory beyond the heap (Python workers, off-heap, RocksDB) in Spark's syntax; "
        "default: the larger of 384m and 40% of the heap.",
    )


class Resources(_Model):
    """Resources of the driver and of each executor."""

    driver: RoleResources = pydantic.Field(
        default_factory=RoleResources, description="The driver Pod (runs the query planner and Python)."
    )
    executor: RoleResources = pydantic.Field(
        default_factory=RoleResources, description="Each executor Pod (runs the tasks and the state store)."
    )


_rules = base.cel_rules


class Executors(_Model):
    """How many executors the app runs, and how many tasks each runs at once."""

    model_config = _rules(
        ("!has(self.min) || !has(self.max) || self.min <= self.max", "min must not be greater than max")
    )

    min: int = pydantic.Field(default=1, ge=1, description="Fewest executors, whatever the partitions.")
    max: int = pydantic.Field(default=8, ge=1, description="Most executors, whatever the partitions.")
    cores_per_executor: int = pydantic.Field(
        default=1,
        ge=1,
        description="Task slots per executor (spark.executor.cores); one input partition needs one slot.",
    )
    replicas: int | None = pydantic.Field(
        default=None,
        ge=1,
        description="A fixed executor count that turns partition-based sizing off (set by `kubectl scale`); "
        "unset: ceil(input partitions / coresPerExecutor), bounded by min and max.",
    )

    @pydantic.model_validator(mode="after")
    def _bounds(self) -> Executors:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self


#: The shortest stabilizationWindow accepted: a rescale is a driver hand-over of 30-60 s.
MIN_STABILIZATION_WINDOW_MS = 10_000


class Autoscale(_Model):
    """Executors from the app's load, within ``executors.min`` and the input's partitions per core.

    The operator reads the app's input rate and lag from the progress its driver commits to Kafka
    after each micro-batch, and recommends ``ceil(demand / (recordsPerSecondPerCore ×
    coresPerExecutor))`` executors, where demand is the input rate plus the lag above ``targetLag``
    worked off within one stabilization window. It scales up once every recommendation of the last
    quarter window asks for more, and down once every recommendation of the whole window asked
    for fewer (as the HorizontalPodAutoscaler's stabilization), never while a rollout runs.
    """

    records_per_second_per_core: int = pydantic.Field(
        ge=1,
        description="Input records per second one task slot is sized for (measure your app: e.g. "
        "its records/s at 70% CPU of one core).",
    )
    target_lag: int = pydantic.Field(
        default=0,
        ge=0,
        description="Records behind the end of the input that need no extra executors; lag above it "
        "is worked off within one stabilizationWindow.",
    )
    stabilization_window: str = pydantic.Field(
        default="2m",
        description="How long recommendations must agree before the executor count changes: all of "
        "the window's to scale down, the last quarter's to scale up (e.g. 60s, 5m; at least 10s).",
    )

    @pydantic.field_validator("stabilization_window")
    @classmethod
    def _window(cls, value: str) -> str:
        if durations.to_ms(value) < MIN_STABILIZATION_WINDOW_MS:
            raise ValueError(f"{value!r} is shorter than 10s: every rescale is a driver hand-over")
        return value

    def window_s(self) -> float:
        return durations.to_ms(self.stabilization_window) / 1000


class Reset(_Model):
    """A request to reprocess: the app restarts on a fresh checkpoint from the given position.

    The old checkpoint is kept (under its own path), so a reset never destroys state by accident.
    """

    model_config = _rules(
        (
            "(self.to == 'timestamp') == has(self.timestamp)",
            "timestamp is required with to: timestamp, and only then",
        )
    )

    id: str = pydantic.Field(
        min_length=1,
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="Token of this request (a DNS label, e.g. 'r2'); change it to request another reset. "
        "The operator carries out each id once and records it in status.lastReset.",
    )
    to: Literal["earliest", "latest", "timestamp"] = pydantic.Field(
        description="Where the input topics are read from after the reset."
    )
    timestamp: datetime.datetime | None = pydantic.Field(
        default=None, description="With to: timestamp, the first record time to read (RFC 3339)."
    )

    @pydantic.model_validator(mode="after")
    def _timestamp(self) -> Reset:
        if (self.to == "timestamp") != (self.timestamp is not None):
            raise ValueError("timestamp is required with to: timestamp, and only then")
        return self


class Deployment(_Model):
    """Image, service account, resources, executor bounds and lifecycle requests."""

    image: str | None = pydantic.Field(
        default=None,
        description="Runtime image of the driver and the executors; default: the operator's runtime image.",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = pydantic.Field(
        default=None, description="Pull policy of that image; default: Kubernetes' default for the tag."
    )
    service_account_name: str | None = pydantic.Field(
        default=None,
        description="An existing ServiceAccount for the driver (it must be allowed to manage pods, "
        "services, configmaps and PVCs); default: one the operator creates with exactly those rights.",
    )
    resources: Resources = pydantic.Field(
        default_factory=Resources, description="CPU and memory of the driver and of each executor."
    )
    executors: Executors = pydantic.Field(
        default_factory=Executors, description="Executor bounds and cores per executor."
    )
    autoscale: Autoscale | None = pydantic.Field(
        default=None,
        description="Size the executors from the input rate and lag instead of the partitions alone "
        "(bounded by executors.min, executors.max and the input partitions per core).",
    )
    suspend: bool = pydantic.Field(
        default=False,
        description="Stop the driver gracefully and keep the checkpoint; false again resumes where it "
        "stopped.",
    )
    reset: Reset | None = pydantic.Field(
        default=None, description="Reprocess from earliest, latest or a timestamp, on a fresh checkpoint."
    )
    upgrade_policy: Literal["rolling", "recreate"] = pydantic.Field(
        default="rolling",
        description="How a changed spec is rolled out: rolling (the default) starts the new driver "
        "beside the running one (room for a second driver and its executors is needed meanwhile) and, "
        "once it waits in standby (Spark up, plan compiled), stops the old one at a batch boundary and "
        "hands the checkpoint over. A new driver that fails or does not reach standby within "
        "progressDeadline is deleted and the running revision kept (status.failedRevision); one that "
        "fails after the hand-over, or completes no micro-batch within progressDeadline of its start, "
        "is replaced by the last revision that processed (rolled back). recreate stops the driver at a "
        "micro-batch boundary, then starts the new one: a longer gap in the output, no room needed.",
    )
    progress_deadline: str | None = pydantic.Field(
        default=None,
        description="With upgradePolicy rolling: how long the new revision's driver may take to reach "
        "standby (Spark up, plan compiled, warmed up) before the upgrade is given up and the running "
        "revision kept, and to complete a micro-batch after its start before it is rolled back to "
        "the last revision that processed, e.g. 90s, 10m (default 5m; at least 30s). Refused with "
        "recreate, which has no running revision to keep.",
    )

    @pydantic.field_validator("progress_deadline")
    @classmethod
    def _deadline(cls, value: str | None) -> str | None:
        if value is None:
            return None
        ms = durations.to_ms(value)
        if ms < MIN_PROGRESS_DEADLINE_MS:
            raise ValueError(f"{value!r} is shorter than 30s: a driver takes longer than that to start")
        return value

    @pydantic.model_validator(mode="after")
    def _autoscale_needs_a_range(self) -> Deployment:
        if self.autoscale is not None and self.executors.replicas is not None:
            raise ValueError(
                "autoscale and executors.replicas exclude each other: replicas pins the executor count "
                "(kubectl scale); remove it to autoscale"
            )
        return self

    @pydantic.model_validator(mode="after")
    def _deadline_needs_rolling(self) -> Deployment:
        if self.progress_deadline is not None and self.upgrade_policy != "rolling":
            raise ValueError(
                "progressDeadline applies to upgradePolicy: rolling (a recreate stops the running "
                "revision first, so there is none to keep)"
            )
        return self

    def progress_deadline_s(self) -> float:
        """The rolling upgrade's deadline in seconds (default 5 minutes)."""
        return durations.to_ms(self.progress_deadline or "5m") / 1000
