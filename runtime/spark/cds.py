"""Start-up: a class-data archive (AppCDS) of the classes a StreamApp driver's JVM loads.

A driver's JVM loads some 15,000 classes of Spark, Kafka and Scala before its first micro-batch;
parsing and verifying them is seconds of the start-up that every ``streamapp run``, redeploy and
failover pays. A dynamic CDS archive, written once at the end of a representative run
(``-XX:ArchiveClassesAtExit``), lets later JVMs map them instead (measured on 2 cores, the word
count with ``streamapp run``: Spark and the query up in 3.8-4.0 s instead of 6.1-6.3 s, first
output at 8.4-8.7 s instead of 11.7-12.9 s).

The archive is only valid for the JDK and the class path it was written with. Its file name
carries a digest of both (the JDK's ``release`` file, the pyspark version and jars, the jars
StreamApp adds) and of the launch context (the folders Spark's launcher puts first on the class
path), so a changed JDK or Spark never meets an old archive: it finds none, and an archive left
for other inputs in the same context is reported as stale. ``make setup`` (``streamapp setup
--class-data-archive``) writes one for a plain launch (``streamapp run``, the demo, the tests)
into the virtual environment (``<venv>/share/streamapp``), which a driver Pod run from the same
environment uses too (e2e checks that its JVM maps it); the runtime image bakes its own
(``setup --class-data-archive --no-broker`` in its Dockerfile; ``make images-test`` checks the
in-image driver maps it). A JVM
that still refuses the archive says why in the log this module reads back (:func:`check`), and
the archive is removed: nothing is ignored silently.
Executors are separate JVMs on another class path: they do not use it.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import sys
import tempfile
from collections.abc import Sequence

__all__ = ["DUMP_ENV", "archive", "check", "java_options", "stale"]

#: Set by ``streamapp setup`` for the one run that writes the archive (its path, while written).
DUMP_ENV = "STREAMAPP_CDS_DUMP"

_DIR = pathlib.Path(sys.prefix) / "share" / "streamapp"


def _java_home() -> pathlib.Path | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        return pathlib.Path(home)
    java = shutil.which("java")
    return pathlib.Path(java).resolve().parent.parent if java else None


#: Folders a launch puts first on the driver's class path (Spark's launcher adds them): a launch
#: with its own SPARK_CONF_DIR is another context than a plain one, and the JVM refuses an archive
#: written in one for the other. The driver Pod's launch is a plain one (its spark-defaults.conf
#: comes through STREAMAPP_SPARK_DEFAULTS, see session.spark_defaults).
_CONTEXT_ENV = ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH")


def _context() -> str:
    return hashlib.sha256(repr([os.environ.get(v) for v in _CONTEXT_ENV]).encode()).hexdigest()[:8]


def _digest(extra_jars: Sequence[pathlib.Path]) -> str:
    """What the archive depends on: the JDK build and every jar on the driver's class paths."""
    h = hashlib.sha256()
    home = _java_home()
    release = home / "release" if home else None
    h.update(release.read_bytes() if release and release.is_file() else b"unknown JDK")
    import pyspark  # noqa: PLC0415 - where its jars are; no JVM

    jars = sorted((pathlib.Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    for jar in [*jars, *extra_jars]:
        stat = jar.stat() if jar.exists() else None
        h.update(f"{jar.name}:{stat.st_size if stat else -1}\n".encode())
    return h.hexdigest()[:16]


def archive(extra_jars: Sequence[pathlib.Path]) -> pathlib.Path:
    """Where the archive for this JDK and these jars is (or would be)."""
    return _DIR / f"driver-{_context()}-{_digest(extra_jars)}.jsa"


def stale(current: pathlib.Path) -> list[pathlib.Path]:
    """Archives of ``current``'s launch context written for another JDK or class path."""
    context = current.name.split("-")[1]
    return sorted(p for p in _DIR.glob(f"driver-{context}-*.jsa") if p != current)


def java_options(path: pathlib.Path) -> tuple[list[str], pathlib.Path | None]:
    """JVM options for a new driver JVM whose archive is ``path`` (:func:`archive`), and the file
    its CDS warnings go to (None: no archive).

    Writing (``$STREAMAPP_CDS_DUMP`` set): ``-XX:ArchiveClassesAtExit``. Else ``path`` when it
    exists."""
    dump = os.environ.get(DUMP_ENV)
    if dump:
        return [f"-XX:ArchiveClassesAtExit={dump}"], None
    if not path.is_file():
        return [], None
    log = pathlib.Path(tempfile.mkstemp(prefix="streamapp-cds-", suffix=".log")[1])
    # A JVM that crashes on a damaged archive writes its report to the temp folder, not the cwd.
    crash = pathlib.Path(tempfile.gettempdir()) / "streamapp-hs_err_pid%p.log"
    return [f"-XX:SharedArchiveFile={path}", f"-Xlog:cds*=warning:file={log}", f"-XX:ErrorFile={crash}"], log


def check(log: pathlib.Path | None) -> str | None:
    """After the JVM started: why it did not use the archive, if it did not (None: it did)."""
    if log is None:
        return None
    try:
        text = log.read_text(errors="replace")
    finally:
        log.unlink(missing_ok=True)
    refused = [line for line in text.splitlines() if "Unable to use shared archive" in line]
    return refused[0].split("] ", 2)[-1] if refused else None
