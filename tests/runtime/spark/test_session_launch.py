"""A session built in the background while the app does other work (``session.Launch``): handed
over when asked for, stopped when the app no longer needs it, never made beside a running one."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# A fresh process: the test session's own SparkContext would make ``begin`` decline.
_SCRIPT = textwrap.dedent(
    """
    import time
    from pyspark import SparkContext
    from streamapp.runtime.spark import session

    launch = session.Launch.begin(app_name="launch-discarded")
    launch.discard()  # at once: the app failed before its query (an unreachable broker, say)
    launch._thread.join(120)
    assert SparkContext._active_spark_context is None, "a discarded session was left running"

    launch = session.Launch.begin(app_name="launch-used", conf={"spark.sql.shuffle.partitions": "3"})
    spark = launch.session()
    assert spark.range(5).count() == 5
    assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    assert session.Launch.begin(app_name="another") is None, "one session per process"
    spark.stop()
    print("launch checks passed")
    """
)


def test_a_launched_session_is_handed_over_or_stopped_when_discarded() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0 and "launch checks passed" in done.stdout, done.stderr[-3000:]
