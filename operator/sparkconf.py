"""The Spark settings that make the driver Pod a Spark-on-Kubernetes driver (client mode).

They go to ``spark-defaults.conf`` beside the manifest, the lowest layer of Spark's configuration:
the runtime's own settings and the user's ``spec.sparkConf`` apply on top, except the keys the
operator owns (:data:`validation.RESERVED_SPARK_CONF`), which validation rejects in the spec. The
master is not here but in ``STREAMAPP_SPARK_MASTER``, so one variable switches the same Pod
command to ``local[*]``.
"""

from __future__ import annotations

from streamapp.runtime.manifest import deployment

__all__ = ["BLOCK_MANAGER_PORT", "DEFAULT_MEMORY", "DRIVER_PORT", "MASTER", "driver_conf"]

MASTER = "k8s://https://kubernetes.default.svc"
DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079
DEFAULT_MEMORY = "1g"


def driver_conf(
    *,
    app: str,
    namespace: str,
    image: str,
    pull_policy: str | None,
    plan: deployment.Deployment,
    executors: int,
) -> dict[str, str]:
    """``spark.*`` settings of the driver: where executors run, how many, how big, how they call back."""
    executor = plan.resources.executor
    conf = {
        "spark.submit.deployMode": "client",
        "spark.app.name": app,
        "spark.kubernetes.namespace": namespace,
        "spark.kubernetes.container.image": image,
        # Executor pods are owned by this Pod (garbage-collected with it) and named after the app
        # (<app>-exec-<id>; the second driver of a rolling hand-over's <app>-b-exec-<id>): from the
        # Pod's environment, as two drivers of one app run side by side during a hand-over.
        "spark.kubernetes.driver.pod.name": "${env:STREAMAPP_DRIVER_POD_NAME}",
        "spark.kubernetes.executor.podNamePrefix": "${env:STREAMAPP_EXECUTOR_PREFIX}",
        "spark.kubernetes.executor.label.streamapp.io/app": app,
        "spark.kubernetes.executor.label.app.kubernetes.io/managed-by": "streamapp-operator",
        # Executors call back the Pod's own IP, not a Service both drivers of a hand-over match.
        "spark.driver.host": "${env:STREAMAPP_DRIVER_POD_IP}",
        # The Pod IP (Spark resolves ${env:...} when it reads the setting), as Spark's own image binds
        # its driver: not every interface, so that drivers sharing a host never share a port.
        "spark.driver.bindAddress": "${env:STREAMAPP_DRIVER_POD_IP}",
        "spark.driver.port": str(DRIVER_PORT),
        "spark.driver.blockManager.port": str(BLOCK_MANAGER_PORT),
        "spark.driver.memory": plan.resources.driver.memory or DEFAULT_MEMORY,
        "spark.executor.instances": str(executors),
        "spark.executor.cores": str(plan.executors.cores_per_executor),
        "spark.executor.memory": executor.memory or DEFAULT_MEMORY,
        "spark.kubernetes.executor.request.cores": executor.cpu or str(plan.executors.cores_per_executor),
        "spark.dynamicAllocation.enabled": "false",
        # A failed executor Pod stays (owned by the driver Pod, gone with it): the operator reports
        # its exit code as Degraded, and `kubectl logs` can still read why it failed. Spark's
        # spark.executor.maxNumFailures bounds how many a crash loop leaves.
        "spark.kubernetes.executor.deleteOnTermination": "false",
    }
    if pull_policy:
        conf["spark.kubernetes.container.image.pullPolicy"] = pull_policy
    if executor.cpu_limit:
        conf["spark.kubernetes.executor.limit.cores"] = executor.cpu_limit
    if executor.memory_overhead:
        conf["spark.executor.memoryOverhead"] = executor.memory_overhead
    return conf
