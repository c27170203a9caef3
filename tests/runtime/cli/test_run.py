"""`streamapp run app.yaml` end to end: a manifest, a real broker, local Spark, records out."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
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


def test_the_driver_starts_a_new_checkpoint_where_a_reset_says(
    kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    """`streamapp driver` as the operator runs it after `reset: {to: latest}`: the records already
    in the topic are skipped, the ones that arrive after the start are processed."""
    source, sink = new_topic(1), new_topic(1)
    admin.produce(kafka_bootstrap, source, [admin.Record(b"old", b"before the reset")])
    app = tmp_path / "app.yaml"
    app.write_text(MANIFEST.format(bootstrap=kafka_bootstrap, source=source, sink=sink))
    env = {
        **os.environ,
        "STREAMAPP_SPARK_MASTER": "local[2]",
        "STREAMAPP_CHECKPOINT": str(tmp_path / "ckpt" / "resets" / "r1"),
        "STREAMAPP_STARTING_OFFSETS": "latest",
        "PYTHONSAFEPATH": "1",
    }
    argv = [sys.executable, "-m", "streamapp.runtime.cli", "driver", "--manifest", str(app)]
    log = tmp_path / "driver.log"
    with log.open("w") as out_file:  # a file, not a pipe nobody drains
        proc = subprocess.Popen(argv, env=env, stdout=out_file, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while "running 'shout'" not in log.read_text():
            assert proc.poll() is None, (
                f"the driver exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
            )
            assert time.monotonic() < deadline, "the driver did not start its query"
            time.sleep(0.2)
        # "latest" is fixed when the first batch is planned: keep writing until records come out.
        deadline = time.monotonic() + 120
        while not (out := admin.consume(kafka_bootstrap, sink, idle=0.5, timeout=5)):
            assert time.monotonic() < deadline, "nothing came out of the driver"
            admin.produce(kafka_bootstrap, source, [admin.Record(b"new", b"after the reset")])
        assert {(r.key, r.value) for r in out} == {(b"new", b"AFTER THE RESET")}  # never the old one
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
