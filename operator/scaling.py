"""How many executors an app gets: one task slot per input partition, within the spec's bounds.

A Kafka source reads each partition in one task per micro-batch, so slots beyond the partition
count idle and fewer slots serialise partitions. Lag-based sizing comes later; the rule stays a
pure function of its inputs so the table tests pin it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from streamapp.runtime.manifest import deployment

__all__ = ["desired_executors", "total_partitions"]


def total_partitions(partitions: Mapping[str, int] | None) -> int | None:
    """Partitions over all input topics; None when they are unknown (Kafka not reached yet)."""
    if partitions is None:
        return None
    return sum(partitions.values())


def desired_executors(bounds: deployment.Executors, partitions: int | None) -> int:
    """``clamp(ceil(partitions / coresPerExecutor), min, max)``, or ``replicas`` when it is pinned.

    Unknown partitions give ``min``: the app starts small rather than not at all.
    """
    if bounds.replicas is not None:
        return bounds.replicas
    if not partitions:
        return bounds.min
    wanted = math.ceil(partitions / bounds.cores_per_executor)
    return max(bounds.min, min(bounds.max, wanted))
