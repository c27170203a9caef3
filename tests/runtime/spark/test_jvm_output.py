"""The JVM's stderr reaches the user without the Python workers' per-query debugging lines."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from streamapp.runtime.spark import jvm_output


def test_forward_drops_worker_noise_and_keeps_everything_else() -> None:
    read_fd, write_fd = os.pipe()
    os.write(
        write_fd,
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"Starting Streaming TransformWithStateInPandas Python worker.\n\n"
        b"Streaming TransformWithStateInPandas Python worker Completed execution of UDF: <f>.\n\n"
        b"12:00:00.000 ERROR Executor: a real problem\n\nlast line without newline",
    )
    os.close(write_fd)
    out_r, out_w = os.pipe()
    jvm_output._forward(read_fd, out_w)
    os.close(out_w)
    with os.fdopen(out_r, "rb") as out:
        assert out.read() == b"12:00:00.000 ERROR Executor: a real problem\n\nlast line without newline"


def test_a_line_this_process_writes_while_the_jvm_launches_is_not_lost() -> None:
    """The CLI's one-line error for a broker it cannot reach came from another thread while Spark
    still started (on a loaded machine): it went into the pipe meant for the JVM, which nothing
    read yet, and the process exited with an empty stderr."""
    script = textwrap.dedent(
        """\
        import os, sys, threading, time
        from streamapp.runtime.spark import jvm_output

        def report():
            time.sleep(0.2)
            print("streamapp run: Kafka: unreachable", file=sys.stderr, flush=True)
            os._exit(1)

        threading.Thread(target=report).start()
        with jvm_output.filtered_jvm_stderr():
            time.sleep(30)  # the launch, slow
        """
    )
    proc = subprocess.run(
        [sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (proc.returncode, proc.stderr) == (1, "streamapp run: Kafka: unreachable\n")
