"""`streamapp run` as a newcomer meets it: fresh checkpoints, the broker's address, a summary, errors.

Each test runs the real command (a subprocess) against the real broker: the embedded one the
command starts itself, or the session's broker when a test names it with ``--bootstrap``.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence

from streamapp.runtime.kafka import admin

SHOUT = """\
apiVersion: streamapp.io/v1alpha1
kind: StreamApp
metadata: {{name: shout}}
spec:
  topology:
    defaults: {{keySerde: string, valueSerde: string}}
    streams:
      - from: {{topic: {source}}}
        steps:
          - filter: "length(value) > 2"
          - mapValues: "upper(value)"
          - to: {{topic: {sink}}}
"""


def _streamapp(
    *argv: str, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamapp.runtime.cli", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "PYTHONSAFEPATH": "1", **(env or {})},
    )


def _summary(stdout: str) -> list[str]:
    """The summary block: its first line without the duration, then the per-topic lines."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("summary of "))
    head = re.sub(r"\d+ batch\(es\) in [\d.]+ s", "N batch(es) in T s", lines[start])
    return [head, *lines[start + 1 :]]


def test_run_twice_with_the_embedded_broker_processes_the_input_each_time(tmp_path: pathlib.Path) -> None:
    """The bug this fixes: the second run of a manifest used to resume a stale fixed checkpoint and
    do nothing. Each run now starts from the beginning on a fresh checkpoint, and says so."""
    app = tmp_path / "shout.yaml"
    app.write_text(SHOUT.format(source="lines", sink="shouted"))
    lines = tmp_path / "lines.txt"
    lines.write_text("hello\nno\nspark\n\nstreams\n")
    for _ in range(2):
        proc = _streamapp("run", str(app), "--input", f"lines={lines}", "--until-idle", "2")
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = proc.stdout
        found = re.search(r"embedded Kafka [\d.]+ broker at (127\.0\.0\.1:\d+)", out)
        assert found, out
        assert f"--bootstrap-server {found.group(1)} --topic lines" in out  # how to produce to it
        assert "checkpoint: a fresh temporary folder, removed at exit" in out
        assert "input: 4 record(s) from" in out
        assert _summary(out) == [
            "summary of 'shout': N batch(es) in T s, 0 late record(s) dropped, 0 skipped",
            "  read              4 record(s)  lines",
            "  written           3 record(s)  shouted",
        ]
        checkpoint = re.search(r"checkpoint (/\S+?)\)", out)
        assert checkpoint and not pathlib.Path(checkpoint.group(1)).exists(), "fresh checkpoint left behind"
        assert "Traceback" not in proc.stderr


def test_a_named_checkpoint_resumes_and_a_fresh_one_starts_over(
    kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    source, sink = new_topic(2), new_topic(2)
    admin.produce(kafka_bootstrap, source, [admin.Record(None, v) for v in (b"hello", b"no", b"spark")])
    app = tmp_path / "shout.yaml"
    app.write_text(SHOUT.format(source=source, sink=sink))
    base = ("run", str(app), "--bootstrap", kafka_bootstrap, "--until-idle", "2")
    kept = tmp_path / "kept"

    first = _streamapp(*base, "--checkpoint", str(kept))
    assert first.returncode == 0, first.stderr[-3000:]
    assert f"checkpoint: {kept} (from --checkpoint): resumes where it stopped" in first.stdout
    assert _summary(first.stdout)[1:] == [
        f"  read              3 record(s)  {source}",
        f"  written           2 record(s)  {sink}",
    ]

    resumed = _streamapp(*base, "--checkpoint", str(kept))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _summary(resumed.stdout)[1:] == [
        f"  read              0 record(s)  {source}",
        f"  written           0 record(s)  {sink}",
    ]

    fresh = _streamapp(*base)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert _summary(fresh.stdout)[1:] == [
        f"  read              3 record(s)  {source}",
        f"  written           2 record(s)  {sink}",
    ]
    # The first run's 2 and the fresh run's 2, and nothing more (the topic read to its end).
    assert len(admin.consume(kafka_bootstrap, sink, expected=4)) == 4
    assert len(admin.consume(kafka_bootstrap, sink)) == 4


def _one_line_error(proc: subprocess.CompletedProcess[str], code: int, expected: str | Sequence[str]) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    ours = [line for line in proc.stderr.splitlines() if line.startswith("streamapp run: ")]
    assert len(ours) == 1, proc.stderr[-3000:]
    for part in [expected] if isinstance(expected, str) else expected:
        assert part in ours[0], ours[0]
    return ours[0]


def test_errors_are_one_line_naming_what_failed_and_debug_shows_the_traceback(
    kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    source = new_topic(1)
    app = tmp_path / "counts.yaml"
    app.write_text(
        textwrap.dedent(
            f"""\
            apiVersion: streamapp.io/v1alpha1
            kind: StreamApp
            metadata: {{name: totals}}
            spec:
              topology:
                defaults: {{keySerde: string, valueSerde: long}}
                streams:
                  - from: {{topic: {source}}}
                    steps:
                      - to: {{topic: totals-out}}
            """
        )
    )
    bad = tmp_path / "amounts.txt"
    bad.write_text("12\nseven\n")
    # A record of the input file that the topic's serde cannot write: file, line, value and serde.
    proc = _streamapp("run", str(app), "--bootstrap", kafka_bootstrap, "--input", f"{source}={bad}")
    line = _one_line_error(proc, 2, [f"{bad}:2", "'seven'", "long"])
    # An input topic the topology does not read.
    proc = _streamapp("run", str(app), "--bootstrap", kafka_bootstrap, "--input", f"nope={bad}")
    _one_line_error(proc, 2, ["--input", "no topic 'nope'", source])
    # A broker that is not there: the component is named.
    proc = _streamapp("run", str(app), "--bootstrap", "127.0.0.1:9", timeout=120)
    _one_line_error(proc, 1, ["Kafka", "127.0.0.1:9"])
    # --debug: the same error with the traceback.
    debug = _streamapp(
        "run", str(app), "--bootstrap", kafka_bootstrap, "--input", f"{source}={bad}", "--debug"
    )
    assert debug.returncode == 2
    assert "Traceback (most recent call last)" in debug.stderr
    assert line in debug.stderr


def test_a_failing_query_ends_in_one_line_naming_the_cause(
    kafka_bootstrap: str, new_topic: Callable[..., str], tmp_path: pathlib.Path
) -> None:
    source, sink = new_topic(1), new_topic(1)
    admin.produce(kafka_bootstrap, source, [admin.Record(b"k", b"poison")])
    (tmp_path / "fragile.py").write_text(
        "def check(values):\n"
        "    if (values == 'poison').any():\n"
        "        raise ValueError('record value poison is not allowed')\n"
        "    return values\n"
    )
    app = tmp_path / "fragile.yaml"
    app.write_text(
        SHOUT.format(source=source, sink=sink).replace(
            '- mapValues: "upper(value)"', '- mapValues: {function: "fragile:check"}'
        )
    )
    proc = _streamapp(
        "run", str(app), "--bootstrap", kafka_bootstrap, "--until-idle", "30",
        env={"PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    line = _one_line_error(proc, 1, ["shout: the query failed", "record value poison is not allowed"])
    assert "\tat org.apache" not in proc.stderr, proc.stderr[-3000:]  # no Java stack trace either
    assert "summary of 'shout'" in proc.stdout, line
