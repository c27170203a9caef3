"""`streamapp run app.yaml` end to end: a manifest, a real broker, local Spark, records out."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import Callable

from streamapp.runtime.kafka import admin, progress

MANIFEST = """\
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {{name: shout}}
spec:
  kafka: {{bootstrapServers: "{bootstrap}"}}
  topology:
    defaults: {{keySerde: string, valueSerde: string}}
    streams:
      - from: {{topic: {source}}}
        steps:
          - filter: "length(value) > 2"
          - mapValues: "upper(value)"
          - to: {{topic: {sink}}}
      - from: {{topic: {source}}}
        steps:
          - print: {{label: seen}}
"""


def test_streamapp_run_processes_a_manifest_against_kafka(
    kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    source, sink = new_topic(2), new_topic(2)
    admin.produce(
        kafka_bootstrap,
        source,
        [
            admin.Record(b"a", b"hello", timestamp=1000),
            admin.Record(b"b", b"no", timestamp=2000),
            admin.Record(b"c", b"spark", timestamp=3000),
        ],
    )
    app = tmp_path / "app.yaml"
    app.write_text(MANIFEST.format(bootstrap=kafka_bootstrap, source=source, sink=sink))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "streamapp.runtime.cli",
            "run",
            str(app),
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--until-idle",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"running 'shout': {source} → {sink}" in proc.stdout
    assert "[seen]: a, hello" in proc.stdout + proc.stderr  # print: Kafka Streams' format
    out = admin.consume(kafka_bootstrap, sink, expected=2)
    assert sorted((r.key, r.value, r.timestamp) for r in out) == [
        (b"a", b"HELLO", 1000),
        (b"c", b"SPARK", 3000),
    ]
    # Progress is committed to the app's group: Kafka's tools (and the operator) see no lag left.
    seen = progress.standing(kafka_bootstrap, "streamapp.shout", [source])
    assert seen is not None and seen.lag == 0 and seen.batch_id is not None, seen
