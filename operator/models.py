"""The StreamApp resource's names and the status the operator writes (the CRD's status schema)."""

from __future__ import annotations

from typing import Literal

import pydantic

from streamapp.runtime.manifest import base

__all__ = [
    "GROUP",
    "KIND",
    "PLURAL",
    "SHORT_NAME",
    "VERSION",
    "AutoscaleStatus",
    "Condition",
    "ExecutorCounts",
    "Recommendation",
    "StateRecord",
    "StatefulStep",
    "StreamAppStatus",
]

#: The custom resource: ``streamapps.streamapp.io/v1alpha1``, short name ``sapp`` (``sa`` is ServiceAccount).
GROUP, VERSION, KIND, PLURAL, SHORT_NAME = "streamapp.io", "v1alpha1", "StreamApp", "streamapps", "sapp"


_Model = base.CamelModel


class Condition(_Model):
    type: Literal["Ready", "Progressing", "Degraded"] = pydantic.Field(description="Condition type.")
    status: Literal["True", "False", "Unknown"] = pydantic.Field(description="True, False or Unknown.")
    reason: str | None = pydantic.Field(default=None, description="One CamelCase word saying why.")
    message: str | None = pydantic.Field(
        default=None, description="What happened, naming the field or object."
    )
    last_transition_time: str | None = pydantic.Field(
        default=None, description="When status last changed (RFC 3339)."
    )


class ExecutorCounts(_Model):
    desired: int | None = pydantic.Field(default=None, description="Executors the operator asked for.")
    ready: int | None = pydantic.Field(default=None, description="Executors running.")


class StatefulStep(_Model):
    node: str = pydantic.Field(description="The topology node whose state this is.")
    path: str | None = pydantic.Field(default=None, description="Where the manifest writes the step.")
    shape: dict[str, str] = pydantic.Field(
        description="What the state's layout and meaning depend on (operation, windows, grouping, key, "
        "value …); a redeploy that changes any of these on the same checkpoint is refused."
    )


class StateRecord(_Model):
    checkpoint: str = pydantic.Field(description="The checkpoint the running revision's state is in.")
    version: int = pydantic.Field(description="Version of the fingerprint's format.")
    steps: list[StatefulStep] = pydantic.Field(description="The stateful steps, in the query plan's order.")


class Recommendation(_Model):
    time: str = pydantic.Field(description="When the autoscaler made it (RFC 3339).")
    executors: int = pydantic.Field(description="The executors it recommended.")


class InputSample(_Model):
    time: str = pydantic.Field(description="When the input's end offsets were read (RFC 3339).")
    end: int = pydantic.Field(description="The input partitions' end offsets added up.")
    rate: float | None = pydantic.Field(
        default=None, description="Records/s written to the input since the sample before."
    )


class AutoscaleStatus(_Model):
    reason: str | None = pydantic.Field(
        default=None, description="The last decision and the figures behind it."
    )
    recommendations: list[Recommendation] | None = pydantic.Field(
        default=None, description="Recommendations of the last stabilization window, oldest first."
    )
    input: InputSample | None = pydantic.Field(
        default=None, description="The input's arrival rate: its end offsets' growth between samples."
    )


class StreamAppStatus(_Model):
    phase: Literal["Pending", "Running", "Suspended", "Failed", "Upgrading"] | None = pydantic.Field(
        default=None, description="Lifecycle phase."
    )
    conditions: list[Condition] | None = pydantic.Field(
        default=None, description="Ready, Progressing, Degraded."
    )
    observed_generation: int | None = pydantic.Field(default=None, description="Generation last reconciled.")
    current_revision: str | None = pydantic.Field(default=None, description="Spec revision running.")
    target_revision: str | None = pydantic.Field(default=None, description="Spec revision being rolled out.")
    executors: ExecutorCounts | None = pydantic.Field(default=None, description="Executor counts.")
    input_partitions: int | None = pydantic.Field(default=None, description="Partitions of all input topics.")
    lag: int | None = pydantic.Field(default=None, description="Records behind the end of the input topics.")
    throughput: str | None = pydantic.Field(default=None, description="Records per second, last batches.")
    last_batch_time: str | None = pydantic.Field(default=None, description="When the last micro-batch ended.")
    driver_pod: str | None = pydantic.Field(default=None, description="Name of the driver Pod.")
    selector: str | None = pydantic.Field(
        default=None,
        description="Label selector of the app's executor Pods: the scale subresource's, which a "
        "HorizontalPodAutoscaler reads (kubectl autoscale).",
    )
    message: str | None = pydantic.Field(default=None, description="Human-readable summary.")
    driver_failures: int | None = pydantic.Field(
        default=None,
        description="Drivers of this revision that failed in a row (reset once one processes); "
        "replacements back off 10 s, 20 s, 40 s … up to 5 min, as a kubelet's CrashLoopBackOff.",
    )
    last_reset: str | None = pydantic.Field(
        default=None, description="Id of the last spec.deployment.reset carried out (its driver started)."
    )
    failed_revision: str | None = pydantic.Field(
        default=None,
        description="A revision a rolling upgrade gave up on (its driver failed or never reached "
        "standby): the previous revision keeps running until the spec changes again.",
    )
    autoscale: AutoscaleStatus | None = pydantic.Field(
        default=None, description="What spec.deployment.autoscale recommended lately, and why."
    )
    state: StateRecord | None = pydantic.Field(
        default=None,
        description="The state fingerprint of the running revision: a spec change whose stateful steps "
        "differ on the same checkpoint is refused (Degraded IncompatibleState) unless it resets.",
    )
