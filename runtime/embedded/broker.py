"""A real single-node Apache Kafka broker (KRaft) started with the JDK on a free loopback port.

Used by the test fixtures, ``streamapp run`` without a bootstrap server, the demo and the
benchmarks: one launcher, so all of them run against the same broker configuration. The broker's
jars come from Maven Central through :mod:`streamapp.runtime.embedded.artifacts`.
"""

from __future__ import annotations

import base64
import contextlib
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import types
import uuid

from streamapp.runtime.embedded import artifacts, errors

__all__ = ["EmbeddedKafka", "free_port"]

_LOG4J2 = """\
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="{log}"><PatternLayout pattern="[%d] %p %m (%c)%n"/></File>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.kafka" level="INFO"/>
    <Logger name="kafka" level="INFO"/>
    <Logger name="state.change.logger" level="WARN"/>
    <Root level="WARN"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class EmbeddedKafka:
    """Start and stop one KRaft broker+controller; use as a context manager.

    ``workdir`` holds the log dirs, the config and ``broker.log``; a temporary folder is used (and
    removed on stop) when none is given.
    """

    def __init__(
        self,
        *,
        workdir: pathlib.Path | None = None,
        port: int | None = None,
        heap: str = "768m",
        extra_config: dict[str, str] | None = None,
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = workdir or pathlib.Path(tempfile.mkdtemp(prefix="streamapp-kafka-"))
        self.port = port or free_port()
        self.controller_port = free_port()
        self.heap = heap
        self.extra_config = extra_config or {}
        self.version = artifacts.KAFKA_VERSION
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> pathlib.Path:
        return self.workdir / "broker.log"

    def __enter__(self) -> EmbeddedKafka:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        self.stop()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> str:
        """Format the log dir, start the broker and wait until it serves metadata; returns bootstrap."""
        started = time.monotonic()
        java = shutil.which("java")
        if java is None:
            raise errors.SetupError("a JDK (java 17+) is needed to run the embedded Kafka broker")
        classpath = os.pathsep.join(str(j) for j in artifacts.kafka_broker_classpath())
        config = self._write_config()
        jvm = [
            java,
            "-Xms256m",
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.xml'}",
            "-cp",
            classpath,
        ]
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        fmt = subprocess.run(
            [*jvm, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)],
            capture_output=True,
            text=True,
            check=False,
        )
        if fmt.returncode != 0:
            raise errors.BrokerError(
                f"formatting the KRaft log dir {self.workdir / 'data'} failed:\n{fmt.stdout}{fmt.stderr}"
            )
        with open(self.workdir / "stdout.log", "wb") as out:
            self._proc = subprocess.Popen(
                [*jvm, "kafka.Kafka", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready(deadline=started + timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self.bootstrap

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL) and remove a temporary workdir."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=timeout)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        chunks = []
        for path in (self.workdir / "stdout.log", self.log_file):
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                chunks.append(f"--- {path}\n" + "\n".join(text))
        return "\n".join(chunks)

    # -- internals ---------------------------------------------------------------------------

    def _write_config(self) -> pathlib.Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "log4j2.xml").write_text(_LOG4J2.format(log=self.log_file))
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            # A single node: every internal topic has one replica.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "log.retention.hours": "-1",
            "log.segment.bytes": str(256 * 1024 * 1024),
        }
        props.update(self.extra_config)
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def _wait_ready(self, *, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient  # noqa: PLC0415 - only needed once started

        admin: AdminClient | None = None
        while True:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                raise errors.BrokerError(
                    f"the Kafka {self.version} broker exited during start-up\n{self.log_tail()}"
                )
            # Poll the port first: a client pointed at a closed port logs every failed connect.
            if admin is None and _port_open(self.port):
                admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
            if admin is not None:
                try:
                    if admin.list_topics(timeout=2).brokers:
                        return
                except Exception:  # noqa: BLE001 - any failure here just means "not ready yet"
                    pass
            if time.monotonic() > deadline:
                raise errors.BrokerError(
                    f"the Kafka {self.version} broker on {self.bootstrap} did not answer metadata "
                    f"requests in time\n{self.log_tail()}"
                )
            time.sleep(0.3)
