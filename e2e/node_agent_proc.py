"""The node agent as the e2e suite runs it: a process, and the handles a test needs on its Pods.

Why a process: the agent runs the Pods' processes and must outlive nothing — stopping it stops
them — and a test kills processes the way a user would (``kill -9 <pid>``), by the pid the agent
recorded for each container in ``<dir>/pods/<namespace>/<pod>/<container>.pid``.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import cluster

HERE = pathlib.Path(__file__).resolve().parent


class AgentProcess:
    """``python e2e/node_agent.py`` for one Node of ``kube``; log in ``log``."""

    def __init__(
        self, kube: cluster.Cluster, node: str, workdir: pathlib.Path, options: tuple[str, ...] = ()
    ) -> None:
        self.kube, self.node, self.dir = kube, node, workdir
        self.options = options  # more of node_agent.py's flags (--image-fs, --shared-path DIR)
        self.log = workdir / "agent.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> float:
        began = time.monotonic()
        argv = [
            sys.executable, str(HERE / "node_agent.py"), "--kubeconfig", str(self.kube.kubeconfig),
            "--node", self.node, "--dir", str(self.dir), *self.options,
        ]  # fmt: skip
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=os.environ.copy()
            )
        while not self.node_ready():
            if self.process.poll() is not None:
                raise cluster.ClusterError(
                    f"the node agent exited with {self.process.returncode}:\n{self.tail()}"
                )
            if time.monotonic() - began > timeout:
                raise cluster.ClusterError(f"node {self.node} not Ready in {timeout:.0f}s:\n{self.tail()}")
            time.sleep(0.2)
        return time.monotonic() - began

    def node_ready(self) -> bool:
        try:
            node = json.loads(self.kube.kubectl("get", "node", self.node, "-o", "json"))
        except cluster.ClusterError:
            return False
        conditions = (node.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def pid(self, namespace: str, pod: str, container: str) -> int:
        """The main process of a running container (what ``kill -9`` of "the driver" means)."""
        return int((self.dir / "pods" / namespace / pod / f"{container}.pid").read_text())

    def container_log(self, namespace: str, pod: str, container: str, lines: int = 60) -> str:
        return cluster._tail(self.dir / "pods" / namespace / pod / f"{container}.log", lines)

    def fail(self) -> None:
        """Make the Node "fail": no more heartbeats or status, every container killed (SIGUSR1)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGUSR1)

    def tail(self, lines: int = 60) -> str:
        return cluster._tail(self.log, lines)

    @contextlib.contextmanager
    def only_node(self) -> Iterator[AgentProcess]:
        """The agent running while the KWOK nodes are cordoned, so new Pods can only land on it.

        Cordoning (not a taint) keeps the apps' specs untouched. Afterwards the agent stops (its
        processes with it), its Node and Lease are deleted and the KWOK nodes take Pods again.
        """
        kube = self.kube
        for node in kube.nodes:
            kube.kubectl("cordon", node)
        try:
            seconds = self.start()
            sys.stderr.write(f"\nnode agent {self.node} Ready in {seconds:.1f}s (log: {self.log})\n")
            yield self
        finally:
            self.stop()
            kube.kubectl("delete", "node", self.node, "--ignore-not-found", "--wait=false")
            # Its Lease is owned by the Node; gone now rather than when the garbage collector runs.
            kube.kubectl("delete", "lease", self.node, "-n", "kube-node-lease", "--ignore-not-found")
            for node in kube.nodes:
                kube.kubectl("uncordon", node)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)  # the agent stops its containers, then exits
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
