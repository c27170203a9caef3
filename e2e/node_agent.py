"""A small kubelet: it runs the Pods bound to its Node as local processes, so apps really run in e2e.

Why it exists: KWOK nodes report Pods Running without running them, so no StreamApp ever processed
a record inside the e2e cluster. This agent registers a Node of its own (capacity from this
machine, a Lease renewed every few seconds), takes the Pods the scheduler binds to it, and runs
each container's command. KWOK manages only nodes annotated ``kwok.x-k8s.io/node=fake``; this
Node never carries that annotation, so the two never fight over a Node. It is a test fixture that
a user can also run on a laptop next to ``cluster.py up``:

    python e2e/node_agent.py --kubeconfig /tmp/c/kubeconfig --node agent-0 --dir /tmp/agent

What a container is here, honestly:
- **Filesystem**: with ``--image-fs``, the image's, as a kubelet runs it: the image must be in this
  machine's buildah storage (``make images`` puts the StreamApp images there; nothing is pulled,
  a missing image shows ``ErrImageNeverPull``). Its root is the read-only lower layer of an
  overlay with a fresh writable layer per container start; the container is chrooted into it and
  runs as the image's user or ``securityContext.runAsUser``/``runAsGroup`` (``runAsNonRoot`` and
  ``fsGroup`` honoured); the image's ENTRYPOINT, CMD, ENV and WORKDIR apply as Kubernetes says.
  ``--shared-path DIR`` shows a host folder to every container at the same path (what network
  storage is for checkpoints in a cluster). Without ``--image-fs`` (the default, and what
  ``make test`` uses, which builds no image): this machine's filesystem; every container runs
  from the project's environment (the venv that runs the agent; ``SPARK_HOME`` its pyspark), and
  a container without ``command`` runs the runtime image's entrypoint restated
  (``spark_entrypoint.py``). The log says which, per container.
- **Volumes** (ConfigMap, Secret, emptyDir, projected service-account token/CA/namespace) are
  written under ``<dir>/pods/<namespace>/<pod>/volumes`` and bind-mounted at the exact
  ``mountPath`` the container expects, in a private mount namespace per container (``unshare``;
  root needed): paths are never rewritten. A missing mount point is created empty on the host
  (inside the writable layer with ``--image-fs``).
- **Network**: every Pod gets a loopback address of its own (``127.A.B.n``, A.B random per
  agent) as its Pod IP. Cluster DNS is a hosts file (the ``kubernetes`` Service and every
  Service's selected Pods) that JVMs read through ``-Djdk.net.hosts.file`` (``JAVA_TOOL_OPTIONS``);
  with ``--image-fs`` it is also the container's ``/etc/hosts``.
  The ``kubernetes`` Service is a TCP proxy on ``127.A.B.1:443`` to the API server (kube-proxy's
  part). Other ClusterIP Services are not proxied.
- **Not applied**, and logged per Pod: without ``--image-fs``, ``runAsUser``/``fsGroup`` (processes
  run as the agent's user); always, resource limits (no cgroups) and image pulls. ``kubectl logs``
  does not work (no kubelet API); each container's output is in
  ``<dir>/pods/<namespace>/<pod>/<container>.log``.

Status is what happened: container states with exit codes, restart counts, ``restartPolicy``
honoured (with the kubelet's doubling back-off), Ready from the readiness probe, liveness
failures restart. Deletion sends SIGTERM to the container's process, SIGKILL to its whole process
group after the grace period, then removes the Pod. SIGUSR1 makes the node "fail": it stops
reporting and its processes die, as when a machine is lost.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import image_fs as image_filesystems
import pod_runtime
import yaml

__all__ = ["Api", "NodeAgent", "main"]

HEARTBEAT_SECONDS = 5
LEASE_SECONDS = 40


class Api:
    """Just enough of a Kubernetes client: JSON over HTTPS with the kubeconfig's credentials."""

    def __init__(self, kubeconfig: Path, workdir: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        self.server = str(cluster["server"])
        creds = workdir / "credentials"
        creds.mkdir(parents=True, exist_ok=True)

        def material(data_key: str, file_key: str, name: str, holder: dict[str, Any]) -> str | None:
            if data_key in holder:
                path = creds / name
                path.write_bytes(base64.b64decode(holder[data_key]))
                path.chmod(0o600)
                return str(path)
            return str(holder[file_key]) if file_key in holder else None

        self.ca_file = material("certificate-authority-data", "certificate-authority", "ca.crt", cluster)
        self.ssl = ssl.create_default_context(cafile=self.ca_file)
        cert = material("client-certificate-data", "client-certificate", "client.crt", user)
        key = material("client-key-data", "client-key", "client.key", user)
        if cert and key:
            self.ssl.load_cert_chain(cert, key)
        self.token = user.get("token")

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, context=self.ssl, timeout=15) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else {}

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def find(self, path: str) -> Any:
        """GET, or None when the object does not exist."""
        try:
            return self.get(path)
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise

    def merge(self, path: str, body: Any) -> Any:
        return self.call("PATCH", path, body, "application/merge-patch+json")

    def api_port(self) -> tuple[str, int]:
        parsed = urllib.parse.urlparse(self.server)
        return str(parsed.hostname), int(parsed.port or 443)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _capacity(workdir: Path) -> dict[str, str]:
    """This machine: its cores, its memory, its disk under the agent's folder."""
    mem_kib = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    disk = shutil.disk_usage(workdir).total
    return {
        "cpu": str(os.cpu_count() or 1),
        "memory": f"{mem_kib}Ki",
        "pods": "110",
        "ephemeral-storage": str(disk),
    }


class _Proxy(threading.Thread):
    """kube-proxy's one job here: the ``kubernetes`` Service address forwards to the API server."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        super().__init__(daemon=True, name="kubernetes-service-proxy")
        self.target = target
        self.server = socket.create_server(listen, reuse_port=False)

    def run(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)

        def pump(src: socket.socket, dst: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while chunk := src.recv(65536):
                    dst.sendall(chunk)
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

        other = threading.Thread(target=pump, args=(upstream, client), daemon=True)
        other.start()
        pump(client, upstream)
        other.join()
        client.close()
        upstream.close()

    def close(self) -> None:
        self.server.close()


@dataclasses.dataclass
class _Network:
    """Loopback addresses: ``.1`` is the ``kubernetes`` Service, Pods get ``.2`` onwards."""

    prefix: str
    used: set[str] = dataclasses.field(default_factory=set)

    @classmethod
    def pick(cls) -> _Network:
        return cls(f"127.{random.randint(100, 250)}.{random.randint(1, 250)}")

    @property
    def service_ip(self) -> str:
        return f"{self.prefix}.1"

    def allocate(self) -> str:
        for last in range(2, 255):
            ip = f"{self.prefix}.{last}"
            if ip not in self.used:
                self.used.add(ip)
                return ip
        raise RuntimeError(f"no free Pod address left in {self.prefix}.0/24")

    def release(self, ip: str) -> None:
        self.used.discard(ip)


class NodeAgent:
    """The kubelet of one Node: registration, heartbeats, the Pods bound to it, cluster DNS."""

    def __init__(
        self,
        api: Api,
        node: str,
        workdir: Path,
        labels: dict[str, str] | None = None,
        *,
        image_fs: bool = False,
        shared_paths: list[Path] | None = None,
    ) -> None:
        self.api, self.node, self.dir = api, node, workdir.resolve()
        self.labels = labels or {}
        #: Containers run from their images' filesystems (buildah storage), or from this environment.
        self.images = image_filesystems.ImageFilesystems(node) if image_fs else None
        #: Host folders every container sees at the same path (what network storage is in a cluster).
        self.shared_paths = [p.resolve() for p in shared_paths or []]
        self.net = _Network.pick()
        self.hosts_file = self.dir / "hosts"
        self.pods: dict[str, pod_runtime.PodRunner] = {}  # by uid
        self.failed = threading.Event()
        self.stopping = threading.Event()
        self.proxy: _Proxy | None = None
        self.capacity = _capacity(self.dir)

    def log(self, message: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} node-agent {self.node}: {message}", flush=True)

    # -- node --------------------------------------------------------------------------------

    def register(self) -> None:
        labels = {
            "kubernetes.io/hostname": self.node,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "node-agent",
            **self.labels,
        }
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.node, "labels": labels}}
        if self.api.find(f"/api/v1/nodes/{self.node}") is None:
            self.api.call("POST", "/api/v1/nodes", body)
        else:
            self.api.merge(f"/api/v1/nodes/{self.node}", {"metadata": {"labels": labels}})
        self._heartbeat()
        self.log(f"registered: capacity {self.capacity}; Pod IPs {self.net.prefix}.0/24 on loopback")

    def _heartbeat(self) -> None:
        now = _now()
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "node-agent is posting ready status",
            "lastHeartbeatTime": now,
            "lastTransitionTime": self._ready_since(now),
        }
        status = {
            "capacity": self.capacity,
            "allocatable": self.capacity,
            "conditions": [ready],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": self.node},
            ],
            "nodeInfo": {
                "kubeletVersion": "node-agent",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "containerRuntimeVersion": "node-agent://processes",
            },
        }
        self.api.merge(f"/api/v1/nodes/{self.node}/status", {"status": status})
        self._renew_lease(now)

    _since: str | None = None

    def _ready_since(self, now: str) -> str:
        self._since = self._since or now
        return self._since

    def _renew_lease(self, now: str) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.node}"
        renew = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        spec = {"holderIdentity": self.node, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": renew}
        if self.api.find(path) is None:
            node = self.api.get(f"/api/v1/nodes/{self.node}")
            # Owned by the Node, as the kubelet's: deleting the Node deletes its Lease.
            owner = {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": node["metadata"]["uid"]}
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.node, "ownerReferences": [owner]},
                "spec": spec,
            }
            self.api.call("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", body)
        else:
            self.api.merge(path, {"spec": spec})

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proxy = _Proxy((self.net.service_ip, 443), self.api.api_port())
        self.proxy.start()
        self.register()
        if self.images is not None:
            shared = ", ".join(map(str, self.shared_paths)) or "none"
            self.log(
                "containers run from their images' filesystems (this machine's buildah storage, "
                f"nothing pulled), as their images' or securityContext's user; shared folders: {shared}"
            )
        else:
            self.log(
                "containers run as local processes from the project's environment "
                f"({sys.prefix}), not from an image's filesystem (--image-fs runs them from the images "
                "make images built)"
            )
        last_beat = time.monotonic()
        while not self.stopping.is_set():
            if self.failed.is_set():
                time.sleep(0.5)  # a lost machine: nothing reported, nothing run
                continue
            try:
                self._sync()
                if time.monotonic() - last_beat >= HEARTBEAT_SECONDS:
                    self._heartbeat()
                    last_beat = time.monotonic()
            except (OSError, urllib.error.URLError, ValueError) as err:
                self.log(f"API server call failed, retrying: {err}")
            time.sleep(0.5)

    def _sync(self) -> None:
        selector = urllib.parse.quote(f"spec.nodeName={self.node}")
        mine = self.api.get(f"/api/v1/pods?fieldSelector={selector}")["items"]
        seen = set()
        for pod in mine:
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            runner = self.pods.get(uid)
            ended = pod["status"].get("phase") in ("Succeeded", "Failed")
            if runner is None and pod["metadata"].get("deletionTimestamp"):
                # Nothing of this Pod runs here (it ended, or its runner stopped before it could
                # start a container): the kubelet's last word. Starting a runner for a Pod being
                # deleted could fail the same way again and leave it Terminating for good.
                self._finish_deletion(pod)
                continue
            if runner is None and not ended:
                runner = pod_runtime.PodRunner(self, pod)
                self.pods[uid] = runner
                runner.start()
            if runner is not None:
                runner.update(pod)
        for uid, runner in list(self.pods.items()):
            if uid not in seen:  # removed from the API server (force-deleted, or gone after stopping)
                runner.vanished()
            if not runner.is_alive():
                self.net.release(runner.ip)
                del self.pods[uid]
        self._write_hosts()

    def _finish_deletion(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
        with contextlib.suppress(urllib.error.HTTPError):
            self.api.call("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", body)
        self.log(f"pod {meta['namespace']}/{meta['name']}: removed (it had ended)")

    def _write_hosts(self) -> None:
        """Cluster DNS as a hosts file: the API Service and each Service's selected Pod IPs."""
        lines = [f"127.0.0.1 localhost {socket.gethostname()}"]
        lines.append(
            f"{self.net.service_ip} kubernetes kubernetes.default kubernetes.default.svc"
            " kubernetes.default.svc.cluster.local"
        )
        pods = self.api.get("/api/v1/pods")["items"]
        for svc in self.api.get("/api/v1/services")["items"]:
            selector = (svc.get("spec") or {}).get("selector")
            if not selector:
                continue
            ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
            for pod in pods:
                labels = pod["metadata"].get("labels") or {}
                ip = (pod.get("status") or {}).get("podIP")
                if (
                    ip
                    and pod["metadata"]["namespace"] == ns
                    and all(labels.get(k) == v for k, v in selector.items())
                ):
                    lines.append(f"{ip} {name}.{ns}.svc {name}.{ns}.svc.cluster.local")
        text = "\n".join(lines) + "\n"
        if not self.hosts_file.exists() or self.hosts_file.read_text() != text:
            tmp = self.hosts_file.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(self.hosts_file)

    # -- failure and shutdown ----------------------------------------------------------------

    def fail(self) -> None:
        """The machine is lost: heartbeats and status stop, every process dies at once."""
        self.log("FAILING on request: no more heartbeats or status; killing every container")
        self.failed.set()
        for runner in list(self.pods.values()):
            runner.kill_all()

    def shutdown(self, grace: float = 10) -> None:
        self.stopping.set()
        for runner in list(self.pods.values()):
            runner.stop_containers(grace, report=False)
        if self.proxy:
            self.proxy.close()
        if self.images is not None:
            self.images.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="node_agent.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", type=Path, required=True, help="credentials the agent acts with")
    parser.add_argument("--node", required=True, help="the Node name to register")
    parser.add_argument("--dir", type=Path, required=True, help="working folder (Pod files, logs, hosts)")
    parser.add_argument("--label", action="append", default=[], help="extra Node label k=v (repeatable)")
    parser.add_argument(
        "--image-fs",
        action="store_true",
        help="run each container from its image's filesystem (buildah storage; make images), "
        "not from this environment",
    )
    parser.add_argument(
        "--shared-path",
        action="append",
        type=Path,
        default=[],
        help="with --image-fs: a host folder every container sees at the same path, e.g. the "
        "checkpoints' (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.shared_path and not args.image_fs:
        parser.error("--shared-path needs --image-fs: without it every container already sees the whole host")
    for path in args.shared_path:
        if not path.is_dir():
            parser.error(f"--shared-path {path}: not a folder")
    labels = dict(item.split("=", 1) for item in args.label)
    args.dir.mkdir(parents=True, exist_ok=True)
    agent = NodeAgent(
        Api(args.kubeconfig, args.dir), args.node, args.dir, labels,
        image_fs=args.image_fs, shared_paths=args.shared_path,
    )  # fmt: skip
    signal.signal(signal.SIGUSR1, lambda *_: agent.fail())
    signal.signal(signal.SIGTERM, lambda *_: agent.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: agent.stopping.set())
    try:
        agent.run()
    finally:
        agent.shutdown()
        agent.log("stopped")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
