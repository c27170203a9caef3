"""executors = clamp(ceil(partitions / coresPerExecutor), min, max), unless replicas pins it."""

from __future__ import annotations

import datetime
import itertools

import pytest

from streamapp.operator import scaling
from streamapp.runtime.manifest import deployment


@pytest.mark.parametrize(
    ("partitions", "cores", "low", "high", "replicas", "expected"),
    [
        (12, 1, 1, 8, None, 8),  # capped at max
        (12, 2, 1, 8, None, 6),
        (12, 4, 1, 8, None, 3),
        (13, 4, 1, 8, None, 4),  # ceil: the 13th partition needs a slot
        (1, 1, 2, 8, None, 2),  # at least min
        (0, 1, 2, 8, None, 2),  # no partitions yet: min
        (None, 3, 1, 8, None, 1),  # Kafka not reached: min
        (64, 1, 1, 8, 5, 5),  # kubectl scale pins the count
        (6, 1, 1, 1, None, 1),
    ],
)
def test_executor_table(
    partitions: int | None, cores: int, low: int, high: int, replicas: int | None, expected: int
) -> None:
    bounds = deployment.Executors(min=low, max=high, cores_per_executor=cores, replicas=replicas)
    assert scaling.desired_executors(bounds, partitions) == expected


def test_total_partitions() -> None:
    assert scaling.total_partitions({"a": 3, "b": 5}) == 8
    assert scaling.total_partitions({}) == 0
    assert scaling.total_partitions(None) is None


T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
POLICY = deployment.Autoscale(records_per_second_per_core=5, target_lag=50, stabilization_window="60s")
BOUNDS = deployment.Executors(min=1, max=8, cores_per_executor=1)


def _step(
    current: int,
    rate: float,
    lag: int,
    history: list[tuple[datetime.datetime, int]],
    second: int,
    *,
    steady: bool = True,
) -> scaling.Scaled:
    return scaling.autoscale(
        BOUNDS, POLICY, partitions=4, current=current, load=scaling.Load(rate, lag),
        recommendations=history, now=T0 + datetime.timedelta(seconds=second), steady=steady,
    )  # fmt: skip


def _run(load: list[tuple[float, int]], *, every: int = 5, start: int = 1) -> list[int]:
    """The executor count after each observation of ``load`` (rate, lag), ``every`` s apart."""
    current, history, counts = start, [], []
    for i, (rate, lag) in enumerate(load):
        scaled = _step(current, rate, lag, history, i * every)
        current, history = scaled.executors, scaled.recommendations
        counts.append(current)
    return counts


def test_a_load_step_scales_up_within_a_quarter_window_and_back_down_after_a_whole_one() -> None:
    calm, busy = (4.0, 10), (19.0, 10)  # 5 records/s per core: 1 executor, then 4
    counts = _run([calm] * 6 + [busy] * 12 + [calm] * 20)
    assert counts[:6] == [1] * 6
    up = counts.index(4)
    assert 6 <= up <= 6 + 15 // 5  # within a quarter of the 60 s window
    assert counts[up:18] == [4] * (18 - up)
    down = counts.index(1, 18)
    assert 18 + 60 // 5 - 2 <= down <= 18 + 60 // 5 + 1  # after a whole window of calm
    assert counts[down:] == [1] * (len(counts) - down)
    changes = sum(1 for a, b in itertools.pairwise(counts) if a != b)
    assert changes == 2  # up once, down once: no oscillation


def test_a_rate_that_wobbles_around_a_boundary_does_not_flap() -> None:
    # 10 records/s ± 8% at 2 executors (capacity 10): within the tolerance, nothing changes.
    wobble = [(10.0 + (0.8 if i % 2 else -0.8), 0) for i in range(40)]
    assert set(_run(wobble, start=2)) == {2}


def test_lag_above_its_target_adds_executors_to_work_it_off() -> None:
    # A steady 4 records/s fits 1 executor, but 1,250 records behind (1,200 above the target)
    # must be worked off within the 60 s window: 4 + 20 records/s → 5 executors, capped at 4
    # (the input's 4 partitions: more task slots would idle).
    counts = _run([(4.0, 1250)] * 4)
    assert counts == [1, 1, 1, 4]  # once the recommendations cover a quarter window (15 s)


def test_a_rescale_starts_the_recommendations_afresh() -> None:
    # Recommendations made for 4 executors say nothing about 1: after the scale-down a quarter
    # window of new ones must agree before the next change, and none are taken during a rollout.
    history = [(T0 + datetime.timedelta(seconds=s), 1) for s in range(0, 60, 5)]
    down = _step(4, 4.0, 0, history, 60)
    assert down.executors == 1 and down.recommendations == []
    assert _step(1, 19.0, 0, [], 65, steady=False).recommendations == []
    assert _step(1, 19.0, 0, [], 70).executors == 1  # one busy sample: not yet


def test_nothing_changes_during_a_rollout_or_without_figures() -> None:
    assert _step(1, 19.0, 10, [], 0, steady=False).executors == 1
    unknown = scaling.autoscale(
        BOUNDS, POLICY, partitions=4, current=2, load=None, recommendations=[], now=T0, steady=True
    )
    assert unknown.executors == 2 and "not known yet" in unknown.reason
    fresh = scaling.autoscale(
        BOUNDS, POLICY, partitions=4, current=None, load=None, recommendations=[], now=T0, steady=True
    )
    assert fresh.executors == 4  # a new app starts at the partition-based size


def test_autoscale_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="shorter than 10s"):
        deployment.Autoscale(records_per_second_per_core=5, stabilization_window="5s")
    with pytest.raises(ValueError, match="replicas pins the executor count"):
        deployment.Deployment(
            executors=deployment.Executors(replicas=2),
            autoscale=deployment.Autoscale(records_per_second_per_core=5),
        )


def _sample(before: scaling.Arrival | None, end: int | None, second: float) -> scaling.Arrival | None:
    return scaling.arrival(before, end, T0 + datetime.timedelta(seconds=second))


def test_the_arrival_rate_is_the_growth_of_the_inputs_end_offsets_over_at_least_10_s() -> None:
    first = _sample(None, 1000, 0)
    assert first == scaling.Arrival(T0, 1000, None)  # one sample: no rate yet
    assert _sample(first, 1030, 4) is first  # 4 s later: too short a span, the older one stays
    second = _sample(first, 1120, 10)
    assert second is not None and second.rate == 12.0 and second.end == 1120
    assert _sample(second, None, 30) is second  # Kafka said nothing new: keep what is known
    recreated = _sample(second, 5, 30)
    assert recreated is not None and recreated.rate is None and recreated.end == 5  # starts afresh


@pytest.mark.parametrize(("window", "every"), [("10s", 5.0), ("20s", 5.0), ("32s", 8.0), ("2m", 10.0)])
def test_input_samples_are_a_quarter_window_apart_between_5_and_10_s(window: str, every: float) -> None:
    policy = deployment.Autoscale(records_per_second_per_core=5, stabilization_window=window)
    assert scaling.sample_seconds(policy) == every
    first = scaling.arrival(None, 0, T0, every=every)
    early = scaling.arrival(first, 50, T0 + datetime.timedelta(seconds=every - 1), every=every)
    assert early is first
    due = scaling.arrival(first, 50, T0 + datetime.timedelta(seconds=every), every=every)
    assert due is not None and due.rate == 50 / every


def test_a_draining_backlog_does_not_scale_beyond_what_arrives() -> None:
    # 12 records/s arrive; 2 executors process 30/s while 600 records behind drain. The demand is
    # what arrives plus the excess lag over the window — the drain's speed is not demand.
    arrived = _sample(_sample(None, 0, 0), 120, 10)
    assert arrived is not None and arrived.rate == 12.0
    scaled = _step(3, arrived.rate, 650, [], 0)
    assert "demand 22.0 records/s" in scaled.reason  # 12 + (650 - 50) / 60
