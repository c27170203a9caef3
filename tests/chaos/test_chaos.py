"""The fault-injection runs of ``make test`` and ``make test-long`` (``make chaos`` is the longest):
kill -9 of the driver at aimed and random moments under continuous input, restarts from the
checkpoints, then the read_committed output against the exact expected output.

Each kill costs a driver start-up (15-25 s of Spark on a quiet 2-core machine, minutes on a
loaded one): ``make test`` does 4 kills, one at each moment (in the transaction window, between
the sink's commit and Spark's commit log, after an at-least-once write before Spark's commit, and
at a random moment); ``make test-long`` does 20 (``STREAMAPP_CHAOS_KILLS`` overrides both) and
``make chaos`` 50 with 2 broker restarts. Four queries share each driver: stateless and word
count, each with exactly_once_v2 (must lose and duplicate nothing) and at_least_once (which must
show duplicates under the same kills, so that the check is shown able to fail).
"""

from __future__ import annotations

import os
import pathlib

import pytest


@pytest.mark.timeout(2700)  # each kill costs a Spark start-up
@pytest.mark.parametrize("kills", [4, pytest.param(20, marks=pytest.mark.long)])
def test_kill_minus_nine_of_the_driver_loses_and_duplicates_nothing_with_exactly_once(
    kills: int, tmp_path: pathlib.Path
) -> None:
    from tests.chaos import run

    kills = int(os.environ.get("STREAMAPP_CHAOS_KILLS", str(kills)))
    summary = run.run(kills=kills, broker_restarts=0, rate=200, seed=15, out=tmp_path)
    outputs = summary["outputs"]
    for name in ("stateless.exactly_once_v2", "counts.exactly_once_v2"):
        assert outputs[name]["lost"] == 0 and outputs[name]["duplicated"] == 0, (name, summary)
    for name in ("stateless.at_least_once", "counts.at_least_once"):
        assert outputs[name]["lost"] == 0, (name, summary)
    assert sum(outputs[n]["duplicated"] for n in outputs if n.endswith("at_least_once")) > 0, summary
    assert summary["final_stop"]["exit"] == 0, summary
