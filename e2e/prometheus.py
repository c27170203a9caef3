"""A real Prometheus server (Debian's ``prometheus`` package) for the e2e suite, and PromQL queries.

Why a helper of its own: the metrics tests need a server scraping the drivers and the operator the
way a cluster's Prometheus would, then PromQL answers from it; this starts one on a free loopback
port with a throw-away TSDB and stops it again. The binary comes from ``make setup`` (its e2e
part installs the package with apt-get); when it is missing the test fails naming that step.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import cluster
import yaml


class PromError(AssertionError):
    pass


class Prometheus:
    """``prometheus`` scraping ``targets`` ({job: [host:port, ...]}) every ``interval``."""

    def __init__(self, workdir: pathlib.Path, targets: dict[str, list[str]], interval: str = "1s") -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise PromError(
                "Prometheus is not installed: `make setup` (its e2e part) installs Debian's "
                "`prometheus` package with apt-get"
            )
        self.binary = binary
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = cluster._free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "prometheus.log"
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [
                # honor_labels: the drivers label their series with the app's namespace themselves.
                {"job_name": job, "honor_labels": True, "static_configs": [{"targets": hosts}]}
                for job, hosts in targets.items()
            ],
        }
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> float:
        started = time.monotonic()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return time.monotonic() - started
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() - started > timeout:
                raise PromError(f"prometheus did not become ready:\n{self.log.read_text()[-2000:]}")
            time.sleep(0.3)

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector (or scalar, as one sample) ``promql`` evaluates to now."""
        address = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        try:
            with urllib.request.urlopen(address, timeout=10) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as err:
            raise PromError(f"{promql}: {err.read().decode(errors='replace')}") from err
        if body.get("status") != "success":
            raise PromError(f"{promql}: {body}")
        data = body["data"]
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def targets(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=10) as answer:
            return list(json.loads(answer.read())["data"]["activeTargets"])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
