"""A real single-node Apache Kafka broker (KRaft) started with the JDK on a free loopback port.

Used by the test fixtures, ``streamapp run`` without a bootstrap server, the demo and the
benchmarks: one launcher, so all of them run against the same broker configuration. The broker's
jars come from Maven Central through :mod:`streamapp.runtime.embedded.artifacts`.

By default the broker has one PLAINTEXT listener. Tests of ``spec.kafka.tls``/``sasl`` ask for
secure listeners beside it: ``sasl_users`` adds a SASL_SSL listener (PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512 for those users) and ``mutual_tls`` an SSL listener that requires a client
certificate; their certificates are generated per broker (:mod:`.tls`). The PLAINTEXT listener
stays, for set-up and for the broker's own traffic.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import pathlib
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
import uuid
from collections.abc import Mapping
from typing import Any

from streamapp.runtime.embedded import artifacts, errors, tls
from streamapp.runtime.kafka import security

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


#: Ports :func:`free_port` handed out in this process: never the same one twice.
_HANDED_OUT: set[int] = set()
_HANDING_OUT = threading.Lock()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing uses right now, chosen outside the kernel's ephemeral
    range and never twice in one process. A port from ``bind(0)`` is an ephemeral one: between
    choosing it and the server binding it, an outgoing connection (a Kafka client, kubectl) may
    take it as its local port, and the server fails with EADDRINUSE (an e2e driver did)."""
    low, high = _ephemeral_range()
    span = (10_000, low) if low - 10_000 >= 2_000 else (high + 1, 65_536)
    with _HANDING_OUT:
        for _ in range(500):
            port = random.randrange(*span)
            if port in _HANDED_OUT:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _HANDED_OUT.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # all taken: any free one
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _escaped(value: str) -> str:
    """A value as java.util.Properties reads it back (PEM and JAAS values span lines, quote, escape)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def _stop_with_parent() -> None:
    """Runs in the child before exec: SIGTERM the broker when the process that started it dies.

    Without it a test run or ``streamapp run`` that is killed (or crashes) leaves its broker
    running for good: the broker has a session of its own so that Ctrl-C reaches it only through
    :meth:`EmbeddedKafka.stop`.
    """
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


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
        sasl_users: Mapping[str, str] | None = None,
        mutual_tls: bool = False,
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = workdir or pathlib.Path(tempfile.mkdtemp(prefix="streamapp-kafka-"))
        self.port = port or free_port()
        self.controller_port = free_port()
        self.heap = heap
        self.extra_config = extra_config or {}
        self.sasl_users = dict(sasl_users or {})  # user → password, for PLAIN and both SCRAMs
        self.sasl_port = free_port() if self.sasl_users else None
        self.ssl_port = free_port() if mutual_tls else None
        #: The CA, broker and client certificates of the secure listeners (made by start()).
        self.tls: tls.Material | None = None
        self.version = artifacts.KAFKA_VERSION
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        """The SASL_SSL listener (needs ``sasl_users``)."""
        if self.sasl_port is None:
            raise errors.BrokerError(
                "this broker was started without sasl_users: it has no SASL_SSL listener"
            )
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        """The SSL listener that requires a client certificate (needs ``mutual_tls``)."""
        if self.ssl_port is None:
            raise errors.BrokerError("this broker was started without mutual_tls: it has no SSL listener")
        return f"127.0.0.1:{self.ssl_port}"

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
        # A restart of this broker (tests/chaos) keeps its log dirs: the same id, no new format.
        cluster_id = self._cluster_id = getattr(self, "_cluster_id", None) or (
            base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        )
        # One id in 64 starts with "-": passed as "-t <id>" the tool took it for an option.
        fmt = subprocess.run(
            [
                *jvm,
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={cluster_id}",
                "-c",
                str(config),
                "--ignore-formatted",
            ],
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
                preexec_fn=_stop_with_parent,  # noqa: PLW1509 - only prctl, before exec
            )
        try:
            self._wait_ready(deadline=started + timeout)
            self._add_scram_users(timeout=max(5.0, started + timeout - time.monotonic()))
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
        props.update(self._secure_listeners(props))
        props.update(self.extra_config)
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={_escaped(v)}\n" for k, v in props.items()))
        return path

    def _secure_listeners(self, props: Mapping[str, str]) -> dict[str, str]:
        """Settings of the SASL_SSL and SSL listeners that were asked for (none by default)."""
        extra = [
            (name, port) for name, port in (("SASL_SSL", self.sasl_port), ("SSL", self.ssl_port)) if port
        ]
        if not extra:
            return {}
        self.tls = tls.generate(self.workdir / "tls")
        urls = "".join(f",{name}://127.0.0.1:{port}" for name, port in extra)
        out = {
            "listeners": props["listeners"] + urls,
            "advertised.listeners": props["advertised.listeners"] + urls,
            "listener.security.protocol.map": props["listener.security.protocol.map"]
            + "".join(f",{name}:{name}" for name, _ in extra),
            # Inline PEM: Kafka's file-based PEM key store insists on an encrypted key.
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": self.tls.broker_certificate.read_text(),
            "ssl.keystore.key": self.tls.broker_key.read_text(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.tls.ca),
        }
        if self.ssl_port:
            out["listener.name.ssl.ssl.client.auth"] = "required"
        if self.sasl_port:
            users = " ".join(
                f'user_{user}="{security.jaas_quote(pw)}"' for user, pw in self.sasl_users.items()
            )
            scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            out |= {
                "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "listener.name.sasl_ssl.plain.sasl.jaas.config": (
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
                ),
                "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram,
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
            }
        return out

    def _add_scram_users(self, *, timeout: float) -> None:
        """Create the SCRAM credentials of ``sasl_users`` (through the admin API, as in production)."""
        if not self.sasl_users:
            return
        from confluent_kafka.admin import (  # type: ignore[attr-defined]  # noqa: PLC0415 - SASL brokers only
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialAlteration,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        # One request per mechanism: a request may alter each user only once.
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            upserts: list[UserScramCredentialAlteration] = [
                UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
                for user, password in self.sasl_users.items()
            ]
            for future in admin.alter_user_scram_credentials(upserts, request_timeout=timeout).values():
                future.result(timeout=timeout)
        # The credentials reach the listener through the metadata log: wait until they are there.
        deadline = time.monotonic() + timeout
        while True:
            described: dict[str, Any] = admin.describe_user_scram_credentials(  # type: ignore[assignment]
                list(self.sasl_users), request_timeout=timeout
            )  # a dict of futures when users are named
            try:
                if all(
                    len(f.result(timeout=timeout).scram_credential_infos) == 2 for f in described.values()
                ):
                    return
            except Exception:  # noqa: BLE001 - a user not visible yet is reported as an error
                pass
            if time.monotonic() > deadline:
                raise errors.BrokerError(
                    f"SCRAM users {sorted(self.sasl_users)} did not appear on {self.bootstrap}"
                )
            time.sleep(0.2)

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
