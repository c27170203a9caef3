"""A throwaway certificate authority for the embedded broker's TLS listeners, made with ``openssl``.

The secure listeners of :class:`broker.EmbeddedKafka` (SASL_SSL, and SSL with client certificates)
need a CA, a broker certificate valid for ``127.0.0.1`` and ``localhost`` (clients verify the host
name by default), and a client certificate for mutual TLS. Generating them per broker keeps keys
out of the repository and makes every run use fresh material. The ``openssl`` command-line tool is
used because it is on every machine that has a JDK and needs no Python package.

The client key is written in the traditional PKCS#1 form (``BEGIN RSA PRIVATE KEY``) on purpose:
it is what cert-manager issues by default, so tests exercise that form end to end.
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
import subprocess

from streamapp.runtime.embedded import errors

__all__ = ["Material", "generate"]

#: Long enough for any test session; short enough that a leaked key is worthless soon.
_DAYS = "2"


@dataclasses.dataclass(frozen=True)
class Material:
    """The PEM files of one generated set."""

    folder: pathlib.Path
    ca: pathlib.Path  # the CA certificate: the clients' trust anchor and the broker's for client certs
    broker_certificate: pathlib.Path  # broker certificate followed by the CA (the chain it presents)
    broker_key: pathlib.Path  # PKCS#8, unencrypted
    client_certificate: pathlib.Path  # CN=streamapp-client, for mutual TLS
    client_key: pathlib.Path  # PKCS#1 (``BEGIN RSA PRIVATE KEY``), unencrypted


def _openssl(folder: pathlib.Path, *args: str) -> None:
    tool = shutil.which("openssl")
    if tool is None:
        raise errors.SetupError("the embedded broker's TLS listeners need the `openssl` command on PATH")
    done = subprocess.run([tool, *args], cwd=folder, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise errors.SetupError(f"openssl {' '.join(args[:2])} failed in {folder}:\n{done.stderr.strip()}")


def _sign(folder: pathlib.Path, name: str, extensions: str) -> None:
    """Sign ``<name>.csr`` with the CA into ``<name>.pem`` with the given X.509v3 extensions."""
    (folder / f"{name}.ext").write_text(extensions)
    _openssl(
        folder,
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", _DAYS, "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.pem",
    )  # fmt: skip


def generate(folder: pathlib.Path) -> Material:
    """Create the CA, the broker's and the client's certificates and keys in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    _openssl(
        folder,
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", _DAYS, "-sha256", "-subj", "/CN=StreamApp embedded test CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    # OpenSSL 3 writes new keys as PKCS#8 ("BEGIN PRIVATE KEY"), which Kafka's PEM key store wants.
    _openssl(
        folder,
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr",
        "-subj", "/CN=localhost",
    )  # fmt: skip
    _sign(
        folder,
        "broker",
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    _openssl(folder, "genrsa", "-traditional", "-out", "client.key", "2048")
    _openssl(
        folder, "req", "-new", "-key", "client.key", "-out", "client.csr", "-subj", "/CN=streamapp-client"
    )
    _sign(folder, "client", "extendedKeyUsage=clientAuth\n")
    chain = folder / "broker-chain.pem"
    chain.write_text((folder / "broker.pem").read_text() + (folder / "ca.pem").read_text())
    for key in ("ca.key", "broker.key", "client.key"):
        (folder / key).chmod(0o600)
    return Material(
        folder=folder,
        ca=folder / "ca.pem",
        broker_certificate=chain,
        broker_key=folder / "broker.key",
        client_certificate=folder / "client.pem",
        client_key=folder / "client.key",
    )
