"""A real Kubernetes control plane on loopback, for the e2e suite and for trying things by hand.

Why it exists: the operator and the chart must meet a real API server (validation, admission,
RBAC, scheduling, controllers), and this machine has no Docker. So we run the upstream binaries
that `e2e/controlplane/build.sh` builds from pinned Go modules -- etcd, kube-apiserver,
kube-controller-manager, kube-scheduler -- plus KWOK, which plays the kubelet for fake nodes so
that pods are scheduled and reported Running without any container runtime.

    python e2e/cluster.py up --dir /tmp/c      # prints the kubeconfig path; leaves it running
    KUBECONFIG=/tmp/c/kubeconfig kubectl get nodes
    python e2e/cluster.py down --dir /tmp/c

Each component runs in its own process group with its log in `<dir>/logs/<component>.log`; a
failed start names the component and prints its log tail, and every process is stopped.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import contextlib
import ctypes
import dataclasses
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamapp.runtime.embedded import broker

__all__ = ["Cluster", "ClusterError", "bin_dir", "missing_binaries"]

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "helm")
KWOK_STAGES = "kwok-stages.yaml"  # node/pod lifecycle Stages build.sh takes from the kwok module
SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"
KWOK_SELECTOR = ("kwok.x-k8s.io/node", "fake")
STATE_FILE = "cluster.json"
ADMIN_SUBJECT = "/O=system:masters/CN=streamapp-e2e-admin"


class ClusterError(Exception):
    """A control-plane component failed to build, start, answer or stop; the message names it."""


def bin_dir() -> Path:
    """Where build.sh puts the binaries: $STREAMAPP_CACHE/bin (default ~/.cache/streamapp/bin)."""
    cache = os.environ.get("STREAMAPP_CACHE") or str(Path.home() / ".cache" / "streamapp")
    return Path(cache) / "bin"


def missing_binaries(directory: Path | None = None) -> list[str]:
    directory = directory or bin_dir()
    missing = [name for name in BINARIES if not os.access(directory / name, os.X_OK)]
    return missing + ([KWOK_STAGES] if not (directory / KWOK_STAGES).is_file() else [])


def _free_port() -> int:
    return broker.free_port()  # outside the ephemeral range: see there


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as err:
        return f"(no log: {err})"


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it if the test process dies without cleaning up."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# ---------------------------------------------------------------------------------------------
# Certificates, with the openssl CLI (always present; the venv need not carry `cryptography`).


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ClusterError(f"openssl {args[0]} in {cwd} failed: {proc.stderr.strip()}")


def _leaf(pki: Path, name: str, subject: str, usage: str, sans: str = "", rsa: bool = False) -> None:
    """Key + certificate `<name>.key/.crt` signed by the CA in `pki`."""
    key = ["-newkey", "rsa:2048"] if rsa else ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
    _openssl("req", "-new", *key, "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", subject, cwd=pki)  # fmt: skip
    ext = f"keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage={usage}\n"
    if sans:
        ext += f"subjectAltName={sans}\n"
    (pki / f"{name}.ext").write_text(ext)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-set_serial", f"0x{os.urandom(16).hex()}", "-days", "3650", "-sha256",
             "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=pki)  # fmt: skip


def _make_pki(pki: Path) -> None:
    pki.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650", "-subj", "/CN=streamapp-e2e-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", cwd=pki)  # fmt: skip
    dns = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    sans = ",".join(["IP:127.0.0.1", f"IP:{SERVICE_IP}", *(f"DNS:{name}" for name in dns)])
    ec = ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]
    # openssl runs are independent once the CA exists; in parallel they cost one RSA keygen.
    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        jobs = [
            pool.submit(_leaf, pki, "apiserver", "/CN=kube-apiserver", "serverAuth", sans),
            # RSA for the admin: Java clients (Spark's fabric8) read RSA keys without extra providers.
            pool.submit(_leaf, pki, "admin", ADMIN_SUBJECT, "clientAuth", rsa=True),
            pool.submit(_leaf, pki, "controller-manager", "/CN=system:kube-controller-manager", "clientAuth"),
            pool.submit(_leaf, pki, "scheduler", "/CN=system:kube-scheduler", "clientAuth"),
            pool.submit(_leaf, pki, "front-proxy-client", "/CN=front-proxy-client", "clientAuth"),
            pool.submit(_openssl, "genpkey", *ec, "-out", "sa.key", cwd=pki),
        ]
        for job in jobs:
            job.result()
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def _kubeconfig(path: Path, server: str, pki: Path, user: str) -> None:
    def b64(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: streamapp-e2e\n  cluster:\n    server: {server}\n"
        f"    certificate-authority-data: {b64('ca.crt')}\n"
        f"users:\n- name: {user}\n  user:\n"
        f"    client-certificate-data: {b64(user + '.crt')}\n"
        f"    client-key-data: {b64(user + '.key')}\n"
        f"contexts:\n- name: streamapp-e2e\n  context:\n    cluster: streamapp-e2e\n    user: {user}\n"
        "current-context: streamapp-e2e\n"
    )
    path.chmod(0o600)


def _node(name: str) -> dict[str, Any]:
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_SELECTOR[0]: KWOK_SELECTOR[1], "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/agent": "",
            },
        },
        "status": {"capacity": resources, "allocatable": resources, "phase": "Running"},
    }


@dataclasses.dataclass
class _Component:
    name: str
    argv: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None


class Cluster:
    """etcd + kube-apiserver + controller-manager + scheduler + KWOK nodes under `directory`."""

    def __init__(self, directory: Path, *, binaries: Path | None = None, nodes: int = 2) -> None:
        self.dir = directory.resolve()
        self.bin = (binaries or bin_dir()).resolve()
        self.nodes = [f"kwok-node-{i}" for i in range(nodes)]
        self.pki = self.dir / "pki"
        self.logs = self.dir / "logs"
        self.kubeconfig = self.dir / "kubeconfig"
        self.server = ""
        self.ports: dict[str, int] = {}
        self._components: list[_Component] = []

    # -- public helpers --------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """Environment for kubectl/helm/clients: KUBECONFIG set, helm's state kept in the dir."""
        helm = self.dir / "helm"
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(helm / "cache"),
            "HELM_CONFIG_HOME": str(helm / "config"),
            "HELM_DATA_HOME": str(helm / "data"),
        }

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 60) -> str:
        """Run kubectl against this cluster; return stdout, raise ClusterError naming the command."""
        return self._run([os.environ.get("KUBECTL", "kubectl"), *args], input, timeout)

    def helm(self, *args: str, input: str | None = None, timeout: float = 120) -> str:
        return self._run([str(self.bin / "helm"), *args], input, timeout)

    def _run(self, argv: list[str], input: str | None, timeout: float) -> str:
        try:
            proc = subprocess.run(
                argv, input=input, capture_output=True, text=True, timeout=timeout, env=self.env, check=False
            )
        except subprocess.TimeoutExpired as err:
            raise ClusterError(f"`{' '.join(argv)}` did not finish within {timeout:.0f}s") from err
        if proc.returncode != 0:
            detail = proc.stderr.strip() or proc.stdout.strip()
            raise ClusterError(f"`{' '.join(argv)}` exited {proc.returncode}: {detail}")
        return proc.stdout

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request to the API server as the admin; returns the decoded JSON body."""
        result: dict[str, Any] = json.loads(self.request(method, path, body) or b"{}")
        return result

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> bytes:
        """One request to the API server as the admin; returns the raw body."""
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            body_bytes: bytes = resp.read()
            return body_bytes

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, *, timeout: float = 90, tie_to_parent: bool = True) -> float:
        """Start everything and wait until nodes are Ready; return the seconds it took.

        With `tie_to_parent` the processes get SIGTERM if this Python process dies; the CLI's
        `up` turns it off so that the cluster outlives the command.
        """
        missing = missing_binaries(self.bin)
        if missing:
            raise ClusterError(f"missing {', '.join(missing)} in {self.bin}: run `make e2e-deps`")
        began = time.monotonic()
        deadline = began + timeout
        try:
            self._prepare()
            self._launch("etcd", self._etcd_argv(), tie_to_parent)
            self._wait("etcd", deadline, self._etcd_healthy)
            self._launch("kube-apiserver", self._apiserver_argv(), tie_to_parent)
            self._wait("kube-apiserver", deadline, self._apiserver_ready)
            self._launch("kube-controller-manager", self._controller_manager_argv(), tie_to_parent)
            self._launch("kube-scheduler", self._scheduler_argv(), tie_to_parent)
            self._launch("kwok", self._kwok_argv(), tie_to_parent)
            for name in self.nodes:
                self.api("POST", "/api/v1/nodes", _node(name))
            self._wait("kwok", deadline, self._nodes_ready)
            # The ServiceAccount admission plugin refuses pods until this exists.
            self._wait("kube-controller-manager", deadline, self._default_service_account)
        except BaseException:
            self.stop()
            raise
        return time.monotonic() - began

    def stop(self, grace: float = 10) -> None:
        """Stop every component (clients, then the API server, then etcd); reap the processes."""
        running = {c.name: c.process.pid for c in self._components if c.process and c.process.poll() is None}
        _terminate(running, grace)
        for comp in self._components:
            if comp.process:
                comp.process.wait(timeout=5)
        self._components.clear()
        (self.dir / STATE_FILE).unlink(missing_ok=True)

    # -- internals -------------------------------------------------------------------------

    def _prepare(self) -> None:
        if (self.dir / STATE_FILE).exists():
            raise ClusterError(f"a cluster is already recorded in {self.dir / STATE_FILE}; run `down` first")
        for sub in ("pki", "etcd", "logs", "home", "helm"):
            shutil.rmtree(self.dir / sub, ignore_errors=True)
        self.logs.mkdir(parents=True)
        (self.dir / "home").mkdir()
        self.ports = {name: _free_port() for name in ("etcd", "peer", "apiserver", "kcm", "sched")}
        self.server = f"https://127.0.0.1:{self.ports['apiserver']}"
        _make_pki(self.pki)
        _kubeconfig(self.kubeconfig, self.server, self.pki, "admin")
        for user in ("controller-manager", "scheduler"):
            _kubeconfig(self.pki / f"{user}.kubeconfig", self.server, self.pki, user)

    def _launch(self, name: str, argv: list[str], tie_to_parent: bool) -> None:
        log = self.logs / f"{name}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                env={**os.environ, "HOME": str(self.dir / "home")},
                start_new_session=True,
                preexec_fn=_die_with_parent if tie_to_parent else None,  # noqa: PLW1509
            )
        self._components.append(_Component(name, argv, log, process))
        state = [
            {"name": c.name, "pid": c.process.pid, "exe": c.argv[0]} for c in self._components if c.process
        ]
        (self.dir / STATE_FILE).write_text(json.dumps({"server": self.server, "components": state}, indent=1))

    def _wait(self, name: str, deadline: float, ready: Callable[[], bool]) -> None:
        """Poll `ready()` until true; fail naming `name` on timeout or naming whichever died."""
        last = ""
        while True:
            for comp in self._components:
                if comp.process and comp.process.poll() is not None:
                    raise ClusterError(
                        f"{comp.name} exited with {comp.process.returncode} while waiting for {name};"
                        f" last lines of {comp.log}:\n{_tail(comp.log)}"
                    )
            try:
                if ready():
                    return
            except (OSError, urllib.error.URLError, ValueError) as err:
                last = str(err)
            if time.monotonic() > deadline:
                log = self.logs / f"{name}.log"
                raise ClusterError(
                    f"{name} was not ready in time (last check: {last or 'not ready'});"
                    f" last lines of {log}:\n{_tail(log)}"
                )
            time.sleep(0.2)

    def _etcd_healthy(self) -> bool:
        url = f"http://127.0.0.1:{self.ports['etcd']}/health"
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(json.loads(resp.read()).get("health") == "true")

    def _apiserver_ready(self) -> bool:
        try:
            return self.request("GET", "/readyz").strip() == b"ok"
        except urllib.error.HTTPError:
            return False

    def _nodes_ready(self) -> bool:
        items = self.api("GET", "/api/v1/nodes")["items"]
        ready = {
            n["metadata"]["name"]
            for n in items
            if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
        }
        return set(self.nodes) <= ready

    def _default_service_account(self) -> bool:
        try:
            self.api("GET", "/api/v1/namespaces/default/serviceaccounts/default")
        except urllib.error.HTTPError:
            return False
        return True

    def _etcd_argv(self) -> list[str]:
        client, peer = f"http://127.0.0.1:{self.ports['etcd']}", f"http://127.0.0.1:{self.ports['peer']}"
        return [
            str(self.bin / "etcd"),
            "--name=e2e",
            f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=e2e={peer}",
            "--unsafe-no-fsync",  # a throwaway cluster; fsync only slows tests down
            "--log-level=warn",
        ]

    def _apiserver_argv(self) -> list[str]:
        pki = self.pki
        return [
            str(self.bin / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}",
            f"--cert-dir={pki}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--authorization-mode=Node,RBAC",
            # The aggregation layer's front proxy; the controller-manager's and scheduler's
            # delegated authentication also read this CA and complain when it is absent.
            f"--requestheader-client-ca-file={pki / 'ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--allow-privileged=true",
            # A loopback address is not a valid Endpoints address; nothing here needs it.
            "--endpoint-reconciler-type=none",
            "--profiling=false",
        ]

    def _component_auth(self, user: str) -> list[str]:
        kubeconfig = self.pki / f"{user}.kubeconfig"
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--cert-dir={self.pki / user}",
            "--leader-elect=false",
        ]

    def _controller_manager_argv(self) -> list[str]:
        return [
            str(self.bin / "kube-controller-manager"),
            *self._component_auth("controller-manager"),
            f"--secure-port={self.ports['kcm']}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={self.pki / 'sa.key'}",
            f"--root-ca-file={self.pki / 'ca.crt'}",
            f"--cluster-signing-cert-file={self.pki / 'ca.crt'}",
            f"--cluster-signing-key-file={self.pki / 'ca.key'}",
            # KWOK renews every node's Lease from one process; on a loaded 2-core machine a renewal
            # can come late. The e2e suite tests StreamApp, not node failure detection.
            "--node-monitor-grace-period=2m",
        ]

    def _scheduler_argv(self) -> list[str]:
        return [
            str(self.bin / "kube-scheduler"),
            *self._component_auth("scheduler"),
            f"--secure-port={self.ports['sched']}",
        ]

    def _kwok_argv(self) -> list[str]:
        return [
            str(self.bin / "kwok"),
            f"--kubeconfig={self.kubeconfig}",
            f"--config={self.bin / KWOK_STAGES}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_SELECTOR[0]}={KWOK_SELECTOR[1]}",
            "--cidr=10.244.0.0/16",
            "--node-ip=127.0.0.1",
            # Renew each node's Lease, as a kubelet does: without it the node controller sees no
            # heartbeat for 50 s, marks the node NotReady and every pod on it not Ready.
            "--node-lease-duration-seconds=40",
        ]


# Stopped last: the API server drains slowly once etcd is gone, and clients retry a missing API server.
_TIERS = {"kube-apiserver": 1, "etcd": 2}


def _terminate(pids: dict[str, int], grace: float) -> None:
    """SIGTERM process groups tier by tier; SIGKILL any group that outlives `grace`."""
    for tier in sorted({_TIERS.get(name, 0) for name in pids}):
        group = [pid for name, pid in pids.items() if _TIERS.get(name, 0) == tier]
        for pid in group:
            _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(_alive(pid) for pid in group) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in group:  # stragglers, and anything a component forked into its group
            _signal_group(pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def down(directory: Path, grace: float = 10) -> list[str]:
    """Stop a cluster started by `up` in another process; return the names of what was stopped."""
    state_file = directory / STATE_FILE
    if not state_file.exists():
        return []
    components = json.loads(state_file.read_text())["components"]
    mine: dict[str, int] = {}
    for comp in components:
        pid = int(comp["pid"])
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
            leader = os.getpgid(pid) == pid
        except OSError:
            continue  # already gone
        if argv0 == comp["exe"] and leader:  # not a reused pid
            mine[comp["name"]] = pid
    _terminate(mine, grace)
    state_file.unlink()
    return list(mine)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cluster.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--dir", type=Path, required=True, help="cluster directory (kubeconfig, logs, data)")
    parser.add_argument("--nodes", type=int, default=2, help="number of KWOK nodes (default 2)")
    parser.add_argument("--timeout", type=float, default=90, help="seconds to wait for readiness")
    args = parser.parse_args(argv)
    if args.command == "down":
        stopped = down(args.dir)
        print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return 0
    cluster = Cluster(args.dir, nodes=args.nodes)
    try:
        seconds = cluster.start(timeout=args.timeout, tie_to_parent=False)
    except ClusterError as err:
        print(f"cluster.py up: {err}", file=sys.stderr)
        return 1
    print(f"control plane up in {seconds:.1f}s at {cluster.server}; logs in {cluster.logs}")
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
