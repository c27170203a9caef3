"""The rendered objects, pinned as YAML goldens (``STREAMAPP_UPDATE_GOLDEN=1`` rewrites them)."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest
import yaml

from streamapp.operator import desired, validation
from streamapp.runtime.manifest import models

GOLDEN = pathlib.Path(__file__).with_name("golden")


def _app(ref: desired.AppRef, spec: dict[str, Any]) -> models.StreamApp:
    return validation.parse(name=ref.name, namespace=ref.namespace, spec=spec)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the mounted files) as literal blocks, so a golden diff reads like the file."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _check(name: str, objects: list[dict[str, Any]]) -> None:
    text = yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False)
    path = GOLDEN / name
    if os.environ.get("STREAMAPP_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with STREAMAPP_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path} differs: review, then STREAMAPP_UPDATE_GOLDEN=1"


def test_wordcount_objects(ref: desired.AppRef, spec: dict[str, Any]) -> None:
    wanted = desired.render(ref=ref, app=_app(ref, spec), executors=3)
    _check("wordcount.yaml", wanted.objects())


def test_custom_service_account_resources_and_reset(ref: desired.AppRef, spec: dict[str, Any]) -> None:
    spec["deployment"].update(
        serviceAccountName="spark-apps",
        imagePullPolicy="Always",
        resources={
            "driver": {"cpu": "500m", "cpuLimit": "2", "memory": "2g", "memoryOverhead": "512m"},
            "executor": {"cpu": "1500m", "cpuLimit": "2", "memory": "4g", "memoryOverhead": "1g"},
        },
        reset={"id": "r2", "to": "timestamp", "timestamp": "2026-03-01T00:00:00Z"},
    )
    spec["sparkConf"] = {"spark.sql.shuffle.partitions": "8"}
    wanted = desired.render(ref=ref, app=_app(ref, spec), executors=2)
    _check("custom.yaml", wanted.objects())


def test_kafka_credentials_reach_the_driver_from_secrets(ref: desired.AppRef, spec: dict[str, Any]) -> None:
    spec["kafka"].update(
        bootstrapServers="kafka-0.kafka:9093",
        tls={
            "ca": {"name": "kafka-cluster-ca", "key": "ca.crt"},
            "certificate": {"name": "wordcount-tls", "key": "tls.crt"},
            "privateKey": {"name": "wordcount-tls", "key": "tls.key"},
        },
        sasl={
            "mechanism": "SCRAM-SHA-512",
            "username": {"name": "wordcount-user", "key": "username"},
            "password": {"name": "wordcount-user", "key": "password"},
        },
    )
    wanted = desired.render(ref=ref, app=_app(ref, spec), executors=2)
    _check("secure.yaml", wanted.objects())
    assert wanted.driver is not None
    env = wanted.driver["spec"]["containers"][0]["env"]
    assert [e for e in env if "secretKeyRef" in e.get("valueFrom", {})] == [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
        for name, secret, key in [
            ("STREAMAPP_KAFKA_TLS_CA", "kafka-cluster-ca", "ca.crt"),
            ("STREAMAPP_KAFKA_TLS_CERTIFICATE", "wordcount-tls", "tls.crt"),
            ("STREAMAPP_KAFKA_TLS_PRIVATE_KEY", "wordcount-tls", "tls.key"),
            ("STREAMAPP_KAFKA_SASL_USERNAME", "wordcount-user", "username"),
            ("STREAMAPP_KAFKA_SASL_PASSWORD", "wordcount-user", "password"),
        ]
    ]
    # Only references travel: the mounted files and the Spark conf name Secrets, never contents.
    config = next(o for o in wanted.support if o["kind"] == "ConfigMap")
    assert "STREAMAPP_KAFKA" not in str(config) and "kafka." not in config["data"]["spark-defaults.conf"]


def test_plaintext_apps_get_no_secret_variables(ref: desired.AppRef, spec: dict[str, Any]) -> None:
    wanted = desired.render(ref=ref, app=_app(ref, spec), executors=1)
    assert wanted.driver is not None
    assert not [
        e for e in wanted.driver["spec"]["containers"][0]["env"] if e["name"].startswith("STREAMAPP_KAFKA_")
    ]


def test_every_object_is_owned_by_the_app(ref: desired.AppRef, spec: dict[str, Any]) -> None:
    for obj in desired.render(ref=ref, app=_app(ref, spec), executors=1).objects():
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("StreamApp", ref.uid, True)
        assert obj["metadata"]["labels"][desired.APP_LABEL] == ref.name


def test_driver_command_and_spark_settings(ref: desired.AppRef, spec: dict[str, Any]) -> None:
    wanted = desired.render(ref=ref, app=_app(ref, spec), executors=3)
    assert wanted.driver is not None
    container = wanted.driver["spec"]["containers"][0]
    assert container["command"] == [
        "python", "-m", "streamapp.runtime.cli", "driver", "--manifest", "/etc/streamapp/app.yaml",
    ]  # fmt: skip
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["STREAMAPP_SPARK_MASTER"] == "k8s://https://kubernetes.default.svc"
    assert env["STREAMAPP_DRIVER_POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    config = next(o for o in wanted.support if o["kind"] == "ConfigMap")
    conf = dict(line.split(" ", 1) for line in config["data"]["spark-defaults.conf"].splitlines())
    assert conf["spark.executor.instances"] == "3"
    assert conf["spark.kubernetes.namespace"] == "apps"
    # The Pod's own IP and name, from its environment: two drivers of one app run side by side
    # during a rolling hand-over, each with its own executors (<app>-exec-N, <app>-b-exec-N).
    assert conf["spark.driver.host"] == "${env:STREAMAPP_DRIVER_POD_IP}"
    assert env["STREAMAPP_DRIVER_POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert conf["spark.kubernetes.driver.pod.name"] == "${env:STREAMAPP_DRIVER_POD_NAME}"
    assert conf["spark.kubernetes.executor.podNamePrefix"] == "${env:STREAMAPP_EXECUTOR_PREFIX}"
    assert env["STREAMAPP_EXECUTOR_PREFIX"] == "wordcount"
    other = desired.render(ref=ref, app=_app(ref, spec), executors=3, slot=1)
    assert other.driver is not None and other.revision == wanted.revision
    assert other.driver["metadata"]["name"] == "wordcount-driver-b"
    other_env = {e["name"]: e.get("value") for e in other.driver["spec"]["containers"][0]["env"]}
    assert other_env["STREAMAPP_EXECUTOR_PREFIX"] == "wordcount-b"
    assert conf["spark.kubernetes.container.image"] == container["image"]
    # The mounted manifest is the user's spec exactly, and loads in the runtime as written.
    assert yaml.safe_load(config["data"]["app.yaml"])["spec"]["topology"] == spec["topology"]


def test_suspend_keeps_everything_but_the_driver(ref: desired.AppRef, spec: dict[str, Any]) -> None:
    running = desired.render(ref=ref, app=_app(ref, spec), executors=1)
    spec["deployment"]["suspend"] = True
    suspended = desired.render(ref=ref, app=_app(ref, spec), executors=1)
    assert suspended.driver is None
    assert suspended.support == running.support
    assert suspended.revision == running.revision  # resuming restarts the same revision


@pytest.mark.parametrize(
    ("change", "restarts"),
    [
        (lambda s: s["deployment"]["executors"].update(max=9), False),  # bounds alone: same count
        (lambda s: s["deployment"].update(image="registry.example/streamapp-runtime:1.2.4"), True),
        (lambda s: s["topology"]["streams"][0]["steps"][1].update(filter="length(value) > 1"), True),
        (lambda s: s["deployment"].update(reset={"id": "r1", "to": "earliest"}), True),
        (lambda s: s.update(sparkConf={"spark.sql.shuffle.partitions": "4"}), True),
    ],
)
def test_revision_changes_only_when_the_driver_must_restart(
    ref: desired.AppRef, spec: dict[str, Any], change: Any, restarts: bool
) -> None:
    before = desired.render(ref=ref, app=_app(ref, spec), executors=2).revision
    change(spec)
    after = desired.render(ref=ref, app=_app(ref, spec), executors=2).revision
    assert (before != after) is restarts


def test_rescale_is_a_new_revision(ref: desired.AppRef, spec: dict[str, Any]) -> None:
    app = _app(ref, spec)
    assert (
        desired.render(ref=ref, app=app, executors=2).revision
        != desired.render(ref=ref, app=app, executors=3).revision
    )


def test_reset_reads_from_a_fresh_checkpoint(ref: desired.AppRef, spec: dict[str, Any]) -> None:
    spec["deployment"]["reset"] = {"id": "r7", "to": "earliest"}
    wanted = desired.render(ref=ref, app=_app(ref, spec), executors=1)
    assert wanted.driver is not None
    env = {e["name"]: e.get("value") for e in wanted.driver["spec"]["containers"][0]["env"]}
    assert env["STREAMAPP_CHECKPOINT"] == "s3a://checkpoints/wordcount/resets/r7"
    assert env["STREAMAPP_STARTING_OFFSETS"] == "earliest"


@pytest.mark.parametrize(("size", "mib"), [("512m", 512), ("2g", 2048), ("1024", 1024), ("1t", 1048576)])
def test_spark_sizes(size: str, mib: int) -> None:
    assert desired.mebibytes(size) == mib
