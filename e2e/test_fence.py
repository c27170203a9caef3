"""The driver's fence (streamapp.runtime.lease) on the real API server.

A Lease per app, held by the one driver that may run its query: a second driver waits while the
first holds it, takes over at once when it is released and only after ``leaseDurationSeconds``
without renewal when its holder went silent; a driver that cannot renew stops writing. The last
test runs two real drivers (the in-cluster entrypoint, ``streamapp driver``) on one checkpoint:
the second never commits a batch while the first runs, and takes over the moment the first
stops cleanly. The drivers authenticate with a service-account token, as in a Pod.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import cluster
import pytest
import yaml

from streamapp.runtime import apiserver, lease
from streamapp.runtime.kafka import admin

pytestmark = pytest.mark.timeout(420)

NS = "fence"


@pytest.fixture(scope="module")
def account(kube_cluster: cluster.Cluster, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A service account allowed what the operator grants a driver on Leases; its token, the
    cluster's CA and the namespace in a folder laid out like a Pod's serviceaccount mount."""
    kube = kube_cluster
    kube.kubectl("create", "namespace", NS)
    kube.kubectl("create", "serviceaccount", "driver", "-n", NS)
    kube.kubectl("create", "serviceaccount", "nobody", "-n", NS)
    leases = "--resource=leases.coordination.k8s.io"
    kube.kubectl("create", "role", "driver", "-n", NS, "--verb=create,get,update", leases)
    kube.kubectl(
        "create", "rolebinding", "driver", "-n", NS, "--role=driver", f"--serviceaccount={NS}:driver"
    )
    folder = tmp_path_factory.mktemp("serviceaccount")
    for who in ("driver", "nobody"):
        (folder / who).mkdir()
        (folder / who / "token").write_text(kube.kubectl("create", "token", who, "-n", NS).strip())
        (folder / who / "ca.crt").write_bytes((kube.pki / "ca.crt").read_bytes())
        (folder / who / "namespace").write_text(NS)
    return folder


def _env(
    kube: cluster.Cluster, account: pathlib.Path, pod: str, name: str, who: str = "driver"
) -> dict[str, str]:
    port = kube.server.rsplit(":", 1)[1]
    return {
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": port,
        "STREAMAPP_SERVICEACCOUNT_DIR": str(account / who),
        "STREAMAPP_LEASE": name,
        "STREAMAPP_DRIVER_POD_NAME": pod,
        "STREAMAPP_LEASE_SECONDS": "3",
    }


def _holder(kube: cluster.Cluster, name: str) -> str:
    found = json.loads(kube.kubectl("get", "lease", name, "-n", NS, "-o", "json"))
    return str(found["spec"].get("holderIdentity") or "")


def test_one_holder_at_a_time_release_hands_over_at_once_silence_after_the_duration(
    kube_cluster: cluster.Cluster, account: pathlib.Path
) -> None:
    kube = kube_cluster
    a, b, c = (lease.from_env(_env(kube, account, pod, "app-one")) for pod in ("a", "b", "c"))
    assert a is not None and b is not None and c is not None
    assert a.acquire(timeout=10) < 2.0
    changes: list[tuple[float, str]] = []
    a.on_change(lambda: changes.append(a.writable_for()))
    a.start_renewing()
    assert _holder(kube, "app-one") == a.identity and a.identity.startswith("a/")
    with pytest.raises(apiserver.LeaseError, match=r"still held by a/"):
        b.acquire(timeout=4, poll=0.2)  # longer than the duration: a renews, so it never expires
    a.check(7)
    with pytest.raises(lease.Fenced, match=r"micro-batch 7 not written: .* never acquired"):
        b.check(7)

    # What a gate in the JVM is told after each renewal: 2/3 of the 3 s duration from then.
    renewals = [seconds for seconds, reason in changes if "not renewed for 2.0 s" in reason]
    assert renewals and all(1.5 < s <= 2.0 for s in renewals), changes
    a.release()
    assert changes[-1][0] == 0.0, changes  # released: no more writes
    assert _holder(kube, "app-one") == ""
    assert b.acquire(timeout=10, poll=0.2) < 1.0  # released: taken at once
    with pytest.raises(lease.Fenced, match="not renewed"):
        time.sleep(2.2)  # b does not renew: after 2/3 of the duration it stops writing by itself
        b.check(8)

    # b went silent without releasing (a kill -9, a lost node): c waits out the duration as it
    # sees it, then takes over.
    waited = c.acquire(timeout=20, poll=0.2)
    assert 2.5 <= waited < 8.0, waited
    assert _holder(kube, "app-one") == c.identity
    c.release()


def test_a_released_driver_waits_until_the_driver_taking_over_keeps_up(
    kube_cluster: cluster.Cluster, account: pathlib.Path
) -> None:
    # A rolling hand-over: the old driver releases the Lease and keeps its Spark idle until the
    # new one says on the Lease that its query keeps up (the shutdown's CPU would slow its first
    # micro-batch); bounded, and not at all when no driver waits to take over.
    old, new = (lease.from_env(_env(kube_cluster, account, pod, "app-three")) for pod in ("old", "new"))
    assert old is not None and new is not None
    old.acquire(timeout=10)
    old.start_renewing()
    taking = threading.Thread(target=new.acquire, kwargs={"timeout": 30, "poll": 0.1})
    taking.start()
    _wait_for(
        lambda: _annotations(kube_cluster, "app-three").get(lease.STANDBY_ANNOTATION) == new.identity,
        10,
        lambda: str(_annotations(kube_cluster, "app-three")),
    )
    assert old.release()
    taking.join(10)
    assert _holder(kube_cluster, "app-three") == new.identity
    assert old.await_successor(timeout=0.5) == (new.identity, None)  # not said yet: waits it out
    result: list[tuple[str | None, float | None]] = []
    waiting = threading.Thread(target=lambda: result.append(old.await_successor(timeout=10, poll=0.1)))
    waiting.start()
    time.sleep(1.0)
    assert waiting.is_alive()
    new.start_renewing()
    assert new.mark_keeping_up()
    waiting.join(5)
    assert result and result[0][0] == new.identity, result
    assert result[0][1] is not None and 1.0 <= result[0][1] < 3.0, result
    new.check(1)  # noting it took nothing from the holder
    assert new.release()
    assert new.await_successor(timeout=10) == (None, None)  # nobody waits: at once


def _annotations(kube: cluster.Cluster, name: str) -> dict[str, str]:
    found = json.loads(kube.kubectl("get", "lease", name, "-n", NS, "-o", "json"))
    return dict(found["metadata"].get("annotations") or {})


def test_a_driver_without_the_right_to_leases_is_refused_with_the_reason(
    kube_cluster: cluster.Cluster, account: pathlib.Path
) -> None:
    nobody = lease.from_env(_env(kube_cluster, account, "x", "app-two", who="nobody"))
    assert nobody is not None
    with pytest.raises(apiserver.LeaseError, match=r"HTTP 403 .*leases"):
        nobody.acquire(timeout=5)


@contextlib.contextmanager
def _driver(argv: list[str], env: dict[str, str], log: pathlib.Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def _wait_for(what: Callable[[], bool], timeout: float, why: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, why()
        time.sleep(0.2)


def test_a_second_driver_on_the_same_checkpoint_commits_no_batch_until_the_first_stops(
    kube_cluster: cluster.Cluster,
    account: pathlib.Path,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    tmp_path: pathlib.Path,
    streamapp_report: Callable[[str], None],
) -> None:
    source, sink = new_topic(1), new_topic(1)
    app: dict[str, Any] = {
        "apiVersion": "streamapp.io/v1alpha1",
        "kind": "StreamApp",
        "metadata": {"name": "fenced"},
        "spec": {
            "kafka": {"bootstrapServers": kafka_bootstrap},
            "processingGuarantee": "exactly_once_v2",
            "topology": {
                "defaults": {"keySerde": "string", "valueSerde": "string"},
                "streams": [
                    {
                        "from": {"topic": source},
                        "steps": [{"mapValues": "upper(value)"}, {"to": {"topic": sink}}],
                    }
                ],
            },
        },
    }
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(app))
    base = {
        **os.environ,
        "PYTHONSAFEPATH": "1",
        "STREAMAPP_SPARK_MASTER": "local[2]",
        "STREAMAPP_CHECKPOINT": str(tmp_path / "checkpoint"),
        "STREAMAPP_NAMESPACE": NS,
    }
    argv = [sys.executable, "-m", "streamapp.runtime.cli", "driver", "--manifest", str(path)]
    env_one = {**base, **_env(kube_cluster, account, "fenced-driver-1", "fenced-driver")}
    env_two = {**base, **_env(kube_cluster, account, "fenced-driver-2", "fenced-driver")}
    env_one["STREAMAPP_LEASE_SECONDS"] = env_two["STREAMAPP_LEASE_SECONDS"] = "15"
    log_one, log_two = tmp_path / "driver-1.log", tmp_path / "driver-2.log"

    def outputs() -> collections.Counter[bytes]:
        return collections.Counter(
            r.value or b"" for r in admin.consume(kafka_bootstrap, sink, idle=0.5, timeout=30)
        )

    with _driver(argv, env_one, log_one) as one:
        admin.produce(kafka_bootstrap, source, [admin.Record(None, b"first")])
        _wait_for(lambda: outputs() == {b"FIRST": 1}, 180, lambda: log_one.read_text()[-3000:])
        with _driver(argv, env_two, log_two) as two:
            _wait_for(
                lambda: "waiting for Lease" in log_two.read_text(), 180, lambda: log_two.read_text()[-3000:]
            )
            for word in (b"second", b"third"):
                admin.produce(kafka_bootstrap, source, [admin.Record(None, word)])
            _wait_for(
                lambda: outputs() == {b"FIRST": 1, b"SECOND": 1, b"THIRD": 1},
                60,
                lambda: log_one.read_text()[-3000:],
            )
            assert two.poll() is None and "running 'fenced'" not in log_two.read_text()
            assert "first micro-batch" not in log_two.read_text()

            stopped = time.monotonic()
            one.send_signal(signal.SIGTERM)
            assert one.wait(60) == 0, log_one.read_text()[-3000:]
            assert "released Lease" in log_one.read_text(), log_one.read_text()[-3000:]
            # The first kept its Spark up until the second said it keeps up (no input: its query
            # found none), then shut down.
            assert "fenced-driver-2/" in log_one.read_text() and " keeps up " in log_one.read_text(), (
                log_one.read_text()[-3000:]
            )
            _wait_for(lambda: "holding Lease" in log_two.read_text(), 30, lambda: log_two.read_text()[-3000:])
            handed = time.monotonic() - stopped
            admin.produce(kafka_bootstrap, source, [admin.Record(None, b"fourth")])
            _wait_for(
                lambda: outputs() == {b"FIRST": 1, b"SECOND": 1, b"THIRD": 1, b"FOURTH": 1},
                180,
                lambda: log_two.read_text()[-3000:],
            )
            resumed = time.monotonic() - stopped
    streamapp_report(
        f"fence: a second driver on the same checkpoint waited and wrote nothing; after the first "
        f"stopped (SIGTERM) it held the Lease in {handed:.1f} s and wrote in {resumed:.1f} s"
    )
