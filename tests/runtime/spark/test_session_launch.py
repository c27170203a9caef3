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
    # The driver's heap is committed whole at launch (the JVM the first launch started, at the
    # default spark.driver.memory): its initial size is its maximum.
    jvm = spark._jvm
    bean = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    vm = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean)
    sizes = [int(vm.getVMOption(name).getValue()) for name in ("InitialHeapSize", "MaxHeapSize")]
    assert sizes == [2 * 2**30] * 2, f"initial and maximum heap {sizes}, not 2 GiB"
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


def test_the_driver_heap_is_committed_whole_unless_the_app_sets_its_own_initial_size() -> None:
    from streamapp.runtime.spark import session

    key = "spark.driver.extraJavaOptions"
    conf = {"spark.driver.memory": "3g", key: "-XX:+UseParallelGC"}
    session._commit_heap(conf)
    assert conf[key] == "-XX:+UseParallelGC -Xms3g"  # verbatim, as Spark's launcher gives -Xmx
    for own in ("-Xms1g -Dx=1", "-Dx=1 -XX:InitialHeapSize=1073741824"):
        conf = {"spark.driver.memory": "3g", key: own}
        session._commit_heap(conf)
        assert conf[key] == own
