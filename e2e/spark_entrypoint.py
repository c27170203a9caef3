"""The runtime image's ENTRYPOINT (Spark's ``/opt/entrypoint.sh``), restated for the node agent.

Why it exists: Spark's Kubernetes backend creates executor Pods whose container has no command,
only ``args: [executor]``, and relies on the image's entrypoint to turn the Pod's environment
(``SPARK_DRIVER_URL``, ``SPARK_EXECUTOR_*``, ``SPARK_JAVA_OPT_<n>``...) into a JVM command line.
The runtime image (images/runtime/Dockerfile) takes that entrypoint from Spark's own image. Until
the image is built and the agent runs containers from its filesystem, the agent runs this file
instead, in the project's environment (``SPARK_HOME`` = the pyspark installation). Only the
``executor`` mode is restated; any other arguments are executed as given (the entrypoint's
pass-through mode). Written from Spark's documented executor contract, not copied.
"""

from __future__ import annotations

import os
import re
import shutil
import sys

#: The main class Spark's Kubernetes executor Pods run (in the pyspark wheel's spark-kubernetes jar).
EXECUTOR_BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not found:
        sys.exit("spark_entrypoint: no java (set JAVA_HOME or put java on PATH)")
    return found


def executor_argv(env: dict[str, str]) -> list[str]:
    """The executor JVM's command line from the Pod's environment, as the image entrypoint forms it."""

    def need(name: str) -> str:
        value = env.get(name)
        if not value:
            sys.exit(f"spark_entrypoint: {name} is not set; an executor Pod always has it")
        return value

    # SPARK_JAVA_OPT_0, _1, ...: the driver's executor Java options, in their numeric order.
    numbered = sorted(
        (int(m[1]), value) for key, value in env.items() if (m := re.fullmatch(r"SPARK_JAVA_OPT_(\d+)", key))
    )
    spark_home = need("SPARK_HOME")
    classpath = [p for p in (env.get("SPARK_CLASSPATH"), os.path.join(spark_home, "jars", "*")) if p]
    memory = need("SPARK_EXECUTOR_MEMORY")
    return [
        _java(),
        *(value for _, value in numbered),
        f"-Xms{memory}",
        f"-Xmx{memory}",
        "-cp",
        ":".join(classpath),
        EXECUTOR_BACKEND,
        "--driver-url", need("SPARK_DRIVER_URL"),
        "--executor-id", need("SPARK_EXECUTOR_ID"),
        "--cores", need("SPARK_EXECUTOR_CORES"),
        "--app-id", need("SPARK_APPLICATION_ID"),
        "--hostname", need("SPARK_EXECUTOR_POD_IP"),
        "--resourceProfileId", env.get("SPARK_RESOURCE_PROFILE_ID", "0"),
        "--podName", need("SPARK_EXECUTOR_POD_NAME"),
    ]  # fmt: skip


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit("spark_entrypoint: no arguments (expected `executor` or a command)")
    # Anything but `executor` is executed as given: the image entrypoint's pass-through mode.
    command = executor_argv(dict(os.environ)) if argv[0] == "executor" else argv
    print(f"spark_entrypoint: exec {' '.join(command)}", file=sys.stderr, flush=True)
    os.execvp(command[0], command)  # same pid: the agent's SIGTERM/SIGKILL reach the JVM itself


if __name__ == "__main__":
    main(sys.argv[1:])
