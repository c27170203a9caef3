"""One place that decides how a SparkSession is configured for StreamApp.

Spark's defaults assume a cluster; on a laptop or a small driver they cost seconds per micro-batch
(200 shuffle partitions make a RocksDB-stateful batch take ~6 s instead of ~0.3 s here). Every
session StreamApp starts — tests, `streamapp run`, the demo, the in-cluster driver — comes from
:func:`build_session`, with the Kafka connector on the classpath and RocksDB as the state store.
"""

from __future__ import annotations

import os
import pathlib
import re
import threading
from collections.abc import Mapping
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from streamapp.runtime.embedded import artifacts
from streamapp.runtime.spark import cds, jvm_output

__all__ = [
    "DEFAULT_DRIVER_MEMORY",
    "DEFAULT_SHUFFLE_PARTITIONS",
    "REDACTION_REGEX",
    "TRACK_STATE_ROWS",
    "Launch",
    "base_conf",
    "build_session",
    "local_slots",
]

#: State partitions of a new checkpoint unless the app says otherwise. Fixed for the checkpoint's
#: lifetime, so the right value is the parallelism the app may scale to, not Spark's 200.
DEFAULT_SHUFFLE_PARTITIONS = 2

#: Heap of a local driver; the operator sets the driver Pod's own (STREAMAPP_DRIVER_MEMORY).
DEFAULT_DRIVER_MEMORY = "2g"

#: What writes the driver's class-data archive (see :mod:`.cds`).
_REWRITE = "`make setup` (streamapp setup --class-data-archive)"
_LOG4J2 = pathlib.Path(__file__).with_name("log4j2.properties")
_ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: Checkpoint files on a local disk without Hadoop's per-file `chmod`/`readlink` processes and
#: `.crc` side files (see the class); other file systems keep Spark's own manager.
_CHECKPOINT_FILES = "io.streamapp.spark.LocalCheckpointFileManager"
#: The JVMs' garbage collector: the parallel (throughput) collector, not the JDK's default G1,
#: whose write barriers and concurrent threads cost a micro-batch's object-heavy operators (rows,
#: state maps) a tenth of their CPU and, on a small driver, its latency: a windowed count over 1 M
#: keys ran 85-89 k records/s at 16.6-16.8 CPU-s per million against 78-79 k at 18.0-19.2 with G1
#: (tests/bench/windowed); a word count's warm micro-batches p50 / p99 86 / 151 ms against 127 /
#: 247 with G1, its drain 147 k against 129 k records/s (tests/bench/run, 200,000 records).
_GC = "-XX:+UseParallelGC"
#: The class-metadata size at which the JVM first collects to unload classes: Spark's classes and
#: the code it generates take ~60-150 MB of metaspace (150 without the class-data archive), over the
#: JDK's initial 21 MB threshold, so every JVM ran a full collection "Metadata GC Threshold" as it
#: grew (130-210 ms on 2 cores each, once during start-up and for a word count once more after a
#: minute: a micro-batch that long). 256 MB: none in tests/bench/run (stateless, word count, GC log).
_METASPACE = "-XX:MetaspaceSize=256m"
_JVM = f"{_GC} {_METASPACE}"
#: Whether RocksDB counts the rows of each state store (Spark's default true): the count costs a
#: RocksDB read before every state write and delete (12 % of the records/s of a windowed count over
#: 1 M keys, 14 % of its CPU: tests/bench/results/windowed). Off, as Kafka Streams records its
#: stores' key estimates only at the DEBUG metrics level; an app that wants ``streamapp_state_rows``
#: sets it true in ``spec.sparkConf``.
TRACK_STATE_ROWS = "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows"
#: Whether lower(), upper() and initcap() map case with ICU (Spark's default) or with the JVM's
#: String, as a Kafka Streams app's toLowerCase()/toUpperCase() do: the JVM's, so that an
#: expression agrees with the same code in Kafka Streams on the same JVM (ICU's newer Unicode tables
#: give letters such as U+2C2F a lower case that JDK 17's do not: tests/conformance, caseMapping).
#: It also spares every JVM ICU's case table, which Spark builds on first use by mapping all
#: 1,114,112 code points (1.3-1.4 s of the first micro-batch's CPU): start-up to first output
#: 8.5-11.8 → 6.5-9.0 s (stateless), 9.6-11.0 → 7.7-9.5 s (word count; tests/bench/run, 3 each).
ICU_CASE_MAPPINGS = "spark.sql.icu.caseMappings.enabled"
#: Spark's default (secret|password|token|access key) plus the Kafka options that carry a private
#: key or a JAAS login (spec.kafka.tls/sasl): Spark redacts a conf or option, in the UI, logs and
#: plan descriptions, when its key or value matches. The added terms hold a dot, which base64 (a
#: PEM certificate's value) never does, so a public certificate is not hidden by chance.
REDACTION_REGEX = r"(?i)secret|password|token|access[.]?key|keystore[.]key|jaas[.]config"


def base_conf(*, shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS) -> dict[str, str]:
    """The Spark conf StreamApp always sets (callers' conf is layered on top)."""
    jars = ",".join(str(p) for p in [*artifacts.spark_kafka_connector_jars(), artifacts.runtime_jar()])
    return {
        "spark.jars": jars,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.streaming.stateStore.providerClass": _ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        TRACK_STATE_ROWS: "false",
        "spark.sql.streaming.checkpointFileManagerClass": _CHECKPOINT_FILES,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        ICU_CASE_MAPPINGS: "false",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
        # Adaptive execution does not apply to streaming plans; Spark warns on every query otherwise.
        "spark.sql.adaptive.enabled": "false",
        "spark.redaction.regex": REDACTION_REGEX,
        # Local runs: no UI port to collide on, and no shuffle service.
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"{_JVM} -Dlog4j2.configurationFile={_LOG4J2}",
        "spark.executor.extraJavaOptions": f"{_JVM} -Dlog4j2.configurationFile={_LOG4J2}",
    }


def local_slots(master: str) -> int | None:
    """The task slots of a local master (``local``: 1, ``local[N]``/``local[N,F]``: N,
    ``local[*]``: the cores), None for a cluster (``local-cluster[…]`` included)."""
    if master == "local":
        return 1
    found = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master)
    if found is None:
        return None
    return (os.cpu_count() or 1) if found[1] == "*" else max(1, int(found[1]))


#: A spark-defaults.conf to read as the lowest layer of the conf (the driver Pod's, written by the
#: operator). Spark's own SPARK_CONF_DIR would do the same but puts its folder on the JVM's class
#: path, where the class-data archive (:mod:`.cds`) cannot have a non-empty folder.
DEFAULTS_ENV = "STREAMAPP_SPARK_DEFAULTS"


_PROPERTY = re.compile(r"([^=:\s]+)\s*[=:\s]\s*(.*)$")


def spark_defaults() -> dict[str, str]:
    """The settings of the file ``STREAMAPP_SPARK_DEFAULTS`` names (``key value`` or ``key=value``
    lines, ``#`` comments), or none."""
    path = os.environ.get(DEFAULTS_ENV)
    if not path:
        return {}
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{DEFAULTS_ENV}={path}: cannot read the Spark defaults: {exc.strerror}") from exc
    conf: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        match = _PROPERTY.match(line)
        if match is None:
            raise ValueError(f"{path}:{number}: expected 'key value' or 'key=value', got {raw!r}")
        conf[match[1]] = match[2]
    return conf


class Launch:
    """A session being built in a background thread (:meth:`begin`); :meth:`session` waits for it."""

    def __init__(self, **kwargs: Any) -> None:
        self._built: SparkSession | None = None
        self._error: BaseException | None = None
        self._discarded = False
        self._lock = threading.Lock()

        def build() -> None:
            try:
                built = build_session(**kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the thread that asks for it
                self._error = exc
                return
            with self._lock:
                self._built = built
                discarded = self._discarded
            if discarded:
                built.stop()

        self._thread = threading.Thread(target=build, name="streamapp-spark-launch", daemon=True)
        self._thread.start()

    @classmethod
    def begin(cls, **kwargs: Any) -> Launch | None:
        """Start building a session with ``build_session(**kwargs)``; None when this process has
        one already (the app shares it and must not stop it)."""
        if SparkContext._active_spark_context is not None:
            return None
        return cls(**kwargs)

    def session(self) -> SparkSession:
        """The session, once built (or the error that building it raised)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._built is not None
        return self._built

    def discard(self) -> None:
        """Not needed after all (the app failed before its query): stopped once built, without
        waiting for it here (an error about the input is reported at once)."""
        with self._lock:
            self._discarded = True
            built = self._built
        if built is not None:
            built.stop()


def build_session(
    *,
    app_name: str = "streamapp",
    master: str | None = "local[2]",
    conf: Mapping[str, str] | None = None,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
) -> SparkSession:
    """Create (or return the running) SparkSession with StreamApp's configuration."""
    # PySpark reads these at JVM launch; pin the driver's Python to ours.
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    if master and master.startswith("local"):
        # A local driver talks only to itself: bind to loopback, not the first interface found.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    merged = {
        **spark_defaults(),
        "spark.driver.memory": driver_memory,
        **base_conf(shuffle_partitions=shuffle_partitions),
    }
    if master and master.startswith("local"):
        # Also over a spark-defaults.conf written for a cluster (the driver Pod's, which names the
        # driver's Service): the same Pod command then runs on a laptop with a local master.
        merged.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    merged.update(conf or {})
    _commit_heap(merged)
    launching = SparkContext._gateway is None
    cds_log = None
    if launching:  # the driver's JVM starts now: from the class-data archive, when there is one
        archive = cds.archive([pathlib.Path(j) for j in merged.get("spark.jars", "").split(",") if j])
        options, cds_log = cds.java_options(archive)
        key = "spark.driver.extraJavaOptions"
        without_archive = merged.get(key, "")
        if options:
            merged[key] = " ".join([without_archive, *options]).strip()
        elif not os.environ.get(cds.DUMP_ENV) and (old := cds.stale(archive)):
            print(
                f"streamapp: the class-data archive {old[0]} was written for another JDK, Spark or "
                f"StreamApp build (its jars): "
                f"start-up takes a few seconds longer until {_REWRITE} writes this one's",
                flush=True,
            )
    for key, value in merged.items():
        builder = builder.config(key, value)
    if launching:  # the JVM is launched now: it gets a filtered stderr
        try:
            with jvm_output.filtered_jvm_stderr():
                session = builder.getOrCreate()
        except Exception as exc:
            if cds_log is None:
                raise
            if SparkContext._gateway is not None:
                # The JVM started, so the archive is not why: Spark itself failed (executors that
                # cannot start, a bad setting). The archive stays, unless the JVM refused it.
                if cds.check(cds_log) is not None:
                    archive.unlink(missing_ok=True)
                raise
            # A damaged archive can crash the JVM as it maps it: start without it, and say so.
            archive.unlink(missing_ok=True)
            cds.check(cds_log)
            cds_log = None
            print(
                f"streamapp: Spark did not start with the class-data archive ({str(exc)[:120]}); removed "
                f"it and started without: {_REWRITE} writes it again",
                flush=True,
            )
            builder = builder.config("spark.driver.extraJavaOptions", without_archive)
            with jvm_output.filtered_jvm_stderr():
                session = builder.getOrCreate()
        if (refused := cds.check(cds_log)) is not None:
            archive.unlink(missing_ok=True)
            print(
                f"streamapp: the JVM refused the class-data archive ({refused}); removed it: start-up "
                f"takes a few seconds longer until {_REWRITE} writes it again",
                flush=True,
            )
    else:
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


# The driver's heap is committed whole at launch (``-Xms`` = ``spark.driver.memory``, the ``-Xmx``
# Spark gives it), as the runtime image's executors and Spark's own Kubernetes executors are. From
# the JVM's initial 378 MB the parallel collector's sizing kept the old generation at 252-333 MB of
# the 1,365 a 2 GB heap allows, and a word count's driver, whose old generation fills at 2-3 MB/s
# (Spark's status store: jobs, stages and plan graphs of the last 1,000 micro-batches), collected it
# in full every 16-57 s, 166-495 ms each (StreamApp and the PySpark job alike): a micro-batch's
# p99. Committed whole, none in 300 s (GC logs, word count at 1,000 lines/s).
def _commit_heap(conf: dict[str, str]) -> None:
    """Add ``-Xms`` as large as the driver's heap to its JVM options, unless they set one."""
    memory = conf.get("spark.driver.memory", "").strip()
    key = "spark.driver.extraJavaOptions"
    options = conf.get(key, "")
    if memory and not re.search(r"(^|\s)(-Xms|-XX:InitialHeapSize=)", options):
        # Verbatim, as Spark's launcher passes spark.driver.memory to -Xmx.
        conf[key] = f"{options} -Xms{memory}".strip()


def _python() -> str:
    import sys  # noqa: PLC0415

    return sys.executable
