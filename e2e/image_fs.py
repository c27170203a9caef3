"""Image filesystems for the node agent: a locally built image's root, its config, as buildah keeps them.

Why: with ``--image-fs`` the agent runs each container from its image, as a kubelet does, rather
than from the project's environment. There is no registry and no container engine here, so the
image must already be in this machine's buildah storage (``make images`` puts the operator and
runtime images there): each image is opened once per agent as a buildah working container whose
mounted root is the read-only lower layer of every container that runs it. Each container gets a
writable layer of its own on top (overlayfs, made by ``pod_runtime``), fresh at every start, as
a container's writable layer is. Nothing is pulled: an image that is not there is reported as the
kubelet reports it under ``imagePullPolicy: Never`` (``ErrImageNeverPull``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import threading
from pathlib import Path

BUILDAH = ["buildah", "--storage-driver", "vfs"]


class ImageMissing(Exception):
    """The image is not in this machine's buildah storage."""


@dataclasses.dataclass(frozen=True)
class Image:
    name: str
    root: Path  # the mounted root filesystem (never written: containers write to their own layer)
    env: dict[str, str]
    entrypoint: list[str]
    cmd: list[str]
    user: str  # "uid[:gid]" or a name, as in the image config; "" is root
    workdir: str
    working_container: str

    def ids(self, user: str | None = None) -> tuple[int, int]:
        """The uid and gid a user spec names, read from the image's own /etc/passwd and /etc/group."""
        spec = self.user if user is None else user
        name, _, group = (spec or "0").partition(":")
        uid = int(name) if name.isdigit() else self._lookup("passwd", name, 2)
        if group:
            gid = int(group) if group.isdigit() else self._lookup("group", group, 2)
        elif name.isdigit():
            gid = self._field("passwd", 2, name, 3, default=uid)
        else:
            gid = self._lookup("passwd", name, 3)
        return uid, gid

    def inside(self, path: str) -> str:
        """``path`` with the image's symlinks resolved within its root, never the host's (``/var/run``
        is ``/run`` in Debian: bind-mounting at the literal path would follow it out of the image)."""
        todo = [p for p in path.split("/") if p not in ("", ".")]
        done: list[str] = []
        hops = 0
        while todo:
            part = todo.pop(0)
            if part == "..":
                if done:
                    done.pop()
                continue
            candidate = self.root.joinpath(*done, part)
            if candidate.is_symlink():
                hops += 1
                if hops > 40:
                    raise ImageMissing(f"image {self.name}: too many symlinks in {path}")
                target = os.readlink(candidate)
                if target.startswith("/"):
                    done = []
                todo = [p for p in target.split("/") if p not in ("", ".")] + todo
                continue
            done.append(part)
        return "/" + "/".join(done)

    def home(self, uid: int) -> str:
        """The user's home in the image's /etc/passwd, or / (what the kubelet sets HOME to then)."""
        home = self._field("passwd", 2, str(uid), 5, default=None)
        return str(home) if home else "/"

    def _rows(self, table: str) -> list[list[str]]:
        path = self.root / "etc" / table
        lines = path.read_text().splitlines() if path.exists() else []
        return [line.split(":") for line in lines if line and not line.startswith("#")]

    def _lookup(self, table: str, name: str, column: int) -> int:
        for row in self._rows(table):
            if row[0] == name and len(row) > column:
                return int(row[column])
        raise ImageMissing(f"image {self.name}: user or group {name!r} is not in its /etc/{table}")

    def _field(self, table: str, key_column: int, key: str, column: int, default: object) -> object:
        for row in self._rows(table):
            if len(row) > max(key_column, column) and row[key_column] == key:
                return int(row[column]) if column in (2, 3) else row[column]
        return default


class ImageFilesystems:
    """Each image a Pod names, opened once (``buildah from --pull=never`` + ``buildah mount``)."""

    def __init__(self, owner: str) -> None:
        self.owner = re.sub(r"[^a-z0-9-]", "-", owner.lower())
        self._images: dict[str, Image] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Image:
        with self._lock:
            if name not in self._images:
                self._images[name] = self._open(name)
            return self._images[name]

    def _open(self, name: str) -> Image:
        inspected = subprocess.run(
            [*BUILDAH, "inspect", "--type", "image", name], capture_output=True, text=True, check=False
        )
        if inspected.returncode != 0:
            raise ImageMissing(
                f'image "{name}" is not in this machine\'s buildah storage and this node pulls nothing '
                "(make images builds the StreamApp images)"
            )
        config = json.loads(inspected.stdout)["OCIv1"].get("config") or {}
        container = f"node-agent-{self.owner}-{len(self._images)}-{os.getpid()}"
        subprocess.run([*BUILDAH, "rm", container], capture_output=True, check=False)
        subprocess.run(
            [*BUILDAH, "from", "--pull=never", "--quiet", "--name", container, name],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        root = subprocess.run(
            [*BUILDAH, "mount", container], capture_output=True, text=True, check=True
        ).stdout.strip()
        env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
        return Image(
            name=name,
            root=Path(root),
            env=env,
            entrypoint=list(config.get("Entrypoint") or []),
            cmd=list(config.get("Cmd") or []),
            user=str(config.get("User") or ""),
            workdir=str(config.get("WorkingDir") or "/"),
            working_container=container,
        )

    def close(self) -> None:
        """Remove the working containers (their roots with them)."""
        with self._lock:
            for image in self._images.values():
                subprocess.run([*BUILDAH, "rm", image.working_container], capture_output=True, check=False)
            self._images.clear()
