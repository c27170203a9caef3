"""The node agent does what a kubelet does for a Pod, checked on plain shell Pods (seconds, no JVM).

Every Pod is created with kubectl and read back from the API server: the environment resolved from
each ``valueFrom`` source, the volumes at their mount paths, the loopback Pod IP, readiness from a
probe, exit codes, restart counts under ``restartPolicy``, and deletion as SIGTERM then SIGKILL
after the grace period.
"""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Callable
from typing import Any

import cluster
import node_agent_proc
import operator_proc
import pytest
import yaml

pytestmark = pytest.mark.timeout(300)

NS = "agent-e2e"


def _pod(name: str, script: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"tier": "t1"}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sh", "-c", script],
                    **spec.pop("container", {}),
                }
            ],
            **spec,
        },
    }


def _get(kube: cluster.Cluster, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kube.kubectl("get", "pod", name, "-n", NS, "-o", "json"))
    return found


def _eventually(
    what: str, check: Callable[[], Any], agent: node_agent_proc.AgentProcess, timeout: float = 60
) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (cluster.ClusterError, KeyError, IndexError) as err:
            last = err
        time.sleep(0.3)
    pytest.fail(f"{what} within {timeout:.0f}s (last: {last})\nagent log:\n{agent.tail()}")


@pytest.fixture(scope="module")
def kube(
    agent_node: node_agent_proc.AgentProcess, streamapp_operator: operator_proc.Operator
) -> cluster.Cluster:
    k = streamapp_operator.kube
    k.kubectl("create", "namespace", NS)
    k.kubectl(
        "create",
        "configmap",
        "settings",
        "-n",
        NS,
        "--from-literal=greeting=hello",
        "--from-literal=mode=fast",
    )
    k.kubectl("create", "secret", "generic", "creds", "-n", NS, "--from-literal=password=s3cret")
    return k


def test_env_volumes_ip_and_readiness(
    kube: cluster.Cluster, agent_node: node_agent_proc.AgentProcess
) -> None:
    script = (
        'echo "$GREETING $PASSWORD $POD_NAME $POD_IP $MEM_MI $CPU_M $TIER $EXPANDED" > /scratch/env; '
        'echo "$(cat /etc/settings/mode) $(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)"'
        " > /scratch/files; "
        "sleep 8; touch /scratch/ready; sleep 300"
    )
    container = {
        "env": [
            {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}}},
            {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "TIER", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['tier']"}}},
            {
                "name": "MEM_MI",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
            },
            {
                "name": "CPU_M",
                "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}},
            },
            {"name": "EXPANDED", "value": "$(GREETING)-$(TIER)"},
        ],
        "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}},
        "volumeMounts": [
            {"name": "settings", "mountPath": "/etc/settings", "readOnly": True},
            {"name": "scratch", "mountPath": "/scratch"},
        ],
        "readinessProbe": {"exec": {"command": ["test", "-f", "/scratch/ready"]}, "periodSeconds": 1},
    }
    volumes = [{"name": "settings", "configMap": {"name": "settings"}}, {"name": "scratch", "emptyDir": {}}]
    kube.kubectl(
        "apply", "-f", "-", input=yaml.safe_dump(_pod("envy", script, container=container, volumes=volumes))
    )

    running = _eventually(
        "envy never ran", lambda: _get(kube, "envy")["status"].get("phase") == "Running", agent_node
    )
    assert running
    pod = _get(kube, "envy")
    ip = pod["status"]["podIP"]
    assert ip.startswith("127.") and ip != "127.0.0.1", ip
    assert pod["spec"]["nodeName"] == "agent-0"
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False", "Ready before the readiness probe passed"
    _eventually(
        "the readiness probe never made envy Ready",
        lambda: _get(kube, "envy")["status"]["containerStatuses"][0]["ready"],
        agent_node,
    )
    # The emptyDir the container wrote to at /scratch is the agent's folder for the volume.
    scratch = agent_node.dir / "pods" / NS / "envy" / "volumes" / "scratch"
    env = _eventually("no env written", lambda: _read(scratch / "env"), agent_node)
    assert env.split() == ["hello", "s3cret", "envy", ip, "64", "100", "t1", "hello-t1"]
    files = _eventually("no files read", lambda: _read(scratch / "files"), agent_node)
    assert files.split() == ["fast", NS]  # a ConfigMap key and the service-account namespace file

    # Deletion: sh, the main process, dies of the SIGTERM at once, long before the grace period.
    began = time.monotonic()
    kube.kubectl("delete", "pod", "envy", "-n", NS, "--grace-period=20", "--timeout=60s", timeout=70)
    assert time.monotonic() - began < 15


def _read(path: pathlib.Path) -> str | None:
    try:
        with open(path) as handle:
            return handle.read() or None
    except OSError:
        return None


def test_exit_codes_restarts_and_sigkill_after_grace(
    kube: cluster.Cluster, agent_node: node_agent_proc.AgentProcess
) -> None:
    kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(_pod("once", "exit 3", restartPolicy="Never")))

    def failed() -> dict[str, Any] | None:
        status = _get(kube, "once")["status"]
        return status if status.get("phase") == "Failed" else None

    status = _eventually("a Never Pod that exits 3 did not end Failed", failed, agent_node)
    state = status["containerStatuses"][0]["state"]["terminated"]
    assert (state["exitCode"], state["reason"]) == (3, "Error")

    kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(_pod("loop", "exit 4", restartPolicy="OnFailure")))

    def restarted() -> dict[str, Any] | None:
        found = _get(kube, "loop")["status"]["containerStatuses"][0]
        return found if found["restartCount"] >= 1 and "waiting" in found["state"] else None

    looping = _eventually(
        "an OnFailure Pod was not restarted with back-off", restarted, agent_node, timeout=90
    )
    assert looping["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert looping["lastState"]["terminated"]["exitCode"] == 4
    assert _get(kube, "loop")["status"]["phase"] == "Running"

    # A process that ignores SIGTERM is killed when the grace period ends.
    stubborn = _pod("stubborn", "trap '' TERM; while true; do sleep 1; done", terminationGracePeriodSeconds=3)
    kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(stubborn))
    _eventually(
        "stubborn never ran", lambda: _get(kube, "stubborn")["status"].get("phase") == "Running", agent_node
    )
    pid = agent_node.pid(NS, "stubborn", "main")
    began = time.monotonic()
    kube.kubectl("delete", "pod", "stubborn", "-n", NS, "--timeout=60s", timeout=70)
    took = time.monotonic() - began
    assert 3 <= took < 20, took
    assert not _alive(pid)
    kube.kubectl("delete", "pod", "once", "loop", "-n", NS, "--timeout=60s", timeout=70)


def test_a_failing_liveness_probe_restarts_the_container(
    kube: cluster.Cluster, agent_node: node_agent_proc.AgentProcess
) -> None:
    """The container stays alive for 3 s, then its liveness file goes: after two failed probes
    the agent stops it (SIGTERM) and, under restartPolicy Always, starts it again; the emptyDir
    outlives the restart, as a kubelet's does. A readiness-only Pod beside it is never restarted."""
    script = "date +%s%N >> /scratch/starts; touch /scratch/alive; sleep 3; rm /scratch/alive; sleep 300"
    container = {
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
        "livenessProbe": {
            "exec": {"command": ["test", "-f", "/scratch/alive"]},
            "periodSeconds": 1,
            "failureThreshold": 2,
        },
    }
    pod = _pod(
        "liveless",
        script,
        container=container,
        volumes=[{"name": "scratch", "emptyDir": {}}],
        terminationGracePeriodSeconds=2,
    )
    kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod))
    steady = {"volumeMounts": container["volumeMounts"], "readinessProbe": container["livenessProbe"]}
    kube.kubectl(
        "apply",
        "-f",
        "-",
        input=yaml.safe_dump(
            _pod("unprobed", script, container=steady, volumes=[{"name": "scratch", "emptyDir": {}}])
        ),
    )

    def restarted() -> dict[str, Any] | None:
        found = _get(kube, "liveless")["status"]["containerStatuses"][0]
        return found if found["restartCount"] >= 1 and "running" in found["state"] else None

    status = _eventually("a container failing its liveness probe was not restarted", restarted, agent_node)
    ended = status["lastState"]["terminated"]
    assert ended["exitCode"] == 143 and ended["message"] == "killed by SIGTERM", ended
    starts_file = agent_node.dir / "pods" / NS / "liveless" / "volumes" / "scratch" / "starts"

    def both_starts() -> list[str] | None:
        # "running" is reported once the process exists; its shell writes the line a moment later.
        lines = (_read(starts_file) or "").split()
        return lines if len(lines) >= 2 else None

    _eventually("the restarted run did not write to the first run's emptyDir", both_starts, agent_node, 10)
    assert "liveness probe failed 2 times" in agent_node.tail()
    # Readiness failures only take the Pod out of Ready; the container keeps running.
    unprobed = _get(kube, "unprobed")["status"]["containerStatuses"][0]
    assert unprobed["restartCount"] == 0, unprobed
    kube.kubectl("delete", "pod", "liveless", "unprobed", "-n", NS, "--timeout=60s", timeout=70)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_failed_node_stops_reporting_and_its_processes_die(
    kube: cluster.Cluster, agent_node: node_agent_proc.AgentProcess
) -> None:
    """SIGUSR1 to the agent: the machine is "lost". Last in the module: the Node stays failed."""
    kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(_pod("doomed", "sleep 300")))
    _eventually(
        "doomed never ran", lambda: _get(kube, "doomed")["status"].get("phase") == "Running", agent_node
    )
    pid = agent_node.pid(NS, "doomed", "main")

    def renewed() -> str:
        lease = json.loads(kube.kubectl("get", "lease", "agent-0", "-n", "kube-node-lease", "-o", "json"))
        return str(lease["spec"]["renewTime"])

    before = renewed()
    _eventually(
        "the Lease was not renewed while the node was healthy", lambda: renewed() != before, agent_node
    )
    agent_node.fail()
    _eventually("the failed node's process still runs", lambda: not _alive(pid), agent_node, timeout=20)
    frozen = renewed()
    time.sleep(12)  # more than two heartbeat periods
    assert renewed() == frozen, "a failed node kept renewing its Lease"
    assert _get(kube, "doomed")["status"]["phase"] == "Running"  # stale, as from any lost node
