#!/bin/bash
# The runtime image's entrypoint. Executor pods, which Spark's Kubernetes backend creates from the
# driver, are started with the single argument "executor", their JVM options in SPARK_JAVA_OPT_<n>
# and their settings in SPARK_EXECUTOR_* / SPARK_DRIVER_URL; anything else (the driver Pod's own
# command, a shell) runs as is. tini reaps the Python workers Spark forks.
set -euo pipefail
if [ "${1:-}" = "executor" ]; then
  shift
  mapfile -t java_opts < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
  exec /usr/bin/tini -s -- "$JAVA_HOME/bin/java" "${java_opts[@]}" \
    -Xms"${SPARK_EXECUTOR_MEMORY:-1g}" -Xmx"${SPARK_EXECUTOR_MEMORY:-1g}" \
    -cp "$SPARK_HOME/jars/*${SPARK_EXTRA_CLASSPATH:+:$SPARK_EXTRA_CLASSPATH}" \
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "$SPARK_DRIVER_URL" \
    --executor-id "$SPARK_EXECUTOR_ID" \
    --cores "${SPARK_EXECUTOR_CORES:-1}" \
    --app-id "$SPARK_APPLICATION_ID" \
    --hostname "${SPARK_EXECUTOR_POD_IP:-$(hostname -i)}" \
    --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
    --podName "${SPARK_EXECUTOR_POD_NAME:-$(hostname)}" \
    "$@"
fi
exec /usr/bin/tini -s -- "$@"
