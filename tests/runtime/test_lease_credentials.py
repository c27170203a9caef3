"""The Lease's API client (the kubernetes client, configured as in a Pod) without an API server: how
it is configured, and the errors the renewal loop handles (LeaseError) when the service-account
files cannot be read (a volume being remounted) or the server cannot be reached — never an
exception that ends the loop's thread. e2e/test_fence runs it against a real API server."""

from __future__ import annotations

import contextlib
import datetime
import http.server
import json
import pathlib
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from streamapp.runtime import lease
from streamapp.runtime.embedded import tls


def _token(tmp_path: pathlib.Path, text: str = "t") -> pathlib.Path:
    token = tmp_path / "token"
    token.write_text(text)
    return token


def test_an_unreadable_token_or_ca_file_is_a_lease_error(tmp_path: pathlib.Path) -> None:
    token = _token(tmp_path)
    gone_ca = lease.InCluster("https://127.0.0.1:1", token, tmp_path / "ca.crt")
    with pytest.raises(lease.LeaseError, match=r"credentials for https://127\.0\.0\.1:1: .*ca\.crt"):
        gone_ca.read("ns", "app")
    gone_token = lease.InCluster("https://127.0.0.1:1", tmp_path / "missing-token", None)
    with pytest.raises(lease.LeaseError, match=r"credentials for .*missing-token"):
        gone_token.read("ns", "app")
    # Read again for every request: a token gone once the client was built fails the next one.
    built = lease.InCluster("https://127.0.0.1:1", token, None)
    with pytest.raises(lease.LeaseError, match=r"API server https://127\.0\.0\.1:1: .*refused"):
        built.read("ns", "app")
    token.unlink()
    with pytest.raises(lease.LeaseError, match=r"credentials for .*token"):
        built.replace("ns", "app", {"metadata": {"name": "app", "resourceVersion": "1"}})


def test_the_token_is_read_again_for_every_request(tmp_path: pathlib.Path) -> None:
    token = _token(tmp_path, "first\n")
    config = lease.InCluster("https://10.0.0.1:443", token, None).configuration()
    assert config.auth_settings()["BearerToken"]["value"] == "Bearer first"
    token.write_text("rotated")  # the kubelet rotates a projected token
    assert config.auth_settings()["BearerToken"]["value"] == "Bearer rotated"


def test_the_certificate_is_checked_for_kubernetes_default_svc_when_the_server_is_an_ip(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _token(tmp_path)
    ca = tmp_path / "ca.crt"
    ca.write_text("not read until a connection is made")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # not used: the API server directly
    env = {"STREAMAPP_SERVICEACCOUNT_DIR": str(tmp_path), "KUBERNETES_SERVICE_PORT": "6443"}
    for host, name in (("10.0.0.1", lease.TLS_NAME), ("fd00::1", lease.TLS_NAME), ("api.example", None)):
        api = lease.InCluster.from_env({**env, "KUBERNETES_SERVICE_HOST": host})
        config = api.configuration()
        assert (config.host, config.tls_server_name) == (api.server, name)
        assert config.verify_ssl and config.ssl_ca_cert == str(ca)
        assert config.proxy is None
        assert config.retries is False  # one attempt of at most TIMEOUT_S
    ipv6 = lease.InCluster.from_env({**env, "KUBERNETES_SERVICE_HOST": "fd00::1"})
    assert ipv6.server == "https://[fd00::1]:6443"


@contextlib.contextmanager
def _api_server(folder: pathlib.Path, seen: list[tuple[str, str, Any]]) -> Iterator[tuple[int, pathlib.Path]]:
    """An HTTPS server on 127.0.0.1 whose certificate names 127.0.0.1 and localhost (not
    kubernetes.default.svc): a Lease for GET, 409 for PUT; (its port, its CA file)."""
    material = tls.generate(folder)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            seen.append(("GET", self.path, self.headers["Authorization"]))
            self._answer(200, {"kind": "Lease", "metadata": {"name": "app", "resourceVersion": "7"}})

        def do_PUT(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(("PUT", self.path, body))
            self._answer(409, {"kind": "Status", "code": 409, "message": "the object has been modified"})

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(material.broker_certificate, material.broker_key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], material.ca
    finally:
        server.shutdown()
        server.server_close()


def test_the_server_is_checked_for_its_name_its_answers_keep_their_status(tmp_path: pathlib.Path) -> None:
    seen: list[tuple[str, str, Any]] = []
    with _api_server(tmp_path / "tls", seen) as (port, ca):
        token = _token(tmp_path, "secret")
        # By IP the certificate must name kubernetes.default.svc: this one does not.
        with pytest.raises(lease.LeaseError, match=rf"API server https://127\.0\.0\.1:{port}: .*certificate"):
            lease.InCluster(f"https://127.0.0.1:{port}", token, ca).read("ns", "app")
        assert seen == []
        # By name it must name that name: localhost.
        api = lease.InCluster(f"https://localhost:{port}", token, ca)
        code, found = api.read("ns", "app")
        assert (code, found["metadata"]["resourceVersion"]) == (200, "7")
        found["spec"] = {"holderIdentity": "a", "renewTime": lease._now()}
        code, answer = api.replace("ns", "app", found)  # the lost race: a status, not an exception
        assert (code, answer["message"]) == (409, "the object has been modified")
    path = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/app"
    assert seen[0] == ("GET", path, "Bearer secret")
    assert seen[1][:2] == ("PUT", path) and seen[1][2]["metadata"]["resourceVersion"] == "7"
    assert re.fullmatch(r"[-0-9T:]+\.\d{6}(Z|\+00:00)", seen[1][2]["spec"]["renewTime"])


def test_a_server_that_does_not_answer_is_a_lease_error_after_the_timeout(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lease, "TIMEOUT_S", 0.5)
    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        api = lease.InCluster(f"https://127.0.0.1:{silent.getsockname()[1]}", _token(tmp_path), None)
        began = time.monotonic()
        with pytest.raises(lease.LeaseError, match=r"API server https://127\.0\.0\.1:\d+: .*timed out"):
            api.read("ns", "app")
        assert time.monotonic() - began < 3.0


def test_a_lease_time_is_never_on_a_whole_second_so_the_client_sends_six_digits() -> None:
    from kubernetes import client

    whole = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    assert lease._stamp(whole) == "2026-01-01T00:00:00.000001Z"
    assert lease._stamp(whole.replace(microsecond=250)) == "2026-01-01T00:00:00.000250Z"
    # What the client sends for it: 37.x takes a Lease through its model (a datetime, written with
    # isoformat), older versions send the dict as it is. Both keep the six digits the API server
    # requires of a MicroTime.
    spec = {"holderIdentity": "a", "renewTime": lease._stamp(whole)}
    model = getattr(client.V1LeaseSpec, "model_validate", None)
    sent = client.ApiClient().sanitize_for_serialization(model(spec) if model else spec)
    assert re.fullmatch(r"2026-01-01T00:00:00\.000001(Z|\+00:00)", sent["renewTime"]), sent
