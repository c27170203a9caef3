"""The operator and runtime images, built for real with buildah, and the driver contract inside one.

`images/build.sh` (what `make images` runs) builds each image on a Debian base made by mmdebstrap,
cached by its inputs: here it is a no-op unless the sources, pyproject.toml or images/ changed.
Then, inside the built runtime image (`buildah run`, chroot isolation, the image's own user):
`streamapp --version`, and the driver Pod the operator renders for an app — its command, its
environment, its mounted files — against the real broker, whose output is checked record by record.
Last, a word count applied with kubectl whose driver and executors the node agent runs from the
runtime image's filesystem (``--image-fs``), through the operator and Spark's Kubernetes backend.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import node_agent_proc
import operator_proc
import procfs
import pytest
import yaml

from streamapp.operator import desired
from streamapp.runtime import manifest as manifests
from streamapp.runtime.kafka import admin

pytestmark = [pytest.mark.timeout(1500), pytest.mark.long]  # builds both images first: make test-long

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILDAH = ["buildah", "--storage-driver", "vfs"]
NS = operator_proc.APPS_NAMESPACE
VERSION = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]  # type: ignore[index]
LINES = ["the quick brown fox", "jumps over the lazy dog", "The Dog sleeps"]


def _build(kind: str, report: Callable[[str], None]) -> dict[str, Any]:
    started = time.monotonic()
    built = subprocess.run(
        [str(ROOT / "images" / "build.sh"), kind],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert built.returncode == 0, (
        f"images/build.sh {kind} failed:\n{built.stderr[-4000:]}{built.stdout[-2000:]}"
    )
    report(f"{built.stdout.strip().splitlines()[-1]} ({time.monotonic() - started:.0f} s here)")
    found = subprocess.run(
        [*BUILDAH, "inspect", "--type", "image", f"localhost/streamapp-{kind}:{VERSION}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return dict(json.loads(found.stdout))


@pytest.fixture(scope="module")
def images(streamapp_report: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    return {kind: _build(kind, streamapp_report) for kind in ("operator", "runtime")}


def _config(inspected: dict[str, Any]) -> dict[str, Any]:
    return dict(inspected["OCIv1"]["config"])


def test_both_images_run_as_non_root_with_their_entrypoint_and_labels(
    images: dict[str, dict[str, Any]],
) -> None:
    operator, runtime = _config(images["operator"]), _config(images["runtime"])
    assert operator["User"] == "10001:10001"
    assert runtime["User"] == f"{desired.SPARK_UID}:{desired.SPARK_UID}"  # the driver Pod's runAsUser
    assert operator["Entrypoint"] == ["python", "-m", "streamapp.operator"]
    assert operator["Cmd"] == ["--all-namespaces"]
    assert runtime["Entrypoint"] == ["/opt/streamapp/entrypoint.sh"]
    for kind, config in (("operator", operator), ("runtime", runtime)):
        labels = config["Labels"]
        assert labels["org.opencontainers.image.title"] == f"streamapp-{kind}"
        assert labels["org.opencontainers.image.version"] == VERSION
        assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"


class Container:
    """A working container of the runtime image: ``run(*argv, env=...)`` inside it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def argv(
        self, *argv: str, env: dict[str, str] | None = None, volumes: dict[str, str] | None = None
    ) -> list[str]:
        options = ["--isolation", "chroot", "--env", "SPARK_LOCAL_HOSTNAME=localhost"]
        for key, value in (env or {}).items():
            options += ["--env", f"{key}={value}"]
        for host, inside in (volumes or {}).items():
            options += ["--volume", f"{host}:{inside}:ro"]
        return [*BUILDAH, "run", *options, self.name, "--", *argv]

    def run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*argv), capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture
def container(images: dict[str, dict[str, Any]]) -> Iterator[Container]:
    """A fresh working container of the runtime image, removed afterwards."""
    made = subprocess.run(
        [*BUILDAH, "from", "--pull-never", f"localhost/streamapp-runtime:{VERSION}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    name = made.stdout.strip()
    try:
        yield Container(name)
    finally:
        subprocess.run([*BUILDAH, "rm", name], capture_output=True, check=False)


def test_streamapp_version_and_user_inside_the_runtime_image(container: Container) -> None:
    version = container.run("streamapp", "--version")
    assert version.returncode == 0 and version.stdout.strip() == f"streamapp {VERSION}", version
    who = container.run("id", "-u")
    assert who.stdout.strip() == str(desired.SPARK_UID), who
    java = container.run("java", "-version")
    assert java.returncode == 0 and "17" in java.stderr, java


def test_the_rendered_driver_runs_inside_the_runtime_image(
    container: Container,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    streamapp_report: Callable[[str], None],
) -> None:
    source, sink = new_topic(2), new_topic(1)
    # The e2e word count (operator_proc.manifest), with a checkpoint inside the container.
    document = operator_proc.manifest("imaged", source=source, sink=sink, bootstrap=kafka_bootstrap)
    document["metadata"]["namespace"] = "apps"
    document["spec"]["checkpointLocation"] = "/tmp/streamapp-checkpoint"
    text = yaml.safe_dump(document, sort_keys=False)
    app = manifests.load_manifest(text)
    wanted = desired.render(
        ref=desired.AppRef(name="imaged", namespace="apps", uid="u"), app=app, executors=1
    )
    pod = wanted.driver
    assert pod is not None
    config_map = next(o for o in wanted.support if o["kind"] == "ConfigMap")
    # The ConfigMap's items, where the Pod mounts them.
    mounted = tmp_path / "etc-streamapp"
    for item in pod["spec"]["volumes"][0]["configMap"]["items"]:
        target = mounted / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(config_map["data"][item["key"]])
    container_spec = pod["spec"]["containers"][0]
    fields = {
        "metadata.name": "imaged-driver",
        "metadata.namespace": "apps",
        "metadata.uid": "u",
        "status.podIP": "127.0.0.1",
    }
    env = {
        var["name"]: var["value"] if "value" in var else fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
        for var in container_spec["env"]
    }
    env["STREAMAPP_SPARK_MASTER"] = "local[2]"  # the one override: no cluster to start executors in
    del env["STREAMAPP_LEASE"]  # nor an API server to hold the fence on (e2e/test_fence.py does)
    env["STREAMAPP_DRIVER_MEMORY"] = "1g"
    admin.produce(kafka_bootstrap, source, [admin.Record(None, line.encode()) for line in LINES])
    expected = collections.Counter(w for line in LINES for w in re.split(r"\W+", line.lower()) if w)
    mount = container_spec["volumeMounts"][0]["mountPath"]
    # The driver runs until stopped: its `timeout` gets SIGTERM once the counts are there and
    # passes it to the driver alone (--foreground: as the kubelet signals only the container's
    # main process, not the JVM); it also bounds the run if the counts never come.
    started = time.monotonic()
    proc = subprocess.Popen(
        container.argv("timeout", "--foreground", "-s", "TERM", "600", *container_spec["command"], env=env,
                       volumes={str(mounted): mount}),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 540  # a first batch took minutes at load 30 on 2 cores
        while (got := _counts(kafka_bootstrap, sink)) != expected:
            assert proc.poll() is None, f"the driver exited {proc.returncode}:\n{_output(proc)}"
            assert time.monotonic() < deadline, f"{got} != {expected}"
            time.sleep(2)
        took = time.monotonic() - started
        # The driver's JVM (a descendant: chroot isolation shares the PID namespace) starts from
        # the class-data archive the image's build wrote.
        archives = procfs.class_data_archives(proc.pid)
        assert archives, "the driver's JVM in the image mapped no class-data archive"
    finally:
        # SIGTERM to the container's `timeout`, found by pid among this run's own descendants: it
        # passes it to the driver, which stops its query at a batch boundary.
        for pid in procfs.descendants(proc.pid):
            if [os.path.basename(arg) for arg in _cmdline(pid)[:1]] == ["timeout"]:
                os.kill(pid, signal.SIGTERM)
        out = _output(proc)
    assert proc.returncode == 0, f"the driver did not stop cleanly (exit {proc.returncode}):\n{out[-3000:]}"
    assert "running 'imaged'" in out, out[-3000:]
    streamapp_report(
        f"runtime image: the rendered driver command ran inside it as uid {desired.SPARK_UID} and wrote "
        f"exact word counts in {took:.0f} s; its JVM mapped {', '.join(archives)}"
    )


def _output(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=120)
    return str(out)


def _cmdline(pid: int) -> list[str]:
    try:
        raw = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _counts(bootstrap: str, topic: str) -> dict[str, int]:
    latest: dict[str, int] = {}
    for record in admin.consume(bootstrap, topic, idle=1.0, timeout=20):
        assert record.key is not None and record.value is not None
        latest[record.key.decode()] = int.from_bytes(record.value, "big", signed=True)
    return latest


def test_a_word_count_runs_from_the_runtime_image_on_a_node_agent(
    images: dict[str, dict[str, Any]],
    streamapp_operator: operator_proc.Operator,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    tmp_path_factory: pytest.TempPathFactory,
    streamapp_report: Callable[[str], None],
) -> None:
    """The node agent with --image-fs: the driver and its executors run from the runtime image's
    filesystem (chrooted, a fresh writable layer each, as uid 185), the checkpoint on a shared
    folder; the counts are exact, and a driver killed with -9 resumes from that checkpoint."""
    kube = streamapp_operator.kube
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # network storage the app's user may write
    assert not pathlib.Path("/opt/streamapp").exists(), "the root check below needs a host without it"
    workdir = tmp_path_factory.mktemp("agent-image")
    options = ("--image-fs", "--shared-path", str(shared))
    agent = node_agent_proc.AgentProcess(kube, "agent-image", workdir, options)
    image = f"localhost/streamapp-runtime:{VERSION}"
    source, sink = new_topic(2), new_topic(1)
    doc = operator_proc.manifest(
        "wc-image", source=source, sink=sink, bootstrap=kafka_bootstrap, image=image,
        imagePullPolicy="Never", **operator_proc.SIZING,
    )  # fmt: skip
    doc["spec"]["checkpointLocation"] = str(shared / "checkpoint")
    expected: collections.Counter[str] = collections.Counter()

    def produce(lines: list[str]) -> None:
        admin.produce(kafka_bootstrap, source, [admin.Record(None, line.encode()) for line in lines])
        expected.update(w for line in lines for w in re.split(r"\W+", line.lower()) if w)

    def wait(what: str, check: Callable[[], Any], timeout: float = 600) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := check():
                return found
            time.sleep(1)
        driver = agent.container_log(NS, "wc-image-driver", "driver")
        pytest.fail(f"{what} within {timeout:.0f}s\n--- driver log:\n{driver}\n--- agent:\n{agent.tail(40)}")

    def ready_executors() -> dict[str, int]:
        found = kube.kubectl(
            "get", "pods", "-n", NS, "-l", "streamapp.io/app=wc-image,spark-role=executor", "-o", "json"
        )
        return {
            p["metadata"]["name"]: agent.pid(NS, p["metadata"]["name"], "spark-kubernetes-executor")
            for p in json.loads(found)["items"]
            if not p["metadata"].get("deletionTimestamp")
            and any(
                c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or []
            )
        }

    with agent.only_node():
        try:
            began = time.monotonic()
            operator_proc.apply(kube, doc)
            produce(LINES)
            wait("the word counts never appeared", lambda: _counts(kafka_bootstrap, sink) == expected)
            first = time.monotonic() - began
            executors = wait(
                "two Ready executor Pods", lambda: len(ready_executors()) == 2 and ready_executors()
            )
            driver_pid = agent.pid(NS, "wc-image-driver", "driver")
            for name, pid in {"driver": driver_pid, **executors}.items():
                # Its root is the image's (the host has no /opt/streamapp), its user the image's.
                assert pathlib.Path(f"/proc/{pid}/root/opt/streamapp/entrypoint.sh").exists(), name
                assert procfs.uid(pid) == desired.SPARK_UID, (name, procfs.uid(pid))
            # The image's own archive: /proc shows it under the container's root (the agent's
            # per-start layer), where this namespace sees no overlay, hence no such file.
            archives = procfs.class_data_archives(driver_pid)
            root = f"{agent.dir}/pods/{NS}/wc-image-driver/layers/driver/root/opt/streamapp/"
            assert archives and all(a.startswith(root) for a in archives), archives
            assert "runs from its image's filesystem" in agent.tail(400)

            # kill -9 of the driver: a new one, from the image too, resumes from the shared checkpoint.
            killed = time.monotonic()
            os.kill(driver_pid, signal.SIGKILL)
            produce(["the image survives a kill"])
            wait("no output after the driver was killed", lambda: _counts(kafka_bootstrap, sink) == expected)
            resumed = time.monotonic() - killed
            new_pid = agent.pid(NS, "wc-image-driver", "driver")
            assert new_pid != driver_pid and procfs.uid(new_pid) == desired.SPARK_UID
        finally:  # while the node still runs: the operator's deletion stops the Pods cleanly
            kube.kubectl(
                "delete", "sapp", "wc-image", "-n", NS, "--ignore-not-found", "--timeout=120s", timeout=130
            )
    streamapp_report(
        f"runtime image on the node agent (--image-fs): wc-image first output {first:.1f}s after kubectl "
        f"apply; driver + 2 executors chrooted in {image} as uid {desired.SPARK_UID}, driver JVM from "
        f"the image's {pathlib.Path(archives[0]).name}; kill -9 of the driver → output "
        f"{resumed:.1f}s later, counts exact"
    )
