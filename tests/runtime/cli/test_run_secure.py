"""`streamapp run` against a broker that wants TLS and SASL: credentials from STREAMAPP_KAFKA_*."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

from streamapp.runtime.kafka import admin
from streamapp.runtime.testing.fixtures import SecureKafka

MANIFEST = """\
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {{name: shout-secure}}
spec:
  kafka:
    bootstrapServers: "{bootstrap}"
    tls:
      ca: {{name: kafka-ca, key: ca.crt}}
    sasl:
      mechanism: SCRAM-SHA-256
      username: {{name: kafka-user, key: username}}
      password: {{name: kafka-user, key: password}}
  topology:
    defaults: {{keySerde: string, valueSerde: string}}
    streams:
      - from: {{topic: {source}}}
        steps:
          - filter: "length(value) > 2"
          - mapValues: "upper(value)"
          - to: {{topic: {sink}}}
"""


_ARGS = ("--until-idle", "3", "--checkpoint")


def _run(
    manifest: pathlib.Path, tmp_path: pathlib.Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STREAMAPP_KAFKA_")}
    return subprocess.run(
        [sys.executable, "-m", "streamapp.runtime.cli", "run", str(manifest), *_ARGS, str(tmp_path / "ckpt")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**clean, **env},
    )


def test_streamapp_run_reads_and_writes_through_sasl_ssl(
    secure_kafka: SecureKafka, tmp_path: pathlib.Path
) -> None:
    bootstrap = secure_kafka.sasl_bootstrap
    client = secure_kafka.sasl("SCRAM-SHA-256").librdkafka()
    source, sink = f"secure-in-{time.time_ns()}", f"secure-out-{time.time_ns()}"
    admin.create_topics(bootstrap, {source: 2, sink: 2}, client_config=client)
    admin.produce(
        bootstrap,
        source,
        [admin.Record(b"a", b"hello", timestamp=1000), admin.Record(b"b", b"no", timestamp=2000)],
        client_config=client,
    )
    app = tmp_path / "app.yaml"
    app.write_text(MANIFEST.format(bootstrap=bootstrap, source=source, sink=sink))
    env = {
        "STREAMAPP_KAFKA_TLS_CA": secure_kafka.material["ca.crt"],
        "STREAMAPP_KAFKA_SASL_USERNAME": secure_kafka.user,
        "STREAMAPP_KAFKA_SASL_PASSWORD": secure_kafka.password,
    }
    proc = _run(app, tmp_path, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"running 'shout-secure': {source} → {sink}" in proc.stdout
    assert secure_kafka.password not in proc.stdout + proc.stderr
    out = admin.consume(bootstrap, sink, expected=1, client_config=client)
    assert [(r.key, r.value, r.timestamp) for r in out] == [(b"a", b"HELLO", 1000)]


def test_streamapp_run_without_the_variables_names_field_secret_and_variable(
    tmp_path: pathlib.Path,
) -> None:
    app = tmp_path / "app.yaml"
    app.write_text(MANIFEST.format(bootstrap="127.0.0.1:9", source="in", sink="out"))
    proc = _run(
        app, tmp_path, {"STREAMAPP_KAFKA_TLS_CA": "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----"}
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip() == (
        "streamapp run: spec.kafka.sasl.username (Secret kafka-user, key username): "
        "set STREAMAPP_KAFKA_SASL_USERNAME to run outside Kubernetes"
    )
