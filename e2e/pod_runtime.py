"""One Pod on a node agent's Node: its files, its environment, its processes, its honest status.

Why a module of its own: ``node_agent`` is about the Node (registration, heartbeats, DNS); this is
what a kubelet does for each Pod — write the volumes, resolve the environment as the kubelet does
(``fieldRef``, ``secretKeyRef``, ``configMapKeyRef``, ``resourceFieldRef``, ``envFrom``,
``$(VAR)`` references), start every container in a private mount namespace with the volumes
bind-mounted at their ``mountPath``, run the probes, restart per ``restartPolicy``, and report
what it saw. See ``node_agent``'s docstring for what a "container" is (and is not) here.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Protocol

import image_fs

HERE = Path(__file__).resolve().parent
ENTRYPOINT = HERE / "spark_entrypoint.py"
#: Where a container writes its termination message unless its spec says otherwise.
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
#: Back-off before restarting a crashed container: the kubelet's 10 s doubling to 5 min.
BACKOFF_BASE, BACKOFF_MAX = 10.0, 300.0
#: Bind-mount each (source, target, rw|ro) triple, then exec the command: the container's view.
_MOUNT_SCRIPT = (
    'set -e; n=$1; shift; while [ "$n" -gt 0 ]; do '
    'if [ -d "$1" ]; then mkdir -p "$2"; else mkdir -p "$(dirname "$2")"; [ -e "$2" ] || touch "$2"; fi; '
    'mount --bind "$1" "$2"; if [ "$3" = ro ]; then mount -o remount,bind,ro "$2"; fi; '
    'shift 3; n=$((n-1)); done; exec "$@"'
)
#: The same from an image: its root (read-only lower layer) under a fresh writable layer (overlay),
#: /proc and /sys, a /dev of its own, the cluster's hosts file and the host's resolv.conf, the
#: volumes at their mountPath inside it; then chroot as the container's user and exec in its
#: working directory.
_IMAGE_SCRIPT = (
    "set -e; root=$1 upper=$2 work=$3 m=$4 hosts=$5 user=$6 groups=$7 wd=$8 n=$9; shift 9; "
    'mount -t overlay overlay -o "lowerdir=$root,upperdir=$upper,workdir=$work" "$m"; '
    'for d in proc sys; do mkdir -p "$m/$d"; mount --rbind "/$d" "$m/$d"; done; '
    # /dev as a container runtime makes it: a tmpfs of its own with the usual devices bound in.
    'mkdir -p "$m/dev"; mount -t tmpfs -o nosuid,mode=755 tmpfs "$m/dev"; '
    "for d in null zero full random urandom tty; do "
    'touch "$m/dev/$d"; mount --bind "/dev/$d" "$m/dev/$d"; done; '
    'mkdir -p "$m/dev/shm" "$m/dev/pts"; mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$m/dev/shm"; '
    'ln -s /proc/self/fd "$m/dev/fd"; ln -s /proc/self/fd/0 "$m/dev/stdin"; '
    'ln -s /proc/self/fd/1 "$m/dev/stdout"; ln -s /proc/self/fd/2 "$m/dev/stderr"; '
    'mkdir -p "$m/etc"; touch "$m/etc/hosts" "$m/etc/resolv.conf"; '
    'mount --bind "$hosts" "$m/etc/hosts"; mount --bind /etc/resolv.conf "$m/etc/resolv.conf"; '
    'while [ "$n" -gt 0 ]; do t="$m$2"; '
    'if [ -d "$1" ]; then mkdir -p "$t"; else mkdir -p "$(dirname "$t")"; [ -e "$t" ] || touch "$t"; fi; '
    'mount --bind "$1" "$t"; if [ "$3" = ro ]; then mount -o remount,bind,ro "$t"; fi; '
    'shift 3; n=$((n-1)); done; mkdir -p "$m$wd"; '
    'exec chroot --userspec="$user" --groups="$groups" "$m" /usr/bin/env -C "$wd" "$@"'
)
_SUFFIX = {
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def quantity(text: str) -> float:
    """A Kubernetes quantity (``500m``, ``1.5``, ``896Mi``) as a number."""
    match = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text))
    if not match or (match[2] and match[2] not in _SUFFIX):
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    return float(match[1]) * _SUFFIX.get(match[2], 1)


class ConfigError(Exception):
    """The container cannot be configured yet (a missing Secret or ConfigMap key): retried."""


def _java_home() -> str:
    java = Path(
        subprocess.run(
            ["sh", "-c", "command -v java"], capture_output=True, text=True, check=False
        ).stdout.strip()
    )
    return str(java.resolve().parent.parent) if java.name else ""


def _spark_home() -> str:
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    return str(Path(spec.origin).parent) if spec and spec.origin else ""


#: The runtime image's ENV, stood in for by the project's environment (see images/runtime/Dockerfile).
IMAGE_ENV = {
    "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
    "JAVA_HOME": _java_home(),
    "SPARK_HOME": _spark_home(),
    "PYSPARK_PYTHON": sys.executable,
    "PYSPARK_DRIVER_PYTHON": sys.executable,
    "STREAMAPP_CACHE": os.environ.get("STREAMAPP_CACHE") or str(Path.home() / ".cache" / "streamapp"),
    "PYTHONUNBUFFERED": "1",
    "PYTHONSAFEPATH": "1",
}


class Container:
    """One container's process and what the kubelet remembers about it."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.name: str = spec["name"]
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state: dict[str, Any] = {}
        self.ready = False
        self.started_at = 0.0
        self.next_start = 0.0  # monotonic time before which a restart waits (back-off)
        self.done = False  # terminated and not to be restarted
        self.probe_results: dict[str, list[bool]] = {"readiness": [], "liveness": []}
        self.probe_due: dict[str, float] = {}
        self.image: image_fs.Image | None = None  # the image it runs from (--image-fs), if any
        self.ids: tuple[int, int] = (os.getuid(), os.getgid())  # the user it runs as

    def status(self, image: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "image": image,
            "imageID": "",
            "ready": self.ready,
            "started": "running" in self.state,
            "restartCount": self.restarts,
            "state": self.state,
        }
        if self.process is not None:
            out["containerID"] = f"node-agent://{self.process.pid}"
        if self.last_state:
            out["lastState"] = self.last_state
        return out


class Api(Protocol):
    """The API server as a Pod's runner calls it (``node_agent.Api`` is one)."""

    def call(self, method: str, path: str, body: Any = None) -> Any: ...

    def find(self, path: str) -> Any: ...

    def merge(self, path: str, body: Any) -> Any: ...


class Network(Protocol):
    """The Node's loopback addresses: the ``kubernetes`` Service's and one per Pod."""

    @property
    def service_ip(self) -> str: ...

    def allocate(self) -> str: ...


class Node(Protocol):
    """What a Pod's runner reads of its Node (``node_agent.NodeAgent`` is one). A protocol, not an
    import: the agent imports this module to run its Pods, and this module never imports it back."""

    @property
    def api(self) -> Api: ...

    @property
    def dir(self) -> Path: ...

    @property
    def net(self) -> Network: ...

    @property
    def images(self) -> image_fs.ImageFilesystems | None: ...

    @property
    def hosts_file(self) -> Path: ...

    @property
    def shared_paths(self) -> list[Path]: ...

    @property
    def capacity(self) -> dict[str, str]: ...

    @property
    def pods(self) -> dict[str, PodRunner]: ...

    @property
    def failed(self) -> threading.Event: ...

    @property
    def stopping(self) -> threading.Event: ...

    def log(self, message: str) -> None: ...


class PodRunner(threading.Thread):
    """Runs one Pod until it is deleted (or ends, with restartPolicy Never/OnFailure)."""

    def __init__(self, agent: Node, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        super().__init__(daemon=True, name=f"pod-{meta['namespace']}/{meta['name']}")
        self.agent = agent
        self.pod = pod
        self.ns, self.pod_name, self.uid = meta["namespace"], meta["name"], meta["uid"]
        self.ip = agent.net.allocate()
        self.dir = agent.dir / "pods" / self.ns / self.pod_name
        self.containers = [Container(c) for c in pod["spec"]["containers"]]
        self.policy = pod["spec"].get("restartPolicy", "Always")
        self.started_time = ""
        self._gone = threading.Event()
        self._reported: Any = None
        self.created: list[Path] = []  # mount points made on the host for this Pod

    def log(self, message: str) -> None:
        self.agent.log(f"pod {self.ns}/{self.pod_name}: {message}")

    def update(self, pod: dict[str, Any]) -> None:
        self.pod = pod

    def vanished(self) -> None:
        self._gone.set()

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.ns}/pods/{self.pod_name}"

    # -- the Pod's life --------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._run()
        except Exception as err:  # noqa: BLE001 - a fixture thread must say why it stopped
            self.log(f"agent error: {err!r}")
            self.kill_all()
        finally:
            self._clean_mount_points()
            if all(c.process is None or c.process.poll() is not None for c in self.containers):
                shutil.rmtree(self.dir / "layers", ignore_errors=True)  # writable layers go with the Pod

    def _run(self) -> None:
        self.started_time = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.dir.mkdir(parents=True, exist_ok=True)
        self._announce()
        mounts = self._volumes()
        while True:
            if self._gone.is_set() or self.agent.failed.is_set():
                self.kill_all()
                return
            if self.agent.stopping.is_set():  # the agent stops the containers; wait for it to finish
                if all(c.done or c.process is None for c in self.containers):
                    return
                time.sleep(0.25)
                continue
            if self.pod["metadata"].get("deletionTimestamp"):
                grace = self.pod["metadata"].get("deletionGracePeriodSeconds")
                grace = self.pod["spec"].get("terminationGracePeriodSeconds", 30) if grace is None else grace
                self.stop_containers(float(grace))
                self._report()
                self._remove()
                return
            for container in self.containers:
                self._tend(container, mounts)
            self._report()
            if all(c.done for c in self.containers):
                self.log(f"ended: {self._phase()}")
                return
            time.sleep(0.25)

    def _security(self, container: dict[str, Any] | None = None) -> dict[str, Any]:
        """The Pod's securityContext with the container's on top (the kubelet's precedence)."""
        spec = self.pod["spec"]
        security = {**(spec.get("securityContext") or {})}
        for c in [container] if container else spec["containers"]:
            security.update(c.get("securityContext") or {})
        return security

    def _announce(self) -> None:
        spec = self.pod["spec"]
        unapplied = []
        if self.agent.images is None:
            unapplied += [
                f"securityContext.{key}"
                for key in ("runAsUser", "runAsGroup", "runAsNonRoot", "fsGroup")
                if key in self._security()
            ]
        if any((c.get("resources") or {}).get("limits") for c in spec["containers"]):
            unapplied.append("resource limits")
        if spec.get("initContainers"):
            unapplied.append("initContainers")
        images = ", ".join(sorted({c.get("image", "?") for c in spec["containers"]}))
        where = (
            "runs from its image's filesystem (buildah storage; a fresh writable layer per container start)"
            if self.agent.images is not None
            else f"runs from the project's environment ({sys.prefix}), not from an image filesystem"
        )
        skipped = ", ".join(unapplied) or "nothing"
        self.log(f"Pod IP {self.ip}; image {images} {where}; not applied here: {skipped}")

    # -- volumes -----------------------------------------------------------------------------

    def _get(self, kind: str, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.agent.api.find(f"/api/v1/namespaces/{self.ns}/{kind}/{name}")
        return found

    def _data(self, kind: str, name: str) -> dict[str, bytes] | None:
        obj = self._get(kind, name)
        if obj is None:
            return None
        data = (
            {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
            if kind == "secrets"
            else {k: v.encode() for k, v in (obj.get("data") or {}).items()}
        )
        if kind == "configmaps":
            data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        return data

    def _write_items(self, folder: Path, data: dict[str, bytes], items: list[dict[str, Any]] | None) -> None:
        for item in items or [{"key": k, "path": k} for k in data]:
            if item["key"] not in data:
                raise ConfigError(f"key {item['key']!r} is missing")
            target = folder / item["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data[item["key"]])

    def _volumes(self) -> dict[str, Path]:
        """Each volume's files under the Pod's folder; {volume name: folder}."""
        out: dict[str, Path] = {}
        for volume in self.pod["spec"].get("volumes") or []:
            folder = self.dir / "volumes" / volume["name"]
            folder.mkdir(parents=True, exist_ok=True)
            while True:
                try:
                    self._fill(volume, folder)
                    break
                except ConfigError as err:  # the kubelet waits for a missing ConfigMap or Secret
                    self.log(f"volume {volume['name']}: {err}; retrying")
                    if self._gone.is_set() or self.pod["metadata"].get("deletionTimestamp"):
                        break
                    time.sleep(1)
            out[volume["name"]] = folder
            if self.agent.images is not None:
                self._own(volume, folder)
        return out

    def _own(self, volume: dict[str, Any], folder: Path) -> None:
        """What the kubelet does to a volume for the container's user: an emptyDir is world-writable
        (0777); with ``fsGroup`` every volume belongs to that group, group-writable (setgid dirs)."""
        if "emptyDir" in volume:
            folder.chmod(0o777)
        group = self._security().get("fsGroup")
        if group is None:
            return
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, -1, int(group), follow_symlinks=False)
            mode = path.stat().st_mode
            path.chmod(mode | 0o060 | (0o2010 if path.is_dir() else 0))

    def _fill(self, volume: dict[str, Any], folder: Path) -> None:
        if "emptyDir" in volume:
            return
        if "configMap" in volume or "secret" in volume:
            kind, source = (
                ("configmaps", volume["configMap"])
                if "configMap" in volume
                else ("secrets", volume["secret"])
            )
            name = source.get("name") or source.get("secretName")
            data = self._data(kind, name)
            if data is None:
                if source.get("optional"):
                    return
                raise ConfigError(f"{kind[:-1]} {name} not found")
            self._write_items(folder, data, source.get("items"))
            return
        if "projected" in volume:
            for source in volume["projected"].get("sources") or []:
                if "serviceAccountToken" in source:
                    token = self._token(source["serviceAccountToken"])
                    (folder / source["serviceAccountToken"]["path"]).write_text(token)
                elif "configMap" in source or "secret" in source:
                    self._fill(source, folder)
                elif "downwardAPI" in source:
                    for item in source["downwardAPI"].get("items") or []:
                        (folder / item["path"]).write_text(self._field(item["fieldRef"]["fieldPath"]))
            return
        if "downwardAPI" in volume:
            for item in volume["downwardAPI"].get("items") or []:
                (folder / item["path"]).write_text(self._field(item["fieldRef"]["fieldPath"]))
            return
        raise ConfigError(f"volume type {sorted(set(volume) - {'name'})} is not supported by the node agent")

    def _token(self, source: dict[str, Any]) -> str:
        """A bound token for the Pod's ServiceAccount, from the TokenRequest API (not rotated)."""
        account = self.pod["spec"].get("serviceAccountName") or "default"
        spec: dict[str, Any] = {
            "expirationSeconds": int(source.get("expirationSeconds", 3607)),
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": self.pod_name, "uid": self.uid},
        }
        if source.get("audience"):
            spec["audiences"] = [source["audience"]]
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        path = f"/api/v1/namespaces/{self.ns}/serviceaccounts/{account}/token"
        try:
            return str(self.agent.api.call("POST", path, body)["status"]["token"])
        except urllib.error.HTTPError as err:
            if err.code != 404:
                raise
            # The kubelet waits for the ServiceAccount as for a ConfigMap (its app may be being
            # deleted, or not created yet): retried until it exists or the Pod is deleted.
            raise ConfigError(f"serviceaccount {account} not found") from err

    # -- environment -------------------------------------------------------------------------

    def _field(self, path: str) -> str:
        meta, spec = self.pod["metadata"], self.pod["spec"]
        simple = {
            "metadata.name": meta["name"],
            "metadata.namespace": meta["namespace"],
            "metadata.uid": meta["uid"],
            "spec.nodeName": spec.get("nodeName", ""),
            "spec.serviceAccountName": spec.get("serviceAccountName", ""),
            "status.hostIP": "127.0.0.1",
            "status.podIP": self.ip,
            "status.podIPs": self.ip,
        }
        if path in simple:
            return str(simple[path])
        match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
        if match:
            return str((meta.get(match[1]) or {}).get(match[2], ""))
        raise ConfigError(f"fieldRef {path!r} is not supported")

    def _resource(self, ref: dict[str, Any], container: dict[str, Any]) -> str:
        owner = next(
            (c for c in self.pod["spec"]["containers"] if c["name"] == ref.get("containerName")), container
        )
        kind, _, name = ref["resource"].partition(".")
        value = ((owner.get("resources") or {}).get(kind) or {}).get(name)
        if value is None:  # an unset limit is the node's allocatable, as the kubelet says
            value = self.agent.capacity[name]
        number = quantity(value) / quantity(ref.get("divisor") or "1")
        return str(math.ceil(number))

    def _key(self, kind: str, ref: dict[str, Any]) -> str | None:
        data = self._data(kind, ref["name"])
        if data is None or ref["key"] not in data:
            if ref.get("optional"):
                return None
            raise ConfigError(f"{kind[:-1]} {ref['name']} key {ref['key']!r} not found")
        return data[ref["key"]].decode()

    def environment(self, container: dict[str, Any]) -> dict[str, str]:
        """The container's environment, kubelet order: service links, envFrom, env ($(VAR) expanded)."""
        env = {
            "KUBERNETES_SERVICE_HOST": self.agent.net.service_ip,
            "KUBERNETES_SERVICE_PORT": "443",
            "HOSTNAME": self.pod_name,
        }
        for source in container.get("envFrom") or []:
            kind, ref = (
                ("configmaps", source["configMapRef"])
                if "configMapRef" in source
                else ("secrets", source["secretRef"])
            )
            data = self._data(kind, ref["name"])
            if data is None and not ref.get("optional"):
                raise ConfigError(f"{kind[:-1]} {ref['name']} not found")
            env.update({source.get("prefix", "") + k: v.decode() for k, v in (data or {}).items()})
        for var in container.get("env") or []:
            source = var.get("valueFrom")
            if source is None:
                env[var["name"]] = _expand(var.get("value", ""), env)
            elif "fieldRef" in source:
                env[var["name"]] = self._field(source["fieldRef"]["fieldPath"])
            elif "resourceFieldRef" in source:
                env[var["name"]] = self._resource(source["resourceFieldRef"], container)
            elif "secretKeyRef" in source or "configMapKeyRef" in source:
                kind = "secrets" if "secretKeyRef" in source else "configmaps"
                value = self._key(kind, source.get("secretKeyRef") or source["configMapKeyRef"])
                if value is not None:
                    env[var["name"]] = value
        return env

    # -- processes ---------------------------------------------------------------------------

    def _argv(self, spec: dict[str, Any], env: dict[str, str], image: image_fs.Image | None) -> list[str]:
        command = [_expand(a, env) for a in spec.get("command") or []]
        args = [_expand(a, env) for a in spec.get("args") or []]
        if image is not None:  # Kubernetes' rules: command replaces ENTRYPOINT (and CMD), args CMD
            if not command:
                command, args = image.entrypoint, args if "args" in spec else image.cmd
            return [*command, *args]
        if not command:  # the image's ENTRYPOINT: the runtime image's is Spark's entrypoint
            command = [sys.executable, str(ENTRYPOINT)]
        return [*command, *args]

    def _image_user(self, spec: dict[str, Any], image: image_fs.Image) -> tuple[int, int, int | None]:
        """uid, gid and fsGroup as the kubelet picks them: securityContext over the image's USER."""
        security = self._security(spec)
        uid, gid = image.ids()
        if "runAsUser" in security:
            uid = int(security["runAsUser"])
            gid = image.ids(str(uid))[1]
        gid = int(security.get("runAsGroup", gid))
        if security.get("runAsNonRoot") and uid == 0:
            raise ConfigError(
                f"container has runAsNonRoot and image will run as root (pod: {self.pod_name}, "
                f"container: {spec['name']})"
            )
        group = security.get("fsGroup")
        return uid, gid, None if group is None else int(group)

    def _start(self, container: Container, mounts: dict[str, Path]) -> None:
        spec = container.spec
        image: image_fs.Image | None = None
        try:
            if self.agent.images is not None:
                image = self.agent.images.get(spec.get("image", ""))
        except (image_fs.ImageMissing, subprocess.CalledProcessError) as err:
            detail = err.stderr.strip() if isinstance(err, subprocess.CalledProcessError) else str(err)
            container.state = {"waiting": {"reason": "ErrImageNeverPull", "message": detail}}
            container.next_start = time.monotonic() + 10
            return
        try:
            env = {**(image.env if image else IMAGE_ENV), **self.environment(spec)}
            user = self._image_user(spec, image) if image else None
        except (ConfigError, ValueError, urllib.error.URLError, image_fs.ImageMissing) as err:
            container.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(err)}}
            container.next_start = time.monotonic() + 2
            return
        container.image = image
        # What the container's processes see of the network: their Pod IP and the cluster's names.
        env["SPARK_LOCAL_IP"] = self.ip
        hosts_path = "/etc/hosts" if image else str(self.agent.hosts_file)
        hosts = f"-Djdk.net.hosts.file={hosts_path}"
        env["JAVA_TOOL_OPTIONS"] = f"{env.get('JAVA_TOOL_OPTIONS', '')} {hosts}".strip()
        binds: list[str] = []
        for mount in spec.get("volumeMounts") or []:
            source = mounts[mount["name"]] / mount.get("subPath", "")
            if image is None:
                self._mount_point(Path(mount["mountPath"]), source.is_dir())
            binds += [str(source), mount["mountPath"], "ro" if mount.get("readOnly") else "rw"]
        # The termination-message file, empty at each start, writable by the container's user.
        message = self._termination_file(container)
        message.write_bytes(b"")
        message.chmod(0o666)
        target = spec.get("terminationMessagePath") or TERMINATION_MESSAGE_PATH
        if image is None:
            self._mount_point(Path(target), False)
        binds += [str(message), target, "rw"]
        argv = self._argv(spec, env, image)
        work = self.dir / "work"
        work.mkdir(exist_ok=True)
        cwd: Path | None = Path(spec.get("workingDir") or work)
        unshare = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c"]
        if image is None or user is None:
            env.setdefault("HOME", str(self.dir / "home"))
            Path(env["HOME"]).mkdir(parents=True, exist_ok=True)
            launcher = [*unshare, _MOUNT_SCRIPT, "sh", str(len(binds) // 3), *binds]
        else:
            uid, gid, fs_group = user
            container.ids = (uid, gid)
            env.setdefault("HOME", image.home(uid))
            for path in self.agent.shared_paths:  # storage every Pod sees at the same path
                binds += [str(path), str(path), "rw"]
            binds[1::3] = [image.inside(target) for target in binds[1::3]]
            layer = self._fresh_layer(container)
            groups = ",".join(map(str, dict.fromkeys([gid] if fs_group is None else [gid, fs_group])))
            launcher = [
                *unshare, _IMAGE_SCRIPT, "sh", str(image.root), str(layer / "upper"), str(layer / "work"),
                str(layer / "root"), str(self.agent.hosts_file), f"{uid}:{gid}", groups,
                image.inside(spec.get("workingDir") or image.workdir), str(len(binds) // 3), *binds,
            ]  # fmt: skip
            cwd = None
        log = self.dir / f"{container.name}.log"
        with log.open("ab") as out:
            out.write(f"--- node-agent: start #{container.restarts}: {argv}\n".encode())
            out.flush()
            container.process = subprocess.Popen(
                [*launcher, *argv],
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: SIGKILL takes every child with it
            )
        container.started_at = time.monotonic()
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        container.state = {"running": {"startedAt": started}}
        container.ready = False
        container.probe_results = {"readiness": [], "liveness": []}
        container.probe_due = {}
        (self.dir / f"{container.name}.pid").write_text(str(container.process.pid))
        origin = f"from image {image.name} as uid {container.ids[0]}" if image else "from this environment"
        self.log(f"container {container.name} started {origin} (pid {container.process.pid}, log {log})")

    def _termination_file(self, container: Container) -> Path:
        return self.dir / f"{container.name}.termination-log"

    def _termination_message(self, container: Container, code: int) -> str:
        """What the container wrote to its terminationMessagePath; with FallbackToLogsOnError and
        nothing written, the end of its log when it failed (the kubelet's 80 lines, 2048 bytes)."""
        with contextlib.suppress(OSError):
            written = self._termination_file(container).read_bytes()[:4096].decode(errors="replace").strip()
            if written:
                return written
        if code != 0 and container.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            with contextlib.suppress(OSError):
                output = (self.dir / f"{container.name}.log").read_bytes().splitlines()
                lines = [ln for ln in output if not ln.startswith(b"--- node-agent:")][-80:]  # its own
                return b"\n".join(lines)[-2048:].decode(errors="replace").strip()
        return ""

    def _fresh_layer(self, container: Container) -> Path:
        """An empty writable layer for this start of the container (as a new container gets)."""
        layer = self.dir / "layers" / container.name
        shutil.rmtree(layer, ignore_errors=True)
        for part in ("upper", "work", "root"):
            (layer / part).mkdir(parents=True)
        return layer

    def _mount_point(self, target: Path, directory: bool) -> None:
        """Create a missing mount point on the host (empty); remembered to be removed at the end."""
        missing = [p for p in [target, *target.parents] if not p.exists()]
        if directory:
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
        self.created += [p for p in missing if p not in self.created]

    def _clean_mount_points(self) -> None:
        """Remove the empty mount points this Pod created, unless another Pod here still mounts
        something there: removing a mount point on the host unmounts it in every mount namespace
        (Linux since 3.18), so a rolling hand-over's new driver would lose its token and CA. A
        point still in use passes to a Pod that uses it, which removes it in its turn."""
        users = [r for r in self.agent.pods.values() if r is not self and r.is_alive()]
        for path in sorted(self.created, key=lambda p: len(p.parts), reverse=True):
            user = next((r for r in users if path in r.mount_points()), None)
            if user is not None:
                user.created.append(path)
                continue
            with contextlib.suppress(OSError):
                path.rmdir() if path.is_dir() else path.unlink()

    def mount_points(self) -> set[Path]:
        """The host paths this Pod's containers mount on, and their parents."""
        targets = [
            Path(m["mountPath"]) for c in self.pod["spec"]["containers"] for m in c.get("volumeMounts") or []
        ]
        return {p for target in targets for p in [target, *target.parents]}

    def _tend(self, container: Container, mounts: dict[str, Path]) -> None:
        if container.done:
            return
        proc = container.process
        if proc is None or (proc.poll() is not None and "terminated" not in container.state):
            if proc is not None:
                self._ended(container, proc)
                return
            if time.monotonic() >= container.next_start:
                self._start(container, mounts)
            return
        if "terminated" in container.state:  # waiting out the back-off
            if time.monotonic() >= container.next_start:
                container.last_state = {"terminated": container.state["terminated"]}
                container.restarts += 1
                container.process = None
                self._start(container, mounts)
            return
        self._probe(container)

    def _ended(self, container: Container, proc: subprocess.Popen[bytes], *, final: bool = False) -> None:
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        _kill_group(proc.pid, signal.SIGKILL)  # the container's other processes go with it
        finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        message = f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0 else ""
        message = "\n".join(part for part in (message, self._termination_message(container, code)) if part)
        terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": container.state.get("running", {}).get("startedAt"),
            "finishedAt": finished,
            "message": message,
        }
        container.ready = False
        self.log(f"container {container.name} exited with {code} {message}".rstrip())
        restart = self.policy == "Always" or (self.policy == "OnFailure" and code != 0)
        if final or not restart:
            container.state = {"terminated": terminated}
            container.done = True
            return
        delay = min(BACKOFF_MAX, self.agent_backoff() * 2 ** min(container.restarts, 10))
        container.next_start = time.monotonic() + delay
        container.state = {"terminated": terminated}
        # The kubelet shows the wait as CrashLoopBackOff with the last termination beside it.
        container.last_state = {"terminated": terminated}
        container.state = {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {delay:.0f}s restarting failed container",
            },
            "terminated": terminated,
        }

    def agent_backoff(self) -> float:
        return float(getattr(self.agent, "backoff", BACKOFF_BASE))

    # -- probes ------------------------------------------------------------------------------

    def _probe(self, container: Container) -> None:
        now = time.monotonic()
        for kind in ("readiness", "liveness"):
            probe = container.spec.get(f"{kind}Probe")
            if probe is None:
                if kind == "readiness":
                    container.ready = True
                continue
            due = container.probe_due.get(
                kind, container.started_at + float(probe.get("initialDelaySeconds", 0))
            )
            if now < due:
                continue
            container.probe_due[kind] = now + float(probe.get("periodSeconds", 10))
            ok = self._check(probe, container)
            results = container.probe_results[kind]
            results.append(ok)
            del results[:-10]
            fail_n, ok_n = int(probe.get("failureThreshold", 3)), int(probe.get("successThreshold", 1))
            if kind == "readiness":
                if len(results) >= ok_n and all(results[-ok_n:]):
                    container.ready = True
                elif (len(results) >= fail_n and not any(results[-fail_n:])) or (
                    not ok and not container.ready
                ):
                    container.ready = False
            elif len(results) >= fail_n and not any(results[-fail_n:]) and container.process:
                self.log(f"container {container.name}: liveness probe failed {fail_n} times; killing it")
                grace = float(self.pod["spec"].get("terminationGracePeriodSeconds", 30))
                _stop(container.process, grace)
                self._ended(container, container.process)

    def _check(self, probe: dict[str, Any], container: Container) -> bool:
        timeout = float(probe.get("timeoutSeconds", 1))
        try:
            if "exec" in probe and container.process:
                # Inside the container's mount namespace, with its environment.
                pid = str(container.process.pid)
                argv = ["nsenter", "--mount", "--target", pid, "--", *probe["exec"]["command"]]
                base = IMAGE_ENV
                if container.image is not None:  # in its root and working directory, as its user
                    uid, gid = container.ids
                    argv[1:1] = ["--root", "--wd", f"--setuid={uid}", f"--setgid={gid}"]
                    base = container.image.env
                env = {**base, **self.environment(container.spec)}
                return (
                    subprocess.run(
                        argv, env=env, timeout=timeout, capture_output=True, check=False
                    ).returncode
                    == 0
                )
            if "httpGet" in probe:
                get = probe["httpGet"]
                host, port = get.get("host") or self.ip, self._port(get["port"], container)
                url = f"{get.get('scheme', 'HTTP').lower()}://{host}:{port}{get.get('path', '/')}"
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    return bool(200 <= resp.status < 400)
            if "tcpSocket" in probe:
                import socket

                port = self._port(probe["tcpSocket"]["port"], container)
                with socket.create_connection(
                    (probe["tcpSocket"].get("host") or self.ip, port), timeout=timeout
                ):
                    return True
        except (OSError, subprocess.TimeoutExpired, ConfigError, urllib.error.URLError):
            return False
        return False

    @staticmethod
    def _port(port: int | str, container: Container) -> int:
        if isinstance(port, int) or str(port).isdigit():
            return int(port)
        return int(
            next(p["containerPort"] for p in container.spec.get("ports") or [] if p.get("name") == port)
        )

    # -- status ------------------------------------------------------------------------------

    def _phase(self) -> str:
        states = [c.state for c in self.containers]
        if all(c.done for c in self.containers):
            return "Succeeded" if all(s["terminated"]["exitCode"] == 0 for s in states) else "Failed"
        if any(c.process is not None for c in self.containers):
            return "Running"
        return "Pending"

    def _report(self) -> None:
        if self.agent.failed.is_set():
            return
        images = {c["name"]: c.get("image", "") for c in self.pod["spec"]["containers"]}
        statuses = [c.status(images[c.name]) for c in self.containers]
        for status in statuses:  # the API shows one state; the back-off keeps its last one aside
            state = status["state"]
            if "waiting" in state and "terminated" in state:
                status["state"] = {"waiting": state["waiting"]}
        ready = all(c.ready for c in self.containers)
        phase = self._phase()

        def cond(kind: str, ok: bool) -> dict[str, Any]:
            return {"type": kind, "status": "True" if ok else "False"}

        status = {
            "phase": phase,
            "hostIP": "127.0.0.1",
            "podIP": self.ip,
            "podIPs": [{"ip": self.ip}],
            "startTime": self.started_time,
            "conditions": [
                cond("PodScheduled", True),
                cond("Initialized", True),
                cond("ContainersReady", ready),
                cond("Ready", ready and phase == "Running"),
            ],
            "containerStatuses": statuses,
        }
        if json.dumps(status, sort_keys=True) == self._reported:
            return
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for condition in status["conditions"]:
            condition["lastTransitionTime"] = now
        try:
            self.agent.api.merge(f"{self.path}/status", {"status": status})
            self._reported = json.dumps(
                {
                    **status,
                    "conditions": [
                        {k: v for k, v in c.items() if k != "lastTransitionTime"}
                        for c in status["conditions"]
                    ],
                },
                sort_keys=True,
            )
        except urllib.error.HTTPError as err:
            if err.code != 404:
                raise

    # -- stopping ----------------------------------------------------------------------------

    def stop_containers(self, grace: float, report: bool = True) -> None:
        """SIGTERM every container's main process; SIGKILL each process group after ``grace``."""
        running = [c for c in self.containers if c.process and c.process.poll() is None]
        if running:
            self.log(f"stopping {', '.join(c.name for c in running)}: SIGTERM, SIGKILL after {grace:.0f}s")
        for c in running:
            assert c.process is not None
            _stop(c.process, grace)
            self._ended(c, c.process, final=True)

    def kill_all(self) -> None:
        for c in self.containers:
            if c.process and c.process.poll() is None:
                _kill_group(c.process.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    c.process.wait(timeout=10)

    def _remove(self) -> None:
        """The kubelet's last word: delete the Pod for good once its containers are gone."""
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}}
        with contextlib.suppress(urllib.error.HTTPError):
            self.agent.api.call("DELETE", self.path, body)
        self.log("removed")


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) references; $$(VAR) stays literal; unknown references stay as written."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", lambda m: "$" if m[0] == "$$" else env.get(m[1], m[0]), text
    )


def _stop(proc: subprocess.Popen[bytes], grace: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)  # the container's main process, as the kubelet signals it
    try:
        proc.wait(timeout=max(grace, 0.1))
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    _kill_group(proc.pid, signal.SIGKILL)


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
