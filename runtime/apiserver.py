"""How the driver reaches the Kubernetes API server for its Lease (:mod:`lease`).

Only the standard library: the driver reaches the API server with its service-account token
(``/var/run/secrets/kubernetes.io/serviceaccount``, or ``STREAMAPP_SERVICEACCOUNT_DIR``), at
``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT`` — the in-cluster configuration. Not the
``kubernetes`` client, measured (37.0.3, 2 cores): importing and building it with
``CoordinationV1Api`` costs 0.5-1.5 s on the driver's start, which a hand-over waits for; its
models write a Lease's times back without their fraction, and the API server refuses a
whole-second ``renewTime`` so written (HTTP 400); and it re-reads a rotated token only once a
minute. The Lease's three requests (get, create, a conditional replace) need none of it.
"""

from __future__ import annotations

import dataclasses
import http.client
import ipaddress
import json
import pathlib
import socket
import ssl
from collections.abc import Mapping
from typing import Any

from streamapp.runtime import errors

__all__ = ["ENV", "SERVICEACCOUNT", "TLS_NAME", "InCluster", "LeaseError"]

#: The variable naming the app's Lease (set by the operator in the driver Pod).
ENV = "STREAMAPP_LEASE"
SERVICEACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
#: The name the API server's certificate is checked for when it is reached by IP.
TLS_NAME = "kubernetes.default.svc"


class LeaseError(errors.StreamAppError):
    """The API server refused or could not be reached for the Lease."""


@dataclasses.dataclass(frozen=True)
class InCluster:
    """How to reach the API server from a Pod: its address, token file and CA file."""

    server: str
    token_file: pathlib.Path
    ca_file: pathlib.Path | None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> InCluster:
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
        folder = pathlib.Path(env.get("STREAMAPP_SERVICEACCOUNT_DIR") or SERVICEACCOUNT)
        if not host:
            raise LeaseError(
                f"{ENV} is set but KUBERNETES_SERVICE_HOST is not: the driver runs outside a Pod"
            )
        if not (folder / "token").exists():
            raise LeaseError(
                f"{ENV} is set but there is no service-account token at {folder / 'token'} "
                "(automountServiceAccountToken off?)"
            )
        ca = folder / "ca.crt"
        host = f"[{host}]" if ":" in host else host
        return cls(f"https://{host}:{port}", folder / "token", ca if ca.exists() else None)

    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body); connection problems, and a token or CA file that cannot
        be read (a volume being remounted), raise :class:`LeaseError`."""
        try:
            context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
            # Read each time: a projected token is rotated by the kubelet.
            token = self.token_file.read_text().strip()
        except OSError as err:
            raise LeaseError(f"service-account credentials for {self.server}: {err}") from err
        host, _, port = self.server.removeprefix("https://").rpartition(":")
        conn = _Connection(host.strip("[]"), int(port), context=context, timeout=5)
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
        except (OSError, http.client.HTTPException) as err:
            raise LeaseError(f"API server {self.server}: {err}") from err
        finally:
            conn.close()
        try:
            decoded = json.loads(payload or b"null")
        except ValueError:
            decoded = {"message": payload.decode(errors="replace")}
        return resp.status, decoded


class _Connection(http.client.HTTPSConnection):
    """HTTPS to the API server's address, its certificate checked for the name
    ``kubernetes.default.svc`` when the address is an IP — the name every cluster's serving
    certificate carries, whatever IP the ``kubernetes`` Service has (or an agent's proxy)."""

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        try:
            ipaddress.ip_address(self.host)
            name = TLS_NAME
        except ValueError:
            name = self.host
        self.sock = self._context.wrap_socket(sock, server_hostname=name)  # type: ignore[attr-defined]
